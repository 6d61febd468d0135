"""Notebook 16's checks: meshes that fit pass, tempting ones get a hint, the truths come from the planner."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from exercise_answers import assert_not_yet, odd_answers

from course_utils import planner
from course_utils.exercises.plan_a_real_run import (
    GPUS,
    RESERVE,
    TEMPTING,
    check_mesh_fits,
    check_state_bytes,
    exercise_plan,
    state_bytes,
)

N = planner.LLAMA_3_1_70B.parameter_count()


def test_the_exercises_job_is_the_one_the_notebook_describes():
    p = exercise_plan(planner.Mesh(dp_shard=GPUS))
    assert (p.model, p.hardware, p.seq_len, p.micro_batch, p.micro_batches) == (
        planner.LLAMA_3_1_70B,
        planner.H100_SXM,
        8192,
        1,
        8,
    )
    assert (p.policy, p.checkpointing, RESERVE) == (planner.BF16_MIXED, "full", 8 * 10**9)


def test_the_tempting_mesh_holds_16_bytes_per_parameter_over_8_gpus_and_does_not_fit():
    assert state_bytes() == 16 * N // 8 == 141_107_412_992
    assert not planner.fits(exercise_plan(TEMPTING), reserve=RESERVE)
    assert not planner.fits(exercise_plan(TEMPTING))  # not even without the reserve


@pytest.mark.parametrize(
    "mesh",
    [
        planner.Mesh(dp_shard=32),
        planner.Mesh(dp_shard=4, tp=8),
        planner.Mesh(dp_shard=8, tp=4),
        planner.Mesh(pp=4, dp_shard=8),
        planner.Mesh(dp_shard=16, cp=2),
        planner.Mesh(pp=2, dp_shard=4, tp=4),
    ],
    ids=lambda m: m.shape(),
)
def test_every_mesh_that_fits_passes(mesh):
    assert planner.fits(exercise_plan(mesh), reserve=RESERVE)
    verdict = check_mesh_fits(mesh)
    assert verdict and str(verdict).startswith("Correct: "), str(verdict)


def test_a_mesh_subclass_is_judged_by_its_sizes_not_its_properties():
    @dataclasses.dataclass(frozen=True)
    class Lying(planner.Mesh):
        @property
        def world_size(self) -> int:
            return GPUS

    assert_not_yet(check_mesh_fits(Lying(dp_shard=16)), "16 GPUs")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (TEMPTING, "training state dominates"),  # HSDP within a node: 141 GB of state
        (planner.Mesh(dp_replicate=32), "training state dominates"),  # DDP
        (planner.Mesh(dp_replicate=2, dp_shard=16), "more than the 80 GB"),  # 105.6 GB
        (planner.Mesh(dp_replicate=2, dp_shard=2, tp=8), "with the reserve"),  # 75.3 GB: fits without it
        (planner.Mesh(dp_shard=16), "16 GPUs"),  # fits, but on half the job's GPUs
        (planner.Mesh(dp_shard=64), "64 GPUs"),
        (planner.Mesh(dp_shard=2, tp=16), "refuses"),  # tp=16 does not divide the 8 key/value heads
        (planner.Mesh(pp=32), "refuses"),  # 32 stages do not divide 80 layers
        ("Mesh(dp_shard=32)", "planner.Mesh"),
        ({"dp_shard": 32}, "planner.Mesh"),
        (32, "planner.Mesh"),
        (..., "replace"),
    ],
)
def test_meshes_that_do_not_fit_or_are_no_mesh_get_a_hint(answer, hint):
    assert_not_yet(check_mesh_fits(answer), hint)


def test_state_check_accepts_the_bytes_as_any_integer():
    for answer in (state_bytes(), np.int64(state_bytes()), torch.tensor(state_bytes())):
        assert check_state_bytes(answer), answer


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (16 * N // 32, "dp_replicate copies"),  # sharded over all 32 GPUs
        (16 * N, "shards it over"),  # not sharded at all
        (2 * N // 8, "4 + 4 + 4 + 4"),  # bf16 parameters only
        (6 * N // 8, "4 + 4 + 4 + 4"),  # bf16 parameter and fp32 gradient
        (12 * N // 8, "two moments"),  # one AdamW moment forgotten
        (8 * N // 8, "two moments"),  # parameters and gradients only
        (18 * N // 8, "master"),  # a bf16 copy beside the fp32 state
        (20 * N // 8, "master"),
        (141.1, "GB"),  # the right size, in GB
        (float(16 * N // 8), "int"),  # prints like the answer, is a float
        (str(16 * N // 8), "int"),
        (16 * N // 8 + 1, ""),
        (..., "replace"),
    ],
)
def test_state_check_rejects_wrong_counts(answer, hint):
    assert_not_yet(check_state_bytes(answer), hint)


@pytest.mark.parametrize("odd", odd_answers())
def test_odd_answers_get_a_hint(odd):
    assert_not_yet(check_mesh_fits(odd))
    assert_not_yet(check_state_bytes(odd))


def test_the_messages_themselves_are_in_chinese_in_the_chinese_edition(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    for verdict in (
        check_mesh_fits(planner.Mesh(dp_shard=32)),
        check_mesh_fits(TEMPTING),
        check_state_bytes(state_bytes()),
        check_state_bytes(16 * N // 32),
    ):
        assert any("\u4e00" <= ch <= "\u9fff" for ch in verdict.message), verdict.message


def test_every_memory_term_of_the_planner_has_a_name_in_the_messages():
    from course_utils.exercises.plan_a_real_run import TERMS

    assert list(TERMS) == [f.name for f in dataclasses.fields(planner.Memory)]
