"""What GPUs this machine has, read through NVML (the library behind nvidia-smi).

NVML sees every NVIDIA GPU of the machine in PCI bus order, whatever `CUDA_VISIBLE_DEVICES`
says, and without creating a CUDA context. With no driver (a laptop, CI, Binder) the
inventory is empty and says why, instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

MIB = 2**20
T = TypeVar("T")


@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on a GPU."""

    pid: int
    name: str
    used_memory: int | None  # bytes; None when NVML may not tell (containers, Windows)


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU as NVML reports it; memory in bytes, utilisation in percent."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total: int
    memory_used: int
    utilization: int | None = None
    processes: tuple[GpuProcess, ...] = ()

    @property
    def memory_free(self) -> int:
        """Bytes not in use (total minus used)."""
        return self.memory_total - self.memory_used


@dataclass(frozen=True)
class Inventory:
    """The GPUs found, where they came from, and why the list is empty when it is."""

    gpus: tuple[GpuInfo, ...] = ()
    source: str = "nvml"  # "nvml" for real hardware, "demo" for a made-up fleet
    driver_version: str | None = None
    reason: str | None = None  # set when NVML could not be used

    def __len__(self) -> int:
        return len(self.gpus)


def _text(value: str | bytes) -> str:
    """NVML returns bytes in old bindings and str in new ones; always give str."""
    return value.decode() if isinstance(value, bytes) else value


def explain_nvml_error(err: Exception) -> str:
    """Turn an NVML initialisation error into one sentence that says what to do."""
    kind = type(err).__name__
    if "LibraryNotFound" in kind:
        return (
            "NVML library not found: this machine has no NVIDIA driver "
            "(no NVIDIA GPU, or the driver is not installed). Everything in the course "
            "still runs on the CPU."
        )
    if "DriverNotLoaded" in kind:
        return "the NVIDIA driver is installed but not loaded; try `nvidia-smi` or a reboot."
    if "NoPermission" in kind:
        return "NVML refused access (no permission); ask your administrator."
    if "InsufficientSize" in kind or "LibRmVersionMismatch" in kind:
        return f"NVML and the kernel driver disagree ({err}); reboot after a driver update."
    return f"NVML could not start: {kind}: {err}"


def _optional(call: Callable[[], T], default: T) -> T:
    """Call an NVML query that some GPUs or containers do not support."""
    try:
        return call()
    except Exception:  # NVMLError_NotSupported and friends: report as unknown
        return default


def _processes(pynvml: ModuleType, handle: object) -> tuple[GpuProcess, ...]:
    """Compute and graphics processes on one GPU, with names when the OS lets us read them."""
    found: dict[int, GpuProcess] = {}
    for query in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for proc in _optional(lambda q=query: getattr(pynvml, q)(handle), []):
            used = getattr(proc, "usedGpuMemory", None)
            name = _optional(lambda p=proc: _text(pynvml.nvmlSystemGetProcessName(p.pid)), "?")
            found[proc.pid] = GpuProcess(int(proc.pid), name, used)
    return tuple(found[pid] for pid in sorted(found))


def nvml_inventory() -> Inventory:
    """Read every GPU through NVML; an empty Inventory with `reason` set when NVML is unusable."""
    try:
        import pynvml
    except ImportError:
        return Inventory(reason="the nvidia-ml-py package is missing: pip install nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return Inventory(reason=explain_nvml_error(err))
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                GpuInfo(
                    index=index,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    pci_bus_id=_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
                    memory_total=int(memory.total),
                    memory_used=int(memory.used),
                    utilization=_optional(
                        lambda h=handle: int(pynvml.nvmlDeviceGetUtilizationRates(h).gpu), None
                    ),
                    processes=_processes(pynvml, handle),
                )
            )
        return Inventory(gpus=tuple(gpus), driver_version=driver)
    finally:
        pynvml.nvmlShutdown()


