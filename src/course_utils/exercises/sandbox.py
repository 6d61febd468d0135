"""A trial run of the reader's function where its exit cannot reach the kernel, before a check calls it.

A check calls the reader's function in the kernel's own process (its return value, and what it
did to its arguments, are what is checked). A function that ends its process (`os._exit`, a
signal) would end the kernel, and one that never returns would hang it. So the function first
runs once in a child forked from the kernel, its output discarded: if the child ends without the
function returning (or raising), or the function has not returned within `TRIAL_SECONDS`, the
check says so and never calls it in the kernel. The child leads a process group of its own,
which is killed afterwards with everything it started. A fork of a kernel that has imported
PyTorch costs tens of milliseconds, so a function that passed a trial is not tried again: a
check that calls it on several inputs tries it on the first. A check that runs the function in
ranks instead tries it with `Probe` arguments first (`probe_verdict`), which catches a function
that ends or hangs before it uses them without starting a rank. `TRIAL_SECONDS` is read at each
trial, so a test may set it small.

Where a fork cannot run the function as the kernel would, there is no trial and the check calls
the function directly: on platforms without fork (Windows; macOS, whose libraries are not all
fork-safe), and once CUDA has started in the kernel (a forked child cannot use it).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from course_utils._checks import timeout_seconds
from course_utils.exercises import CheckResult, failed
from course_utils.gpus import cuda_driver_started
from course_utils.i18n import _
from course_utils.processes.supervision import FORK_WARNING, isolate, signal_group
from course_utils.processes.watchdog import release_group, watch_group

TRIAL_SECONDS = 10.0  # far more than any exercise's function needs on a small machine
_FORK_TRIAL = sys.platform.startswith("linux")
_passed: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()  # functions that returned in a trial


def _cuda_started() -> bool:
    """Whether CUDA has started in this process, after which a forked child cannot use it."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized()) or cuda_driver_started()


def _tried(fn: Callable[..., Any]) -> bool:
    """Whether `fn` returned in an earlier trial."""
    try:
        return fn in _passed
    except TypeError:
        return False


def trial(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> str | None:
    """Run `fn(*args)` once in a forked child; None if it returned or raised there, else what it
    did, in words that follow "your function" ("ended the process ...", "did not return within 10 s
    ..."); `timeout` is `TRIAL_SECONDS` unless given (a test sets either small)."""
    if not callable(fn):
        raise TypeError(_("fn must be the reader's function, not a {type}").format(type=type(fn).__name__))
    timeout = (
        timeout_seconds("TRIAL_SECONDS", TRIAL_SECONDS)
        if timeout is None
        else timeout_seconds("timeout", timeout)
    )
    if not _FORK_TRIAL or _tried(fn) or _cuda_started():
        return None
    parent = os.getpid()
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=FORK_WARNING, category=DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        try:
            os.close(read_end)
            isolate(parent)
            _quiet()
            if "torch" in sys.modules:  # a fork of a kernel whose OpenMP threads ran: the fork has none
                sys.modules["torch"].set_num_threads(1)
            with contextlib.suppress(BaseException):
                fn(*args)
            os.write(write_end, b"1")
        finally:
            os._exit(0)
    os.close(write_end)
    watch_group(pid)  # killed by the watchdog should the kernel be killed meanwhile
    try:
        if not select.select([read_end], [], [], timeout)[0]:
            return _(
                "did not return within {seconds:g} s, so the check stopped it (it would have hung the "
                "notebook): look for a loop that never ends, or a wait for something that never comes"
            ).format(seconds=timeout)
        if os.read(read_end, 1) != b"1":
            return _(
                "ended the process it ran in without returning (os._exit, a signal or a crash), which in "
                "the notebook would end the kernel: return a value instead"
            )
        with contextlib.suppress(TypeError):  # a function that cannot be weakly referenced is tried each time
            _passed.add(fn)
        return None
    finally:
        signal_group(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        release_group(pid)
        os.close(read_end)


def trial_verdict(fn: Callable[..., Any], *args: Any) -> CheckResult | None:
    """A "Not yet" verdict when `fn(*args)` ends its process or hangs in a `trial`; else None."""
    problem = trial(fn, *args)
    return None if problem is None else failed(_("your function {problem}.").format(problem=problem))


class Touched(Exception):
    """Raised by a `Probe` when the reader's function uses it."""


class Probe:
    """An argument that raises `Touched` at any use: shows whether a function does anything with it."""

    def __getattr__(self, name: str) -> Any:
        raise Touched

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A call is a use too."""
        raise Touched

    def __iter__(self) -> Any:
        raise Touched


def probe_verdict(fn: Callable[..., Any], arity: int) -> CheckResult | None:
    """A "Not yet" verdict when `fn`, given `arity` `Probe`s, ends its process or hangs in a `trial`
    before it uses any of them; else None. A check that runs the function in ranks tries it so first:
    an exit or a hang costs a fork, not the start of every rank and a launch timeout. Not remembered
    as a passed trial: a function that touched a probe has not yet run on real arguments."""
    probes = [Probe() for _ in range(arity)]
    return trial_verdict(lambda: fn(*probes))


def _quiet() -> None:
    """In the trial's child: no input, output discarded (the real call prints it), one thread
    (OpenMP's threads do not survive a fork of a process that has computed)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
