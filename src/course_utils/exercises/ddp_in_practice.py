"""Checks for the exercises of notebook 08 (DDP in practice: effective batch, learning rate, no_sync).

Each check says what is right or wrong, with a hint, never the solution. The accumulation check
runs the reader's function in two real gloo ranks and counts DDP's all-reduces with a hook.
(No `from __future__ import annotations` here: DDP checks a comm hook's annotations as objects.)
"""

import importlib
import math
import numbers
import os
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from course_utils.checkpoints import save_with_location
from course_utils.exercises import (
    CheckResult,
    failed,
    integral_value,
    not_a_function,
    passed,
    real_value,
    unanswered,
    whole_number_hint,
)
from course_utils.exercises.ranks import call_in_rank, exited_without_result, run_ranks
from course_utils.exercises.sandbox import probe_verdict
from course_utils.i18n import _
from course_utils.processes import LaunchError, LaunchTimeoutError, WorkerError, launch

# Exercise 1: 3 machines x 8 GPUs, 16 samples per GPU, 4 accumulation steps.
_MACHINES, _GPUS_PER_MACHINE, _PER_GPU, _ACCUMULATION = 3, 8, 16, 4
_EFFECTIVE = _MACHINES * _GPUS_PER_MACHINE * _PER_GPU * _ACCUMULATION
# Exercise 2: the reference recipe (Goyal et al. 2017): 0.1 for a batch of 256.
_BASE_LR, _BASE_BATCH = 0.1, 256
# Exercise 3: ranks, micro-batches per rank (two rounds: no count can be written into the
# function), samples per micro-batch.
_WORLD_SIZE, _MICRO_BATCHES, _MICRO_SIZE = 2, (4, 3), 3


def check_effective_batch(answer: Any) -> CheckResult:
    """Check the effective batch of 3 machines x 8 GPUs, 16 per GPU, 4 accumulation steps."""
    if answer is None or answer is Ellipsis:
        return failed(_("write the effective batch as a whole number of samples."))
    value = integral_value(answer)
    if value is None:
        return failed(whole_number_hint(answer, _("a number of samples")))
    if value == _EFFECTIVE:
        return passed(
            _(
                "every optimizer step uses the gradient of per-GPU batch x world size x accumulation "
                "steps samples."
            )
        )
    world = _MACHINES * _GPUS_PER_MACHINE
    if value == _PER_GPU * world:
        return failed(
            _("you counted every GPU, but each optimizer step also accumulates several micro-batches.")
        )
    if value == _PER_GPU * _ACCUMULATION * _GPUS_PER_MACHINE:
        return failed(_("that is one machine's share: the world size counts the GPUs of every machine."))
    if value in (_PER_GPU * _ACCUMULATION, _PER_GPU):
        return failed(_("that is what one GPU sees; DDP averages the gradients of every rank."))
    return failed(_("multiply what one GPU sees per optimizer step by the number of ranks in the job."))


def check_scaled_lr(answer: Any) -> CheckResult:
    """Check the learning rate the linear-scaling rule gives for exercise 1's effective batch."""
    if answer is None or answer is Ellipsis:
        return failed(_("write the learning rate as a number."))
    value = real_value(answer)
    if value is None:
        return failed(_("give a number, not a {kind}.").format(kind=type(answer).__name__))
    k = _EFFECTIVE / _BASE_BATCH
    if math.isclose(value, _BASE_LR * k, rel_tol=1e-6):
        return passed(
            _(
                "the batch is {k:g} times the reference's, so is the learning rate; start it with a "
                "warm-up, and check that the rule holds for your model."
            ).format(k=k)
        )
    if math.isclose(value, _BASE_LR, rel_tol=1e-6):
        return failed(_("that is the reference's learning rate: the rule scales it with the batch."))
    if math.isclose(value, _BASE_LR * math.sqrt(k), rel_tol=1e-3):
        return failed(
            _("that is square-root scaling, another heuristic; the linear rule scales by the ratio itself.")
        )
    if math.isclose(value, _BASE_LR / k, rel_tol=1e-6):
        return failed(
            _("a larger batch gets a larger learning rate under the linear rule, not a smaller one.")
        )
    return failed(
        _("divide the effective batch by the reference batch, and scale the learning rate by that.")
    )


