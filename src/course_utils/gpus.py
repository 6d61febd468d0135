"""What GPUs this machine has, read through NVML (the library behind nvidia-smi), and whether
this process has started the CUDA driver (`cuda_driver_started`).

NVML sees every NVIDIA GPU of the machine in PCI bus order, whatever `CUDA_VISIBLE_DEVICES`
says, and without creating a CUDA context. With no driver (a laptop, CI, Binder) the
inventory is empty and says why, instead of raising.
"""

from __future__ import annotations

import ctypes
import operator
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from course_utils._checks import path as checked_path
from course_utils._checks import text
from course_utils.i18n import N_, _, translated

MIB = 2**20
_CUDA_ERROR_NOT_INITIALIZED = 3  # what the CUDA driver API answers before cuInit
T = TypeVar("T")


@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on a GPU."""

    pid: int
    name: str
    used_memory: int | None  # bytes; None when NVML may not tell (containers, Windows)


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU as NVML reports it; memory in bytes, utilisation in percent.

    A field NVML could not read (a lost GPU, no permission, a query the GPU or the driver does
    not support) is "unknown" for text, None for numbers and for `processes`, and `notes` says
    what failed and why. The GPU stays in the inventory at its index, because indices are what
    `CUDA_VISIBLE_DEVICES` and nvidia-smi use.
    """

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total: int | None  # None: unknown
    memory_used: int | None  # None: unknown
    utilization: int | None = None
    processes: tuple[GpuProcess, ...] | None = ()  # None: NVML could not list them
    notes: tuple[str, ...] = ()  # what NVML could not read about this GPU, and why

    @property
    def memory_free(self) -> int | None:
        """Bytes not in use (total minus used); None when NVML could not read the memory."""
        if self.memory_total is None or self.memory_used is None:
            return None
        return self.memory_total - self.memory_used


@dataclass(frozen=True)
class Inventory:
    """The GPUs found, where they came from, and why the list is empty when it is."""

    gpus: tuple[GpuInfo, ...] = ()
    source: str = "nvml"  # "nvml" for real hardware, "demo" for a made-up fleet
    driver_version: str | None = None  # "unknown" when NVML could not tell
    reason: str | None = None  # set when NVML could not be used

    def __len__(self) -> int:
        return len(self.gpus)


UNKNOWN = "unknown"


def whole_number(value: object, what: str) -> int:
    """`value` as an int if it is a whole number of an integer type (numpy's too), else ValueError.

    The one rule for every GPU count and GPU index the course's tools take: `True` or `2.9` is
    refused, never rounded, so that a slip cannot silently pick other GPUs.
    """
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[call-overload]
        except TypeError:
            pass
    raise ValueError(
        _("{what} must be a whole number (an int such as 2), not {value!r}.").format(what=what, value=value)
    )


def _text(value: str | bytes) -> str:
    """NVML returns bytes in old bindings and str in new ones; always give str."""
    return value.decode() if isinstance(value, bytes) else value


def explain_nvml_error(err: Exception, doing: str = N_("start")) -> str:
    """Turn an NVML error into one sentence that says what to do; `doing` names the failed step.

    The default (`doing="start"`) is for `nvmlInit()`; `nvml_inventory` passes what it was
    reading ("count the GPUs", "read GPU 2's memory") for errors that come later.
    """
    if not isinstance(err, BaseException):
        raise TypeError(_("err must be the exception NVML raised, not {err!r}").format(err=err))
    doing = translated(text("doing", doing, "'count the GPUs'"))
    kind = type(err).__name__
    if "LibraryNotFound" in kind:
        return _(
            "NVML library not found: this machine has no NVIDIA driver "
            "(no NVIDIA GPU, or the driver is not installed). Everything in the course "
            "still runs on the CPU."
        )
    if "DriverNotLoaded" in kind:
        return _("the NVIDIA driver is installed but not loaded; try `nvidia-smi` or a reboot.")
    if "NoPermission" in kind:
        return _("NVML refused access (no permission); ask your administrator.")
    if "InsufficientSize" in kind or "LibRmVersionMismatch" in kind:
        return _("NVML and the kernel driver disagree ({err}); reboot after a driver update.").format(err=err)
    if "GpuIsLost" in kind:
        return _(
            "NVML could not {doing}: a GPU is lost (it stopped answering: fell off the bus or "
            "crashed); `nvidia-smi` shows which, and it needs a GPU reset or a reboot."
        ).format(doing=doing)
    if "LibraryMismatch" in kind:
        return _(
            "NVML could not {doing}: nvidia-ml-py calls a function this driver's NVML lacks "
            "(the driver is older than the bindings); update the driver, or install an "
            "nvidia-ml-py release as old as the driver."
        ).format(doing=doing)
    return _("NVML could not {doing}: {kind}: {err}").format(doing=doing, kind=kind, err=err)


