"""Checks for the exercises of notebook 15 (the capstone: train a transformer).

Each check compares the reader's answer with the truth and says what is right or wrong, with a
hint, never the solution. The unit tests compare the truths with real runs (`FlopCounterMode`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from course_utils.exercises import (
    CheckResult,
    call_reader,
    failed,
    integral_value,
    not_a_function,
    passed,
    positive_count,
    real_value,
    unanswered,
)
from course_utils.i18n import _

# Exercises 1 and 2: a Llama-style decoder, bigger than the notebook's, trained on sequences of SEQ.
CONFIG = {
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 352,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
}
SEQ = 256
# Exercise 2: what each of the 2 ranks measured.
TOKENS_PER_SECOND_PER_RANK = 1500
PEAK_PER_RANK = 20e9


def _sizes(config: object) -> dict[str, int]:
    """`config`'s sizes (a mapping with CONFIG's keys, each a whole number of at least 1), checked;
    else an error that names the key and says what to give."""
    if not isinstance(config, Mapping):
        raise TypeError(
            _("config must be a dict of sizes with the keys of CONFIG, such as {keys}, not a {type}").format(
                keys=", ".join(CONFIG), type=type(config).__name__
            )
        )
    missing = [key for key in CONFIG if key not in config]
    if missing:
        raise ValueError(
            _("config has no {key!r}: give every key of CONFIG ({keys})").format(
                key=missing[0], keys=", ".join(CONFIG)
            )
        )
    sizes = {key: positive_count(config[key], f"config[{key!r}]") for key in CONFIG}
    if sizes["hidden_size"] % sizes["num_attention_heads"]:
        raise ValueError(
            _(
                "config['hidden_size'] ({d}) must divide by config['num_attention_heads'] ({heads}): "
                "each head takes an equal share of it"
            ).format(d=sizes["hidden_size"], heads=sizes["num_attention_heads"])
        )
    return sizes


def matrix_parameters(config: Mapping[str, int] = CONFIG) -> int:
    """Numbers in the model's weight matrices: each block's attention and MLP, and the output head."""
    sizes = _sizes(config)
    d, hidden = sizes["hidden_size"], sizes["intermediate_size"]
    kv = d // sizes["num_attention_heads"] * sizes["num_key_value_heads"]  # width of k and v
    block = 2 * d * d + 2 * d * kv + 3 * d * hidden  # q, o; k, v; gate, up, down
    return sizes["num_hidden_layers"] * block + d * sizes["vocab_size"]


def flops_per_token(config: Mapping[str, int] = CONFIG, seq: int = SEQ) -> int:
    """Training FLOPs per token: 6N for the matrices, 12·L·d·T for attention's two products."""
    sizes, seq = _sizes(config), positive_count(seq, "seq")
    return 6 * matrix_parameters(sizes) + 12 * sizes["num_hidden_layers"] * sizes["hidden_size"] * seq


def _read(
    value: Any, name: str, what: str, reader: Callable[[Any], Any], hint: str
) -> tuple[Any, CheckResult | None]:
    """The answer as `reader` reads it, or the verdict on a placeholder or an unreadable answer."""
    if value is None or value is Ellipsis:
        return None, failed(_("replace the `...` of `{name}` with {what}.").format(name=name, what=what))
    number = reader(value)
    return number, (failed(hint) if number is None else None)