def _accumulation_round(step: Callable[[DDP, list], Any], micro_batches: int) -> dict[str, Any]:
    """One round in one rank: the reader's step on `micro_batches` micro-batches, all-reduces counted."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    params = list(model.parameters())
    ddp = DDP(model)
    calls: list[int] = []

    def counting(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        calls.append(bucket.index())
        return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]

    ddp.register_comm_hook(state=None, hook=counting)
    batches: list[int] = []  # the samples each forward of the model received
    model.register_forward_pre_hook(lambda module, args: batches.append(len(args[0])))
    # "F" at each forward, "B" when backward reaches that forward's output: F B F B ... keeps one
    # micro-batch's activations at a time; F F ... B B holds them all, as one joined batch does.
    order: list[str] = []

    def mark_forward(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        order.append("F")
        if output.requires_grad:
            output.register_hook(lambda grad: order.append("B"))

    model.register_forward_hook(mark_forward)
    initial = [p.detach().clone() for p in params]
    generator = torch.Generator().manual_seed(micro_batches)
    size = world * micro_batches * _MICRO_SIZE
    x, y = torch.randn(size, 3, generator=generator), torch.randn(size, 1, generator=generator)
    mine = list(
        zip(
            x.chunk(world)[rank].chunk(micro_batches),
            y.chunk(world)[rank].chunk(micro_batches),
            strict=True,
        )
    )
    call_in_rank(step, ddp, mine)
    replaced = any(a is not b for a, b in zip(params, model.parameters(), strict=False))
    grads = [p.grad.detach().clone() if isinstance(p.grad, torch.Tensor) else None for p in params]
    stepped = any(not torch.equal(p.detach(), before) for p, before in zip(params, initial, strict=True))
    reference = nn.Linear(3, 1)
    with torch.no_grad():
        for ref, before in zip(reference.parameters(), initial, strict=True):
            ref.copy_(before)
    F.mse_loss(reference(x), y).backward()
    return {
        "calls": len(calls),
        "batches": batches,
        "order": "".join(order),
        "grads": grads,
        "reference": [p.grad.clone() for p in reference.parameters()],
        "replaced": replaced,
        "stepped": stepped,
    }


def _accumulation_worker(step: Callable[[DDP, list], Any]) -> list[dict[str, Any]]:
    """One rank: a round per micro-batch count of `_MICRO_BATCHES`."""
    dist.init_process_group("gloo")
    try:
        rounds = [_accumulation_round(step, count) for count in _MICRO_BATCHES]
        dist.barrier()  # every rank done before any tears down
        return rounds
    finally:
        dist.destroy_process_group()


def _round_verdict(ranks: list[dict[str, Any]], micro_batches: int) -> CheckResult | None:
    """The hint for one round's results on every rank; None when it is right."""
    first = ranks[0]
    if any(r["replaced"] for r in ranks):
        return failed(_("your function replaced the model's parameters: only run forward and backward."))
    if any(r["stepped"] for r in ranks):
        return failed(_("the weights changed: accumulate the gradients only, do not call the optimizer."))
    if any(g is None for r in ranks for g in r["grads"]):
        return failed(_("some parameters have no gradient: run backward() on every micro-batch's loss."))
    others = (pair for r in ranks[1:] for pair in zip(first["grads"], r["grads"], strict=True))
    if any(not torch.allclose(a, b) for a, b in others):
        return failed(
            _(
                "the ranks hold different gradients: the last backward() must run outside no_sync(), "
                "so that DDP all-reduces what was accumulated."
            )
        )
    pairs = list(zip(first["grads"], first["reference"], strict=True))
    if not all(torch.allclose(g, ref, atol=1e-6) for g, ref in pairs):
        if all(torch.allclose(g, ref * micro_batches, atol=1e-5) for g, ref in pairs):
            return failed(
                _(
                    "with {micro_batches} micro-batches the gradients are {micro_batches} times too large: "
                    "each micro-batch's loss is a mean over its own samples; divide it by the number of "
                    "micro-batches."
                ).format(micro_batches=micro_batches)
            )
        return failed(
            _(
                "with {micro_batches} micro-batches the gradients differ from those of the whole batch: "
                "backward() once per micro-batch, each loss scaled by how many micro-batches there are."
            ).format(micro_batches=micro_batches)
        )
    if len(first["batches"]) < micro_batches or max(first["batches"], default=0) > _MICRO_SIZE:
        return failed(
            _(
                "right gradients, but {forwards} forward pass(es) for {micro_batches} micro-batches, the "
                "largest on {largest} samples: the micro-batches were joined into one batch, whose "
                "activations are all in memory at once, which accumulation is there to avoid. Run forward "
                "and backward on one micro-batch at a time."
            ).format(
                forwards=len(first["batches"]),
                micro_batches=micro_batches,
                largest=max(first["batches"], default=0),
            )
        )
    if "FF" in first["order"]:
        return failed(
            _(
                "right gradients, but the forward passes ran in the order {order} (F a forward, B its "
                "backward): a forward before the previous micro-batch's backward keeps both "
                "micro-batches' activations in memory, which accumulation is there to avoid. Run "
                "backward() on each micro-batch's loss before the next forward."
            ).format(order=" ".join(first["order"]))
        )
    if first["calls"] != 1:
        return failed(
            _(
                "right gradients, but DDP all-reduced {calls} times for {micro_batches} micro-batches: "
                "skip the all-reduce of every micro-batch but the last with ddp.no_sync(), and let DDP "
                "all-reduce the last one."
            ).format(calls=first["calls"], micro_batches=micro_batches)
        )
    return None


