"""Self-checking exercises: each notebook's checks live in a module named after it.

A check looks at the reader's answer and says what is right or wrong, never the solution.
The helpers here read answers the same way in every check: a whole number is any integer
(int, NumPy integer, 0-d integer tensor), never a float or a string that would need rounding;
a reader's function is called so that whatever it does (raise, `sys.exit`) becomes a hint, and a
function still as the notebook ships it hears that the exercise is not answered yet (`unanswered`).
"""

from __future__ import annotations

import dis
import math
import numbers
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from course_utils._checks import shown
from course_utils.i18n import _, spaced

MAX_COUNT = 2**63 - 1  # the largest count an int64 holds, as PyTorch's sizes and counters do


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one exercise check; shows as one readable line in a notebook."""

    ok: bool
    message: str

    def __str__(self) -> str:
        verdict = _("Correct: {message}") if self.ok else _("Not yet: {message}")
        return spaced(verdict.format(message=self.message))

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return self.ok


def passed(message: str) -> CheckResult:
    """A successful verdict with a line on why the answer is right."""
    return CheckResult(True, message)


def failed(message: str) -> CheckResult:
    """An unsuccessful verdict with a hint on what to look at, not the answer."""
    return CheckResult(False, message)


def not_a_function(answer: object, call: str) -> CheckResult | None:
    """The verdict for an answer that should be a function but is not (`call` shows how it is called)."""
    if answer is None or answer is Ellipsis:
        return failed(_("write `{call}` and pass the function itself (no call).").format(call=call))
    if not callable(answer):
        return failed(_("pass the function itself, not a {type}.").format(type=type(answer).__name__))
    return None


# Bytecode that runs no code of the reader's: the interpreter's bookkeeping, and what a placeholder
# body compiles to (`...`, `pass` or a docstring return None; `raise NotImplementedError("...")`).
_BOOKKEEPING = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "NOT_TAKEN"}
_RAISE_PLACEHOLDER = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_CONST", "PUSH_NULL", "PRECALL", "CALL", "KW_NAMES"}


def is_placeholder(fn: object) -> bool:
    """Whether `fn` is still the exercise's placeholder: a body of only a docstring, `...`, `pass`,
    `return None`, `return ...` or `raise NotImplementedError(...)`, which is how the notebooks ship
    an exercise's function. A function with any code of the reader's in it is not one."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    ops = [op for op in dis.get_instructions(code) if op.opname not in _BOOKKEEPING]
    names = [op.opname for op in ops]
    if names in (["LOAD_CONST", "RETURN_VALUE"], ["RETURN_CONST"]):
        return ops[0].argval is None or ops[0].argval is Ellipsis
    loaded = [op.argval for op in ops if op.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
    return (
        names[-1:] == ["RAISE_VARARGS"]
        and loaded == ["NotImplementedError"]
        and set(names[:-1]) <= _RAISE_PLACEHOLDER
    )


def unanswered(fn: object, call: str, goal: str) -> CheckResult | None:
    """A "Not yet" verdict that says the exercise is not answered yet and what to write (`goal`,
    a phrase in the notebook's language) when `fn` is its placeholder (`is_placeholder`); else None.
    Only a function the reader did write hears that it returned None ("did you forget `return`?")."""
    if not is_placeholder(fn):
        return None
    return failed(
        _(
            "`{call}` is not answered yet: its body is still the notebook's placeholder. Replace it "
            "with your code: {goal}."
        ).format(call=call, goal=goal)
    )


def _tensor_item(value: torch.Tensor) -> object:
    """The number a 0-d tensor holds, or None when it holds none (a meta or fake tensor)."""
    if value.ndim != 0 or value.is_meta:
        return None
    try:
        return value.item()
    except Exception:  # a tensor subclass without data
        return None


def _non_integer_dtype(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool


def integral_value(value: object) -> int | None:
    """`value` as an int when it is an integer: an int, a NumPy integer or a 0-d integer tensor.

    None for anything else: a bool, a float (even 3.0: the course never rounds an answer), a
    string, an array of several numbers, a tensor without data. Checks compare the int, so an
    object whose `==` always says True never passes.
    """
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, torch.Tensor) and not _non_integer_dtype(value):
        item = _tensor_item(value)
        return item if isinstance(item, int) else None
    return None


def integral_list(value: object) -> list[int] | None:
    """`value` as a list of ints when it is a list, tuple or 1-D array/tensor of integers; else None."""
    if isinstance(value, np.ndarray | torch.Tensor):
        if value.ndim != 1 or (isinstance(value, torch.Tensor) and value.is_meta):
            return None
        value = list(value)
    if not isinstance(value, list | tuple):
        return None
    items = [integral_value(item) for item in value]
    if any(item is None for item in items):
        return None
    return items  # type: ignore[return-value]


def real_value(value: object) -> float | None:
    """`value` as a float when it is one finite real number (int, float, NumPy or 0-d tensor); else None."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, torch.Tensor):
        value = None if value.is_complex() or value.dtype == torch.bool else _tensor_item(value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float, such as 10**400
        return None
    return number if math.isfinite(number) else None


def positive_count(value: object, name: str, most: int = MAX_COUNT) -> int:
    """`value` as an int if it is a whole number from 1 to `most` (ranks, stages, layers, heads,
    FLOPs), else an error that names `name`: the reference helpers' rule for their counts."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            _("{name} must be a whole number such as 2, not {value}").format(name=name, value=shown(value))
        )
    if value < 1:
        raise ValueError(_("{name} must be at least 1, not {value}").format(name=name, value=shown(value)))
    if value > most:
        raise ValueError(
            _("{name} must be at most {most}, not {value}").format(name=name, most=most, value=shown(value))
        )
    return int(value)


def whole_number_hint(value: object, what: str) -> str:
    """A hint for an answer that should be a whole number but is not an integer."""
    if isinstance(value, float | np.floating) or (
        isinstance(value, torch.Tensor) and value.is_floating_point()
    ):
        return _("{what} is a whole number: give an int, not a float (// divides without one).").format(
            what=what
        )
    if isinstance(value, str):
        return _("{what} is a whole number: write it without quotes.").format(what=what)
    return _("{what} is a whole number (an int), not a {type}.").format(what=what, type=type(value).__name__)


@dataclass(frozen=True)
class Outcome:
    """What a call of the reader's function gave: its value, or what went wrong (`problem`)."""

    value: Any = None
    problem: str | None = None


def describe_error(err: BaseException) -> str:
    """What the reader's function did when it raised `err`, in words that follow "your function"."""
    if isinstance(err, SystemExit):
        code = "" if err.code is None else repr(err.code)
        return _(
            "called sys.exit({code}), which ends the whole process; return from the function instead"
        ).format(code=code)
    text = str(err).strip().removesuffix(".")  # the hint goes on after it, often with its own "."
    if not text:
        return _("raised {name}").format(name=type(err).__name__)
    return _("raised {name}: {error}").format(name=type(err).__name__, error=text)


def call_reader(fn: Callable[..., Any], *args: Any) -> Outcome:
    """Call the reader's `fn(*args)`; an exception or `sys.exit` becomes a `problem` in words.

    `problem` follows "your function": "raised KeyError: 'grad'", "called sys.exit(3), ...".
    A function that would end or hang the kernel is stopped in a trial run first
    (`sandbox.trial`). Ctrl-C still stops the check.
    """
    from course_utils.exercises.sandbox import trial  # it builds on this module

    if (problem := trial(fn, *args)) is not None:
        return Outcome(problem=problem)
    try:
        return Outcome(fn(*args))
    except (Exception, SystemExit) as err:
        return Outcome(problem=describe_error(err))
