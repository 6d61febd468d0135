"""Self-checking exercises: each notebook's checks live in a module named after it.

A check looks at the reader's answer and says what is right or wrong, never the solution.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one exercise check; shows as one readable line in a notebook."""

    ok: bool
    message: str

    def __str__(self) -> str:
        return f"{'Correct' if self.ok else 'Not yet'}: {self.message}"

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
        return failed(f"write `{call}` and pass the function itself (no call).")
    if not callable(answer):
        return failed(f"pass the function itself, not a {type(answer).__name__}.")
    return None
