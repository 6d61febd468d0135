"""Notebook 15's exercise checks: right answers pass, wrong ones get a hint, the truths match real runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from exercise_answers import NOT_COUNTS, assert_not_yet, assert_refused, odd_answers
from torch.utils.flop_counter import FlopCounterMode

from course_utils.exercises.capstone_train_a_transformer import (
    CONFIG,
    HEAD_CASES,
    SEQ,
    check_flops_per_token,
    check_heads_per_rank,
    check_mfu,
    flops_per_token,
    heads_per_rank,
    matrix_parameters,
    mfu,
)

N = matrix_parameters()
ATTENTION = 12 * CONFIG["num_hidden_layers"] * CONFIG["hidden_size"] * SEQ


def test_flops_per_token_is_what_flop_counter_mode_counts_on_a_real_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **CONFIG,
        max_position_embeddings=SEQ,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="eager",
    )
    model = LlamaForCausalLM(config)
    tokens = torch.randint(0, CONFIG["vocab_size"], (1, SEQ))
    with FlopCounterMode(display=False) as counter:
        model(tokens, labels=tokens).loss.backward()
    assert counter.get_total_flops() == flops_per_token() * SEQ
    assert N == sum(
        p.numel() for name, p in model.named_parameters() if p.ndim == 2 and "embed_tokens" not in name
    )


def test_flops_check_accepts_the_truth_as_any_integer():
    for answer in (flops_per_token(), np.int64(flops_per_token()), torch.tensor(flops_per_token())):
        assert check_flops_per_token(answer)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (6 * N, "attention"),  # 6N alone
        (6 * (N + 512 * 128) + ATTENTION, "embedding"),  # the embedding counted as a matrix
        (2 * N + ATTENTION // 3, "forward"),  # forward only
        (6 * N + ATTENTION // 2, "causal"),  # half the attention matrix
        (float(flops_per_token()), "int"),  # prints the right number, is a float
        (str(flops_per_token()), "int"),
        (flops_per_token() + 1, ""),
        (..., "replace"),
    ],
)
def test_flops_check_rejects_wrong_answers(answer, hint):
    assert_not_yet(check_flops_per_token(answer), hint)


def test_mfu_check_accepts_the_fraction_however_it_is_typed():
    for answer in (mfu(), float(np.float32(mfu())), torch.tensor(mfu()), round(mfu(), 4)):
        assert check_mfu(answer), answer


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (100 * mfu(), "percentage"),
        (2 * mfu(), "job"),
        (mfu(6 * N), "attention"),
        (mfu(2 * N), "forward"),
        (mfu(8 * N + 4 * ATTENTION // 3), "recomputation"),
        (round(mfu(), 2), ""),  # 0.48: prints like the answer rounded, is 0.2% off
        ("0.4792", "number"),
        (..., "replace"),
    ],
)
def test_mfu_check_rejects_wrong_answers(answer, hint):
    assert_not_yet(check_mfu(answer), hint)


def test_the_truth_raises_where_heads_do_not_divide():
    assert heads_per_rank(4, 2, 2) == (2, 1)
    with pytest.raises(ValueError, match="do not divide"):
        heads_per_rank(4, 2, 4)
    assert any(h % tp or kv % tp for h, kv, tp in HEAD_CASES)


def test_heads_check_passes_the_solution_and_an_equivalent_one():
    assert check_heads_per_rank(heads_per_rank)

    def as_list(h: int, kv: int, tp: int) -> list[int]:
        if h % tp != 0 or kv % tp != 0:
            raise ValueError("heads must divide by the TP size")
        return [h // tp, kv // tp]

    assert check_heads_per_rank(as_list)


def floor_only(h, kv, tp):  # right on the notebook's (4, 2, 2), silent where heads do not divide
    return h // tp, kv // tp


def queries_only(h, kv, tp):
    if h % tp:
        raise ValueError("no")
    return h // tp, kv


def asserts(h, kv, tp):
    assert h % tp == 0 and kv % tp == 0
    return h // tp, kv // tp


def one_number(h, kv, tp):
    if h % tp or kv % tp:
        raise ValueError("no")
    return h // tp


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (floor_only, "raise ValueError"),
        (queries_only, "key/value heads"),
        (asserts, "AssertionError"),
        (one_number, "two ints"),
        (heads_per_rank(4, 2, 2), "function itself"),
        (..., "heads_per_rank"),
    ],
)
def test_heads_check_rejects_wrong_plans(answer, hint):
    assert_not_yet(check_heads_per_rank(answer), hint)


@pytest.mark.parametrize("odd", odd_answers())
def test_odd_answers_get_a_hint(odd):
    assert_not_yet(check_flops_per_token(odd))
    assert_not_yet(check_mfu(odd))
    assert_not_yet(check_heads_per_rank(odd))


@pytest.mark.parametrize("value", NOT_COUNTS)
@pytest.mark.parametrize("argument", ["num_heads", "num_kv_heads", "tp"])
def test_heads_per_rank_refuses_what_is_no_count_of_heads_or_ranks(argument, value):
    arguments = {"num_heads": 4, "num_kv_heads": 2, "tp": 2, argument: value}
    assert_refused(lambda: heads_per_rank(**arguments), argument, "must be")


@pytest.mark.parametrize(
    ("call", "argument", "allowed"),
    [
        (lambda: matrix_parameters("128"), "config", "a dict of sizes with the keys of CONFIG"),
        (lambda: matrix_parameters({}), "config has no 'vocab_size'", "give every key of CONFIG"),
        (lambda: matrix_parameters({**CONFIG, "hidden_size": 0}), "config['hidden_size']", "at least 1"),
        (lambda: matrix_parameters({**CONFIG, "vocab_size": 10**400}), "config['vocab_size']", "at most"),
        (
            lambda: flops_per_token({**CONFIG, "num_hidden_layers": 2.0}),
            "config['num_hidden_layers']",
            "whole",
        ),
        (
            lambda: flops_per_token({**CONFIG, "num_attention_heads": 3}),
            "config['num_attention_heads']",
            "divide",
        ),
        (lambda: flops_per_token(seq=0), "seq", "at least 1"),
        (lambda: flops_per_token(seq=float("nan")), "seq", "whole number"),
        (lambda: mfu(0), "flops", "at least 1"),
        (lambda: mfu(2.5e6), "flops", "whole number"),
        (lambda: mfu(10**400), "flops", "at most"),
    ],
)
def test_the_reference_helpers_refuse_sizes_that_cannot_be(call, argument, allowed):
    assert_refused(call, argument, allowed)


@pytest.mark.parametrize("answer", [10**400, -(10**400), float("nan"), "0.25\0"])
def test_answers_no_float_can_hold_get_a_hint(answer):
    assert_not_yet(check_mfu(answer))
    assert_not_yet(check_flops_per_token(answer))
