"""The pytest plugin that `gpu_lane.py run` loads (`-p gpu_lane_plugin`): each test's outcome, as it ends.

Each worker appends one JSON line per test phase to `<results>/<worker>.jsonl` and rewrites the
executed copy of a notebook after each of its cells (`<results>/executed/NAME.ipynb`), so a run
stopped by the lane's timeout still leaves what it did. `<results>` is COURSE_GPU_LANE_RESULTS.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

RESULTS_VARIABLE = "COURSE_GPU_LANE_RESULTS"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # nbval colours its messages for a terminal
RAN_KEY = "gpu_lane_ran"  # in the metadata of each executed cell: it ran (some cells print nothing)
# Per notebook (its path): the notebook as nbval read it, its code cells' outputs cleared.
_EXECUTED: dict[str, dict[str, Any]] = {}


def first_error_line(report: pytest.TestReport, outputs: list[dict[str, Any]] | None) -> str | None:
    """The line that says what went wrong: a cell's exception, else pytest's first `E` line or first line."""
    if report.passed or report.skipped:
        return None
    for output in outputs or []:
        if output.get("output_type") == "error":
            value = str(output.get("evalue", "")).splitlines()
            return f"{output.get('ename')}: {value[0] if value else ''}"[:300]
    text = ANSI_ESCAPE.sub("", report.longreprtext)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marked = [line[1:].strip() for line in lines if line.startswith("E ")]
    cell_reason = [line for line in lines if line.startswith("Cell ") and ":" in line]
    chosen = (cell_reason or marked or lines or ["(no message)"])[0]
    return chosen[:300]


def _store_cell(item: pytest.Item, results: Path) -> None:
    """Put the outputs this run gave `item` (an nbval cell) into the executed copy of its notebook."""
    notebook = getattr(item.parent, "nb", None)
    if notebook is None or getattr(item, "test_outputs", None) is None:
        return
    key = str(item.path)
    if key not in _EXECUTED:
        _EXECUTED[key] = copy.deepcopy(dict(notebook))
        for cell in _EXECUTED[key]["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
    index = next(i for i, cell in enumerate(notebook.cells) if cell is item.cell)
    executed = _EXECUTED[key]["cells"][index]
    executed["outputs"] = copy.deepcopy(item.test_outputs)
    counts = [o["execution_count"] for o in item.test_outputs if "execution_count" in o]
    executed["execution_count"] = counts[0] if counts else None
    executed.setdefault("metadata", {})[RAN_KEY] = True
    folder = results / "executed"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / item.path.name
    target.with_suffix(".tmp").write_text(json.dumps(_EXECUTED[key], indent=1), encoding="utf-8")
    target.with_suffix(".tmp").replace(target)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Record a phase's outcome (the call; a setup or teardown that did not pass) and a cell's outputs."""
    report = yield
    folder = os.environ.get(RESULTS_VARIABLE)
    if folder is None or (report.when != "call" and report.passed):
        return report
    results = Path(folder)
    results.mkdir(parents=True, exist_ok=True)
    outputs = getattr(item, "test_outputs", None)
    is_cell = hasattr(item, "cell_num")
    record = {
        "nodeid": report.nodeid,
        "file": item.path.name if is_cell else Path(report.nodeid.split("::")[0]).as_posix(),
        "cell": item.cell_num if is_cell else None,
        "test": None if is_cell else report.nodeid.split("::", 1)[-1],
        "when": report.when,
        "outcome": report.outcome,
        "error": first_error_line(report, outputs),
        "seconds": round(report.duration, 3),
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(results / f"{worker}.jsonl", "a", encoding="utf-8") as stream:
        stream.write(json.dumps(record) + "\n")
    if is_cell and report.when == "call":
        _store_cell(item, results)
    return report
