"""The worker scripts of notebooks/workers, run by hand as a student would after notebook 07: never trust
an input.

Without torchrun's variables, with a wrong WORLD_SIZE, RANK or MASTER_PORT, or with a count of 0, -1
or nan, each script ends with a non-zero status and one clear line on stderr that names the variable
or the option, never a traceback. A rank whose peer never comes gives up after the wait it was given
(COURSE_GROUP_TIMEOUT_S, short here; nothing is timed) with a line that names what it waited for,
and rank 0's rendezvous store listens on MASTER_ADDR alone, not on every interface.

Each run is a child forked from this process, which has imported PyTorch (a new Python takes
seconds to import it, dozens of times here), and runs the script as `python script.py` would: its
environment is exactly the one given, SystemExit's code is its exit status and any other exception
prints its traceback (one test checks a real `python` process against that). legacy_local_rank.py is
left out on purpose: it is source article 002's parser kept unchanged, whose failure is its lesson.
"""

from __future__ import annotations

import math
import os
import runpy
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import torch

from course_utils.processes import free_port
from course_utils.processes.supervision import FORK_WARNING

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))  # as the notebooks' kernels see the workers
from workers.bucket_events import bucket_events_worker  # noqa: E402
from workers.ddp_timing import ddp_throughput_worker  # noqa: E402
from workers.fsdp_step import fsdp_step  # noqa: E402
from workers.spawn_worker import run as spawn_run  # noqa: E402

HANG_GUARD_SECONDS = 300  # only so that a run that hangs fails instead of hanging pytest
# each script the student starts with torchrun: good arguments, and its counts with their lowest value
SCRIPTS: dict[str, tuple[list[str], dict[str, int]]] = {
    "who_am_i.py": ([], {}),
    "train_ddp.py": (["--out", "{tmp}", "--cpu"], {"--epochs": 1, "--batch-size": 1}),
    "resume_training.py": (["--out", "{tmp}", "--cpu"], {"--epochs": 1, "--crash-in-epoch": 0}),
    "cnn_training.py": (["--cpu"], {"--effective-batch": 1, "--epochs": 1}),
    "preflight.py": (["--cpu"], {"--max-bytes": 1024, "--iterations": 1}),
    "ddp_trace.py": (["--out", "{tmp}", "--cpu"], {"--width": 1, "--layers": 1, "--batch": 1}),
}
# the workers that a notebook starts with `launch`: a call with good arguments, and how to start it
FUNCTIONS: dict[str, tuple[Callable[[], object], str]] = {
    "ddp_timing.py": (lambda: ddp_throughput_worker(8, 1, 0), "launch(ddp_throughput_worker, 2"),
    "bucket_events.py": (lambda: bucket_events_worker(1), "launch(bucket_events_worker, 2)"),
    "fsdp_step.py": (lambda: fsdp_step(torch.zeros(2, 64), torch.zeros(2, 64)), "launch(fsdp_step, 2"),
}


@dataclass(frozen=True)
class Finished:
    """How a forked run ended."""

    returncode: int
    stdout: str
    stderr: str

    def one_clear_line(self) -> str:
        """stderr's one line, after checking that it is one line and no traceback."""
        assert "Traceback" not in self.stderr, self.stderr
        lines = self.stderr.strip().splitlines()
        if lines[0].startswith("usage: "):  # argparse's usage, and its indented continuation lines
            lines = [line for line in lines[1:] if not line.startswith(" ")]
        assert len(lines) == 1, self.stderr
        return lines[0]


def base_env(tmp_path: Path) -> dict[str, str]:
    """What a run sees besides the launcher's variables: this environment without any of them."""
    launchers = ("RANK", "WORLD_SIZE", "MASTER_", "LOCAL_", "GROUP_", "ROLE_", "TORCHELASTIC_", "COURSE_")
    env = {name: value for name, value in os.environ.items() if not name.startswith(launchers)}
    return {**env, "TMPDIR": str(tmp_path)}


def torchrun_env(tmp_path: Path, **changes: str) -> dict[str, str]:
    """The variables torchrun gives rank 0 of one process, on a free port, with `changes`."""
    one = {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "ROLE_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    sizes = {"WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "GROUP_WORLD_SIZE": "1"}
    return {**base_env(tmp_path), **one, **sizes, "MASTER_PORT": str(free_port()), **changes}


def script(name: str, args: list[str]) -> Callable[[], object]:
    """What `python workers/NAME ARGS` runs, from notebooks/."""
    path = f"workers/{name}"

    def main() -> object:
        sys.argv = [path, *args]
        return runpy.run_path(path, run_name="__main__")

    return main


