"""Notebook 08's torchrun restart: a rank dies once, torchrun restarts the group, the run resumes.

The resumed run must end with exactly the weights of an uninterrupted run (the course launcher
runs the same `train` function without a crash), and nothing may be left behind: no process (the
autouse fixture checks), no file but the run's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from course_utils.launcher import launch
from course_utils.torchrun import run_torchrun

WORKERS = Path(__file__).resolve().parent.parent / "notebooks" / "workers"
sys.path.insert(0, str(WORKERS.parent))

from workers.resume_training import train  # noqa: E402


def test_restarted_run_ends_with_the_uninterrupted_weights(tmp_path):
    straight, crashed = tmp_path / "straight", tmp_path / "crashed"
    straight.mkdir()
    crashed.mkdir()
    launch(train, nprocs=2, args=(str(straight), 3), timeout=120)
    result = run_torchrun(
        WORKERS / "resume_training.py",
        ["--out", str(crashed), "--epochs", "3", "--cpu", "--crash-in-epoch", "1"],
        nproc_per_node=2,
        extra_args=["--max-restarts=1"],
        timeout=240,
    )
    rows = sorted(result.json_lines(), key=lambda row: row["rank"])
    assert [(r["rank"], r["attempt"], r["resumed at epoch"]) for r in rows] == [(0, 1, 1), (1, 1, 1)]
    assert "injected failure: rank 1 dies in epoch 1" in result.stderr
    assert "failed (exitcode: 1)" in result.stderr  # torchrun's own line about the failure
    expected = torch.load(straight / "final.pt", weights_only=True)
    got = torch.load(crashed / "final.pt", weights_only=True)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[name], got[name]) for name in expected)
    assert sorted(p.name for p in crashed.iterdir()) == ["final.pt", "snapshot.pt"]  # no temporary left


def test_without_a_crash_nothing_restarts(tmp_path):
    reports = launch(train, nprocs=2, args=(str(tmp_path), 2), timeout=120)
    assert [(r["attempt"], r["resumed at epoch"], r["epochs run"]) for r in reports] == [(0, 0, 2)] * 2
    snapshot = torch.load(tmp_path / "snapshot.pt", weights_only=True)
    assert snapshot["epoch"] == 2 and snapshot["sampler"] == {"seed": 0, "epoch": 2}
    assert "momentum_buffer" in snapshot["optimizer"]["state"][0]
