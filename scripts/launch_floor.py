"""The course's `launch` against the floor: a bare `torch.multiprocessing.start_processes(fork)`.

The same 2-rank job for both (init gloo on loopback, one all_reduce, a barrier, destroy),
measured side by side in one run, alternating, and summarised as the median of `--repeat`
launches each. Prints both medians and their ratio (with `--json`: one JSON object, launch_s and
floor_s, the medians in seconds, for `course.py bench`); exits 1 when `launch` is more than `--limit`
times the floor (the course's budget, CONTRIBUTING.md: 1.05).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as tmp

from course_utils.processes import free_port, launch, loopback_interface


def _job() -> None:
    """The job both launchers run, once the process group is set up."""
    tensor = torch.ones(4)
    dist.all_reduce(tensor)
    dist.barrier()
    dist.destroy_process_group()


def course_worker() -> None:
    """A rank under `launch`: torchrun's environment tells it who it is."""
    dist.init_process_group("gloo")
    _job()


def bare_worker(index: int, port: int, world_size: int) -> None:
    """A rank under `start_processes`: its index and the rendezvous come as arguments."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=index, world_size=world_size)
    _job()


def time_course(world_size: int) -> float:
    """Seconds for one `launch` of the job."""
    start = time.perf_counter()
    launch(course_worker, world_size, timeout=60)
    return time.perf_counter() - start


def time_bare(world_size: int) -> float:
    """Seconds for one bare fork launch of the job (a free port chosen first, as launch does)."""
    start = time.perf_counter()
    port = free_port()
    tmp.start_processes(bare_worker, args=(port, world_size), nprocs=world_size, start_method="fork")
    return time.perf_counter() - start


def measure(repeat: int, world_size: int = 2) -> tuple[float, float]:
    """Median seconds of `launch` and of the bare fork launch, `repeat` each, alternating."""
    interface = loopback_interface()
    if interface and "GLOO_SOCKET_IFNAME" not in os.environ:
        os.environ["GLOO_SOCKET_IFNAME"] = interface  # both on loopback, as launch does
    course, bare = [], []
    time_course(world_size), time_bare(world_size)  # warm-up: imports, first fork
    for _ in range(repeat):
        course.append(time_course(world_size))
        bare.append(time_bare(world_size))
    return statistics.median(course), statistics.median(bare)


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and say whether `launch` is within `--limit` of the floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="launches of each kind (default 7)")
    parser.add_argument(
        "--limit", type=float, default=1.05, help="allowed ratio launch / floor (default 1.05)"
    )
    parser.add_argument("--json", action="store_true", help="print the medians as one JSON object instead")
    options = parser.parse_args(argv)
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    course, bare = measure(options.repeat)
    ratio = course / bare
    if options.json:
        print(json.dumps({"launch_s": course, "floor_s": bare}))
    else:
        print(f"launch (course_utils):           {course * 1e3:7.1f} ms (median of {options.repeat})")
        print(f"start_processes(fork) (the floor): {bare * 1e3:7.1f} ms (median of {options.repeat})")
        verdict = "within" if ratio <= options.limit else "OVER"
        print(f"ratio {ratio:.2f}x: {verdict} the budget of {options.limit:g}x")
    return 0 if ratio <= options.limit else 1


if __name__ == "__main__":
    sys.exit(main())