def forked(
    target: Callable[[], object], env: dict[str, str], watch: Callable[[int], None] | None = None
) -> Finished:
    """Run `target` in a child forked from this process, as Python runs a script: `env` its whole
    environment, notebooks/ its folder, SystemExit's code its status, other exceptions a traceback and 1.
    `watch(pid)` runs while the child runs."""
    out, err = (
        Path(env["TMPDIR"]) / f"{os.getpid()}-{time.monotonic_ns()}.{kind}" for kind in ("out", "err")
    )
    with warnings.catch_warnings():  # Python 3.12+ warns about forking a process with threads
        warnings.filterwarnings("ignore", message=FORK_WARNING, category=DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            for fd, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
            os.environ.clear()
            os.environ.update(env)
            os.chdir(NOTEBOOKS)
            torch.set_num_threads(1)  # a forked child has none of its parent's OpenMP threads
            try:
                target()
                status = 0
            except SystemExit as exit_:
                if isinstance(exit_.code, int) or exit_.code is None:
                    status = exit_.code or 0
                else:
                    print(exit_.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)
    ended = (0, 0)
    try:
        if watch is not None:
            watch(pid)
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while not (ended := os.waitpid(pid, os.WNOHANG))[0]:
            assert time.monotonic() < deadline, f"the run still ran after {HANG_GUARD_SECONDS} s"
            time.sleep(0.05)
    finally:
        if not ended[0]:  # a failed watch or the hang guard: the child goes too
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return Finished(os.waitstatus_to_exitcode(ended[1]), out.read_text(), err.read_text())


def filled(args: list[str], tmp_path: Path) -> list[str]:
    """`args` with {tmp} replaced by the test's folder."""
    return [arg.format(tmp=tmp_path) for arg in args]


@pytest.mark.parametrize("name", SCRIPTS)
def test_without_torchrun_a_script_says_how_to_start_it(tmp_path, name):
    args = filled(SCRIPTS[name][0], tmp_path)
    run = forked(script(name, args), base_env(tmp_path))
    assert run.returncode == 2
    command = " ".join(["torchrun --nproc-per-node=2", f"workers/{name}", *args])
    assert (
        run.one_clear_line()
        == f"RANK is not set, so no launcher started this process; start it as: {command}"
    )


@pytest.mark.parametrize("name", FUNCTIONS)
def test_without_the_launcher_a_worker_function_says_how_to_start_it(tmp_path, name):
    call, start = FUNCTIONS[name]
    run = forked(call, base_env(tmp_path))
    assert run.returncode == 2
    line = run.one_clear_line()
    assert line.startswith(f"RANK is not set, so no launcher started this process; start it as: {start}")


BAD_VARIABLES = [
    ("WORLD_SIZE", "0"),
    ("WORLD_SIZE", "two"),
    ("WORLD_SIZE", "nan"),
    ("RANK", "1"),  # WORLD_SIZE is 1
    ("RANK", "-1"),
    ("MASTER_PORT", "0"),
    ("MASTER_PORT", "65536"),
    ("MASTER_PORT", "nan"),
]


@pytest.mark.parametrize(
    ("name", "variable", "value"), [(name, *bad) for name in (*SCRIPTS, *FUNCTIONS) for bad in BAD_VARIABLES]
)
def test_a_wrong_variable_is_named_in_one_line(tmp_path, name, variable, value):
    target = FUNCTIONS[name][0] if name in FUNCTIONS else script(name, filled(SCRIPTS[name][0], tmp_path))
    run = forked(target, torchrun_env(tmp_path, **{variable: value}))
    assert run.returncode == 2
    line = run.one_clear_line()
    assert line.startswith(f"{variable} must be a whole number ") and "; start this process as: " in line


BAD_COUNTS = sorted(
    {
        (name, option, value)
        for name, (_, counts) in SCRIPTS.items()
        for option in counts
        for value in ("-1", "nan")
    }
    | {
        (name, option, str(low - 1))
        for name, (_, counts) in SCRIPTS.items()
        for option, low in counts.items()
    }
)


@pytest.mark.parametrize(("name", "option", "value"), BAD_COUNTS)
def test_a_count_below_its_least_is_named_by_its_option(tmp_path, name, option, value):
    args = [*filled(SCRIPTS[name][0], tmp_path), option, value]
    run = forked(script(name, args), base_env(tmp_path))  # the arguments are checked before the variables
    assert run.returncode == 2
    low = SCRIPTS[name][1][option]
    assert run.one_clear_line() == (
        f"{name}: error: argument {option}: must be a whole number of at least {low}, not {value!r}"
    )


BATCH = torch.zeros(2, 64)
BAD_CALLS = [
    *((lambda v: ddp_throughput_worker(8, v, 0), "steps", v) for v in (0, -1, math.nan, True, "8")),
    *((lambda v: bucket_events_worker(v), "steps", v) for v in (0, -1, math.nan, True)),
    *((lambda v: bucket_events_worker(1, v), "bucket_cap_mb", v) for v in (0, -1, math.nan, math.inf, "8")),
    *((lambda v: fsdp_step(BATCH, BATCH, lr=v), "lr", v) for v in (0, -1, math.nan, math.inf, "8")),
]


@pytest.mark.parametrize(("call", "name", "value"), BAD_CALLS)
def test_a_worker_function_refuses_a_bad_number_by_name(call, name, value):
    """Called from Python, a worker function refuses a bad argument at once, before it joins a group."""
    with pytest.raises(ValueError, match=f"^{name} must be"):
        call(value)


def test_a_real_python_without_torchrun_prints_the_same_one_line(tmp_path):
    """The forked runs above stand for `python workers/train_ddp.py ...`: here is the real one."""
    args = ["--out", str(tmp_path), "--cpu"]
    real = subprocess.run(
        [sys.executable, "workers/train_ddp.py", *args],
        cwd=NOTEBOOKS,
        env=base_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
    )
    run = forked(script("train_ddp.py", args), base_env(tmp_path))
    assert real.returncode == run.returncode == 2
    assert real.stderr == run.stderr and run.one_clear_line().startswith("RANK is not set")


def peer_never_comes(name: str, tmp_path: Path, rank: int, port: int) -> Callable[[], object]:
    """Rank `rank` of a world of 2 on 127.0.0.1:port, whose other rank is never started."""
    if name == "spawn_worker.py":
        return lambda: spawn_run(rank, 2, port, str(tmp_path))
    if name in FUNCTIONS:
        return FUNCTIONS[name][0]
    also = ["--all-reduce"] if name == "who_am_i.py" else []  # without it, it never joins a group
    return script(name, [*filled(SCRIPTS[name][0], tmp_path), *also])


WAITERS = [(name, 0) for name in (*SCRIPTS, *FUNCTIONS, "spawn_worker.py")] + [("train_ddp.py", 1)]


@pytest.mark.parametrize(("name", "rank"), WAITERS)
def test_a_rank_whose_peer_never_comes_gives_up_after_its_wait_and_names_it(tmp_path, name, rank):
    port = free_port()
    sizes = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank)}
    env = torchrun_env(tmp_path, MASTER_PORT=str(port), COURSE_GROUP_TIMEOUT_S="1", **sizes)
    run = forked(peer_never_comes(name, tmp_path, rank, port), env)
    assert run.returncode == 1
    line = run.stderr.strip().splitlines()[-1]  # after PyTorch's own log lines, if any
    assert line.startswith(
        f"rank {rank} of WORLD_SIZE=2 waited 1 s at MASTER_ADDR:MASTER_PORT=127.0.0.1:{port} "
        f"for the other ranks ({1 - rank}), and not all of them came ("
    )
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("name", ["train_ddp.py", "resume_training.py", "spawn_worker.py", "who_am_i.py"])
def test_rank_0_s_store_listens_on_master_addr_alone(tmp_path, name):
    """env:// (train_ddp.py, who_am_i.py), a TCPStore of the script's own (resume_training.py) and
    tcp:// (spawn_worker.py): each uses the store that rank 0 hosts on 127.0.0.1, never one on every
    interface. Rank 0 waits for a peer that never comes, long enough to be looked at, then is stopped."""
    port = free_port()
    env = torchrun_env(
        tmp_path, MASTER_PORT=str(port), COURSE_GROUP_TIMEOUT_S="60", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2"
    )
    seen: list[list[str]] = []

    def look(pid: int) -> None:
        child = psutil.Process(pid)
        while not seen:
            assert child.status() != psutil.STATUS_ZOMBIE, "rank 0 ended before it listened"
            connections = child.net_connections("inet")
            found = [
                c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN and c.laddr.port == port
            ]
            if found:
                seen.append(found)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    run = forked(peer_never_comes(name, tmp_path, 0, port), env, watch=look)
    assert run.returncode == -signal.SIGKILL
    assert seen == [["127.0.0.1"]]


def test_ddp_trace_without_cpu_needs_a_gpu_for_its_local_rank(tmp_path):
    """On a machine that shows no GPU (faked where there is one), the NCCL run stops with argparse's line."""
    main = script("ddp_trace.py", ["--out", str(tmp_path)])

    def without_gpus() -> object:
        torch.cuda.device_count = lambda: 0  # in the forked child only
        return main()

    run = forked(without_gpus, torchrun_env(tmp_path))
    assert run.returncode == 2
    assert run.one_clear_line() == (
        "ddp_trace.py: error: GPU 0 (LOCAL_RANK) is not on this machine: one process per GPU, or --cpu"
    )
