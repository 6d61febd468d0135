"""A DDP training script that survives a crash: a snapshot after every epoch, resumed on restart.

From a terminal (in `notebooks/`):

    torchrun --nproc-per-node=2 --max-restarts=1 workers/resume_training.py --out run --cpu
    torchrun --nproc-per-node=2 --max-restarts=1 workers/resume_training.py --out run --cpu --crash-in-epoch 2
    torchrun --nproc-per-node=gpu --max-restarts=1 workers/resume_training.py --out run

Without `--cpu`, where CUDA is there, process LOCAL_RANK drives GPU LOCAL_RANK with nccl
(`set_device`, `device_ids=[local_rank]`); with more processes per machine than GPUs it stops
with an error that says so. It needs only the variables torchrun sets (MASTER_ADDR, MASTER_PORT,
RANK, LOCAL_RANK, WORLD_SIZE): under `mp.spawn` or a cluster launcher that sets them, rank 0
hosts the rendezvous store, on MASTER_ADDR, which torchrun hosts itself. Without them, with one out
of range or with a count below 1 it says so in one line, and a rank waits for the others at most
COURSE_GROUP_TIMEOUT_S seconds (120 by default): course_utils.worker_env holds those checks.

At the start, every rank looks for `--out/snapshot.pt`; if it is there, the rank loads it (onto
its own device, `map_location`) and goes on from the epoch after the one saved. After every
epoch rank 0 saves a new snapshot (model, optimizer, next epoch, sampler state) and all ranks
wait for it at a barrier. `--crash-in-epoch E` makes rank 1 raise in the middle of epoch E, once:
only in the first attempt (TORCHELASTIC_RESTART_COUNT=0, and SLURM_RESTART_COUNT=0 or unset).
With `--max-restarts=1` torchrun then stops the other rank, starts both again, and they resume
from the last snapshot; a SLURM job requeued with `scontrol requeue` resumes the same way.
Rank 0 saves the final weights to `--out/final.pt`; every rank prints one JSON line.
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


def check_enough_gpus(local_rank: int, gpu_count: int) -> None:
    """Raise RuntimeError, saying what to run instead, when GPU `local_rank` does not exist.

    Process LOCAL_RANK drives GPU LOCAL_RANK, so a machine needs a GPU for every process on it;
    without this check the process dies with CUDA's "invalid device ordinal".
    """
    if local_rank >= gpu_count:
        raise RuntimeError(
            f"this is the process with LOCAL_RANK={local_rank}, but this machine shows only {gpu_count} "
            f"GPU(s) (torch.cuda.device_count()), so GPU {local_rank} does not exist: start at most "
            f"{gpu_count} process(es) per machine (--nproc-per-node={gpu_count} or =gpu), or pass --cpu "
            "to train on the CPU with gloo."
        )


def train(out: str, epochs: int, crash_in_epoch: int | None = None, cpu: bool = True) -> dict:
    """Train with DDP from the last snapshot in `out` (or from scratch) up to `epochs`; report.

    It reads MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK and WORLD_SIZE from the environment, so
    it runs under torchrun, the course launcher, `mp.spawn` or a cluster launcher alike.
    """
    check_torchrun_env()  # without a launcher: one line that says how to start this script
    local_rank, rank = int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"])
    # 0, then 1 after a restart by torchrun or a requeue by SLURM (workers/slurm_*.sbatch)
    restarts = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")
    attempt = sum(int(os.environ.get(name, "0")) for name in restarts)
    # torchrun (and the course launcher) host the rendezvous store and say so; under mp.spawn or a
    # cluster launcher nobody does, and joining() has rank 0 host it, on MASTER_ADDR. Every rank connects.
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), timeout=timeout)
        # torchrun's static rendezvous (--master-addr/--master-port) keeps one store for all attempts: a
        # prefix per attempt keeps a restarted rank from reading an address a failed attempt left there.
        group = {
            "store": dist.PrefixStore(f"attempt{attempt}", store),
            "rank": rank,
            "world_size": int(os.environ["WORLD_SIZE"]),
            "timeout": timeout,
        }
        if torch.cuda.is_available() and not cpu:
            check_enough_gpus(local_rank, torch.cuda.device_count())  # one GPU per process, or a clear error
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)  # this process's GPU: nccl and .cuda() use it from now on
            dist.init_process_group("nccl", device_id=device, **group)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", **group)

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
    return {
        "rank": rank,
        "attempt": attempt,
        "resumed_at_epoch": start,
        "epochs_run": epochs - start,
    }


@record  # torchrun's report then shows this rank's traceback as the root cause
def main() -> None:
    """Parse the command line, train, print one JSON line per rank."""
    parser = argparse.ArgumentParser(description="DDP training that resumes from its snapshot.")
    parser.add_argument("--out", required=True, help="folder for snapshot.pt and final.pt")
    parser.add_argument("--epochs", type=at_least(1), default=4)
    parser.add_argument("--crash-in-epoch", type=at_least(0), help="rank 1 raises once, in this epoch")
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    args = parser.parse_args()
    report = train(args.out, args.epochs, args.crash_in_epoch, cpu=args.cpu)
    sys.stdout.write(json.dumps(report) + "\n")  # one write: two ranks' lines never mix


if __name__ == "__main__":
    main()
