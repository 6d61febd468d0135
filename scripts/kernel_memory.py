"""Peak memory of the course taken in order on a small machine such as Binder's (2 GiB).

Usage: python scripts/kernel_memory.py [NOTEBOOK ...]   (default: every notebook in notebooks/)

Each notebook runs top to bottom in its own kernel (as a student runs it); the memory of the
kernel and its children (their PSS, as `benchmark.tree_memory` counts it) is sampled every 20 ms
and after each cell. Printed per notebook: the peak while it runs and what its kernel still holds
when it is done. Then the two totals that matter: the peak when each finished notebook's kernel is
shut down (the course's advice) and the peak when every kernel is left running.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from benchmark import tree_memory
from notebook_args import notebook_parser, notebooks_from_args

MIB = 1024 * 1024


def measure(path: Path) -> tuple[int, int]:
    """Run notebook `path` in a fresh kernel; return (peak bytes while running, bytes held when done)."""
    import nbformat  # here, not at the top: their imports (over a second) are not paid by `--help`
    from kernel_sockets import AsyncSocketKernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        kernel_manager_class=AsyncSocketKernelManager,
        resources={"metadata": {"path": str(path.parent)}},
    )
    peak = 0
    done = threading.Event()
    with client.setup_kernel():
        pid = client.km.provisioner.process.pid

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.02):
                peak = max(peak, tree_memory(pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        between_cells = 0  # also sampled here, so that what a cell leaves behind is never missed
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
                between_cells = max(between_cells, tree_memory(pid))
        finally:
            done.set()
            sampler.join()
        held = tree_memory(pid)
    return max(peak, between_cells, held), held


def course_peaks(measured: list[tuple[int, int]]) -> tuple[int, int]:
    """(peak with each finished kernel shut down, peak with every kernel left running), in bytes.

    `measured` holds (peak while running, held when done) per notebook, in the order taken.
    """
    shut_down = left_open = held_before = 0
    for peak, held in measured:
        shut_down = max(shut_down, peak)
        left_open = max(left_open, held_before + peak)
        held_before += held
    return shut_down, left_open


def main(argv: list[str]) -> int:
    """Measure the notebooks named in `argv` (all by default) in order and print the totals."""
    names = notebook_parser(
        "python scripts/kernel_memory.py", "Peak memory of the course taken in order, each kernel alone."
    ).parse_args(argv)
    notebooks, missing = notebooks_from_args(names.notebooks)
    if missing:
        print(f"No such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    measured = []
    print(f"{'notebook':40} {'peak MiB':>9} {'held after MiB':>15}")
    for path in notebooks:
        peak, held = measure(path)
        measured.append((peak, held))
        print(f"{path.name:40} {peak / MIB:9.0f} {held / MIB:15.0f}", flush=True)
    shut_down, left_open = course_peaks(measured)
    print(f"peak, each kernel shut down after its notebook: {shut_down / MIB:.0f} MiB")
    print(f"peak, every kernel left running:                {left_open / MIB:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
