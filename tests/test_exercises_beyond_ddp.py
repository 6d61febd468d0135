"""The checks of notebook 10's exercises accept right answers, explain wrong ones, and agree with PyTorch."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist
from exercise_answers import NOT_COUNTS, AlwaysEqual, assert_refused
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from course_utils.exercises.beyond_ddp import (
    BYTES_WORLD_SIZE,
    SHAPE_GLOBAL,
    SHAPE_RANK,
    SHAPE_WORLD_SIZE,
    check_embedding_placements,
    check_local_shape,
    check_rank_bytes,
    exercise_model,
    expected_local_shape,
)
from course_utils.processes import launch


@pytest.fixture(autouse=True, scope="module")
def _dynamo_imported_before_forking() -> None:
    """fully_shard and DTensor import torch._dynamo (a second): imported once here, before the ranks are
    forked, they share it; and a pytest worker that never runs this module never imports it."""
    importlib.import_module("torch._dynamo")


PARAMS = (256 * 512 + 512 + 512 * 256 + 256) * 4  # bytes of one float32 copy of exercise_model()
DDP = 4 * PARAMS
FSDP = DDP // BYTES_WORLD_SIZE


def test_right_bytes_pass():
    result = check_rank_bytes(DDP, FSDP)
    assert result.ok and str(result).startswith("Correct:")
    assert check_rank_bytes(np.int64(DDP), torch.tensor(FSDP)).ok


@pytest.mark.parametrize(
    ("ddp", "fsdp", "hint"),
    [
        (..., FSDP, "replace the `...`"),
        (DDP, None, "replace the `...`"),
        ("16", FSDP, "whole number"),
        (DDP + 0.5, FSDP, "whole number"),
        (True, FSDP, "whole number"),
        (float(DDP), float(FSDP), "not a float"),  # the course's rule: whole numbers are integers
        (DDP, FSDP + 0.9, "not a float"),  # right only after truncation
        (AlwaysEqual(), FSDP, "whole number"),
        (np.array([DDP, DDP]), FSDP, "whole number"),
        (torch.tensor(DDP, device="meta"), FSDP, "whole number"),
        (float("inf"), FSDP, "whole number"),
        (DDP, float("nan"), "whole number"),
        (PARAMS // 4, FSDP, "count of numbers"),
        (2 * PARAMS, FSDP, "parameters and gradients"),
        (3 * PARAMS, FSDP, "one copy short"),
        (PARAMS, FSDP, "one float32 copy of the parameters"),  # also DDP's bytes divided by 4 ranks
        (DDP + 4, FSDP, "is off"),
        (DDP, DDP, "equals DDP's"),
        (DDP, FSDP // 4, "count of numbers"),
        (DDP, DDP // 2, "splits parameters, gradients"),
    ],
)
def test_wrong_bytes_get_a_hint(ddp, fsdp, hint):
    result = check_rank_bytes(ddp, fsdp)
    assert not result.ok and str(result).startswith("Not yet:")
    assert hint in result.message
    assert str(DDP) not in result.message and f"{DDP:,}" not in result.message


def _bytes_of(tensor: torch.Tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def _fsdp_rank_bytes() -> int:
    """One rank: the exercise model under FSDP, one Adam step, its bytes counted from real tensors."""
    dist.init_process_group("gloo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        model = exercise_model().to_empty(device="cpu")
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        optimizer = torch.optim.Adam(model.parameters())
        model(torch.ones(2, 256)).sum().backward()
        optimizer.step()
        total = sum(_bytes_of(p) + _bytes_of(p.grad) for p in model.parameters())
        total += sum(_bytes_of(s[k]) for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq"))
    dist.barrier()
    del model, optimizer
    dist.destroy_process_group()
    return total


def test_the_accepted_fsdp_bytes_are_what_fsdp_holds():
    held = launch(_fsdp_rank_bytes, BYTES_WORLD_SIZE, timeout=120)
    assert held == [FSDP] * BYTES_WORLD_SIZE
    assert check_rank_bytes(DDP, held[0]).ok


@pytest.mark.parametrize(
    ("colwise", "rowwise"),
    [(Shard(1), Shard(0)), (Shard(-1), Shard(0)), (Shard(1), Shard(-2)), (Shard(np.int64(1)), Shard(0))],
)
def test_right_placements_pass(colwise, rowwise):
    assert check_embedding_placements(colwise, rowwise).ok


@pytest.mark.parametrize(
    ("colwise", "rowwise", "hint"),
    [
        (..., Shard(0), "replace the `...`"),
        (Shard(1), None, "replace the `...`"),
        ("Shard(1)", Shard(0), "should be a placement"),
        (Replicate(), Shard(0), "splits the weight itself"),
        (Shard(1), Partial(), "splits the weight itself"),
        (Shard(0), Shard(1), "nn.Linear's placements"),
        (Shard(0), Shard(0), "colwise_weight"),
        (Shard(1), Shard(1), "rowwise_weight"),
        (Shard(-2), Shard(-1), "nn.Linear's placements"),
        (Shard(2), Shard(0), "dim 0 or 1"),
        (Shard(1), Shard(-3), "dim 0 or 1"),
        (AlwaysEqual(), Shard(0), "should be a placement"),
        (Shard(1), np.array([0]), "should be a placement"),
    ],
)
def test_wrong_placements_get_a_hint(colwise, rowwise, hint):
    result = check_embedding_placements(colwise, rowwise)
    assert not result.ok
    assert hint in result.message


def _tp_embedding_placements() -> tuple:
    """One rank: two embeddings, one under Colwise and one under Rowwise; their weights' placements."""
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = nn.ModuleDict({"col": nn.Embedding(10, 4), "row": nn.Embedding(10, 4)})
    parallelize_module(model, mesh, {"col": ColwiseParallel(), "row": RowwiseParallel()})
    placements = (model["col"].weight.placements[0], model["row"].weight.placements[0])
    dist.barrier()
    del model
    dist.destroy_process_group()
    return placements


