"""An environment report: what this machine offers the course, in one table.

Used by notebook 00 so that a student (or an instructor reading a bug report) sees at once
which Python and PyTorch run, which accelerator PyTorch found, what NVML says, and how many
CPU cores and how much memory there are.

In a container (Binder, Docker, Kubernetes, a job scheduler) `psutil` and `os.cpu_count()` see the
host: 64 GiB and 32 cores where the course may use 2 GiB and one core. The report therefore also
reads the control group (cgroup) limits of this process and shows them where they are lower.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import psutil
import torch

from course_utils._checks import path
from course_utils.gpus import Inventory, nvml_inventory
from course_utils.i18n import _, display_width, pad
from course_utils.setup import SUPPORTED_TORCH, torch_in_range

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
_V1_NO_LIMIT = 2**60  # cgroup v1 writes about 2**63 (rounded to a page) for "no memory limit"
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class CgroupLimits:
    """Limits that this process's control group (its container) sets; None where it sets none."""

    memory_bytes: int | None = None
    cpus: float | None = None  # CPU time quota in CPUs: 1.5 means 150 ms of CPU time per 100 ms


def _read(path: Path) -> str | None:
    """A small kernel file's text, or None when it is missing or unreadable."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _is_dir(path: Path) -> bool:
    """Path.is_dir that also says False where we may not look (Path.is_dir raises on EACCES)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _own_cgroups(proc_self_cgroup: Path) -> dict[str, str]:
    """This process's cgroup path per controller ("" for the v2 unified hierarchy), from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in (_read(proc_self_cgroup) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _cgroup_dirs(base: Path, own: str | None) -> list[Path]:
    """The process's cgroup folder under `base` and each parent up to `base`, deepest first.

    Limits of a parent apply to its children too, so all of them count. In a container the
    process's path is often not visible (or is "/"): then only `base` itself, which is the
    container's own cgroup, is left.
    """
    parts = [p for p in (own or "").split("/") if p]
    candidates = [base.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    return [d for d in candidates if _is_dir(d)]


def _memory_limit(text: str | None, v1: bool) -> int | None:
    """Bytes from memory.max (v2: a number or "max") or memory.limit_in_bytes (v1: huge means none)."""
    if text is None or not text.isdigit():
        return None
    value = int(text)
    return None if v1 and value >= _V1_NO_LIMIT else value


def _cpu_limit(quota: str | None, period: str | None) -> float | None:
    """CPUs from a quota and a period in microseconds; None for "max" (v2) or -1 (v1): no quota."""
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _smallest(values: Iterable[N | None]) -> N | None:
    """The tightest of the limits found, or None when there is none."""
    found = [v for v in values if v is not None]
    return min(found) if found else None


def read_cgroup_limits(root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> CgroupLimits:
    """The memory and CPU limits of this process's cgroup (v2, else v1); never raises.

    cgroup v2 (one hierarchy, `root/cgroup.controllers` exists): `memory.max` holds bytes or
    "max", `cpu.max` holds "<quota> <period>" or "max <period>". cgroup v1: the `memory/` and
    `cpu/` hierarchies hold `memory.limit_in_bytes` and `cpu.cfs_quota_us`/`cpu.cfs_period_us`
    (-1: no quota). The arguments exist so that tests can point them at fake files. On macOS and
    Windows, where these files do not exist, there are no limits to report. Only arguments that
    are not paths raise (TypeError; ValueError for an empty one or one with a NUL character).
    """
    root = Path(path("root", root, repr(str(CGROUP_ROOT))))
    own = _own_cgroups(Path(path("proc_self_cgroup", proc_self_cgroup, repr(str(PROC_SELF_CGROUP)))))
    if _read(root / "cgroup.controllers") is not None:
        dirs = _cgroup_dirs(root, own.get(""))
        memory = _smallest([_memory_limit(_read(d / "memory.max"), v1=False) for d in dirs])
        cpus = []
        for d in dirs:
            quota, _, period = (_read(d / "cpu.max") or "").partition(" ")
            cpus.append(_cpu_limit(quota, period))
        return CgroupLimits(memory_bytes=memory, cpus=_smallest(cpus))
    memory_dirs = _cgroup_dirs(root / "memory", own.get("memory"))
    memory = _smallest([_memory_limit(_read(d / "memory.limit_in_bytes"), v1=True) for d in memory_dirs])
    cpu_base = root / "cpu" if _is_dir(root / "cpu") else root / "cpu,cpuacct"  # "cpu" is usually a link
    cpu_dirs = _cgroup_dirs(cpu_base, own.get("cpu"))
    cpus = [_cpu_limit(_read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")) for d in cpu_dirs]
    return CgroupLimits(memory_bytes=memory, cpus=_smallest(cpus))


def torch_support(version: str, spec: str = SUPPORTED_TORCH) -> str:
    """One line on a PyTorch version against the supported range: fine, or what fails and how to get one."""
    if torch_in_range(version, spec):
        return _("{version} (in the course's supported range {spec})").format(version=version, spec=spec)
    return _(
        "{version}: NOT in the course's supported range {spec}, so some cells may fail or print other "
        'outputs; get a supported one with `pip install "torch{spec}"` or `python3 course.py lab`'
    ).format(version=version, spec=spec)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


@dataclass(frozen=True)
class EnvironmentReport:
    """Facts about this machine and environment that decide how the course runs here."""

    python_version: str
    torch_version: str
    supported_torch: str  # the course's supported range, course_utils.setup.SUPPORTED_TORCH
    torch_cuda_build: str | None  # CUDA version torch was built with; None for a CPU build
    accelerator: str | None  # torch.accelerator's device type: "cuda", "mps", "xpu"... or None
    accelerator_count: int
    device_names: tuple[str, ...]
    nvml: Inventory
    cuda_visible_devices: str | None
    cpu_cores: int
    usable_cpu_cores: int  # CPUs this process may run on (its affinity mask)
    ram_bytes: int  # the host's memory, as the operating system reports it
    ipywidgets_version: str | None
    cpu_quota: float | None = None  # the container's CPU time quota, in CPUs; None for none
    ram_limit_bytes: int | None = None  # the container's memory limit; None for none

    @property
    def usable_ram_bytes(self) -> int:
        """The memory the course can really use: the container's limit where it is below the host's RAM."""
        return min(self.ram_bytes, self.ram_limit_bytes or self.ram_bytes)

    def _cpu_row(self) -> str:
        if self.cpu_quota is not None and self.cpu_quota < self.usable_cpu_cores:
            return _("{quota} / {cores} (container CPU quota; the affinity mask allows {usable})").format(
                quota=f"{self.cpu_quota:g}", cores=self.cpu_cores, usable=self.usable_cpu_cores
            )
        return f"{self.usable_cpu_cores} / {self.cpu_cores}"

    def _torch_row(self) -> str:
        return torch_support(self.torch_version, self.supported_torch)

    def _ram_row(self) -> str:
        if self.usable_ram_bytes < self.ram_bytes:
            return _("{usable} (container limit; host has {host})").format(
                usable=_gib(self.usable_ram_bytes), host=_gib(self.ram_bytes)
            )
        return _gib(self.ram_bytes)

    def rows(self) -> list[tuple[str, str]]:
        """The report as (label, value) pairs, in reading order."""
        names = ", ".join(self.device_names) or "-"
        if self.nvml.reason:
            nvml = _("unavailable: {reason}").format(reason=self.nvml.reason)
        else:
            nvml = _("driver {version}, {count} GPU(s)").format(
                version=self.nvml.driver_version, count=len(self.nvml)
            )
        visible = _("(not set)") if self.cuda_visible_devices is None else repr(self.cuda_visible_devices)
        return [
            ("Python", self.python_version),
            ("PyTorch", self._torch_row()),
            (_("PyTorch built with CUDA"), self.torch_cuda_build or _("no (CPU-only build)")),
            (_("Accelerator (torch.accelerator)"), self.accelerator or _("none: running on the CPU")),
            (_("Accelerator devices"), str(self.accelerator_count)),
            (_("Device names"), names),
            ("NVML", nvml),
            ("CUDA_VISIBLE_DEVICES", visible),
            (_("CPU cores (usable / total)"), self._cpu_row()),
            (_("RAM"), self._ram_row()),
            ("ipywidgets", self.ipywidgets_version or _("missing: the GPU picker will not show")),
        ]

    def __str__(self) -> str:
        rows = self.rows()
        width = max(display_width(label) for label, _value in rows)
        return "\n".join(f"{pad(label, width)}  {value}" for label, value in rows)


def _device_names(kind: str | None, count: int) -> tuple[str, ...]:
    """Names of the accelerator's devices, where its torch backend can tell them."""
    if kind is None:
        return ()
    backend = getattr(torch, kind, None)
    get_name = getattr(backend, "get_device_name", None)
    if get_name is None:
        return tuple(f"{kind}:{i}" for i in range(count))
    return tuple(str(get_name(i)) for i in range(count))


