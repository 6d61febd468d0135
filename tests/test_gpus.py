"""The NVML inventory: real no-driver path, and a fake NVML standing in for a 2-GPU machine."""

from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest
import torch
from fake_libcuda import LIBCUDA, FakeLibcuda, fake_maps

from course_utils import gpus
from course_utils.gpus import GpuInfo, GpuProcess, Inventory, cuda_driver_started, nvml_inventory, smi_table

GIB = 2**30


class FakeNVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(FakeNVMLError):
    pass


class NVMLError_DriverNotLoaded(FakeNVMLError):
    pass


class NVMLError_GpuIsLost(FakeNVMLError):
    def __str__(self) -> str:
        return "GPU is lost"


class NVMLError_NoPermission(FakeNVMLError):
    def __str__(self) -> str:
        return "Insufficient Permissions"


class NVMLError_NotSupported(FakeNVMLError):
    def __str__(self) -> str:
        return "Not Supported"


class NVMLLibraryMismatchError(Exception):
    """As in nvidia-ml-py 12+: raised for a function the driver lacks, and NOT an NVMLError."""


def fake_pynvml(init_error: Exception | None = None, fail: dict | None = None) -> types.ModuleType:
    """A stand-in for pynvml describing two GPUs, the second one busy.

    `fail` maps a function name to the error it raises: `{"nvmlDeviceGetCount": err}` always,
    `{"nvmlDeviceGetMemoryInfo": {1: err}}` only for GPU 1 (handles are the GPU indices).
    """
    mod = types.ModuleType("pynvml")
    mod.NVMLError = FakeNVMLError
    mod.NVMLLibraryMismatchError = NVMLLibraryMismatchError
    mod.shutdowns = 0
    fail = fail or {}

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

    functions = {
        "nvmlShutdown": shutdown,
        "nvmlSystemGetDriverVersion": lambda: b"580.65",
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: f"Tesla T{h}",
        "nvmlDeviceGetUUID": lambda h: f"GPU-0000000{h}-aaaa-bbbb-cccc-dddddddddddd",
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=f"00000000:0{h + 1}:00.0"),
        "nvmlDeviceGetMemoryInfo": memory,
        "nvmlDeviceGetUtilizationRates": utilization,
        "nvmlDeviceGetComputeRunningProcesses": compute_procs,
        "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [],
        "nvmlSystemGetProcessName": lambda pid: b"python train.py",
    }

    def failing(name, real):
        how = fail[name]

        def call(*args):
            error = how.get(args[0]) if isinstance(how, dict) else how
            if error is not None:
                raise error
            return real(*args)

        return call

    mod.nvmlInit = init
    for name, real in functions.items():
        setattr(mod, name, failing(name, real) if name in fail else real)
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


# --- NVML errors after nvmlInit: nothing escapes, the inventory says what is unknown and why ---


def test_a_lost_gpu_stays_listed_as_unknown_with_a_note(monkeypatch):
    fake = fake_pynvml(fail={"nvmlDeviceGetHandleByIndex": {1: NVMLError_GpuIsLost()}})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.reason is None and len(inv) == 2 and inv.gpus[0].name == "Tesla T0"
    lost = inv.gpus[1]
    assert (lost.index, lost.name, lost.uuid, lost.pci_bus_id) == (1, "unknown", "unknown", "unknown")
    assert lost.memory_total is None and lost.memory_free is None and lost.processes is None
    assert len(lost.notes) == 1 and "NVML could not open GPU 1: a GPU is lost" in lost.notes[0]
    table = smi_table(inv)
    assert "  1  unknown" in table and "? / ?" in table
    assert "GPU 1  unknown (NVML could not list them" in table
    assert "Notes:\n  GPU 1: everything unknown: NVML could not open GPU 1: a GPU is lost" in table
    assert fake.shutdowns == 1


@pytest.mark.parametrize(
    ("function", "field", "expected"),
    [
        ("nvmlDeviceGetName", "name", "unknown"),
        ("nvmlDeviceGetUUID", "uuid", "unknown"),
        ("nvmlDeviceGetPciInfo", "pci_bus_id", "unknown"),
        ("nvmlDeviceGetMemoryInfo", "memory_used", None),
    ],
)
def test_a_field_nvml_refuses_is_unknown_and_noted(monkeypatch, function, field, expected):
    fake = fake_pynvml(fail={function: {0: NVMLError_NoPermission()}})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    first, second = inv.gpus
    assert getattr(first, field) == expected
    assert any("NVML refused access (no permission)" in note for note in first.notes)
    assert second.notes == () and second.name == "Tesla T1"  # the other GPU is untouched
    assert "Notes:" in smi_table(inv)


