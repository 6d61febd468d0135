"""Checks for the exercises of notebook 01 (device queries)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from unittest import mock

import torch

from course_utils.exercises import (
    CheckResult,
    call_reader,
    failed,
    integral_value,
    passed,
    unanswered,
    whole_number_hint,
)
from course_utils.i18n import N_, _, translated

# The machines the reader's line is run on: (name, the accelerator it has, or None for none).
MACHINES: tuple[tuple[str, str | None], ...] = (
    (N_("this machine"), "here"),
    (N_("a machine with an NVIDIA or AMD GPU (cuda)"), "cuda"),
    (N_("a Mac with Apple silicon (mps)"), "mps"),
    (N_("a machine with an Intel GPU (xpu)"), "xpu"),
    (N_("a machine with no accelerator"), None),
)


@contextlib.contextmanager
def _machine(kind: str | None) -> Iterator[None]:
    """Make torch.accelerator, torch.cuda, torch.backends.mps and torch.xpu report `kind` (None: none).

    The patched functions are restored when the block ends, also on an error.
    """
    present = kind is not None

    def current_accelerator(check_available: bool = False) -> torch.device | None:
        return torch.device(kind) if present else None

    patches = [
        mock.patch.object(torch.accelerator, "is_available", lambda: present),
        mock.patch.object(torch.accelerator, "current_accelerator", current_accelerator),
        mock.patch.object(torch.accelerator, "device_count", lambda: int(present)),
        mock.patch.object(torch.cuda, "is_available", lambda: kind == "cuda"),
        mock.patch.object(torch.cuda, "device_count", lambda: int(kind == "cuda")),
        mock.patch.object(torch.backends.mps, "is_available", lambda: kind == "mps"),
        mock.patch.object(torch.xpu, "is_available", lambda: kind == "xpu"),
    ]
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


def _this_machine() -> str:
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return accelerator.type if accelerator is not None else "cpu"


def check_device_choice(pick_device: Callable[[], torch.device]) -> CheckResult:
    """Run the reader's `pick_device()` here and on four pretended machines; say where it picks wrong.

    The pretended machines patch `torch.accelerator`, `torch.cuda`, `torch.backends.mps` and
    `torch.xpu` to report one accelerator (or none) while the line runs, and restore them after,
    so a hard-coded device or a CUDA-only test fails on the machines it would fail on for real.
    """
    if pick_device is Ellipsis:
        return failed(
            _("define pick_device() with the one line in its return statement, then pass it (no brackets).")
        )
    if isinstance(pick_device, torch.device | str):
        return failed(
            _("pass the function pick_device itself (no brackets), so that the check can run your line.")
        )
    if not callable(pick_device):
        return failed(
            _("expected the function pick_device, got a {type}.").format(type=type(pick_device).__name__)
        )
    goal = _("return the accelerator this PyTorch can use, else the CPU, as a torch.device")
    if (verdict := unanswered(pick_device, "pick_device()", goal)) is not None:
        return verdict
    wrong = []
    for name, kind in MACHINES:
        expected = _this_machine() if kind == "here" else kind or "cpu"
        if kind == "here":
            outcome = call_reader(pick_device)
        else:
            with _machine(kind):
                outcome = call_reader(pick_device)
        if outcome.problem is not None:  # the reader's line may raise anything; say where and what
            wrong.append(
                _("on {machine} it {problem}").format(
                    machine=translated(name), problem=outcome.problem.split(":")[0]
                )
            )
            continue
        answer = outcome.value
        if answer is Ellipsis:
            return failed(
                _("replace ... in pick_device with one line that picks the accelerator, else the CPU.")
            )
        if isinstance(answer, str):
            return failed(_("your line returns a string; wrap it in torch.device(...)."))
        if not isinstance(answer, torch.device):
            return failed(
                _("your line returns a {type}; it should return a torch.device.").format(
                    type=type(answer).__name__
                )
            )
        if answer.type != expected:
            wrong.append(
                _("on {machine} it picks {picked}, not {expected}").format(
                    machine=translated(name), picked=repr(answer.type), expected=repr(expected)
                )
            )
    if wrong:
        return failed(
            _("{wrong}. Ask at run time which accelerator this PyTorch can use, whatever its kind.").format(
                wrong=_("; ").join(wrong)
            )
        )
    return passed(
        _("your line picks the accelerator on CUDA, MPS and XPU machines, and the CPU without one.")
    )


def check_hidden_gpu_count(answer: object) -> CheckResult:
    """Check the reader's prediction of device_count() under CUDA_VISIBLE_DEVICES=''."""
    if answer is Ellipsis:
        return failed(_("replace ... with the number you expect."))
    value = integral_value(answer)
    if value is None:
        return failed(whole_number_hint(answer, _("a count of devices")))
    if value == 0:
        return passed(_("an empty CUDA_VISIBLE_DEVICES hides every GPU, on every machine."))
    return failed(
        _("rerun the probe cell of section 3 and read what device_count() printed in the child process.")
    )
