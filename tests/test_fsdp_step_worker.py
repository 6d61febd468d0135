"""notebooks/workers/fsdp_step.py: notebook 10's FSDP step, on the CPU over gloo where there is no CUDA."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_utils.processes import WorkerError, launch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))  # as the notebook's kernel sees it
from workers.fsdp_step import fsdp_step, make_mlp


def test_two_ranks_hold_half_and_match_one_process():
    torch.manual_seed(1)
    x, y = torch.randn(8, 64), torch.randn(8, 64)
    ranks = launch(fsdp_step, 2, args=(x, y))
    seen = [(r["backend"], r["device"], r["local"], r["global"]) for r in ranks]
    assert seen == [("gloo", "cpu", (128, 64), (256, 64))] * 2
    model = make_mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    F.mse_loss(model(x), y).backward()
    optimizer.step()
    for name, weight in model.named_parameters():
        for r in ranks:
            torch.testing.assert_close(r["weights"][name], weight.detach(), rtol=0, atol=1e-6)


def test_a_batch_that_does_not_split_is_refused():
    with pytest.raises(WorkerError, match="does not split evenly"):
        launch(fsdp_step, 2, args=(torch.randn(7, 64), torch.randn(7, 64)))


def test_fresh_interpreters_can_run_it_as_after_cuda_started_in_the_kernel():
    """The notebook's GPU cell relies on spawn importing the worker by name when CUDA is initialised."""
    torch.manual_seed(1)
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    ranks = launch(fsdp_step, 2, args=(x, y), method="spawn", timeout=120)
    assert [r["local"] for r in ranks] == [(128, 64)] * 2
