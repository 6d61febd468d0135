"""Check the course's budgets: time and peak memory of every notebook under nbval.

Usage: python scripts/benchmark.py [NOTEBOOK ...]   (default: every notebook in notebooks/)

Each notebook runs in its own `pytest --nbval` process. Wall time is that run's; peak memory
is the largest sum, sampled every 20 ms, of the resident memory of the Jupyter kernel and
all of its children (DDP workers, for example). Budgets are those of the course: a notebook
under 20 s, the suite under 90 s on a 2-core machine, the kernel with its children under
1.5 GiB (Binder gives 2 GiB). Exits 1 when a budget is exceeded.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_BUDGET_S = 20.0
SUITE_BUDGET_S = 90.0
MEMORY_BUDGET_MIB = 1536.0


def kernel_tree_rss(pytest_proc: psutil.Process) -> int:
    """Resident bytes of every descendant of the pytest process (the kernel and its children)."""
    total = 0
    try:
        descendants = pytest_proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    for proc in descendants:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def measure(notebook: Path) -> tuple[float, float, int]:
    """Run one notebook under nbval; return (seconds, peak MiB, pytest exit status)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(notebook)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watched = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, kernel_tree_rss(watched))
        time.sleep(0.02)
    return time.perf_counter() - start, peak / 2**20, proc.returncode


def main(argv: list[str]) -> int:
    """Measure the notebooks, print a table and return 1 if a budget is exceeded."""
    notebooks = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    print(f"{'notebook':40} {'seconds':>8} {'peak MiB':>9}  result")
    total, failures = 0.0, []
    for nb in notebooks:
        seconds, peak_mib, status = measure(nb)
        total += seconds
        verdict = "passed" if status == 0 else f"FAILED (pytest exit {status})"
        print(f"{nb.name:40} {seconds:8.1f} {peak_mib:9.0f}  {verdict}", flush=True)
        if status != 0:
            failures.append(f"{nb.name} failed under nbval")
        if seconds > NOTEBOOK_BUDGET_S:
            failures.append(f"{nb.name} took {seconds:.1f} s (budget {NOTEBOOK_BUDGET_S:.0f} s)")
        if peak_mib > MEMORY_BUDGET_MIB:
            failures.append(f"{nb.name} peaked at {peak_mib:.0f} MiB (budget {MEMORY_BUDGET_MIB:.0f})")
    print(f"{'suite (sum of the runs above)':40} {total:8.1f}")
    if total > SUITE_BUDGET_S:
        failures.append(f"the suite took {total:.1f} s (budget {SUITE_BUDGET_S:.0f} s)")
    for failure in failures:
        print("OVER BUDGET:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
