"""The checks of notebook 06's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import pytest
import torch.distributed as dist
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises.distributed_data_parallel import (
    check_average_gradients,
    check_sampler_indices,
    check_unprefixed_state_dict,
)


def averages(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def sums(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)


def does_nothing(model: nn.Module) -> None:
    pass


def only_rank0_reduces(model: nn.Module) -> None:
    if dist.get_rank() == 0:
        sums(model)


def raises(model: nn.Module) -> None:
    raise KeyError("grad")


def test_average_gradients_right():
    result = check_average_gradients(averages)
    assert result.ok and str(result).startswith("Correct: ")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write `average_gradients(model)`"),
        (..., "write `average_gradients(model)`"),
        (42, "pass the function itself"),
        (sums, "the sum"),
        (does_nothing, "still disagree"),
        (raises, ": KeyError: 'grad'"),
    ],
)
def test_average_gradients_wrong(answer, hint):
    result = check_average_gradients(answer)
    assert not result.ok and hint in str(result) and str(result).startswith("Not yet: ")


def test_average_gradients_hanging_collective(monkeypatch):
    import course_utils.exercises.distributed_data_parallel as ex

    real_launch = ex.launch
    monkeypatch.setattr(ex, "launch", lambda *a, **k: real_launch(*a, **{**k, "timeout": 2}))
    result = check_average_gradients(only_rank0_reduces)
    # Rank 1 returns and leaves: rank 0 either sees its peer gone or waits until the timeout.
    assert not result.ok and "Every rank must make the same collective calls" in str(result)


def test_sampler_indices():
    assert check_sampler_indices([2, 6, 0]).ok
    assert check_sampler_indices([2, 6], drop_last=True).ok
    assert "[5, 6]" in str(check_sampler_indices(None)) and "[5, 6]" in str(check_sampler_indices(...))
    assert "the same number" in str(check_sampler_indices([2, 6]))
    assert "wrong order" in str(check_sampler_indices([0, 2, 6]))
    assert "not those indices" in str(check_sampler_indices([2, 3, 4]))
    assert "whole numbers" in str(check_sampler_indices("abc"))


def test_unprefixed_state_dict():
    model = nn.Linear(3, 2)
    wrapped = {f"module.{k}": v for k, v in model.state_dict().items()}
    assert "build the state_dict" in str(check_unprefixed_state_dict(..., model))
    assert "'module.'" in str(check_unprefixed_state_dict(wrapped, model))
    assert "missing bias" in str(check_unprefixed_state_dict({"weight": model.weight}, model))
    assert "loading fails" in str(
        check_unprefixed_state_dict({"weight": model.weight, "bias": model.weight}, model)
    )
    fixed = dict(wrapped)
    consume_prefix_in_state_dict_if_present(fixed, "module.")
    assert check_unprefixed_state_dict(fixed, model).ok


@pytest.mark.parametrize(
    "gloo_says",
    [
        "[pair.cc:538] Read error [127.0.0.1]:1454: Connection reset by peer",
        "[pair.cc:534] Connection closed by peer [127.0.0.1]:39535",
        "Application timeout caused pair closure: remote worker exited",
    ],
)
def test_a_peer_that_left_the_collective_is_explained(monkeypatch, gloo_says):
    import course_utils.exercises.distributed_data_parallel as ex
    from course_utils.processes import WorkerError

    def peer_left(*args, **kwargs):
        raise WorkerError(0, 2, "RuntimeError", gloo_says)

    monkeypatch.setattr(ex, "launch", peer_left)
    result = check_average_gradients(averages)
    assert not result.ok and "lost its peer inside a collective" in str(result)
