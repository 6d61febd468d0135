"""The pytest plugin `course.py bench` loads in each pytest it measures: each test file's CPU and span.

The bench sets PYTEST_PLUGINS=scripts.bench_plugin (importable from the course root, where pytest
runs) and COURSE_BENCH_RECORDS=FOLDER. Every pytest process that runs tests (each xdist worker;
pytest itself under `-n 0`) then records, for each test file (a notebook, a test module):

- its CPU seconds: user + system of this process and of its children that ended meanwhile
  (`resource.getrusage` RUSAGE_SELF and RUSAGE_CHILDREN, before and after each of its tests), and,
  for a notebook whose kernel was forked from the zygote (tests/forked_kernels.py) and so is no
  child of this process, the kernel's own CPU and its ended children's (psutil, just before nbval
  shuts it down). A kernel started afresh is this process's child: its CPU arrives with RUSAGE_CHILDREN
  when it is shut down. Not counted: a process a test leaves running (until it ends and is reaped),
  and a forked kernel's CPU after its last cell.
- its span: from the start of its first test's set-up (where nbval starts the kernel) to the end
  of its last test's call (the last cell), in seconds.

At the end of the session each such process writes them to FOLDER/PID.json (`read_records` merges
them). While a test runs, COURSE_BENCH_RECORDS and this module's entry in PYTEST_PLUGINS are out of
the environment: a pytest that a test starts records nothing (its CPU is the test's) and does not
look for this module (from another folder, it could not import it).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

RECORDS_VARIABLE = "COURSE_BENCH_RECORDS"
PLUGINS_VARIABLE = "PYTEST_PLUGINS"
MODULE = "scripts.bench_plugin"
# Where this process writes its records: set when pytest imports this module (at its start), so
# that a test's taking the variable out of the environment does not stop the recording.
FOLDER = os.environ.get(RECORDS_VARIABLE)

_cpu_s: dict[str, float] = {}  # test file -> CPU seconds of this process and its ended children
_kernel_cpu_s: dict[str, float] = {}  # notebook -> CPU seconds of its forked kernel, at its last sample
_first_start: dict[str, float] = {}
_last_stop: dict[str, float] = {}


@dataclass(frozen=True)
class FileCost:
    """What one test file cost: CPU seconds (its processes together) and its span in wall seconds."""

    cpu_s: float
    seconds: float


def file_of(item: pytest.Item) -> str:
    """The test file of `item`, as its node id names it (`notebooks/05_x.ipynb`, `tests/test_x.py`)."""
    return item.nodeid.split("::", 1)[0]


def process_cpu_s() -> float:
    """CPU seconds (user + system) of this process and of its children that have ended and been reaped."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def without_this_plugin(environ: dict[str, str]) -> dict[str, str]:
    """The variables to restore once a test has run; takes this plugin's out of `environ` meanwhile."""
    saved = {name: environ[name] for name in (RECORDS_VARIABLE, PLUGINS_VARIABLE) if name in environ}
    environ.pop(RECORDS_VARIABLE, None)
    others = [name for name in saved.get(PLUGINS_VARIABLE, "").split(",") if name.strip() not in ("", MODULE)]
    if others:
        environ[PLUGINS_VARIABLE] = ",".join(others)
    else:
        environ.pop(PLUGINS_VARIABLE, None)
    return saved


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Add the CPU this test took (set-up, call, teardown) to its file's, its children's included."""
    if FOLDER is None:
        return (yield)
    saved = without_this_plugin(os.environ)  # type: ignore[arg-type]
    before = process_cpu_s()
    try:
        return (yield)
    finally:
        name = file_of(item)
        _cpu_s[name] = _cpu_s.get(name, 0.0) + process_cpu_s() - before
        os.environ.update(saved)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Note when the file's first set-up starts (a notebook's: its kernel starts there)."""
    _first_start.setdefault(file_of(item), time.perf_counter())
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Note when the file's latest call ended (a notebook's last cell, once all have run)."""
    try:
        return (yield)
    finally:
        _last_stop[file_of(item)] = time.perf_counter()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """Before nbval shuts a forked kernel down, read its CPU: the zygote, not this process, reaps it."""
    provisioner = getattr(getattr(getattr(item.parent, "kernel", None), "km", None), "provisioner", None)
    pid = getattr(provisioner, "pid", None)
    if FOLDER is not None and pid:
        with contextlib.suppress(psutil.Error):  # the kernel had ended: its last reading stands
            kernel = psutil.Process(pid)
            if kernel.ppid() != os.getpid():
                times = kernel.cpu_times()
                _kernel_cpu_s[file_of(item)] = (
                    times.user + times.system + times.children_user + times.children_system
                )
    return (yield)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write what this process recorded to COURSE_BENCH_RECORDS/PID.json (nothing if it ran no test)."""
    if FOLDER is None or not _cpu_s:
        return
    files = {
        name: {
            "cpu_s": cpu + _kernel_cpu_s.get(name, 0.0),
            "seconds": max(0.0, _last_stop.get(name, _first_start[name]) - _first_start[name]),
        }
        for name, cpu in _cpu_s.items()
        if name in _first_start
    }
    Path(FOLDER, f"{os.getpid()}.json").write_text(json.dumps(files), encoding="utf-8")


def read_records(folder: Path) -> dict[str, FileCost]:
    """Each test file's cost, from what every pytest process wrote into `folder` (none: empty)."""
    costs: dict[str, FileCost] = {}
    for path in sorted(folder.glob("*.json")):
        for name, cost in json.loads(path.read_text(encoding="utf-8")).items():
            earlier = costs.get(name, FileCost(0.0, 0.0))
            costs[name] = FileCost(earlier.cpu_s + cost["cpu_s"], max(earlier.seconds, cost["seconds"]))
    return costs
