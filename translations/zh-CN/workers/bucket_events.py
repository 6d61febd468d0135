"""gloo 上的一个 DDP rank，记录反向传播何时到达每一层，以及 DDP 何时发出一个 bucket。

笔记本 09 第 5 节的工作进程：用 `launch(bucket_events_worker, 2)` 启动，它表明 DDP 在反向传播
还在进行时就开始对梯度做 all-reduce（从第二步开始，即 DDP 按梯度就绪的顺序重建了 bucket 之后）。
调用时缺少启动器的变量，它用一行话说明这一点；一个 rank 最多等另一个 rank COURSE_GROUP_TIMEOUT_S 秒
（默认 120）：course_utils.worker_env。
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.throughput import make_mlp
from course_utils.worker_env import check_torchrun_env, joining

# 日志里记的东西，由笔记本用文字说出来：
# ("backward", layer) 表示反向传播到达第 layer 个 Linear 层，
# ("bucket", index, layers) 表示 DDP 把第 index 个 bucket
# （装着这些层的梯度）交给 all-reduce。
Event = tuple[str, int] | tuple[str, int, tuple[int, ...]]


def bucket_events_worker(steps: int = 2, bucket_cap_mb: float = 0.01) -> list[list[Event]]:
    """用很小的 bucket 把一个 3 层 MLP 训练 `steps` 步；返回每一步的事件日志。"""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, not {steps!r}")
    if not isinstance(bucket_cap_mb, int | float) or not 0 < bucket_cap_mb < math.inf:
        raise ValueError(f"bucket_cap_mb must be a positive number of MiB, not {bucket_cap_mb!r}")
    check_torchrun_env(launch="launch(bucket_events_worker, 2)")  # 否则明确的一行话
    with joining() as timeout:  # 一个 rank 始终不来：`timeout` 之后报错，而不是卡住
        dist.init_process_group("gloo", timeout=timeout)
    try:
        return _record(steps, bucket_cap_mb)
    finally:
        dist.destroy_process_group()  # 在 _record 返回之后：DDP 已经先释放了


def _record(steps: int, bucket_cap_mb: float) -> list[list[Event]]:
    """记录日志的那次运行（单独写成一个函数，这样 DDP 会先于进程组被释放）。"""
    torch.manual_seed(0)
    model = make_mlp((64, 64, 64, 4))  # Linear 层 0、2 和 4，中间是 ReLU
    names = {p: name for name, p in model.named_parameters()}
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    events: list[Event] = []

    # 一个通信 hook：每个梯度 bucket 准备好做 all-reduce 时，DDP 就用这个 bucket 调用它。
    # 不写类型注解：DDP 会检查注解，而本模块延迟求值的（字符串）注解通不过这项检查。
    def logging_allreduce(state, bucket):  # noqa: ANN001, ANN202
        layers = {int(names[p].split(".")[0]) for p in bucket.parameters()}
        last_first = tuple(sorted(layers, reverse=True))
        events.append(("bucket", bucket.index(), last_first))
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(dist.group.WORLD, logging_allreduce)

    def log_backward(index: int) -> Callable[[nn.Module, Any, torch.Tensor], None]:
        def forward_hook(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
            # 在反向传播中运行：对这一层输出的梯度已知时
            event = ("backward", index)
            output.register_hook(lambda grad: events.append(event))

        return forward_hook

    for index, layer in enumerate(model):
        if isinstance(layer, nn.Linear):
            layer.register_forward_hook(log_backward(index))
    x, y = torch.randn(8, 64), torch.randint(0, 4, (8,))
    log = []
    for _ in range(steps):
        events.clear()
        F.cross_entropy(ddp(x), y).backward()
        log.append(list(events))
    dist.barrier()  # 每个 rank 都过了最后一次 all-reduce，然后才有 rank 开始销毁进程组
    return log
