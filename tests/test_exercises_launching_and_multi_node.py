"""The checks of notebook 07's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual, assert_not_yet, odd_answers

from course_utils.exercises.launching_and_multi_node import check_node1_command, check_rank_and_world_size

GOOD = "--nnodes=2 --node-rank=1 --nproc-per-node=4 --master-addr=10.0.0.1 --master-port=29500 train.py"
ENDPOINT = "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 --rdzv-endpoint=10.0.0.1:29500 train.py"


def test_rank_and_world_size_right():
    result = check_rank_and_world_size(9, 12)
    assert result.ok and str(result).startswith("Correct: ")
    assert check_rank_and_world_size(np.int64(9), torch.tensor(12)).ok


def test_rank_and_world_size_odd_answers():
    for odd in [*odd_answers(), 9.4, np.float64(9.0)]:
        assert_not_yet(check_rank_and_world_size(odd, 12), "whole numbers")
        assert_not_yet(check_rank_and_world_size(9, odd), "whole numbers")


@pytest.mark.parametrize(
    ("rank", "world_size", "hint"),
    [
        (..., ..., "write the RANK and the WORLD_SIZE"),
        (None, 12, "write the RANK and the WORLD_SIZE"),
        ("9", 12, "whole numbers"),
        (9.0, 12, "whole numbers"),
        (True, 12, "whole numbers"),
        (9, 4, "LOCAL_WORLD_SIZE"),
        (9, 8, "every machine together"),
        (1, 12, "LOCAL_RANK"),
        (2, 12, "GROUP_RANK"),
        (12, 12, "from 0 to WORLD_SIZE - 1"),
        (7, 12, "Count the processes"),
    ],
)
def test_rank_and_world_size_wrong(rank, world_size, hint):
    result = check_rank_and_world_size(rank, world_size)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: ")
    assert "9" not in result.message  # never the answer


@pytest.mark.parametrize(
    "command",
    [
        "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 "
        "--master-addr=10.0.0.1 --master-port=29500 train.py",
        "torchrun --nnodes 2 --node_rank 1 --nproc_per_node 4 "
        "--master_addr 10.0.0.1 --master_port 29500 train.py",
        "python -m torch.distributed.run --nnodes=2 --node-rank=1 --nproc-per-node=gpu "
        "--master-addr=10.0.0.1 --master-port=29500 train.py --epochs 3",
        "torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 "
        "--rdzv-id=job42 train.py",
        # equivalent forms: torchrun's default port is 29500; "2:2" is 2 nodes, no fewer, no more;
        # a static rendezvous given as an endpoint meets there
        "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 --master-addr=10.0.0.1 train.py",
        "torchrun " + GOOD.replace("--nnodes=2", "--nnodes=2:2"),
        ENDPOINT,
    ],
)
def test_node1_command_right(command):
    result = check_node1_command(command)
    assert result.ok, result


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        (..., "write the command as a string"),
        ("  ", "write the command as a string"),
        (["torchrun"], "one string"),
        (AlwaysEqual(), "one string"),
        ("torchrun --help", "print its help"),
        ("torchrun -h " + GOOD, "print its help"),
        (
            "torchrun --nnodes=1:2 --node-rank=1 --nproc-per-node=4 --master-addr=10.0.0.1 train.py",
            "--nnodes",
        ),
        (
            "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 --rdzv-endpoint=10.0.0.1:29400 train.py",
            "host:port",
        ),
        (
            "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 --rdzv-endpoint=127.0.0.1:29500 train.py",
            "itself",
        ),
        ('torchrun "unclosed', "cannot be split"),
        ("python train.py", "start the command with torchrun"),
        ("python -m torch.distributed.launch " + GOOD, "deprecated"),
        ("torchrun --nnodes=2 --bogus train.py", "torchrun would refuse it"),
        ("torchrun --nnodes=2", "torchrun would refuse it"),
        ("torchrun " + GOOD.replace("train.py", "main.py"), "the script to run"),
        ("torchrun " + GOOD.replace("--nnodes=2", "--nnodes=1"), "--nnodes is the number of machines"),
        ("torchrun " + GOOD.replace("--nproc-per-node=4", "--nproc-per-node=8"), "one per GPU"),
        ("torchrun " + GOOD.replace("--node-rank=1", "--node-rank=0"), "--node-rank tells"),
        ("torchrun " + GOOD.replace("--node-rank=1 ", ""), "--node-rank tells"),
        ("torchrun " + GOOD.replace("10.0.0.1", "127.0.0.1"), "each machine itself"),
        ("torchrun " + GOOD.replace("10.0.0.1", "10.0.0.2"), "address of node 0"),
        ("torchrun " + GOOD.replace("29500", "29501"), "port node 0 listens on"),
        (
            "torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1 train.py",
            "--rdzv-endpoint is host:port",
        ),
        (
            "torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
            "--rdzv-endpoint=10.0.0.1:29500 train.py",
            "--rdzv-id",
        ),
        # --standalone replaces the endpoint with localhost:0 and a random id: never right here,
        # however right the rest of the command is.
        (
            "torchrun --standalone --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
            "--rdzv-endpoint=10.0.0.1:29500 --rdzv-id=job42 train.py",
            "--standalone is for one machine alone",
        ),
        ("torchrun --standalone " + GOOD, "--standalone is for one machine alone"),
        ("torchrun " + GOOD.replace("train.py", "--standalone train.py"), "--standalone"),
    ],
)
def test_node1_command_wrong(command, hint):
    result = check_node1_command(command)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: ")


def test_feedback_in_chinese(monkeypatch):
    """Where a notebook asks for Chinese, hints and verdicts come back in Chinese."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert str(check_rank_and_world_size(1, 12)) == (
        "未通过：这是它的 LOCAL_RANK，即它在自己机器上的编号。RANK 在整个任务中是唯一的。"
    )
    assert str(check_rank_and_world_size(9, 12)).startswith("正确：WORLD_SIZE 是 12，这个工作进程是 rank 9：")
    node0 = "torchrun " + GOOD.replace("--node-rank=1", "--node-rank=0")
    assert str(check_node1_command(node0)).startswith("未通过：--node-rank 告诉每台机器它是哪一台")
    assert str(check_node1_command("torchrun --bogus train.py")).startswith("未通过：torchrun 会拒绝它：")
    assert str(check_node1_command("torchrun " + GOOD)).startswith("正确：节点 0 运行同一条命令")
