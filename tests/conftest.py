"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from processes import left_behind, watch_orphans

# Before any test starts a process: orphans of this session's processes stay visible.
watch_orphans()
EARLIER_ITEMS_GRACE_S = 10.0
# After a test: a launcher's caller that the test killed leaves its watchdog sweeping until a
# second passes with nothing found (course_utils.processes.watchdog), which a busy machine
# stretches past one second; the watchdog ends by itself, and whatever it kills is checked too.
LEFT_BEHIND_GRACE_S = 3.0


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fail any unit test that starts with, or leaves, a live process (see `processes.left_behind`).

    Before the test, what an earlier item of this worker started gets a few seconds to end: a
    notebook's kernel that nbval has just told to shut down is still exiting when the next test starts.
    """
    assert left_behind(grace=EARLIER_ITEMS_GRACE_S) == [], "a process was still running before the test"
    yield
    assert left_behind(grace=LEFT_BEHIND_GRACE_S) == [], "the test left a process behind"
