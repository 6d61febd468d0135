"""The course's budgets, measured: the one place that holds the numbers (no test is timed).

    python3 course.py bench [NOTEBOOK ...]

Measured on this machine, each as a child process whose whole process tree is sampled for
memory every 50 ms (less often where sampling a large tree would take over a tenth of a core): the
sum of its processes' proportional set sizes (PSS), which counts a page that forked ranks share
with their parent once, as the machine (or a container's memory limit) does; resident sizes
would count it in every process:

1. each notebook alone under strict nbval (seconds, peak MiB of its kernel and the kernel's
   children), as a student's "Run All" would load the machine, up to its first failing cell;
2. the notebook suite as `python3 course.py test notebooks/` runs it: in parallel, over every
   CPU (peak: every process of the run); each edition's suite on its own, an edition of one
   notebook not again (its suite is that notebook alone);
3. before these, the machine's speed: `import torch` and a Python loop, each in a fresh Python,
   so that the numbers of two days can be compared;
4. without NOTEBOOK arguments also the unit tests (`course.py test tests/`), the whole
   `python3 course.py test` after set-up (ruff and every test), and, where the course has
   `scripts/launch_floor.py`, a 2-rank launch against a bare fork, side by side.

Every notebook is read first: one that is not a valid notebook is named in one line and
nothing runs. A notebook that fails is marked FAILED and pytest's report follows the table.
Exits 1 when a budget is exceeded or something failed, 2 on bad arguments.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
from command_help import command_parser
from course_shell import ROOT, pytest_command, worker_count
from notebook_args import NOTEBOOKS, notebooks_from_args

# The budgets (CONTRIBUTING.md), for a 2-core machine that is otherwise idle.
NOTEBOOK_BUDGET_S = 15.0  # one notebook alone; its metadata `course.budget_s` may ask for less
NOTEBOOK_MEMORY_MIB = 1536.0  # one notebook's kernel and children: Binder gives 2 GiB
SUITE_BUDGET_S = 60.0  # the notebook suite, in parallel
RUN_MEMORY_MIB = 3072.0  # every process of a parallel run together
WHOLE_BUDGET_S = 150.0  # `course.py test` after set-up
WHOLE_BUDGET_TWO_EDITIONS_S = 210.0  # once a second edition (the Chinese one) doubles the notebooks
LAUNCH_RATIO = 1.1  # a 2-rank launch against a bare fork of the same job
LAUNCH_FLOOR = ROOT / "scripts" / "launch_floor.py"
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
    """One measured run: what ran, its wall time, the peak memory of its tree (PSS), its exit status."""

    name: str
    seconds: float
    peak_mib: float
    status: int
    output: str = ""


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


def measure(name: str, cmd: Sequence[str | Path], *, with_root: bool = True) -> Measured:
    """Run `cmd` from the course root, keeping its output: its time and its tree's peak memory."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(map(str, cmd)), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        peak = 0
        while proc.poll() is None:
            sampled = time.monotonic()
            peak = max(peak, tree_memory(proc.pid, with_root=with_root))
            time.sleep(pause_after(time.monotonic() - sampled))
        seconds = time.monotonic() - start
        log.seek(0)
        return Measured(name, seconds, peak / MIB, proc.returncode, log.read())


# What this machine's speed was while it measured: the budgets are for a 2-core machine at its usual
# speed, and that drifts (one Python loop took 0.5 to 1.3 s within an hour: CONTRIBUTING.md).
SPEED_PROBES = {
    "import torch": "import torch",
    "a Python loop of 10 million steps": "total = 0\nfor step in range(10_000_000):\n    total += step",
}
SPEED_REPEATS = 3
_TIMED = "import time\nstart = time.perf_counter()\nexec({code!r})\nprint(time.perf_counter() - start)"


