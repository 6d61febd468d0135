"""Checks for the exercises of notebook 16 (plan a real run: memory, communication and compute).

Both exercises plan one job with `course_utils.planner`: Llama 3.1 70B on 32 H100s (4 nodes of 8).
Each check says what is right or wrong, with a hint, never the solution. The truths come from the
planner, whose own tests hold it to FSDP2, autograd and `FlopCounterMode`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from course_utils import planner
from course_utils.exercises import CheckResult, failed, integral_value, passed, real_value
from course_utils.i18n import N_, _, translated

# The job of both exercises.
MODEL = planner.LLAMA_3_1_70B
HARDWARE = planner.H100_SXM
GPUS = 32
SEQ_LEN = 8192
MICRO_BATCH = 1
MICRO_BATCHES = 8
POLICY = planner.BF16_MIXED
CHECKPOINTING = "full"
RESERVE = 8 * 10**9  # bytes per GPU kept for the allocator's reserve, CUDA's context and NCCL
# Exercise 2: HSDP sharded within each node, replicated across the nodes, which does not fit.
TEMPTING = planner.Mesh(dp_replicate=4, dp_shard=8)
GB = 10**9
TERMS = {  # the planner's memory terms, as a message names them (N_: translated where shown)
    "parameters": N_("the parameters"),
    "gradients": N_("the gradients"),
    "optimizer_state": N_("AdamW's state"),
    "activations": N_("the activations"),
    "recompute": N_("the recomputed layer"),
    "fsdp_buffers": N_("FSDP's gathered buffers"),
    "logits": N_("the logits"),
}


def exercise_plan(mesh: planner.Mesh) -> planner.Plan:
    """The plan of the exercises' job on `mesh` (a planner.Mesh); the planner's error if it cannot be."""
    return planner.plan(
        MODEL,
        mesh,
        HARDWARE,
        seq_len=SEQ_LEN,
        micro_batch=MICRO_BATCH,
        micro_batches=MICRO_BATCHES,
        policy=POLICY,
        checkpointing=CHECKPOINTING,
    )


def state_bytes(mesh: planner.Mesh = TEMPTING) -> int:
    """Bytes of training state (parameters, gradients, AdamW's moments) on the busiest GPU of `mesh`."""
    busiest = max(exercise_plan(mesh).memory, key=lambda m: m.total)
    return busiest.parameters + busiest.gradients + busiest.optimizer_state


def _largest_term(memory: planner.Memory) -> tuple[str, int]:
    """The name and the bytes of the largest term of one GPU's memory."""
    name = max(TERMS, key=lambda term: getattr(memory, term))
    return translated(TERMS[name]), getattr(memory, name)


def check_mesh_fits(mesh: Any) -> CheckResult:
    """Check a mesh of 32 GPUs on which the exercises' job fits with RESERVE bytes to spare."""
    if mesh is None or mesh is Ellipsis:
        return failed(
            _("replace the `...` of `mesh` with a planner.Mesh(...), e.g. planner.Mesh(dp_shard=2, tp=2).")
        )
    if not isinstance(mesh, planner.Mesh):
        return failed(
            _("`mesh` is a planner.Mesh, such as planner.Mesh(dp_shard=2, tp=2), not a {type}.").format(
                type=type(mesh).__name__
            )
        )
    mesh = planner.Mesh(**{f.name: getattr(mesh, f.name) for f in fields(planner.Mesh)})  # its sizes only
    if mesh.world_size != GPUS:
        return failed(
            _(
                "this mesh has {n} GPUs (`pp x dp_replicate x dp_shard x cp x tp`); the job has {gpus}: "
                "4 nodes of 8."
            ).format(n=mesh.world_size, gpus=GPUS)
        )
    try:
        p = exercise_plan(mesh)
    except ValueError as err:
        return failed(_("the planner refuses this mesh: {error}.").format(error=err))
    busiest = max(p.memory, key=lambda m: m.total)
    need = (busiest.total + RESERVE) / GB
    if not planner.fits(p, reserve=RESERVE):
        term, size = _largest_term(busiest)
        state = busiest.parameters + busiest.gradients + busiest.optimizer_state
        if state > busiest.total / 2:
            hint = _(
                "the training state dominates: only dp_shard, cp, tp and pp divide it; "
                "dp_replicate copies it."
            )
        else:
            hint = _("the activations dominate: tp, cp and pp divide them, checkpointing shrinks them.")
        return failed(
            _(
                "with the reserve a GPU needs {need:.1f} GB, more than the {memory:.0f} GB of an H100; "
                "its largest term is {term}, {size:.1f} GB: {hint}"
            ).format(need=need, memory=HARDWARE.memory / GB, term=term, size=size / GB, hint=hint)
        )
    links = ", ".join(f"{link} {seconds:.2f} s" for link, seconds in p.communication_seconds.items())
    return passed(
        _(
            "{need:.1f} GB per GPU with the reserve, of {memory:.0f}; a step takes at least {step:.2f} s "
            "(compute {compute:.2f} s; collectives {links})."
        ).format(
            need=need,
            memory=HARDWARE.memory / GB,
            step=p.step_seconds,
            compute=p.compute.seconds,
            links=links or _("none"),
        )
    )


def check_state_bytes(answer: Any) -> CheckResult:
    """Check the bytes of training state that each GPU holds on TEMPTING, Mesh(dp_replicate=4, dp_shard=8)."""
    if answer is None or answer is Ellipsis:
        return failed(_("replace the `...` of `state_bytes` with a number of bytes."))
    number = integral_value(answer)
    truth = state_bytes()
    if number is None:
        value = real_value(answer)
        if value is not None and abs(value - truth / GB) <= 0.05 * truth / GB:
            return failed(_("that reads as GB: give the bytes, a whole number."))
        return failed(
            _(
                "`state_bytes` is a whole number of bytes: give an int (// divides without a float), "
                "not a {type}."
            ).format(type=type(answer).__name__)
        )
    if number == truth:
        return passed(
            _(
                "{truth:,} bytes, {gb:.1f} GB: 16 bytes per parameter over the 8 GPUs of a node; the 4 nodes "
                "hold copies. More than an H100's 80 GB before any activation."
            ).format(truth=truth, gb=truth / GB)
        )
    n = MODEL.parameter_count()
    if number == 16 * n // GPUS:
        return failed(
            _("that divides by all 32 GPUs: dp_replicate copies the state, only dp_shard's 8 share it.")
        )
    if number == 16 * n:
        return failed(_("that is the whole model's state: FSDP shards it over dp_shard's 8 GPUs."))
    if number in (2 * n // 8, 6 * n // 8):  # 4 * n // 8 is 16 * n // 32, above
        return failed(
            _("count the gradients and AdamW's two moments too: 4 + 4 + 4 + 4 bytes per parameter.")
        )
    if number in (8 * n // 8, 12 * n // 8):
        return failed(
            _("AdamW keeps two moments per parameter, each 4 bytes, beside the parameter and its gradient.")
        )
    if number in (18 * n // 8, 20 * n // 8, 14 * n // 8, 10 * n // 8):
        return failed(
            _(
                "under FSDP2's bf16 policy the sharded parameters are fp32 and are the master weights: "
                "bf16 exists only in the gathered copies."
            )
        )
    return failed(
        _("bytes per parameter of the training state, times the parameters, over the GPUs that shard it.")
    )
