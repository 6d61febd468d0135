"""Checks for the exercises of notebook 08 (DDP in practice: effective batch, learning rate, no_sync).

Each check says what is right or wrong, with a hint, never the solution. The accumulation check
runs the reader's function in two real gloo ranks and counts DDP's all-reduces with a hook.
(No `from __future__ import annotations` here: DDP checks a comm hook's annotations as objects.)
"""

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.exercises import CheckResult, failed, not_a_function, passed
from course_utils.processes import LaunchError, LaunchTimeoutError, WorkerError, launch

# Exercise 1: 3 machines x 8 GPUs, 16 samples per GPU, 4 accumulation steps.
_MACHINES, _GPUS_PER_MACHINE, _PER_GPU, _ACCUMULATION = 3, 8, 16, 4
_EFFECTIVE = _MACHINES * _GPUS_PER_MACHINE * _PER_GPU * _ACCUMULATION
# Exercise 2: the reference recipe (Goyal et al. 2017): 0.1 for a batch of 256.
_BASE_LR, _BASE_BATCH = 0.1, 256
# Exercise 3: micro-batches per rank, samples per micro-batch.
_WORLD_SIZE, _MICRO_BATCHES, _MICRO_SIZE = 2, 4, 3


def _number(answer: Any) -> float | None:
    """The answer as a float, or None when it is not a single real number."""
    if isinstance(answer, bool) or not isinstance(answer, int | float):
        return None
    return float(answer)


def check_effective_batch(answer: Any) -> CheckResult:
    """Check the effective batch of 3 machines x 8 GPUs, 16 per GPU, 4 accumulation steps."""
    if answer is None or answer is Ellipsis:
        return failed("write the effective batch as a whole number of samples.")
    value = _number(answer)
    if value is None:
        return failed(f"give a number of samples, not a {type(answer).__name__}.")
    if value == _EFFECTIVE:
        return passed(
            "every optimizer step uses the gradient of per-GPU batch x world size x accumulation "
            "steps samples."
        )
    world = _MACHINES * _GPUS_PER_MACHINE
    if value == _PER_GPU * world:
        return failed(
            "you counted every GPU, but each optimizer step also accumulates several micro-batches."
        )
    if value == _PER_GPU * _ACCUMULATION * _GPUS_PER_MACHINE:
        return failed("that is one machine's share: the world size counts the GPUs of every machine.")
    if value in (_PER_GPU * _ACCUMULATION, _PER_GPU):
        return failed("that is what one GPU sees; DDP averages the gradients of every rank.")
    return failed("multiply what one GPU sees per optimizer step by the number of ranks in the job.")


def check_scaled_lr(answer: Any) -> CheckResult:
    """Check the learning rate the linear-scaling rule gives for exercise 1's effective batch."""
    if answer is None or answer is Ellipsis:
        return failed("write the learning rate as a number.")
    value = _number(answer)
    if value is None:
        return failed(f"give a number, not a {type(answer).__name__}.")
    k = _EFFECTIVE / _BASE_BATCH
    if math.isclose(value, _BASE_LR * k, rel_tol=1e-6):
        return passed(
            f"the batch is {k:g} times the reference's, so is the learning rate; start it with a "
            "warm-up, and check that the rule holds for your model."
        )
    if math.isclose(value, _BASE_LR, rel_tol=1e-6):
        return failed("that is the reference's learning rate: the rule scales it with the batch.")
    if math.isclose(value, _BASE_LR * math.sqrt(k), rel_tol=1e-3):
        return failed(
            "that is square-root scaling, another heuristic; the linear rule scales by the ratio itself."
        )
    if math.isclose(value, _BASE_LR / k, rel_tol=1e-6):
        return failed("a larger batch gets a larger learning rate under the linear rule, not a smaller one.")
    return failed("divide the effective batch by the reference batch, and scale the learning rate by that.")


