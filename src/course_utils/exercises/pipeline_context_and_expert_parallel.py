"""Checks for the exercises of notebook 14 (pipeline, context and expert parallelism).

Each check calls the reader's function on several cases, so an answer written for one case only
does not pass, and says what is wrong with a hint, never the solution.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from course_utils._checks import shown
from course_utils.exercises import (
    CheckResult,
    call_reader,
    failed,
    integral_list,
    not_a_function,
    passed,
    positive_count,
    real_value,
    unanswered,
)
from course_utils.i18n import _

# The most ranks a world may have here: one count per rank is held in a list.
MAX_RANKS = 2**20
# Exercise 1: (stages, micro-batches) pipelines the check asks about.
PIPELINES = ((2, 4), (4, 12), (8, 8), (3, 1), (1, 5))
# Exercise 2: (queries, keys, dimension, blocks) of the attention the check combines block by block.
ATTENTION = ((3, 8, 4, 4), (2, 12, 5, 3), (4, 6, 3, 1))
# Exercise 2: how far the attention combined in each dtype of the running state may be from the truth.
# float32 rounds scores around 800 by about 3e-5, which the exponentials carry into the result.
_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}
# Exercise 3: (experts of each token, experts per rank, world), some ranks receiving nothing.
ROUTINGS = (
    ([0, 3, 1, 1, 2, 0, 3, 3], 2, 2),
    ([0, 0, 1, 0], 1, 4),
    ([5, 4, 5, 5, 0, 1], 2, 3),
    ([2, 3, 2], 2, 2),
    ([], 1, 2),
)


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """The idle part of each stage's step under GPipe or 1F1B with equal passes: (p-1)/(m+p-1)."""
    stages, micro_batches = positive_count(stages, "stages"), positive_count(micro_batches, "micro_batches")
    return (stages - 1) / (micro_batches + stages - 1)


def check_bubble(bubble: Callable[[int, int], float]) -> CheckResult:
    """Check the reader's `bubble(stages, micro_batches)` on the PIPELINES."""
    problem = not_a_function(bubble, "def bubble(stages, micro_batches): ...")
    if problem is not None:
        return problem
    goal = _("return the fraction of each stage's step that it spends idle")
    if (verdict := unanswered(bubble, "bubble(stages, micro_batches)", goal)) is not None:
        return verdict
    for stages, micro in PIPELINES:
        outcome = call_reader(bubble, stages, micro)
        if outcome.problem is not None:
            return failed(
                _("bubble({p}, {m}): your function {problem}.").format(
                    p=stages, m=micro, problem=outcome.problem
                )
            )
        value = real_value(outcome.value)
        if value is None:
            return failed(
                _(
                    "bubble({p}, {m}) returned {value!r}: return one number, a fraction between 0 and 1."
                ).format(p=stages, m=micro, value=outcome.value)
            )
        truth = bubble_fraction(stages, micro)
        if math.isclose(value, truth, abs_tol=1e-6):
            continue
        if math.isclose(value, (stages - 1) / micro, abs_tol=1e-6):
            hint = _("that divides by the micro-batches only: the step also lasts while the pipeline fills.")
        elif math.isclose(value, 1 - truth, abs_tol=1e-6):
            hint = _("that is the busy part of the step, not the idle part.")
        else:
            hint = _("count the step in passes: m of a stage's own, plus the p - 1 it waits for others.")
        return failed(
            _("bubble({p}, {m}) gave {value:.4f}, which is off: {hint}").format(
                p=stages, m=micro, value=value, hint=hint
            )
        )
    return passed(
        _("(p - 1) / (m + p - 1): 0.20 for 2 stages and 4 micro-batches, 0.20 for 4 and 12, 0 for one stage.")
    )


def _state_kind(state: tuple[torch.Tensor, ...]) -> CheckResult | None:
    """A hint when the running state is not on the CPU in float64 or float32, the dtypes whose
    precision can hold scores around 800; else None."""
    if any(t.device.type != "cpu" for t in state):
        return failed(_("return the running state on the CPU, where the scores and values are."))
    odd = next((t.dtype for t in state if t.dtype not in _TOLERANCE), None)
    if odd is not None:
        return failed(
            _(
                "the running state came back as {dtype}: keep it in the scores' float64 (float32 passes "
                "too, to a looser tolerance), which can hold scores around 800 and their exponentials."
            ).format(dtype=odd)
        )
    return None


