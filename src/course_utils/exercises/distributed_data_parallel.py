"""Checks for the exercises of notebook 06 (process groups, DistributedSampler, DDP).

Each check runs or inspects the reader's answer and says what is right or wrong, with a hint,
never the solution. The gradient check runs the reader's function in real gloo ranks, 3 then 2.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from course_utils.exercises import CheckResult, failed, integral_list, not_a_function, passed, unanswered
from course_utils.exercises.ranks import call_in_rank, run_ranks
from course_utils.exercises.sandbox import probe_verdict
from course_utils.i18n import _

# The gradient check runs the reader's function in 3 ranks, then again in 2 of them (one
# launch): a world size written into the function is right for one of the two at most.
_WORLD_SIZES = (3, 2)


def _join(round_number: int, world_size: int) -> bool:
    """Join round `round_number`'s default group of `world_size` ranks; False for a rank left out."""
    rank = int(os.environ["RANK"])
    if rank >= world_size:
        return False
    if round_number == 0:
        dist.init_process_group("gloo")
    else:  # a fresh default group on the launcher's store, under its own prefix
        store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timedelta(seconds=30),
        )
        dist.init_process_group(
            "gloo", store=dist.PrefixStore(f"round{round_number}", store), rank=rank, world_size=world_size
        )
    return True


def _gradient_worker(average_gradients: Callable[[nn.Module], Any]) -> list[dict[str, Any]]:
    """One rank: for each world size, a model with random per-rank gradients, averaged by the reader."""
    rounds = []
    for number, world_size in enumerate(_WORLD_SIZES):
        if not _join(number, world_size):
            break
        try:
            rank = dist.get_rank()
            torch.manual_seed(0)  # the same weights on every rank, as DDP would make them
            model = nn.Linear(3, 2)
            params = list(model.parameters())
            generator = torch.Generator().manual_seed(1000 * number + rank)
            for param in params:
                param.grad = torch.randn(param.shape, generator=generator)
            given = [param.grad.clone() for param in params]
            call_in_rank(average_gradients, model)
            replaced = [a is not b for a, b in zip(params, model.parameters(), strict=False)]
            grads = [p.grad.detach().clone() if isinstance(p.grad, torch.Tensor) else None for p in params]
            dist.barrier()  # no rank tears the group down while its peer may still be connecting to it
            rounds.append({"given": given, "grads": grads, "replaced": any(replaced)})
        finally:
            dist.destroy_process_group()
    return rounds


def _verdict(ranks: list[list[dict[str, Any]]]) -> CheckResult | None:
    """The hint for the first world size whose gradients are not the mean; None when all are."""
    for number, world_size in enumerate(_WORLD_SIZES):
        rounds = [r[number] for r in ranks[:world_size]]
        if any(r["replaced"] for r in rounds):
            return failed(
                _("your function replaced the model's parameters; change only their .grad, in place.")
            )
        if any(g is None for r in rounds for g in r["grads"]):
            return failed(_("after your function some parameters have no .grad tensor: keep every p.grad."))
        mean = [torch.stack(given).mean(0) for given in zip(*(r["given"] for r in rounds), strict=True)]
        grads = [r["grads"] for r in rounds]
        if any(g.shape != m.shape for rank in grads for g, m in zip(rank, mean, strict=True)):
            return failed(_("the gradients changed shape; change their values in place."))
        pairs = [pair for rank in grads for pair in zip(rank, mean, strict=True)]
        if all(torch.allclose(g, m, atol=1e-6) for g, m in pairs):
            continue
        if all(torch.allclose(g, m * world_size, atol=1e-5) for g, m in pairs):
            return failed(_("the ranks agree, but on the sum of the gradients. DDP averages: divide."))
        if any(not torch.equal(a, b) for rank in grads[1:] for a, b in zip(grads[0], rank, strict=True)):
            return failed(
                _(
                    "the ranks still disagree: each one kept its own gradient. A collective must combine "
                    "the ranks' p.grad tensors, in place."
                )
            )
        if number > 0:
            return failed(
                _(
                    "right with {first} ranks, not with {world_size}: does your function assume "
                    "a number of ranks? Ask the process group."
                ).format(first=_WORLD_SIZES[0], world_size=world_size)
            )
        return failed(
            _(
                "with {world_size} ranks they agree, but not on the mean of their gradients. Does your "
                "function assume a number of ranks? Ask the process group."
            ).format(world_size=world_size)
        )
    return None