def _accumulation_worker(step: Callable[[DDP, list], Any]) -> dict[str, Any]:
    """One rank: the reader's step on its micro-batches, its gradients and the all-reduces counted."""
    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        ddp = DDP(model)
        calls: list[int] = []

        def counting(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            calls.append(bucket.index())
            return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]

        ddp.register_comm_hook(state=None, hook=counting)
        initial = {name: value.clone() for name, value in model.state_dict().items()}
        torch.manual_seed(1)
        size = world * _MICRO_BATCHES * _MICRO_SIZE
        x, y = torch.randn(size, 3), torch.randn(size, 1)
        mine = list(
            zip(
                x.chunk(world)[rank].chunk(_MICRO_BATCHES),
                y.chunk(world)[rank].chunk(_MICRO_BATCHES),
                strict=True,
            )
        )
        error = ""
        try:
            step(ddp, mine)
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
        grads = [p.grad.detach().clone() if p.grad is not None else None for p in model.parameters()]
        after = model.state_dict()
        weights_changed = any(not torch.equal(after[name], value) for name, value in initial.items())
        reference = nn.Linear(3, 1)
        reference.load_state_dict(initial)
        F.mse_loss(reference(x), y).backward()
        dist.barrier()  # every rank done before any tears down (also when one raised)
        del ddp
        return {
            "calls": len(calls),
            "grads": grads,
            "reference": [p.grad.clone() for p in reference.parameters()],
            "error": error,
            "stepped": weights_changed,
        }
    finally:
        dist.destroy_process_group()


def check_accumulation_step(step: Callable[[DDP, list], Any] | None) -> CheckResult:
    """Check `step(ddp, micro_batches)`: the whole batch's gradients with one all-reduce.

    It runs the function in two real processes (gloo) and counts the all-reduces with a comm hook.
    """
    if (verdict := not_a_function(step, "accumulation_step(ddp, micro_batches)")) is not None:
        return verdict
    try:
        ranks = launch(_accumulation_worker, _WORLD_SIZE, args=(step,), timeout=30)
    except LaunchTimeoutError:
        return failed("the ranks never finished: every rank must run the same number of backward passes.")
    except WorkerError as err:
        return failed(f"rank {err.rank} failed: {err.exc_type or 'died'}: {err.message.splitlines()[0]}")
    except LaunchError as err:
        return failed(f"the ranks could not be started: {err}")
    first = ranks[0]
    if first["error"]:
        return failed(f"your function raised: {first['error']}")
    if first["stepped"]:
        return failed("the weights changed: accumulate the gradients only, do not call the optimizer.")
    if any(g is None for r in ranks for g in r["grads"]):
        return failed("some parameters have no gradient: run backward() on every micro-batch's loss.")
    if any(not torch.allclose(a, b) for a, b in zip(ranks[0]["grads"], ranks[1]["grads"], strict=True)):
        return failed(
            "the ranks hold different gradients: the last backward() must run outside no_sync(), "
            "so that DDP all-reduces what was accumulated."
        )
    close = all(
        torch.allclose(g, ref, atol=1e-6) for g, ref in zip(first["grads"], first["reference"], strict=True)
    )
    scaled = all(
        torch.allclose(g, ref * _MICRO_BATCHES, atol=1e-5)
        for g, ref in zip(first["grads"], first["reference"], strict=True)
    )
    if not close and scaled:
        return failed(
            f"the gradients are {_MICRO_BATCHES} times too large: each micro-batch's loss is a mean "
            "over its own samples; divide it by the number of micro-batches."
        )
    if not close:
        return failed("the gradients differ from those of the whole batch: backward() once per micro-batch.")
    if first["calls"] > 1:
        return failed(
            f"right gradients, but DDP all-reduced {first['calls']} times: skip the all-reduce of every "
            "micro-batch but the last with ddp.no_sync()."
        )
    return passed("the whole batch's gradients on both ranks, with a single all-reduce.")
