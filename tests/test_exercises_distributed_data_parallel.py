"""The checks of notebook 06's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
from exercise_answers import AlwaysEqual, assert_refused
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises import ranks
from course_utils.exercises.distributed_data_parallel import (
    check_average_gradients,
    check_sampler_indices,
    check_unprefixed_state_dict,
)
from course_utils.processes import LaunchError, WorkerError


def averages(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def sums(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)


def only_reads_the_gradients(model: nn.Module) -> None:
    [p.grad for p in model.parameters()]


def only_rank0_reduces(model: nn.Module) -> None:
    if dist.get_rank() == 0:
        sums(model)


def raises(model: nn.Module) -> None:
    raise KeyError("grad")


def hard_coded_two(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= 2  # the world size of the lesson's example, written in


def hard_coded_three(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= 3


def one_flat_all_reduce(model: nn.Module) -> None:
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    for g, piece in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
        g.copy_(piece.view_as(g))


def gathers_then_means(model: nn.Module) -> None:
    for p in model.parameters():
        pieces = [torch.empty_like(p.grad) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, p.grad)
        p.grad = torch.stack(pieces).mean(0)


def rank_zeros_gradient(model: nn.Module) -> None:
    for p in model.parameters():
        dist.broadcast(p.grad, src=0)  # all ranks agree, on one rank's gradient


def replaces_the_weight(model: nn.Module) -> None:
    model.weight = nn.Parameter(torch.zeros(2, 3))


def drops_the_gradients(model: nn.Module) -> None:
    model.zero_grad(set_to_none=True)


def exits_quietly(model: nn.Module) -> None:
    sys.exit(0)


def ends_its_process(model: nn.Module) -> None:
    os._exit(3)


def ends_its_rank(model: nn.Module) -> None:
    model.zero_grad()  # a use of the model: the trial with probes passes, the rank runs it
    os._exit(3)


@pytest.mark.parametrize("right", [averages, one_flat_all_reduce, gathers_then_means])
def test_average_gradients_right(right):
    result = check_average_gradients(right)
    assert result.ok and str(result).startswith("Correct: ")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write `average_gradients(model)`"),
        (..., "write `average_gradients(model)`"),
        (42, "pass the function itself"),
        (sums, "the sum"),
        (only_reads_the_gradients, "still disagree"),
        (raises, "on rank 0 your function raised KeyError: 'grad'"),
        (hard_coded_two, "with 3 ranks they agree, but not on the mean"),
        (hard_coded_three, "right with 3 ranks, not with 2"),
        (rank_zeros_gradient, "not on the mean"),
        (replaces_the_weight, "replaced the model's parameters"),
        (drops_the_gradients, "no .grad tensor"),
        (exits_quietly, "called sys.exit(0)"),
        (ends_its_process, "ended the process it ran in without returning"),
        (ends_its_rank, "exited with code 3"),
    ],
)
def test_average_gradients_wrong(answer, hint):
    result = check_average_gradients(answer)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: "), str(result)


def test_average_gradients_hanging_collective(monkeypatch):
    real_launch = ranks.launch
    monkeypatch.setattr(ranks, "launch", lambda *a, **k: real_launch(*a, **{**k, "timeout": 2}))
    result = check_average_gradients(only_rank0_reduces)
    # The others return and leave: rank 0 either sees its peer gone or waits until the timeout.
    assert not result.ok and "Every rank must make the same collective calls" in str(result)


def test_sampler_indices_equivalent_right_answers():
    for right in [[2, 6, 0], (2, 6, 0), np.array([2, 6, 0]), [np.int64(2), torch.tensor(6), 0]]:
        assert check_sampler_indices(right).ok


def test_sampler_indices_refuses_what_only_becomes_right_by_conversion():
    for wrong in [
        [2.9, 6.2, 0.5],
        ["2", "6", "0"],
        [AlwaysEqual()] * 3,
        AlwaysEqual(),
        np.array([[2, 6, 0]]),
        {2: 0},
    ]:
        result = check_sampler_indices(wrong)
        assert not result.ok and "whole numbers" in str(result)


def test_sampler_indices():
    assert check_sampler_indices([2, 6, 0]).ok
    assert check_sampler_indices([2, 6], drop_last=True).ok
    assert "[5, 6]" in str(check_sampler_indices(None)) and "[5, 6]" in str(check_sampler_indices(...))
    assert "the same number" in str(check_sampler_indices([2, 6]))
    assert "wrong order" in str(check_sampler_indices([0, 2, 6]))
    assert "not those indices" in str(check_sampler_indices([2, 3, 4]))
    assert "whole numbers" in str(check_sampler_indices("abc"))


def _wrapped_state() -> tuple[dict, nn.Module]:
    torch.manual_seed(5)
    trained = nn.Linear(3, 2)
    return {f"module.{k}": v for k, v in trained.state_dict().items()}, trained


def test_unprefixed_state_dict_right_answers():
    wrapped, trained = _wrapped_state()
    fixed = dict(wrapped)
    consume_prefix_in_state_dict_if_present(fixed, "module.")
    assert check_unprefixed_state_dict(fixed, nn.Linear(3, 2), wrapped).ok
    by_hand = {k.removeprefix("module."): v.clone() for k, v in wrapped.items()}
    assert check_unprefixed_state_dict(by_hand, nn.Linear(3, 2), wrapped).ok
    assert check_unprefixed_state_dict(by_hand, trained).ok  # compared with the model it came from


@pytest.mark.parametrize(
    ("make", "hint"),
    [
        (lambda wrapped: ..., "build the state_dict"),
        (lambda wrapped: wrapped, "'module.'"),
        (lambda wrapped: {"weight": wrapped["module.weight"]}, "missing bias"),
        (
            lambda wrapped: {"weight": wrapped["module.weight"], "bias": wrapped["module.weight"]},
            "loading fails",
        ),
        (lambda wrapped: nn.Linear(3, 2).state_dict(), "does not hold the saved values"),  # a fresh model's
        (lambda wrapped: {k[7:]: torch.zeros_like(v) for k, v in wrapped.items()}, "does not hold the saved"),
        (
            lambda wrapped: {k[7:]: torch.empty_like(v, device="meta") for k, v in wrapped.items()},
            "loading fails",
        ),
        (lambda wrapped: {k[7:]: v.tolist() for k, v in wrapped.items()}, "loading fails"),
        (lambda wrapped: list(wrapped.items()), "not a list"),
        (lambda wrapped: {1: 2}, "as strings"),
    ],
)
def test_unprefixed_state_dict_wrong_answers(make, hint):
    wrapped, _ = _wrapped_state()
    result = check_unprefixed_state_dict(make(wrapped), nn.Linear(3, 2), wrapped)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: "), str(result)


@pytest.mark.parametrize(
    "gloo_says",
    [
        "[pair.cc:538] Read error [127.0.0.1]:1454: Connection reset by peer",
        "[pair.cc:534] Connection closed by peer [127.0.0.1]:39535",
        "Application timeout caused pair closure: remote worker exited",
    ],
)
def test_a_peer_that_left_the_collective_is_explained(monkeypatch, gloo_says):
    def peer_left(*args, **kwargs):
        raise WorkerError(0, 2, "RuntimeError", gloo_says)

    monkeypatch.setattr(ranks, "launch", peer_left)
    result = check_average_gradients(averages)
    assert not result.ok and "lost its peer inside a collective" in str(result)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (WorkerError(1, 3, "ValueError", "x"), "the check could not finish on rank 1"),
        (LaunchError("no free port"), "could not be started: no free port"),
        (
            WorkerError(0, 3, "ReaderFailed", "raised KeyError: 'g'", also_failed={}),
            "on rank 0 your function raised",
        ),
    ],
)
def test_launch_failures_are_put_in_words(monkeypatch, error, says):
    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr(ranks, "launch", fails)
    result = check_average_gradients(averages)
    assert not result.ok and says in str(result), str(result)


def test_feedback_in_chinese(monkeypatch):
    """Where a notebook asks for Chinese, hints and verdicts (also those of ranks.py) come back in Chinese."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    wrong, right = check_average_gradients(sums), check_average_gradients(averages)
    assert not wrong.ok
    assert str(wrong) == "未通过：各 rank 的结果一致了，但得到的是梯度之和。DDP 求的是平均：要除一下。"
    assert right.ok and str(right).startswith("正确：无论 3 个 rank 还是 2 个"), str(right)
    short = check_sampler_indices([2, 6])
    assert str(short) == (
        "未通过：rank 2 拿到 3 个索引，不是 2 个：每个 rank 拿到的个数相同，"
        "drop_last=False 时，采样器靠填充索引做到这一点。"
    )
    assert str(check_sampler_indices([2, 6, 0])).startswith("正确：4 个 rank 中的 rank 2 拿到 3 个索引")
    wrapped, _ = _wrapped_state()
    assert str(check_unprefixed_state_dict(wrapped, nn.Linear(3, 2), wrapped)).startswith(
        "未通过：有些键仍以 'module.' 开头"
    )
    plain = dict(wrapped)
    consume_prefix_in_state_dict_if_present(plain, "module.")
    loads = check_unprefixed_state_dict(plain, nn.Linear(3, 2), wrapped)
    assert str(loads).startswith("正确：原始模型能加载它")


