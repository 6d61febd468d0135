"""A tiny DistributedDataParallel training script, launched with torchrun, on CPUs or GPUs.

From a terminal (in `notebooks/`):

    torchrun --nproc-per-node=gpu workers/train_ddp.py --out run      # one process per GPU (nccl)
    torchrun --nproc-per-node=2 workers/train_ddp.py --out run --cpu  # 2 processes on the CPU (gloo)

Each process reads its LOCAL_RANK from the environment (seed 002's `--local_rank` argument is
outdated), drives GPU LOCAL_RANK with `nccl` when there are GPUs, or the CPU with `gloo`
(`--cpu` forces that), trains on its own share of the data through DistributedSampler, and
rank 0 saves the plain model's state_dict. Every rank prints one JSON line about itself.
On a machine with GPUs every process needs a GPU of its own: with more processes per machine
than visible GPUs (`--nproc-per-node=2` on one GPU) the script stops with an error that says
so, instead of CUDA's "invalid device ordinal". Started without torchrun, with a variable out of
range or with a count below 1, it says so in one line; a rank waits for the others at most
COURSE_GROUP_TIMEOUT_S seconds (120 by default): course_utils.worker_env holds those checks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from course_utils.worker_env import at_least, check_torchrun_env, joining


def check_enough_gpus(local_rank: int, gpu_count: int) -> None:
    """Raise RuntimeError, saying what to run instead, when GPU `local_rank` does not exist.

    torchrun starts --nproc-per-node processes on each machine, LOCAL_RANK 0, 1, ...; process
    LOCAL_RANK drives GPU LOCAL_RANK, so there must be at least as many visible GPUs as processes.
    """
    if local_rank >= gpu_count:
        raise RuntimeError(
            f"this is the process with LOCAL_RANK={local_rank}, but this machine shows only {gpu_count} "
            f"GPU(s) (torch.cuda.device_count()), so GPU {local_rank} does not exist: torchrun started "
            "more processes per machine than there are GPUs. Start one process per GPU with "
            "--nproc-per-node=gpu, or pass --cpu to this script to train on the CPU with gloo."
        )


def main() -> None:
    """Train a linear model for a few epochs with DDP; rank 0 saves it to --out/model.pt."""
    parser = argparse.ArgumentParser(description="A tiny DDP training script for torchrun.")
    parser.add_argument("--out", required=True, help="folder for model.pt (rank 0 writes it)")
    parser.add_argument("--epochs", type=at_least(1), default=3)
    parser.add_argument("--batch-size", type=at_least(1), default=8, help="per process")
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    args = parser.parse_args()

    check_torchrun_env("GROUP_RANK")  # without torchrun: one line that says how to start this script
    local_rank = int(os.environ["LOCAL_RANK"])  # set by torchrun: which GPU on this machine
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        if torch.cuda.is_available() and not args.cpu:
            check_enough_gpus(local_rank, torch.cuda.device_count())  # one GPU per process, or a clear error
            torch.cuda.set_device(local_rank)  # any accelerator: torch.accelerator.set_device_index
            device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl", device_id=device, timeout=timeout)  # env:// is the default
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same data on every rank; the sampler splits it
    x = torch.randn(64, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.Linear(4, 1).to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)

    losses = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new order every epoch
        total = torch.zeros(2, device=device)  # sum of losses, number of batches
        for inputs, labels in loader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.mse_loss(ddp(inputs), labels)
            loss.backward()  # DDP averages the gradients over the ranks here
            optimizer.step()
            total += torch.stack([loss.detach(), torch.ones((), device=device)])
        dist.all_reduce(total)  # the mean loss over all ranks' batches
        losses.append(round((total[0] / total[1]).item(), 4))

    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))  # not ddp's: no "module."
    dist.barrier()  # no rank leaves before the checkpoint is written
    line = {
        "rank": rank,
        "local_rank": local_rank,
        "node_rank": int(os.environ["GROUP_RANK"]),  # set by torchrun: which machine
        "world_size": world_size,
        "backend": dist.get_backend(),
        "samples_seen": len(sampler) * args.epochs,
        "mean_loss_per_epoch": losses,
    }
    # One write per line: torchrun runs workers unbuffered, and print() would write the newline
    # separately, so that two ranks' lines could run together.
    sys.stdout.write(json.dumps(line) + "\n")
    del ddp, optimizer  # DDP goes before its process group: the other order can crash or hang gloo's teardown
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