def test_unknown_memory_shows_as_unknown_and_is_never_chosen(monkeypatch):
    from course_utils.visible_devices import choose_by_free_memory, mapping_lines

    fake = fake_pynvml(fail={"nvmlDeviceGetMemoryInfo": {0: NVMLError_GpuIsLost()}})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.gpus[0].memory_free is None and inv.gpus[1].memory_free == 14 * GIB
    assert "? / ?" in smi_table(inv).splitlines()[3]
    assert choose_by_free_memory(inv, 1) == [1]  # GPU 0 has more free memory in truth, but unknown
    with pytest.raises(ValueError, match=r"1 of them with known free memory \(not GPUs \[0\]\)"):
        choose_by_free_memory(inv, 2)
    assert "free memory unknown" in mapping_lines("0", inv)[0]


def test_the_driver_version_nvml_refuses_is_unknown(monkeypatch):
    fake = fake_pynvml(fail={"nvmlSystemGetDriverVersion": NVMLError_NoPermission()})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.driver_version == "unknown" and len(inv) == 2 and inv.reason is None
    assert smi_table(inv).startswith("NVML   driver unknown")


def test_a_failed_count_gives_an_empty_inventory_with_the_reason(monkeypatch):
    fake = fake_pynvml(fail={"nvmlDeviceGetCount": FakeNVMLError("Unknown Error")})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.gpus == () and inv.driver_version == "580.65"
    assert inv.reason == "NVML could not count the GPUs: FakeNVMLError: Unknown Error"
    assert fake.shutdowns == 1


def test_a_failing_shutdown_does_not_lose_what_was_read(monkeypatch):
    fake = fake_pynvml(fail={"nvmlShutdown": FakeNVMLError("Uninitialized")})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert len(nvml_inventory()) == 2


def test_process_list_nvml_cannot_give_is_unknown_not_none(monkeypatch):
    """nvidia-ml-py 13 on an old driver: the v3 process query raises NVMLLibraryMismatchError."""
    mismatch = NVMLLibraryMismatchError("Unversioned function called and the pyNVML version does not match")
    fake = fake_pynvml(fail={"nvmlDeviceGetComputeRunningProcesses": mismatch})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert [gpu.processes for gpu in inv.gpus] == [None, None]
    assert "nvidia-ml-py calls a function this driver's NVML lacks" in inv.gpus[0].notes[0]
    table = smi_table(inv)
    assert "  none" not in table
    assert "GPU 0  unknown (NVML could not list them; see the notes)" in table
    assert "GPU 1  unknown" in table


def test_process_list_not_supported_on_one_gpu(monkeypatch):
    fake = fake_pynvml(fail={"nvmlDeviceGetGraphicsRunningProcesses": {0: NVMLError_NotSupported()}})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.gpus[0].processes is None
    assert inv.gpus[1].processes == (GpuProcess(4242, "python train.py", GIB),)
    table = smi_table(inv)
    assert "GPU 0  unknown" in table and "GPU 1  pid    4242" in table
    assert "processes unknown: NVML could not read GPU 0's processes: NVMLError_NotSupported" in table


def test_a_process_name_nvml_refuses_is_a_question_mark(monkeypatch):
    fake = fake_pynvml(fail={"nvmlSystemGetProcessName": NVMLError_NoPermission()})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.gpus[1].processes == (GpuProcess(4242, "?", GIB),) and inv.gpus[1].notes == ()


def test_errors_that_are_not_nvmls_are_not_swallowed(monkeypatch):
    """Only NVML's own errors mean "unknown"; a bug (here a TypeError) still shows."""
    fake = fake_pynvml(fail={"nvmlDeviceGetMemoryInfo": TypeError("a bug")})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(TypeError, match="a bug"):
        nvml_inventory()
    assert fake.shutdowns == 1


