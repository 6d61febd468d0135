"""Project-wide pytest hooks: a notebook cell that writes to stderr fails, marked or not."""

from __future__ import annotations

from collections.abc import Generator

import pytest


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
