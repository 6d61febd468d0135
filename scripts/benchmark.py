"""Check the course's budgets: time and peak memory of every notebook under nbval.

Usage: python scripts/benchmark.py [NOTEBOOK ...]   (default: every notebook in notebooks/)

The notebooks run as an instructor runs them: one `pytest --nbval` process over all of them.
The suite's time is that whole run's wall time, pytest's start-up included. A notebook's time
is its span inside the run, from its first cell's test (kernel start) to its last (kernel
shut down), recorded by the plugin `notebook_spans`. Memory is sampled every 50 ms as the sum
of the resident memory of every process under pytest (the Jupyter kernel and its children,
DDP workers for example); a notebook's peak is the largest sample within its span. Budgets are
those of the course: a notebook under 20 s, the suite under 90 s on a 2-core machine, the
kernel with its children under 1.5 GiB (Binder gives 2 GiB). Exits 1 when a budget is exceeded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil
from notebook_args import ROOT, notebooks_from_args
from notebook_spans import SPANS_ENV

NOTEBOOK_BUDGET_S = 20.0
# Between two memory samples. A sample reads every process's entry in /proc (about 2 ms of CPU
# here), so sampling more often would slow the notebooks it measures on a 2-core machine.
SAMPLE_SECONDS = 0.05
SUITE_BUDGET_S = 90.0
MEMORY_BUDGET_MIB = 1536.0
Sample = tuple[float, int]  # (time.monotonic(), resident bytes of the kernel tree)


def tree_rss(pid: int, *, with_root: bool = True) -> int:
    """Resident bytes of the descendants of process `pid`, and of `pid` itself unless not `with_root`."""
    try:
        root = psutil.Process(pid)
        procs = [root] * with_root + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def run_suite(notebooks: Sequence[Path]) -> tuple[float, int, list[dict], list[Sample]]:
    """Run the notebooks in one nbval process; return (seconds, exit status, spans, memory samples)."""
    with tempfile.TemporaryDirectory() as scratch:
        spans_file = Path(scratch) / "spans.json"
        env = os.environ | {
            SPANS_ENV: str(spans_file),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT / "scripts"), os.environ.get("PYTHONPATH")])
            ),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "notebook_spans"]
        samples: list[Sample] = []
        start = time.monotonic()
        proc = subprocess.Popen(
            [*cmd, *map(str, notebooks)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while proc.poll() is None:
            samples.append((time.monotonic(), tree_rss(proc.pid, with_root=False)))  # kernel and children
            time.sleep(SAMPLE_SECONDS)
        seconds = time.monotonic() - start
        spans = json.loads(spans_file.read_text(encoding="utf-8")) if spans_file.exists() else []
    return seconds, proc.returncode, spans, samples


def peak_mib(samples: Sequence[Sample], start: float, end: float) -> float:
    """The largest memory sample taken between `start` and `end`, in MiB (0 when none was taken)."""
    return max((rss for t, rss in samples if start <= t <= end), default=0) / 2**20


def notebook_budget(path: Path) -> float:
    """A notebook's own time budget in seconds: `metadata.course.budget_s`, at most the hard limit."""
    course = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("course", {})
    return min(float(course.get("budget_s", NOTEBOOK_BUDGET_S)), NOTEBOOK_BUDGET_S)


def budget_report(
    names: Sequence[str],
    spans: Sequence[dict],
    samples: Sequence[Sample],
    suite_s: float,
    status: int,
    budgets: Mapping[str, float] | None = None,
) -> tuple[list[str], list[str]]:
    """The table of the run and the list of budgets exceeded (empty when all were kept).

    `names` are the notebooks asked for; one without a span did not run (a collection error, say).
    `budgets` gives a notebook's own time budget (`notebook_budget`); the hard limit otherwise.
    """
    by_name = {span["notebook"]: span for span in spans}
    lines = [f"{'notebook':40} {'seconds':>8} {'peak MiB':>9}  result"]
    failures = []
    explained = False  # whether a notebook's own failure accounts for a non-zero exit status
    for name in names:
        span = by_name.get(name)
        if span is None or span["end"] is None:
            lines.append(f"{name:40} {'-':>8} {'-':>9}  DID NOT RUN")
            failures.append(f"{name} did not run under nbval")
            explained = True
            continue
        seconds, peak = span["end"] - span["start"], peak_mib(samples, span["start"], span["end"])
        lines.append(f"{name:40} {seconds:8.1f} {peak:9.0f}  {'FAILED' if span['failed'] else 'passed'}")
        if span["failed"]:
            failures.append(f"{name} failed under nbval")
            explained = True
        budget = (budgets or {}).get(name, NOTEBOOK_BUDGET_S)
        if seconds > budget:
            failures.append(f"{name} took {seconds:.1f} s (budget {budget:.0f} s)")
        if peak > MEMORY_BUDGET_MIB:
            failures.append(f"{name} peaked at {peak:.0f} MiB (budget {MEMORY_BUDGET_MIB:.0f} MiB)")
    lines.append(f"{'suite (one nbval run, start-up included)':40} {suite_s:8.1f}")
    if suite_s > SUITE_BUDGET_S:
        failures.append(f"the suite took {suite_s:.1f} s (budget {SUITE_BUDGET_S:.0f} s)")
    if status != 0 and not explained:
        failures.append(
            f"pytest exited with status {status}; run the notebooks with `course.py test` to see why"
        )
    return lines, failures


def main(argv: list[str]) -> int:
    """Measure the notebooks, print a table and return 1 if a budget is exceeded."""
    notebooks, missing = notebooks_from_args(argv)
    if missing:
        print(f"No such notebook: {', '.join(missing)}; name one as notebooks/05_data_parallel.ipynb")
        return 2
    print(f"Running {len(notebooks)} notebook(s) in one nbval process ...", flush=True)
    suite_s, status, spans, samples = run_suite(notebooks)
    budgets = {nb.name: notebook_budget(nb) for nb in notebooks}
    lines, failures = budget_report([nb.name for nb in notebooks], spans, samples, suite_s, status, budgets)
    print("\n".join(lines))
    for failure in failures:
        print("OVER BUDGET:" if "budget" in failure else "FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
