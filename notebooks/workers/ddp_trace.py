"""One DDP training step under torch.profiler: when the all-reduces ran, against the computation.

The worker of notebook 12, section 4, on 2 or more GPUs:

    torchrun --nproc-per-node=2 workers/ddp_trace.py --out traces/

Each rank trains a stack of Linear layers with DDP (NCCL), warms up, then profiles one step with
the CPU and CUDA activities. The trace's kernels are what ran on the GPU: NCCL's all-reduce
kernels, on a stream of their own, and the forward and backward's compute kernels. Rank 0 writes
its trace for https://ui.perfetto.dev and prints one JSON line: the intervals of both kinds, in
microseconds from the step's first kernel. With --cpu (gloo, for a machine without GPUs) the
intervals are the operators instead: autograd's backward functions and gloo's all-reduces.
Started without torchrun, with a variable out of range or with a count below 1, it says so in one
line; a rank waits for the others at most COURSE_GROUP_TIMEOUT_S seconds (120 by default):
course_utils.worker_env holds those checks.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile

from course_utils.worker_env import at_least, check_torchrun_env, joining


def intervals(trace: dict, on_gpu: bool) -> dict[str, list[tuple[float, float]]]:
    """The trace's compute and communication intervals (start, end) in us from the first of them."""
    found: dict[str, list[tuple[float, float]]] = {"compute": [], "communication": []}
    for event in trace["traceEvents"]:
        name, start = event.get("name", ""), event.get("ts")
        if event.get("ph") != "X" or start is None:
            continue
        if on_gpu and event.get("cat") == "kernel":
            kind = "communication" if name.lower().startswith("nccl") else "compute"
        elif not on_gpu and name.startswith("autograd::engine::evaluate_function"):
            kind = "compute"
        elif not on_gpu and name == "gloo:all_reduce":
            kind = "communication"
        else:
            continue
        found[kind].append((float(start), float(start) + float(event.get("dur", 0))))
    first = min((s for spans in found.values() for s, _ in spans), default=0.0)
    return {kind: sorted((s - first, e - first) for s, e in spans) for kind, spans in found.items()}


def overlap_us(spans: list[tuple[float, float]], others: list[tuple[float, float]]) -> float:
    """How long, in total, the intervals `spans` ran while at least one of `others` ran."""
    total = 0.0
    for start, end in spans:
        cuts = sorted((max(s, start), min(e, end)) for s, e in others if s < end and e > start)
        covered, reached = 0.0, start
        for s, e in cuts:
            if e > reached:
                covered += e - max(s, reached)
                reached = e
        total += covered
    return total


def main() -> None:
    """Train, warm up and profile one step on every rank; rank 0 writes the trace and prints the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for rank 0's trace")
    parser.add_argument("--cpu", action="store_true", help="gloo on CPUs instead of NCCL on GPUs")
    parser.add_argument("--width", type=at_least(1), default=4096, help="features of each Linear layer")
    parser.add_argument("--layers", type=at_least(1), default=8)
    parser.add_argument("--batch", type=at_least(1), default=8192)
    options = parser.parse_args()
    check_torchrun_env()  # without torchrun: one line that says how to start this script
    on_gpu = not options.cpu
    local_rank = int(os.environ["LOCAL_RANK"])  # set by torchrun: this process's GPU on its machine
    if on_gpu and local_rank >= torch.cuda.device_count():  # one GPU per process, or a clear error
        parser.error(f"GPU {local_rank} (LOCAL_RANK) is not on this machine: one process per GPU, or --cpu")
    device = torch.device("cuda", local_rank) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        dist.init_process_group(
            "nccl" if on_gpu else "gloo", device_id=device if on_gpu else None, timeout=timeout
        )
    rank = dist.get_rank()
    torch.manual_seed(0)
    layers = [nn.Linear(options.width, options.width) for _ in range(options.layers)]
    ddp = DDP(nn.Sequential(*layers).to(device), device_ids=[local_rank] if on_gpu else None)
    x = torch.randn(options.batch, options.width, device=device)
    for _ in range(3):  # warm-up: NCCL's connections, cuBLAS's handles and DDP's buckets come first
        ddp(x).square().mean().backward()
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if on_gpu else [ProfilerActivity.CPU]
    if on_gpu:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        ddp(x).square().mean().backward()
        if on_gpu:
            torch.cuda.synchronize()  # the kernels are asynchronous: wait for them inside the trace
    if rank == 0:
        options.out.mkdir(parents=True, exist_ok=True)
        path = options.out / "rank0_trace.json"
        prof.export_chrome_trace(str(path))
        spans = intervals(json.loads(path.read_text()), on_gpu)
        hidden = overlap_us(spans["communication"], spans["compute"])
        device_name = torch.cuda.get_device_name(device) if on_gpu else "CPU"
        print(json.dumps({"device": device_name, "trace": str(path), "overlap_us": hidden, **spans}))
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
