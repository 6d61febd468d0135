"""一个很小的 DistributedDataParallel 训练脚本，用 torchrun 启动，在 CPU 或 GPU 上运行。

在终端里（在 `notebooks/` 目录下）：

    torchrun --nproc-per-node=gpu workers/train_ddp.py --out run      # 每个 GPU 一个进程（nccl）
    torchrun --nproc-per-node=2 workers/train_ddp.py --out run --cpu  # CPU 上 2 个进程（gloo）

每个进程从环境中读取自己的 LOCAL_RANK（原文 002 的 `--local_rank` 参数已经过时）。有 GPU 时，
它用 `nccl` 驱动 GPU LOCAL_RANK；否则用 `gloo` 驱动 CPU（`--cpu` 强制这样做）。它通过
DistributedSampler 在自己那一份数据上训练，最后由 rank 0 保存原始模型的 state_dict。每个 rank
打印一行关于自己的 JSON。在有 GPU 的机器上，每个进程都需要一个自己的 GPU：如果每台机器上的进程比
可见的 GPU 多（在一个 GPU 上用 `--nproc-per-node=2`），脚本会报错停下，报错会说明这一点，而不是
给出 CUDA 的 "invalid device ordinal"。不用 torchrun 启动、某个变量超出范围或者某个计数小于 1 时，
它用一行话说明这一点；一个 rank 最多等其他 rank COURSE_GROUP_TIMEOUT_S 秒（默认 120）：这些检查都在
course_utils.worker_env 里。
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
    """GPU `local_rank` 不存在时抛出 RuntimeError，并说明应该改为运行什么。

    torchrun 在每台机器上启动 --nproc-per-node 个进程，LOCAL_RANK 依次为 0、1……；进程 LOCAL_RANK
    驱动 GPU LOCAL_RANK，所以可见的 GPU 至少要和进程一样多。
    """
    if local_rank >= gpu_count:
        raise RuntimeError(
            f"this is the process with LOCAL_RANK={local_rank}, but this machine shows only {gpu_count} "
            f"GPU(s) (torch.cuda.device_count()), so GPU {local_rank} does not exist: torchrun started "
            "more processes per machine than there are GPUs. Start one process per GPU with "
            "--nproc-per-node=gpu, or pass --cpu to this script to train on the CPU with gloo."
        )


def main() -> None:
    """用 DDP 把一个线性模型训练几轮；rank 0 把它保存到 --out/model.pt。"""
    parser = argparse.ArgumentParser(description="A tiny DDP training script for torchrun.")
    parser.add_argument("--out", required=True, help="folder for model.pt (rank 0 writes it)")
    parser.add_argument("--epochs", type=at_least(1), default=3)
    parser.add_argument("--batch-size", type=at_least(1), default=8, help="per process")
    parser.add_argument("--cpu", action="store_true", help="use gloo on the CPU even with GPUs")
    args = parser.parse_args()

    check_torchrun_env("GROUP_RANK")  # 没有 torchrun 时：用一行话说明该怎样启动这个脚本
    local_rank = int(os.environ["LOCAL_RANK"])  # 由 torchrun 设置：用这台机器上的哪个 GPU
    with joining() as timeout:  # 一个 rank 始终不来：`timeout` 之后报错，而不是卡住
        if torch.cuda.is_available() and not args.cpu:
            check_enough_gpus(local_rank, torch.cuda.device_count())  # 每个进程一个 GPU，否则明确报错
            torch.cuda.set_device(local_rank)  # 任意加速器：torch.accelerator.set_device_index
            device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl", device_id=device, timeout=timeout)  # env:// 是默认的
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # 每个 rank 上的数据都相同；由采样器来切分
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
        sampler.set_epoch(epoch)  # 每一轮一个新的顺序
        total = torch.zeros(2, device=device)  # 损失之和，批量数
        for inputs, labels in loader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.mse_loss(ddp(inputs), labels)
            loss.backward()  # DDP 在这里对各 rank 的梯度求平均
            optimizer.step()
            total += torch.stack([loss.detach(), torch.ones((), device=device)])
        dist.all_reduce(total)  # 所有 rank 的全部批量上的平均损失
        losses.append(round((total[0] / total[1]).item(), 4))

    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))  # 不是 ddp 的：没有 "module."
    dist.barrier()  # 检查点写完之前，没有哪个 rank 离开
    line = {
        "rank": rank,
        "local_rank": local_rank,
        "node_rank": int(os.environ["GROUP_RANK"]),  # 由 torchrun 设置：哪台机器
        "world_size": world_size,
        "backend": dist.get_backend(),
        "samples_seen": len(sampler) * args.epochs,
        "mean_loss_per_epoch": losses,
    }
    # 每行只写一次：torchrun 以无缓冲方式运行工作进程，而 print() 会把换行符单独写出，
    # 这样两个 rank 的行就可能连在一起。
    sys.stdout.write(json.dumps(line) + "\n")
    del ddp, optimizer  # 先删 DDP，再销毁它的进程组：反过来可能让 gloo 的清理过程崩溃或卡住
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
