"""The benchmark: its arithmetic on a recorded run (R, verdicts, busy cores, the costliest files), what it
measures (time, CPU, memory, each test file's CPU), bad input refused before anything runs."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import benchmark
import pytest
from benchmark import Bench, failure_report, from_json, markdown, measure, report, table, to_json, verdicts
from notebook_hygiene import ROOT

WHOLE = "whole `course.py test` (ruff, every test)"
# A bench as bench.json records it (its derived r_s and problems left out): R is the median 2.5 s, not
# the mean; runs exactly on their targets keep them; a notebook without budget_r is held to 6 R.
RECORDED = {
    "schema": 1,
    "measured": "2026-11-28T10:00:00+01:00",
    "cpus": 2,
    "r_runs_s": [2.7, 2.4, 2.5],
    "runs": [
        {"name": "00_a.ipynb", "kind": "notebook", "seconds": 12.5, "cpu_s": 10.0, "peak_mib": 500.0}
        | {"status": 0, "budget_r": 6, "floor_r": None, "floor_why": None},
        {"name": "01_b.ipynb", "kind": "notebook", "seconds": 10.0, "cpu_s": 9.0, "peak_mib": 1600.0}
        | {"status": 0, "budget_r": 3, "floor_r": 2.0, "floor_why": "it trains a model for 20 steps"},
        {"name": "zh-CN/00_a.ipynb", "kind": "notebook", "seconds": 15.5, "cpu_s": 12.0, "peak_mib": 510.0}
        | {"status": 1, "budget_r": None, "floor_r": None, "floor_why": None},
        {"name": "English notebook suite, parallel (2 workers)", "kind": "suite", "seconds": 60.0}
        | {"cpu_s": 110.0, "peak_mib": 3000.0, "status": 0},
        {"name": "zh-CN notebook suite, parallel (2 workers)", "kind": "suite", "seconds": 62.5}
        | {"cpu_s": 115.0, "peak_mib": 2900.0, "status": 0},
        {"name": "unit tests, parallel", "kind": "unit tests", "seconds": 300.0, "cpu_s": 570.0}
        | {"peak_mib": 3100.0, "status": 0},
        {
            "name": WHOLE,
            "kind": "whole test",
            "seconds": 350.0,
            "cpu_s": 623.0,
            "peak_mib": 3050.0,
            "status": 0,
        },
    ],
    # 25 files: the top twenty are 24 down to 5 CPU s, two of them equal (ordered by name).
    "files_cpu_s": {f"tests/test_{i:02}.py": float(i) for i in range(24)} | {"notebooks/00_a.ipynb": 23.0},
    "launch": {"launch_s": 0.2, "floor_s": 0.2, "status": 0},
}


@pytest.fixture
def recorded(tmp_path: Path) -> Bench:
    """RECORDED, read back as `--replay` reads a bench.json."""
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(RECORDED))
    return from_json(path)


def test_every_figure_is_given_in_seconds_and_in_r_against_its_target(recorded):
    assert recorded.r == 2.5  # the median of 2.7, 2.4, 2.5
    lines = table(recorded)
    rows = {line[:52].strip(): line[52:].split() for line in lines[1:]}
    # seconds, R, target, CPU s, (busy cores: not for a notebook), peak MiB, result
    assert rows["00_a.ipynb"] == ["12.5", "5.0", "R", "6", "R", "10.0", "500", "passed"]
    assert rows["01_b.ipynb"] == [
        "10.0",
        "4.0",
        "R",
        "3",
        "R",
        "9.0",
        "1600",
        "passed,",
        "OVER:",
        "time,",
        "memory",
    ]
    assert rows["zh-CN/00_a.ipynb"][:5] == ["15.5", "6.2", "R", "6", "R"]  # no budget_r: held to 6 R
    assert rows["zh-CN/00_a.ipynb"][-4:] == ["FAILED", "(1),", "OVER:", "time"]
    suite = ["60.0", "24.0", "R", "24", "R", "110.0", "1.83", "3000", "passed"]  # 24 R exactly: kept
    assert rows["English notebook suite, parallel (2 workers)"] == suite
    assert rows["unit tests, parallel"][:4] == ["300.0", "120.0", "R", "-"]  # no time target of its own
    assert rows[WHOLE] == [
        "350.0",
        "140.0",
        "R",
        "140",
        "R",
        "623.0",
        "1.78",
        "3050",
        "passed,",
        "OVER:",
        "cores",
    ]
    assert lines[-1] == "2-rank launch 200.0 ms against a bare fork 200.0 ms: 1.00x (target <= 1.05x)"


def test_what_misses_its_target_is_named_and_a_target_met_exactly_is_kept(recorded):
    assert verdicts(recorded) == [
        "OVER BUDGET: 01_b.ipynb took 10.0 s alone = 4.0 R (budget 3 R = 7.5 s)",
        "OVER BUDGET: 01_b.ipynb peaked at 1600 MiB (budget 1536 MiB)",
        "FAILED: zh-CN/00_a.ipynb failed under nbval (pytest exit status 1)",
        "OVER BUDGET: zh-CN/00_a.ipynb took 15.5 s alone = 6.2 R (budget 6 R = 15.0 s)",
        "OVER BUDGET: zh-CN notebook suite, parallel (2 workers) took 62.5 s = 25.0 R (budget 24 R = 60.0 s)",
        "OVER BUDGET: unit tests, parallel peaked at 3100 MiB (budget 3072 MiB)",
        f"BELOW TARGET: {WHOLE} kept 1.78 of 2 cores busy (target at least 1.80)",
    ]
    slow_launch = replace(recorded, launch={"launch_s": 0.22, "floor_s": 0.2, "status": 0})
    assert verdicts(slow_launch)[-1] == "OVER BUDGET: a 2-rank launch took 1.10x a bare fork (budget 1.05x)"
    failed_launch = replace(recorded, launch={"launch_s": None, "floor_s": None, "status": 3})
    assert verdicts(failed_launch)[-1].startswith("FAILED: the 2-rank launch (launch_floor.py, exit status 3")
    floored = replace(recorded.runs[1], peak_mib=500.0, budget_r=6, floor_r=8.0, seconds=20.0)  # 8 R
    assert verdicts(replace(recorded, runs=[floored], launch=None)) == []
    assert verdicts(replace(recorded, runs=[replace(floored, seconds=20.1)], launch=None)) == [
        "OVER BUDGET: 01_b.ipynb took 20.1 s alone = 8.0 R (budget 8 R = 20.0 s)"
    ]
    three = replace(recorded, workers=3)  # a parallel run may take 1.5 GiB for each worker: 4608 MiB
    assert "OVER BUDGET: unit tests, parallel peaked at 3100 MiB (budget 3072 MiB)" not in verdicts(three)
    assert (
        "| a parallel run's processes, PSS (largest: unit tests, parallel) | <= 4608 MiB (3 workers) "
        "| 3100 MiB |  | yes |"
    ) in markdown(three).splitlines()
    kept = [run for run in recorded.runs if run.name in ("00_a.ipynb", WHOLE)]
    busy = replace(kept[1], cpu_s=630.0)  # 1.80 cores: on the target
    assert verdicts(replace(recorded, runs=[kept[0], busy], launch=None)) == []


def test_the_costliest_twenty_files_come_first_and_the_floors_and_missing_budgets_are_named(recorded):
    lines = report(recorded)
    assert lines[0] == 'R = 2.50 s: the median of 3 fresh `python -c "import torch"` (2.70, 2.40, 2.50 s)'
    start = next(
        i for i, line in enumerate(lines) if line.startswith("CPU seconds of the whole test by file")
    )
    assert lines[start].startswith(
        "CPU seconds of the whole test by file, the top 20 of 25 "
        "(all files 299.0 CPU s of the whole test's 623.0"
    )
    files = [line.split() for line in lines[start + 2 : start + 22]]
    assert [row[3] for row in files[:3]] == ["notebooks/00_a.ipynb", "tests/test_23.py", "tests/test_22.py"]
    assert files[0][:3] == ["23.0", "9.2", "R"]
    assert [float(row[0]) for row in files] == [23.0, 23.0, *range(22, 4, -1)]
    assert lines[start + 22] != "" and "tests/test_04.py" not in "\n".join(lines)
    assert "01_b.ipynb: its floor is 2 R = 5.0 s: it trains a model for 20 steps" in lines
    assert "Without course.budget_r (held to 6 R): zh-CN/00_a.ipynb" in lines
    assert (  # 623 CPU s over 2 cores; 140 R x 2.5 s x 2 cores
        f"{WHOLE}: its CPU floor is 311.5 s = 124.6 R (623.0 CPU s over 2 cores); "
        "140 R needs at most 700 CPU s"
    ) in lines
    assert (
        "zh-CN notebook suite, parallel (2 workers): its CPU floor is 57.5 s = 23.0 R (115.0 CPU s over 2 "
        "cores); 24 R needs at most 120 CPU s"
    ) in lines
    assert not any(line.startswith("unit tests, parallel: its CPU floor") for line in lines)  # no target


def test_contributings_table_holds_each_target_and_its_figure(recorded):
    rows = markdown(recorded).splitlines()
    assert rows[0] == "Measured 2026-11-28 by `python3 course.py bench` on 2 CPUs, R = 2.50 s:"
    assert rows[2:4] == ["| figure | target | measured | in R | kept |", "|---|---|---|---|---|"]
    assert (
        "| a notebook alone, kernel start to last cell (closest to its budget: 01_b.ipynb) | its `budget_r`, "
        "at most 6 R, or its `floor_r` | 10.0 s | 4.0 R of 3 R | no: 2 of 3 over |"
    ) in rows
    assert "| zh-CN notebook suite, parallel (2 workers) | <= 24 R | 62.5 s | 25.0 R | no |" in rows
    assert "| English notebook suite, parallel (2 workers) | <= 24 R | 60.0 s | 24.0 R | yes |" in rows
    assert (
        "| cores kept busy during the whole test (623 CPU s in 350 s) | >= 1.8 of 2 | 1.78 |  | no |" in rows
    )
    assert "| a 2-rank launch against a bare fork | <= 1.05x | 1.00x |  | yes |" in rows
    whole = rows.index(f"| {WHOLE} | <= 140 R | 350.0 s | 140.0 R | yes |")
    assert rows[whole + 1] == "| its CPU floor: 623 CPU s over 2 cores | <= 140 R | 311.5 s | 124.6 R | yes |"
    over = markdown(replace(recorded, runs=[replace(recorded.runs[-1], cpu_s=701.0)])).splitlines()
    assert "| its CPU floor: 701 CPU s over 2 cores | <= 140 R | 350.5 s | 140.2 R | no |" in over


def test_bench_json_holds_every_figure_and_replays_to_the_same_report(recorded, tmp_path, capsys):
    written = to_json(recorded)
    assert written["r_s"] == 2.5 and written["problems"] == verdicts(recorded)
    assert written["runs"][0] == RECORDED["runs"][0]
    path = tmp_path / "again.json"
    path.write_text(json.dumps(written))
    assert from_json(path) == recorded
    table_file = tmp_path / "table.md"
    status, out, _ = run_benchmark(capsys, "--replay", str(path), "--markdown", str(table_file))
    assert status == 1  # targets missed
    assert out.splitlines()[: len(report(recorded))] == report(recorded)
    assert table_file.read_text() == markdown(recorded)
    path.write_text(json.dumps(to_json(replace(recorded, runs=recorded.runs[:1], launch=None))))
    assert run_benchmark(capsys, "--replay", str(path))[:2] == (0, "\n".join(report(from_json(path))) + "\n")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{", "JSONDecodeError"),
        (json.dumps(RECORDED | {"schema": 2}), "its schema is 2, not 1"),
        (json.dumps({k: v for k, v in RECORDED.items() if k != "r_runs_s"}), "r_runs_s"),
        (json.dumps(RECORDED | {"runs": [RECORDED["runs"][3] | {"seconds": "slow"}]}), "TypeError"),
    ],
)
def test_a_replayed_file_that_is_no_bench_json_is_named_in_one_line(tmp_path, capsys, content, why):
    path = tmp_path / "bench.json"
    path.write_text(content)
    status, out, err = run_benchmark(capsys, "--replay", str(path))
    assert (status, err, out.count("\n")) == (2, "", 1)
    assert (
        out.startswith(f"--replay {path}: not a bench.json that `python3 course.py bench` wrote (")
        and why in out
    )


def test_measure_keeps_the_output_and_counts_the_childrens_memory_and_cpu():
    # The grandchild holds 64 MiB and spends 0.3 s of CPU (its own clock: the machine's load does not
    # change it), then ends: only its parent's wait makes its CPU count.
    grandchild = (
        "x = bytearray(64 << 20)\nimport time\nwhile time.process_time() < 0.3: pass\ntime.sleep(0.5)"
    )
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    run, files = measure("child", "suite", [sys.executable, "-c", child + "; print('done'); sys.exit(3)"])
    assert (run.status, run.output, files) == (3, "done\n", {})
    assert run.peak_mib > 64, "the grandchild's 64 MiB are counted"
    assert run.cpu_s >= 0.3, "the grandchild's CPU is counted"
    assert run.seconds >= 0.5


# Three test files for a pytest under the bench's plugin: CPU in the test's own process, in a child, and
# in a stand-in for a forked kernel (a process that is not the test's child: its parent has ended).
BURN = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3: pass\n"
PLUGIN_TESTS = {
    "test_own.py": f"def test_own():\n    exec({BURN!r})\n",
    "test_child.py": f"""
