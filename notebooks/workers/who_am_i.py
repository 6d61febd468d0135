"""Print, as one JSON line, who this process is: the variables torchrun sets for each worker.

Run it with torchrun from a terminal (in `notebooks/`):

    torchrun --nproc-per-node=2 workers/who_am_i.py
    torchrun --nproc-per-node=2 workers/who_am_i.py --all-reduce   # also join the process group

With `--all-reduce` every worker joins the process group (gloo, on the CPU) and adds up the ranks
of all workers with `all_reduce`: the same sum on every worker proves that they form one job.
Started without torchrun, or with a variable out of range, it says so in one line (the checks,
and the bounded wait for the other workers, are in course_utils.worker_env).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from course_utils.worker_env import check_torchrun_env, joining

NAMES = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE")


def main() -> None:
    """Read torchrun's variables, optionally check the process group, print one JSON line."""
    parser = argparse.ArgumentParser(description="Print, as one JSON line, the variables torchrun set.")
    parser.add_argument("--all-reduce", action="store_true", help="join the process group and sum the ranks")
    args = parser.parse_args()

    check_torchrun_env(*NAMES)  # without torchrun: one line that says how to start this script
    seen: dict[str, object] = {name: int(os.environ[name]) for name in NAMES}
    seen["MASTER_ADDR"] = os.environ["MASTER_ADDR"]
    if args.all_reduce:
        import torch
        import torch.distributed as dist

        with joining() as timeout:  # a worker that never comes: an error after `timeout`, not a hang
            dist.init_process_group("gloo", timeout=timeout)  # reads MASTER_ADDR/PORT, RANK, WORLD_SIZE
        total = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(total)
        seen["sum of all ranks"] = int(total.item())
        dist.destroy_process_group()
    sys.stdout.write(json.dumps(seen) + "\n")  # one write: the lines of two workers never mix


if __name__ == "__main__":
    main()
