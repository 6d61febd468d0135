"""A worker for `torch.multiprocessing.spawn` (mp.spawn), which must live in an importable .py file.

`mp.spawn(run, args=(world_size, port, out_dir), nprocs=world_size)` starts `nprocs` fresh
interpreters and calls `run(i, world_size, port, out_dir)` in each: the process index `i`
comes first, then `args`. Nothing sets RANK or MASTER_PORT for you, so the worker passes the
rendezvous address, its rank and the world size to `init_process_group` itself.

`fails_in_one` shows how mp.spawn reports an error: one process raises, the others are still at
work; mp.spawn stops them and raises ProcessRaisedException with the failing index and the
child's traceback.

From a terminal (in `notebooks/`): `python workers/spawn_worker.py`. Rank 0 hosts the rendezvous
store on 127.0.0.1 alone, and a process whose peer never comes gives up after
COURSE_GROUP_TIMEOUT_S seconds (120 by default) with one line: course_utils.worker_env does both.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from course_utils.worker_env import joining


def run(index: int, world_size: int, port: int, out_dir: str) -> None:
    """One process: join the group as rank `index`, all-reduce, write what it saw to a file."""
    with joining(index, world_size, "127.0.0.1", port) as timeout:  # rank 0 hosts the store on 127.0.0.1
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=index, world_size=world_size, timeout=timeout
        )
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    seen = {
        "index": index,
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "rank_in_env": os.environ.get("RANK"),
        "sum_of_rank_plus_1": total.item(),
    }
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{index}.json"), "w") as file:
        json.dump(seen, file)


def fails_in_one(index: int, failing: int) -> None:
    """Process `failing` raises ValueError at once; every other process works (sleeps) for a minute."""
    if index == failing:
        raise ValueError(f"bad batch in process {index}")
    time.sleep(60)  # stands in for a process still training; mp.spawn stops it when another fails


if __name__ == "__main__":
    with socket.socket() as sock:  # a free port, chosen by the OS
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(run, args=(2, free, folder), nprocs=2)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name)) as file:
                sys.stdout.write(file.read() + "\n")