import os, subprocess, sys
def test_child(tmp_path):
    subprocess.run([sys.executable, "-c", {BURN!r}], check=True)
    # A pytest that a test starts neither records nor looks for the plugin (it could not import it here).
    assert "{benchmark.RECORDS_VARIABLE}" not in os.environ
    (tmp_path / "test_inner.py").write_text("def test_inner():\\n    pass\\n")
    inner = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                           cwd=tmp_path, capture_output=True, text=True)
    assert inner.returncode == 0, inner.stdout + inner.stderr
""",
    "test_kernel.py": f"""
import subprocess, sys, time, types
import psutil, pytest
ORPHAN = {BURN + "time.sleep(60)"!r}
@pytest.fixture
def kernel():
    starter = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', sys.argv[1]], "
               "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
    pid = int(subprocess.run([sys.executable, "-c", starter, ORPHAN], capture_output=True, text=True).stdout)
    process = psutil.Process(pid)
    yield process
    process.kill()
def test_kernel(request, kernel):
    while sum(kernel.cpu_times()[:2]) < 0.3:
        time.sleep(0.05)
    provisioner = types.SimpleNamespace(pid=kernel.pid)  # where nbval's file holds its kernel's pid
    request.node.parent.kernel = types.SimpleNamespace(km=types.SimpleNamespace(provisioner=provisioner))
