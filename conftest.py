"""Project-wide pytest hooks.

A notebook cell that writes to stderr fails; a compared cell's figures must look like the stored
ones (tests/figures.py); nbval's kernels listen on Unix sockets, and where a process runs several
notebooks they are forked from one Python that has imported torch (tests/forked_kernels.py); the
test files that take longest run first.
"""

from __future__ import annotations

import pprint
from collections.abc import Generator

import forked_kernels
import nbval.kernel
import pytest
from figures import figure_differences
from kernel_sockets import SocketKernelManager
from longest_first import add_durations, longest_first, read_seconds, write_seconds

# (node id, seconds) of every setup, call and teardown this process saw, for --store-durations.
DURATIONS: list[tuple[str, float]] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Fail an nbval cell whose fresh run wrote to stderr (a warning, say), even if ignored."""
    result = yield
    outputs = getattr(item, "test_outputs", None) or []
    stderr = "".join(
        o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stderr"
    )
    if stderr:
        raise AssertionError(
            "The cell wrote to stderr; committed notebooks have none. "
            f"Fix the cause (often a warning):\n{stderr}"
        )
    options = getattr(item, "options", None) or {}
    if (
        outputs
        and options.get("check")
        and item.parent.compare_outputs
        and (figures := figure_differences(item.cell.outputs, outputs))
    ):
        raise AssertionError("; ".join(figures))
    return result


class _Pretty:
    """A message that nbval's debug log pretty-prints only if the log is shown."""

    def __init__(self, message: object) -> None:
        self.message = message

    def __str__(self) -> str:
        return pprint.pformat(self.message)


def pytest_configure() -> None:
    """nbval's kernels on Unix sockets, not on TCP ports that a test running beside them can take;
    its debug line for every kernel message formatted only when debug logging is on (nbval calls
    pformat first: about a quarter of a second of CPU per notebook, for a line nobody reads)."""
    nbval.kernel.KernelManager = SocketKernelManager  # nbval makes its kernel managers from this name
    nbval.kernel.pformat = _Pretty


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--store-durations`: see `tests/longest_first.py`."""
    parser.addoption(
        "--store-durations",
        action="store_true",
        help="store each test file's seconds in tests/scope_seconds.json, which runs the longest first",
    )


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test files that took longest first, so parallel workers finish together (longest_first);
    kernels forked from a zygote where 3 or more notebooks are selected (a notebook alone starts afresh)."""
    items[:] = longest_first(items, read_seconds())
    forked_kernels.enable(len({item.path for item in items if item.path.suffix == ".ipynb"}))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note each setup, call and teardown's seconds for `--store-durations`."""
    DURATIONS.append((report.nodeid, report.duration))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With `--store-durations`, store what this run measured (by the controller only, under xdist)."""
    if session.config.getoption("store_durations") and not hasattr(session.config, "workerinput"):
        write_seconds(add_durations(read_seconds(), DURATIONS))
