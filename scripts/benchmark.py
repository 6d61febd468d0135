"""The course's budgets, measured in R, this machine's own unit: the one place that holds the numbers.

    python3 course.py bench [NOTEBOOK ...] [--json FILE] [--markdown FILE] [--replay FILE]

R comes first, in the same run: the median wall time of 3 fresh `python -c "import torch"`. Every
figure is given in seconds and as a multiple of R, so that two benches, on two days or two machines,
compare by R. Measured, each as a child process whose whole process tree is sampled for memory every
50 ms (less often where sampling a large tree would take over a tenth of a core): the sum of its
processes' proportional set sizes (PSS), which counts a page that forked ranks share with their
parent once, as the machine (or a container's memory limit) does; resident sizes would count it in
every process:

1. each notebook alone under strict nbval (`pytest -n 0 -x`), as a student's "Run All" loads the
   machine, up to its first failing cell: the seconds from its kernel's start to its last cell, its
   CPU seconds (kernel, nbval) and the peak memory of its kernel and the kernel's children;
2. each edition's notebook suite as `python3 course.py test notebooks/` runs it, in parallel over
   every CPU (an edition of one notebook is that notebook alone: not again);
3. without NOTEBOOK arguments also the unit tests (`course.py test tests/`), the whole
   `python3 course.py test` after set-up (ruff and every test) and a 2-rank launch against a bare
   fork of the same job (scripts/launch_floor.py).

The CPU seconds of a run are `resource.getrusage(RUSAGE_CHILDREN)` of this process before and after
it: every process of its tree that ended and was reaped by its parent, the short-lived ones too
(psutil's children_user/children_system read the same counters from /proc, in coarser ticks; a
sampler would miss a process that lived between two samples). A process that outlives its parent
and is reaped by init is not counted. A run's busy cores are its CPU seconds over its wall seconds.
For the whole test, scripts/bench_plugin.py (loaded into every pytest it runs) gives each test
file's CPU seconds, its kernel's included; the twenty costliest are printed, so that every change
shows what it costs. (tests/scope_seconds.json, the wall seconds that order the files, stays the
scheduler's input: `course.py test --store-durations`.)

The targets (CONTRIBUTING.md): a notebook alone <= its `course.budget_r` (at most 6 R, 6 R where it
has none), its kernel and children <= 1.5 GiB; each edition's notebook suite <= 24 R; a parallel run
<= 1.5 GiB for each worker; the whole test <= 140 R, keeping at least 0.9 of the CPUs busy (1.8 of
2); a 2-rank launch <= 1.05x a bare fork. A notebook's `course.floor_r` (with its `floor_why`),
where it states one, is printed beside the figures, and is its time target where it is above its
budget_r. A suite's and the whole test's CPU floor, their CPU seconds over the cores, is the least
wall time any order of their tests can reach: where it is above the target, only spending less CPU
can meet it.

Everything measured goes to `--json FILE` (relative to the course root; default build/bench.json):
    schema      1
    measured    when (ISO 8601, with the local offset)
    cpus        the CPUs this process may use
    workers     a parallel run's pytest workers (`course.py test`'s: one more than the CPUs, as many
                as the memory holds at 1.5 GiB each); absent in a file written before it: the CPUs
    r_runs_s    the 3 wall times of `python -c "import torch"`, seconds; R is their median
    runs        each run: name, kind ("notebook", "suite", "unit tests", "whole test"), seconds,
                cpu_s, peak_mib, status (exit status); a notebook's also budget_r, floor_r, floor_why
                (null where it has none); its seconds are kernel start to last cell
    files_cpu_s each test file's CPU seconds in the whole test ({} where it did not run)
    launch      launch_s and floor_s, the medians of the 2-rank launch and the bare fork (null
                where the script measured nothing), and status, its exit status (0 where it
                measured); null where the launch did not run
and, derived from those, r_s (R in seconds) and problems (what failed or is over its target).
`--replay FILE` reports such a file without measuring anything; `--markdown FILE` writes the table
of the figures against their targets that CONTRIBUTING.md holds.

Every notebook is read first: one that is not a valid notebook, or whose budget_r, floor_r or
floor_why is not what CONTRIBUTING.md says, is named in one line and nothing runs. A run that fails
is marked FAILED and its end follows the table. Exits 1 when a target is missed or something
failed, 2 on bad arguments.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import psutil
from bench_plugin import MODULE, PLUGINS_VARIABLE, RECORDS_VARIABLE, FileCost, read_records
from command_help import command_parser
from course_shell import ROOT, WORKER_MEMORY_BYTES, pytest_command, pytest_workers, worker_count
from notebook_args import NOTEBOOKS, notebooks_from_args

# The targets (CONTRIBUTING.md), for a machine that runs nothing else. R: the median wall time of
# R_RUNS fresh `python -c "import torch"`.
R_CODE = "import torch"
R_RUNS = 3
NOTEBOOK_BUDGET_R = 6.0  # one notebook alone; its metadata `course.budget_r` may ask for less
NOTEBOOK_MEMORY_MIB = WORKER_MEMORY_BYTES / 2**20  # one notebook's kernel and children: Binder gives 2 GiB
SUITE_BUDGET_R = 24.0  # each edition's notebook suite, in parallel
RUN_MEMORY_MIB = NOTEBOOK_MEMORY_MIB  # every process of a parallel run together, for each worker
WHOLE_BUDGET_R = 140.0  # `course.py test` after set-up
BUSY_SHARE = 0.9  # of the CPUs, kept busy on average during the whole test: 1.8 of 2
LAUNCH_RATIO = 1.05  # a 2-rank launch against a bare fork of the same job
LAUNCH_FLOOR = ROOT / "scripts" / "launch_floor.py"
TOP_FILES = 20
SCHEMA = 1
DEFAULT_JSON = ROOT / "build" / "bench.json"
# Between two memory samples, at least. A sample reads every process's memory map from /proc: about
# 5 ms of CPU for each process that imported torch. A whole parallel test run has forty-odd
# processes, and a sample of them took 77 ms here: every 50 ms, that was over half a core of a
# 2-core machine, slowing what it measured. So the pause grows with the sample's cost, and
# sampling takes at most SAMPLER_SHARE of one core.
SAMPLE_SECONDS = 0.05
SAMPLER_SHARE = 0.1
MIB = 2**20


@dataclass(frozen=True)
class Measured:
    """One measured run, as bench.json holds it (all but `output`, the run's own, kept for a failure)."""

    name: str
    kind: str  # "notebook", "suite", "unit tests" or "whole test"
    seconds: float  # a notebook: from its kernel's start to its last cell; else the run's wall time
    cpu_s: float
    peak_mib: float
    status: int
    budget_r: float | None = None
    floor_r: float | None = None
    floor_why: str | None = None
    output: str = field(default="", repr=False)


@dataclass(frozen=True)
class Bench:
    """What one bench measured (bench.json without its derived figures)."""

    measured: str
    cpus: int
    r_runs_s: list[float]
    runs: list[Measured]
    files_cpu_s: dict[str, float] = field(default_factory=dict)
    launch: dict[str, Any] | None = None  # launch_s, floor_s (None: not measured) and status
    workers: int | None = None  # a parallel run's; None (an older bench.json): as many as the CPUs

    @property
    def run_workers(self) -> int:
        """A parallel run's workers: as many as the CPUs in a bench.json written before they were recorded."""
        return self.workers or self.cpus

    @property
    def r(self) -> float:
        """R in seconds: the median of the runs of `python -c "import torch"`."""
        return statistics.median(self.r_runs_s)


def tree_memory(pid: int, *, with_root: bool = True) -> int:
    """Bytes the descendants of process `pid` (and `pid` itself unless not `with_root`) take together.

    Each process counts its proportional set size (PSS, Linux), so a page shared by several forked
    processes is counted once across them; where PSS is unknown (macOS, Windows), its resident size.
    """
    try:
        root = psutil.Process(pid)
        procs = [root] * with_root + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):  # a process that ended meanwhile counts nothing
            info = proc.memory_full_info()
            total += getattr(info, "pss", info.rss)
    return total


