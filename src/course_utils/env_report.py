"""An environment report: what this machine offers the course, in one table.

Used by notebook 00 so that a student (or an instructor reading a bug report) sees at once
which Python and PyTorch run, which accelerator PyTorch found, what NVML says, and how many
CPU cores and how much memory there are.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from importlib import metadata

import psutil
import torch

from course_utils.gpus import Inventory, nvml_inventory


@dataclass(frozen=True)
class EnvironmentReport:
    """Facts about this machine and environment that decide how the course runs here."""

    python_version: str
    torch_version: str
    torch_cuda_build: str | None  # CUDA version torch was built with; None for a CPU build
    accelerator: str | None  # torch.accelerator's device type: "cuda", "mps", "xpu"... or None
    accelerator_count: int
    device_names: tuple[str, ...]
    nvml: Inventory
    cuda_visible_devices: str | None
    cpu_cores: int
    usable_cpu_cores: int
    ram_bytes: int
    ipywidgets_version: str | None

    def rows(self) -> list[tuple[str, str]]:
        """The report as (label, value) pairs, in reading order."""
        names = ", ".join(self.device_names) or "-"
        if self.nvml.reason:
            nvml = f"unavailable: {self.nvml.reason}"
        else:
            nvml = f"driver {self.nvml.driver_version}, {len(self.nvml)} GPU(s)"
        visible = "(not set)" if self.cuda_visible_devices is None else repr(self.cuda_visible_devices)
        return [
            ("Python", self.python_version),
            ("PyTorch", self.torch_version),
            ("PyTorch built with CUDA", self.torch_cuda_build or "no (CPU-only build)"),
            ("Accelerator (torch.accelerator)", self.accelerator or "none: running on the CPU"),
            ("Accelerator devices", str(self.accelerator_count)),
            ("Device names", names),
            ("NVML", nvml),
            ("CUDA_VISIBLE_DEVICES", visible),
            ("CPU cores (usable / total)", f"{self.usable_cpu_cores} / {self.cpu_cores}"),
            ("RAM", f"{self.ram_bytes / 2**30:.1f} GiB"),
            ("ipywidgets", self.ipywidgets_version or "missing: the GPU picker will not show"),
        ]

    def __str__(self) -> str:
        width = max(len(label) for label, _ in self.rows())
        return "\n".join(f"{label:<{width}}  {value}" for label, value in self.rows())


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


def environment_report() -> EnvironmentReport:
    """Collect the report; never raises on a machine without GPUs or drivers."""
    available = torch.accelerator.is_available()
    kind = torch.accelerator.current_accelerator().type if available else None
    count = torch.accelerator.device_count() if available else 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        usable = os.cpu_count() or 1
    return EnvironmentReport(
        python_version=platform.python_version(),
        torch_version=torch.__version__,
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
    )
