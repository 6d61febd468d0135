"""Work-arounds for bugs of single releases in the course's PyTorch range, each applied only there.

A notebook calls one where a lesson would otherwise fail on that release, and says so beside the
call; on every other release the call changes nothing.
"""

from __future__ import annotations

import functools

import torch
from torch.torch_version import TorchVersion

__all__ = ["fix_pipeline_handshake"]


def fix_pipeline_handshake() -> bool:
    """On PyTorch 2.9, send a pipeline schedule's first-step handshake as float32, as it is received.

    2.9's schedules open their first step with a handshake between neighbouring stages
    (`_get_init_p2p_neighbors_ops`) that sends an int64 tensor and receives it into a float32 one.
    NCCL does not notice; gloo aborts the process on the size mismatch ("op.preamble.length <=
    op.nbytes. 8 vs 4"). PyTorch 2.10 sends float32 (pytorch/pytorch#165539). Call it in each
    process that runs a schedule, before the first step; calling it again does nothing.
    Returns True where this release needed it (2.9), False elsewhere.
    """
    if TorchVersion(torch.__version__) >= (2, 10):
        return False
    from torch.distributed.pipelining.stage import _PipelineStageBase

    original = _PipelineStageBase._get_init_p2p_neighbors_ops
    if getattr(original, "course_fixed", False):
        return True

    @functools.wraps(original)
    def handshake(self: _PipelineStageBase) -> list:
        ops = original(self)
        for op in ops:  # the receive buffer is float32 already; the sent stage index becomes float32
            op.tensor = op.tensor.float()
        return ops

    handshake.course_fixed = True  # type: ignore[attr-defined]
    _PipelineStageBase._get_init_p2p_neighbors_ops = handshake
    return True
