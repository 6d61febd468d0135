"""一个给自己的训练步计时的 DDP rank：笔记本 09 第 4 节的工作进程。

在笔记本中用课程启动器启动它：`launch(ddp_throughput_worker, 2, args=(...))`。启动器给每个进程
设好 torchrun 的那些变量（RANK、LOCAL_RANK、WORLD_SIZE、MASTER_ADDR/PORT）。它放在文件里，而不在
笔记本里，因为在已经启动了 CUDA 的地方，启动器必须用 spawn 启动全新的解释器，而它们按模块名和
函数名导入工作进程（笔记本 07）。

它怎样测量，以及为什么：
- 每个 rank 运行同样多的训练步（提前停下的 rank 会让其他 rank 在梯度的 all-reduce 里一直等着），
  所以循环的长度是固定的：不用 autorange；
- 前 `warmup` 步运行，但不计时（内存分配、延迟初始化、DDP 在第一步之后重建它的梯度 bucket）；
- 计时的训练步之前调用 `dist.barrier()`，让所有 rank 同时开始；
- 在 GPU 上，每次读时钟之前调用 `torch.cuda.synchronize()`：测的是工作本身的时间，而不是启动它
  的时间；
- 每个 rank 返回自己每一步的时间；由笔记本把它们换算成中位数和吞吐量。
调用时缺少启动器的变量，或者某个变量超出范围，它用一行话说明这一点；一个 rank 最多等其他 rank
COURSE_GROUP_TIMEOUT_S 秒（默认 120）：course_utils.worker_env。
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import torch

# DDP 的构造函数会导入 torch._dynamo，大约要一秒。在这里、在笔记本的内核中导入一次，启动器
# fork 出的每个工作进程都直接继承它，不必各自再付出这个代价。
import torch._dynamo
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.throughput import make_mlp
from course_utils.worker_env import check_torchrun_env, joining


def ddp_throughput_worker(
    global_batch: int,
    steps: int,
    warmup: int,
    widths: Sequence[int] = (256, 256, 256, 10),
    threads: int = 1,
    device_type: str = "cpu",
    seed: int = 0,
) -> dict[str, Any]:
    """在每个全局批量中本 rank 的那一份上训练 `warmup + steps` 步 SGD；给最后 `steps` 步计时。

    每个 rank 都用 `seed` 构建同样的模型和同样的全局批量，并在每个批量中属于自己的
    `1 / world_size` 那一份上训练（也就是 DistributedSampler 会分给它的那一份）。所以不管有多少个
    进程，做的工作都一样；而且由于 DDP 对梯度求平均，最后得到的权重也一样。`"cpu"`：gloo，每个进程
    用 `threads` 个 torch 线程；`"cuda"`：nccl，在 GPU LOCAL_RANK 上。
    """
    for name, value, least in (
        ("global_batch", global_batch, 1),
        ("steps", steps, 1),
        ("warmup", warmup, 0),
        ("threads", threads, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, not {value!r}")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f'device_type must be "cpu" (gloo) or "cuda" (nccl), not {device_type!r}')
    check_torchrun_env(launch="launch(ddp_throughput_worker, 2, args=(64, 10, 2))")  # 否则明确的一行话
    local_rank = int(os.environ["LOCAL_RANK"])
    with joining() as timeout:  # 一个 rank 始终不来：`timeout` 之后报错，而不是卡住
        if device_type == "cuda":
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", device_id=device, timeout=timeout)
        else:
            device = torch.device("cpu")
            torch.set_num_threads(threads)
            dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        if global_batch % world:
            raise ValueError(f"global_batch={global_batch} does not split evenly over {world} processes")
        return _train_and_time(global_batch, steps, warmup, widths, seed, device, rank, world)
    finally:
        dist.destroy_process_group()  # 在 _train_and_time 返回之后：DDP 已经先释放了


def _train_and_time(
    global_batch: int,
    steps: int,
    warmup: int,
    widths: Sequence[int],
    seed: int,
    device: torch.device,
    rank: int,
    world: int,
) -> dict[str, Any]:
    """训练与计时的循环（单独写成一个函数，这样 DDP 会先于进程组被释放）。"""
    torch.manual_seed(seed)
    model = make_mlp(widths).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(seed + 1)
    batches = []
    for _ in range(warmup + steps):  # 每个 rank 上的全局批量都相同；取本 rank 的那一份
        x = torch.randn(global_batch, widths[0], generator=generator)
        y = torch.randint(0, widths[-1], (global_batch,), generator=generator)
        batches.append((x.chunk(world)[rank].to(device), y.chunk(world)[rank].to(device)))

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(ddp(x), y).backward()  # DDP 在这里面对梯度做 all-reduce
        optimizer.step()

    steps_run, samples_timed, step_times = 0, 0, []
    for x, y in batches[:warmup]:  # 预热：运行，但不计时
        train_step(x, y)
        steps_run += 1
    sync()
    dist.barrier()  # 所有 rank 同时开始计时
    for x, y in batches[warmup:]:
        start = time.perf_counter()
        train_step(x, y)
        sync()  # 设备完成这一步时，这一步才算结束，而不是 Python 执行完时
        step_times.append(time.perf_counter() - start)
        steps_run += 1
        samples_timed += len(x)
    dist.barrier()  # 每个 rank 都过了最后一次 all-reduce，然后才有 rank 开始销毁进程组
    return {
        "rank": rank,
        "world_size": world,
        "threads": torch.get_num_threads(),
        "steps_run": steps_run,
        "step_times": step_times,
        "samples_timed": samples_timed,
        "params": sum(p.numel() for p in model.parameters()),
        "weights": {name: p.detach().cpu().clone() for name, p in model.named_parameters()},
    }
