"""Odd answers, as readers type them, that every exercise check must meet with "Not yet" and a hint."""

from __future__ import annotations

import json
import os
import select
import signal
from collections.abc import Callable

import numpy as np
import pytest
import torch

from course_utils.exercises import sandbox


class AlwaysEqual:
    """An answer whose `==` says True to everything: a check must look at its type first."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "AlwaysEqual()"


def odd_answers() -> list[object]:
    """A NumPy array (ambiguous truth), a meta tensor (no values), unhashables, `==` always True."""
    return [np.array([1, 2]), torch.ones(2, device="meta"), [[1]], {"a": 1}, AlwaysEqual()]


def assert_not_yet(result: object, hint: str = "") -> None:
    """The verdict is "Not yet" and holds `hint`."""
    assert not result and str(result).startswith("Not yet: ") and hint in str(result), str(result)


def checks_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the checks that use this machine's best device use the CPU: on a GPU they would start CUDA
    in the process before they call the reader's function, after which the sandbox can try nothing."""
    from course_utils.exercises import models_on_devices, tensors_on_devices

    for module in (models_on_devices, tensors_on_devices):
        monkeypatch.setattr(module, "best_device", lambda: torch.device("cpu"))


def skip_without_trials() -> None:
    """Skip a test whose reader's function would end or hang pytest if the check called it: where the
    sandbox runs no trial (no fork on this platform, or CUDA already started in this process)."""
    if not sandbox._FORK_TRIAL or sandbox._cuda_started():
        pytest.skip("the sandbox tries a function in a forked child only on Linux, before CUDA starts")


# Values that no count, size or number of seconds can be, as a caller may pass them by mistake.
NOT_COUNTS = [0, -2, 2.5, True, float("nan"), float("inf"), "2", None, "2\0", 10**400, -(10**400)]


def assert_refused(call: Callable[[], object], argument: str, allowed: str = "") -> None:
    """`call()` raises a TypeError or a ValueError (not a subclass: no raw error that happens to be one)
    whose message names `argument` and says `allowed`; no ZeroDivisionError, OverflowError or KeyError."""
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    message = str(caught.value)
    assert type(caught.value) in (TypeError, ValueError), f"{type(caught.value).__name__}: {message}"
    assert argument in message and allowed in message, message


HANG_GUARD_SECONDS = 600  # only so that a check that hangs its caller fails instead of hanging pytest


def verdicts_in_a_kernel(
    check: Callable[[object], object], functions: dict[str, Callable]
) -> tuple[list, int]:
    """Run `check` on each of `functions` (by name) in one forked child that stands for the kernel, so
    that a check that lets the function end or hang its caller fails a test instead of ending or hanging
    pytest: what each call returned or raised (a dict each, in order), and the child's wait status."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the kernel: never returns into pytest
        try:
            os.close(read_end)
            # A fork of a pytest worker whose OpenMP threads ran before: one thread, or a parallel
            # region can wait forever for threads the fork did not copy (seen once in a full run).
            torch.set_num_threads(1)
            for kind, fn in functions.items():
                try:
                    verdict = check(fn)
                    line = {
                        "kind": kind,
                        "type": type(verdict).__name__,
                        "ok": bool(verdict),
                        "text": str(verdict),
                    }
                except BaseException as err:  # any escape is what the test reports
                    line = {"kind": kind, "raised": f"{type(err).__name__}: {err}"}
                os.write(write_end, (json.dumps(line) + "\n").encode())
        finally:
            os._exit(0)
    os.close(write_end)
    output = b""
    try:
        while select.select([read_end], [], [], HANG_GUARD_SECONDS)[0]:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            output += chunk
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(read_end)
        status = os.waitpid(pid, 0)[1]
    return [json.loads(line) for line in output.decode().splitlines()], status