def _nvml_errors(pynvml: ModuleType) -> tuple[type[Exception], ...]:
    """The exceptions an NVML query may raise: NVMLError and, in nvidia-ml-py 12+, a version mismatch.

    `NVMLLibraryMismatchError` (raised when the bindings call a function version the driver
    lacks, e.g. the process queries on old drivers) is not an NVMLError subclass.
    """
    errors: list[type[Exception]] = [pynvml.NVMLError]
    mismatch = getattr(pynvml, "NVMLLibraryMismatchError", None)
    if isinstance(mismatch, type) and issubclass(mismatch, Exception):
        errors.append(mismatch)
    return tuple(errors)


class _GpuReader:
    """Reads one GPU's fields through NVML; a failed field becomes its default plus a note."""

    def __init__(self, pynvml: ModuleType, index: int) -> None:
        self.pynvml = pynvml
        self.index = index
        self.errors = _nvml_errors(pynvml)
        self.notes: list[str] = []

    def read(
        self, what: str, call: Callable[[], T], default: T, *, doing: str = "", quiet: bool = False
    ) -> T:
        """`call()`, or `default` with a note "<what> unknown: <why>" when NVML raises."""
        try:
            return call()
        except self.errors as err:
            if not quiet:
                why = explain_nvml_error(
                    err,
                    doing=doing
                    or _("read GPU {index}'s {what}").format(index=self.index, what=translated(what)),
                )
                self.notes.append(_("{what} unknown: {why}").format(what=translated(what), why=why))
            return default


def _processes(reader: _GpuReader, handle: object) -> tuple[GpuProcess, ...] | None:
    """Compute and graphics processes on one GPU, with names when the OS lets us read them.

    None when NVML could not list them (not supported, no permission, bindings newer than the
    driver): "unknown" is then the truth, not "no process".
    """
    pynvml = reader.pynvml
    found: dict[int, GpuProcess] = {}
    for query in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        procs = reader.read(N_("processes"), lambda q=query: list(getattr(pynvml, q)(handle)), None)
        if procs is None:
            return None
        for proc in procs:
            used = getattr(proc, "usedGpuMemory", None)
            name = reader.read(
                "process name", lambda p=proc: _text(pynvml.nvmlSystemGetProcessName(p.pid)), "?", quiet=True
            )
            found[int(proc.pid)] = GpuProcess(int(proc.pid), name, used)
    return tuple(found[pid] for pid in sorted(found))


def _read_gpu(pynvml: ModuleType, index: int) -> GpuInfo:
    """One GPU's GpuInfo; whatever NVML refuses is unknown, with a note, never an exception."""
    reader = _GpuReader(pynvml, index)
    handle = reader.read(
        N_("everything"),
        lambda: pynvml.nvmlDeviceGetHandleByIndex(index),
        None,
        doing=_("open GPU {index}").format(index=index),
    )
    if handle is None:
        return GpuInfo(index, UNKNOWN, UNKNOWN, UNKNOWN, None, None, None, None, tuple(reader.notes))
    memory = reader.read(N_("memory"), lambda: pynvml.nvmlDeviceGetMemoryInfo(handle), None)
    return GpuInfo(
        index=index,
        name=reader.read(N_("name"), lambda: _text(pynvml.nvmlDeviceGetName(handle)), UNKNOWN),
        uuid=reader.read("UUID", lambda: _text(pynvml.nvmlDeviceGetUUID(handle)), UNKNOWN),
        pci_bus_id=reader.read(
            N_("bus id"), lambda: _text(pynvml.nvmlDeviceGetPciInfo(handle).busId), UNKNOWN
        ),
        memory_total=None if memory is None else int(memory.total),
        memory_used=None if memory is None else int(memory.used),
        # many GPUs (and vGPUs) do not report utilisation: n/a in the table, no note
        utilization=reader.read(
            "utilisation", lambda: int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu), None, quiet=True
        ),
        processes=_processes(reader, handle),
        notes=tuple(reader.notes),
    )


def nvml_inventory() -> Inventory:
    """Read every GPU through NVML; never raises for NVML's sake.

    No NVML (no driver, no package, no permission to start it): an empty Inventory with
    `reason` set. NVML started but cannot count the GPUs: the same. A GPU or a field that
    fails later (a lost GPU, a query not supported): the GPU stays, its unreadable fields are
    unknown and `GpuInfo.notes` says why; an unreadable driver version is "unknown".
    """
    try:
        import pynvml
    except ImportError:
        return Inventory(reason=_("the nvidia-ml-py package is missing: pip install nvidia-ml-py"))
    errors = _nvml_errors(pynvml)
    try:
        pynvml.nvmlInit()
    except errors as err:
        return Inventory(reason=explain_nvml_error(err))
    try:
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except errors:
            driver = UNKNOWN
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except errors as err:
            return Inventory(driver_version=driver, reason=explain_nvml_error(err, doing=_("count the GPUs")))
        gpus = tuple(_read_gpu(pynvml, index) for index in range(count))
        return Inventory(gpus=gpus, driver_version=driver)
    finally:
        try:
            pynvml.nvmlShutdown()
        except errors:
            pass  # nothing left to do with NVML; what was read stands


