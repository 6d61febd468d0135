"""Checks for the exercises of notebook 10 (memory per rank, FSDP, DTensor, tensor parallelism).

Each check compares the reader's answer with what PyTorch does and says what is right or wrong,
with a hint, never the solution. The answers are computed from real tensors: the bytes from a
real model's parameters, the local shape by `torch.chunk`'s rule, which is how `Shard(dim)` splits;
the unit tests compare each accepted answer with what FSDP, DTensor and parallelize_module do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import Placement, Shard

from course_utils._checks import shown
from course_utils.exercises import (
    CheckResult,
    failed,
    integral_list,
    integral_value,
    passed,
    positive_count,
    whole_number_hint,
)
from course_utils.i18n import _

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
            return failed(_("replace the `...` of `{name}` with a number of bytes.").format(name=name))
        number = integral_value(value)
        if number is None:
            return failed(
                _("`{name}`: {hint}").format(name=name, hint=whole_number_hint(value, _("a number of bytes")))
            )
        numbers.append(number)
    ddp, fsdp = numbers
    params = _parameter_bytes(exercise_model())
    numel = params // 4
    if ddp != 4 * params:
        if ddp == params:
            return failed(
                _(
                    "`ddp_bytes` is the size of one float32 copy of the parameters. A DDP rank keeps whole "
                    "parameters, gradients and Adam's state, each number in 4 bytes."
                )
            )
        if ddp in (numel, 2 * numel):
            return failed(_("`ddp_bytes` looks like a count of numbers: each float32 number takes 4 bytes."))
        if ddp == 2 * params:
            return failed(
                _("`ddp_bytes` counts parameters and gradients; Adam keeps two more tensors per parameter.")
            )
        if ddp == 3 * params:
            return failed(
                _(
                    "`ddp_bytes` is one copy short: Adam keeps two tensors per parameter "
                    "(exp_avg, exp_avg_sq)."
                )
            )
        return failed(
            _("`ddp_bytes` is off: count the parameters' numbers (weights and biases), then the copies.")
        )
    if fsdp == ddp:
        return failed(_("`fsdp_bytes` equals DDP's; FSDP keeps only its shard of each of those tensors."))
    if fsdp * BYTES_WORLD_SIZE == 4 * numel:
        return failed(_("`fsdp_bytes` is a count of numbers: each float32 number takes 4 bytes."))
    if fsdp * BYTES_WORLD_SIZE != ddp:
        return failed(
            _(
                "`fsdp_bytes` is off: FSDP splits parameters, gradients and Adam state over {world} ranks."
            ).format(world=BYTES_WORLD_SIZE)
        )
    return passed(
        _(
            "DDP keeps {ddp:,} bytes on every rank (parameters, gradients, exp_avg, exp_avg_sq: "
            "4 copies); FSDP keeps 1/{world} of each, {fsdp:,} bytes (every dim 0 here "
            "divides by {world})."
        ).format(ddp=ddp, fsdp=fsdp, world=BYTES_WORLD_SIZE)
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
            return failed(
                _("replace the `...` of `{name}` with a placement, such as Shard(1) or Replicate().").format(
                    name=name
                )
            )
        if not isinstance(value, Placement):
            return failed(
                _("`{name}` should be a placement (Shard(dim), Replicate()), not {value}.").format(
                    name=name, value=_placement_name(value)
                )
            )
    if not all(isinstance(value, Shard) for value in answers.values()):
        return failed(_("tensor parallelism splits the weight itself: each rank holds a part of it."))
    dims = {}
    for name, value in answers.items():
        dim = integral_value(value.dim)
        if dim is None or not -_WEIGHT_DIMS <= dim < _WEIGHT_DIMS:
            return failed(
                _("`{name}`: the weight is 2-D, so Shard takes dim 0 or 1 (or -2, -1), not {dim!r}.").format(
                    name=name, dim=value.dim
                )
            )
        dims[name] = dim % _WEIGHT_DIMS  # Shard(-1) is Shard(1) on a 2-D weight
    colwise, rowwise = dims["colwise_weight"], dims["rowwise_weight"]
    if (colwise, rowwise) == (0, 1):
        return failed(
            _(
                "those are nn.Linear's placements. nn.Embedding stores its weight the other way round: "
                "print nn.Embedding(10, 4).weight.shape."
            )
        )
    if colwise != 1:
        return failed(
            _(
                "not `colwise_weight`: Colwise splits the output features; for an embedding those are "
                "the embedding_dim numbers of each vector. Which dim of the weight holds them?"
            )
        )
    if rowwise != 0:
        return failed(
            _(
                "not `rowwise_weight`: Rowwise splits the input; for an embedding the input is a token id, "
                "which picks a row. Which dim holds the rows?"
            )
        )
    return passed(
        _(
            "an embedding's weight is (num_embeddings, embedding_dim): Colwise splits each vector "
            "(Shard(1)), Rowwise splits the vocabulary (Shard(0)), the opposite dims to nn.Linear's."
        )
    )


def expected_local_shape(shape: tuple[int, ...], world_size: int, rank: int, dim: int = 0) -> tuple[int, ...]:
    """The local shape of rank `rank` for a tensor of `shape` placed as Shard(dim), split as torch.chunk
    splits: pieces of ceil(size / world_size) along `dim`, the last ones smaller or empty."""
    sizes = integral_list(shape)
    if sizes is None or any(size < 0 for size in sizes):
        raise TypeError(
            _(
                "shape must be a tuple of sizes (whole numbers, 0 or more) such as (10, 6), not {shape}"
            ).format(shape=shown(shape))
        )
    world_size = positive_count(world_size, "world_size")
    rank_number, axis = integral_value(rank), integral_value(dim)
    if rank_number is None or not 0 <= rank_number < world_size:
        error = TypeError if rank_number is None else ValueError
        raise error(
            _("rank must be a whole number from 0 to {last} (world_size - 1), not {rank}").format(
                last=world_size - 1, rank=shown(rank)
            )
        )
    if axis is None or not -len(sizes) <= axis < len(sizes):
        error = TypeError if axis is None else ValueError
        raise error(
            _("dim must be a dimension of shape, a whole number from {first} to {last}, not {dim}").format(
                first=-len(sizes), last=len(sizes) - 1, dim=shown(dim)
            )
        )
    axis %= len(sizes)
    piece = -(-sizes[axis] // world_size)  # torch.chunk's piece: the size divided, rounded up
    sizes[axis] = max(0, min(piece, sizes[axis] - rank_number * piece))
    return tuple(sizes)


def check_local_shape(local_shape: Any) -> CheckResult:
    """Check the predicted local shape of rank SHAPE_RANK for a (10, 6) tensor with Shard(0) on 4 ranks."""
    if local_shape is None or local_shape is Ellipsis:
        return failed(_("replace the `...` with the shape you expect, e.g. (5, 6)."))
    sizes = integral_list(local_shape)
    if sizes is None:
        return failed(
            _("write the shape as a tuple of whole numbers (ints), not {shape!r:.60}.").format(
                shape=local_shape
            )
        )
    answer = tuple(sizes)
    truth = expected_local_shape(SHAPE_GLOBAL, SHAPE_WORLD_SIZE, SHAPE_RANK)
    if answer == truth:
        return passed(
            _(
                "Shard(0) splits like torch.chunk: pieces of ceil(10/4) = 3 rows, so rank {rank} gets "
                "what is left, {shape}. Uneven shards are allowed."
            ).format(rank=SHAPE_RANK, shape=truth)
        )
    if len(answer) != len(SHAPE_GLOBAL):
        return failed(_("a shard has as many dimensions as the whole tensor: only the sharded dim shrinks."))
    if answer[1] != SHAPE_GLOBAL[1]:
        return failed(_("Shard(0) splits dim 0 only: dim 1 keeps its size."))
    if answer[0] in (2, 3):
        return failed(
            _("dim 0 is not split into equal parts: think of torch.chunk, which gives the first ranks more.")
        )
    return failed(_("not this shape: torch.chunk(t, 4, dim=0) is how Shard(0) splits."))


# Exercise 4: tensor parallelism applied by the reader's function, checked in real ranks.
TP_WORLD_SIZE = 2
_TP_SHAPES = (16, 32, 16)  # Linear(16, 32) -> ReLU -> Linear(32, 16)


def exercise_tp_model() -> nn.Sequential:
    """The MLP of exercise 4, with the same seeded weights in every process that builds it."""
    torch.manual_seed(0)
    d_in, hidden, d_out = _TP_SHAPES
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


def _layout(param: Any) -> tuple:
    """(is a DTensor, placements with Shard dims made non-negative, local shape) of one parameter."""
    from torch.distributed.tensor import DTensor

    if not isinstance(param, DTensor):
        return (False, (), tuple(param.shape))
    placements = tuple(Shard(p.dim % param.dim()) if isinstance(p, Shard) else p for p in param.placements)
    return (True, placements, tuple(param.to_local().shape))


def _tp_worker(shard_mlp: Any) -> dict:
    """In each rank: apply the reader's function to the exercise model, run a forward, report."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode

    dist.init_process_group("gloo")
    try:
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        model = exercise_tp_model()
        returned = shard_mlp(model, mesh)
        if isinstance(returned, nn.Module) and all(returned is not m for m in model.modules()):
            model = returned  # a wrapper (such as DDP) the reader returned instead of the model
        names = ("0.weight", "0.bias", "2.weight", "2.bias")
        params = dict(model.named_parameters())
        report: dict[str, Any] = {
            "modules": type(model).__name__,
            "layouts": {name: _layout(params[name]) for name in names if name in params},
        }
        torch.manual_seed(1)
        x = torch.randn(4, _TP_SHAPES[0])
        with CommDebugMode() as comms, torch.no_grad():
            y = model(x)
        report["comms"] = {str(op).split(".")[-1]: n for op, n in comms.get_comm_counts().items()}
        report["dtensor output"] = isinstance(y, DTensor)
        report["output"] = (y.full_tensor() if isinstance(y, DTensor) else y).detach().clone()
        dist.barrier()
        return report
    finally:
        dist.destroy_process_group()


