# 译自 notebooks/solutions/08_ddp_in_practice.py，sha256 前 12 位：4cf4162ce25e
"""笔记本 08 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/08_ddp_in_practice.py` 运行它：每个检查都会说“正确”。
"""

import torch
import torch.nn.functional as F

from course_utils.exercises.ddp_in_practice import (
    check_accumulation_step,
    check_effective_batch,
    check_resume,
    check_scaled_lr,
)

# 1. 每台机器的每块 GPU，每个累积步里的每个微批次，都算在内。
machines, gpus_per_machine, per_gpu_batch, micro_batches = 3, 8, 16, 4
my_effective_batch = machines * gpus_per_machine * per_gpu_batch * micro_batches
print(check_effective_batch(my_effective_batch))

# 2. 线性缩放规则：学习率随批量等比增大。
my_lr = 0.1 * my_effective_batch / 256
print(check_scaled_lr(my_lr))


# 3. 除最后一个微批次外都在 no_sync() 里：DDP 只在最后一次反向传播时做一次 all-reduce。
#    每个损失都除以微批次数，这样梯度之和就是它们的平均值。
def accumulation_step(ddp, micro_batches):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        if i < k - 1:
            with ddp.no_sync():
                (F.mse_loss(ddp(x), y) / k).backward()
        else:
            (F.mse_loss(ddp(x), y) / k).backward()


print(check_accumulation_step(accumulation_step))


# 4. map_location 把 0 号 GPU 上的存储搬到本 rank 的设备上；模型恢复到 ddp.module 里
#    （快照的键没有 `module.` 前缀），优化器和采样器也一并恢复。
def resume(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    ddp.module.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    sampler.seed = snapshot["sampler"]["seed"]
    sampler.set_epoch(snapshot["sampler"]["epoch"])
    return snapshot["epoch"]


print(check_resume(resume))