def check_flops_per_token(flops: Any) -> CheckResult:
    """Check the training FLOPs per token of the exercise's model on sequences of SEQ tokens."""
    number, problem = _read(
        flops,
        "flops",
        _("a number of FLOPs"),
        integral_value,
        _("`flops` is a whole number of FLOPs: give an int (// divides without a float)."),
    )
    if problem is not None:
        return problem
    truth = flops_per_token()
    n = matrix_parameters()
    attention = truth - 6 * n
    embedding = CONFIG["vocab_size"] * CONFIG["hidden_size"]
    if number == truth:
        return passed(
            _(
                "{truth:,} FLOPs per token: 6 x {n:,} for the matrices and {attention:,} for attention."
            ).format(truth=truth, n=n, attention=attention)
        )
    if number == 6 * n:
        return failed(_("that is 6N alone: attention's two products grow with the sequence, add them."))
    if number in (6 * (n + embedding), 6 * (n + embedding) + attention):
        return failed(_("the token embedding is a lookup, not a matrix product: it costs no FLOPs."))
    if number in (truth // 3, 2 * n, 2 * n + attention // 3):
        return failed(_("that counts the forward pass only: backward costs twice the forward."))
    if number == 6 * n + attention // 2:
        return failed(
            _("the attention products run on the whole T x T matrix before the causal mask: count all of it.")
        )
    return failed(
        _("count 6 per weight number, then attention's 2 products per block, forward and backward.")
    )


def mfu(flops: int = flops_per_token()) -> float:
    """Model FLOPs utilisation of exercise 2's run, as a fraction of each rank's measured peak."""
    return TOKENS_PER_SECOND_PER_RANK * positive_count(flops, "flops") / PEAK_PER_RANK


def check_mfu(utilisation: Any) -> CheckResult:
    """Check the MFU (a fraction) of exercise 2's run."""
    number, problem = _read(
        utilisation,
        "utilisation",
        _("a fraction between 0 and 1"),
        real_value,
        _("`utilisation` is one number, a fraction (not a {type}).").format(type=type(utilisation).__name__),
    )
    if problem is not None:
        return problem
    truth = mfu()

    def near(value: float) -> bool:
        return abs(number - value) <= 1e-3 * value

    if near(truth):
        return passed(_("{truth:.2%} of the peak, on each rank and so for the job.").format(truth=truth))
    if near(100 * truth):
        return failed(_("that reads as a percentage: give the fraction (0.25 for 25%)."))
    if near(2 * truth):
        return failed(
            _("that sets the job's tokens per second against one rank's peak: compare like with like.")
        )
    n = matrix_parameters()
    if near(mfu(6 * n)):
        return failed(_("the FLOP count leaves out attention: use the FLOPs per token of exercise 1."))
    if near(mfu(flops_per_token() // 3)) or near(mfu(2 * n)):
        return failed(_("the FLOP count is the forward pass only: training does forward and backward."))
    if near(mfu(8 * n + 16 * CONFIG["num_hidden_layers"] * CONFIG["hidden_size"] * SEQ)):
        return failed(
            _("that counts the recomputation of activation checkpointing: MFU counts the model's FLOPs.")
        )
    return failed(_("tokens per second times FLOPs per token, over the peak, for one rank."))


# Exercise 3: (query heads, key/value heads, TP size) -> what one rank computes, or an error.
HEAD_CASES: tuple[tuple[int, int, int], ...] = (
    (4, 2, 2),
    (32, 8, 8),
    (8, 4, 1),
    (4, 2, 4),
    (6, 6, 4),
    (12, 4, 3),
)


def heads_per_rank(num_heads: int, num_kv_heads: int, tp: int) -> tuple[int, int]:
    """The query and key/value heads one TP rank computes; ValueError when the heads do not divide."""
    num_heads, num_kv_heads = (
        positive_count(num_heads, "num_heads"),
        positive_count(num_kv_heads, "num_kv_heads"),
    )
    tp = positive_count(tp, "tp")
    if num_heads % tp or num_kv_heads % tp:
        raise ValueError(
            _("{num_heads} query and {num_kv_heads} key/value heads do not divide by {tp} ranks").format(
                num_heads=num_heads, num_kv_heads=num_kv_heads, tp=tp
            )
        )
    return num_heads // tp, num_kv_heads // tp


def _pair(value: Any) -> tuple[int, int] | None:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        return None
    numbers = (integral_value(value[0]), integral_value(value[1]))
    return None if None in numbers else (numbers[0], numbers[1])


def check_heads_per_rank(fn: Callable[[int, int, int], Any]) -> CheckResult:
    """Call the reader's `heads_per_rank(num_heads, num_kv_heads, tp)` on HEAD_CASES and judge it."""
    problem = not_a_function(fn, "def heads_per_rank(num_heads, num_kv_heads, tp): ...")
    if problem is not None:
        return problem
    goal = _(
        "return the query and key/value heads one rank computes, or raise ValueError if they do not divide"
    )
    if (verdict := unanswered(fn, "heads_per_rank(num_heads, num_kv_heads, tp)", goal)) is not None:
        return verdict
    for case in HEAD_CASES:
        divides = case[0] % case[2] == 0 and case[1] % case[2] == 0
        outcome = call_reader(fn, *case)
        if not divides:
            if outcome.problem is None:
                return failed(
                    _(
                        "heads_per_rank{case} returned {value!r}: the heads do not divide by the ranks, so "
                        "no plan is right; raise ValueError before TP builds a wrong model."
                    ).format(case=case, value=outcome.value)
                )
            if not outcome.problem.startswith("raised ValueError"):
                return failed(
                    _("heads_per_rank{case} {problem}: raise ValueError, with a message.").format(
                        case=case, problem=outcome.problem
                    )
                )
            continue
        if outcome.problem is not None:
            return failed(
                _("heads_per_rank{case} {problem}: it should return the heads one rank computes.").format(
                    case=case, problem=outcome.problem
                )
            )
        answer = _pair(outcome.value)
        if answer is None:
            return failed(
                _(
                    "heads_per_rank{case} returned {value!r}: "
                    "return two ints, (query heads, key/value heads)."
                ).format(case=case, value=outcome.value)
            )
        truth = heads_per_rank(*case)
        if answer != truth:
            if answer[0] == truth[0]:
                hint = _("the key/value heads are split over the ranks too (k_proj and v_proj are Colwise).")
            else:
                hint = _("each rank computes its share of the query heads.")
            return failed(
                _("heads_per_rank{case} returned {value!r}: {hint}").format(
                    case=case, value=outcome.value, hint=hint
                )
            )
    return passed(
        _("each rank computes whole heads, and a plan whose heads do not divide stops with a clear error.")
    )
