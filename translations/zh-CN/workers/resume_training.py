"""一个能挺过崩溃的 DDP 训练脚本：每一轮之后保存一个快照，重启时从快照恢复训练。

在终端里（在 `notebooks/` 目录下）：

    torchrun --nproc-per-node=2 --max-restarts=1 workers/resume_training.py --out run --cpu
    torchrun --nproc-per-node=2 --max-restarts=1 workers/resume_training.py --out run --cpu --crash-in-epoch 2
    torchrun --nproc-per-node=gpu --max-restarts=1 workers/resume_training.py --out run

不带 `--cpu` 且有 CUDA 时，进程 LOCAL_RANK 用 nccl 驱动 GPU LOCAL_RANK（`set_device`、
`device_ids=[local_rank]`）；每台机器上的进程比 GPU 多时，它报错停下，报错会说明这一点。它只需要
torchrun 设置的那些变量（MASTER_ADDR、MASTER_PORT、RANK、LOCAL_RANK、WORLD_SIZE）：在 `mp.spawn`
下，或在设置了这些变量的集群启动器下，由 rank 0 在 MASTER_ADDR 上托管 rendezvous store，而在
torchrun 下由 torchrun 自己托管它。缺少这些变量、某个变量超出范围或者某个计数小于 1 时，它用一行话说明
这一点；一个 rank 最多等其他 rank COURSE_GROUP_TIMEOUT_S 秒（默认 120）：这些检查都在
course_utils.worker_env 里。

开始时，每个 rank 查找 `--out/snapshot.pt`；如果找到，就加载它（加载到自己的设备上，
`map_location`），从保存的那一轮的下一轮接着训练。每一轮之后，rank 0 保存一个新快照（模型、优化器、
下一轮的编号、采样器状态），所有 rank 在一个 barrier 处等它写完。`--crash-in-epoch E` 让 rank 1
在第 E 轮中途抛出异常，只抛一次：只在第一次尝试中（TORCHELASTIC_RESTART_COUNT=0，且
SLURM_RESTART_COUNT=0 或未设置）。有 `--max-restarts=1` 时，torchrun 随后停掉另一个 rank，把两个
都重新启动，它们从最后一个快照恢复训练；用 `scontrol requeue` 重新排队的 SLURM 任务也以同样的方式
恢复。rank 0 把最终权重保存到 `--out/final.pt`；每个 rank 打印一行 JSON。
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
    """一个有 8 个输入的光滑函数的 256 个样本：每个 rank、每次运行都相同。"""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=generator)
    y = torch.tanh(x @ torch.randn(8, 1, generator=generator))
    return TensorDataset(x, y)


def save_snapshot(
    path: str, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, seed: int
) -> None:
    """写出重启所需的一切；经由一个临时文件，这样写到一半时崩溃，旧文件仍然完好。"""
    snapshot = {
        "model": model.state_dict(),  # 普通模型的：没有 "module." 前缀
        "optimizer": optimizer.state_dict(),  # SGD 的动量缓冲区也是状态
        "epoch": epoch,  # 要运行的下一轮
        "sampler": {"seed": seed, "epoch": epoch},  # set_epoch(epoch) 会再次给出相同的顺序
    }
    torch.save(snapshot, path + ".tmp")
    os.replace(path + ".tmp", path)


def check_enough_gpus(local_rank: int, gpu_count: int) -> None:
    """GPU `local_rank` 不存在时抛出 RuntimeError，并说明应该改为运行什么。

    进程 LOCAL_RANK 驱动 GPU LOCAL_RANK，所以一台机器上的每个进程都需要一个 GPU；没有这项检查，
    进程会以 CUDA 的 "invalid device ordinal" 死掉。
    """
    if local_rank >= gpu_count:
        raise RuntimeError(
            f"this is the process with LOCAL_RANK={local_rank}, but this machine shows only {gpu_count} "
            f"GPU(s) (torch.cuda.device_count()), so GPU {local_rank} does not exist: start at most "
            f"{gpu_count} process(es) per machine (--nproc-per-node={gpu_count} or =gpu), or pass --cpu "
            "to train on the CPU with gloo."
        )


def train(out: str, epochs: int, crash_in_epoch: int | None = None, cpu: bool = True) -> dict:
    """用 DDP 从 `out` 中的最后一个快照（或者从头）训练到第 `epochs` 轮为止；返回报告。

    它从环境中读取 MASTER_ADDR、MASTER_PORT、RANK、LOCAL_RANK 和 WORLD_SIZE，所以在 torchrun、
    课程启动器、`mp.spawn` 或集群启动器下都能同样运行。
    """
    check_torchrun_env()  # 没有启动器时：用一行话说明该怎样启动这个脚本
    local_rank, rank = int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"])
    # 先是 0；torchrun 重启或 SLURM 重新排队（workers/slurm_*.sbatch）之后是 1
    restarts = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")
    attempt = sum(int(os.environ.get(name, "0")) for name in restarts)
    # torchrun（以及课程启动器）自己托管 rendezvous store，并说明这一点；在 mp.spawn 或集群启动器下
    # 没有谁托管它，就由 joining() 让 rank 0 在 MASTER_ADDR 上托管它。每个 rank 都连接上去。
    with joining() as timeout:  # 一个 rank 始终不来：`timeout` 之后报错，而不是卡住
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), timeout=timeout)
        # torchrun 的静态 rendezvous（--master-addr/--master-port）在所有尝试中共用一个 store：每次尝试
        # 用一个前缀，重启后的 rank 就不会读到失败的那次尝试留在里面的地址。
        group = {
            "store": dist.PrefixStore(f"attempt{attempt}", store),
            "rank": rank,
            "world_size": int(os.environ["WORLD_SIZE"]),
            "timeout": timeout,
        }
        if torch.cuda.is_available() and not cpu:
            check_enough_gpus(local_rank, torch.cuda.device_count())  # 每个进程一个 GPU，否则明确报错
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)  # 本进程的 GPU：从此 nccl 和 .cuda() 都用它
            dist.init_process_group("nccl", device_id=device, **group)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", **group)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    path, start, seed = os.path.join(out, "snapshot.pt"), 0, 0
    if os.path.exists(path):
        snapshot = torch.load(path, map_location=device, weights_only=True)  # 加载到本 rank 的设备上
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
        dist.barrier()  # 快照写到磁盘上之前，谁也不继续（或结束）

    if rank == 0:
        torch.save(model.state_dict(), os.path.join(out, "final.pt"))
    dist.barrier()  # 每个 rank 都用完了进程组，然后才有 rank 销毁它
    del ddp  # 先删 DDP，再销毁它的进程组
    dist.destroy_process_group()
    return {
        "rank": rank,
        "attempt": attempt,
        "resumed_at_epoch": start,
        "epochs_run": epochs - start,
    }


@record  # 这样 torchrun 的报告会把本 rank 的 traceback 显示为根本原因
def main() -> None:
    """解析命令行，训练，每个 rank 打印一行 JSON。"""
    parser = argparse.ArgumentParser(description="DDP training that resumes from its snapshot.")
    parser.add_argument("--out", required=True, help="folder for snapshot.pt and final.pt")
    parser.add_argument("--epochs", type=at_least(1), default=4)
    parser.add_argument("--crash-in-epoch", type=at_least(0), help="rank 1 raises once, in this epoch")
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    args = parser.parse_args()
    report = train(args.out, args.epochs, args.crash_in_epoch, cpu=args.cpu)
    sys.stdout.write(json.dumps(report) + "\n")  # 只写一次：两个 rank 的行绝不会混在一起


if __name__ == "__main__":
    main()
