"""One DDP rank that times its own training steps: the worker of notebook 09, section 4.

Start it with the course launcher from a notebook, `launch(ddp_throughput_worker, 2, args=(...))`,
which gives every process torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT).
It lives in a file, not in the notebook, because where CUDA has started the launcher must spawn
fresh interpreters, and those import the worker by module and name (notebook 07).

How it measures, and why:
- every rank runs the same number of steps (a rank that stopped early would leave the others
  waiting in the gradient all-reduce), so the loop has a fixed length: no autorange;
- the first `warmup` steps run but are not timed (allocations, lazy initialisation, DDP's
  rebuilding of its gradient buckets after the first step);
- `dist.barrier()` before the timed steps, so that all ranks start together;
- on a GPU, `torch.cuda.synchronize()` before each clock reading: the time of the work, not of
  its launch;
- each rank returns its per-step times; the notebook turns them into medians and throughput.
Called without the launcher's variables, or with one out of range, it says so in one line; a rank
waits for the others at most COURSE_GROUP_TIMEOUT_S seconds (120 by default): course_utils.worker_env.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import torch

# DDP's constructor imports torch._dynamo, which takes about a second. Imported here, in the
# notebook's kernel, every worker that the launcher forks inherits it instead of paying again.
import torch._dynamo
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.throughput import make_mlp
from course_utils.worker_env import check_torchrun_env, joining


def ddp_throughput_worker(
    global_batch: int,
    steps: int,
    warmup: int,
    widths: Sequence[int] = (256, 256, 256, 10),
    threads: int = 1,
    device_type: str = "cpu",
    seed: int = 0,
) -> dict[str, Any]:
    """Train `warmup + steps` SGD steps on this rank's share of each global batch; time the last `steps`.

    Every rank builds the same model and the same global batches from `seed` and trains on its
    `1 / world_size` share of each batch (what DistributedSampler would give it), so any number of
    processes does the same work and, as DDP averages the gradients, reaches the same weights.
    `"cpu"`: gloo with `threads` torch threads per process; `"cuda"`: nccl on GPU LOCAL_RANK.
    """
    for name, value, least in (
        ("global_batch", global_batch, 1),
        ("steps", steps, 1),
        ("warmup", warmup, 0),
        ("threads", threads, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, not {value!r}")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f'device_type must be "cpu" (gloo) or "cuda" (nccl), not {device_type!r}')
    check_torchrun_env(launch="launch(ddp_throughput_worker, 2, args=(64, 10, 2))")  # or one clear line
    local_rank = int(os.environ["LOCAL_RANK"])
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        if device_type == "cuda":
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", device_id=device, timeout=timeout)
        else:
            device = torch.device("cpu")
            torch.set_num_threads(threads)
            dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        if global_batch % world:
            raise ValueError(f"global_batch={global_batch} does not split evenly over {world} processes")
        return _train_and_time(global_batch, steps, warmup, widths, seed, device, rank, world)
    finally:
        dist.destroy_process_group()  # after _train_and_time returned: DDP is released first


def _train_and_time(
    global_batch: int,
    steps: int,
    warmup: int,
    widths: Sequence[int],
    seed: int,
    device: torch.device,
    rank: int,
    world: int,
) -> dict[str, Any]:
    """The training and timing loop (a function of its own, so that DDP is gone before the group)."""
    torch.manual_seed(seed)
    model = make_mlp(widths).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(seed + 1)
    batches = []
    for _ in range(warmup + steps):  # the same global batches on every rank; this rank's share
        x = torch.randn(global_batch, widths[0], generator=generator)
        y = torch.randint(0, widths[-1], (global_batch,), generator=generator)
        batches.append((x.chunk(world)[rank].to(device), y.chunk(world)[rank].to(device)))

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(ddp(x), y).backward()  # DDP all-reduces the gradients in here
        optimizer.step()

    steps_run, samples_timed, step_times = 0, 0, []
    for x, y in batches[:warmup]:  # warm-up: run, not timed
        train_step(x, y)
        steps_run += 1
    sync()
    dist.barrier()  # all ranks start the clock together
    for x, y in batches[warmup:]:
        start = time.perf_counter()
        train_step(x, y)
        sync()  # the step is over when the device has finished it, not when Python has
        step_times.append(time.perf_counter() - start)
        steps_run += 1
        samples_timed += len(x)
    dist.barrier()  # every rank past its last all-reduce before any rank tears down
    return {
        "rank": rank,
        "world_size": world,
        "threads": torch.get_num_threads(),
        "steps_run": steps_run,
        "step_times": step_times,
        "samples_timed": samples_timed,
        "params": sum(p.numel() for p in model.parameters()),
        "weights": {name: p.detach().cpu().clone() for name, p in model.named_parameters()},
    }