def pause_after(sample_seconds: float) -> float:
    """Seconds to wait after a memory sample that took `sample_seconds`: SAMPLE_SECONDS, or longer
    for a costly sample, so that sampling takes at most SAMPLER_SHARE of a core."""
    return max(SAMPLE_SECONDS, sample_seconds * (1 - SAMPLER_SHARE) / SAMPLER_SHARE)


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's descendants that have ended and been reaped."""
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ended.ru_utime + ended.ru_stime


def measure(
    name: str, kind: str, cmd: Sequence[str | Path], *, with_root: bool = True
) -> tuple[Measured, dict[str, FileCost]]:
    """Run `cmd` from the course root, keeping its output: its time, CPU and tree's peak memory, and
    what each test file of a pytest in it cost (scripts/bench_plugin.py)."""
    with (
        tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log,
        tempfile.TemporaryDirectory(prefix="bench-records-") as records,
    ):
        plugins = ",".join(filter(None, [os.environ.get(PLUGINS_VARIABLE), MODULE]))
        env = os.environ | {RECORDS_VARIABLE: records, PLUGINS_VARIABLE: plugins}
        cpu_before = children_cpu_s()
        start = time.monotonic()
        proc = subprocess.Popen(
            list(map(str, cmd)), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        peak = 0
        while proc.poll() is None:
            sampled = time.monotonic()
            peak = max(peak, tree_memory(proc.pid, with_root=with_root))
            time.sleep(pause_after(time.monotonic() - sampled))
        seconds = time.monotonic() - start
        cpu_s = children_cpu_s() - cpu_before
        log.seek(0)
        run = Measured(name, kind, seconds, cpu_s, peak / MIB, proc.returncode, output=log.read())
        return run, read_records(Path(records))


def wall_times(code: str, runs: int = R_RUNS) -> list[float]:
    """The wall seconds of `runs` fresh `python -c CODE`, start-up included; RuntimeError if one fails."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if run.returncode != 0:
            raise RuntimeError(f"`python -c {code!r}` failed: {run.stderr.strip()[-300:]}")
    return times


def course_metadata(path: Path) -> dict[str, Any]:
    """A notebook's budget_r, floor_r and floor_why (None where absent); ValueError naming a bad one."""
    course = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("course", {})
    found = {key: course.get(key) for key in ("budget_r", "floor_r", "floor_why")}
    for key, top in (("budget_r", NOTEBOOK_BUDGET_R), ("floor_r", None)):
        value = found[key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if value is not None and not (number and value > 0 and (top is None or value <= top)):
            limit = f" and at most {top:g}" if top else ""
            raise ValueError(
                f"{shown(path)}: metadata course.{key} is {value!r}, not a number of R above 0{limit} "
                "(CONTRIBUTING.md, the notebook's metadata)"
            )
    why = found["floor_why"]
    if why is not None and not (isinstance(why, str) and why.strip()):
        raise ValueError(f"{shown(path)}: metadata course.floor_why is {why!r}, not a sentence")
    if (found["floor_r"] is None) != (why is None):
        raise ValueError(
            f"{shown(path)}: metadata course.floor_r and course.floor_why come together: the floor in R "
            "and one sentence on why the notebook cannot run faster"
        )
    return found


def unreadable(notebooks: Sequence[Path]) -> list[str]:
    """One line for each file that is not a valid notebook or whose course metadata is bad (read before
    anything runs)."""
    import nbformat  # here, not at the top: its import (over a second) is not paid by `--help` and bad names

    problems = []
    for path in notebooks:
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
            course_metadata(path)
        except (nbformat.reader.NotJSONError, nbformat.ValidationError, UnicodeDecodeError, OSError) as err:
            problems.append(
                f"{path.name} is not a valid notebook file ({type(err).__name__}); nothing was run."
            )
        except ValueError as err:
            problems.append(f"{err}; nothing was run.")
    return problems


def shown(path: Path) -> str:
    """A notebook as the report names it: its path under notebooks/ (`zh-CN/05_x.ipynb` for a Chinese one)."""
    return path.relative_to(NOTEBOOKS).as_posix() if path.is_relative_to(NOTEBOOKS) else path.name


def editions(notebooks: Sequence[Path]) -> dict[str, list[Path]]:
    """The notebooks grouped by edition, each a suite of its own: "English", the folder's name under
    notebooks/ ("zh-CN"), or "given" for notebooks elsewhere."""
    grouped: dict[str, list[Path]] = {}
    for path in notebooks:
        if path.parent == NOTEBOOKS:
            edition = "English"
        else:
            edition = path.parent.name if path.parent.parent == NOTEBOOKS else "given"
        grouped.setdefault(edition, []).append(path)
    return grouped


def notebook_alone(path: Path) -> Measured:
    """Notebook `path` alone under strict nbval: from its kernel's start to its last cell."""
    # -x: the report shows the first failing cell, whose error the cells after it only echo.
    command = [sys.executable, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:cacheprovider", path]
    run, files = measure(shown(path), "notebook", command, with_root=False)
    own = next(iter(files.values()), None)  # its one file; none where pytest ran no cell
    if own is not None:
        run = replace(run, seconds=own.seconds, cpu_s=own.cpu_s)
    return replace(run, **course_metadata(path))


def measure_launch() -> dict[str, Any]:
    """The 2-rank launch and the bare fork (scripts/launch_floor.py): their seconds and the script's exit
    status; where it measured nothing (None for both), its output is printed."""
    done = subprocess.run(
        [sys.executable, str(LAUNCH_FLOOR), "--json"], cwd=ROOT, capture_output=True, text=True
    )
    with contextlib.suppress(json.JSONDecodeError, IndexError, KeyError, TypeError):
        figures = json.loads(done.stdout.splitlines()[-1])
        return {"launch_s": float(figures["launch_s"]), "floor_s": float(figures["floor_s"]), "status": 0}
    print(f"--- {LAUNCH_FLOOR.name} measured nothing; its output ---\n{done.stdout}{done.stderr}", flush=True)
    return {"launch_s": None, "floor_s": None, "status": done.returncode or 1}


def notebook_target_r(run: Measured) -> float:
    """A notebook's time alone, at most: its budget_r (NOTEBOOK_BUDGET_R where it has none), or the floor
    it states where that is higher: the least its lesson takes, which no budget can ask it to beat."""
    return max(run.budget_r or NOTEBOOK_BUDGET_R, run.floor_r or 0.0)


def run_target_r(run: Measured) -> float | None:
    """A run's time target in R (None: it has none)."""
    if run.kind == "notebook":
        return notebook_target_r(run)
    return {"suite": SUITE_BUDGET_R, "whole test": WHOLE_BUDGET_R}.get(run.kind)


def memory_target_mib(bench: Bench, run: Measured) -> float:
    """A run's memory target: a notebook's kernel and children, or every process of a parallel run
    (as much for each worker: a worker runs one notebook at a time)."""
    return NOTEBOOK_MEMORY_MIB if run.kind == "notebook" else RUN_MEMORY_MIB * bench.run_workers


def busy_target(bench: Bench) -> float:
    """The cores the whole test keeps busy on average, at least."""
    return BUSY_SHARE * bench.cpus


def busy_cores(run: Measured) -> float:
    """The cores a run kept busy on average: its CPU seconds over its wall seconds."""
    return run.cpu_s / run.seconds if run.seconds > 0 else 0.0


def cpu_floor_s(bench: Bench, run: Measured) -> float:
    """The least wall time a parallel run's CPU allows: its CPU seconds spread over every core. No order
    of its tests finishes sooner; only spending less CPU does."""
    return run.cpu_s / bench.cpus


def launch_ratio(bench: Bench) -> float | None:
    """The 2-rank launch's time over the bare fork's (None: not measured)."""
    if not bench.launch or bench.launch["status"] != 0:
        return None
    return bench.launch["launch_s"] / bench.launch["floor_s"]


def misses(bench: Bench, run: Measured) -> list[str]:
    """Which of its targets a run misses: "time", "memory", "cores" (the whole test's)."""
    target = run_target_r(run)
    missed = []
    if target is not None and run.seconds > target * bench.r:
        missed.append("time")
    if run.peak_mib > memory_target_mib(bench, run):
        missed.append("memory")
    if run.kind == "whole test" and busy_cores(run) < busy_target(bench):
        missed.append("cores")
    return missed


def verdicts(bench: Bench) -> list[str]:
    """What failed or misses its target, one line each (empty: every target kept)."""
    r, problems = bench.r, []
    for run in bench.runs:
        alone = " alone" if run.kind == "notebook" else ""
        if run.status != 0:
            under = " under nbval (pytest" if run.kind == "notebook" else " ("
            problems.append(f"FAILED: {run.name} failed{under} exit status {run.status})")
        missed = misses(bench, run)
        if "time" in missed:
            target = run_target_r(run) or 0.0
            problems.append(
                f"OVER BUDGET: {run.name} took {run.seconds:.1f} s{alone} = {run.seconds / r:.1f} R "
                f"(budget {target:g} R = {target * r:.1f} s)"
            )
        if "memory" in missed:
            problems.append(
                f"OVER BUDGET: {run.name} peaked at {run.peak_mib:.0f} MiB "
                f"(budget {memory_target_mib(bench, run):.0f} MiB)"
            )
        if "cores" in missed:
            problems.append(
                f"BELOW TARGET: {run.name} kept {busy_cores(run):.2f} of {bench.cpus} cores busy "
                f"(target at least {busy_target(bench):.2f})"
            )
    if bench.launch and bench.launch["status"] != 0:
        problems.append(
            f"FAILED: the 2-rank launch ({LAUNCH_FLOOR.name}, exit status {bench.launch['status']}; "
            "its output came before the table)"
        )
    ratio = launch_ratio(bench)
    if ratio is not None and ratio > LAUNCH_RATIO:
        problems.append(
            f"OVER BUDGET: a 2-rank launch took {ratio:.2f}x a bare fork (budget {LAUNCH_RATIO}x)"
        )
    return problems


def targets_line(cpus: int, workers: int) -> str:
    """The targets, stated in R with the numbers they hold."""
    return (
        f"Targets: a notebook alone (kernel start to last cell) <= its budget_r, at most "
        f"{NOTEBOOK_BUDGET_R:g} R, its kernel and children <= {NOTEBOOK_MEMORY_MIB:.0f} MiB; each edition's "
        f"notebook suite <= {SUITE_BUDGET_R:g} R; a parallel run of {workers} workers <= "
        f"{RUN_MEMORY_MIB * workers:.0f} MiB; the whole "
        f"test <= {WHOLE_BUDGET_R:g} R, at least {BUSY_SHARE * cpus:.2f} of {cpus} cores busy; a 2-rank "
        f"launch <= {LAUNCH_RATIO}x a bare fork."
    )


def r_line(bench: Bench) -> str:
    """R and the runs it is the median of."""
    runs = ", ".join(f"{seconds:.2f}" for seconds in bench.r_runs_s)
    count = len(bench.r_runs_s)
    return f'R = {bench.r:.2f} s: the median of {count} fresh `python -c "import torch"` ({runs} s)'


def table(bench: Bench) -> list[str]:
    """The measured runs, one line each: seconds and R, the target, CPU, busy cores, memory, result."""
    header = (
        f"{'what':52} {'seconds':>8} {'R':>7} {'target':>8} {'CPU s':>8} {'cores':>6} {'peak MiB':>9}  result"
    )
    lines = [header]
    for run in bench.runs:
        target = run_target_r(run)
        missed = misses(bench, run)
        result = "passed" if run.status == 0 else f"FAILED ({run.status})"
        if missed:
            result += f", OVER: {', '.join(missed)}"
        cores = "" if run.kind == "notebook" else f"{busy_cores(run):.2f}"
        target_text = f"{target:g} R" if target else "-"
        lines.append(
            f"{run.name:52} {run.seconds:8.1f} {run.seconds / bench.r:5.1f} R {target_text:>8} "
            f"{run.cpu_s:8.1f} {cores:>6} {run.peak_mib:9.0f}  {result}"
        )
    ratio = launch_ratio(bench)
    if bench.launch and ratio is not None:
        lines.append(
            f"2-rank launch {bench.launch['launch_s'] * 1e3:.1f} ms against a bare fork "
            f"{bench.launch['floor_s'] * 1e3:.1f} ms: {ratio:.2f}x (target <= {LAUNCH_RATIO}x)"
        )
    return lines


def notes(bench: Bench) -> list[str]:
    """The floors the notebooks state, the CPU floors of the suites and the whole test, and which
    notebooks have no budget_r of their own."""
    notebooks = [run for run in bench.runs if run.kind == "notebook"]
    lines = [
        f"{run.name}: its floor is {run.floor_r:g} R = {run.floor_r * bench.r:.1f} s: {run.floor_why}"
        for run in notebooks
        if run.floor_r is not None
    ]
    for run in bench.runs:
        target = run_target_r(run)
        if run.kind in ("suite", "whole test") and target is not None:
            floor, most = cpu_floor_s(bench, run), target * bench.r * bench.cpus
            lines.append(
                f"{run.name}: its CPU floor is {floor:.1f} s = {floor / bench.r:.1f} R ({run.cpu_s:.1f} "
                f"CPU s over {bench.cpus} cores); {target:g} R needs at most {most:.0f} CPU s"
            )
    lacking = [run.name for run in notebooks if run.budget_r is None]
    if lacking:
        lines.append(f"Without course.budget_r (held to {NOTEBOOK_BUDGET_R:g} R): {', '.join(lacking)}")
    return lines


def top_files(bench: Bench, count: int = TOP_FILES) -> list[str]:
    """The test files that cost the whole test the most CPU, `count` of them, costliest first."""
    if not bench.files_cpu_s:
        return []
    whole = next((run for run in bench.runs if run.kind == "whole test"), None)
    ranked = sorted(bench.files_cpu_s.items(), key=lambda item: (-item[1], item[0]))
    in_files = sum(bench.files_cpu_s.values())
    of_whole = f" of the whole test's {whole.cpu_s:.1f}" if whole else ""
    lines = [
        f"CPU seconds of the whole test by file, the top {min(count, len(ranked))} of {len(ranked)} "
        f"(all files {in_files:.1f} CPU s{of_whole}; the rest: ruff, pytest's start-up and collection, "
        "the kernel zygotes' imports):",
        f"{'CPU s':>8} {'R':>7}  file",
    ]
    lines += [f"{cpu:8.1f} {cpu / bench.r:5.1f} R  {name}" for name, cpu in ranked[:count]]
    return lines


def kept(over: int, of: int = 1) -> str:
    """A Markdown cell: "yes" when no run missed the target, else how many of how many did."""
    return "yes" if not over else "no" if of == 1 else f"no: {over} of {of} over"


def markdown(bench: Bench) -> str:
    """The figures against their targets as CONTRIBUTING.md's table (Markdown), one row a target."""
    r = bench.r
    rows = [
        (
            f'R: `python -c "import torch"`, median of {len(bench.r_runs_s)}',
            "the unit",
            f"{r:.2f} s",
            "1 R",
            "",
        )
    ]
    notebooks = [run for run in bench.runs if run.kind == "notebook"]
    if notebooks:
        nearest = max(notebooks, key=lambda run: run.seconds / notebook_target_r(run))
        largest = max(notebooks, key=lambda run: run.peak_mib)
        rows += [
            (
                f"a notebook alone, kernel start to last cell (closest to its budget: {nearest.name})",
                f"its `budget_r`, at most {NOTEBOOK_BUDGET_R:g} R, or its `floor_r`",
                f"{nearest.seconds:.1f} s",
                f"{nearest.seconds / r:.1f} R of {notebook_target_r(nearest):g} R",
                kept(sum("time" in misses(bench, run) for run in notebooks), len(notebooks)),
            ),
            (
                f"a notebook's kernel and children, PSS (largest: {largest.name})",
                f"<= {NOTEBOOK_MEMORY_MIB:.0f} MiB",
                f"{largest.peak_mib:.0f} MiB",
                "",
                kept(sum("memory" in misses(bench, run) for run in notebooks), len(notebooks)),
            ),
        ]
    parallel = [run for run in bench.runs if run.kind != "notebook"]
    for run in parallel:
        target = run_target_r(run)
        missed = misses(bench, run)
        rows.append(
            (
                run.name,
                f"<= {target:g} R" if target else "",
                f"{run.seconds:.1f} s",
                f"{run.seconds / r:.1f} R",
                kept("time" in missed) if target else "",
            )
        )
        if target:
            floor = cpu_floor_s(bench, run)
            rows.append(
                (
                    f"its CPU floor: {run.cpu_s:.0f} CPU s over {bench.cpus} cores",
                    f"<= {target:g} R",
                    f"{floor:.1f} s",
                    f"{floor / r:.1f} R",
                    kept(floor > target * r),
                )
            )
        if run.kind == "whole test":
            rows.append(
                (
                    f"cores kept busy during the whole test ({run.cpu_s:.0f} CPU s in {run.seconds:.0f} s)",
                    f">= {busy_target(bench):.1f} of {bench.cpus}",
                    f"{busy_cores(run):.2f}",
                    "",
                    kept("cores" in missed),
                )
            )
    if parallel:
        largest = max(parallel, key=lambda run: run.peak_mib)
        rows.append(
            (
                f"a parallel run's processes, PSS (largest: {largest.name})",
                f"<= {memory_target_mib(bench, largest):.0f} MiB ({bench.run_workers} workers)",
                f"{largest.peak_mib:.0f} MiB",
                "",
                kept(sum("memory" in misses(bench, run) for run in parallel), len(parallel)),
            )
        )
    ratio = launch_ratio(bench)
    if ratio is not None:
        rows.append(
            (
                "a 2-rank launch against a bare fork",
                f"<= {LAUNCH_RATIO}x",
                f"{ratio:.2f}x",
                "",
                kept(ratio > LAUNCH_RATIO),
            )
        )
    lines = [
        f"Measured {bench.measured[:10]} by `python3 course.py bench` on {bench.cpus} CPUs, R = {r:.2f} s:",
        "",
        "| figure | target | measured | in R | kept |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def to_json(bench: Bench) -> dict[str, Any]:
    """bench.json's content: what was measured, then R and the problems derived from it."""
    runs = [{key: value for key, value in asdict(run).items() if key != "output"} for run in bench.runs]
    return {
        "schema": SCHEMA,
        **asdict(bench),
        "runs": runs,
        "r_s": bench.r,
        "problems": verdicts(bench),
    }


def from_json(path: Path) -> Bench:
    """A bench as bench.json at `path` holds it; ValueError saying what is wrong with the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            raise ValueError(f"its schema is {data.get('schema')!r}, not {SCHEMA}")
        names = {f.name for f in fields(Measured)} - {"output"}
        runs = [Measured(**{key: run[key] for key in names if key in run}) for run in data["runs"]]
        given = {f.name: data[f.name] for f in fields(Bench) if f.name in data}
        bench = Bench(**given | {"runs": runs})
        report(bench), markdown(bench)  # every figure read once: a missing or wrong one fails here
        return bench
    except (OSError, AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        raise ValueError(
            f"--replay {path}: not a bench.json that `python3 course.py bench` wrote "
            f"({type(err).__name__}: {err})"
        ) from None


def failure_report(run: Measured, lines: int = 60) -> str:
    """The end of a failed run's own output: pytest's report of what failed."""
    tail = run.output.rstrip().splitlines()[-lines:]
    return f"--- {run.name}: the last {len(tail)} lines of its output ---\n" + "\n".join(tail)


def report(bench: Bench) -> list[str]:
    """Everything the bench prints after measuring: R, the table, notes, the costliest files, verdicts."""
    problems = verdicts(bench)
    return [
        r_line(bench),
        *table(bench),
        *notes(bench),
        *top_files(bench),
        *(failure_report(run) for run in bench.runs if run.status != 0 and run.output),
        *(problems or ["Every target kept."]),
    ]


def writable(path: Path | None) -> str | None:
    """Why `path` cannot be written (its folder is made where missing); None if it can, or is None."""
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"{path}: its folder cannot be made ({err.strerror})"
    return None if os.access(path.parent, os.W_OK) else f"{path}: its folder is not writable"


def measure_everything(notebooks: Sequence[Path], everything: bool) -> Bench:
    """R, then each notebook alone, each edition's suite and, with `everything`, the unit tests, the
    whole test and the launch; printing each figure as it comes."""
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    bench = Bench(now, worker_count(), wall_times(R_CODE), [], workers=pytest_workers())
    print(r_line(bench), flush=True)
    runs: list[Measured] = []

    def measured(run: Measured) -> None:
        runs.append(run)
        print("measured:", table(replace(bench, runs=[run]))[1], flush=True)

    for path in notebooks:
        measured(notebook_alone(path))
    quiet = ["-q", "-p", "no:cacheprovider"]
    for edition, members in editions(notebooks).items():
        if len(members) > 1:  # a suite of one notebook: measured alone above
            suite = pytest_command(sys.executable, [*quiet, *map(str, members)])
            measured(
                measure(f"{edition} notebook suite, parallel ({bench.workers} workers)", "suite", suite)[0]
            )
    if not everything:
        return replace(bench, runs=runs)
    units = pytest_command(sys.executable, [*quiet, "tests"])
    measured(measure("unit tests, parallel", "unit tests", units)[0])
    whole, files = measure(
        "whole `course.py test` (ruff, every test)",
        "whole test",
        [sys.executable, ROOT / "course.py", "test"],
    )
    measured(whole)
    files_cpu_s = {name: cost.cpu_s for name, cost in files.items()}
    return replace(bench, runs=runs, files_cpu_s=files_cpu_s, launch=measure_launch())


def main(argv: list[str]) -> int:
    """Measure (or replay), print the table and what misses its target; 1 if anything does, 2 on bad
    arguments."""
    options = command_parser("bench").parse_args(argv)
    options.json = options.json or DEFAULT_JSON
    written = [options.markdown] if options.replay else [options.json, options.markdown]
    problems = [why for why in map(writable, written) if why]
    if options.replay and options.notebooks:
        problems.append("--replay reports a bench.json written earlier: give it no NOTEBOOK")
    if problems:
        print("\n".join(problems))
        return 2
    if options.replay:
        try:
            bench = from_json(options.replay)
        except ValueError as err:
            print(err)
            return 2
    else:
        notebooks, missing = notebooks_from_args(options.notebooks)
        if missing:
            print(f"No such notebook: {', '.join(missing)}; name one as notebooks/05_data_parallel.ipynb")
            return 2
        problems = unreadable(notebooks)
        if problems:
            print("\n".join(problems))
            return 2
        print(targets_line(worker_count(), pytest_workers()), flush=True)
        try:
            bench = measure_everything(notebooks, everything=not options.notebooks)
        except RuntimeError as err:
            print(f"R could not be measured: {err}")
            return 1
        options.json.write_text(json.dumps(to_json(bench), indent=1) + "\n", encoding="utf-8")
    print("\n".join(report(bench)))
    if not options.replay:
        print(f"Every figure: {options.json}")
    if options.markdown:
        options.markdown.write_text(markdown(bench), encoding="utf-8")
        print(f"CONTRIBUTING.md's table: {options.markdown}")
    return 1 if verdicts(bench) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
