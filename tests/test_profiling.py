"""native_stderr_silenced drops what native code writes to descriptor 2, and only inside the block."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from course_utils.profiling import native_stderr_silenced


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=True
    )


def test_writes_to_fd_2_inside_are_dropped_and_restored_after():
    done = run(
        """
        import os
        from course_utils.profiling import native_stderr_silenced
        os.write(2, b"before\\n")
        with native_stderr_silenced():
            os.write(2, b"inside\\n")
        os.write(2, b"after\\n")
        print("stdout untouched")
        """
    )
    assert done.stderr == "before\nafter\n"
    assert done.stdout == "stdout untouched\n"


def test_the_profilers_lines_do_not_reach_stderr():
    done = run(
        """
        import torch
        from torch.profiler import ProfilerActivity, profile
        from course_utils.profiling import native_stderr_silenced
        with native_stderr_silenced(), profile(activities=[ProfilerActivity.CPU]) as prof:
            torch.ones(3).sum()
        print(any(e.name == "aten::sum" for e in prof.events()))
        """
    )
    assert done.stdout == "True\n"
    assert done.stderr == ""


def test_an_error_inside_propagates_and_fd_2_comes_back():
    before = os.fstat(2)
    with pytest.raises(RuntimeError, match="boom"), native_stderr_silenced():
        raise RuntimeError("boom")
    after = os.fstat(2)
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)