def _attention_case(queries: int, keys: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded scores around 800 (exp overflows float64 above 709: the maximum must come off) and values."""
    generator = torch.Generator().manual_seed(seed)
    scores = 800 + 3 * torch.randn(queries, keys, generator=generator, dtype=torch.float64)
    values = torch.randn(keys, dim, generator=generator, dtype=torch.float64)
    return scores, values


def check_online_softmax(update: Callable[..., Any]) -> CheckResult:
    """Check the reader's `update(running_max, running_sum, out, scores, values)` over the ATTENTION cases."""
    problem = not_a_function(update, "def update(running_max, running_sum, out, scores, values): ...")
    if problem is not None:
        return problem
    goal = _("fold one block of scores and values into the running state, and return the new state")
    verdict = unanswered(update, "update(running_max, running_sum, out, scores, values)", goal)
    if verdict is not None:
        return verdict
    for seed, (queries, keys, dim, blocks) in enumerate(ATTENTION):
        scores, values = _attention_case(queries, keys, dim, seed)
        state = (
            torch.full((queries,), -math.inf, dtype=torch.float64),
            torch.zeros(queries, dtype=torch.float64),
            torch.zeros(queries, dim, dtype=torch.float64),
        )
        for block_scores, block_values in zip(scores.chunk(blocks, dim=1), values.chunk(blocks), strict=True):
            outcome = call_reader(update, *state, block_scores, block_values)
            if outcome.problem is not None:
                return failed(_("your function {problem}.").format(problem=outcome.problem))
            value = outcome.value
            if not (
                isinstance(value, tuple | list)
                and len(value) == 3
                and all(isinstance(t, torch.Tensor) for t in value)
            ):
                return failed(_("return three tensors: (running_max, running_sum, out)."))
            state = tuple(value)
        if tuple(state[2].shape) != (queries, dim) or tuple(state[1].shape) != (queries,):
            return failed(
                _(
                    "after the last block `out` has shape {out} and `running_sum` {total}: they keep one "
                    "row, and one number, per query."
                ).format(out=tuple(state[2].shape), total=tuple(state[1].shape))
            )
        if (verdict := _state_kind(state)) is not None:
            return verdict
        tolerance = max(_TOLERANCE[t.dtype] for t in state)  # the least precise of the three decides
        result = state[2].double() / state[1].double().unsqueeze(-1)
        truth = torch.softmax(scores, dim=-1) @ values
        if not torch.isfinite(result).all():
            return failed(_("the result has inf or nan: subtract the running maximum before exp."))
        if not torch.allclose(result, truth, rtol=0, atol=tolerance):
            if blocks == 1:
                return failed(
                    _(
                        "even one block gives the wrong attention: out / running_sum should be "
                        "softmax(scores) @ values."
                    )
                )
            return failed(
                _(
                    "one block is right, {blocks} are not: when the maximum grows, what happens to the sum "
                    "and the output of the earlier blocks?"
                ).format(blocks=blocks)
            )
    return passed(
        _(
            "the running maximum keeps exp finite, and exp(old max - new max) rescales the earlier "
            "blocks' sum and output: the blocks combine into exact attention."
        )
    )


def expected_split_sizes(expert: list[int], experts_per_rank: int, world: int) -> list[int]:
    """Tokens for each rank when rank r holds experts r*experts_per_rank ... (r+1)*experts_per_rank - 1."""
    experts_per_rank, world = (
        positive_count(experts_per_rank, "experts_per_rank"),
        positive_count(world, "world", most=MAX_RANKS),
    )
    experts = integral_list(expert)
    if experts is None:
        raise TypeError(
            _("expert must be a list of expert numbers (whole numbers), one per token, not {expert}").format(
                expert=shown(expert)
            )
        )
    sizes = [0] * world
    for e in experts:
        if not 0 <= e < experts_per_rank * world:
            raise ValueError(
                _("expert {e} does not exist: {world} ranks hold experts 0 to {last}").format(
                    e=e, world=world, last=experts_per_rank * world - 1
                )
            )
        sizes[e // experts_per_rank] += 1
    return sizes


def check_split_sizes(split_sizes: Callable[[torch.Tensor, int, int], Any]) -> CheckResult:
    """Check the reader's `split_sizes(expert, experts_per_rank, world)` on the ROUTINGS."""
    problem = not_a_function(split_sizes, "def split_sizes(expert, experts_per_rank, world): ...")
    if problem is not None:
        return problem
    goal = _("return how many tokens go to each rank, one count per rank")
    if (verdict := unanswered(split_sizes, "split_sizes(expert, experts_per_rank, world)", goal)) is not None:
        return verdict
    for expert, per_rank, world in ROUTINGS:
        tensor = torch.tensor(expert, dtype=torch.long)
        outcome = call_reader(split_sizes, tensor.clone(), per_rank, world)
        call = f"split_sizes(torch.tensor({expert}), {per_rank}, {world})"
        if outcome.problem is not None:
            return failed(_("{call}: your function {problem}.").format(call=call, problem=outcome.problem))
        sizes = integral_list(outcome.value)
        if sizes is None:
            return failed(
                _(
                    "{call} returned {value!r}: return a list (or 1-D tensor) of whole numbers, one per rank."
                ).format(call=call, value=outcome.value)
            )
        truth = expected_split_sizes(expert, per_rank, world)
        if sizes == truth:
            continue
        if len(sizes) != world:
            return failed(
                _(
                    "{call} gave {n} numbers for {world} ranks: all_to_all_single needs one per rank, 0 "
                    "for a rank that gets no token."
                ).format(call=call, n=len(sizes), world=world)
            )
        if sum(sizes) != len(expert):
            return failed(
                _(
                    "{call} sends {sent} of {tokens} tokens: every token goes to the rank of its expert."
                ).format(call=call, sent=sum(sizes), tokens=len(expert))
            )
        return failed(_("{call} gave {sizes}: which rank holds expert e?").format(call=call, sizes=sizes))
    return passed(
        _("one count per rank, every token counted once at the rank of its expert (e // experts_per_rank).")
    )
