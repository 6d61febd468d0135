"""The notebook launcher: torchrun's environment, results by rank, loud failures, no leftovers."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import types

import psutil
import pytest
import torch
import torch.distributed as dist

from course_utils.distributed import (
    MASTER_ADDR,
    LaunchError,
    LaunchTimeoutError,
    WorkerError,
    choose_start_method,
    free_port,
    launch,
    loopback_interface,
    torchrun_env,
)

TORCHRUN_NAMES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE",
)


# Workers live at module level so that the spawn test can import them by name.
def report_env() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in TORCHRUN_NAMES}


def slow_for_low_ranks(world_size: int) -> int:
    rank = int(os.environ["RANK"])
    time.sleep(0.05 * (world_size - rank))  # rank 0 finishes last
    return rank * 10


def all_reduce_ranks() -> list[float]:
    dist.init_process_group("gloo")
    try:
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)  # sum over ranks
        return t.tolist()
    finally:
        dist.destroy_process_group()


def listening_addresses() -> list[str]:
    dist.init_process_group("gloo")
    try:
        dist.barrier()
        listens = [c.laddr.ip for c in psutil.Process().net_connections("inet") if c.status == "LISTEN"]
        dist.barrier()
        return listens
    finally:
        dist.destroy_process_group()


def rank1_raises_while_rank0_waits() -> None:
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        raise ValueError("rank one cannot go on")
    dist.barrier()  # rank 0 waits here for ever: rank 1 never arrives


def rank1_hangs() -> str:
    if os.environ["RANK"] == "1":
        time.sleep(60)
    return "done"


def rank1_exits(code: int) -> None:
    if os.environ["RANK"] == "1":
        os._exit(code)
    time.sleep(60)


def rank0_is_killed() -> None:
    if os.environ["RANK"] == "0":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


def returns_a_lock() -> object:
    return threading.Lock()


def sleeps() -> None:
    time.sleep(60)


def test_results_come_back_ordered_by_rank():
    assert launch(slow_for_low_ranks, 3, args=(3,), timeout=10) == [0, 10, 20]


def test_environment_is_what_torchrun_sets():
    envs = launch(report_env, 2, timeout=10)
    for rank, env in enumerate(envs):
        assert env["RANK"] == env["LOCAL_RANK"] == env["ROLE_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["ROLE_WORLD_SIZE"] == "2"
        assert env["GROUP_RANK"] == "0" and env["GROUP_WORLD_SIZE"] == "1"
        assert env["ROLE_NAME"] == "default"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True"
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
    assert 0 < int(envs[0]["MASTER_PORT"]) < 65536


def test_torchrun_env_sets_one_thread_per_process_unless_told(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert torchrun_env(1, 4, 29500)["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in torchrun_env(0, 1, 29500)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torchrun_env(1, 4, 29500)["OMP_NUM_THREADS"] == "3"
    with pytest.raises(ValueError, match=r"rank must be in 0\.\.3"):
        torchrun_env(4, 4, 29500)


def test_a_real_gloo_process_group_reduces():
    assert launch(all_reduce_ranks, 2, timeout=20) == [[3.0], [3.0]]


def test_only_loopback_is_listened_on():
    assert loopback_interface() is not None
    for addresses in launch(listening_addresses, 2, timeout=20):
        assert addresses and set(addresses) == {MASTER_ADDR}


def test_explicit_free_port_is_used():
    with socket.socket() as probe:
        probe.bind((MASTER_ADDR, 0))
        port = probe.getsockname()[1]
    envs = launch(report_env, 1, timeout=10, master_port=port)
    assert envs[0]["MASTER_PORT"] == str(port)


def test_a_taken_port_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind((MASTER_ADDR, 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port} on 127.0.0.1 is already in use"):
            launch(report_env, 2, master_port=port)


def test_a_rank_that_raises_is_reported_quickly_and_the_others_stopped():
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        launch(rank1_raises_while_rank0_waits, 2, timeout=30)
    assert time.monotonic() - start < 5
    err = info.value
    assert (err.rank, err.world_size, err.exc_type) == (1, 2, "ValueError")
    assert err.message == "rank one cannot go on"
    assert str(err).startswith("rank 1 of 2 raised ValueError: rank one cannot go on\n")
    assert "rank1_raises_while_rank0_waits" in err.traceback
    assert str(os.getpid()) not in str(err)


def test_a_rank_that_hangs_times_out_and_is_named():
    start = time.monotonic()
    with pytest.raises(LaunchTimeoutError, match=r"rank\(s\) 1 of 2 were still running") as info:
        launch(rank1_hangs, 2, timeout=1)
    assert info.value.running == [1]
    assert time.monotonic() - start < 5


def test_a_rank_that_exits_without_a_result():
    with pytest.raises(WorkerError, match="rank 1 of 2 exited with code 3 before returning") as info:
        launch(rank1_exits, 2, args=(3,), timeout=10)
    assert info.value.exc_type is None


def test_a_rank_killed_by_a_signal():
    with pytest.raises(WorkerError, match="rank 0 of 2 was killed by SIGKILL"):
        launch(rank0_is_killed, 2, timeout=10)


def test_an_unpicklable_result_is_a_clear_error():
    with pytest.raises(WorkerError, match="cannot be pickled"):
        launch(returns_a_lock, 1, timeout=10)


def test_ctrl_c_in_the_parent_stops_every_rank():
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            launch(sleeps, 2, timeout=30)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(
    ("fn", "nprocs", "kwargs", "error", "match"),
    [
        (report_env, 0, {}, ValueError, "at least 1"),
        (report_env, -2, {}, ValueError, "at least 1"),
        (report_env, 1.5, {}, ValueError, "whole number"),
        (report_env, True, {}, ValueError, "whole number"),
        ("report_env", 2, {}, TypeError, "fn must be a function"),
        (report_env, 2, {"args": "abc"}, TypeError, "args must be a tuple"),
        (report_env, 2, {"timeout": 0}, ValueError, "timeout must be a positive"),
        (report_env, 2, {"master_port": 70000}, LaunchError, "master_port must be an int"),
        (report_env, 2, {"method": "forkserver"}, ValueError, "method must be"),
    ],
)
def test_bad_arguments_say_what_to_pass(fn, nprocs, kwargs, error, match):
    with pytest.raises(error, match=match):
        launch(fn, nprocs, **kwargs)


def test_fork_is_chosen_without_cuda():
    expected = "fork" if sys.platform != "win32" and not torch.cuda.is_initialized() else "spawn"
    assert choose_start_method() == expected


def test_spawn_refuses_a_function_defined_in_a_notebook(monkeypatch):
    notebook_main = types.ModuleType("__main__")  # a kernel's __main__ has no __file__
    monkeypatch.setitem(sys.modules, "__main__", notebook_main)

    def worker() -> None:
        pass

    worker.__module__ = "__main__"
    with pytest.raises(LaunchError, match=r"'worker' is\s+defined in the notebook .* \.py file"):
        launch(worker, 2, method="spawn")


def test_spawn_refuses_what_it_cannot_pickle():
    with pytest.raises(LaunchError, match="spawn must pickle"):
        launch(lambda: None, 1, method="spawn")


def test_spawn_runs_an_importable_function():
    envs = launch(report_env, 1, timeout=30, method="spawn")
    assert envs[0]["RANK"] == "0" and envs[0]["MASTER_ADDR"] == "127.0.0.1"


def test_launch_from_a_process_with_threads():
    # A Jupyter kernel has threads; on Python 3.12+ forking then warns, and pytest turns
    # warnings into errors here: the launcher must silence exactly that warning.
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        assert launch(slow_for_low_ranks, 2, args=(2,), timeout=10) == [0, 10]
    finally:
        stop.set()
        helper.join()


def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket() as sock:
        sock.bind((MASTER_ADDR, port))
