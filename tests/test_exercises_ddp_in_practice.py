"""The checks of notebook 08's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import contextlib
import math
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_answers import AlwaysEqual

from course_utils.exercises.ddp_in_practice import (
    check_accumulation_step,
    check_effective_batch,
    check_scaled_lr,
)


def test_effective_batch_right():
    result = check_effective_batch(3 * 8 * 16 * 4)
    assert result.ok and str(result).startswith("Correct: ")
    assert check_effective_batch(np.int64(1536)).ok and check_effective_batch(torch.tensor(1536)).ok


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "whole number"),
        (..., "whole number"),
        ("1536", "without quotes"),
        (True, "whole number"),
        (1536.0, "not a float"),
        (1536.7, "not a float"),
        (AlwaysEqual(), "whole number"),
        (np.array([1536, 1536]), "whole number"),
        (torch.tensor(1536, device="meta"), "whole number"),
        (3 * 8 * 16, "also accumulates"),
        (8 * 16 * 4, "one machine's share"),
        (64, "what one GPU sees"),
        (16, "what one GPU sees"),
        (1000, "multiply what one GPU sees"),
    ],
)
def test_effective_batch_wrong(answer, hint):
    result = check_effective_batch(answer)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: ")


def test_scaled_lr_right():
    assert (
        check_scaled_lr(0.6).ok
        and check_scaled_lr(np.float32(0.6)).ok
        and check_scaled_lr(torch.tensor(0.6)).ok
    )
    assert check_scaled_lr(0.1 * 1536 / 256).ok


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write the learning rate"),
        (..., "write the learning rate"),
        ("0.6", "give a number"),
        (AlwaysEqual(), "give a number"),
        (np.array([0.6, 0.6]), "give a number"),
        (torch.tensor(0.6, device="meta"), "give a number"),
        (0.1, "reference's learning rate"),
        (0.1 * math.sqrt(6), "square-root scaling"),
        (0.1 / 6, "not a smaller one"),
        (0.5, "divide the effective batch"),
    ],
)
def test_scaled_lr_wrong(answer, hint):
    result = check_scaled_lr(answer)
    assert not result.ok and hint in str(result)


def accumulates_with_no_sync(ddp, micro_batches):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        if i < k - 1:
            with ddp.no_sync():
                (F.mse_loss(ddp(x), y) / k).backward()
        else:
            (F.mse_loss(ddp(x), y) / k).backward()


def accumulates_syncing_every_time(ddp, micro_batches):
    for x, y in micro_batches:
        (F.mse_loss(ddp(x), y) / len(micro_batches)).backward()


def forgets_to_divide(ddp, micro_batches):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        if i < k - 1:
            with ddp.no_sync():
                F.mse_loss(ddp(x), y).backward()
        else:
            F.mse_loss(ddp(x), y).backward()


def never_syncs(ddp, micro_batches):
    with ddp.no_sync():
        for x, y in micro_batches:
            (F.mse_loss(ddp(x), y) / len(micro_batches)).backward()


def steps_the_weights(ddp, micro_batches):
    accumulates_with_no_sync(ddp, micro_batches)
    for p in ddp.parameters():
        p.data -= 0.1 * p.grad


def raises(ddp, micro_batches):
    raise KeyError("x")


def divides_by_four(ddp, micro_batches):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        context = ddp.no_sync() if i < k - 1 else contextlib.nullcontext()
        with context:
            (F.mse_loss(ddp(x), y) / 4).backward()  # the count of the lesson's example, written in


def accumulates_one_loss(ddp, micro_batches):
    """One backward over the mean of the micro-batch losses: right gradients, one all-reduce, and
    every micro-batch's activations in memory until that backward."""
    losses = [F.mse_loss(ddp(x), y) for x, y in micro_batches]
    torch.stack(losses).mean().backward()


def accumulates_with_exit_stack(ddp, micro_batches):
    *first, last = micro_batches
    with ddp.no_sync():
        for x, y in first:
            F.mse_loss(ddp(x), y).div(len(micro_batches)).backward()
    x, y = last
    F.mse_loss(ddp(x), y).div(len(micro_batches)).backward()


def joins_the_micro_batches(ddp, micro_batches):
    """One forward and backward on the micro-batches joined: right gradients, one all-reduce."""
    x = torch.cat([x for x, _ in micro_batches])
    y = torch.cat([y for _, y in micro_batches])
    F.mse_loss(ddp(x), y).backward()


def replaces_the_weight(ddp, micro_batches):
    ddp.module.weight = torch.nn.Parameter(torch.zeros(1, 3))
    accumulates_with_no_sync(ddp, micro_batches)


def exits(ddp, micro_batches):
    sys.exit(0)


def ends_its_process(ddp, micro_batches):
    os._exit(3)


def ends_its_rank(ddp, micro_batches):
    ddp.train()  # a use of ddp: the trial with probes passes, the rank runs it
    os._exit(3)


@pytest.mark.parametrize("right", [accumulates_with_no_sync, accumulates_with_exit_stack])
def test_accumulation_right(right):
    result = check_accumulation_step(right)
    assert result.ok and str(result).startswith("Correct: "), str(result)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "pass the function itself"),
        (..., "pass the function itself"),
        (3, "not a int"),
        (accumulates_syncing_every_time, "all-reduced 4 times"),
        (forgets_to_divide, "4 times too large"),
        (never_syncs, "ranks hold different gradients"),
        (steps_the_weights, "do not call the optimizer"),
        (raises, "on rank 0 your function raised KeyError: 'x'"),
        (divides_by_four, "with 3 micro-batches the gradients differ"),
        (replaces_the_weight, "replaced the model's parameters"),
        (joins_the_micro_batches, "1 forward pass(es) for 4 micro-batches, the largest on"),
        (accumulates_one_loss, "in the order F F F F B B B B"),
        (exits, "called sys.exit(0)"),
        (ends_its_process, "ended the process it ran in without returning"),
        (ends_its_rank, "exited with code 3"),
    ],
)
def test_accumulation_wrong(answer, hint):
    result = check_accumulation_step(answer)
    assert not result.ok and hint in str(result), str(result)


def test_feedback_in_chinese(monkeypatch):
    """A Chinese notebook (COURSE_LANGUAGE=zh-CN) gets the hints and verdicts in Chinese, values filled in."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    wrong = str(check_effective_batch(3 * 8 * 16))
    assert wrong == "未通过：你数了每个 GPU，但优化器每更新一步之前，还要累积好几个微批量。", wrong
    right = str(check_scaled_lr(0.6))
    assert right.startswith("正确：批量是参照方案的 6 倍，学习率也一样"), right
    assert str(check_scaled_lr("0.6")) == "未通过：请给出一个数，而不是 str。"
    too_large = str(check_accumulation_step(forgets_to_divide))
    assert too_large.startswith("未通过：有 4 个微批量时，梯度大了 4 倍"), too_large
