"""Notebook 13's exercise checks: right answers pass, wrong ones get a hint, the truths match real runs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from course_utils.exercises.fsdp_and_tp_in_practice import (
    MICRO_BATCHES,
    accumulation_collectives,
    check_accumulation_collectives,
    check_two_d_bytes,
    two_d_bytes,
)
from course_utils.processes import launch


def mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))


def _accumulate(micro_batches: int) -> dict[str, int]:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = mlp()
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    warnings.filterwarnings("ignore")
    found: dict[str, int] = {}
    for number in range(micro_batches):
        model.set_requires_gradient_sync(number == micro_batches - 1)
        with CommDebugMode() as comms:  # one per micro-batch, as in the notebook
            F.mse_loss(model(torch.ones(2, 64)), torch.zeros(2, 64)).backward()
        for op, n in comms.get_comm_counts().items():
            found[str(op).split(".")[-1]] = found.get(str(op).split(".")[-1], 0) + n
    dist.barrier()
    dist.destroy_process_group()
    return found


def _two_d_bytes() -> int:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(mlp(), mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    held = sum(p.to_local().numel() * p.to_local().element_size() for p in model.parameters())
    dist.barrier()
    dist.destroy_process_group()
    return held


def test_the_expected_counts_are_what_fsdp_runs():
    found = launch(_accumulate, 2, args=(MICRO_BATCHES,))[0]
    gathers, scatters = accumulation_collectives()
    assert found == {"_allgather_base_": gathers, "_reduce_scatter_base_": scatters}


def test_the_expected_bytes_are_what_a_2x2_mesh_holds():
    assert set(launch(_two_d_bytes, 4)) == {two_d_bytes((2, 2))}


@pytest.mark.parametrize("mesh", [(0, 2), (2, 0), (2,), ("2", 2), (True, 2), None])
def test_the_bytes_of_a_mesh_that_cannot_exist_are_refused(mesh):
    with pytest.raises(ValueError, match=r"mesh is \(dp, tp\), two whole numbers of at least 1"):
        two_d_bytes(mesh)


def test_right_answers_pass():
    gathers, scatters = accumulation_collectives()
    assert check_accumulation_collectives(gathers, scatters).ok
    assert check_accumulation_collectives(np.int64(gathers), np.int32(scatters)).ok
    assert check_two_d_bytes(two_d_bytes()).ok
    assert check_two_d_bytes(np.int64(two_d_bytes())).ok
    # one rule in every check: a whole number is an integer (int, NumPy, 0-d tensor), never a float
    assert "not a float" in str(check_accumulation_collectives(float(gathers), np.float64(scatters)))
    assert "not a float" in str(check_two_d_bytes(float(two_d_bytes())))


@pytest.mark.parametrize(
    ("gathers", "scatters", "hint"),
    [
        (..., 2, "replace the `...`"),
        (16, None, "replace the `...`"),
        (16.5, 2, "whole number"),
        (float("nan"), 2, "whole number"),
        ("16", 2, "whole number"),
        (True, 2, "whole number"),
        (16, 8, "for every micro-batch"),
        (16, 3, "`reduce_scatters` is off"),
        (4, 2, "counts one micro-batch"),
        (8, 2, "forward passes only"),
        (12, 2, "`all_gathers` is off"),
    ],
)
def test_wrong_counts_get_a_hint(gathers, scatters, hint):
    result = check_accumulation_collectives(gathers, scatters)
    assert not result.ok and hint in str(result), result


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (..., "replace the `...`"),
        (two_d_bytes() + 0.5, "whole number"),
        (132_352 // 8, "does RowwiseParallel split"),
        (two_d_bytes() // 4, "count of numbers"),
        (132_352 // 2, "one mesh dimension only"),
        (132_352 // 4, "one mesh dimension only"),
        (two_d_bytes() + 4, "not this"),
    ],
)
def test_wrong_bytes_get_a_hint(answer, hint):
    result = check_two_d_bytes(answer)
    assert not result.ok and hint in str(result), result


def test_a_chinese_notebook_gets_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    gathers, scatters = accumulation_collectives()
    missing = check_accumulation_collectives(..., scatters)
    assert str(missing) == "未通过：把 `all_gathers` 的 `...` 换成集合通信的次数。"
    wrong = check_accumulation_collectives(gathers // 2, scatters)
    assert str(wrong).startswith("未通过：`all_gathers` 只数了前向传播"), str(wrong)
    right = check_accumulation_collectives(gathers, scatters)
    assert str(right).startswith(f"正确：{gathers} 次 all-gather（2 层 x 前向和反向 x 4 个微批量）")
    assert str(check_two_d_bytes(two_d_bytes() // 4)).startswith("未通过：这看起来是数值的个数")
    assert str(check_two_d_bytes(two_d_bytes())).startswith(f"正确：{two_d_bytes():,} 字节：每个权重")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"micro_batches": 0}, ValueError, "micro_batches must be at least 1, not 0"),
        ({"layers": -2}, ValueError, "layers must be at least 1, not -2"),
        ({"micro_batches": "4"}, TypeError, "micro_batches must be a whole number such as 2, not '4'"),
        ({"layers": True}, TypeError, "layers must be a whole number"),
        (
            {"layers": 10**400},
            ValueError,
            "layers must be at most 9223372036854775807, not an int of about 401",
        ),
        ({"micro_batches": float("nan")}, TypeError, "micro_batches must be a whole number"),
    ],
)
def test_the_collective_count_refuses_counts_that_cannot_be(kwargs, error, match):
    with pytest.raises(error, match=match):
        accumulation_collectives(**kwargs)