""",
}


def test_the_plugin_gives_each_test_files_cpu_its_children_and_a_forked_kernel_included(tmp_path):
    for name, text in PLUGIN_TESTS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # pytest's root here, whatever lies above it
    command = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", str(tmp_path)]
    run, files = measure("plugin", "suite", command)
    assert run.status == 0, run.output
    assert sorted(files) == sorted(PLUGIN_TESTS)  # node ids, relative to pytest's root: tmp_path here
    for name, cost in files.items():
        assert cost.cpu_s >= 0.3, (name, cost)
        assert 0 < cost.seconds < run.seconds
    assert run.cpu_s >= sum(cost.cpu_s for name, cost in files.items() if name != "test_kernel.py")


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


def test_an_unknown_notebook_is_refused_with_what_to_pass(capsys, tmp_path):
    status, out, _ = run_benchmark(capsys, "notebooks/99_nothing.ipynb", "--json", str(tmp_path / "b.json"))
    assert status == 2
    assert "No such notebook" in out and "notebooks/05_data_parallel.ipynb" in out


def test_a_corrupt_notebook_is_named_in_one_line_before_anything_runs(tmp_path, capsys):
    broken = tmp_path / "03_broken.ipynb"
    broken.write_text('{"cells": [')
    assert run_benchmark(capsys, str(broken), "--json", str(tmp_path / "b.json")) == (
        2,
        "03_broken.ipynb is not a valid notebook file (NotJSONError); nothing was run.\n",
        "",
    )


@pytest.mark.parametrize(
    ("course", "why"),
    [
        ({"budget_r": 6.5}, "metadata course.budget_r is 6.5, not a number of R above 0 and at most 6"),
        ({"budget_r": "4"}, "metadata course.budget_r is '4', not a number"),
        ({"budget_r": True}, "metadata course.budget_r is True, not a number"),
        ({"floor_r": 0}, "metadata course.floor_r is 0, not a number of R above 0 (CONTRIBUTING.md"),
        ({"floor_r": 2}, "course.floor_r and course.floor_why come together"),
        ({"floor_why": "it trains"}, "course.floor_r and course.floor_why come together"),
        ({"floor_r": 2, "floor_why": " "}, "metadata course.floor_why is ' ', not a sentence"),
    ],
)
def test_a_notebooks_bad_budget_or_floor_is_named_before_anything_runs(tmp_path, capsys, course, why):
    import nbformat

    notebook = tmp_path / "03_budget.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nb.metadata["course"] = course
    nbformat.write(nb, notebook)
    status, out, err = run_benchmark(capsys, str(notebook), "--json", str(tmp_path / "b.json"))
    assert (status, err) == (2, "") and out.startswith("03_budget.ipynb: ") and why in out
    assert out.endswith("; nothing was run.\n") and out.count("\n") == 1
    nb.metadata["course"] = {"budget_r": 6, "floor_r": 2.5, "floor_why": "it trains"}
    nbformat.write(nb, notebook)
    assert benchmark.course_metadata(notebook) == {"budget_r": 6, "floor_r": 2.5, "floor_why": "it trains"}


def test_replay_takes_no_notebook_and_an_unwritable_json_is_refused_at_once(tmp_path, capsys):
    recorded = tmp_path / "bench.json"
    recorded.write_text(json.dumps(RECORDED))
    status, out, _ = run_benchmark(capsys, "--replay", str(recorded), "00_start_here.ipynb")
    assert (status, out) == (2, "--replay reports a bench.json written earlier: give it no NOTEBOOK\n")
    (tmp_path / "file").write_text("")
    status, out, _ = run_benchmark(capsys, "00_start_here.ipynb", "--json", str(tmp_path / "file" / "b.json"))
    assert status == 2 and out.startswith(f"{tmp_path / 'file' / 'b.json'}: its folder cannot be made")


def test_a_failing_notebook_is_marked_and_pytests_report_says_why(capsys, monkeypatch, tmp_path):
    # R's three fresh Pythons that import torch are tested on their own below.
    monkeypatch.setattr(benchmark, "wall_times", lambda code: [1.5, 1.25, 1.0])
    # Under the course root (pytest finds no notebook outside it with the course's configuration),
    # in a folder of its own: parallel runs never share it.
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "build", prefix="bench-test-") as folder:
        failing_notebook_report(Path(folder) / "04_fails.ipynb", tmp_path / "bench.json", capsys)


def failing_notebook_report(notebook: Path, written: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import nbformat

    cells = [
        nbformat.v4.new_code_cell("print('the first cell runs')"),
        nbformat.v4.new_code_cell("raise ValueError('the reason, from the notebook')"),
        nbformat.v4.new_code_cell("print(what_the_failing_cell_never_made)"),  # its NameError only echoes
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["course"] = {"budget_r": 6}
    nbformat.write(nb, notebook)
    status, out, err = run_benchmark(capsys, str(notebook), "--json", str(written))
    assert status == 1, out + err
    assert out.index("R = 1.25 s") < out.index("measured: 04_fails.ipynb")  # R comes first
    assert "FAILED: 04_fails.ipynb failed under nbval" in out
    assert "--- 04_fails.ipynb: the last" in out
    report = out.split("--- 04_fails.ipynb: the last", 1)[1]
    assert "1 failed" in report and "the reason, from the notebook" in report
    assert "NameError" not in report  # the report stops at the first failing cell
    assert "suite, parallel" not in out  # a suite of one notebook is that notebook alone, measured once
    (run,) = json.loads(written.read_text())["runs"]
    assert 0 < run["seconds"] and run["cpu_s"] > 0 and run["budget_r"] == 6
    assert f"Every figure: {written}" in out


def test_r_is_timed_in_fresh_pythons_start_up_included_and_a_failing_one_is_named():
    times = benchmark.wall_times("import time; time.sleep(0.2)", runs=2)
    assert len(times) == 2 and min(times) >= 0.2
    benchmark.wall_times("import sys; assert 'torch' not in sys.modules", runs=1)  # not this process
    with pytest.raises(RuntimeError, match=re.escape("`python -c 'raise SystemExit(3)'` failed")):
        benchmark.wall_times("raise SystemExit(3)", runs=1)
    assert failure_report(benchmark.Measured("x", "suite", 1.0, 1.0, 1.0, 1, output="a\nb\n")) == (
        "--- x: the last 2 lines of its output ---\na\nb"
    )


def test_without_notebooks_named_the_unit_tests_the_whole_test_and_the_launch_follow(monkeypatch, capsys):
    ran = []

    def fake_measure(name, kind, cmd, *, with_root=True):
        ran.append((kind, [str(part) for part in cmd]))
        files = {"tests/test_x.py": benchmark.FileCost(3.0, 1.0)}
        return benchmark.Measured(name, kind, 10.0, 15.0, 100.0, 0), files

    monkeypatch.setattr(benchmark, "wall_times", lambda code: [2.0, 2.0, 2.0])
    monkeypatch.setattr(benchmark, "measure", fake_measure)
    monkeypatch.setattr(
        benchmark, "notebook_alone", lambda path: benchmark.Measured(path.name, "notebook", 1, 1, 1, 0)
    )
    monkeypatch.setattr(benchmark, "measure_launch", lambda: {"launch_s": 0.1, "floor_s": 0.1, "status": 0})
    english = [benchmark.NOTEBOOKS / "00_a.ipynb", benchmark.NOTEBOOKS / "01_b.ipynb"]
    bench = benchmark.measure_everything(
        [*english, benchmark.NOTEBOOKS / "zh-CN" / "00_a.ipynb"], everything=True
    )
    assert [run.kind for run in bench.runs] == ["notebook"] * 3 + ["suite", "unit tests", "whole test"]
    assert ran[0][1][-2:] == list(
        map(str, english)
    )  # the English suite; the Chinese one of one notebook: none
    assert ran[2][1][-2:] == [str(ROOT / "course.py"), "test"]
    assert bench.files_cpu_s == {"tests/test_x.py": 3.0}  # the whole test's, not the suite's
    assert bench.launch == {"launch_s": 0.1, "floor_s": 0.1, "status": 0}
    assert capsys.readouterr().out.count("measured: ") == 6
    assert benchmark.measure_everything(english[:1], everything=False).launch is None


def test_the_launchs_figures_are_read_and_a_launch_that_measured_nothing_is_shown(
    monkeypatch, tmp_path, capsys
):
    script = tmp_path / "launch_floor.py"
    monkeypatch.setattr(benchmark, "LAUNCH_FLOOR", script)
    script.write_text(
        "import sys\nprint('warming up')\nprint('{\"launch_s\": 0.3, \"floor_s\": 0.25}')\nsys.exit(1)"
    )
    assert benchmark.measure_launch() == {
        "launch_s": 0.3,
        "floor_s": 0.25,
        "status": 0,
    }  # over: bench decides
    script.write_text("import sys\nprint('no fork here')\nsys.exit(4)")
    assert benchmark.measure_launch() == {"launch_s": None, "floor_s": None, "status": 4}
    assert "launch_floor.py measured nothing; its output ---\nno fork here" in capsys.readouterr().out
