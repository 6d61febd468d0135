"""Checks for the exercises of notebook 10 (memory per rank, FSDP, DTensor, tensor parallelism).

Each check compares the reader's answer with what PyTorch does and says what is right or wrong,
with a hint, never the solution. The answers are computed from real tensors: the bytes from a
real model's parameters, the local shape from `torch.chunk`, which is how `Shard(dim)` splits;
the unit tests compare each accepted answer with what FSDP, DTensor and parallelize_module do.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import Placement, Shard

from course_utils.exercises import (
    CheckResult,
    failed,
    integral_list,
    integral_value,
    passed,
    whole_number_hint,
)

# The model and world size of exercise 1.
BYTES_WORLD_SIZE = 4
# The global shape, world size and rank of exercise 3.
SHAPE_GLOBAL = (10, 6)
SHAPE_WORLD_SIZE = 4
SHAPE_RANK = 3
# An embedding's weight, (num_embeddings, embedding_dim), has two dims.
_WEIGHT_DIMS = 2


def exercise_model() -> nn.Module:
    """The float32 MLP of exercise 1: 256 -> 512 -> 256 (built on the meta device: no memory)."""
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))


def _parameter_bytes(model: nn.Module) -> int:
    """Bytes of one full copy of the model's parameters."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def check_rank_bytes(ddp_bytes: Any, fsdp_bytes: Any) -> CheckResult:
    """Check the bytes of parameters + gradients + Adam state that one rank holds, DDP vs FSDP.

    For `exercise_model()` in float32 on BYTES_WORLD_SIZE ranks, after one Adam step
    (counting exp_avg and exp_avg_sq, not Adam's one-number step counters).
    """
    numbers = []
    for value, name in ((ddp_bytes, "ddp_bytes"), (fsdp_bytes, "fsdp_bytes")):
        if value is None or value is Ellipsis:
            return failed(f"replace the `...` of `{name}` with a number of bytes.")
        number = integral_value(value)
        if number is None:
            return failed(f"`{name}`: " + whole_number_hint(value, "a number of bytes"))
        numbers.append(number)
    ddp, fsdp = numbers
    params = _parameter_bytes(exercise_model())
    numel = params // 4
    if ddp != 4 * params:
        if ddp == params:
            return failed(
                "`ddp_bytes` is the size of one float32 copy of the parameters. A DDP rank keeps whole "
                "parameters, gradients and Adam's state, each number in 4 bytes."
            )
        if ddp in (numel, 2 * numel):
            return failed("`ddp_bytes` looks like a count of numbers: each float32 number takes 4 bytes.")
        if ddp == 2 * params:
            return failed(
                "`ddp_bytes` counts parameters and gradients; Adam keeps two more tensors per parameter."
            )
        if ddp == 3 * params:
            return failed(
                "`ddp_bytes` is one copy short: Adam keeps two tensors per parameter (exp_avg, exp_avg_sq)."
            )
        return failed(
            "`ddp_bytes` is off: count the parameters' numbers (weights and biases), then the copies."
        )
    if fsdp == ddp:
        return failed("`fsdp_bytes` equals DDP's; FSDP keeps only its shard of each of those tensors.")
    if fsdp * BYTES_WORLD_SIZE == 4 * numel:
        return failed("`fsdp_bytes` is a count of numbers: each float32 number takes 4 bytes.")
    if fsdp * BYTES_WORLD_SIZE != ddp:
        return failed(
            f"`fsdp_bytes` is off: FSDP splits parameters, gradients and Adam state "
            f"over {BYTES_WORLD_SIZE} ranks."
        )
    return passed(
        f"DDP keeps {ddp:,} bytes on every rank (parameters, gradients, exp_avg, exp_avg_sq: "
        f"4 copies); FSDP keeps 1/{BYTES_WORLD_SIZE} of each, {fsdp:,} bytes (every dim 0 here "
        f"divides by {BYTES_WORLD_SIZE})."
    )


def _placement_name(value: Any) -> str:
    """How a reader's placement reads in a hint."""
    return repr(value) if isinstance(value, Placement) else type(value).__name__


