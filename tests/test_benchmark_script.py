"""The benchmark: budgets kept or exceeded, a broken notebook named before it runs, a failure explained."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import benchmark
import pytest
from benchmark import (
    NOTEBOOK_BUDGET_S,
    NOTEBOOK_MEMORY_MIB,
    RUN_MEMORY_MIB,
    SUITE_BUDGET_S,
    WHOLE_BUDGET_S,
    WHOLE_BUDGET_TWO_EDITIONS_S,
    Measured,
    failure_report,
    measure,
    notebook_budget,
    probe_seconds,
    speed_line,
    table,
    verdicts,
    whole_budget,
)
from notebook_hygiene import ROOT


def test_runs_within_every_budget_have_no_verdict():
    alone = [Measured("00_a.ipynb", 9.0, 500.0, 0), Measured("01_b.ipynb", NOTEBOOK_BUDGET_S, 1500.0, 0)]
    runs = [(Measured("suite", SUITE_BUDGET_S - 1, RUN_MEMORY_MIB - 1, 0), SUITE_BUDGET_S)]
    assert verdicts(alone, {}, runs) == []
    lines = table([*alone, runs[0][0]])
    assert lines[1].split() == ["00_a.ipynb", "9.0", "500", "passed"]


def test_each_budget_that_is_exceeded_is_named():
    alone = [Measured("00_a.ipynb", NOTEBOOK_BUDGET_S + 1, NOTEBOOK_MEMORY_MIB + 1, 0)]
    runs = [
        (Measured("suite", SUITE_BUDGET_S + 1, RUN_MEMORY_MIB + 1, 0), SUITE_BUDGET_S),
        (Measured("unit tests", 999.0, 100.0, 0), None),  # no time budget of its own
    ]
    assert verdicts(alone, {}, runs) == [
        f"OVER BUDGET: 00_a.ipynb took {NOTEBOOK_BUDGET_S + 1:.1f} s alone "
        f"(budget {NOTEBOOK_BUDGET_S:.0f} s)",
        f"OVER BUDGET: 00_a.ipynb peaked at {NOTEBOOK_MEMORY_MIB + 1:.0f} MiB "
        f"(budget {NOTEBOOK_MEMORY_MIB:.0f} MiB)",
        f"OVER BUDGET: suite took {SUITE_BUDGET_S + 1:.1f} s (budget {SUITE_BUDGET_S:.0f} s)",
        f"OVER BUDGET: suite peaked at {RUN_MEMORY_MIB + 1:.0f} MiB (budget {RUN_MEMORY_MIB:.0f} MiB)",
    ]


def test_failures_are_named_and_pytests_report_kept():
    failed = Measured(
        "00_a.ipynb", 1.0, 10.0, 1, "collected 3 items\n" + "line\n" * 100 + "1 failed, 2 passed\n"
    )
    assert verdicts([failed], {}, []) == [
        "FAILED: 00_a.ipynb failed under nbval (pytest exit status 1; report below)"
    ]
    report = failure_report(failed).splitlines()
    assert report[0] == "--- 00_a.ipynb: the last 60 lines of its output ---"
    assert report[-1] == "1 failed, 2 passed" and len(report) == 61
    assert "FAILED (1)" in table([failed])[1]


def test_each_notebook_is_held_to_its_own_budget_never_above_the_hard_limit(tmp_path):
    alone = [Measured("00_a.ipynb", 9.0, 1.0, 0)]
    assert verdicts(alone, {"00_a.ipynb": 8.0}, []) == [
        "OVER BUDGET: 00_a.ipynb took 9.0 s alone (budget 8 s)"
    ]
    notebook = tmp_path / "00_a.ipynb"
    notebook.write_text(json.dumps({"metadata": {"course": {"budget_s": 12}}, "cells": []}))
    assert notebook_budget(notebook) == 12.0
    notebook.write_text(json.dumps({"metadata": {"course": {"budget_s": 300}}, "cells": []}))
    assert notebook_budget(notebook) == NOTEBOOK_BUDGET_S == 15.0


def test_a_second_edition_raises_the_whole_tests_budget(tmp_path):
    (tmp_path / "workers").mkdir()
    (tmp_path / "00_a.ipynb").touch()
    (tmp_path / "workers" / "01_not_a_notebook.ipynb").touch()
    assert whole_budget(tmp_path) == WHOLE_BUDGET_S == 150.0
    (tmp_path / "zh").mkdir()
    (tmp_path / "zh" / "00_a.ipynb").touch()
    assert whole_budget(tmp_path) == WHOLE_BUDGET_TWO_EDITIONS_S == 210.0


def test_measure_keeps_the_output_and_counts_the_children():
    grandchild = "x = bytearray(64 << 20); import time; time.sleep(1)"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    run = measure("child", [sys.executable, "-c", child + "; print('done'); sys.exit(3)"])
    assert (run.status, run.output) == (3, "done\n")
    assert run.peak_mib > 64, "the grandchild's 64 MiB are counted"
    assert run.seconds >= 1


def test_sampling_pauses_longer_after_a_costly_sample_to_keep_to_its_share_of_a_core():
    assert benchmark.pause_after(0.001) == benchmark.SAMPLE_SECONDS
    cost = 0.05  # ten processes that imported torch
    pause = benchmark.pause_after(cost)
    assert pause > benchmark.SAMPLE_SECONDS
    assert cost / (cost + pause) == pytest.approx(benchmark.SAMPLER_SHARE)


def run_benchmark(capsys, *args):
    """`course.py bench ARGS` in this process (its command line is tested in test_course_command)."""
    status = benchmark.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_an_unknown_notebook_is_refused_with_what_to_pass(capsys):
    status, out, _ = run_benchmark(capsys, "notebooks/99_nothing.ipynb")
    assert status == 2
    assert "No such notebook" in out and "notebooks/05_data_parallel.ipynb" in out


def test_a_corrupt_notebook_is_named_in_one_line_before_anything_runs(tmp_path, capsys):
    broken = tmp_path / "03_broken.ipynb"
    broken.write_text('{"cells": [')
    assert run_benchmark(capsys, str(broken)) == (
        2,
        "03_broken.ipynb is not a valid notebook file (NotJSONError); nothing was run.\n",
        "",
    )


def test_a_failing_notebook_is_marked_and_pytests_report_says_why(capsys, monkeypatch):
    # The speed probes (six fresh Pythons; with them this test took 43 s of a parallel run here) are
    # tested on their own below.
    monkeypatch.setattr(benchmark, "probe_seconds", lambda code: 1.25)
    # Under the course root (pytest finds no notebook outside it with the course's configuration),
    # in a folder of its own: parallel runs never share it.
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "build", prefix="bench-test-") as folder:
        failing_notebook_report(Path(folder) / "04_fails.ipynb", capsys)


def failing_notebook_report(notebook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import nbformat

    cells = [
        nbformat.v4.new_code_cell("raise ValueError('the reason, from the notebook')"),
        nbformat.v4.new_code_cell("print(what_the_first_cell_never_made)"),  # its NameError only echoes
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["course"] = {"budget_s": 15}
    nbformat.write(nb, notebook)
    status, out, err = run_benchmark(capsys, str(notebook))
    assert status == 1, out + err
    assert out.index("import torch 1.25 s") < out.index("measured: 04_fails.ipynb")  # the speed comes first
    assert "FAILED: 04_fails.ipynb failed under nbval" in out
    assert "--- 04_fails.ipynb: the last" in out
    report = out.split("--- 04_fails.ipynb: the last", 1)[1]
    assert "1 failed" in report and "the reason, from the notebook" in report
    assert "NameError" not in report  # the report stops at the first failing cell
    assert "suite, parallel" not in out  # a suite of one notebook is that notebook alone, measured once


def test_the_machines_speed_is_timed_in_a_fresh_python_and_a_failing_probe_is_named():
    # Timed inside the child: a probe that sleeps 0.2 s reads at least that, whatever the start-up.
    assert probe_seconds("import time; time.sleep(0.2)", repeats=1) >= 0.2
    probe_seconds("import sys; assert 'torch' not in sys.modules", repeats=1)  # not this process
    with pytest.raises(RuntimeError, match=re.escape("the speed probe 'raise SystemExit(3)' failed")):
        probe_seconds("raise SystemExit(3)", repeats=1)
    line = speed_line({"import torch": 3.814, "a Python loop of 10 million steps": 1.5})
    assert line.endswith("import torch 3.81 s, a Python loop of 10 million steps 1.50 s")
