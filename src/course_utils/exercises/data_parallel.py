"""Self-checks for notebook 05 (DataParallel): the split rule, idle GPUs and the batch dimension.

Every check compares the reader's answer with DataParallel's own rule (`torch.chunk`, through
`course_utils.parallel.replica_sizes`) and says what is wrong, never what is right.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from course_utils.exercises import CheckResult, failed, integral_list, integral_value, passed
from course_utils.i18n import _
from course_utils.parallel import SimulatedDataParallel, replica_sizes

IDLE_GPUS = 8
IDLE_BATCHES = range(1, 33)


def check_replica_sizes(answer: object, batch_size: int, num_devices: int) -> CheckResult:
    """Check a prediction of the rows each replica gets for `batch_size` on `num_devices` GPUs."""
    if answer is None or answer is ...:
        return failed(
            _(
                "write your prediction for a batch of {batch_size} on {num_devices} GPUs as a list of ints, "
                "one per replica, in device order"
            ).format(batch_size=batch_size, num_devices=num_devices)
        )
    given = integral_list(answer)
    if given is None:
        return failed(_("the answer should be a list of ints, one per replica, e.g. [a, b, c]"))
    answer = given
    truth = replica_sizes(batch_size, num_devices)
    if answer == truth:
        return passed(
            _(
                "{answer}: torch.chunk gives {count} replica(s) for a batch of {batch_size} "
                "on {num_devices} GPUs"
            ).format(answer=answer, count=len(truth), batch_size=batch_size, num_devices=num_devices)
        )
    if sum(answer) != batch_size:
        return failed(
            _("the pieces must add up to the batch of {batch_size}; yours add up to {total}").format(
                batch_size=batch_size, total=sum(answer)
            )
        )
    if any(n < 1 for n in answer):
        return failed(_("a replica never gets an empty piece: DataParallel drops the devices it cannot fill"))
    if len(answer) > num_devices:
        return failed(
            _("there are only {num_devices} GPUs, so at most {num_devices} replicas").format(
                num_devices=num_devices
            )
        )
    if len(answer) != len(truth):
        return failed(
            _(
                "right total, wrong number of replicas: torch.chunk first picks the piece size "
                "(the batch divided by the GPU count, rounded up), then cuts as many pieces as that allows"
            )
        )
    return failed(
        _(
            "right number of replicas, wrong sizes: torch.chunk does not spread the remainder one row "
            "at a time; every piece has the same size except possibly the last, which is smaller"
        )
    )


def check_idle_batches(answer: object) -> CheckResult:
    """Check the set of batch sizes 1..32 that leave at least one of 8 GPUs without work."""
    if answer is None or answer is ...:
        return failed(
            _("write the batch sizes (from 1 to 32) that leave a GPU idle on 8 GPUs, as a set of ints")
        )
    if not isinstance(answer, Iterable) or isinstance(answer, str | bytes | Mapping):
        return failed(_("the answer should be a set of ints such as {1, 2, 3}"))
    sizes = [integral_value(n) for n in answer]
    if any(n is None for n in sizes):
        return failed(_("the answer should contain whole numbers only (batch sizes, as ints)"))
    chosen = set(sizes)
    outside = sorted(n for n in chosen if n not in IDLE_BATCHES)
    if outside:
        return failed(_("only batch sizes 1 to 32 are asked about; remove {outside}").format(outside=outside))
    truth = {b for b in IDLE_BATCHES if len(replica_sizes(b, IDLE_GPUS)) < IDLE_GPUS}
    if chosen == truth:
        return passed(
            _(
                "{count} of the 32 batch sizes leave a GPU idle, and not only those smaller than "
                "{gpus}: it is torch.chunk's piece size that decides"
            ).format(count=len(truth), gpus=IDLE_GPUS)
        )
    wrong, missed = len(chosen - truth), len(truth - chosen)
    parts = []
    if wrong:
        parts.append(
            _("{wrong} of your batch sizes keep all {gpus} GPUs busy").format(wrong=wrong, gpus=IDLE_GPUS)
        )
    if missed:
        parts.append(
            _("you missed {missed} that leave a GPU idle (look above {gpus} too)").format(
                missed=missed, gpus=IDLE_GPUS
            )
        )
    return failed(
        _("{parts}. Try replica_sizes(batch, 8) on a few of them.").format(parts=_("; ").join(parts))
    )


def check_batch_dim(wrapped: object) -> CheckResult:
    """Check a simulated DataParallel that splits sequence-first input (time, batch, features) by batch."""
    if wrapped is None or wrapped is ...:
        return failed(_("wrap the GRU with simulated_data_parallel(gru, 3, dim=...) and pass the result"))
    if isinstance(wrapped, nn.DataParallel):
        return failed(
            _("this exercise uses the simulation: nn.DataParallel on a machine without GPUs does not split")
        )
    if not isinstance(wrapped, SimulatedDataParallel):
        return failed(
            _("pass the wrapped module (what simulated_data_parallel returns), not {kind}").format(
                kind=type(wrapped).__name__
            )
        )
    if not isinstance(wrapped.module, nn.RNNBase) or wrapped.module.batch_first:
        return failed(_("wrap the sequence-first GRU of the exercise (batch_first=False), unchanged"))
    for time_steps, batch in ((7, 6), (5, 4)):  # two shapes: no other dim matches the batch in both
        probe = torch.zeros(time_steps, batch, wrapped.module.input_size)
        try:
            with torch.no_grad():
                output, _state = wrapped(probe)
        except Exception as err:
            return failed(
                _(
                    "running it on a (time={time_steps}, batch={batch}, features) input raised {error}: {err}"
                ).format(time_steps=time_steps, batch=batch, error=type(err).__name__, err=err)
            )
        if wrapped.last_replica_sizes != replica_sizes(batch, wrapped.num_devices):
            return failed(
                _(
                    "the replicas got {sizes} along dim={dim} of a "
                    "(time={time_steps}, batch={batch}, features) input: that is not its batch dimension"
                ).format(
                    sizes=wrapped.last_replica_sizes, dim=wrapped.dim, time_steps=time_steps, batch=batch
                )
            )
        if tuple(output.shape[:2]) != (time_steps, batch):
            return failed(
                _(
                    "the gathered output has shape {shape}; time and batch should be {time_steps} and {batch}"
                ).format(shape=list(output.shape), time_steps=time_steps, batch=batch)
            )
    return passed(
        _(
            "dim={dim} splits the batch (6 rows into {sizes}) and every replica sees the whole sequence"
        ).format(dim=wrapped.dim, sizes=replica_sizes(6, wrapped.num_devices))
    )
