"""Notebook 08's resume exercise: the check runs the reader's function in real ranks.

Right answers in two forms pass; wrong ones that would look right in a quick test (a hard-coded
epoch, a resume without the optimizer or the sampler's seed, a load without `map_location`) fail
with a hint that names what is missing.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from course_utils.exercises.ddp_in_practice import check_resume


def resume_right(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    ddp.module.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    sampler.seed = snapshot["sampler"]["seed"]
    sampler.set_epoch(snapshot["sampler"]["epoch"])
    return snapshot["epoch"]


def resume_right_too(ddp, optimizer, sampler, path):
    """The same with a torch.device, the prefixed keys of ddp itself and a NumPy integer returned."""
    snapshot = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
    ddp.load_state_dict({f"module.{name}": value for name, value in snapshot["model"].items()})
    optimizer.load_state_dict(snapshot["optimizer"])
    sampler.seed = snapshot["sampler"]["seed"]
    return np.int64(snapshot["epoch"])


def without_optimizer(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    ddp.module.load_state_dict(snapshot["model"])
    sampler.seed = snapshot["sampler"]["seed"]
    return snapshot["epoch"]


def without_seed(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    ddp.module.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    sampler.set_epoch(snapshot["sampler"]["epoch"])
    return snapshot["epoch"]


def hard_coded_epoch(ddp, optimizer, sampler, path):
    resume_right(ddp, optimizer, sampler, path)
    return 2  # right for the snapshot after 2 epochs only


def last_finished_epoch(ddp, optimizer, sampler, path):
    return resume_right(ddp, optimizer, sampler, path) - 1


def without_model(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    optimizer.load_state_dict(snapshot["optimizer"])
    sampler.seed = snapshot["sampler"]["seed"]
    return snapshot["epoch"]


def without_map_location(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, weights_only=True)  # restores to cuda:0, as the file says
    ddp.module.load_state_dict(snapshot["model"])
    return snapshot["epoch"]


def into_ddp_unprefixed(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    ddp.load_state_dict(snapshot["model"])
    return snapshot["epoch"]


def epoch_as_float(ddp, optimizer, sampler, path):
    return float(resume_right(ddp, optimizer, sampler, path))


def exits(ddp, optimizer, sampler, path):
    os._exit(3)


def exits_in_its_rank(ddp, optimizer, sampler, path):
    ddp.train()  # a use of ddp: the trial with probes passes, the rank runs it
    os._exit(3)


@pytest.mark.parametrize("answer", [resume_right, resume_right_too])
def test_right_answers_pass(answer):
    result = check_resume(answer)
    assert result.ok, str(result)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write `resume(ddp, optimizer, sampler, path)`"),
        (3, "pass the function itself"),
        (without_optimizer, "load its state too"),
        (without_seed, "give the sampler the seed"),
        (hard_coded_epoch, "after the snapshot of 1 epoch(s) you returned 2"),
        (last_finished_epoch, "return the next one"),
        (without_model, "load the model's state too"),
        (without_map_location, "map_location"),
        (into_ddp_unprefixed, "into `ddp.module`"),
        (epoch_as_float, "as a whole number"),
        (exits, "ended the process it ran in without returning"),
        (exits_in_its_rank, "must return the next epoch, not end the process"),
    ],
)
def test_wrong_answers_fail_with_a_hint(answer, hint):
    result = check_resume(answer)
    assert not result.ok and str(result).startswith("Not yet: ") and hint in str(result), str(result)