def smi_table(inventory: Inventory) -> str:
    """An nvidia-smi-like text table of the inventory, or a plain explanation when it is empty."""
    if not inventory.gpus:
        why = inventory.reason or "NVML found no NVIDIA GPU."
        return f"No GPU to list. {why}"
    title = "DEMO FLEET (made up, not this machine)" if inventory.source == "demo" else "NVML"
    lines = [f"{title}   driver {inventory.driver_version or '?'}"]
    header = f"{'GPU':>3}  {'Name':<24} {'Bus-Id':<16} {'Memory-Usage':>21} {'Util':>5}"
    lines += [header, "-" * len(header)]
    for gpu in inventory.gpus:
        usage = f"{gpu.memory_used // MIB}MiB / {gpu.memory_total // MIB}MiB"
        util = "n/a" if gpu.utilization is None else f"{gpu.utilization}%"
        lines.append(f"{gpu.index:>3}  {gpu.name[:24]:<24} {gpu.pci_bus_id[-16:]:<16} {usage:>21} {util:>5}")
    lines += ["", "Processes:"]
    procs = [(gpu.index, p) for gpu in inventory.gpus for p in gpu.processes]
    if not procs:
        lines.append("  none")
    for index, proc in procs:
        used = "n/a" if proc.used_memory is None else f"{proc.used_memory // MIB}MiB"
        lines.append(f"  GPU {index}  pid {proc.pid:>7}  {proc.name[:40]:<40} {used:>9}")
    return "\n".join(lines)


# The demo fleet: a made-up 8-GPU server so that a reader without GPUs can drive every lesson.
_DEMO_TOTAL_MIB = 81920  # what NVML reports for an 80 GB A100
_DEMO_USED_MIB = (73728, 2048, 40960, 512, 81000, 10240, 512, 30720)
_DEMO_BUS = ("07", "0F", "47", "4E", "87", "90", "B7", "BD")
_DEMO_UTIL = (97, 0, 64, 0, 100, 12, 0, 41)
_DEMO_PROCESSES: dict[int, tuple[tuple[int, str, int], ...]] = {
    0: ((31337, "python train_llm.py", 73216),),
    1: ((40001, "jupyter-lab kernel", 1536),),
    2: ((31338, "python finetune.py --lr 3e-4", 40448),),
    4: ((31339, "python train_llm.py", 40448), (31340, "python eval.py", 40040)),
    5: ((40002, "python preprocess.py", 9728),),
    7: ((31341, "torchrun --nproc-per-node=1 sweep.py", 30208),),
}


def demo_inventory() -> Inventory:
    """A made-up 8-GPU server (80 GB GPUs, uneven memory use, some processes), labelled `source="demo"`.

    The course uses it wherever a lesson needs GPUs the reader may not have: choosing GPUs by
    free memory, mapping `CUDA_VISIBLE_DEVICES`, the GPU picker. GPUs 3 and 6 have exactly the
    same free memory, so that tie-breaking shows. Nothing here describes this machine.
    """
    gpus = []
    for index, used in enumerate(_DEMO_USED_MIB):
        processes = tuple(
            GpuProcess(pid, name, mib * MIB) for pid, name, mib in _DEMO_PROCESSES.get(index, ())
        )
        gpus.append(
            GpuInfo(
                index=index,
                name="DEMO A100-SXM4-80GB",
                uuid=f"GPU-{index}d3e0a11-7c2f-4b8e-9a61-00000000000{index}",
                pci_bus_id=f"00000000:{_DEMO_BUS[index]}:00.0",
                memory_total=_DEMO_TOTAL_MIB * MIB,
                memory_used=used * MIB,
                utilization=_DEMO_UTIL[index],
                processes=processes,
            )
        )
    return Inventory(gpus=tuple(gpus), source="demo", driver_version="demo")


def inventory_or_demo() -> Inventory:
    """This machine's GPUs through NVML, or the demo fleet (labelled as such) when NVML finds none."""
    real = nvml_inventory()
    return real if real.gpus else demo_inventory()
