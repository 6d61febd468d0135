"""Checks for the exercises of notebook 06 (process groups, DistributedSampler, DDP).

Each check runs or inspects the reader's answer and says what is right or wrong, with a hint,
never the solution. The gradient check runs the reader's function in two real gloo ranks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from course_utils.exercises import CheckResult, failed, not_a_function, passed
from course_utils.processes import LaunchError, LaunchTimeoutError, WorkerError, launch

_WORLD_SIZE = 2
_SAME = "Every rank must make the same collective calls, in the same order."
# How gloo reports, in the waiting rank, that its peer left a collective (wording varies by
# version and by timing: the connection is closed, or reset, while reading or writing).
_PEER_GONE = ("remote worker", "Connection closed", "Connection reset", "Read error", "Broken pipe")


def _gradient_worker(average_gradients: Callable[[nn.Module], Any]) -> dict[str, torch.Tensor]:
    """One rank: a model with rank-dependent gradients, averaged by the reader's function."""
    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        torch.manual_seed(0)  # the same weights on every rank, as DDP would make them
        model = nn.Linear(3, 2)
        for number, param in enumerate(model.parameters()):
            param.grad = torch.full_like(param, float((rank + 1) * (number + 1)))
        average_gradients(model)
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
        dist.barrier()  # no rank tears the group down while its peer may still be connecting to it
        return grads
    finally:
        dist.destroy_process_group()


def check_average_gradients(average_gradients: Callable[[nn.Module], Any] | None) -> CheckResult:
    """Check a function that makes every rank's gradients the mean over ranks, as DDP does.

    It runs the function in two real processes (gloo) whose models hold different gradients.
    """
    if (verdict := not_a_function(average_gradients, "average_gradients(model)")) is not None:
        return verdict
    try:
        grads = launch(_gradient_worker, _WORLD_SIZE, args=(average_gradients,), timeout=20)
    except LaunchTimeoutError:
        return failed(f"the ranks never finished: a collective waited for a rank that skipped it. {_SAME}")
    except WorkerError as err:
        if any(words in err.message for words in _PEER_GONE):
            return failed(
                f"rank {err.rank} lost its peer inside a collective: the other rank never called it "
                f"and left. {_SAME}"
            )
        return failed(f"your function raised on rank {err.rank}: {err.exc_type}: {err.message}")
    except LaunchError as err:
        return failed(f"the ranks could not be started: {err}")
    expected = {
        name: torch.full_like(grads[0][name], (1 + 2) / _WORLD_SIZE * (number + 1))
        for number, name in enumerate(grads[0])
    }
    summed = {name: value * _WORLD_SIZE for name, value in expected.items()}
    if any(g[name].shape != value.shape for g in grads for name, value in expected.items()):
        return failed("the gradients changed shape; change their values in place.")
    if all(torch.allclose(g[name], value) for g in grads for name, value in expected.items()):
        return passed(
            "every rank now holds the mean of the two ranks' gradients, which is what DDP's "
            "all-reduce during backward() leaves in each .grad."
        )
    if all(torch.allclose(g[name], value) for g in grads for name, value in summed.items()):
        return failed("the ranks agree, but on the sum of the gradients. DDP averages: divide.")
    if any(not torch.equal(grads[0][name], grads[1][name]) for name in expected):
        return failed(
            "the ranks still disagree: each one kept its own gradient. A collective must combine "
            "the ranks' p.grad tensors, in place."
        )
    return failed("the ranks agree, but not on the mean of their gradients.")


def _sampler_indices(size: int, num_replicas: int, rank: int, drop_last: bool) -> list[int]:
    """The indices DistributedSampler gives `rank`, without shuffling."""
    from torch.utils.data.distributed import DistributedSampler

    sampler = DistributedSampler(
        range(size), num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=drop_last
    )
    return list(sampler)


def check_sampler_indices(answer: Any, drop_last: bool = False) -> CheckResult:
    """Check the reader's prediction of the indices rank 2 of 4 gets from 10 samples, unshuffled.

    The question is about `DistributedSampler(range(10), num_replicas=4, rank=2, shuffle=False,
    drop_last=drop_last)`; work it out by hand, then confirm by running the sampler.
    """
    if answer is None or answer is Ellipsis:
        return failed("write the list of indices you expect rank 2 to get, e.g. [5, 6].")
    try:
        given = [int(i) for i in answer]
    except (TypeError, ValueError):
        return failed("give a list of whole numbers, the dataset indices in the order rank 2 sees them.")
    truth = _sampler_indices(10, 4, 2, drop_last)
    if given == truth:
        return passed(f"rank 2 of 4 gets {len(truth)} indices; every rank gets the same number.")
    if len(given) != len(truth):
        padding = "drops the tail" if drop_last else "pads the indices"
        return failed(
            f"rank 2 gets {len(truth)} indices, not {len(given)}: every rank gets the same number, "
            f"and with drop_last={drop_last} the sampler {padding} to make that so."
        )
    if sorted(given) == sorted(truth):
        return failed("the right indices in the wrong order: the ranks take turns, one index each.")
    return failed(
        "not those indices. Without shuffling the ranks take turns through the (padded) "
        "list of indices: rank r takes positions r, r + world size, ..."
    )


def check_unprefixed_state_dict(state_dict: Mapping[str, Any] | None, model: nn.Module) -> CheckResult:
    """Check a state_dict saved from a DDP model, made loadable into the plain `model`."""
    if state_dict is None or state_dict is Ellipsis:
        return failed("build the state_dict that the plain model can load and pass it.")
    if not isinstance(state_dict, Mapping):
        return failed(
            f"pass a state_dict (a mapping of names to tensors), not a {type(state_dict).__name__}."
        )
    keys, wanted = set(state_dict), set(model.state_dict())
    if any(k.startswith("module.") for k in keys):
        return failed("some keys still start with 'module.', the name of the model inside DDP.")
    if keys != wanted:
        missing = ", ".join(sorted(wanted - keys)) or "-"
        unexpected = ", ".join(sorted(keys - wanted)) or "-"
        return failed(f"the keys do not match the model's: missing {missing}; unexpected {unexpected}.")
    try:
        copy.deepcopy(model).load_state_dict(state_dict)  # a copy: the reader's model stays as it is
    except RuntimeError as err:
        return failed(f"the names match but loading fails: {str(err).splitlines()[-1].strip()}")
    return passed("the plain model loads it: every key matches without the 'module.' prefix.")
