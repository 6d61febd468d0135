"""The self-checks of notebook 05 accept right answers and reject wrong ones without giving them away."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual
from torch import nn

from course_utils.exercises import CheckResult
from course_utils.exercises.data_parallel import check_batch_dim, check_idle_batches, check_replica_sizes
from course_utils.parallel import replica_sizes, simulated_data_parallel

IDLE = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 21, 25, 26, 27, 28}


def not_yet(result: CheckResult) -> str:
    assert isinstance(result, CheckResult)
    assert not result and str(result).startswith("Not yet: ")
    return str(result)


@pytest.mark.parametrize(("batch", "devices"), [(10, 4), (6, 4), (30, 8), (10, 8), (7, 1)])
def test_replica_sizes_accepts_the_rule(batch, devices):
    result = check_replica_sizes(replica_sizes(batch, devices), batch, devices)
    assert result and str(result).startswith("Correct: ")
    assert check_replica_sizes(tuple(replica_sizes(batch, devices)), batch, devices)
    assert check_replica_sizes(np.array(replica_sizes(batch, devices)), batch, devices)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write your prediction"),
        ("3,3,3,1", "list of ints"),
        ([3, 3, 3, True], "list of ints"),
        ([3.0, 3.0, 3.0, 1.0], "list of ints"),
        ([3.2, 3.9, 3.5, 1.1], "list of ints"),  # right only after truncation
        ([AlwaysEqual()] * 4, "list of ints"),
        (AlwaysEqual(), "list of ints"),
        (np.array([[3, 3, 3, 1]]), "list of ints"),
        (torch.ones(4, device="meta"), "list of ints"),
        ([3, 3, 3], "add up to the batch of 10"),
        ([5, 5, 0, 0], "never gets an empty piece"),
        ([2, 2, 2, 2, 2], "at most 4 replicas"),
        ([4, 4, 2], "wrong number of replicas"),
        ([3, 3, 2, 2], "does not spread the remainder"),
    ],
)
def test_replica_sizes_rejects_with_a_hint_not_the_answer(answer, hint):
    message = not_yet(check_replica_sizes(answer, 10, 4))
    assert hint in message
    assert "[3, 3, 3, 1]" not in message


def test_idle_batches_accepts_the_rule():
    assert check_idle_batches(IDLE)
    assert check_idle_batches(sorted(IDLE))
    assert check_idle_batches(np.array(sorted(IDLE)))
    assert check_idle_batches({np.int64(n) for n in IDLE})


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write the batch sizes"),
        ("1234567", "set of ints"),
        ({1.0, 2.0}, "whole numbers only"),
        ([[1], [2]], "whole numbers only"),  # unhashable
        ([AlwaysEqual()], "whole numbers only"),
        ({str(n) for n in IDLE}, "whole numbers only"),
        ({n + 0.5 for n in IDLE}, "whole numbers only"),  # right only after truncation
        (np.array([[1, 2]]), "whole numbers only"),
        (torch.ones(2, device="meta"), "whole numbers only"),
        ({0, 1}, "remove [0]"),
        (set(range(1, 8)), "you missed 15"),
        (IDLE | {16}, "1 of your batch sizes keep all 8 GPUs busy"),
    ],
)
def test_idle_batches_rejects_with_counts_only(answer, hint):
    message = not_yet(check_idle_batches(answer))
    assert hint in message
    assert "25" not in message


def test_batch_dim_accepts_dim_1_and_minus_2():
    gru = nn.GRU(4, 3)
    for dim in (1, -2):
        result = check_batch_dim(simulated_data_parallel(gru, 3, dim=dim))
        assert result, str(result)


# Making the nn.DataParallel below warns "There is an imbalance between your GPUs" (torch's
# `_check_balance`) on a machine whose GPUs differ by more than 25% in memory or cores: a fact
# about the machine, which pytest's filterwarnings=error would otherwise turn into a failure.
@pytest.mark.filterwarnings(r"ignore:\s*There is an imbalance between your GPUs:UserWarning")
@pytest.mark.parametrize(
    ("make", "hint"),
    [
        (lambda: None, "wrap the GRU"),
        (lambda: nn.GRU(4, 3), "pass the wrapped module"),
        (lambda: nn.DataParallel(nn.GRU(4, 3)), "uses the simulation"),
        (lambda: simulated_data_parallel(nn.Linear(4, 3), 3, dim=1), "sequence-first GRU"),
        (lambda: simulated_data_parallel(nn.GRU(4, 3, batch_first=True), 3, dim=0), "sequence-first GRU"),
        (lambda: simulated_data_parallel(nn.GRU(4, 3), 3, dim=0), "not its batch"),
        (lambda: simulated_data_parallel(nn.GRU(4, 3), 3, dim=2), "raised RuntimeError"),
        (lambda: simulated_data_parallel(nn.GRU(6, 3), 3, dim=2), "raised RuntimeError"),
        (lambda: simulated_data_parallel(nn.GRU(4, 3), 1, dim=0), "not its batch"),
    ],
)
def test_batch_dim_rejects_with_a_hint(make, hint):
    message = not_yet(check_batch_dim(make()))
    assert hint in message
    assert "dim=1" not in message


def test_checks_do_not_touch_global_grad_mode():
    check_batch_dim(simulated_data_parallel(nn.GRU(4, 3), 3, dim=1))
    assert torch.is_grad_enabled()


def test_feedback_in_chinese(monkeypatch):
    """Where a notebook asks for Chinese, hints and verdicts come back in Chinese."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert str(check_replica_sizes([3, 3, 2, 2], 10, 4)) == (
        "未通过：副本个数对了，大小不对：torch.chunk 不会把余数一行一行地分摊出去；"
        "除了最后一片可能更小以外，每片大小都相同"
    )
    assert str(check_replica_sizes([3, 3, 3, 1], 10, 4)) == (
        "正确：[3, 3, 3, 1]：在 4 个 GPU 上，批量 10 经 torch.chunk 切分后得到 4 个副本"
    )
    assert str(check_idle_batches({1, 8})) == (
        "未通过：你的批量大小中有 1 个能让全部 8 个 GPU 都有活干；"
        "你漏掉了 21 个会让 GPU 闲着的批量大小（也看看大于 8 的）。挑几个试试 replica_sizes(batch, 8)。"
    )
    assert str(check_idle_batches(IDLE)).startswith("正确：32 个批量大小中有 22 个会让 GPU 闲着")
    assert str(check_batch_dim(simulated_data_parallel(nn.GRU(4, 3), 3, dim=0))) == (
        "未通过：对于形状为 (time=7, batch=6, features) 的输入，各副本沿 dim=0 拿到了 [3, 3, 1]："
        "这不是它的批量维度"
    )
    assert str(check_batch_dim(simulated_data_parallel(nn.GRU(4, 3), 3, dim=1))).startswith(
        "正确：dim=1 切分的是批量（6 行切成 [2, 2, 2]）"
    )
