# 译自 notebooks/solutions/12_memory_and_speed.py，sha256 前 12 位：5a219eed6e4c
"""笔记本 12 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/12_memory_and_speed.py` 运行它：每个检查都会说“正确”。
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.amp import GradScaler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

from course_utils.exercises.memory_and_speed import (
    check_amp_step,
    check_checkpointed_forward,
    check_memory_lines,
)

# 1. autocast 和激活检查点让保存的激活值更少或更小；ZeRO 切分优化器状态；
#    压缩钩子只缩小传输的字节，不缩小留在显存里的东西。
shrinks = {
    "autocast bf16": {"activations"},
    "activation checkpointing": {"activations"},
    "ZeroRedundancyOptimizer": {"optimizer state"},
    "fp16_compress_hook": set(),
}
print(check_memory_lines(shrinks))


# 2. 每个块一个检查点：只保存每个块的输入，其余的在反向传播时重新计算。
def checkpointed_forward(blocks: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


print(check_checkpointed_forward(checkpointed_forward))


# 3. 前向和损失在 autocast 里，反向传播在它外面；scaler 放大损失，梯度没有溢出时才让优化器
#    走一步，并调整自己的缩放系数。
def amp_step(
    ddp: DDP, optimizer: torch.optim.Optimizer, scaler: GradScaler, x: torch.Tensor, y: torch.Tensor
) -> None:
    optimizer.zero_grad()
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


print(check_amp_step(amp_step))
