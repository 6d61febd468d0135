"""Checks for the exercises of notebook 13 (FSDP2 and tensor parallelism in practice).

Each check compares the reader's answer with what FSDP2 does and says what is right or wrong, with
a hint, never the solution. The unit tests compare the expected answers with real runs.
"""

from __future__ import annotations

from typing import Any

from course_utils.exercises import (
    CheckResult,
    failed,
    integral_value,
    passed,
    positive_count,
    whole_number_hint,
)
from course_utils.i18n import _

# Exercise 1: notebook 13's MLP (two Linear layers, each fully_shard-ed, then the root), default
# reshard_after_forward, gradients accumulated over this many micro-batches per optimizer step.
MICRO_BATCHES = 4
FSDP_LAYERS = 2
# Exercise 2: a (dp, tp) mesh, and the MLP Linear(64, 256) -> ReLU -> Linear(256, 64) in float32,
# with ColwiseParallel on the first Linear, RowwiseParallel on the second, fully_shard over dp.
MESH = (2, 4)
_SHAPES = {"0.weight": (256, 64), "0.bias": (256,), "2.weight": (64, 256), "2.bias": (64,)}


def _count(value: Any, name: str, what: str) -> tuple[int | None, CheckResult | None]:
    """The answer as an int (read as every check reads whole numbers), or a hint."""
    if value is None or value is Ellipsis:
        return None, failed(_("replace the `...` of `{name}` with {what}.").format(name=name, what=what))
    number = integral_value(value)
    if number is None:
        return None, failed(whole_number_hint(value, f"`{name}`"))
    return number, None


def accumulation_collectives(micro_batches: int = MICRO_BATCHES, layers: int = FSDP_LAYERS) -> tuple:
    """(all-gathers, reduce-scatters) of one optimizer step with set_requires_gradient_sync.

    Every micro-batch gathers each layer in forward and again in backward (the layers reshard
    after forward); only the last one, with gradient sync on, reduce-scatters each layer's gradient.
    """
    micro_batches, layers = positive_count(micro_batches, "micro_batches"), positive_count(layers, "layers")
    return 2 * layers * micro_batches, layers


def check_accumulation_collectives(all_gathers: Any, reduce_scatters: Any) -> CheckResult:
    """Check the collectives of one optimizer step accumulated over MICRO_BATCHES micro-batches."""
    answers = {}
    for value, name in ((all_gathers, "all_gathers"), (reduce_scatters, "reduce_scatters")):
        number, problem = _count(value, name, _("a number of collectives"))
        if problem is not None:
            return problem
        answers[name] = number
    gathers, scatters = accumulation_collectives()
    if answers["reduce_scatters"] == scatters * MICRO_BATCHES:
        return failed(
            _(
                "`reduce_scatters` counts one per layer for every micro-batch: that is what "
                "set_requires_gradient_sync(False) avoids until the last micro-batch."
            )
        )
    if answers["reduce_scatters"] != scatters:
        return failed(_("`reduce_scatters` is off: which micro-batches reduce, and how many layers each?"))
    if answers["all_gathers"] == gathers // MICRO_BATCHES:
        return failed(_("`all_gathers` counts one micro-batch: each of the 4 gathers the layers again."))
    if answers["all_gathers"] == gathers // 2:
        return failed(
            _(
                "`all_gathers` counts the forward passes only: the layers free their gathered weights "
                "after forward, so backward gathers them again."
            )
        )
    if answers["all_gathers"] != gathers:
        return failed(
            _("`all_gathers` is off: count per micro-batch, per layer, in forward and in backward.")
        )
    return passed(
        _(
            "{gathers} all-gathers (2 layers x forward and backward x {micro_batches} micro-batches) and "
            "{scatters} reduce-scatters (the last micro-batch only): skipping the sync saves "
            "reduce-scatters, not all-gathers (set_reshard_after_backward(False) would skip the next "
            "forward's all-gathers, reshard_after_forward=False the backward's)."
        ).format(gathers=gathers, micro_batches=MICRO_BATCHES, scatters=scatters)
    )


def two_d_bytes(mesh: tuple[int, int] = MESH) -> int:
    """Bytes of float32 parameters one rank holds for the MLP on a (dp, tp) mesh (TP then FSDP)."""
    if (
        not isinstance(mesh, tuple | list)
        or len(mesh) != 2
        or any(isinstance(size, bool) or not isinstance(size, int) or size < 1 for size in mesh)
    ):
        raise ValueError(
            _("mesh is (dp, tp), two whole numbers of at least 1 such as (2, 2), not {mesh!r}").format(
                mesh=mesh
            )
        )
    dp, tp = mesh
    tp_split = {"0.weight": tp, "0.bias": tp, "2.weight": tp, "2.bias": 1}  # Rowwise replicates its bias
    numel = 0
    for name, shape in _SHAPES.items():
        count = 1
        for size in shape:
            count *= size
        numel += count // (tp_split[name] * dp)
    return 4 * numel


def check_two_d_bytes(rank_bytes: Any) -> CheckResult:
    """Check the parameter bytes one rank holds on the MESH (dp, tp) mesh."""
    number, problem = _count(rank_bytes, "rank_bytes", _("a number of bytes"))
    if problem is not None:
        return problem
    truth = two_d_bytes()
    whole = two_d_bytes((1, 1))
    if number == truth:
        return passed(
            _(
                "{truth:,} bytes: every weight and the first bias split {ranks} ways, the second "
                "bias (replicated by RowwiseParallel) only {dp} ways by FSDP."
            ).format(truth=truth, ranks=MESH[0] * MESH[1], dp=MESH[0])
        )
    if number * MESH[0] * MESH[1] == whole:
        return failed(
            _(
                "that splits every parameter over all 8 ranks: does RowwiseParallel split the second "
                "Linear's bias?"
            )
        )
    if number == truth // 4:
        return failed(_("that looks like a count of numbers: each float32 number takes 4 bytes."))
    if number in (whole // MESH[0], whole // MESH[1]):
        return failed(_("that splits over one mesh dimension only: TP splits within a node, FSDP across."))
    return failed(_("not this: take each parameter's shape, divide by what TP and then FSDP split."))