def test_the_accepted_placements_are_what_parallelize_module_gives():
    placements = launch(_tp_embedding_placements, 2, timeout=60)[0]
    assert check_embedding_placements(*placements).ok


def test_right_local_shape_passes():
    assert check_local_shape((1, 6)).ok
    assert check_local_shape(np.array([1, 6])).ok and check_local_shape((np.int64(1), torch.tensor(6))).ok
    assert check_local_shape([1, 6]).ok
    assert check_local_shape(torch.Size([1, 6])).ok


@pytest.mark.parametrize(
    ("shape", "hint"),
    [
        (..., "replace the `...`"),
        (7, "tuple of whole numbers"),
        (("a", 6), "tuple of whole numbers"),
        ((1.0, 6.0), "tuple of whole numbers"),
        ((1.7, 6.2), "tuple of whole numbers"),  # right only after truncation
        (("1", "6"), "tuple of whole numbers"),
        ((AlwaysEqual(), AlwaysEqual()), "tuple of whole numbers"),
        (torch.ones(2, device="meta"), "tuple of whole numbers"),
        ((1,), "as many dimensions"),
        ((1, 3), "dim 1 keeps its size"),
        ((3, 6), "not split into equal parts"),
        ((2, 6), "not split into equal parts"),
        ((4, 6), "torch.chunk"),
    ],
)
def test_wrong_local_shape_gets_a_hint(shape, hint):
    result = check_local_shape(shape)
    assert not result.ok
    assert hint in result.message


def _local_shapes(shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """One rank: the local shape of each tensor distributed with Shard(0)."""
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    tensors = [distribute_tensor(torch.zeros(shape), mesh, [Shard(0)]) for shape in shapes]
    local = [tuple(t.to_local().shape) for t in tensors]
    dist.barrier()
    dist.destroy_process_group()
    return local


def test_expected_local_shape_is_what_dtensor_gives():
    shapes = [SHAPE_GLOBAL, (2, 3), (5, 2)]  # the exercise, then fewer rows than ranks, then uneven
    by_rank = launch(_local_shapes, SHAPE_WORLD_SIZE, args=(shapes,), timeout=60)
    for rank, local in enumerate(by_rank):
        assert local == [expected_local_shape(shape, SHAPE_WORLD_SIZE, rank) for shape in shapes]
    assert check_local_shape(by_rank[SHAPE_RANK][0]).ok


def test_expected_local_shape_handles_empty_ranks_and_bad_input():
    assert expected_local_shape((2, 3), 4, 3) == (0, 3)  # torch.chunk gives only 2 pieces
    assert expected_local_shape((4, 6), 2, 1, dim=1) == (4, 3)
    with pytest.raises(
        ValueError, match=r"rank must be a whole number from 0 to 1 \(world_size - 1\), not 2"
    ):
        expected_local_shape((4,), 2, 2)


def test_feedback_in_chinese(monkeypatch):
    """A Chinese notebook (COURSE_LANGUAGE=zh-CN) gets the hints and verdicts in Chinese, values filled in."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    wrong = str(check_rank_bytes(PARAMS, FSDP))
    assert wrong.startswith("未通过：`ddp_bytes` 是参数的一份 float32 副本的大小。"), wrong
    right = str(check_rank_bytes(DDP, FSDP))
    assert right.startswith(f"正确：DDP 在每个 rank 上保留 {DDP:,} 字节"), right
    assert f"FSDP 保留每一份的 1/{BYTES_WORLD_SIZE}，即 {FSDP:,} 字节" in right
    assert str(check_local_shape((2, 6))).startswith("未通过：第 0 维并没有被分成相等的几份")
    assert str(check_embedding_placements(Shard(1), Shard(0))).startswith("正确：embedding 的权重是")
    assert str(check_local_shape("x")) == "未通过：把形状写成由整数（int）组成的元组，而不是 'x'。"


@pytest.mark.parametrize(
    ("arguments", "argument", "allowed"),
    [
        (("10, 6", 4, 3), "shape", "a tuple of sizes (whole numbers, 0 or more) such as (10, 6)"),
        ((None, 4, 3), "shape", "a tuple of sizes"),
        (((10, -6), 4, 3), "shape", "0 or more"),
        (((10.0, 6), 4, 3), "shape", "whole numbers"),
        (((10, 6), 4, 4), "rank", "from 0 to 3 (world_size - 1), not 4"),
        (((10, 6), 4, -1), "rank", "from 0 to 3"),
        (((10, 6), 4, "3"), "rank", "a whole number"),
        (((10, 6), 4, 10**400), "rank", "a whole number"),
        (((10, 6), 4, 3, 2), "dim", "from -2 to 1, not 2"),
        (((10, 6), 4, 3, 1.0), "dim", "a whole number"),
        (((10, 6), 4, 3, -(10**400)), "dim", "a whole number"),
    ],
)
def test_expected_local_shape_refuses_what_no_tensor_or_mesh_has(arguments, argument, allowed):
    assert_refused(lambda: expected_local_shape(*arguments), argument, allowed)


@pytest.mark.parametrize("world_size", NOT_COUNTS)
def test_expected_local_shape_refuses_a_world_size_that_is_no_count(world_size):
    assert_refused(lambda: expected_local_shape((10, 6), world_size, 0), "world_size")


def test_expected_local_shape_splits_huge_sizes_as_torch_chunk_would():
    assert expected_local_shape((2**70, 3), 2**40, 2**40 - 1) == (2**30, 3)
