"""Scaffolding for reading `torch.profiler` traces in notebook cells.

Some PyTorch releases' profiler (its Kineto library) writes "profiler_start" and "profiler_stop"
lines straight to the process's standard error (file descriptor 2) when a trace starts and stops.
A notebook cell must not write to stderr (the tests fail on it), and Python's
`contextlib.redirect_stderr` cannot catch writes made by C++ code, so `native_stderr_silenced`
points descriptor 2 at /dev/null for the duration of a `with` block.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["native_stderr_silenced"]


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Discard what native code writes to file descriptor 2 inside the block; exceptions still propagate.

    Use it only around a call whose stderr lines are known noise, such as the profiler's.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
