"""以一行 JSON 打印这个进程是谁：torchrun 为每个工作进程设置的那些变量。

在终端里（在 `notebooks/` 目录下）用 torchrun 运行它：

    torchrun --nproc-per-node=2 workers/who_am_i.py
    torchrun --nproc-per-node=2 workers/who_am_i.py --all-reduce   # 同时加入进程组

带 `--all-reduce` 时，每个工作进程都加入进程组（gloo，在 CPU 上），并用 `all_reduce` 把所有工作进程
的 rank 加起来：每个工作进程上得到同一个和，这就证明它们组成了同一个任务。
不用 torchrun 启动，或者某个变量超出范围时，它用一行话说明这一点（这些检查，以及等待其他工作进程的
有限时长，都在 course_utils.worker_env 里）。
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from course_utils.worker_env import check_torchrun_env, joining

NAMES = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE")


def main() -> None:
    """读取 torchrun 设置的变量，按需检查进程组，打印一行 JSON。"""
    parser = argparse.ArgumentParser(description="Print, as one JSON line, the variables torchrun set.")
    parser.add_argument("--all-reduce", action="store_true", help="join the process group and sum the ranks")
    args = parser.parse_args()

    check_torchrun_env(*NAMES)  # 没有 torchrun 时：用一行话说明该怎样启动这个脚本
    seen: dict[str, object] = {name: int(os.environ[name]) for name in NAMES}
    seen["MASTER_ADDR"] = os.environ["MASTER_ADDR"]
    if args.all_reduce:
        import torch
        import torch.distributed as dist

        with joining() as timeout:  # 一个工作进程始终不来：`timeout` 之后报错，而不是卡住
            dist.init_process_group("gloo", timeout=timeout)  # 读取 MASTER_ADDR/PORT、RANK、WORLD_SIZE
        total = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(total)
        seen["sum of all ranks"] = int(total.item())
        dist.destroy_process_group()
    sys.stdout.write(json.dumps(seen) + "\n")  # 只写一次：两个工作进程的行绝不会混在一起


if __name__ == "__main__":
    main()
