# 译自 notebooks/solutions/14_pipeline_context_and_expert_parallel.py，sha256 前 12 位：5db365b009e0
"""笔记本 14 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/14_pipeline_context_and_expert_parallel.py` 运行它：
每个检查都会说“正确”。
"""

import torch

from course_utils.exercises.pipeline_context_and_expert_parallel import (
    check_bubble,
    check_online_softmax,
    check_split_sizes,
)


# 1. 一个调度共有 stages + micro_batches - 1 个时隙，每个阶段空闲其中的 stages - 1 个。
def bubble(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)


print(check_bubble(bubble))


# 2. 出现新的最大值时，已累加的部分要乘以 exp(旧最大值 - 新最大值) 重新缩放；新块的权重按新的
#    最大值计算，所以任何指数都不会溢出。
def update(running_max, running_sum, out, scores, values):
    new_max = torch.maximum(running_max, scores.amax(dim=-1))
    correction = torch.exp(running_max - new_max)
    weights = torch.exp(scores - new_max.unsqueeze(-1))
    return (
        new_max,
        running_sum * correction + weights.sum(dim=-1),
        out * correction.unsqueeze(-1) + weights @ values,
    )


print(check_online_softmax(update))


# 3. 专家 e 在 e // experts_per_rank 号 rank 上；按 rank 统计词元（token）数，没有词元的 rank 记 0。
def split_sizes(expert, experts_per_rank, world):
    return torch.bincount(expert // experts_per_rank, minlength=world).tolist()


print(check_split_sizes(split_sizes))
