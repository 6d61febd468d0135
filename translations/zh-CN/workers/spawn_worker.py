"""给 `torch.multiprocessing.spawn`（mp.spawn）用的工作进程，它必须放在一个可导入的 .py 文件里。

`mp.spawn(run, args=(world_size, port, out_dir), nprocs=world_size)` 启动 `nprocs` 个全新的
解释器，在每个里面调用 `run(i, world_size, port, out_dir)`：进程序号 `i` 排在最前面，然后才是
`args`。没有谁替你设置 RANK 或 MASTER_PORT，所以工作进程要自己把 rendezvous 地址、自己的 rank
和 world size 传给 `init_process_group`。

`fails_in_one` 展示 mp.spawn 怎样报告错误：一个进程抛出异常，其他进程还在工作；mp.spawn 停掉
它们，并抛出 ProcessRaisedException，其中带有失败进程的序号和子进程的 traceback。

在终端里（在 `notebooks/` 目录下）运行：`python workers/spawn_worker.py`。rank 0 只在 127.0.0.1 上
托管 rendezvous store；一个进程的对端始终不来时，它在 COURSE_GROUP_TIMEOUT_S 秒（默认 120）之后用一行话
放弃：这两件事都由 course_utils.worker_env 完成。
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from course_utils.worker_env import joining


def run(index: int, world_size: int, port: int, out_dir: str) -> None:
    """一个进程：以 rank `index` 加入进程组，做 all-reduce，把它看到的内容写进一个文件。"""
    with joining(index, world_size, "127.0.0.1", port) as timeout:  # rank 0 在 127.0.0.1 上托管 store
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=index, world_size=world_size, timeout=timeout
        )
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    seen = {
        "index": index,
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "rank_in_env": os.environ.get("RANK"),
        "sum_of_rank_plus_1": total.item(),
    }
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{index}.json"), "w") as file:
        json.dump(seen, file)


def fails_in_one(index: int, failing: int) -> None:
    """进程 `failing` 立刻抛出 ValueError；其他每个进程都工作（休眠）一分钟。"""
    if index == failing:
        raise ValueError(f"bad batch in process {index}")
    time.sleep(60)  # 代表一个还在训练的进程；另一个进程失败时，mp.spawn 会停掉它


if __name__ == "__main__":
    with socket.socket() as sock:  # 一个空闲端口，由操作系统选定
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(run, args=(2, free, folder), nprocs=2)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name)) as file:
                sys.stdout.write(file.read() + "\n")
