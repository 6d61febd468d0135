"""Checks for the exercises of notebook 12 (memory lines, checkpointing, float16 with a GradScaler).

Each check says what is right or wrong, with a hint, never the solution. The checkpointing check
runs the reader's function on a small model and counts the recomputed forwards, the saved bytes
and the gradients; the mixed-precision check runs the reader's step in two real gloo ranks, on a
normal batch, on one whose float16 gradients overflow, and on a normal one again.
(No `from __future__ import annotations` here: DDP checks a comm hook's annotations as objects.)
"""

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.amp import GradScaler
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

from course_utils.exercises import CheckResult, failed, not_a_function, passed, unanswered
from course_utils.exercises.sandbox import Probe, Touched, probe_verdict, trial_verdict
from course_utils.i18n import N_, _, translated
from course_utils.memory import LINES, saved_activation_bytes
from course_utils.processes import LaunchError, LaunchTimeoutError, WorkerError, launch

# Exercise 1: which memory lines each technique shrinks on one rank.
MEMORY_ANSWERS: dict[str, frozenset[str]] = {
    "autocast bf16": frozenset({"activations"}),
    "activation checkpointing": frozenset({"activations"}),
    "ZeroRedundancyOptimizer": frozenset({"optimizer state"}),
    "fp16_compress_hook": frozenset(),
}
_MEMORY_HINTS = {  # kept in English (N_), shown in the notebook's language
    "autocast bf16": N_("autocast casts copies for its operations; what does the optimizer update?"),
    "activation checkpointing": N_(
        "checkpointing changes what the forward keeps for backward, nothing else."
    ),
    "ZeroRedundancyOptimizer": N_("ZeRO stage 1 shards one thing; DDP holds whole parameters and gradients."),
    "fp16_compress_hook": N_(
        "the hook compresses what is sent, during the all-reduce; what stays in memory?"
    ),
}
# Exercise 2: blocks of the checked model, width and batch.
_BLOCKS, _WIDTH, _BATCH = 3, 8, 16
# Exercise 3: ranks, and the scale that makes the second batch's float16 gradients overflow.
_WORLD_SIZE, _SCALE = 2, 2.0**16
_HUGE = 1e4  # inputs of the overflowing batch


def _line_set(value: Any, technique: str) -> tuple[frozenset[str] | None, str]:
    """The reader's answer for one technique as a set of line names, or None and a hint."""
    if value is None or value is Ellipsis:
        return None, _(
            "replace the `...` of {technique} with a set of line names, e.g. {{'gradients'}}."
        ).format(technique=repr(technique))
    if isinstance(value, str):
        value = {value}
    if not isinstance(value, Iterable) or isinstance(value, dict | bytes) or hasattr(value, "shape"):
        return (
            None,
            _("the answer for {technique} should be a set of line names, not a {kind}.").format(
                technique=repr(technique), kind=type(value).__name__
            ),
        )
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        return None, _("the answer for {technique} should hold line names (strings) from LINES.").format(
            technique=repr(technique)
        )
    cleaned = frozenset(n.strip().lower() for n in names)
    unknown = sorted(cleaned - set(LINES))
    if unknown:
        return None, _("{name} is not a line of the table; the lines are {lines}.").format(
            name=repr(unknown[0]), lines=", ".join(LINES)
        )
    return cleaned, ""


def check_memory_lines(shrinks: Any) -> CheckResult:
    """Check which lines (parameters, gradients, optimizer state, activations) each technique shrinks."""
    if shrinks is None or shrinks is Ellipsis:
        return failed(_("give a dict from each technique to the set of lines it shrinks."))
    if not isinstance(shrinks, dict):
        return failed(
            _("give a dict from technique to a set of lines, not a {kind}.").format(
                kind=type(shrinks).__name__
            )
        )
    missing = [t for t in MEMORY_ANSWERS if t not in shrinks]
    if missing:
        return failed(
            _("the dict has no entry for {technique}; keep the four keys of the exercise.").format(
                technique=repr(missing[0])
            )
        )
    for technique, truth in MEMORY_ANSWERS.items():
        answer, problem = _line_set(shrinks[technique], technique)
        if answer is None:
            return failed(problem)
        if answer != truth:
            return failed(
                _("not {technique} yet: {hint}").format(
                    technique=repr(technique), hint=translated(_MEMORY_HINTS[technique])
                )
            )
    return passed(
        _(
            "autocast and checkpointing shrink the activations, ZeRO-1 the optimizer state, and the "
            "compress hook no line at all: it saves bytes on the wire, not in memory."
        )
    )