def probe_seconds(code: str, repeats: int = SPEED_REPEATS) -> float:
    """The median time `code` takes in a fresh Python (its start-up not counted), over `repeats` runs."""
    times = []
    for _ in range(repeats):
        run = subprocess.run(
            [sys.executable, "-c", _TIMED.format(code=code)], cwd=ROOT, capture_output=True, text=True
        )
        if run.returncode != 0:
            raise RuntimeError(f"the speed probe {code!r} failed: {run.stderr.strip()[-300:]}")
        times.append(float(run.stdout.split()[-1]))
    return sorted(times)[len(times) // 2]


def speed_line(seconds: dict[str, float]) -> str:
    """The machine's speed as the report gives it, to compare one day's numbers with another's."""
    probes = ", ".join(f"{name} {value:.2f} s" for name, value in seconds.items())
    return f"This machine's speed now (medians of {SPEED_REPEATS}, each in a fresh Python): {probes}"


def notebook_budget(path: Path) -> float:
    """A notebook's own time budget in seconds: `metadata.course.budget_s`, at most NOTEBOOK_BUDGET_S."""
    course = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("course", {})
    return min(float(course.get("budget_s", NOTEBOOK_BUDGET_S)), NOTEBOOK_BUDGET_S)


def unreadable(notebooks: Sequence[Path]) -> list[str]:
    """One line for each file that is not a valid notebook (read before anything runs)."""
    import nbformat  # here, not at the top: its import (over a second) is not paid by `--help` and bad names

    problems = []
    for path in notebooks:
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except (nbformat.reader.NotJSONError, nbformat.ValidationError, UnicodeDecodeError, OSError) as err:
            problems.append(
                f"{path.name} is not a valid notebook file ({type(err).__name__}); nothing was run."
            )
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


def whole_budget(notebooks_folder: Path = NOTEBOOKS) -> float:
    """The whole test's budget: more once a second edition (notebooks in a folder of notebooks/) exists."""
    editions = [p for p in notebooks_folder.glob("*/[0-9][0-9]_*.ipynb") if p.parent.name != "workers"]
    return WHOLE_BUDGET_TWO_EDITIONS_S if editions else WHOLE_BUDGET_S


def verdicts(
    alone: Sequence[Measured],
    budgets: dict[str, float],
    runs: Sequence[tuple[Measured, float | None]],
) -> list[str]:
    """What failed or is over budget (empty: every budget kept).

    `alone`: each notebook run alone; `budgets`: each one's own time budget. `runs`: the parallel
    runs with their time budgets (None: none), each held to RUN_MEMORY_MIB.
    """
    problems = []
    for run in alone:
        if run.status != 0:
            problems.append(
                f"FAILED: {run.name} failed under nbval (pytest exit status {run.status}; report below)"
            )
        budget = budgets.get(run.name, NOTEBOOK_BUDGET_S)
        if run.seconds > budget:
            problems.append(f"OVER BUDGET: {run.name} took {run.seconds:.1f} s alone (budget {budget:.0f} s)")
        if run.peak_mib > NOTEBOOK_MEMORY_MIB:
            problems.append(
                f"OVER BUDGET: {run.name} peaked at {run.peak_mib:.0f} MiB "
                f"(budget {NOTEBOOK_MEMORY_MIB:.0f} MiB)"
            )
    for run, budget in runs:
        if run.status != 0:
            problems.append(f"FAILED: {run.name} (exit status {run.status}; report below)")
        if budget is not None and run.seconds > budget:
            problems.append(f"OVER BUDGET: {run.name} took {run.seconds:.1f} s (budget {budget:.0f} s)")
        if run.peak_mib > RUN_MEMORY_MIB:
            problems.append(
                f"OVER BUDGET: {run.name} peaked at {run.peak_mib:.0f} MiB (budget {RUN_MEMORY_MIB:.0f} MiB)"
            )
    return problems


def table(rows: Sequence[Measured]) -> list[str]:
    """The measured runs, one line each."""
    lines = [f"{'what':52} {'seconds':>8} {'peak MiB':>9}  result"]
    for row in rows:
        result = "passed" if row.status == 0 else f"FAILED ({row.status})"
        lines.append(f"{row.name:52} {row.seconds:8.1f} {row.peak_mib:9.0f}  {result}")
    return lines


def budgets_line(whole_s: float) -> str:
    """The budgets, stated with the numbers they hold."""
    return (
        f"Budgets (2 cores, idle): a notebook alone <= its budget_s, at most {NOTEBOOK_BUDGET_S:.0f} s, its "
        f"process tree <= {NOTEBOOK_MEMORY_MIB:.0f} MiB; each edition's notebook suite <= "
        f"{SUITE_BUDGET_S:.0f} s; a parallel run <= {RUN_MEMORY_MIB:.0f} MiB; the whole test <= "
        f"{whole_s:.0f} s "
        f"({WHOLE_BUDGET_S:.0f} s; {WHOLE_BUDGET_TWO_EDITIONS_S:.0f} s once a second edition exists); "
        f"a 2-rank launch within {LAUNCH_RATIO}x of a bare fork."
    )


def failure_report(run: Measured, lines: int = 60) -> str:
    """The end of a failed run's own output: pytest's report of what failed."""
    tail = run.output.rstrip().splitlines()[-lines:]
    return f"--- {run.name}: the last {len(tail)} lines of its output ---\n" + "\n".join(tail)


def main(argv: list[str]) -> int:
    """Measure, print the table and what is over budget; 1 if anything is, 2 on bad arguments."""
    names = command_parser("bench").parse_args(argv).notebooks
    notebooks, missing = notebooks_from_args(names)
    if missing:
        print(f"No such notebook: {', '.join(missing)}; name one as notebooks/05_data_parallel.ipynb")
        return 2
    problems = unreadable(notebooks)
    if problems:
        print("\n".join(problems))
        return 2
    everything = not names
    whole_s = whole_budget()
    print(budgets_line(whole_s), flush=True)
    print(speed_line({name: probe_seconds(code) for name, code in SPEED_PROBES.items()}), flush=True)
    quiet = ["-q", "-p", "no:cacheprovider"]
    alone = []
    for path in notebooks:
        # -x: the report shows the first failing cell, whose error the cells after it only echo.
        command = [sys.executable, "-m", "pytest", "-n", "0", "-x", *quiet, path]
        alone.append(measure(shown(path), command, with_root=False))
        print("measured:", table(alone[-1:])[1], flush=True)
    runs: list[tuple[Measured, float | None]] = []
    for edition, members in editions(notebooks).items():
        if len(members) == 1:  # measured alone above
            continue
        suite = measure(
            f"{edition} notebook suite, parallel ({worker_count()} workers)",
            pytest_command(sys.executable, [*quiet, *map(str, members)]),
        )
        runs.append((suite, SUITE_BUDGET_S))
    if everything:
        units = measure("unit tests, parallel", pytest_command(sys.executable, [*quiet, "tests"]))
        whole = measure(
            "whole `course.py test` (ruff, every test)", [sys.executable, ROOT / "course.py", "test"]
        )
        runs += [(units, None), (whole, whole_s)]
    print("\n".join(table([*alone, *(run for run, _ in runs)])))
    launch_failed = False
    if everything and LAUNCH_FLOOR.exists():
        print(f"2-rank launch against a bare fork ({LAUNCH_FLOOR.name}; budget {LAUNCH_RATIO}x):", flush=True)
        launch_failed = subprocess.call([sys.executable, str(LAUNCH_FLOOR)], cwd=ROOT) != 0
    budgets = {shown(path): notebook_budget(path) for path in notebooks}
    problems = verdicts(alone, budgets, runs)
    if launch_failed:
        problems.append(f"OVER BUDGET: the launch is not within {LAUNCH_RATIO}x of a bare fork (above)")
    for run in [*alone, *(run for run, _ in runs)]:
        if run.status != 0:
            print(failure_report(run))
    print("\n".join(problems) if problems else "Every budget kept.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