def check_accumulation_step(step: Callable[[DDP, list], Any] | None) -> CheckResult:
    """Check `step(ddp, micro_batches)`: the whole batch's gradients with one all-reduce.

    It runs the function in two real processes (gloo), once with 4 micro-batches per rank and
    once with 3, and counts DDP's all-reduces with a comm hook.
    """
    if (verdict := not_a_function(step, "accumulation_step(ddp, micro_batches)")) is not None:
        return verdict
    goal = _("run forward and backward on each micro-batch, with a single all-reduce in all")
    if (verdict := unanswered(step, "accumulation_step(ddp, micro_batches)", goal)) is not None:
        return verdict
    if (verdict := probe_verdict(step, 2)) is not None:
        return verdict  # it ends its process or hangs before it uses its arguments: no rank started for it
    # DDP's constructor imports torch._dynamo (some 800 modules, seconds): imported here once, the
    # forked ranks inherit it instead of each importing it again, at every check.
    importlib.import_module("torch._dynamo")
    ranks = run_ranks(
        _accumulation_worker,
        _WORLD_SIZE,
        (step,),
        timeout=30,
        hang_hint=_("Every rank must run the same number of backward passes."),
    )
    if isinstance(ranks, CheckResult):
        return ranks
    for number, micro_batches in enumerate(_MICRO_BATCHES):
        verdict = _round_verdict([r[number] for r in ranks], micro_batches)
        if verdict is not None:
            return verdict
    return passed(
        _(
            "the whole batch's gradients on both ranks, with a single all-reduce, "
            "for 4 and for 3 micro-batches."
        )
    )


# Exercise 4: resume from a snapshot. The uninterrupted run trains _RESUME_EPOCHS epochs; the check
# resumes from the snapshot written after each of _RESUME_FROM epochs.
_RESUME_EPOCHS, _RESUME_FROM = 3, (1, 2)


def _resume_data() -> TensorDataset:
    """48 samples of a smooth function of 4 inputs, the same in every rank."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(48, 4, generator=generator)
    return TensorDataset(x, x.sum(1, keepdim=True).sin())


def _resume_setup(init_seed: int, sampler_seed: int) -> tuple[DDP, torch.optim.Optimizer, DistributedSampler]:
    """A fresh model (initialised from `init_seed`) wrapped in DDP, SGD with momentum, a sampler."""
    torch.manual_seed(init_seed)
    ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    return ddp, optimizer, DistributedSampler(_resume_data(), shuffle=True, seed=sampler_seed)


def _resume_epochs(
    ddp: DDP, optimizer: torch.optim.Optimizer, sampler: DistributedSampler, epochs: range
) -> None:
    """Train `epochs`, setting the sampler's epoch first, as notebook 08's script does."""
    loader = DataLoader(_resume_data(), batch_size=8, sampler=sampler)
    for epoch in epochs:
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(ddp(x), y).backward()
            optimizer.step()


def _resume_worker(resume: Callable[..., Any], folder: str, seed: int) -> list[dict[str, Any]]:
    """One rank: an uninterrupted run with snapshots, then the reader's resume from each of them."""
    # No GPU in the ranks, also on a GPU machine: a load without map_location must fail here.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        ddp, optimizer, sampler = _resume_setup(0, seed)
        for epoch in range(_RESUME_EPOCHS):
            _resume_epochs(ddp, optimizer, sampler, range(epoch, epoch + 1))
            if rank == 0 and epoch + 1 in _RESUME_FROM:
                snapshot = {
                    "model": ddp.module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "epoch": epoch + 1,
                    "sampler": {"seed": seed, "epoch": epoch + 1},
                }
                save_with_location(
                    snapshot, Path(folder, f"after{epoch + 1}.pt"), "cuda:0"
                )  # as GPU 0 writes it
            dist.barrier()
        reference = {name: value.clone() for name, value in ddp.module.state_dict().items()}
        results = []
        for stop in _RESUME_FROM:
            fresh, fresh_optimizer, fresh_sampler = _resume_setup(1, 0)  # other weights, the default seed
            error, start = "", None
            try:
                start = resume(fresh, fresh_optimizer, fresh_sampler, str(Path(folder, f"after{stop}.pt")))
            except Exception as err:
                error = f"{type(err).__name__}: {err}"
            loaded_state, loaded_seed = bool(fresh_optimizer.state_dict()["state"]), fresh_sampler.seed
            usable = not error and isinstance(start, numbers.Integral) and not isinstance(start, bool)
            usable = usable and 0 <= int(start) <= _RESUME_EPOCHS
            everyone = torch.tensor([1.0 if usable else 0.0])
            dist.all_reduce(everyone, op=dist.ReduceOp.MIN)  # train on only if every rank can
            row: dict[str, Any] = {"stop": stop, "error": error, "start": repr(start), "equal": False}
            if everyone.item() == 1.0:
                _resume_epochs(fresh, fresh_optimizer, fresh_sampler, range(int(start), _RESUME_EPOCHS))
                after = fresh.module.state_dict()
                row.update(
                    start=int(start),
                    equal=all(torch.equal(after[name], value) for name, value in reference.items()),
                    sampler_seed=loaded_seed,
                    optimizer_state=loaded_state,
                )
            results.append(row)
            del fresh
        dist.barrier()
        del ddp
        return results
    finally:
        dist.destroy_process_group()


