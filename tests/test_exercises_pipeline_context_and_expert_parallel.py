"""Notebook 14's exercise checks: right and equivalent answers pass, wrong ones that look right fail."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from course_utils.exercises import pipeline_context_and_expert_parallel as pipeline
from course_utils.exercises.pipeline_context_and_expert_parallel import (
    PIPELINES,
    bubble_fraction,
    check_bubble,
    check_online_softmax,
    check_split_sizes,
    expected_split_sizes,
)


def bubble(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)


def update(running_max, running_sum, out, scores, values):
    new_max = torch.maximum(running_max, scores.amax(dim=-1))
    correction = torch.exp(running_max - new_max)
    weights = torch.exp(scores - new_max.unsqueeze(-1))
    return (
        new_max,
        running_sum * correction + weights.sum(dim=-1),
        out * correction.unsqueeze(-1) + weights @ values,
    )


def split_sizes(expert, experts_per_rank, world):
    return torch.bincount(expert // experts_per_rank, minlength=world).tolist()


def test_the_solutions_pass():
    assert check_bubble(bubble).ok
    assert check_online_softmax(update).ok
    assert check_split_sizes(split_sizes).ok


def test_equivalent_answers_pass():
    assert check_bubble(lambda p, m: 1 - m / (m + p - 1)).ok
    assert check_bubble(lambda p, m: torch.tensor((p - 1) / (m + p - 1))).ok
    assert check_split_sizes(lambda e, k, w: [int((e // k == r).sum()) for r in range(w)]).ok
    assert check_split_sizes(lambda e, k, w: np.bincount((e // k).numpy(), minlength=w)).ok
    assert check_split_sizes(lambda e, k, w: torch.bincount(e // k, minlength=w)).ok


def _no_correction(running_max, running_sum, out, scores, values):
    new_max = torch.maximum(running_max, scores.amax(dim=-1))
    weights = torch.exp(scores - new_max.unsqueeze(-1))
    return new_max, running_sum + weights.sum(dim=-1), out + weights @ values


def _sum_only_corrected(running_max, running_sum, out, scores, values):
    new_max = torch.maximum(running_max, scores.amax(dim=-1))
    correction = torch.exp(running_max - new_max)
    weights = torch.exp(scores - new_max.unsqueeze(-1))
    return new_max, running_sum * correction + weights.sum(dim=-1), out + weights @ values


def _block_max(running_max, running_sum, out, scores, values):
    block_max = scores.amax(dim=-1)
    weights = torch.exp(scores - block_max.unsqueeze(-1))
    return block_max, running_sum + weights.sum(dim=-1), out + weights @ values


def _no_max(running_max, running_sum, out, scores, values):
    weights = torch.exp(scores)
    return running_max, running_sum + weights.sum(dim=-1), out + weights @ values


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (lambda p, m: 0.2, "off"),  # the value for 2 stages and 4 micro-batches (and 4 and 12), hard-coded
        (lambda p, m: (p - 1) / m, "micro-batches only"),
        (lambda p, m: m / (m + p - 1), "busy part"),
        (lambda p, m: (p - 1) / (m + p), "off"),
        (lambda p, m: "0.2", "one number"),
        (lambda p, m: p / 0, "ZeroDivisionError"),
        (lambda p, m: sys.exit(1), "sys.exit"),
        (bubble(2, 4), "function itself"),
        (..., "write"),
    ],
)
def test_wrong_bubbles_fail(wrong, hint):
    result = check_bubble(wrong)
    assert not result.ok and hint in str(result)


def _in(dtype: torch.dtype, fn=update):
    """`fn` with the running state it returns, and the scores and values it computes with, in `dtype`."""

    def update_in_dtype(running_max, running_sum, out, scores, values):
        given = (running_max, running_sum, out, scores, values)
        return tuple(t.to(dtype) for t in fn(*(t.to(dtype) for t in given)))

    return update_in_dtype


def test_a_float32_running_state_passes_to_float32_s_tolerance():
    assert check_online_softmax(_in(torch.float32)).ok
    result = check_online_softmax(_in(torch.float32, _no_correction))  # a wrong float32 update still fails
    assert not result.ok and "earlier blocks" in str(result)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_running_state_too_coarse_for_the_scores_is_told_which_dtype_to_keep(dtype):
    result = check_online_softmax(_in(dtype))
    assert not result.ok and f"the running state came back as {dtype}" in result.message
    assert "keep it in the scores' float64 (float32 passes too" in result.message


def test_a_running_state_moved_off_the_cpu_is_told_to_come_back(monkeypatch):
    monkeypatch.setattr(pipeline, "ATTENTION", ((4, 6, 3, 1),))  # one block: no second call on the meta state
    result = check_online_softmax(lambda *args: tuple(t.to("meta") for t in update(*args)))
    assert not result.ok and "on the CPU" in result.message


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (_no_correction, "earlier blocks"),
        (_sum_only_corrected, "earlier blocks"),
        (_block_max, "earlier blocks"),
        (_no_max, "inf or nan"),
        (lambda m, s, o, scores, v: (m, s), "three tensors"),
        (lambda m, s, o, scores, v: (m, s.sum(), o), "one number"),
    ],
)
def test_wrong_updates_fail(wrong, hint):
    result = check_online_softmax(wrong)
    assert not result.ok and hint in str(result)


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (
            lambda e, k, w: torch.bincount(e // k).tolist(),
            "one per rank",
        ),  # drops ranks after the last used one
        (lambda e, k, w: torch.bincount(e, minlength=w).tolist(), "one per rank"),  # per expert, not per rank
        (lambda e, k, w: [len(e) // w] * w, "which rank"),  # right for section 3's first routing only
        (lambda e, k, w: torch.bincount(e % w, minlength=w).tolist(), "which rank"),
        (lambda e, k, w: [int((e // k == r).sum()) for r in range(w - 1)] + [0], "tokens"),
        (lambda e, k, w: [1.0] * w, "whole numbers"),
        (lambda e, k, w: e.tolist()[5], "whole numbers"),
    ],
)
def test_wrong_split_sizes_fail(wrong, hint):
    result = check_split_sizes(wrong)
    assert not result.ok and hint in str(result)


def test_the_truths():
    assert [bubble_fraction(p, m) for p, m in PIPELINES[:3]] == pytest.approx([0.2, 0.2, 7 / 15])
    assert expected_split_sizes([0, 3, 1, 1, 2, 0, 3, 3], 2, 2) == [4, 4]
    assert expected_split_sizes([0, 0, 1, 0], 1, 4) == [3, 1, 0, 0]
    torch.manual_seed(0)
    q, k, v = (
        torch.randn(3, 4, dtype=torch.float64),
        torch.randn(8, 4, dtype=torch.float64),
        torch.randn(8, 4, dtype=torch.float64),
    )
    state = (
        torch.full((3,), -torch.inf, dtype=torch.float64),
        torch.zeros(3, dtype=torch.float64),
        torch.zeros(3, 4, dtype=torch.float64),
    )
    for scores, values in zip((q @ k.T / 2).chunk(4, dim=1), v.chunk(4), strict=True):
        state = update(*state, scores, values)
    torch.testing.assert_close(
        state[2] / state[1][:, None], torch.nn.functional.scaled_dot_product_attention(q, k, v)
    )


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: bubble_fraction(0, 4), ValueError, "stages must be at least 1, not 0"),
        (lambda: bubble_fraction(2, -1), ValueError, "micro_batches must be at least 1, not -1"),
        (lambda: bubble_fraction("2", 4), TypeError, "stages must be a whole number such as 2, not '2'"),
        (lambda: bubble_fraction(2, 2.5), TypeError, "micro_batches must be a whole number"),
        (lambda: expected_split_sizes([0, 1], 1, True), TypeError, "world must be a whole number"),
        (
            lambda: expected_split_sizes([0, 5], 2, 2),
            ValueError,
            "expert 5 does not exist: 2 ranks hold experts 0 to 3",
        ),
        (lambda: expected_split_sizes([-1], 2, 2), ValueError, "expert -1 does not exist"),
        (lambda: bubble_fraction(10**400, 4), ValueError, "stages must be at most"),
        (lambda: expected_split_sizes([0], 1, 10**400), ValueError, "world must be at most 1048576"),
        (lambda: expected_split_sizes([0], 1, 2**40), ValueError, "world must be at most 1048576"),
        (lambda: expected_split_sizes(["0"], 1, 2), TypeError, "expert must be a list of expert numbers"),
        (lambda: expected_split_sizes(5, 1, 2), TypeError, "expert must be a list of expert numbers"),
        (lambda: expected_split_sizes([0.5], 1, 2), TypeError, "expert must be a list of expert numbers"),
    ],
)
def test_the_reference_helpers_refuse_counts_that_cannot_be(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_reference_helpers_take_numpys_whole_numbers():
    assert bubble_fraction(np.int64(2), 4) == 1 / 5
    assert expected_split_sizes([0, 3, 3], np.int32(2), 2) == [1, 2]
