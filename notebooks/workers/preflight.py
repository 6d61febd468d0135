"""A pre-flight check before a big distributed job: who runs where, do the links work, how fast.

From a terminal (in `notebooks/`), with any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT (torchrun, or `srun` as in workers/slurm_srun.sbatch):

    torchrun --nproc-per-node=2 workers/preflight.py --cpu           # gloo on the CPU
    torchrun --nproc-per-node=gpu workers/preflight.py               # nccl, one rank per GPU

Rank 0 prints, one JSON line each: every rank's host, local rank, device and visible devices;
an all-reduce whose sum is known, a barrier, a point-to-point ring (each rank sends its rank to
the next); then an all-reduce bandwidth sweep (1 KiB to --max-bytes) with algorithm bandwidth
(bytes / time) and bus bandwidth, busbw = algbw x 2(n-1)/n: what each link carries in a ring
all-reduce, comparable with the hardware's link speed whatever the number of ranks.
A check that fails raises, so the job ends non-zero before the big job would have hung. Started
without a launcher, with a variable out of range or with a count too small, it says so in one line;
a rank waits for the others at most COURSE_GROUP_TIMEOUT_S seconds (120 by default):
course_utils.worker_env holds those checks.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

from course_utils.worker_env import at_least, check_torchrun_env, joining


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """busbw = algbw x 2(n-1)/n: the bytes each link carries per second in a ring all-reduce."""
    return algbw * 2 * (world_size - 1) / world_size


def sweep_sizes(min_bytes: int = 1024, max_bytes: int = 64 * 2**20) -> list[int]:
    """Message sizes from `min_bytes` to `max_bytes`, each 4 times the one before."""
    if not 4 <= min_bytes <= max_bytes:
        raise ValueError(f"need 4 <= min_bytes <= max_bytes (float32 elements), got {min_bytes}, {max_bytes}")
    sizes = [min_bytes]
    while sizes[-1] * 4 <= max_bytes:
        sizes.append(sizes[-1] * 4)
    return sizes


def show(line: dict) -> None:
    """Print one JSON line on rank 0, in one write, so that lines never mix."""
    if dist.get_rank() == 0:
        sys.stdout.write(json.dumps(line) + "\n")


def check_links(device: torch.device) -> None:
    """All-reduce, barrier and a point-to-point ring; RuntimeError naming what came back wrong."""
    rank, n = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(total)  # 1 + 2 + ... + n
    if total.item() != n * (n + 1) / 2:
        raise RuntimeError(f"all_reduce gave {total.item()} on rank {rank}, expected {n * (n + 1) / 2}")
    show({"check": "all_reduce", "ok": True, "sum": total.item()})
    dist.barrier()
    show({"check": "barrier", "ok": True})
    if n > 1:
        sent, got = torch.tensor([float(rank)], device=device), torch.zeros(1, device=device)
        ops = [dist.P2POp(dist.isend, sent, (rank + 1) % n), dist.P2POp(dist.irecv, got, (rank - 1) % n)]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        if got.item() != (rank - 1) % n:
            raise RuntimeError(f"ring: rank {rank} received {got.item()} from rank {(rank - 1) % n}")
        show({"check": "ring", "ok": True, "hops": n})


def sweep(device: torch.device, sizes: list[int], iterations: int) -> None:
    """Time all_reduce at each size (the slowest rank's mean); print algbw and busbw in GB/s."""
    n = dist.get_world_size()
    for size in sizes:
        data = torch.ones(size // 4, device=device)
        dist.all_reduce(data)  # warm-up: the first call sets up buffers and connections
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(data)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # nccl returns before the GPU is done
        seconds = (time.perf_counter() - start) / iterations
        elapsed = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the collective is as fast as its slowest rank
        algbw = size / elapsed.item() / 1e9
        show(
            {
                "bytes": size,
                "time_us": round(elapsed.item() * 1e6, 1),
                "algbw_GBps": float(f"{algbw:.4g}"),
                "busbw_GBps": float(f"{bus_bandwidth(algbw, n):.4g}"),
            }
        )  # 4 significant digits


def main() -> None:
    """Join the group, report every rank, check the links, sweep the bandwidth."""
    parser = argparse.ArgumentParser(description="Pre-flight check of a distributed job.")
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    parser.add_argument(
        "--max-bytes", type=at_least(1024), default=64 * 2**20, help="largest all-reduce (bytes)"
    )
    parser.add_argument("--iterations", type=at_least(1), default=5, help="all-reduces timed per size")
    args = parser.parse_args()
    sizes = sweep_sizes(1024, args.max_bytes)
    check_torchrun_env()  # without a launcher: one line that says how to start this script

    local_rank = int(os.environ["LOCAL_RANK"])
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        if torch.cuda.is_available() and not args.cpu:
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", device_id=device, timeout=timeout)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
    me = {
        "rank": dist.get_rank(),
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "device": str(device) if device.type == "cpu" else f"{device} {torch.cuda.get_device_name(device)}",
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "backend": dist.get_backend(),
    }
    everyone: list[dict | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, me)  # also the first proof that every rank can talk
    for row in everyone:
        show(row)
    check_links(device)
    sweep(device, sizes, args.iterations)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