def _resume_verdict(row: dict[str, Any], seed: int) -> CheckResult | None:
    """The hint for one resumed run that went wrong, or None when it ended with the right weights."""
    error, stop = row["error"], row["stop"]
    if "CUDA" in error:
        return failed(
            _(
                "torch.load put the tensors back on cuda:0, the device the snapshot records (rank 0 saved "
                "it on GPU 0): load with map_location set to this rank's device, here the CPU."
            )
        )
    if "module." in error:
        return failed(
            _(
                "the snapshot holds the plain model's state dict, without DDP's `module.` prefix: load it "
                "into `ddp.module`."
            )
        )
    if error:
        return failed(_("your function raised {error}").format(error=error.splitlines()[0]))
    if not isinstance(row["start"], int):
        return failed(
            _("return the next epoch to run, as a whole number, not {start}.").format(start=row["start"])
        )
    if row["start"] == stop - 1:
        return failed(
            _("that is the last epoch the snapshot finished: return the next one, which it stores.")
        )
    if row["start"] != stop:
        return failed(
            _("after the snapshot of {stop} epoch(s) you returned {start}: return its 'epoch'.").format(
                stop=stop, start=row["start"]
            )
        )
    if row["equal"]:
        return None
    if not row["optimizer_state"]:
        return failed(
            _("the optimizer starts from scratch: load its state too, or momentum begins again at zero.")
        )
    if row["sampler_seed"] != seed:
        return failed(
            _(
                "the data come in another order than in the run that was interrupted: give the sampler the "
                "seed the snapshot stores (set_epoch alone only chooses the epoch)."
            )
        )
    return failed(_("the run did not end with the uninterrupted run's weights: load the model's state too."))


def check_resume(resume: Callable[..., Any] | None) -> CheckResult:
    """Check `resume(ddp, optimizer, sampler, path)`: restore a snapshot, return the next epoch.

    It runs in two real gloo ranks: an uninterrupted run of 3 epochs writes snapshots after epochs
    1 and 2; a fresh model, optimizer and sampler go through the reader's function and train on.
    Both must end with the uninterrupted weights, bit for bit. The sampler's seed changes each time.
    """
    if (verdict := not_a_function(resume, "resume(ddp, optimizer, sampler, path)")) is not None:
        return verdict
    goal = _("load the snapshot at path into ddp, optimizer and sampler, and return the next epoch")
    if (verdict := unanswered(resume, "resume(ddp, optimizer, sampler, path)", goal)) is not None:
        return verdict
    if (verdict := probe_verdict(resume, 4)) is not None:
        return verdict  # it ends its process or hangs before it uses its arguments: no rank started for it
    seed = random.randrange(1, 1_000_000)
    with tempfile.TemporaryDirectory(prefix="course-resume-") as folder:
        try:
            ranks = launch(_resume_worker, _WORLD_SIZE, args=(resume, folder, seed), timeout=60)
        except LaunchTimeoutError:
            return failed(_("the ranks never finished: every rank must load the snapshot the same way."))
        except WorkerError as err:
            return failed(
                _(
                    "rank {rank} stopped ({why}) while resuming: your function "
                    "must return the next epoch, not end the process."
                ).format(rank=err.rank, why=err.exc_type or _("it died"))
            )
        except LaunchError as err:
            return failed(_("the ranks could not be started: {error}").format(error=err))
    if (verdict := exited_without_result(ranks)) is not None:
        return verdict
    for row in ranks[0]:
        if (verdict := _resume_verdict(row, seed)) is not None:
            return verdict
    return passed(
        _(
            "both resumed runs end bit for bit with the uninterrupted run's weights: model, optimizer, "
            "sampler seed and epoch restored."
        )
    )
