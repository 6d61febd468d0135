"""Devices: the best one this machine has, where a model lives, and how to hide GPUs from a child.

Used by notebooks 02 and 03. The lessons' own calls (`x.to(device)`, `model.to(device)`,
`torch.accelerator.synchronize()`) stay in the notebook cells; this module holds what is
scaffolding around them.

About the `meta` device: it is a real PyTorch device that records shapes and dtypes but holds
no data. Every machine has it, so the course uses it as a second device on a CPU-only machine.
Element-wise operations and `nn.Linear` check that their inputs share a device on `meta` as
they do on a GPU; a few operations (matrix products among them) do not check there, so the
notebooks show the rule with the ones that do.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.i18n import _

# Variables that hide GPUs from a child process (`run_python(code, env=HIDE_GPUS)`): there
# `torch.cuda.is_available()` is False, as on a CPU-only machine, whatever this machine has.
# CUDA (and ROCm, which PyTorch also drives through torch.cuda) read CUDA_VISIBLE_DEVICES; an
# empty value means "no GPU at all".
HIDE_GPUS = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}


def best_device() -> torch.device:
    """The device the course computes on: the current accelerator if there is one, else the CPU.

    Follows `torch.accelerator`, so it picks CUDA, ROCm, MPS or XPU alike. The device carries
    its index (`cuda:0`, not `cuda`) because a tensor's `.device` always has one, and
    `torch.device("cuda") == torch.device("cuda:0")` is False.
    """
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    if accelerator is None:
        return torch.device("cpu")
    return torch.device(accelerator.type, torch.accelerator.current_device_index())


def use_pin_memory(device: torch.device | str) -> bool:
    """Whether a DataLoader feeding `device` should pin its batches (`pin_memory=True`).

    Pinned (page-locked) CPU memory speeds up copies from the CPU to an accelerator and lets
    `non_blocking=True` copies overlap with compute. It is pointless for the CPU (and `meta`),
    and PyTorch 2.13's DataLoader does not pin for MPS: with `pin_memory=True` it warns and
    turns pinning off. So: True for an accelerator device other than MPS, when an accelerator
    is present.
    """
    if not isinstance(device, torch.device | str):
        raise TypeError(
            _("device must be a torch.device or a string such as 'cuda:0', not {device!r}").format(
                device=device
            )
        )
    try:
        device = torch.device(device)
    except RuntimeError as err:
        raise ValueError(
            _("device must name a device such as 'cuda:0' or 'cpu', not {device!r} ({err})").format(
                device=device, err=err
            )
        ) from None
    if device.type in ("cpu", "meta", "mps"):
        return False
    return torch.accelerator.is_available()


class _OpRecorder(TorchDispatchMode):
    """Records the name of every ATen operator that runs while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: tuple[type, ...],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def aten_ops(fn: Callable[[], object]) -> list[str]:
    """The ATen operators that `fn()` runs, in order, such as `['aten.zeros', 'aten._to_copy']`.

    Every tensor operation ends in ATen operators, and a copy to another device or dtype shows
    up as `aten._to_copy`; so this shows what a call really does, without a profiler and on
    any device, `meta` included. Operators that run inside another one are not listed, and a
    call that builds a tensor straight from Python data (`torch.tensor([...])`) may run none
    that can be seen here.
    """
    if not callable(fn):
        raise TypeError(
            _(
                "fn: aten_ops needs a function to call, e.g. aten_ops(lambda: torch.zeros(2)), not {fn!r}"
            ).format(fn=fn)
        )
    with _OpRecorder() as recorder:
        fn()
    return recorder.ops


def module_devices(module: nn.Module) -> set[torch.device]:
    """Every device that holds one of the module's parameters or buffers.

    A model that is wholly on one device gives a set of one; a model half moved gives two,
    which is the bug this helps to find. A module with no parameters or buffers gives an
    empty set.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(
            _("module_devices expects an nn.Module, got {type_name}").format(type_name=type(module).__name__)
        )
    tensors = [*module.parameters(), *module.buffers()]
    return {t.device for t in tensors}
