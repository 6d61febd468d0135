"""The checks of notebook 12's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from course_utils.exercises.memory_and_speed import (
    MEMORY_ANSWERS,
    check_amp_step,
    check_checkpointed_forward,
    check_memory_lines,
)

RIGHT = {
    "autocast bf16": {"activations"},
    "activation checkpointing": {"activations"},
    "ZeroRedundancyOptimizer": {"optimizer state"},
    "fp16_compress_hook": set(),
}


@pytest.mark.parametrize(
    "answer",
    [
        RIGHT,
        {k: sorted(v) for k, v in RIGHT.items()},  # lists
        {k: tuple(v) for k, v in RIGHT.items()},
        RIGHT | {"autocast bf16": "activations", "activation checkpointing": "Activations "},  # a bare name
        RIGHT
        | {"fp16_compress_hook": frozenset()}
        | {"ZeroRedundancyOptimizer": ["optimizer state", "optimizer state"]},
    ],
)
def test_memory_lines_right(answer):
    result = check_memory_lines(answer)
    assert result.ok and str(result).startswith("Correct: ")
    assert {k: set(v) for k, v in MEMORY_ANSWERS.items()} == RIGHT


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "give a dict"),
        (..., "give a dict"),
        ({"autocast bf16", "activations"}, "not a set"),
        ({k: ... for k in RIGHT}, "replace the `...`"),
        (RIGHT | {"autocast bf16": {"activations", "parameters"}}, "what does the optimizer update"),
        (RIGHT | {"autocast bf16": {"activations", "gradients"}}, "what does the optimizer update"),
        (RIGHT | {"ZeroRedundancyOptimizer": {"optimizer state", "gradients"}}, "shards one thing;"),
        (RIGHT | {"fp16_compress_hook": {"gradients"}}, "what stays in memory"),
        (RIGHT | {"activation checkpointing": set()}, "what the forward keeps"),
        (RIGHT | {"fp16_compress_hook": None}, "replace the `...`"),
        (RIGHT | {"fp16_compress_hook": {"bytes"}}, "is not a line"),
        (RIGHT | {"fp16_compress_hook": np.array([])}, "not a ndarray"),
        (RIGHT | {"fp16_compress_hook": torch.empty(0, device="meta")}, "not a Tensor"),
        (RIGHT | {"fp16_compress_hook": {1}}, "line names (strings)"),
        ({k: v for k, v in RIGHT.items() if k != "fp16_compress_hook"}, "no entry for 'fp16_compress_hook'"),
    ],
)
def test_memory_lines_wrong(answer, hint):
    result = check_memory_lines(answer)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: ")


def checkpoints_each_block(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def checkpoints_with_a_comprehension(blocks, x):  # another right way
    functions = [lambda t, b=b: checkpoint(b, t, use_reentrant=False) for b in blocks]
    for f in functions:
        x = f(x)
    return x


def plain(blocks, x):  # right output and gradients, nothing checkpointed
    for block in blocks:
        x = block(x)
    return x


def reentrant(blocks, x):  # the input needs no gradient: the parameters get none
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=True)
    return x


def only_the_first(blocks, x):
    x = checkpoint(blocks[0], x, use_reentrant=False)
    for block in blocks[1:]:
        x = block(x)
    return x


def under_no_grad(blocks, x):  # the right numbers, no graph
    with torch.no_grad():
        return plain(blocks, x)


def skips_a_block(blocks, x):
    for block in blocks[:-1]:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def checkpoints_all_as_one(blocks, x):  # every block runs again, but only x is kept
    return checkpoint(lambda t: plain(blocks, t), x, use_reentrant=False)


def makes_x_require_grad(blocks, x):  # reentrant made to work by changing the caller's tensor
    x.requires_grad_()
    return reentrant(blocks, x)


def detaches_between_blocks(blocks, x):  # the earlier blocks get no gradient
    for block in blocks:
        x = checkpoint(block, x.detach(), use_reentrant=False)
    return x


def calls_exit(blocks, x):
    sys.exit(0)


def forgets_to_return(blocks, x):  # written, but the output is dropped
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)


@pytest.mark.parametrize("forward", [checkpoints_each_block, checkpoints_with_a_comprehension])
def test_checkpointed_forward_right(forward):
    result = check_checkpointed_forward(forward)
    assert result.ok, str(result)


@pytest.mark.parametrize(
    ("forward", "hint"),
    [
        (None, "pass the function itself"),
        (..., "pass the function itself"),
        (
            checkpoints_each_block(torch.nn.ModuleList(), torch.zeros(1)),
            "pass the function itself, not a Tensor",
        ),
        (plain, "nothing was checkpointed"),
        (reentrant, "use_reentrant=False"),
        (only_the_first, "1 of the 3 blocks"),
        (under_no_grad, "no gradient"),
        (skips_a_block, "differs from running the blocks"),
        (lambda blocks, x: None, "is not answered yet"),
        (forgets_to_return, "returned None"),
        (lambda blocks, x: plain(blocks, x).detach().numpy(), "returned a ndarray"),
        (lambda blocks, x: torch.empty(16, 8, device="meta"), "meta device"),
        (lambda blocks, x: x[:, :2], "shape"),
        (lambda blocks, x: 1 / 0, "ZeroDivisionError"),
        (calls_exit, "sys.exit()"),
        (checkpoints_all_as_one, "checkpointed together"),
        (makes_x_require_grad, "made the caller's x require a gradient"),
        (detaches_between_blocks, "2 of the 3 blocks got no gradient while the later ones did"),
    ],
)
def test_checkpointed_forward_wrong(forward, hint):
    result = check_checkpointed_forward(forward)
    assert not result.ok and hint in str(result), str(result)


def amp_step(ddp, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def amp_step_unscaling_first(ddp, optimizer, scaler, x, y):  # right too: unscale_ before step is allowed
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        out = ddp(x)
    loss = F.mse_loss(out.float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()


def steps_the_optimizer_itself(ddp, optimizer, scaler, x, y):  # fine on a normal batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    optimizer.step()
    scaler.update()


def forgets_update(ddp, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)


def in_float32(ddp, optimizer, scaler, x, y):
    optimizer.zero_grad()
    scaler.scale(F.mse_loss(ddp(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()


def steps_with_scaled_gradients(ddp, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    optimizer.step()
    scaler.update()


def never_zeroes(ddp, optimizer, scaler, x, y):  # right on the first two batches; the inf stays after a skip
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def backward_inside_autocast(ddp, optimizer, scaler, x, y):  # the same numbers; autocast's docs advise not
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        scaler.scale(F.mse_loss(ddp(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()


def under_no_sync(ddp, optimizer, scaler, x, y):  # unscaled right, but never all-reduced
    optimizer.zero_grad()
    with ddp.no_sync():
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.mse_loss(ddp(x), y)
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def only_prints(ddp, optimizer, scaler, x, y):  # written, but nothing done with the arguments
    print("a step")


def rank_exits(ddp, optimizer, scaler, x, y):
    ddp(x)  # uses its arguments, then leaves
    sys.exit(0)


@pytest.mark.parametrize("step", [amp_step, amp_step_unscaling_first])
def test_amp_step_right(step):
    result = check_amp_step(step)
    assert result.ok, str(result)


@pytest.mark.parametrize(
    ("step", "hint"),
    [
        (None, "pass the function itself"),
        (np.zeros(2), "not a ndarray"),
        (lambda ddp, optimizer, scaler, x, y: None, "is not answered yet"),
        (only_prints, "does not use its arguments"),
        (lambda ddp, optimizer, scaler, x, y: sys.exit(1), "sys.exit()"),
        (rank_exits, "sys.exit()"),
        (steps_the_optimizer_itself, "inf or nan"),
        (forgets_update, "update()"),
        (in_float32, "float32"),
        (steps_with_scaled_gradients, "No inf checks were recorded prior to update."),
        (never_zeroes, "Zero the gradients"),
        (backward_inside_autocast, "the backward ran inside the autocast block"),
        (under_no_sync, "DDP all-reduced nothing on a normal batch"),
    ],
)
def test_amp_step_wrong(step, hint):
    result = check_amp_step(step)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: "), str(result)


def test_a_chinese_notebook_gets_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    wrong = check_memory_lines(RIGHT | {"fp16_compress_hook": {"gradients"}})
    assert str(wrong).startswith("未通过：'fp16_compress_hook' 这一项：")
    assert "留在内存里的是什么" in wrong.message
    assert "{'gradients'}。" in check_memory_lines({k: ... for k in RIGHT}).message, "a literal {} stays"
    assert str(check_memory_lines(RIGHT)).startswith("正确：autocast 和激活检查点缩小激活值")
    assert "什么都没有做检查点" in str(check_checkpointed_forward(plain))
    right = check_checkpointed_forward(checkpoints_each_block)
    assert str(right).startswith("正确：3 个块在反向时都重新运行了一次前向"), str(right)
    idle = check_amp_step(only_prints)
    assert str(idle).startswith("未通过：函数还没有用到它的参数")
    untouched = check_amp_step(lambda ddp, optimizer, scaler, x, y: None)
    assert str(untouched).startswith("未通过：`amp_step(ddp, optimizer, scaler, x, y)` 还没有作答")
    exits = check_amp_step(rank_exits)  # the ranks word their errors in the notebook's language too
    assert str(exits).startswith("未通过：") and "调用了 sys.exit" in exits.message, str(exits)