def test_the_inventory_and_the_picker_survive_a_sick_machine(monkeypatch):
    from course_utils.picker import GpuPicker

    fake = fake_pynvml(
        fail={
            "nvmlDeviceGetHandleByIndex": {1: NVMLError_GpuIsLost()},
            "nvmlDeviceGetComputeRunningProcesses": NVMLLibraryMismatchError("old driver"),
        }
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    inv = nvml_inventory()
    assert inv.source == "nvml" and len(inv) == 2
    picker = GpuPicker()
    assert picker.inventory.source == "nvml" and picker.n_input.max == 1
    assert "unknown" in picker.table.value
    picker.pick_button.click()
    assert picker.value_string == "0"
    picker.n_input.max = 2  # as if the reader typed 2: the button explains instead of raising
    picker.n_input.value = 2
    picker.pick_button.click()
    assert "cannot choose 2 GPU(s)" in picker.value.value and picker.value_string == "0"


def test_explain_later_errors_names_the_step():
    assert gpus.explain_nvml_error(FakeNVMLError("x"), doing="count the GPUs") == (
        "NVML could not count the GPUs: FakeNVMLError: x"
    )
    assert "GPU reset or a reboot" in gpus.explain_nvml_error(NVMLError_GpuIsLost())
    assert gpus.explain_nvml_error(NVMLError_LibraryNotFound(), doing="anything").startswith(
        "NVML library not found"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, 2), (0, 0), (-3, -3), (np.int64(5), 5)],
)
def test_whole_number_takes_every_integer_type(value, expected):
    result = gpus.whole_number(value, "n")
    assert result == expected and type(result) is int


NOT_WHOLE = [True, False, 2.0, 2.9, float("inf"), "2", None, np.float64(2), np.bool_(True)]


@pytest.mark.parametrize("value", NOT_WHOLE)
def test_whole_number_refuses_bools_floats_and_text_alike(value):
    with pytest.raises(ValueError, match=r"^n must be a whole number \(an int such as 2\), not "):
        gpus.whole_number(value, "n")


def test_smi_table_and_explain_nvml_error_refuse_what_they_cannot_show():
    with pytest.raises(TypeError, match=r"smi_table shows an Inventory \(nvml_inventory\(\)"):
        smi_table([])
    with pytest.raises(TypeError, match="err must be the exception NVML raised, not 'NVMLError_GpuIsLost'"):
        gpus.explain_nvml_error("NVMLError_GpuIsLost")
    with pytest.raises(TypeError, match=r"doing must be text \(a str\) such as 'count the GPUs', not 2"):
        gpus.explain_nvml_error(ValueError("x"), doing=2)


@pytest.fixture
def maps(tmp_path):
    return fake_maps(tmp_path)


def test_cuda_driver_started_without_the_driver_library(maps):
    without, _ = maps
    never = FakeLibcuda(0)
    assert cuda_driver_started(without, load=never) is False  # libcudart alone does not count
    assert never.opened == []  # the driver library is never loaded by the check itself


def test_cuda_driver_loaded_by_import_torch_but_not_started(maps):
    """A CUDA build of torch maps libcuda at import; cuInit has not run: CUDA has not read the variable."""
    _, with_cuda = maps
    lib = FakeLibcuda(3)  # CUDA_ERROR_NOT_INITIALIZED
    assert cuda_driver_started(with_cuda, load=lib) is False
    assert lib.opened == [LIBCUDA]  # the very library in the map, not another copy


@pytest.mark.parametrize("status", [0, 100, 999])  # success, no device, unknown: cuInit ran
def test_cuda_driver_started_once_cuinit_ran(maps, status):
    _, with_cuda = maps
    assert cuda_driver_started(with_cuda, load=FakeLibcuda(status)) is True


def test_cuda_driver_started_cannot_tell(maps, tmp_path):
    _, with_cuda = maps

    def broken(path):
        raise OSError(f"{path}: cannot open shared object file")

    assert cuda_driver_started(with_cuda, load=broken) is None
    assert cuda_driver_started(with_cuda, load=lambda path: object()) is None  # no such function
    assert cuda_driver_started(tmp_path / "no-such-file") is None  # not Linux, or unreadable


def test_cuda_driver_started_on_this_machine():
    started = cuda_driver_started()
    if not os.path.exists("/proc/self/maps"):
        assert started is None
    elif not torch.cuda.is_available():  # no NVIDIA driver here: nothing to start
        assert started is False


def test_cuda_driver_started_refuses_what_is_not_a_path(tmp_path):
    """A file descriptor would be closed by open() (it is the caller's), and a pipe would block."""
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(TypeError, match="maps must be the path of a file or folder"):
            cuda_driver_started(read_end)
        os.fstat(read_end)  # still open: the caller's descriptor was left alone
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        assert cuda_driver_started(fifo) is None  # not a regular file: cannot tell, at once
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_table_and_its_notes_come_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert smi_table(gpus.demo_inventory()).startswith("演示服务器（虚构的，不是这台机器）   驱动 demo\n")
    fake = fake_pynvml(fail={"nvmlDeviceGetHandleByIndex": {1: NVMLError_GpuIsLost()}})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    table = smi_table(nvml_inventory())
    assert "  GPU 1  未知（NVML 无法列出它们；见说明）" in table
    assert "说明：\n  GPU 1: 全部信息未知：NVML 无法打开 GPU 1：有一个 GPU 丢失了" in table
