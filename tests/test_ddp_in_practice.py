"""Notebook 08's scripts: the torchrun restart, the small CNN on one and two ranks, their devices.

The restart: a rank dies once, torchrun restarts the group, the run resumes and must end with
exactly the weights of an uninterrupted run (the course launcher runs the same `train` function
without a crash), and nothing may be left behind: no process (the autouse fixture checks), no
file but the run's own. The restart script also runs under `mp.start_processes`, where no launcher
hosts its store. The device choice (nccl on GPU LOCAL_RANK, a clear error with too few GPUs, gloo
on the CPU) is tested with a faked CUDA where there is none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import torch.multiprocessing as mp

from course_utils.processes import WorkerError, free_port, launch, loopback_interface, run_torchrun

WORKERS = Path(__file__).resolve().parent.parent / "notebooks" / "workers"
sys.path.insert(0, str(WORKERS.parent))

from workers.cnn_training import pick_device  # noqa: E402
from workers.cnn_training import train as train_cnn  # noqa: E402
from workers.resume_training import check_enough_gpus, train  # noqa: E402

# How notebook 08 runs torchrun (workers forked from torchrun's process, which has PyTorch
# imported), and how a terminal does by default (each worker a new interpreter).
FORKED = ["--run-path", "--start-method=fork"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    """The final weights of 3 epochs without a crash, by the course launcher: one run for both restarts."""
    straight = tmp_path_factory.mktemp("straight")
    launch(train, nprocs=2, args=(str(straight), 3), timeout=120)
    return torch.load(straight / "final.pt", weights_only=True)


@pytest.mark.parametrize("workers", [FORKED, []], ids=["forked", "new interpreters"])
def test_restarted_run_ends_with_the_uninterrupted_weights(tmp_path, workers, uninterrupted):
    crashed, logs = tmp_path / "crashed", tmp_path / "logs"
    crashed.mkdir()
    result = run_torchrun(
        WORKERS / "resume_training.py",
        ["--out", str(crashed), "--epochs", "3", "--cpu", "--crash-in-epoch", "1"],
        nproc_per_node=2,
        extra_args=["--max-restarts=1", *workers, f"--log-dir={logs}"],
        timeout=240,
    )
    rows = sorted(result.json_lines(), key=lambda row: row["rank"])
    resumed = [(r["rank"], r["attempt"], r["resumed_at_epoch"]) for r in rows]
    assert resumed == [(0, 1, 1), (1, 1, 1)]
    assert "failed (exitcode: 1)" in result.stderr  # torchrun's own line about the failure
    (error_file,) = logs.glob("*/attempt_0/1/error.json")  # what @record wrote in rank 1
    injected = "RuntimeError: injected failure: rank 1 dies in epoch 1, step 3"
    assert json.loads(error_file.read_text())["message"]["message"] == injected
    if not workers:  # a new interpreter prints its own traceback, prefixed with its rank
        assert f"[rank1]: {injected}" in result.stderr
    expected = uninterrupted
    got = torch.load(crashed / "final.pt", weights_only=True)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[name], got[name]) for name in expected)
    assert sorted(p.name for p in crashed.iterdir()) == ["final.pt", "snapshot.pt"]  # no temporary left
    listening = {c.laddr.port for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN}
    assert result.master_port not in listening  # the rendezvous port was given back


def test_without_a_crash_nothing_restarts(tmp_path):
    reports = launch(train, nprocs=2, args=(str(tmp_path), 2), timeout=120)
    keys = ("attempt", "resumed_at_epoch", "epochs_run")
    assert [tuple(r[k] for k in keys) for r in reports] == [(0, 0, 2)] * 2
    snapshot = torch.load(tmp_path / "snapshot.pt", weights_only=True)
    assert snapshot["epoch"] == 2 and snapshot["sampler"] == {"seed": 0, "epoch": 2}
    assert "momentum_buffer" in snapshot["optimizer"]["state"][0]


def test_the_cnn_learns_the_same_curve_on_one_and_two_ranks():
    """Notebook 08's end-to-end run: the same effective batch gives the same loss at every step
    (on the CPU, `--cpu`: a machine with one GPU has no GPU for the second rank)."""
    (one,) = launch(train_cnn, nprocs=1, args=(32, 1, True), timeout=120)
    two = launch(train_cnn, nprocs=2, args=(32, 1, True), timeout=120)
    assert len(one["losses"]) == 16 and one["world size"] == 1 and two[0]["world size"] == 2
    assert two[0]["losses"] == pytest.approx(one["losses"], abs=1e-4)
    assert two[0]["losses"][-1] < one["losses"][0]  # it learns


def test_the_cnn_refuses_a_batch_that_does_not_split():
    with pytest.raises(WorkerError, match="--effective-batch 33 does not split into 2 equal parts"):
        launch(train_cnn, nprocs=2, args=(33, 1, True), timeout=120)


def _spawned_rank(index: int, out: str, port: int, interface: str | None) -> None:
    """One rank under `mp.start_processes`: no launcher hosts the store, the variables set by hand."""
    # Forked from this pytest process, whose OpenMP threads the child does not have: an OpenMP
    # region in the child could wait for them for ever (the course launcher does the same for its
    # forked ranks).
    torch.set_num_threads(1)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE="2"
    )
    for name in ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"):
        os.environ.pop(name, None)
    if interface:
        os.environ["GLOO_SOCKET_IFNAME"] = interface
    train(out, 2)


def test_resume_training_runs_under_mp_start_processes(tmp_path):
    """Without torchrun nobody hosts the store: rank 0 does, and the run equals the launcher's."""
    launched, spawned = tmp_path / "launched", tmp_path / "spawned"
    launched.mkdir()
    spawned.mkdir()
    launch(train, nprocs=2, args=(str(launched), 2), timeout=120)
    context = mp.start_processes(
        _spawned_rank,
        args=(str(spawned), free_port(), loopback_interface()),
        nprocs=2,
        join=False,
        start_method="fork",
    )
    deadline = time.monotonic() + 120
    try:
        while not context.join(timeout=1):
            assert time.monotonic() < deadline, "mp.start_processes ranks still running after 120 s"
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join()
    expected = torch.load(launched / "final.pt", weights_only=True)
    got = torch.load(spawned / "final.pt", weights_only=True)
    assert all(torch.equal(expected[name], got[name]) for name in expected)


@pytest.fixture
def one_fake_gpu(monkeypatch):
    """A machine that shows CUDA with one GPU, where there is none: the workers' device choice."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


def test_the_cnn_takes_the_gpu_of_its_local_rank(one_fake_gpu):
    assert pick_device(0) == torch.device("cuda", 0)
    assert pick_device(0, cpu=True) == torch.device("cpu")  # --cpu
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK=1, but this machine shows only 1 GPU\(s\).*--cpu"):
        pick_device(1)


def test_the_cnn_trains_on_the_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # what a forked rank inherits
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # what a spawned one sees (a GPU machine spawns)
    assert pick_device(3) == torch.device("cpu")
    (report,) = launch(train_cnn, nprocs=1, args=(32, 1), timeout=120)
    assert report["device"] == "cpu"


def test_resume_training_checks_for_a_gpu_per_process(one_fake_gpu):
    check_enough_gpus(0, torch.cuda.device_count())  # GPU 0 exists
    with pytest.raises(RuntimeError, match=r"GPU 1 does not exist.*--nproc-per-node=1 or =gpu.*--cpu"):
        check_enough_gpus(1, torch.cuda.device_count())
