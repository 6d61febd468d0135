"""A pytest plugin for the benchmark: when and how each notebook ran, written to a JSON file.

Loaded with `-p notebook_spans` by `scripts/benchmark.py`; it writes to the file named by
$COURSE_BENCH_SPANS a list of {"notebook", "start", "end", "failed"}, times from
`time.monotonic()`, which on Linux is one clock for every process, so the benchmark can match
them against its own memory samples. A notebook's span runs from the start of its first cell's
test (before nbval starts the kernel) to the end of its last (after nbval shuts the kernel down).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

SPANS_ENV = "COURSE_BENCH_SPANS"
_spans: dict[str, dict[str, object]] = {}


def _notebook(nodeid: str) -> str:
    return Path(nodeid.split("::", 1)[0]).name


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Open the notebook's span at its first cell."""
    name = _notebook(nodeid)
    _spans.setdefault(name, {"notebook": name, "start": time.monotonic(), "end": None, "failed": False})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Mark the notebook failed when any phase of any of its cells failed."""
    if report.failed:
        _spans[_notebook(report.nodeid)]["failed"] = True


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Move the notebook's span end to the end of this cell."""
    _spans[_notebook(nodeid)]["end"] = time.monotonic()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the spans where the benchmark asked for them."""
    target = os.environ.get(SPANS_ENV)
    if target:
        Path(target).write_text(json.dumps(list(_spans.values())), encoding="utf-8")