def _version_of(distribution: str) -> str | None:
    """Installed version of a distribution, or None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def environment_report(
    cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP
) -> EnvironmentReport:
    """Collect the report; never raises on a machine without GPUs, drivers or cgroups.

    `cgroup_root` and `proc_self_cgroup` say where to read container limits (see
    `read_cgroup_limits`); tests point them at fake files.
    """
    path("cgroup_root", cgroup_root, repr(str(CGROUP_ROOT)))  # checked here, by the names passed here
    path("proc_self_cgroup", proc_self_cgroup, repr(str(PROC_SELF_CGROUP)))
    available = torch.accelerator.is_available()
    kind = torch.accelerator.current_accelerator().type if available else None
    count = torch.accelerator.device_count() if available else 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        usable = os.cpu_count() or 1
    limits = read_cgroup_limits(cgroup_root, proc_self_cgroup)
    return EnvironmentReport(
        python_version=platform.python_version(),
        torch_version=torch.__version__,
        supported_torch=SUPPORTED_TORCH,
        torch_cuda_build=torch.version.cuda,
        accelerator=kind,
        accelerator_count=count,
        device_names=_device_names(kind, count),
        nvml=nvml_inventory(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        cpu_cores=os.cpu_count() or 1,
        usable_cpu_cores=usable,
        ram_bytes=psutil.virtual_memory().total,
        ipywidgets_version=_version_of("ipywidgets"),
        cpu_quota=limits.cpus,
        ram_limit_bytes=limits.memory_bytes,
    )
