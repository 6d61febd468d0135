"""The notebook launcher: torchrun's environment, results by rank, loud failures, no leftovers."""

from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import types
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist
from fake_libcuda import FakeLibcuda
from processes import SESSION_VARIABLE, _marked, is_gone, left_behind, wait_until_gone
from torch.utils.data import DataLoader

from course_utils import gpus
from course_utils.processes import (
    LOOPBACK,
    LaunchError,
    LaunchTimeoutError,
    RemoteTraceback,
    WorkerError,
    choose_start_method,
    free_port,
    launch,
    launcher,
    loopback_interface,
    torchrun_env,
)
from course_utils.processes.supervision import GRACE_SECONDS

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


def rank1_raises_while_rank0_waits(folder: str) -> None:
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        _write_json(os.path.join(folder, "failed_at.json"), time.monotonic())  # one clock here
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


def test_torchrun_env_sets_one_thread_per_process_unless_told(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert torchrun_env(1, 4, 29500)["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in torchrun_env(0, 1, 29500)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torchrun_env(1, 4, 29500)["OMP_NUM_THREADS"] == "3"
    with pytest.raises(ValueError, match=r"rank must be in 0\.\.3"):
        torchrun_env(4, 4, 29500)


def threads_and_a_matmul() -> int:
    torch.ones(256, 256) @ torch.ones(256, 256)  # would hang in a thread pool broken by fork
    return torch.get_num_threads()


def test_a_single_forked_rank_uses_one_thread_after_the_parent_used_many():
    torch.ones(512, 512) @ torch.ones(512, 512)  # the parent's OpenMP pool is started
    assert launch(threads_and_a_matmul, 1, timeout=30, method="fork") == [1]


def test_a_real_gloo_process_group_reduces():
    assert launch(all_reduce_ranks, 2, timeout=20) == [[3.0], [3.0]]


def test_only_loopback_is_listened_on():
    assert loopback_interface() is not None
    for addresses in launch(listening_addresses, 2, timeout=20):
        assert addresses and set(addresses) == {LOOPBACK}


def test_explicit_free_port_is_used():
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    envs = launch(report_env, 1, timeout=10, master_port=port)
    assert envs[0]["MASTER_PORT"] == str(port)


def test_a_taken_port_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port} on 127.0.0.1 is already in use"):
            launch(report_env, 2, master_port=port)


def test_a_rank_that_raises_is_reported_quickly_and_the_others_stopped(tmp_path):
    with pytest.raises(WorkerError) as info:
        launch(rank1_raises_while_rank0_waits, 2, args=(str(tmp_path),), timeout=30)
    # Counted from the raise, not from the call: a spawned rank first spends seconds importing.
    assert time.monotonic() - json.loads((tmp_path / "failed_at.json").read_text()) < 5
    err = info.value
    assert (err.rank, err.world_size, err.exc_type) == (1, 2, "ValueError")
    assert err.message == "rank one cannot go on"
    assert str(err).startswith("rank 1 of 2 raised ValueError: rank one cannot go on\n")
    assert "rank1_raises_while_rank0_waits" in err.traceback
    assert str(os.getpid()) not in str(err)
    # Uncaught, the error shows the worker's traceback as its cause, as concurrent.futures does.
    assert isinstance(err.__cause__, RemoteTraceback) and err.__cause__.text == err.traceback
    shown = "".join(traceback.format_exception(err))
    assert "rank1_raises_while_rank0_waits" in shown and 'raise ValueError("rank one cannot go on")' in shown


def rank0_just_inside_rank1_hangs(folder: str, inside: float) -> str:
    """Rank 0 notes when it started and returns after `inside` s; rank 1 notes it and hangs."""
    Path(folder, os.environ["RANK"]).write_text(repr(time.monotonic()))  # one clock for every process here
    time.sleep(inside if os.environ["RANK"] == "0" else 60)
    return "done"


TIMEOUT = 3.0  # the launch's timeout in the test that pins it


@pytest.mark.parametrize("method", [None, "spawn"])
def test_the_timeout_is_kept_at_both_bounds_and_a_rank_just_inside_it_finishes(tmp_path, method):
    """Never before `timeout` (counted once every rank is ready to call the function), never after
    it plus the grace for stopping; rank 0, done 1.5 s before the deadline, is not among the ranks
    still running, also when spawned ranks spend longer than that importing PyTorch (a GPU
    machine spawns them once CUDA or autograd's GPU threads started)."""
    called = time.monotonic()
    with pytest.raises(LaunchTimeoutError, match=r"rank\(s\) 1 of 2 were still running") as info:
        launch(
            rank0_just_inside_rank1_hangs,
            2,
            args=(str(tmp_path), TIMEOUT - 1.5),
            timeout=TIMEOUT,
            method=method,
        )
    ended = time.monotonic()
    assert info.value.running == [1]
    assert ended - called >= TIMEOUT  # the deadline starts after the ranks do
    last_start = max(float(Path(tmp_path, rank).read_text()) for rank in ("0", "1"))
    # Rank 1 dies at the first SIGTERM; 2 s more for a busy machine (a deadline 3 times too late fails).
    assert ended - last_start <= TIMEOUT + GRACE_SECONDS + 2


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


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt here, however the suite was started.

    A shell starts a background job (`pytest ... &`) with SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler; a notebook kernel always has one.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_in_the_parent_stops_every_rank(ctrl_c_raises):
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            launch(sleeps, 2, timeout=30)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 20  # stopped by the Ctrl-C, well before the 30 s timeout


LAUNCHES_RANKS_THAT_IGNORE_SIGTERM = """
import os, signal, sys, time
from course_utils.processes import supervision
from course_utils.processes import launch

def stubborn(folder):
    def note_sigterm(signum, frame):  # like a worker that saves a checkpoint on SIGTERM, and goes on
        open(os.path.join(folder, os.environ["RANK"] + ".sigterm"), "w").close()
    signal.signal(signal.SIGTERM, note_sigterm)
    path = os.path.join(folder, os.environ["RANK"] + ".pid")
    with open(path + ".part", "w") as file:
        file.write(str(os.getpid()))
    os.replace(path + ".part", path)
    while True:
        time.sleep(0.05)

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel, also in a background job
    supervision.GRACE_SECONDS = 600.0  # so that only the second Ctrl-C can end the ranks in time
    try:
        launch(stubborn, 2, args=(sys.argv[1],), timeout=300)
    except KeyboardInterrupt:
        print("interrupted")
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to another process: POSIX")
def test_a_second_ctrl_c_kills_ranks_that_ignore_sigterm(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHES_RANKS_THAT_IGNORE_SIGTERM)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        _wait_for_files(tmp_path, "*.pid", 2, parent)
        ranks = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
        parent.send_signal(signal.SIGINT)  # the first Ctrl-C: SIGTERM to the ranks, which go on
        _wait_for_files(tmp_path, "*.sigterm", 2, parent)
        assert not any(is_gone(pid) for pid in ranks)
        parent.send_signal(signal.SIGINT)  # the second: SIGKILL at once, not after 600 s
        out, _ = parent.communicate(timeout=60)
    finally:
        parent.kill()
        parent.wait(10)
    assert out == "interrupted\n"
    assert wait_until_gone(ranks, timeout=10) == []


def _wait_for_files(folder: Path, pattern: str, count: int, parent: subprocess.Popen) -> None:
    """Wait (up to 60 s) until `count` files match `pattern` in `folder`, while `parent` runs."""
    deadline = time.monotonic() + 60
    while len(list(folder.glob(pattern))) < count:
        assert parent.poll() is None, "the launching script ended early"
        assert time.monotonic() < deadline, f"no {count} {pattern} files in 60 s"
        time.sleep(0.05)


@pytest.mark.parametrize("timeout", [float("inf"), 1e15, float("nan"), -1, 0])
def test_a_timeout_out_of_range_says_what_to_pass(timeout):
    with pytest.raises(ValueError, match=r"timeout must be a positive number of seconds, at most 604800"):
        launch(report_env, 2, timeout=timeout)


def test_a_timeout_that_is_no_number_says_what_to_pass():
    with pytest.raises(TypeError, match="timeout must be a number of seconds, such as 60, not '60'"):
        launch(report_env, 2, timeout="60")


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0, 0, 29500), ValueError, r"world_size must be the number of processes, at least 1, not 0"),
        ((0, -3, 29500), ValueError, "at least 1"),
        (("0", 2, 29500), TypeError, r"rank must be a whole number \(an int such as 2\), not '0'"),
        ((0, 2.0, 29500), TypeError, "world_size must be a whole number"),
        ((0, 2, "29500"), TypeError, "master_port must be a whole number"),
        ((0, True, 29500), TypeError, "world_size must be a whole number"),
        ((2, 2, 29500), ValueError, r"rank must be in 0\.\.1 for world_size=2, not 2"),
        ((-1, 2, 29500), ValueError, r"rank must be in 0\.\.1"),
        ((0, 2, 0), ValueError, "master_port must be a port number from 1 to 65535"),
        ((0, 2, 70000), ValueError, "master_port must be a port number"),
        ((0, 2, 29500, "127.0.0.1", 5), TypeError, "error_file must be the path of a file"),
        ((0, 2, 29500, "127.0.0.1", ""), ValueError, "error_file is empty"),
        ((0, 2, 29500, "127.0.0.1", "a\0b"), ValueError, "error_file holds a NUL character"),
        ((0, 2, 29500, "127.0.0.\0"), ValueError, "master_addr holds a NUL character"),
        ((0, 2, 29500, ""), ValueError, "master_addr is empty; pass text such as '127.0.0.1'"),
        ((0, 2, 29500, None), TypeError, "master_addr must be text"),
        ((0, 2, 10**400), ValueError, "master_port must be a port number"),
    ],
)
def test_torchrun_env_refuses_what_it_cannot_use(args, error, match):
    with pytest.raises(error, match=match):
        torchrun_env(*args)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"master_port": "29500"}, ValueError, "master_port must be an int from 1 to 65535"),
        ({"master_port": 0}, LaunchError, "master_port must be an int"),
        ({"master_port": True}, LaunchError, "master_port must be an int"),
        ({"args": None}, TypeError, "args must be a tuple"),
        ({"method": ""}, ValueError, "method must be"),
    ],
)
def test_more_bad_arguments_say_what_to_pass(kwargs, error, match):
    with pytest.raises(error, match=match):
        launch(report_env, 2, **kwargs)


@pytest.mark.parametrize(
    ("host", "error", "match"),
    [
        ("", ValueError, "host is empty; pass text such as '127.0.0.1'"),
        (None, TypeError, r"host must be text \(a str\) such as '127.0.0.1', not None"),
        (127, TypeError, "host must be text"),
        ("127.0.0.1\0", ValueError, "host holds a NUL character"),
    ],
)
def test_free_port_needs_an_address(host, error, match):
    with pytest.raises(error, match=match):
        free_port(host)


@pytest.mark.parametrize(
    ("fn", "nprocs", "kwargs", "error", "match"),
    [
        (report_env, 0, {}, ValueError, "from 1 to 64 on one machine"),
        (report_env, -2, {}, ValueError, "from 1 to 64"),
        (report_env, 10**100, {}, ValueError, "from 1 to 64"),
        (report_env, 65, {}, ValueError, "from 1 to 64"),
        (report_env, 1.5, {}, TypeError, "whole number"),
        (report_env, True, {}, TypeError, "whole number"),
        (report_env, "2", {}, TypeError, r"an int such as 2\), not '2'"),
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


def test_spawn_refuses_a_function_defined_in_a_notebook(monkeypatch):
    notebook_main = types.ModuleType("__main__")  # a kernel's __main__ has no __file__
    monkeypatch.setitem(sys.modules, "__main__", notebook_main)

    def worker() -> None:
        pass

    worker.__module__ = "__main__"
    with pytest.raises(LaunchError, match=r"'worker' is\s+defined in the notebook") as info:
        launch(worker, 2, method="spawn")
    assert "You asked for method='spawn'" in str(info.value)
    assert "Leave method unset" in str(info.value) and ".py file" in str(info.value)


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
    assert 1024 <= port <= 65535  # a port the OS chose (0 would mean "any" to whoever binds it next)
    with socket.socket() as sock:
        sock.bind((LOOPBACK, port))


# --- Each rank in a group of its own: what it starts is stopped with it ---------------------------


def _write_json(path: str, data: object) -> None:
    with open(path + ".part", "w") as file:
        json.dump(data, file)
    os.replace(path + ".part", path)


def _sleeper() -> None:
    time.sleep(60)


def starts_children_then_fails(folder: str, how: str) -> None:
    """Rank 1 starts a subprocess, a daemonic mp.Process and DataLoader workers, then fails."""
    if os.environ["RANK"] == "1":
        popen = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        daemon = mp.get_context("fork").Process(target=_sleeper, daemon=True)
        daemon.start()
        batches = iter(DataLoader(range(8), batch_size=2, num_workers=2))
        next(batches)
        workers = [w.pid for w in batches._workers]  # the DataLoader's worker processes
        _write_json(os.path.join(folder, "children.json"), [popen.pid, daemon.pid, *workers])
        _write_json(os.path.join(folder, "failed_at.json"), time.time())
        if how == "raise":
            raise ValueError("rank 1 fails with children")
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # rank 0 waits, as in a collective; and rank 1 when it "hangs"


@pytest.mark.parametrize("how", ["raise", "sigkill", "hang"])
def test_what_a_rank_started_is_stopped_with_it(tmp_path, how):
    if how == "hang":
        # Rank 1 starts its children within the timeout on an idle machine; on a busy one (a GPU run's
        # 16 pytest workers) it may not within 3 s, so the timeout doubles until it has.
        for timeout in (3, 6, 12, 24):
            with pytest.raises(LaunchTimeoutError):
                launch(starts_children_then_fails, 2, args=(str(tmp_path), how), timeout=timeout)
            if (tmp_path / "children.json").exists():
                break
    else:
        with pytest.raises(WorkerError) as info:
            launch(starts_children_then_fails, 2, args=(str(tmp_path), how), timeout=30)
        # Seen as that rank's failure at once, although its children still hold its pipe.
        assert time.time() - json.loads((tmp_path / "failed_at.json").read_text()) < 1.0
        assert info.value.rank == 1
        if how == "raise":
            assert info.value.message == "rank 1 fails with children"
        else:
            assert info.value.exc_type is None and "killed by SIGKILL" in info.value.message
    children = json.loads((tmp_path / "children.json").read_text())
    assert len(children) == 4
    assert wait_until_gone(children, timeout=1.0) == []


def session_and_parent_death_signal() -> dict[str, int]:
    sig = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
    return {"pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0), "pdeathsig": sig.value}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sessions and PR_SET_PDEATHSIG: Linux")
def test_each_rank_leads_its_own_session_and_dies_with_its_parent():
    for info in launch(session_and_parent_death_signal, 2, timeout=10):
        assert info["pid"] == info["sid"] == info["pgid"]
        assert info["pdeathsig"] == signal.SIGKILL


LAUNCHES_AND_HANGS = """
import os, sys, time
from course_utils.processes import launch

def hang(folder):
    path = os.path.join(folder, os.environ["RANK"] + ".pid")
    with open(path + ".part", "w") as file:
        file.write(str(os.getpid()))
    os.replace(path + ".part", path)
    time.sleep(120)

if __name__ == "__main__":
    launch(hang, 2, args=(sys.argv[1],), timeout=120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_die_with_a_launcher_that_is_killed(tmp_path):
    """The kernel is killed outright (SIGKILL, the OOM killer): its ranks must not live on."""
    script = tmp_path / "launcher.py"
    script.write_text(textwrap.dedent(LAUNCHES_AND_HANGS))
    launcher = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
            assert launcher.poll() is None, "the launcher script ended early"
            time.sleep(0.05)
        ranks = [int(p.read_text()) for p in sorted(tmp_path.glob("*.pid"))]
        assert len(ranks) == 2 and not any(is_gone(pid) for pid in ranks)
    finally:
        launcher.kill()
        launcher.wait(10)
    assert wait_until_gone(ranks, timeout=3.0) == []


def test_an_orphan_is_seen_as_left_behind():
    """The check behind every test: a process whose parent exited is still found."""
    sleeper = "import time; time.sleep(30)"
    code = (
        "import subprocess, sys; "
        f"print(subprocess.Popen([sys.executable, '-c', {sleeper!r}], stdout=-3, stderr=-3).pid)"  # DEVNULL
    )
    parent = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    orphan = int(parent.stdout)  # its parent has exited
    try:
        assert orphan in [p.pid for p in left_behind(grace=0)]
        # It carries this session's marker too, which finds orphans where no subreaper exists.
        assert os.environ[SESSION_VARIABLE] and orphan in [p.pid for p in _marked(set())]
    finally:
        os.kill(orphan, signal.SIGKILL)
        assert wait_until_gone([orphan], timeout=5) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_a_forked_orphan_is_seen_as_left_behind():
    """Forked from this process, like a rank's DataLoader worker: no marker; the subreaper sees it."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            if os.fork() == 0:
                time.sleep(30)
            else:
                os.write(write, b"started")
        finally:
            os._exit(0)
    os.close(write)
    os.read(read, 16)
    os.close(read)
    os.waitpid(child, 0)
    orphans = [p.pid for p in left_behind(grace=0)]
    try:
        assert len(orphans) == 1 and orphans[0] not in [p.pid for p in _marked(set())]
    finally:
        for pid in orphans:
            os.kill(pid, signal.SIGKILL)
        assert wait_until_gone(orphans, timeout=5) == []


# --- Reports -------------------------------------------------------------------------------------


def every_rank_raises() -> None:
    raise ValueError(f"rank {os.environ['RANK']} fails")


def test_several_failing_ranks_give_one_report_that_does_not_depend_on_timing():
    for _ in range(2):
        with pytest.raises(WorkerError) as info:
            launch(every_rank_raises, 3, timeout=30)
        err = info.value
        assert (err.rank, err.message) == (0, "rank 0 fails")
        assert sorted(err.also_failed) == [1, 2] and err.also_failed[2].message == "rank 2 fails"
        assert "Also failed: rank 1 (ValueError), rank 2 (ValueError)" in str(err)


def rank1_dies_while_rank0_reduces() -> None:
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        os._exit(3)
    dist.all_reduce(torch.ones(1))  # fails in turn once rank 1 is gone


def test_a_rank_that_died_is_reported_before_the_ranks_that_failed_because_of_it():
    with pytest.raises(WorkerError) as info:
        launch(rank1_dies_while_rank0_reduces, 2, timeout=30)
    assert info.value.rank == 1 and "exited with code 3" in info.value.message


def exits_on_rank1(code: object) -> str:
    if os.environ["RANK"] == "1":
        sys.exit(code)
    return "done"


@pytest.mark.parametrize("code", [0, None])
def test_sys_exit_0_is_success_as_under_torchrun(code):
    assert launch(exits_on_rank1, 2, args=(code,), timeout=10) == ["done", None]


def test_sys_exit_with_an_error_code_is_a_failure():
    with pytest.raises(WorkerError, match="rank 1 of 2 raised SystemExit: 3"):
        launch(exits_on_rank1, 2, args=(3,), timeout=10)


def test_a_spawned_rank_that_cannot_import_the_worker_gets_a_hint(tmp_path, monkeypatch, capfd):
    module = tmp_path / "vanishing_worker.py"
    module.write_text("def work():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import vanishing_worker  # importable here, at the time of the call

    monkeypatch.setitem(sys.modules, "vanishing_worker", vanishing_worker)
    module.unlink()  # ... but not in the spawned interpreter
    with pytest.raises(WorkerError, match="exited with code 1") as info:
        launch(vanishing_worker.work, 1, timeout=60, method="spawn")
    assert "could not load the worker" in info.value.hint and "imported by name" in str(info.value)
    assert "ModuleNotFoundError" in capfd.readouterr().err  # what the child printed


# --- Start method --------------------------------------------------------------------------------

MAPS_LINE = "7f12a0000000-7f12a1000000 r-xp 00000000 08:01 1234   {}\n"


def notebook_function() -> types.FunctionType:
    def worker() -> None:
        pass

    worker.__module__ = "__main__"
    return worker


@pytest.fixture
def notebook(monkeypatch):
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a kernel's: no __file__


def test_fork_where_nothing_started_a_gpu(monkeypatch, tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(MAPS_LINE.format("/usr/lib/libc.so.6") + MAPS_LINE.format("/opt/libcudart.so.12"))
    monkeypatch.setattr(launcher, "_PROC_MAPS", str(maps))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["fork", "spawn", "forkserver"])
    assert choose_start_method() == "fork"


NOTEBOOK_CELL = """
import sys
OFFSET = 40

def notebook_helper():
    return OFFSET + 2

def spawned_or_forked(scale):  # a forked child keeps the parent's mark on sys; a spawned one has none
    return ("forked" if hasattr(sys, "_launch_test_mark") else "spawned"), notebook_helper() * scale
"""


def run_cell(source: str, **names: object) -> dict:
    """Run `source` as a notebook cell runs: its functions belong to the module __main__."""
    namespace = {"__name__": "__main__", **names}
    exec(source, namespace)
    return namespace


def test_spawn_once_cuda_is_initialised_and_notebook_workers_travel_by_value(monkeypatch, notebook):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(sys, "_launch_test_mark", True, raising=False)
    assert choose_start_method() == "spawn"
    # A worker from the notebook, calling another of its functions that reads one of its constants.
    worker = run_cell(NOTEBOOK_CELL)["spawned_or_forked"]
    assert choose_start_method(worker, (1,)) == "spawn"
    assert launch(worker, 1, args=(10,), timeout=60) == [("spawned", 420)]  # one fresh interpreter
    # What cloudpickle cannot take (a lock) is refused with what to do, as before.
    with pytest.raises(LaunchError, match="CUDA is initialised in this process") as info:
        launch(notebook_function(), 1, args=(threading.Lock(),))
    assert "torch.cuda.device_count()" in str(info.value)


def test_spawn_once_the_cuda_driver_was_started_except_what_only_fork_can_run(
    monkeypatch, tmp_path, notebook
):
    maps = tmp_path / "maps"
    maps.write_text(MAPS_LINE.format("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"))
    monkeypatch.setattr(launcher, "_PROC_MAPS", str(maps))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    # Not really loaded here, so the driver cannot be asked: that counts as started.
    assert choose_start_method() == choose_start_method(report_env) == "spawn"
    # A notebook's function is spawned too, by value; only what cloudpickle cannot take forks.
    assert choose_start_method(notebook_function()) == "spawn"
    assert choose_start_method(notebook_function(), (threading.Lock(),)) == "fork"
    # Asked, a driver answers CUDA_SUCCESS once cuInit ran, CUDA_ERROR_NOT_INITIALIZED (3) before.
    monkeypatch.setattr(gpus, "_already_loaded", FakeLibcuda(0))
    assert choose_start_method() == "spawn"
    monkeypatch.setattr(gpus, "_already_loaded", FakeLibcuda(3))
    assert choose_start_method() == "fork"  # CUDA builds load the driver at `import torch`


def fails_as_in_a_forked_child(message: str) -> None:
    raise RuntimeError(message)


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: initialization error",  # CUDA, forked after the parent started the driver
        "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, ...",
        "Unable to handle autograd's threading in combination with fork-based multiprocessing.",
    ],
)
def test_a_forked_worker_that_cannot_use_cuda_is_told_why(monkeypatch, message):
    monkeypatch.setattr(launcher, "_fork_loses_cuda", lambda: True)
    with pytest.raises(WorkerError, match="forked from a process that had already started CUDA"):
        launch(fails_as_in_a_forked_child, 1, args=(message,), timeout=10, method="fork")
    monkeypatch.setattr(launcher, "_fork_loses_cuda", lambda: False)
    with pytest.raises(WorkerError) as info:
        launch(fails_as_in_a_forked_child, 1, args=(message,), timeout=10, method="fork")
    assert info.value.hint == ""


def test_notebook_functions_among_the_arguments_count_too(monkeypatch, tmp_path, notebook):
    maps = tmp_path / "maps"
    maps.write_text(MAPS_LINE.format("/usr/lib/x86_64-linux-gnu/libcuda.so.1"))
    monkeypatch.setattr(launcher, "_PROC_MAPS", str(maps))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    # An importable worker given a notebook's function (as the exercise checks are): by value.
    assert choose_start_method(report_env, (notebook_function(),)) == "spawn"
    assert choose_start_method(report_env, (1, "a")) == "spawn"
    with pytest.raises(LaunchError, match=r"'worker' \(the worker or its arguments\) is defined in"):
        launch(report_env, 1, args=(notebook_function(),), method="spawn")


class SettingsModule(types.ModuleType):
    """A module of a ModuleType subclass, as torch's config modules are (torch._dynamo.config)."""


def test_modules_of_a_subclass_travel_by_name_with_a_notebooks_worker(monkeypatch, notebook):
    settings = SettingsModule("course_test_settings")
    settings.flag = 3
    monkeypatch.setitem(sys.modules, "course_test_settings", settings)
    reads = run_cell("def reads():\n    return settings.flag\n", settings=settings)["reads"]
    shipped = launcher._shipped(reads, ())
    assert shipped is not None and shipped() == 3
    assert launcher._shipped(report_env, ()) is None  # importable by name: nothing to send by value


def test_autograds_gpu_threads_make_fork_unsafe(monkeypatch, tmp_path, notebook):
    tasks = tmp_path / "task"
    for tid, name in ((100, "python"), (101, "pt_main_thread"), (102, "ZMQbg/Reaper")):
        (tasks / str(tid)).mkdir(parents=True)
        (tasks / str(tid) / "comm").write_text(name + "\n")
    (tasks / "103").mkdir()  # a thread that ended while the folder was read: no comm
    assert not launcher._autograd_threads_started(str(tasks))
    monkeypatch.setattr(launcher, "_PROC_TASKS", str(tasks))
    monkeypatch.setattr(launcher, "_fork_loses_cuda", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert choose_start_method(notebook_function()) == "fork"
    (tasks / "104").mkdir()
    (tasks / "104" / "comm").write_text("pt_autograd_0\n")  # after a backward() on a GPU machine
    assert launcher._autograd_threads_started(str(tasks))
    assert choose_start_method(notebook_function()) == choose_start_method(report_env) == "spawn"
    assert launcher._start_method_and_reason(notebook_function())[1].startswith("autograd's GPU threads")
    assert not launcher._autograd_threads_started(str(tmp_path / "missing"))  # not Linux


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads are read from /proc (Linux)")
def test_a_thread_with_autograds_name_is_seen_in_this_process():
    libc = ctypes.CDLL(None)
    named, done = threading.Event(), threading.Event()

    def as_autograd_names_its_gpu_thread() -> None:
        libc.prctl(15, b"pt_autograd_0")  # PR_SET_NAME: this thread's name
        named.set()
        done.wait(10)

    thread = threading.Thread(target=as_autograd_names_its_gpu_thread)
    thread.start()
    try:
        assert named.wait(10) and launcher._autograd_threads_started()
    finally:
        done.set()
        thread.join()
    # join() returns when the thread's Python code ends; the system thread, still named, exits just after.
    task = Path(f"/proc/self/task/{thread.native_id}")
    deadline = time.monotonic() + 30
    while task.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if torch.version.cuda is None:  # a CPU build never starts them, backward() or not
        torch.nn.Linear(2, 1)(torch.ones(1, 2)).sum().backward()
        assert not launcher._autograd_threads_started()


def test_no_maps_file_means_no_driver_to_see(tmp_path):
    assert launcher._fork_loses_cuda(str(tmp_path / "missing")) is False


def test_without_fork_a_notebook_function_is_refused_with_what_to_do(monkeypatch, notebook):
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["spawn"])  # as on Windows
    assert choose_start_method() == "spawn"
    with pytest.raises(LaunchError, match="This platform has no fork") as info:
        launch(notebook_function(), 2)
    assert "WSL2" in str(info.value) and ".py file" in str(info.value)


# --- The environment, against a real torchrun -----------------------------------------------------

ENV_DUMP = """
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".json"), "w") as file:
    json.dump(dict(os.environ), file)
"""


def environment() -> dict[str, str]:
    return dict(os.environ) | {"is_torchelastic_launched": str(dist.is_torchelastic_launched())}


def test_environment_is_what_a_real_torchrun_sets(tmp_path):
    from course_utils.processes import run_torchrun

    script = tmp_path / "env_dump.py"
    script.write_text(ENV_DUMP)
    run_torchrun(script, [str(tmp_path)], nproc_per_node=2, timeout=60)
    ours = launch(environment, 2, timeout=10)

    def added(env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if os.environ.get(k) != v}

    for rank in range(2):
        theirs = added(json.loads((tmp_path / f"{rank}.json").read_text()))
        mine = added(ours[rank])
        assert mine.pop("is_torchelastic_launched") == "True"
        theirs.pop("TMPDIR")  # run_torchrun's: torchrun's temporary files go there
        theirs.pop("TORCHELASTIC_SIGNALS_TO_HANDLE")  # torchrun's agent's own setting, inherited
        assert sorted(mine) == sorted(theirs)
        for key in set(mine) - {"MASTER_PORT", "TORCHELASTIC_ERROR_FILE"}:
            assert (key, mine[key]) == (key, theirs[key])
        assert Path(theirs["TORCHELASTIC_ERROR_FILE"]).parts[-2:] == (str(rank), "error.json")
        assert Path(mine["TORCHELASTIC_ERROR_FILE"]).name == f"error-{rank}.json"  # one folder, no subfolders
        assert mine["RANK"] == mine["LOCAL_RANK"] == str(rank) and mine["MASTER_ADDR"] == "127.0.0.1"
    assert ours[0]["MASTER_PORT"] == ours[1]["MASTER_PORT"]
    assert not Path(ours[0]["TORCHELASTIC_ERROR_FILE"]).parent.exists()  # removed afterwards


def large_result() -> torch.Tensor:
    return torch.arange(3_000_000, dtype=torch.float32) + int(os.environ["RANK"])


def test_a_result_larger_than_a_pipe_comes_back_whole():
    # Far more than a pipe holds: the parent reads it piece by piece, never blocking.
    results = launch(large_result, 2, timeout=30)
    for rank, tensor in enumerate(results):
        assert torch.equal(tensor, torch.arange(3_000_000, dtype=torch.float32) + rank)


class OnlyHere:
    """An object pickled by reference to a function that exists in the rank only."""

    def __reduce__(self):
        return (globals()["made_in_the_rank"], ())


def returns_what_the_parent_cannot_read():
    def made_in_the_rank():
        return None

    made_in_the_rank.__qualname__ = "made_in_the_rank"
    globals()["made_in_the_rank"] = made_in_the_rank  # in this rank's module only
    return OnlyHere()


def test_a_result_the_launcher_cannot_unpickle_is_the_rank_s_failure_named():
    with pytest.raises(WorkerError, match=r"rank 0 of 1 raised .*could not be unpickled by the launcher"):
        launch(returns_what_the_parent_cannot_read, 1, timeout=30)


def test_a_tiny_timeout_is_a_launch_timeout_or_a_result_never_a_store_error():
    for _ in range(3):
        try:
            assert launch(report_env, 2, timeout=1e-3) is not None
        except LaunchTimeoutError:
            pass


def test_the_launchers_reports_come_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    failed = str(WorkerError(1, 2, "ValueError", "bad batch", traceback="Traceback ..."))
    assert failed.startswith("rank 1（共 2 个）抛出了 ValueError: bad batch\n")
    assert failed.endswith(
        "其他 rank 已被停止。工作进程的 traceback（回溯信息）在这个错误的 `.traceback` 里；"
        "错误没有被捕获时，它显示在这个错误的上方。"
    )
    assert str(LaunchTimeoutError([0, 1], 2, 1.0)).startswith("1 秒后超时：2 个 rank 中的 rank 0, 1 仍在运行")
    nprocs_zero = r"^nprocs 必须是进程数，在一台机器上是 1 到 64 之间的整数，而不是 0$"
    with pytest.raises(ValueError, match=nprocs_zero):
        launch(print, 0)
