"""Running a reader's function in real ranks for a check, with every failure put in words.

A rank worker calls the reader's function through `call_in_rank`, and the check starts the
workers with `run_ranks`: what the reader's code did (raised, called `sys.exit`, ended its
process with `os._exit`, left a collective its peers were in) comes back as a "Not yet" hint
that names it, never as the launcher's raw error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from course_utils.exercises import CheckResult, describe_error, failed
from course_utils.i18n import N_, _, translated
from course_utils.processes import LaunchError, LaunchTimeoutError, WorkerError, launch

SAME_CALLS = N_("Every rank must make the same collective calls, in the same order.")
# How gloo reports, in the waiting rank, that its peer left a collective (wording varies by
# version and by timing: the connection is closed, or reset, while reading or writing).
PEER_GONE = ("remote worker", "Connection closed", "Connection reset", "Read error", "Broken pipe")


class ReaderFailed(Exception):
    """Raised in a rank when the reader's function raised or called `sys.exit`; says which, in words."""


def call_in_rank(fn: Callable[..., Any], *args: Any) -> Any:
    """Call the reader's `fn(*args)` in a rank; what it raises or `sys.exit` becomes `ReaderFailed`.

    Raising (rather than returning) stops every rank at once, so no peer is left waiting in a
    collective that this rank will never join.
    """
    try:
        return fn(*args)
    except (Exception, SystemExit) as err:
        raise ReaderFailed(describe_error(err)) from err


def exited_without_result(ranks: Sequence[Any]) -> CheckResult | None:
    """A "Not yet" verdict when a rank ended without a result, else None: a rank that calls
    `sys.exit(0)` ends as a success (as under torchrun), so the launch returns None for it."""
    if isinstance(ranks, str | bytes) or not isinstance(ranks, Sequence):
        raise TypeError(
            _("ranks must be the list of results that launch returned, not a {type}").format(
                type=type(ranks).__name__
            )
        )
    for rank, result in enumerate(ranks):
        if result is None:
            return failed(
                _(
                    "rank {rank} ended without a result: your function called sys.exit() (or exit()), "
                    "which ends the whole rank, as a success; return from the function instead."
                ).format(rank=rank)
            )
    return None


def _explain(err: WorkerError, hang_hint: str) -> CheckResult:
    """The hint for a failed launch: what the reader's code did, on which rank."""
    failures = sorted([err, *err.also_failed.values()], key=lambda f: f.rank)

    def peer_gone(failure: WorkerError) -> bool:
        return any(words in failure.message for words in PEER_GONE)

    for failure in failures:
        if failure.exc_type == ReaderFailed.__name__ and not peer_gone(failure):
            return failed(
                _("on rank {rank} your function {problem}").format(
                    rank=failure.rank, problem=failure.message.splitlines()[0]
                )
            )
    for failure in failures:
        if failure.exc_type is None:
            return failed(
                _(
                    "on rank {rank} the process running your function {problem}: something "
                    "in it ended the process (os._exit, a signal, a crash). A rank's work must return."
                ).format(rank=failure.rank, problem=failure.message)
            )
    for failure in failures:
        if peer_gone(failure):
            return failed(
                _(
                    "rank {rank} lost its peer inside a collective: another rank never called it "
                    "and left. {hint}"
                ).format(rank=failure.rank, hint=translated(hang_hint))
            )
    first = err.message.splitlines()[0] if err.message else ""
    return failed(
        _(
            "the check could not finish on rank {rank} after your function ran ({error}: {first}). "
            "Did your function replace or delete something of what it was given?"
        ).format(rank=err.rank, error=err.exc_type, first=first)
    )


def run_ranks(
    worker: Callable[..., Any],
    world_size: int,
    args: Sequence[Any],
    timeout: float,
    hang_hint: str = SAME_CALLS,
) -> list[Any] | CheckResult:
    """Run `worker(*args)` in `world_size` gloo ranks; return the results by rank, or a "Not yet" verdict.

    `hang_hint` is said when the ranks time out or a rank loses its peer in a collective (English,
    marked with `N_()`: it is shown in the notebook's language).
    """
    try:
        return launch(worker, world_size, args=tuple(args), timeout=timeout)
    except LaunchTimeoutError:
        return failed(
            _("the ranks never finished: a collective waited for a rank that skipped it. {hint}").format(
                hint=translated(hang_hint)
            )
        )
    except WorkerError as err:
        return _explain(err, hang_hint)
    except LaunchError as err:
        return failed(_("the ranks could not be started: {error}").format(error=err))
