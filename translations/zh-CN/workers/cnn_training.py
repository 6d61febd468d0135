"""一个在合成图像上用 DDP 训练的小 CNN：笔记本 08 中的那次训练，从头到尾。

在终端里（在 `notebooks/` 目录下），用 1 个和 2 个 rank 跑同样的有效批量 32：

    torchrun --nproc-per-node=1 workers/cnn_training.py --effective-batch 32 --epochs 3
    torchrun --nproc-per-node=2 workers/cnn_training.py --effective-batch 32 --epochs 3

图像（16x16，四个类别：横条纹、竖条纹、方块、十字，外加噪声）在这里生成，每个 rank 上都一样，不用
下载。每一步，每个 rank 从 `DistributedSampler` 取其中的 effective_batch / WORLD_SIZE 张；DDP 把
各 rank 的梯度平均成整个有效批量的梯度。如果 CUDA 为这台机器上的每个进程都显示了一个 GPU，每个进程
就选定 GPU LOCAL_RANK（`torch.cuda.set_device`），用 nccl 加入进程组，并用 `device_ids=[local_rank]`
包装模型，和笔记本 07 的 `train_ddp.py` 一样；GPU 比进程少时，它报错停下，报错会说明这一点；没有
CUDA 或者带 `--cpu` 时，它在 CPU 上用 gloo 训练。rank 0 打印一行 JSON：每一步的损失（各 rank 的
平均值）、最后一轮的准确率，以及 rank 0 的设备。不用 torchrun 启动、某个变量超出范围或者某个计数小于
1 时，它用一行话说明这一点；一个 rank 最多等其他 rank COURSE_GROUP_TIMEOUT_S 秒（默认 120）：这些检查
都在 course_utils.worker_env 里。
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
    """`n` 张带噪声的 16x16 图像（四种图案）及其标签：每个 rank、每次运行都相同。"""
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (n,), generator=generator)
    grid = torch.arange(16)
    patterns = torch.zeros(4, 16, 16)
    patterns[0, grid % 4 < 2, :] = 1.0  # 横条纹
    patterns[1, :, grid % 4 < 2] = 1.0  # 竖条纹
    patterns[2, 4:12, 4:12] = 1.0  # 方块
    patterns[3, 7:9, :], patterns[3, :, 7:9] = 1.0, 1.0  # 十字
    images = patterns[labels] + 0.8 * torch.randn(n, 16, 16, generator=generator)
    return TensorDataset(images.unsqueeze(1), labels)


class SmallCNN(nn.Module):
    """两个卷积层，池化成 16 个特征，再接一个线性分类器：没有 BatchNorm。"""

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
        """一批形状为 (N, 1, 16, 16) 的图像的类别分数（logits）。"""
        return self.classify(self.features(x))


def pick_device(local_rank: int, cpu: bool = False) -> torch.device:
    """有 CUDA 且 `cpu` 为假时返回 GPU `local_rank`，否则返回 CPU；GPU 太少时报错。

    进程 LOCAL_RANK 驱动 GPU LOCAL_RANK，所以一台机器上的每个进程都需要一个 GPU。GPU 更少时，
    报错会告诉你应该改为运行什么，而不是 CUDA 的 "invalid device ordinal"。
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
    """训练 `epochs` 轮，每一步所有 rank 合计 `effective_batch` 张图像；报告损失曲线。"""
    check_torchrun_env()  # 没有启动器时：用一行话说明该怎样启动这个脚本
    local_rank = int(os.environ["LOCAL_RANK"])  # 由 torchrun（以及课程启动器）设置
    device = pick_device(local_rank, cpu)
    with joining() as timeout:  # 一个 rank 始终不来：`timeout` 之后报错，而不是卡住
        if device.type == "cuda":
            torch.cuda.set_device(device)  # 本进程的 GPU：从此 nccl 和 .cuda() 都用它
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
            dist.all_reduce(step_loss)  # 各 rank 的平均值：有效批量的损失
            losses.append(step_loss.item() / world)
            if epoch == epochs - 1:
                correct += torch.tensor(
                    [(logits.argmax(1) == labels).sum().item(), len(labels)], device=device
                )
    dist.all_reduce(correct)
    dist.barrier()  # 每个 rank 都用完了进程组，然后才有 rank 销毁它
    del ddp  # 先删 DDP，再销毁它的进程组
    rank = dist.get_rank()
    dist.destroy_process_group()
    accuracy = (correct[0] / correct[1]).item()
    report = {"rank": rank, "world size": world, "losses": losses, "last-epoch accuracy": accuracy}
    return {**report, "device": str(device)}


@record  # 这样 torchrun 的报告会显示失败的 rank 的 traceback
def main() -> None:
    """解析命令行，训练，并让 rank 0 把报告打印成一行 JSON。"""
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
