"""The checks of what a student passes in, shared by every module: a bad value is a clear error at once.

Each check takes the argument's name and its value, returns the value as the caller uses it, and
otherwise raises a TypeError (the wrong kind of thing) or a ValueError (the right kind, a value
that cannot work) whose message names the argument and says what to pass, in the notebook's
language. A raw error from deep inside (`embedded null byte` from the OS, an OverflowError from a
huge int, a timeout that never ends) would leave the student guessing which argument was wrong.
"""

from __future__ import annotations

import math
import operator
import os
import reprlib
from collections.abc import Mapping, Sequence

from course_utils.i18n import _

MAX_TIMEOUT = 7 * 24 * 3600.0  # a week: longer waits overflow the clocks of sockets and stores
_REPR = reprlib.Repr()  # a message shows a value, not pages of it
_REPR.maxstring = _REPR.maxother = 120


def shown(value: object) -> str:
    """`repr(value)` for a message, shortened where it is long; an int too long to read (Python refuses
    to print one of over 4300 digits) is summarised by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        digits = math.floor(value.bit_length() * math.log10(2)) + 1
        return _("an int of about {digits} digits").format(digits=digits)
    try:
        return _REPR.repr(value)
    except ValueError:  # it holds an int Python refuses to print
        return _("a {type_name} too long to show").format(type_name=type(value).__name__)


def whole_number(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """`value` as an int from `low` to `high` (either may be None: no bound), else an error naming `name`.

    Any integer type counts (numpy's too); True and False do not, though Python counts them as 1
    and 0, and neither does 2.0: a count is never rounded, so that a slip cannot start other work.
    """
    number = None
    if not isinstance(value, bool):
        try:
            number = operator.index(value)  # type: ignore[call-overload]
        except TypeError:
            pass
    if number is None:
        raise TypeError(
            _("{name} must be a whole number (an int such as 2), not {value}").format(
                name=name, value=shown(value)
            )
        )
    if (low is not None and number < low) or (high is not None and number > high):
        if high is None:
            allowed = _("at least {low}").format(low=low)
        elif low is None:
            allowed = _("at most {high}").format(high=high)
        else:
            allowed = _("from {low} to {high}").format(low=low, high=high)
        raise ValueError(
            _("{name} must be a whole number {allowed}, not {value}").format(
                name=name, allowed=allowed, value=shown(number)
            )
        )
    return number


def timeout_seconds(name: str, value: object) -> float:
    """`value` as seconds to wait, 0 < value <= a week, else an error naming `name`: every wait ends."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            _("{name} must be a number of seconds, such as 60, not {timeout}").format(
                name=name, timeout=shown(value)
            )
        )
    if not (0 < value <= MAX_TIMEOUT and math.isfinite(value)):  # an int too big for a float: False
        raise ValueError(
            _(
                "{name} must be a positive number of seconds, at most {max_timeout:g} (a week), "
                "not {timeout}; pass e.g. {name}=60"
            ).format(name=name, max_timeout=MAX_TIMEOUT, timeout=shown(value))
        )
    return float(value)


def flag(name: str, value: object) -> bool:
    """`value` if it is True or False, else a TypeError naming `name` (a string such as "no" would
    count as true)."""
    if not isinstance(value, bool):
        raise TypeError(_("{name} is True or False, not {value}").format(name=name, value=shown(value)))
    return value


def text(name: str, value: object, example: str, empty: bool = False) -> str:
    """`value` if it is a str without a NUL character (no file name, command line or environment can
    carry one) and, unless `empty`, not empty; else an error naming `name` with `example` to follow."""
    if not isinstance(value, str):
        raise TypeError(
            _("{name} must be text (a str) such as {example}, not {value}").format(
                name=name, example=example, value=shown(value)
            )
        )
    if not value and not empty:
        raise ValueError(_("{name} is empty; pass text such as {example}").format(name=name, example=example))
    if "\0" in value:
        raise ValueError(
            _(
                "{name} holds a NUL character ('\\0'), which no file name, command line or environment "
                "can carry: {value}"
            ).format(name=name, value=shown(value))
        )
    return value


def path(name: str, value: object, example: str = "'model.pt'") -> str:
    """`value` (a str or a Path) as a str, if it can name a file: not empty, without a NUL character;
    else an error naming `name`. `''` is refused rather than read as the current folder."""
    if not isinstance(value, str | os.PathLike) or not isinstance(os.fspath(value), str):
        raise TypeError(
            _(
                "{name} must be the path of a file or folder (a str or a Path) such as {example}, not {value}"
            ).format(name=name, example=example, value=shown(value))
        )
    return text(name, os.fspath(value), example)


def strings(name: str, value: object) -> list[str]:
    """`value` as a list of strings, such as a command line's arguments, else an error naming `name`:
    a str alone is refused (its letters would become arguments), and so are NUL characters."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(
            _("{name} must be a list of strings, e.g. ['--epochs', '2'], not {value}").format(
                name=name, value=shown(value)
            )
        )
    if not all(isinstance(item, str) for item in value):
        raise TypeError(
            _("{name} must hold strings only (write numbers as '2'), not {value}").format(
                name=name, value=shown(list(value))
            )
        )
    return [text(name, item, "'--epochs'", empty=True) for item in value]


def environment(name: str, value: object) -> dict[str, str | None]:
    """`value` as a dict of changes to an environment, else an error naming `name`: variable names
    (non-empty, without '=' or NUL) to a str (set it) or None (remove it). None: no changes."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            _(
                "{name} must be a mapping such as {{'OMP_NUM_THREADS': '1'}} (str to str, or None to "
                "remove a variable), not {env_type}"
            ).format(name=name, env_type=type(value).__name__)
        )
    for variable, setting in value.items():
        if not isinstance(variable, str) or not variable:
            raise TypeError(
                _(
                    "{name} must map variable names (non-empty strings) to values; {variable} is not one"
                ).format(name=name, variable=shown(variable))
            )
        if "=" in variable or "\0" in variable:
            raise ValueError(
                _("{name}: a variable name holds neither '=' nor a NUL character; {variable} does").format(
                    name=name, variable=shown(variable)
                )
            )
        if isinstance(setting, str) and "\0" in setting:
            raise ValueError(
                _(
                    "{name}: the value of {variable} holds a NUL character, which no environment can carry"
                ).format(name=name, variable=variable)
            )
        if not isinstance(setting, str | None):
            raise TypeError(
                _(
                    "{name} must map names to str (set the variable) or None (remove it); {variable} is "
                    "{value_type} {value}: write it as a string, e.g. {text}"
                ).format(
                    name=name,
                    variable=variable,
                    value_type=type(setting).__name__,
                    value=shown(setting),
                    text=shown(shown(setting)),  # str(setting) refuses an int of over 4300 digits
                )
            )
    return dict(value)
