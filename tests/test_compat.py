"""The work-arounds for single releases of the range: applied on their release only, and what they change."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.distributed.pipelining.stage import _PipelineStageBase
from torch.torch_version import TorchVersion

from course_utils.compat import fix_pipeline_handshake


def handshake_of_2_9(self: object) -> list[SimpleNamespace]:
    """What 2.9's handshake hands to `batch_isend_irecv`: a float32 receive, an int64 send."""
    return [SimpleNamespace(tensor=torch.zeros(1)), SimpleNamespace(tensor=torch.tensor(1))]


@pytest.fixture
def stage_of_2_9(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage class with 2.9's handshake (2.15 has no such method), restored afterwards."""
    monkeypatch.setattr(_PipelineStageBase, "_get_init_p2p_neighbors_ops", handshake_of_2_9, raising=False)


@pytest.mark.usefixtures("stage_of_2_9")
def test_the_handshake_is_fixed_on_2_9_once(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.9.1+cu128")
    assert fix_pipeline_handshake() is True
    fixed = _PipelineStageBase._get_init_p2p_neighbors_ops
    ops = fixed(None)
    assert [op.tensor.dtype for op in ops] == [torch.float32, torch.float32]
    assert ops[1].tensor.item() == 1.0  # the stage index, sent as a float
    assert fix_pipeline_handshake() is True
    assert _PipelineStageBase._get_init_p2p_neighbors_ops is fixed  # not wrapped twice


@pytest.mark.parametrize("release", ["2.10.0", "2.13.0+cpu", "2.15.0+cu132"])
@pytest.mark.usefixtures("stage_of_2_9")
def test_later_releases_are_left_as_they_are(monkeypatch, release):
    monkeypatch.setattr(torch, "__version__", release)
    assert fix_pipeline_handshake() is False
    assert _PipelineStageBase._get_init_p2p_neighbors_ops is handshake_of_2_9


def test_this_release_is_fixed_exactly_when_it_is_2_9():
    assert fix_pipeline_handshake() is (TorchVersion(torch.__version__) < (2, 10))
