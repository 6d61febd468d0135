"""Checks for the exercises of notebook 00 (start here)."""

from __future__ import annotations

import torch

from course_utils.exercises import CheckResult, failed, integral_value, passed, whole_number_hint
from course_utils.i18n import _


def check_accelerator(answer: object) -> CheckResult:
    """Check the reader's accelerator type ("cuda", "mps", ... or None) against torch.accelerator."""
    if answer is Ellipsis:
        return failed(_('replace ... with a device type such as "cuda" or "mps", or None for none.'))
    actual = torch.accelerator.current_accelerator(check_available=True)
    expected = None if actual is None else actual.type
    if not (answer is None or isinstance(answer, str)):
        return failed(_("give a string or None, not a {type}.").format(type=type(answer).__name__))
    if answer == expected:
        return passed(_("torch.accelerator reports {expected} here too.").format(expected=repr(expected)))
    return failed(
        _(
            "{answer} is not what PyTorch found. Look at the 'Accelerator' row of the report, "
            "or ask torch.accelerator yourself."
        ).format(answer=repr(answer))
    )


def check_cpu_threads(answer: object) -> CheckResult:
    """Check the reader's count of CPU threads PyTorch uses for one operation."""
    if answer is Ellipsis:
        return failed(_("replace ... with a whole number."))
    value = integral_value(answer)
    if value is None:
        return failed(whole_number_hint(answer, _("the count")))
    if value == torch.get_num_threads():
        return passed(_("that is torch.get_num_threads() on this machine."))
    return failed(
        _(
            "not the number PyTorch uses. It is close to the 'usable' CPU cores of the report; "
            "torch has a function whose name says 'num_threads'."
        )
    )
