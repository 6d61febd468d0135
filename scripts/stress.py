"""Run the notebooks that start processes several times while every CPU is kept busy.

    python3 course.py test --stress [--rounds N]

A process-starting cell must be correct on a busy laptop, not just usually fast enough. This
starts one busy-looping process per CPU, runs the notebooks whose metadata says
`course.starts_processes` under strict nbval N times (default 3) in the parallel form that
`course.py test` uses, stops the load, and passes only if every round passed. The load
processes also stop by themselves when this script dies or when their time limit is up, so
nothing is left running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from course_shell import ROOT, pytest_command, worker_count

ROUND_TIMEOUT_S = 1200  # a round that takes longer has hung: nbval's own cell timeout is 60 s
# One busy CPU: spins until its time limit or until its parent (this script) is gone.
SPIN = (
    "import os, sys, time\n"
    "parent, end = os.getppid(), time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end and os.getppid() == parent:\n"
    "    pass\n"
)


def rounds_number(text: str) -> int:
    """A number of rounds: a whole number of at least 1 (argparse's `type`)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"pass the number of rounds as a whole number of at least 1, not {text!r}"
        )
    return int(text)


def parser() -> argparse.ArgumentParser:
    """The script's arguments: `[--rounds N]`."""
    parser = argparse.ArgumentParser(
        prog="python3 course.py test --stress",
        description="Run the notebooks that start processes N times in parallel, every CPU kept busy.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--rounds", type=rounds_number, default=3, metavar="N", help="rounds to run (default 3)"
    )
    return parser


def process_notebooks(folder: Path) -> list[Path]:
    """The notebooks in `folder` whose metadata `course.starts_processes` is true, in order."""
    found = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        course = json.loads(path.read_text()).get("metadata", {}).get("course")
        if not isinstance(course, dict) or not isinstance(course.get("starts_processes"), bool):
            raise ValueError(
                f"{path.name} has no `course.starts_processes` (true or false) in its notebook "
                "metadata; add the `course` block that every notebook carries."
            )
        if course["starts_processes"]:
            found.append(path)
    return found


@contextmanager
def cpu_load(workers: int, limit_s: float) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Keep `workers` CPUs busy for at most `limit_s` seconds, and stop them on leaving the block."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN, str(limit_s)]) for _ in range(workers)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_round(notebooks: list[Path]) -> int:
    """Run the notebooks once under strict nbval; return pytest's exit status (-1: it hung, was killed)."""
    cmd = pytest_command(sys.executable, ["-q", "-p", "no:cacheprovider", *map(str, notebooks)])
    with subprocess.Popen(list(map(str, cmd)), cwd=ROOT, start_new_session=True) as proc:
        try:
            return proc.wait(timeout=ROUND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # pytest and its kernels: one process group
            proc.wait()
            print(f"The round hung for {ROUND_TIMEOUT_S} s and was stopped.", flush=True)
            return -1


def main(argv: list[str]) -> int:
    """Run the rounds under load; exit 0 only if every round passed."""
    rounds = parser().parse_args(argv).rounds
    try:
        notebooks = process_notebooks(ROOT / "notebooks")
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    workers = worker_count()
    print(f"{rounds} round(s) of {len(notebooks)} notebooks, {workers} busy process(es) as load:")
    print("  " + ", ".join(path.name for path in notebooks), flush=True)
    statuses = []
    with cpu_load(workers, limit_s=rounds * ROUND_TIMEOUT_S):
        for number in range(1, rounds + 1):
            start = time.monotonic()
            status = run_round(notebooks)
            statuses.append(status)
            verdict = "passed" if status == 0 else f"FAILED (pytest exit status {status})"
            print(f"Round {number}/{rounds}: {verdict} in {time.monotonic() - start:.0f} s", flush=True)
    passed = statuses.count(0)
    print(f"Stress: {passed} of {rounds} rounds passed under load.")
    return 0 if passed == rounds else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