def _exercise_blocks() -> nn.ModuleList:
    """The seeded blocks the checkpointing check runs the reader's function on."""
    torch.manual_seed(0)
    return nn.ModuleList(
        nn.Sequential(nn.Linear(_WIDTH, 4 * _WIDTH), nn.GELU(), nn.Linear(4 * _WIDTH, _WIDTH))
        for _ in range(_BLOCKS)
    )


def _raised(err: BaseException) -> str:
    """An exception as `Type: first line`, for a hint."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _run_forward(
    forward: Callable[..., Any], blocks: nn.ModuleList, x: torch.Tensor
) -> tuple[Any, int, int, str]:
    """Run forward(blocks, x) and backward; its output, forward starts per block, saved bytes, error."""
    calls: list[nn.Module] = []
    handles = [b.register_forward_pre_hook(lambda m, args: calls.append(m)) for b in blocks]
    try:
        with warnings.catch_warnings():  # the reader's checkpoint calls may warn; the verdict says why
            warnings.simplefilter("ignore")
            out, saved = saved_activation_bytes(lambda: forward(blocks, x), list(blocks.parameters()))
        if not isinstance(out, torch.Tensor):
            return out, 0, saved, ""
        if out.device.type != x.device.type or out.shape != (x.shape[0], _WIDTH):
            return out, 0, saved, ""
        if out.requires_grad:
            out.sum().backward()
        return out, len(calls), saved, ""
    except SystemExit:
        return None, 0, 0, _("it called sys.exit()")
    except Exception as err:
        return None, 0, 0, _("it raised {error}").format(error=_raised(err))
    finally:
        for handle in handles:
            handle.remove()


def check_checkpointed_forward(forward: Callable[[nn.ModuleList, torch.Tensor], Any]) -> CheckResult:
    """Check `forward(blocks, x)`: every block in turn, each under activation checkpointing.

    Runs it on seeded blocks and compares output, gradients, saved bytes and the number of
    forward calls with plain and checkpointed references. The forward and its backward are tried
    first (`sandbox.trial_verdict`): an exit or a hang there costs a hint, not the kernel.
    """
    if (verdict := not_a_function(forward, "checkpointed_forward(blocks, x)")) is not None:
        return verdict
    goal = _("run the blocks in turn on x, each under activation checkpointing, and return the last output")
    if (verdict := unanswered(forward, "checkpointed_forward(blocks, x)", goal)) is not None:
        return verdict
    torch.manual_seed(1)
    x = torch.randn(_BATCH, _WIDTH)

    reference_blocks = _exercise_blocks()
    plain_out, plain_calls, plain_saved = _run_forward(_plain_forward, reference_blocks, x)[:3]
    blocks = _exercise_blocks()
    if (verdict := trial_verdict(lambda: _run_forward(forward, blocks, x))) is not None:
        return verdict  # it ended its process or hung, in the forward or in the backward
    out, calls, saved, error = _run_forward(forward, blocks, x)
    if error:
        return failed(_("{problem}; run each block on the output of the one before.").format(problem=error))
    if x.requires_grad:
        return failed(
            _(
                "your function made the caller's x require a gradient (x.requires_grad_()), which changes "
                "a tensor it does not own: that is what use_reentrant=True needs. Use "
                "use_reentrant=False, which works when the input needs no gradient."
            )
        )
    if out is None:
        return failed(_("the function returned None: return the last block's output."))
    if not isinstance(out, torch.Tensor):
        return failed(
            _("the function returned a {kind}; return the tensor the last block gives.").format(
                kind=type(out).__name__
            )
        )
    if out.device.type == "meta":
        return failed(
            _("the output is on the meta device, which holds no values: run the blocks on x itself.")
        )
    if out.shape != plain_out.shape:
        return failed(
            _("the output has shape {shape}, not {expected}: run every block once, in order.").format(
                shape=tuple(out.shape), expected=tuple(plain_out.shape)
            )
        )
    if not torch.allclose(out.detach(), plain_out.detach(), atol=1e-6):
        return failed(
            _(
                "the output differs from running the blocks in turn: "
                "each block takes the previous block's output."
            )
        )
    grads = [p.grad for p in blocks.parameters()]
    without = [i for i, b in enumerate(blocks) if any(p.grad is None for p in b.parameters())]
    if without and len(without) < len(blocks):
        return failed(
            _(
                "{missing} of the {blocks} blocks got no gradient while the later ones did: the graph "
                "was cut between blocks (x.detach(), x.data, or a block under torch.no_grad()). Pass each "
                "block's output on as it is."
            ).format(missing=len(without), blocks=len(blocks))
        )
    if any(g is None for g in grads):
        return failed(
            _(
                "some parameters got no gradient. With use_reentrant=True and an input that needs no "
                "gradient that happens; use use_reentrant=False, and do not run the forward under no_grad."
            )
        )
    if any(
        not torch.allclose(g, r.grad, atol=1e-6)
        for g, r in zip(grads, reference_blocks.parameters(), strict=True)
    ):
        return failed(_("the gradients differ from the plain forward's: checkpointing must not change them."))
    if calls <= plain_calls:
        return failed(
            _(
                "right output and gradients, but no block's forward ran again in backward: nothing was "
                "checkpointed. Wrap each block's call in torch.utils.checkpoint.checkpoint."
            )
        )
    if calls < 2 * plain_calls:
        return failed(
            _("{recomputed} of the {blocks} blocks were recomputed: checkpoint every block.").format(
                recomputed=calls - plain_calls, blocks=_BLOCKS
            )
        )
    if saved >= plain_saved:
        return failed(_("the blocks ran again, yet the forward saved as much as without checkpointing."))
    each_saved = _run_forward(_checkpointed_forward, _exercise_blocks(), x)[2]
    if saved < each_saved:
        return failed(
            _(
                "the forward saved {saved:,} bytes, less than checkpointing each block does ({each:,}): "
                "the blocks were checkpointed together, as one. Checkpoint each block on its own."
            ).format(saved=saved, each=each_saved)
        )
    return passed(
        _(
            "each of the {blocks} blocks ran its forward again in backward; the forward saved "
            "{saved:,} bytes instead of {plain:,}, with the same gradients."
        ).format(blocks=_BLOCKS, saved=saved, plain=plain_saved)
    )


def _plain_forward(blocks: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    """The reference: every block in turn, nothing checkpointed."""
    for block in blocks:
        x = block(x)
    return x


def _checkpointed_forward(blocks: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    """The reference: every block in turn, each under non-reentrant checkpointing."""
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def _reference_step(
    ddp: DDP, optimizer: torch.optim.Optimizer, scaler: GradScaler, x: torch.Tensor, y: torch.Tensor
) -> None:
    """The float16 mixed-precision step the reader's function is compared with."""
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.mse_loss(ddp(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def _counting_allreduce(state: list[int], bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's own all-reduce, noting each bucket in `state`: how the check sees that DDP synchronised."""
    state.append(bucket.index())
    return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]


def _amp_worker(step: Callable[..., Any]) -> dict[str, Any]:
    """One rank: the reader's step and the reference step, on a normal, an overflowing, a normal batch."""
    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        torch.manual_seed(1)
        x, y = torch.randn(2 * _WORLD_SIZE, 8), torch.randn(2 * _WORLD_SIZE, 4)
        mine = x.chunk(_WORLD_SIZE)[rank], y.chunk(_WORLD_SIZE)[rank]
        # A normal batch after the skipped step shows whether each step starts from zeroed gradients.
        batches = {"normal": mine, "overflowing": (mine[0] * _HUGE, mine[1]), "normal again": mine}
        result: dict[str, Any] = {"error": ""}
        for who, fn in (("reader", step), ("reference", _reference_step)):
            torch.manual_seed(0)
            model = nn.Linear(8, 4)
            ddp = DDP(model)
            dtypes: list[torch.dtype] = []
            model.register_forward_hook(lambda m, args, out, dtypes=dtypes: dtypes.append(out.dtype))
            allreduces: list[int] = []  # the buckets DDP all-reduced
            in_autocast: list[bool] = []  # whether each backward ran under autocast
            ddp.register_comm_hook(state=allreduces, hook=_counting_allreduce)
            model.weight.register_hook(
                lambda g, in_autocast=in_autocast: in_autocast.append(torch.is_autocast_enabled("cpu"))
            )
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = GradScaler("cpu", init_scale=_SCALE)
            seen = {}
            for name, (bx, by) in batches.items():
                allreduces.clear()
                in_autocast.clear()
                try:
                    fn(ddp, optimizer, scaler, bx, by)
                except SystemExit:
                    result["error"] = _("your function called sys.exit().")
                except Exception as err:
                    result["error"] = _("your function raised {error}.").format(
                        error=_raised(err).rstrip(".")
                    )
                seen[name] = {
                    "weights": [p.detach().clone() for p in model.parameters()],
                    "scale": scaler.get_scale() if scaler.is_enabled() else None,
                    "allreduces": len(allreduces),
                    "backward under autocast": any(in_autocast),
                }
                if result["error"]:
                    break
            seen["dtypes"] = sorted({str(d) for d in dtypes})
            result[who] = seen
            del ddp, optimizer  # DDP goes before the process group, as in notebook 06
            if result["error"]:
                break
        dist.barrier()  # every rank done before any tears down (also when one raised)
        return result
    finally:
        dist.destroy_process_group()


def check_amp_step(
    step: Callable[[DDP, torch.optim.Optimizer, GradScaler, torch.Tensor, torch.Tensor], Any],
) -> CheckResult:
    """Check `step(ddp, optimizer, scaler, x, y)`: one float16 autocast step with a GradScaler.

    Runs it in two real gloo ranks on a normal batch, then on a batch whose scaled float16
    gradients overflow, then on the normal batch again, and compares weights and scale with the
    reference step.
    """
    if (verdict := not_a_function(step, "amp_step(ddp, optimizer, scaler, x, y)")) is not None:
        return verdict
    goal = _("one float16 training step of ddp on (x, y), with autocast and the scaler")
    if (verdict := unanswered(step, "amp_step(ddp, optimizer, scaler, x, y)", goal)) is not None:
        return verdict
    if (verdict := _untouched(step)) is not None:
        return verdict
    try:
        ranks = launch(_amp_worker, _WORLD_SIZE, args=(step,), timeout=60)
    except LaunchTimeoutError:
        return failed(_("the ranks never finished: every rank must run the same forward and backward."))
    except WorkerError as err:
        return failed(
            _("rank {rank} failed: {error}: {message}").format(
                rank=err.rank, error=err.exc_type or _("died"), message=err.message.splitlines()[0]
            )
        )
    except LaunchError as err:
        return failed(_("the ranks could not be started: {error}").format(error=err))
    if any(r is None for r in ranks):
        return failed(_("a rank ended before returning (sys.exit or os._exit?): the step must just return."))
    first = next((r for r in ranks if r["error"]), ranks[0])
    if first["error"]:
        return failed(first["error"])
    reader, reference = ranks[0]["reader"], ranks[0]["reference"]
    if "torch.float16" not in reader["dtypes"]:
        return failed(
            _(
                "the model ran in float32: run the forward pass under "
                "torch.autocast('cpu', dtype=torch.float16)."
            )
        )
    if any(reader[name]["backward under autocast"] for name in ("normal", "overflowing", "normal again")):
        return failed(
            _(
                "the backward ran inside the autocast block. Autocast is for the forward pass and the loss; "
                "its documentation advises against backward under it: leave the with block, then call "
                "scaler.scale(loss).backward()."
            )
        )
    normal_ok = all(
        torch.allclose(a, b, atol=1e-6)
        for a, b in zip(reader["normal"]["weights"], reference["normal"]["weights"], strict=True)
    )
    if not normal_ok:
        if all(
            torch.equal(a, b) for a, b in zip(reader["normal"]["weights"], _initial_weights(), strict=True)
        ):
            return failed(_("the weights did not change on a normal batch: call scaler.step(optimizer)."))
        if reader["normal"]["allreduces"] == 0:
            return failed(
                _(
                    "DDP all-reduced nothing on a normal batch, so each rank stepped with its own gradients: "
                    "the backward ran under ddp.no_sync() (or not through the DDP model). Run it through "
                    "ddp, outside no_sync()."
                )
            )
        if any(not torch.isfinite(w).all() for w in reader["normal"]["weights"]):
            return failed(_("the weights became inf or nan: the optimizer stepped with scaled gradients."))
        return failed(
            _(
                "after a normal batch the weights differ from the right step's: the optimizer must see "
                "unscaled gradients (scaler.step unscales them), and zero the old gradients first."
            )
        )
    after = reader["overflowing"]
    if any(not torch.isfinite(w).all() for w in after["weights"]):
        return failed(
            _(
                "the overflowing batch put inf or nan into the weights: step with scaler.step(optimizer), "
                "which skips a step whose gradients are not finite."
            )
        )
    if not all(torch.equal(a, b) for a, b in zip(after["weights"], reader["normal"]["weights"], strict=True)):
        return failed(_("the overflowing batch changed the weights; its step should have been skipped."))
    if after["scale"] != reference["overflowing"]["scale"]:
        return failed(
            _(
                "the skipped step left the scale at {scale:g}: call scaler.update() after "
                "scaler.step(optimizer), so that the scale backs off."
            ).format(scale=after["scale"])
        )
    if not all(
        torch.allclose(a, b)
        for r in ranks[1:]
        for a, b in zip(r["reader"]["overflowing"]["weights"], after["weights"], strict=True)
    ):
        return failed(_("the ranks hold different weights: run the backward pass through the DDP model."))
    if not all(
        torch.allclose(a, b, atol=1e-6)
        for a, b in zip(reader["normal again"]["weights"], reference["normal again"]["weights"], strict=True)
    ):
        return failed(
            _(
                "the normal batch after the skipped one did not give the right step: the skipped step's inf "
                "gradients were still there. Zero the gradients at the start of each step."
            )
        )
    return passed(
        _(
            "a normal batch steps with the unscaled gradients; the overflowing one is skipped and the "
            "scale halves ({before:g} -> {after:g}), on both ranks; the next batch steps again."
        ).format(before=_SCALE, after=after["scale"])
    )


def _untouched(step: Callable[..., Any]) -> CheckResult | None:
    """A verdict when `step` ignores all five arguments, exits or hangs; else None.

    Saves starting two processes for a function that does nothing with them.
    """
    if (verdict := probe_verdict(step, 5)) is not None:
        return verdict  # it ended its process or hung
    try:
        step(*(Probe() for _ in range(5)))
    except Touched:
        return None
    except SystemExit:
        return failed(_("your function called sys.exit(): a training step must just return."))
    except Exception:
        return None  # it did something with the arguments; the real run reports what
    return failed(
        _("the function does not use its arguments yet: write the step's forward, backward and step.")
    )


def _initial_weights() -> list[torch.Tensor]:
    """The seeded weights the mixed-precision check starts from."""
    torch.manual_seed(0)
    return [p.detach() for p in nn.Linear(8, 4).parameters()]


__all__ = ["MEMORY_ANSWERS", "check_amp_step", "check_checkpointed_forward", "check_memory_lines"]
