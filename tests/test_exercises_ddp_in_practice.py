"""The checks of notebook 08's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import math

import pytest
import torch.nn.functional as F

from course_utils.exercises.ddp_in_practice import (
    check_accumulation_step,
    check_effective_batch,
    check_scaled_lr,
)


def test_effective_batch_right():
    result = check_effective_batch(3 * 8 * 16 * 4)
    assert result.ok and str(result).startswith("Correct: ")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "whole number"),
        (..., "whole number"),
        ("1536", "give a number"),
        (True, "give a number"),
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
    assert check_scaled_lr(0.6).ok
    assert check_scaled_lr(0.1 * 1536 / 256).ok


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write the learning rate"),
        (..., "write the learning rate"),
        ("0.6", "give a number"),
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


def test_accumulation_right():
    result = check_accumulation_step(accumulates_with_no_sync)
    assert result.ok and str(result).startswith("Correct: ")


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
        (raises, "KeyError"),
    ],
)
def test_accumulation_wrong(answer, hint):
    result = check_accumulation_step(answer)
    assert not result.ok and hint in str(result), str(result)