def _mib(value: int | None) -> str:
    """Bytes as whole MiB, "?" when unknown."""
    return "?" if value is None else f"{value // MIB}MiB"


def smi_table(inventory: Inventory) -> str:
    """An nvidia-smi-like text table of the inventory, or a plain explanation when it is empty.

    Unknown values show as "?" (memory) and "n/a" (utilisation); a GPU whose processes NVML
    could not list says "unknown", never "none"; notes on unreadable fields come last.
    """
    if not isinstance(inventory, Inventory):
        raise TypeError(
            _(
                "smi_table shows an Inventory (nvml_inventory() or demo_inventory()), not {inventory!r}"
            ).format(inventory=inventory)
        )
    if not inventory.gpus:
        why = inventory.reason or _("NVML found no NVIDIA GPU.")
        return _("No GPU to list. {why}").format(why=why)
    title = _("DEMO FLEET (made up, not this machine)") if inventory.source == "demo" else "NVML"
    lines = [_("{title}   driver {version}").format(title=title, version=inventory.driver_version or "?")]
    header = f"{'GPU':>3}  {'Name':<24} {'Bus-Id':<16} {'Memory-Usage':>21} {'Util':>5}"
    lines += [header, "-" * len(header)]
    for gpu in inventory.gpus:
        usage = f"{_mib(gpu.memory_used)} / {_mib(gpu.memory_total)}"
        util = "n/a" if gpu.utilization is None else f"{gpu.utilization}%"
        lines.append(f"{gpu.index:>3}  {gpu.name[:24]:<24} {gpu.pci_bus_id[-16:]:<16} {usage:>21} {util:>5}")
    lines += ["", _("Processes:")]
    rows = []
    for gpu in inventory.gpus:
        if gpu.processes is None:
            rows.append(
                _("  GPU {index}  unknown (NVML could not list them; see the notes)").format(index=gpu.index)
            )
            continue
        for proc in gpu.processes:
            used = "n/a" if proc.used_memory is None else f"{proc.used_memory // MIB}MiB"
            rows.append(f"  GPU {gpu.index}  pid {proc.pid:>7}  {proc.name[:40]:<40} {used:>9}")
    lines += rows or [_("  none")]
    notes = [f"  GPU {gpu.index}: {note}" for gpu in inventory.gpus for note in gpu.notes]
    if notes:
        lines += ["", _("Notes:"), *notes]
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


def _libcuda_path(maps: str | Path) -> str | None:
    """The path of the CUDA driver library mapped into this process, "" when none is; None when unknown."""
    try:
        if not stat.S_ISREG(os.stat(maps).st_mode):  # a pipe or a device could block for ever
            return None
        with open(maps, encoding="utf-8", errors="replace") as lines:
            for line in lines:  # address perms offset dev inode [path]
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and "/libcuda.so" in fields[5]:
                    return fields[5].strip()
    except OSError:
        return None
    return ""


def _already_loaded(path: str) -> ctypes.CDLL:
    """The library at `path` as this process already has it mapped; never loads a copy (OSError if none)."""
    return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)


def cuda_driver_started(
    maps: str | Path = "/proc/self/maps", load: Callable[[str], object] | None = None
) -> bool | None:
    """Whether the CUDA driver has started (`cuInit` ran) in this process; None when we cannot tell.

    `torch.cuda.is_available()` starts the driver, which then reads `CUDA_VISIBLE_DEVICES`,
    without making `torch.cuda.is_initialized()` True. `import torch` (a CUDA build) only
    loads the driver library, which does not read the variable yet. So: no `libcuda.so` in
    the process's memory map (`/proc/self/maps`) means False; otherwise that same library is
    asked `cuDeviceGetCount`, which answers CUDA_ERROR_NOT_INITIALIZED (3) until `cuInit` ran
    and starts nothing itself. Linux only: elsewhere, or when the map or the library cannot
    be read, None. `maps` and `load` (what opens the mapped library) are for tests.

    One case it cannot see: a start that failed because no GPU was visible (`is_available()`
    returned False with `CUDA_VISIBLE_DEVICES=""`) leaves the driver uninitialised, so this
    answers False, yet the CUDA runtime inside PyTorch keeps that failure for the life of
    the process (seen with PyTorch 2.11 on an H100): a new value then changes nothing either.
    """
    path = _libcuda_path(checked_path("maps", maps, "'/proc/self/maps'"))
    if not path:
        return None if path is None else False
    try:
        count = ctypes.c_int(0)
        status = (load or _already_loaded)(path).cuDeviceGetCount(ctypes.byref(count))  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        return None
    return status != _CUDA_ERROR_NOT_INITIALIZED