def check_tensor_parallel(shard_mlp: Callable[[nn.Module, Any], Any]) -> CheckResult:
    """Check `shard_mlp(model, mesh)`: tensor parallelism on exercise 4's MLP, run in 2 real ranks.

    Right: every weight split over the ranks (not gathered, not replicated), the output a plain
    tensor equal on every rank to the unsharded model's, one all-reduce in the forward pass.
    """
    from course_utils.exercises import not_a_function, unanswered
    from course_utils.exercises.ranks import exited_without_result
    from course_utils.exercises.sandbox import probe_verdict
    from course_utils.processes import LaunchError, LaunchTimeoutError, WorkerError, launch

    if (verdict := not_a_function(shard_mlp, "shard_mlp(model, mesh)")) is not None:
        return verdict
    goal = _("split the model's two layers over the mesh with parallelize_module")
    if (verdict := unanswered(shard_mlp, "shard_mlp(model, mesh)", goal)) is not None:
        return verdict
    if (verdict := probe_verdict(shard_mlp, 2)) is not None:
        return verdict  # it ends its process or hangs before it uses its arguments: no rank started for it
    try:
        ranks = launch(_tp_worker, TP_WORLD_SIZE, args=(shard_mlp,), timeout=20)
    except LaunchTimeoutError:
        return failed(_("the ranks never finished: every rank must make the same calls, in the same order."))
    except WorkerError as err:
        first = (err.message or "").strip().splitlines()
        what = f"{err.exc_type}: {first[0]}" if err.exc_type and first else _("it ended without a result")
        return failed(
            _("rank {rank} stopped while running your function: {what}").format(rank=err.rank, what=what)
        )
    except LaunchError as err:
        return failed(_("the ranks could not be started: {error}").format(error=err))
    if (verdict := exited_without_result(ranks)) is not None:
        return verdict
    reference = exercise_tp_model()
    torch.manual_seed(1)  # the worker's input, after the model's seed
    with torch.no_grad():
        expected = reference(torch.randn(4, _TP_SHAPES[0]))
    first = ranks[0]
    layouts = first["layouts"]
    if set(layouts) != {"0.weight", "0.bias", "2.weight", "2.bias"}:
        return failed(
            _(
                "the model's parameters are now named {names}: apply the plan to the model "
                "you are given (parallelize_module works in place), do not wrap it (DDP adds `module.`)."
            ).format(names=sorted(layouts))
        )
    plain = [name for name in ("0.weight", "2.weight") if not layouts[name][0]]
    if len(plain) == 2:
        return failed(
            _(
                "both weights are still whole tensors on every rank, as under DDP: nothing was split. "
                "parallelize_module(model, mesh, plan) turns them into DTensors."
            )
        )
    if plain:
        return failed(
            _("{name} is still whole on every rank: shard both layers, not only one.").format(name=plain[0])
        )
    for name in ("0.weight", "2.weight"):
        if all(not isinstance(p, Shard) for p in layouts[name][1]):
            return failed(
                _("{name} is {placements}: every rank holds all of it. Split it.").format(
                    name=name, placements=layouts[name][1]
                )
            )
    if any(r["dtensor output"] for r in ranks):
        return failed(
            _(
                "the output is a DTensor: the check asks for a plain tensor, whole on every rank "
                "(the default use_local_output=True of the last layer's style gives one)."
            )
        )
    for r in ranks:
        out = r["output"]
        if out.shape != expected.shape or not torch.allclose(out, expected, atol=1e-5):
            return failed(
                _(
                    "the output (shape {shape}) differs from the unsharded model's "
                    "{expected}: which layer splits its output features, which its input?"
                ).format(shape=tuple(out.shape), expected=tuple(expected.shape))
            )
    comms = first["comms"]
    if comms != {"all_reduce": 1}:
        return failed(
            _(
                "the output is right, but the forward ran {comms}: with the "
                "hidden features split, one all-reduce at the end of the MLP is all it needs "
                "(gathered weights are FSDP's way, gathered activations cost more)."
            ).format(comms=comms or _("no collective"))
        )
    return passed(
        _(
            "each rank holds {first} of 0.weight and {second} of "
            "2.weight; the output equals the unsharded model's on both ranks, with one all-reduce."
        ).format(first=layouts["0.weight"][2], second=layouts["2.weight"][2])
    )