def check_embedding_placements(colwise_weight: Any, rowwise_weight: Any) -> CheckResult:
    """Check the placements an `nn.Embedding`'s weight gets under ColwiseParallel and RowwiseParallel.

    nn.Linear stores its weight as (out_features, in_features), nn.Embedding as
    (num_embeddings, embedding_dim): the same plan shards them along opposite dims.
    """
    answers = {"colwise_weight": colwise_weight, "rowwise_weight": rowwise_weight}
    for name, value in answers.items():
        if value is None or value is Ellipsis:
            return failed(f"replace the `...` of `{name}` with a placement, such as Shard(1) or Replicate().")
        if not isinstance(value, Placement):
            return failed(
                f"`{name}` should be a placement (Shard(dim), Replicate()), not {_placement_name(value)}."
            )
    if not all(isinstance(value, Shard) for value in answers.values()):
        return failed("tensor parallelism splits the weight itself: each rank holds a part of it.")
    dims = {}
    for name, value in answers.items():
        dim = integral_value(value.dim)
        if dim is None or not -_WEIGHT_DIMS <= dim < _WEIGHT_DIMS:
            return failed(
                f"`{name}`: the weight is 2-D, so Shard takes dim 0 or 1 (or -2, -1), not {value.dim!r}."
            )
        dims[name] = dim % _WEIGHT_DIMS  # Shard(-1) is Shard(1) on a 2-D weight
    colwise, rowwise = dims["colwise_weight"], dims["rowwise_weight"]
    if (colwise, rowwise) == (0, 1):
        return failed(
            "those are nn.Linear's placements. nn.Embedding stores its weight the other way round: "
            "print nn.Embedding(10, 4).weight.shape."
        )
    if colwise != 1:
        return failed(
            "not `colwise_weight`: Colwise splits the output features; for an embedding those are "
            "the embedding_dim numbers of each vector. Which dim of the weight holds them?"
        )
    if rowwise != 0:
        return failed(
            "not `rowwise_weight`: Rowwise splits the input; for an embedding the input is a token id, "
            "which picks a row. Which dim holds the rows?"
        )
    return passed(
        "an embedding's weight is (num_embeddings, embedding_dim): Colwise splits each vector "
        "(Shard(1)), Rowwise splits the vocabulary (Shard(0)), the opposite dims to nn.Linear's."
    )


def expected_local_shape(shape: tuple[int, ...], world_size: int, rank: int, dim: int = 0) -> tuple[int, ...]:
    """The local shape of rank `rank` for a tensor of `shape` placed as Shard(dim): torch.chunk's split."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(
            f"rank must be in 0..{world_size - 1} and world_size at least 1, not {rank=}, {world_size=}"
        )
    chunks = torch.empty(shape, device="meta").chunk(world_size, dim=dim)
    if rank >= len(chunks):
        return tuple(0 if d == dim else size for d, size in enumerate(shape))
    return tuple(chunks[rank].shape)


def check_local_shape(local_shape: Any) -> CheckResult:
    """Check the predicted local shape of rank SHAPE_RANK for a (10, 6) tensor with Shard(0) on 4 ranks."""
    if local_shape is None or local_shape is Ellipsis:
        return failed("replace the `...` with the shape you expect, e.g. (5, 6).")
    sizes = integral_list(local_shape)
    if sizes is None:
        return failed(f"write the shape as a tuple of whole numbers (ints), not {local_shape!r:.60}.")
    answer = tuple(sizes)
    truth = expected_local_shape(SHAPE_GLOBAL, SHAPE_WORLD_SIZE, SHAPE_RANK)
    if answer == truth:
        return passed(
            f"Shard(0) splits like torch.chunk: pieces of ceil(10/4) = 3 rows, so rank {SHAPE_RANK} gets "
            f"what is left, {truth}. Uneven shards are allowed."
        )
    if len(answer) != len(SHAPE_GLOBAL):
        return failed("a shard has as many dimensions as the whole tensor: only the sharded dim shrinks.")
    if answer[1] != SHAPE_GLOBAL[1]:
        return failed("Shard(0) splits dim 0 only: dim 1 keeps its size.")
    if answer[0] in (2, 3):
        return failed(
            "dim 0 is not split into equal parts: think of torch.chunk, which gives the first ranks more."
        )
    return failed("not this shape: torch.chunk(t, 4, dim=0) is how Shard(0) splits.")
