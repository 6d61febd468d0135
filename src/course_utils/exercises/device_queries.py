"""Checks for the exercises of notebook 01 (device queries)."""

from __future__ import annotations

import torch

from course_utils.exercises import CheckResult, failed, passed


def check_device_choice(answer: object) -> CheckResult:
    """Check the device the reader's device-agnostic line picked on this machine."""
    if answer is Ellipsis:
        return failed("replace ... with one line that picks the accelerator if there is one, else the CPU.")
    if isinstance(answer, str):
        return failed("that is a string; wrap it in torch.device(...) so that it is checked once, here.")
    if not isinstance(answer, torch.device):
        return failed(f"expected a torch.device, got a {type(answer).__name__}.")
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    expected = accelerator.type if accelerator is not None else "cpu"
    if answer.type == expected:
        return passed(f"{answer} is the right choice on this machine, and the line works on any other.")
    if answer.type == "cpu":
        return failed("this machine has an accelerator, and your line ignored it.")
    return failed(
        f"this machine has no usable {answer.type!r} device. Did you check availability at run time?"
    )


def check_hidden_gpu_count(answer: object) -> CheckResult:
    """Check the reader's prediction of device_count() under CUDA_VISIBLE_DEVICES=''."""
    if answer is Ellipsis:
        return failed("replace ... with the number you expect.")
    if answer == 0 and not isinstance(answer, bool):
        return passed("an empty CUDA_VISIBLE_DEVICES hides every GPU, on every machine.")
    return failed(
        "rerun the probe cell of section 3 and read what device_count() printed in the child process."
    )
