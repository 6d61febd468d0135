"""Project-wide pytest hooks: a notebook's cells stay in one worker; a cell that writes to stderr fails."""

from __future__ import annotations

from collections.abc import Generator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Know the xdist_group mark also where pytest-xdist is not loaded (`-p no:xdist`)."""
    config.addinivalue_line("markers", "xdist_group(name): run these tests in one worker, in order")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put each notebook's cells in one xdist group: `--dist loadgroup` runs them in order in one worker.

    A notebook is one kernel whose cells depend on the ones before; unit tests stay ungrouped and
    are spread one by one.
    """
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.endswith(".ipynb"):
            item.add_marker(pytest.mark.xdist_group(path))


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
    return result
