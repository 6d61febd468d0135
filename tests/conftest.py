"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from processes import left_behind, watch_orphans

# Before any test starts a process: orphans of this session's processes stay visible.
watch_orphans()


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fail any unit test that starts with, or leaves, a live process (see `processes.left_behind`)."""
    assert left_behind(grace=0) == [], "a process was running before the test"
    yield
    assert left_behind() == [], "the test left a process behind"
