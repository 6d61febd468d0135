"""One DDP rank on gloo that logs when backward reaches each layer and when DDP sends a bucket.

The worker of notebook 09, section 5: started with `launch(bucket_events_worker, 2)`, it shows
that DDP starts all-reducing gradients while backward is still running (from the second step,
once DDP has rebuilt its buckets in the order the gradients became ready). Called without the
launcher's variables it says so in one line; a rank waits for the other at most
COURSE_GROUP_TIMEOUT_S seconds (120 by default): course_utils.worker_env.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.throughput import make_mlp
from course_utils.worker_env import check_torchrun_env, joining

# What the log holds, for the notebook to put in words: ("backward", layer)
# when backward reaches Linear layer `layer`, ("bucket", index, layers) when
# DDP hands bucket `index`, with the gradients of those layers, to the
# all-reduce.
Event = tuple[str, int] | tuple[str, int, tuple[int, ...]]


def bucket_events_worker(steps: int = 2, bucket_cap_mb: float = 0.01) -> list[list[Event]]:
    """Train `steps` steps of a 3-layer MLP with small buckets; return each step's log of events."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, not {steps!r}")
    if not isinstance(bucket_cap_mb, int | float) or not 0 < bucket_cap_mb < math.inf:
        raise ValueError(f"bucket_cap_mb must be a positive number of MiB, not {bucket_cap_mb!r}")
    check_torchrun_env(launch="launch(bucket_events_worker, 2)")  # or one clear line
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        dist.init_process_group("gloo", timeout=timeout)
    try:
        return _record(steps, bucket_cap_mb)
    finally:
        dist.destroy_process_group()  # after _record returned: DDP is released first


def _record(steps: int, bucket_cap_mb: float) -> list[list[Event]]:
    """The logging run (a function of its own, so that DDP is gone before the process group)."""
    torch.manual_seed(0)
    model = make_mlp((64, 64, 64, 4))  # Linear layers 0, 2 and 4, ReLUs between them
    names = {p: name for name, p in model.named_parameters()}
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    events: list[Event] = []

    # A communication hook: DDP calls it with each bucket of gradients, ready to be all-reduced.
    # No annotations: DDP checks them, and this module's postponed (string) annotations fail that check.
    def logging_allreduce(state, bucket):  # noqa: ANN001, ANN202
        layers = {int(names[p].split(".")[0]) for p in bucket.parameters()}
        last_first = tuple(sorted(layers, reverse=True))
        events.append(("bucket", bucket.index(), last_first))
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(dist.group.WORLD, logging_allreduce)

    def log_backward(index: int) -> Callable[[nn.Module, Any, torch.Tensor], None]:
        def forward_hook(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
            # runs in backward when the gradient with respect to this layer's output is known
            event = ("backward", index)
            output.register_hook(lambda grad: events.append(event))

        return forward_hook

    for index, layer in enumerate(model):
        if isinstance(layer, nn.Linear):
            layer.register_forward_hook(log_backward(index))
    x, y = torch.randn(8, 64), torch.randint(0, 4, (8,))
    log = []
    for _ in range(steps):
        events.clear()
        F.cross_entropy(ddp(x), y).backward()
        log.append(list(events))
    dist.barrier()  # every rank past its last all-reduce before any rank tears down
    return log
