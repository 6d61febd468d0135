"""The NVML inventory: real no-driver path, and a fake NVML standing in for a 2-GPU machine."""

from __future__ import annotations

import sys
import types

import pytest

from course_utils import gpus
from course_utils.gpus import GpuInfo, GpuProcess, Inventory, nvml_inventory, smi_table

GIB = 2**30


class FakeNVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(FakeNVMLError):
    pass


class NVMLError_DriverNotLoaded(FakeNVMLError):
    pass


def fake_pynvml(init_error: Exception | None = None) -> types.ModuleType:
    """A stand-in for pynvml describing two GPUs, the second one busy."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = FakeNVMLError
    mod.shutdowns = 0

    def init():
        if init_error is not None:
            raise init_error

    def shutdown():
        mod.shutdowns += 1

    def memory(h):
        return types.SimpleNamespace(total=16 * GIB, used=(h + 1) * GIB, free=(15 - h) * GIB)

    def compute_procs(h):
        return [types.SimpleNamespace(pid=4242, usedGpuMemory=GIB)] if h == 1 else []

    def utilization(h):
        if h == 0:
            raise FakeNVMLError("NotSupported")
        return types.SimpleNamespace(gpu=87)

    mod.nvmlInit = init
    mod.nvmlShutdown = shutdown
    mod.nvmlSystemGetDriverVersion = lambda: b"580.65"
    mod.nvmlDeviceGetCount = lambda: 2
    mod.nvmlDeviceGetHandleByIndex = lambda i: i
    mod.nvmlDeviceGetName = lambda h: f"Tesla T{h}"
    mod.nvmlDeviceGetUUID = lambda h: f"GPU-0000000{h}-aaaa-bbbb-cccc-dddddddddddd"
    mod.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=f"00000000:0{h + 1}:00.0")
    mod.nvmlDeviceGetMemoryInfo = memory
    mod.nvmlDeviceGetUtilizationRates = utilization
    mod.nvmlDeviceGetComputeRunningProcesses = compute_procs
    mod.nvmlDeviceGetGraphicsRunningProcesses = lambda h: []
    mod.nvmlSystemGetProcessName = lambda pid: b"python train.py"
    return mod


def test_no_driver_gives_empty_inventory_with_reason():
    """This machine (and CI) has no NVIDIA driver: the real pynvml path must not raise."""
    inv = nvml_inventory()
    if inv.gpus:
        pytest.skip("this machine has NVIDIA GPUs")
    assert len(inv) == 0
    assert "NVML library not found" in inv.reason
    assert smi_table(inv).startswith("No GPU to list. NVML library not found")


def test_missing_package_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    inv = nvml_inventory()
    assert inv.gpus == ()
    assert "pip install nvidia-ml-py" in inv.reason


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NVMLError_LibraryNotFound(), "no NVIDIA driver"),
        (NVMLError_DriverNotLoaded(), "installed but not loaded"),
        (FakeNVMLError("Unknown Error"), "NVML could not start: FakeNVMLError: Unknown Error"),
    ],
)
def test_init_errors_are_explained(monkeypatch, error, expected):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=error))
    inv = nvml_inventory()
    assert inv.gpus == ()
    assert expected in inv.reason


def test_inventory_reads_every_gpu(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.reason is None and inv.driver_version == "580.65" and inv.source == "nvml"
    first, second = inv.gpus
    assert first == GpuInfo(
        index=0,
        name="Tesla T0",
        uuid="GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",
        pci_bus_id="00000000:01:00.0",
        memory_total=16 * GIB,
        memory_used=GIB,
        utilization=None,  # NotSupported is reported as unknown, not as an error
        processes=(),
    )
    assert second.memory_free == 14 * GIB
    assert second.utilization == 87
    assert second.processes == (GpuProcess(4242, "python train.py", GIB),)
    assert fake.shutdowns == 1


def test_smi_table_lists_gpus_and_processes(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    table = smi_table(nvml_inventory())
    lines = table.splitlines()
    assert lines[0] == "NVML   driver 580.65"
    assert "Tesla T0" in lines[3] and "1024MiB / 16384MiB" in lines[3] and "n/a" in lines[3]
    assert "Tesla T1" in lines[4] and "2048MiB / 16384MiB" in lines[4] and "87%" in lines[4]
    assert "GPU 1  pid    4242  python train.py" in table
    assert table.rstrip().endswith("1024MiB")


def test_smi_table_labels_a_demo_and_says_when_there_are_no_processes():
    inv = Inventory(gpus=(GpuInfo(0, "Demo", "GPU-x", "0:1", 8 * GIB, 0),), source="demo")
    table = smi_table(inv)
    assert table.startswith("DEMO FLEET (made up, not this machine)")
    assert table.endswith("Processes:\n  none")


def test_explain_unknown_error_keeps_its_message():
    assert gpus.explain_nvml_error(ValueError("boom")) == "NVML could not start: ValueError: boom"
