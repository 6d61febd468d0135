"""Solutions to the exercises of notebook 12. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/12_memory_and_speed.py`: every check says "Correct".
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

# 1. Autocast and checkpointing keep fewer or smaller activations; ZeRO shards the optimizer
#    state; the compression hook only shrinks what travels, not what stays in memory.
shrinks = {
    "autocast bf16": {"activations"},
    "activation checkpointing": {"activations"},
    "ZeroRedundancyOptimizer": {"optimizer state"},
    "fp16_compress_hook": set(),
}
print(check_memory_lines(shrinks))


# 2. One checkpoint per block: only each block's input is kept, the rest is recomputed in backward.
def checkpointed_forward(blocks: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


print(check_checkpointed_forward(checkpointed_forward))


# 3. The forward and the loss under autocast, the backward outside it; the scaler scales the loss,
#    steps the optimizer unless the gradients overflowed, and adapts its scale.
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
