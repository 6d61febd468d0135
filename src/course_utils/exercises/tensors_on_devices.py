"""Checks for notebook 02 (tensors on devices).

Each check calls the reader's function on tensors it makes itself, on the `meta` device
(present on every machine) and on the best device of this machine, and says what is right
or wrong without showing a solution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from course_utils.devices import best_device
from course_utils.exercises import CheckResult, call_reader, describe_error, failed, passed, unanswered
from course_utils.exercises.sandbox import trial_verdict
from course_utils.i18n import N_, _, translated

_MOVES = (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda)  # the calls that take a tensor elsewhere


def check_to_numpy(to_numpy: Callable[[torch.Tensor], np.ndarray]) -> CheckResult:
    """Exercise 1: `to_numpy(t)` returns a NumPy array of `t`'s values, from any device, grad or not.

    A meta tensor has no data to copy, but it tells which calls were made: `.numpy()` on it
    raises a TypeError, while moving it to the CPU first raises NotImplementedError. So the
    check can see whether the function moves to the CPU even on a machine without a GPU.
    """
    if not callable(to_numpy):
        return failed(_("pass your function itself, e.g. check_to_numpy(to_numpy), not its result"))
    if (verdict := unanswered(to_numpy, "to_numpy(t)", _("return t's values as a NumPy array"))) is not None:
        return verdict
    device = best_device()
    generator = torch.Generator().manual_seed(2)
    leaf = torch.randn(2, 3, generator=generator).to(device).requires_grad_()
    cases = {
        N_("a tensor that requires grad"): leaf,
        N_("a tensor computed from one that requires grad"): leaf * 2,
        N_("an integer tensor"): torch.randint(-50, 50, (4,), generator=generator).to(device),
        N_("a single number"): torch.tensor(7, device=device),
    }
    for name, tensor in cases.items():
        what = translated(name)
        outcome = call_reader(to_numpy, tensor)
        if outcome.problem is not None:
            return failed(
                _("on {what} your function {problem}. The message says what to add.").format(
                    what=what, problem=outcome.problem
                )
            )
        result = outcome.value
        if result is None:
            return failed(
                _("on {what} your function returned None: did you forget `return`?").format(what=what)
            )
        if not isinstance(result, np.ndarray):
            return failed(
                _("on {what} it returned a {type}, not a numpy.ndarray").format(
                    what=what, type=type(result).__name__
                )
            )
        expected = tensor.detach().cpu().numpy()
        if result.dtype != expected.dtype:
            return failed(
                _("on {what} the array is {dtype}, not the tensor's {expected}").format(
                    what=what, dtype=result.dtype, expected=expected.dtype
                )
            )
        if result.shape != expected.shape or not np.array_equal(result, expected):
            return failed(_("on {what} the array does not hold the tensor's values").format(what=what))
    try:
        to_numpy(torch.ones(2, device="meta"))
    except SystemExit as err:
        return failed(_("on a meta tensor your function {problem}").format(problem=describe_error(err)))
    except NotImplementedError:
        pass  # it tried to copy the meta tensor to the CPU: the right move, and meta has no data
    except TypeError as err:
        if "numpy" in str(err):
            return failed(
                _(
                    "it works here only because this tensor is on the CPU already: on a GPU tensor it "
                    "would raise, as it did on a meta tensor: it {problem}"
                ).format(problem=describe_error(err))
            )
        return failed(
            _(
                "on a meta tensor it {problem}: a meta tensor has no values, so the function "
                "should move it before anything reads them"
            ).format(problem=describe_error(err))
        )
    except Exception as err:
        return failed(
            _("on a meta tensor it {problem}; it should first move the tensor").format(
                problem=describe_error(err)
            )
        )
    else:
        return failed(_("on a meta tensor (which holds no data) it returned something: what did it convert?"))
    return passed(_("the values come back as NumPy from tensors with grad and from any device"))


def check_add_on_device_of(
    add_on_device_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> CheckResult:
    """Exercise 2: `add_on_device_of(a, b)` returns `a + b` on `a`'s device, wherever `b` is."""
    if not callable(add_on_device_of):
        return failed(_("pass your function itself, e.g. check_add_on_device_of(add_on_device_of)"))
    goal = _("return a + b on a's device, wherever b is")
    if (verdict := unanswered(add_on_device_of, "add_on_device_of(a, b)", goal)) is not None:
        return verdict
    generator = torch.Generator().manual_seed(3)
    pairs = [
        (torch.ones(3, device="meta"), torch.arange(3.0)),
        (torch.ones(2, 3, device="meta"), torch.tensor(5.0)),
        (torch.randn(3, generator=generator).to(best_device()), torch.randn(3, generator=generator)),
        (torch.randn(2, 3, generator=generator).to(best_device()), torch.randn(3, generator=generator)),
    ]
    for a, b in pairs:
        where = _("a on {a}, b on {b}").format(a=a.device.type, b=b.device.type)
        if (verdict := trial_verdict(add_on_device_of, a.clone(), b.clone())) is not None:
            return verdict  # it ended its process or hung
        a_given, moves = a.clone(), _Moves()  # a copy: an in-place sum leaves a as it was
        try:
            with moves:
                result = add_on_device_of(a_given, b.clone())
        except SystemExit as err:
            return failed(
                _("with {where} your function {problem}").format(where=where, problem=describe_error(err))
            )
        except RuntimeError as err:
            if isinstance(err, NotImplementedError) and a.device.type == "meta" and moves.moved:
                return _moved_off_meta(where, err, moves.moved[-1] is a_given)
            return failed(
                _("with {where} it {problem}: which one should move, and where to?").format(
                    where=where, problem=describe_error(err)
                )
            )
        except Exception as err:
            return failed(
                _(
                    "with {where} it {problem}. The message names the call that failed; "
                    "a + b on a's device needs no other operation than a move"
                ).format(where=where, problem=describe_error(err))
            )
        if not isinstance(result, torch.Tensor):
            return failed(
                _("with {where} it returned {type}, not a tensor").format(
                    where=where, type=type(result).__name__
                )
            )
        if result.device != a.device:
            return failed(
                _("with {where} the result is on {device}: it should stay on a's device").format(
                    where=where, device=result.device
                )
            )
        if result.shape != a.shape:
            return failed(
                _("with {where} the result has shape {shape}, not {expected}").format(
                    where=where, shape=tuple(result.shape), expected=tuple(a.shape)
                )
            )
        if result.dtype != torch.result_type(a, b):
            return failed(
                _("with {where} the result is {dtype}, not the sum's dtype").format(
                    where=where, dtype=result.dtype
                )
            )
        if a.device.type != "meta" and not torch.allclose(result.detach().cpu(), a.cpu() + b.cpu()):
            return failed(_("with {where} the values are not a + b").format(where=where))
    return passed(_("b moves to a's device and the sum stays there"))


def _moved_off_meta(where: str, err: BaseException, moved_a: bool) -> CheckResult:
    """The hint when a move copied meta data (none) to a device that holds data: the last tensor moved
    left a's device, and it was `a` itself (`moved_a`) or something computed, such as the sum."""
    if moved_a:
        mistake = _("it moved a itself off its device, where the sum belongs: move only b")
    else:
        mistake = _(
            "it moved a tensor it computed (the sum?) off a's device, where the result belongs: "
            "return the sum where it is, and move only b"
        )
    return failed(
        _("with {where} it {problem}: {mistake}.").format(
            where=where, problem=describe_error(err), mistake=mistake
        )
    )


class _Moves(TorchFunctionMode):
    """Notes each tensor that the reader's function moves (`.to`, `.cpu`, `.cuda`), in order: on a
    meta `a`, whose data no move can copy, the last one tells whether `a` or a result left a's device."""

    def __init__(self) -> None:
        super().__init__()
        self.moved: list[torch.Tensor] = []

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        if func in _MOVES and args:
            self.moved.append(args[0])
        return func(*args, **(kwargs or {}))
