"""A small CNN trained with DDP on synthetic images: notebook 08's run from end to end.

From a terminal (in `notebooks/`), the same effective batch of 32 on 1 and on 2 ranks:

    torchrun --nproc-per-node=1 workers/cnn_training.py --effective-batch 32 --epochs 3
    torchrun --nproc-per-node=2 workers/cnn_training.py --effective-batch 32 --epochs 3

The images (16x16, four classes: horizontal stripes, vertical stripes, a square, a cross, plus
noise) are made here, the same in every rank, no download. Each rank takes effective_batch /
WORLD_SIZE of them per step from `DistributedSampler`; DDP averages the ranks' gradients into the
gradient of the whole effective batch. Where CUDA shows a GPU for every process of this machine,
each process selects GPU LOCAL_RANK (`torch.cuda.set_device`), joins with nccl and wraps the model
with `device_ids=[local_rank]`, as notebook 07's `train_ddp.py` does; with fewer GPUs than
processes it stops with an error that says so; without CUDA, or with `--cpu`, it trains on the CPU
with gloo. Rank 0 prints one JSON line: the loss of every step (the mean over the ranks), the last
epoch's accuracy and the device of rank 0. Started without torchrun, with a variable out of range or
with a count below 1, it says so in one line; a rank waits for the others at most
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
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from course_utils.worker_env import at_least, check_torchrun_env, joining


def make_images(n: int = 512) -> TensorDataset:
    """`n` noisy 16x16 images of four patterns, and their labels: the same in every rank and run."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (n,), generator=generator)
    grid = torch.arange(16)
    patterns = torch.zeros(4, 16, 16)
    patterns[0, grid % 4 < 2, :] = 1.0  # horizontal stripes
    patterns[1, :, grid % 4 < 2] = 1.0  # vertical stripes
    patterns[2, 4:12, 4:12] = 1.0  # a square
    patterns[3, 7:9, :], patterns[3, :, 7:9] = 1.0, 1.0  # a cross
    images = patterns[labels] + 0.8 * torch.randn(n, 16, 16, generator=generator)
    return TensorDataset(images.unsqueeze(1), labels)


class SmallCNN(nn.Module):
    """Two convolutions, pooled to 16 features, and a linear classifier: no BatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.classify = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores (logits) for a batch of images of shape (N, 1, 16, 16)."""
        return self.classify(self.features(x))


def pick_device(local_rank: int, cpu: bool = False) -> torch.device:
    """GPU `local_rank` where CUDA is there and `cpu` is false, else the CPU; too few GPUs is an error.

    Process LOCAL_RANK drives GPU LOCAL_RANK, so a machine needs a GPU for every process on it:
    with fewer the error says what to run instead of CUDA's "invalid device ordinal".
    """
    if cpu or not torch.cuda.is_available():
        return torch.device("cpu")
    gpus = torch.cuda.device_count()
    if local_rank >= gpus:
        raise RuntimeError(
            f"this is the process with LOCAL_RANK={local_rank}, but this machine shows only {gpus} "
            f"GPU(s) (torch.cuda.device_count()), so GPU {local_rank} does not exist: start at most "
            f"{gpus} process(es) per machine (--nproc-per-node={gpus} or =gpu), or pass --cpu to train "
            "on the CPU with gloo."
        )
    return torch.device("cuda", local_rank)


def train(effective_batch: int, epochs: int, cpu: bool = False) -> dict:
    """Train for `epochs` with `effective_batch` images per step over all ranks; report the curve."""
    check_torchrun_env()  # without a launcher: one line that says how to start this script
    local_rank = int(os.environ["LOCAL_RANK"])  # set by torchrun (and the course launcher)
    device = pick_device(local_rank, cpu)
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        if device.type == "cuda":
            torch.cuda.set_device(device)  # this process's GPU: nccl and .cuda() use it from now on
            dist.init_process_group("nccl", device_id=device, timeout=timeout)
        else:
            dist.init_process_group("gloo", timeout=timeout)
    world = dist.get_world_size()
    if effective_batch % world:
        raise ValueError(f"--effective-batch {effective_batch} does not split into {world} equal parts")
    dataset = make_images()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=effective_batch // world, sampler=sampler)
    torch.manual_seed(0)
    model = SmallCNN().to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses, correct = [], torch.zeros(2, device=device)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            logits = ddp(images)
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            optimizer.step()
            step_loss = loss.detach().clone()
            dist.all_reduce(step_loss)  # the mean over ranks: the loss of the effective batch
            losses.append(step_loss.item() / world)
            if epoch == epochs - 1:
                correct += torch.tensor(
                    [(logits.argmax(1) == labels).sum().item(), len(labels)], device=device
                )
    dist.all_reduce(correct)
    dist.barrier()  # every rank is done with the group before any rank tears it down
    del ddp  # DDP goes before its process group
    rank = dist.get_rank()
    dist.destroy_process_group()
    accuracy = (correct[0] / correct[1]).item()
    report = {"rank": rank, "world size": world, "losses": losses, "last-epoch accuracy": accuracy}
    return {**report, "device": str(device)}


@record  # torchrun's report then shows a failing rank's traceback
def main() -> None:
    """Parse the command line, train, and have rank 0 print the report as one JSON line."""
    parser = argparse.ArgumentParser(description="A small CNN trained with DDP on synthetic images.")
    parser.add_argument("--effective-batch", type=at_least(1), default=32, help="images per step, all ranks")
    parser.add_argument("--epochs", type=at_least(1), default=3)
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    args = parser.parse_args()
    report = train(args.effective_batch, args.epochs, cpu=args.cpu)
    if report["rank"] == 0:
        sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
