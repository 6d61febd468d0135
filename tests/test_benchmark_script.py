"""The benchmark reads one nbval run's spans and memory samples into budgets kept or exceeded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from benchmark import (
    MEMORY_BUDGET_MIB,
    NOTEBOOK_BUDGET_S,
    SUITE_BUDGET_S,
    budget_report,
    notebook_budget,
    peak_mib,
)
from notebook_hygiene import ROOT
from notebook_spans import SPANS_ENV

MIB = 2**20


def span(name, start, end, failed=False):
    return {"notebook": name, "start": start, "end": end, "failed": failed}


def test_peak_is_taken_within_the_span_only():
    samples = [(0.0, 900 * MIB), (1.0, 100 * MIB), (2.0, 300 * MIB), (3.0, 2000 * MIB)]
    assert peak_mib(samples, 1.0, 2.0) == 300
    assert peak_mib(samples, 0.5, 0.9) == 0


def test_a_run_within_every_budget_has_no_failures():
    samples = [(0.5, 200 * MIB), (1.5, 400 * MIB), (12.0, 300 * MIB)]
    spans = [span("00_a.ipynb", 0.0, 10.0), span("01_b.ipynb", 10.0, 15.0)]
    lines, failures = budget_report(["00_a.ipynb", "01_b.ipynb"], spans, samples, 30.0, 0)
    assert failures == []
    assert lines[1].split() == ["00_a.ipynb", "10.0", "400", "passed"]
    assert lines[2].split() == ["01_b.ipynb", "5.0", "300", "passed"]
    assert lines[-1].endswith("30.0")


def test_each_budget_that_is_exceeded_is_named():
    spans = [span("00_a.ipynb", 0.0, NOTEBOOK_BUDGET_S + 1), span("01_b.ipynb", 100.0, 101.0)]
    samples = [(100.5, int((MEMORY_BUDGET_MIB + 1) * MIB))]
    _, failures = budget_report(["00_a.ipynb", "01_b.ipynb"], spans, samples, SUITE_BUDGET_S + 1, 0)
    assert failures == [
        f"00_a.ipynb took {NOTEBOOK_BUDGET_S + 1:.1f} s (budget {NOTEBOOK_BUDGET_S:.0f} s)",
        f"01_b.ipynb peaked at {MEMORY_BUDGET_MIB + 1:.0f} MiB (budget {MEMORY_BUDGET_MIB:.0f} MiB)",
        f"the suite took {SUITE_BUDGET_S + 1:.1f} s (budget {SUITE_BUDGET_S:.0f} s)",
    ]


def test_each_notebook_is_held_to_its_own_budget(tmp_path):
    spans = [span("00_a.ipynb", 0.0, 9.0), span("01_b.ipynb", 10.0, 19.0)]
    budgets = {"00_a.ipynb": 8.0}  # 01_b has none of its own: the hard limit applies
    _, failures = budget_report(["00_a.ipynb", "01_b.ipynb"], spans, [], 20.0, 0, budgets)
    assert failures == ["00_a.ipynb took 9.0 s (budget 8 s)"]
    notebook = tmp_path / "00_a.ipynb"
    notebook.write_text(json.dumps({"metadata": {"course": {"budget_s": 12}}, "cells": []}))
    assert notebook_budget(notebook) == 12.0
    notebook.write_text(json.dumps({"metadata": {"course": {"budget_s": 300}}, "cells": []}))
    assert notebook_budget(notebook) == NOTEBOOK_BUDGET_S  # never above the hard limit
    for real in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert 0 < notebook_budget(real) <= NOTEBOOK_BUDGET_S


def test_failed_missing_and_unexplained_runs_are_reported():
    spans = [span("00_a.ipynb", 0.0, 1.0, failed=True)]
    lines, failures = budget_report(["00_a.ipynb", "01_b.ipynb"], spans, [], 5.0, 1)
    assert failures == ["00_a.ipynb failed under nbval", "01_b.ipynb did not run under nbval"]
    assert "DID NOT RUN" in lines[2]
    _, failures = budget_report(["00_a.ipynb"], [span("00_a.ipynb", 0.0, 1.0)], [], 5.0, 4)
    assert failures == ["pytest exited with status 4; run the notebooks with `course.py test` to see why"]


@pytest.mark.parametrize("fail", [False, True])
def test_the_plugin_records_one_span_per_notebook_and_its_failures(tmp_path, fail):
    (tmp_path / "test_nb.py").write_text(
        f"def test_one():\n    pass\n\ndef test_two():\n    assert not {fail}\n"
    )
    out = tmp_path / "spans.json"
    env = os.environ | {SPANS_ENV: str(out), "PYTHONPATH": str(ROOT / "scripts")}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "notebook_spans",
        "-p",
        "no:cacheprovider",
        "test_nb.py",
    ]
    subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=60, check=False)
    (recorded,) = json.loads(out.read_text())
    assert recorded["notebook"] == "test_nb.py" and recorded["failed"] is fail
    assert 0 <= recorded["end"] - recorded["start"] < 30


def test_an_unknown_notebook_is_refused_with_what_to_pass():
    cmd = [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "notebooks/99_nothing.ipynb"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "No such notebook" in result.stdout and "notebooks/05_data_parallel.ipynb" in result.stdout
