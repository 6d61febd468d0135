"""A DDP training script that survives a crash: a snapshot after every epoch, resumed on restart.

From a terminal (in `notebooks/`):

    torchrun --nproc-per-node=2 --max-restarts=1 workers/resume_training.py --out run --cpu
    torchrun --nproc-per-node=2 --max-restarts=1 workers/resume_training.py --out run --cpu --crash-in-epoch 2

At the start, every rank looks for `--out/snapshot.pt`; if it is there, the rank loads it (onto
its own device, `map_location`) and goes on from the epoch after the one saved. After every
epoch rank 0 saves a new snapshot (model, optimizer, next epoch, sampler state) and all ranks
wait for it at a barrier. `--crash-in-epoch E` makes rank 1 raise in the middle of epoch E, once:
only in torchrun's first attempt (TORCHELASTIC_RESTART_COUNT=0). With `--max-restarts=1`
torchrun then stops the other rank, starts both again, and they resume from the last snapshot.
Rank 0 saves the final weights to `--out/final.pt`; every rank prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_dataset() -> TensorDataset:
    """256 samples of a smooth function of 8 inputs: the same on every rank and every run."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=generator)
    y = torch.tanh(x @ torch.randn(8, 1, generator=generator))
    return TensorDataset(x, y)


def save_snapshot(
    path: str, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, seed: int
) -> None:
    """Write what a restart needs; through a temporary file, so a crash mid-write leaves the old one."""
    snapshot = {
        "model": model.state_dict(),  # the plain model's: no "module." prefix
        "optimizer": optimizer.state_dict(),  # SGD's momentum buffers are state too
        "epoch": epoch,  # the next epoch to run
        "sampler": {"seed": seed, "epoch": epoch},  # set_epoch(epoch) gives the same order again
    }
    torch.save(snapshot, path + ".tmp")
    os.replace(path + ".tmp", path)


def train(out: str, epochs: int, crash_in_epoch: int | None = None, cpu: bool = True) -> dict:
    """Train with DDP from the last snapshot in `out` (or from scratch) up to `epochs`; report."""
    local_rank = int(os.environ["LOCAL_RANK"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))  # 0, then 1 after a restart
    # torchrun's static rendezvous (--master-addr/--master-port) keeps one store for all attempts: a
    # restarted rank could read the address a rank of the failed attempt left there, and connect to
    # a process that is gone. A prefix per attempt keeps each attempt's keys apart.
    store = dist.PrefixStore(
        f"attempt{attempt}",
        dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timedelta(minutes=5),
        ),
    )
    group = {"store": store, "rank": int(os.environ["RANK"]), "world_size": int(os.environ["WORLD_SIZE"])}
    if torch.cuda.is_available() and not cpu:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, **group)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", **group)
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    path, start, seed = os.path.join(out, "snapshot.pt"), 0, 0
    if os.path.exists(path):
        snapshot = torch.load(path, map_location=device, weights_only=True)  # onto this rank's device
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        start, seed = snapshot["epoch"], snapshot["sampler"]["seed"]
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)

    for epoch in range(start, epochs):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            if epoch == crash_in_epoch and rank == 1 and attempt == 0 and step == 3:
                raise RuntimeError(f"injected failure: rank 1 dies in epoch {epoch}, step {step}")
            optimizer.zero_grad()
            F.mse_loss(ddp(x.to(device)), y.to(device)).backward()
            optimizer.step()
        if rank == 0:
            save_snapshot(path, model, optimizer, epoch + 1, seed)
        dist.barrier()  # nobody goes on (or ends) before the snapshot is on disk

    if rank == 0:
        torch.save(model.state_dict(), os.path.join(out, "final.pt"))
    dist.barrier()  # every rank is done with the group before any rank tears it down
    del ddp  # DDP goes before its process group
    dist.destroy_process_group()
    return {"rank": rank, "attempt": attempt, "resumed at epoch": start, "epochs run": epochs - start}


@record  # torchrun's report then shows this rank's traceback as the root cause
def main() -> None:
    """Parse the command line, train, print one JSON line per rank."""
    parser = argparse.ArgumentParser(description="DDP training that resumes from its snapshot.")
    parser.add_argument("--out", required=True, help="folder for snapshot.pt and final.pt")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--crash-in-epoch", type=int, default=None, help="rank 1 raises once, in this epoch")
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    args = parser.parse_args()
    report = train(args.out, args.epochs, args.crash_in_epoch, cpu=args.cpu)
    sys.stdout.write(json.dumps(report) + "\n")  # one write: two ranks' lines never mix


if __name__ == "__main__":
    main()