def test_rank_failures_in_chinese(monkeypatch):
    """ranks.py's words for a failed launch, and the hint it is given, in Chinese."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")

    def peer_left(*args, **kwargs):
        raise WorkerError(0, 2, "RuntimeError", "Connection closed by peer")

    monkeypatch.setattr(ranks, "launch", peer_left)
    assert str(check_average_gradients(averages)) == (
        "未通过：rank 0 在集合通信中失去了对端：另一个 rank 根本没有调用它就离开了。"
        "每个 rank 都必须以相同的顺序做相同的集合通信调用。"
    )

    def no_port(*args, **kwargs):
        raise LaunchError("no free port")

    monkeypatch.setattr(ranks, "launch", no_port)
    assert str(check_average_gradients(averages)) == "未通过：无法启动各 rank：no free port"


@pytest.mark.parametrize("model", [None, "nn.Linear(4, 2)", {"weight": 1}, nn.Linear])
def test_the_unprefixed_check_refuses_a_model_that_is_no_module(model):
    assert_refused(
        lambda: check_unprefixed_state_dict({}, model), "model", "the plain nn.Module to load into"
    )


@pytest.mark.parametrize("wrapped", ["module.weight", 3, [("module.weight", 1)]])
def test_the_unprefixed_check_refuses_a_wrapped_state_that_is_no_mapping(wrapped):
    assert_refused(lambda: check_unprefixed_state_dict({}, nn.Linear(4, 2), wrapped), "wrapped", "state_dict")


@pytest.mark.parametrize("results", [None, 3, "rank", b"rank"])
def test_the_ranks_results_must_be_what_launch_returned(results):
    assert_refused(
        lambda: ranks.exited_without_result(results), "ranks", "the list of results that launch returned"
    )