def check_average_gradients(average_gradients: Callable[[nn.Module], Any] | None) -> CheckResult:
    """Check a function that makes every rank's gradients the mean over ranks, as DDP does.

    It runs the function in real gloo processes whose models hold different random gradients,
    in 3 ranks and then in 2 (one launch), so no world size can be written into the function.
    """
    if (verdict := not_a_function(average_gradients, "average_gradients(model)")) is not None:
        return verdict
    goal = _("make every rank's p.grad the mean of the ranks' gradients, in place")
    if (verdict := unanswered(average_gradients, "average_gradients(model)", goal)) is not None:
        return verdict
    if (verdict := probe_verdict(average_gradients, 1)) is not None:
        return verdict  # it ends its process or hangs before it uses the model: no rank started for it
    ranks = run_ranks(_gradient_worker, _WORLD_SIZES[0], (average_gradients,), timeout=20)
    if isinstance(ranks, CheckResult):
        return ranks
    verdict = _verdict(ranks)
    if verdict is not None:
        return verdict
    return passed(
        _(
            "every rank now holds the mean of the ranks' gradients, with 3 ranks and with 2, which is "
            "what DDP's all-reduce during backward() leaves in each .grad."
        )
    )


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
        return failed(_("write the list of indices you expect rank 2 to get, e.g. [5, 6]."))
    given = integral_list(answer)
    if given is None:
        return failed(_("give a list of whole numbers, the dataset indices in the order rank 2 sees them."))
    truth = _sampler_indices(10, 4, 2, drop_last)
    if given == truth:
        return passed(
            _("rank 2 of 4 gets {count} indices; every rank gets the same number.").format(count=len(truth))
        )
    if len(given) != len(truth):
        padding = _("drops the tail") if drop_last else _("pads the indices")
        return failed(
            _(
                "rank 2 gets {right} indices, not {given}: every rank gets the same number, "
                "and with drop_last={drop_last} the sampler {padding} to make that so."
            ).format(right=len(truth), given=len(given), drop_last=drop_last, padding=padding)
        )
    if sorted(given) == sorted(truth):
        return failed(_("the right indices in the wrong order: the ranks take turns, one index each."))
    return failed(
        _(
            "not those indices. Without shuffling the ranks take turns through the (padded) "
            "list of indices: rank r takes positions r, r + world size, ..."
        )
    )


def check_unprefixed_state_dict(
    state_dict: Mapping[str, Any] | None, model: nn.Module, wrapped: Mapping[str, Any] | None = None
) -> CheckResult:
    """Check a state_dict saved from a DDP model (`wrapped`, keys with `module.`), made loadable into `model`.

    The values must be `wrapped`'s, unchanged; without `wrapped` they are compared with `model`'s
    own (then pass the model the state was saved from). A fresh model's state_dict has the right
    names but other values, so it does not pass.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            _("model must be the plain nn.Module to load into, such as nn.Linear(4, 2), not a {type}").format(
                type=type(model).__name__
            )
        )
    if wrapped is not None and not isinstance(wrapped, Mapping):
        raise TypeError(
            _("wrapped must be the DDP model's state_dict (a mapping), or None, not a {type}").format(
                type=type(wrapped).__name__
            )
        )
    if state_dict is None or state_dict is Ellipsis:
        return failed(_("build the state_dict that the plain model can load and pass it."))
    if not isinstance(state_dict, Mapping):
        return failed(
            _("pass a state_dict (a mapping of names to tensors), not a {type}.").format(
                type=type(state_dict).__name__
            )
        )
    if not all(isinstance(key, str) for key in state_dict):
        return failed(_("a state_dict's keys are the parameters' names, as strings."))
    keys, wanted = set(state_dict), set(model.state_dict())
    if any(k.startswith("module.") for k in keys):
        return failed(_("some keys still start with 'module.', the name of the model inside DDP."))
    if keys != wanted:
        missing = ", ".join(sorted(wanted - keys)) or "-"
        unexpected = ", ".join(sorted(keys - wanted)) or "-"
        return failed(
            _("the keys do not match the model's: missing {missing}; unexpected {unexpected}.").format(
                missing=missing, unexpected=unexpected
            )
        )
    try:
        copy.deepcopy(model).load_state_dict(state_dict)  # a copy: the reader's model stays as it is
    except Exception as err:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        return failed(_("the names match but loading fails: {error}").format(error=lines[-1].strip()))
    if wrapped is not None:
        source = {name.removeprefix("module."): value for name, value in wrapped.items()}
    else:
        source = dict(model.state_dict())
    for name, value in state_dict.items():  # load_state_dict accepted them: tensors with values
        want = source.get(name)
        if isinstance(want, torch.Tensor) and not (
            value.shape == want.shape and torch.equal(value.detach().cpu(), want.detach().cpu())
        ):
            return failed(
                _(
                    "the names are right, but {name!r} does not hold the saved values: keep the tensors of "
                    "the DDP state_dict, rename only the keys."
                ).format(name=name)
            )
    return passed(_("the plain model loads it: every key matches without the 'module.' prefix, values kept."))
