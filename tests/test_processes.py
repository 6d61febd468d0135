"""The public face of `course_utils.processes`: what notebooks import, and what the wing depends on."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from processes import left_behind

import course_utils.processes as wing
from course_utils.processes import launch, run_nodes, run_python, run_torchrun, watchdog

WING = Path(wing.__file__).parent


def test_every_public_name_is_the_one_its_module_defines():
    for name in wing.__all__:
        obj = getattr(wing, name)
        module = getattr(obj, "__module__", None)
        if module is not None:  # a function or class: defined inside the wing, once
            assert module.startswith("course_utils.processes."), (name, module)
    assert wing.launch.__module__ == "course_utils.processes.launcher"
    assert wing.run_python.__module__ == "course_utils.processes.child_python"
    assert wing.run_torchrun.__module__ == "course_utils.processes.torchrun"
    assert wing.free_port.__module__ == "course_utils.processes.supervision"


def _course_imports(path: Path) -> set[str]:
    """The `course_utils` modules that the file at `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("course_utils")}
    return found


def test_the_wing_depends_on_no_lesson_module_but_the_driver_check():
    """Starting processes does not depend on choosing GPUs: only `gpus.cuda_driver_started`, and on
    `i18n` for the language of its messages and `_checks` for the checks of its arguments."""
    outside = set()
    for path in WING.glob("*.py"):
        outside |= {m for m in _course_imports(path) if not m.startswith("course_utils.processes")}
    assert outside == {"course_utils.gpus", "course_utils.i18n", "course_utils._checks"}


# --- Callers killed outright, interrupted, or left waiting -------------------------------------
# Each test forks a caller from this process (as a Jupyter kernel would call a launcher), so no
# interpreter has to start; the caller's temporary files go to a folder of the test's own.


LINUX = sys.platform.startswith("linux")
# What every started process does: start two children (one in its own group, one in its own
# session, as a DataLoader worker and a daemon would), say so with a file, then wait.
FAMILY = """
import os, subprocess, sys, time
subprocess.Popen(["sleep", "600"])
subprocess.Popen(["sleep", "600"], start_new_session=True)
open(os.path.join(sys.argv[1], f"up-{os.getpid()}"), "w").close()
time.sleep(600)
"""


def family_rank(signals: str) -> None:
    """A rank of `launch` that starts a family, as FAMILY does."""
    exec(compile(FAMILY, "family", "exec"), {"__name__": "family"})


def _call(launcher: str, signals: str, script: str) -> None:
    """In the forked caller: start `launcher` on processes that start a family each, and wait."""
    sys.argv = ["caller", signals]
    if launcher == "launch":
        launch(family_rank, 2, args=(signals,), timeout=120)
    elif launcher == "run_python":
        run_python(FAMILY, signals, timeout=120)
    elif launcher == "run_torchrun":
        run_torchrun(script, [signals], nproc_per_node=2, timeout=120)
    else:
        run_nodes(script, [signals], nnodes=2, nproc_per_node=1, timeout=120)


def _fork_caller(launcher: str, signals: str, script: str, temp: str) -> int:
    """Fork a caller that runs `launcher`; return its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            tempfile.tempdir = temp
            _call(launcher, signals, script)
            code = 0
        except KeyboardInterrupt:
            code = 3
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    return pid


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports that `pid` and its descendants listen on, less those this test process listens
    on itself (a fork inherits them: another test's server in the same pytest worker is not the
    launch's)."""
    ports = set()
    with contextlib.suppress(psutil.Error):
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        for proc in family:
            with contextlib.suppress(psutil.Error):
                ports |= {c.laddr.port for c in proc.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    mine = {c.laddr.port for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    return ports - mine


def _still_listening(ports: set[int], grace: float) -> set[int]:
    """Those of `ports` that something on this machine still listens on after up to `grace` s."""
    deadline = time.monotonic() + grace
    while True:
        listening = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        if not ports & listening or time.monotonic() >= deadline:
            return ports & listening
        time.sleep(0.05)


@pytest.fixture
def places(tmp_path):
    """A folder for the callers' temporary files, one for the families' files, and the script."""
    temp, signals = tmp_path / "temp", tmp_path / "signals"
    temp.mkdir()
    signals.mkdir()
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    return str(temp), str(signals), str(script)


def _wait_for_families(signals: str, count: int, caller: int, timeout: float = 60.0) -> None:
    """Wait until `count` processes said their family is up (or the caller ended)."""
    deadline = time.monotonic() + timeout
    while len(os.listdir(signals)) < count and time.monotonic() < deadline:
        if os.waitpid(caller, os.WNOHANG)[0]:
            pytest.fail("the caller ended before its processes were up")
        time.sleep(0.02)
    assert len(os.listdir(signals)) >= count, "the processes did not come up"


PROCESSES = {"launch": 2, "run_python": 1, "run_torchrun": 2, "run_nodes": 2}


@pytest.mark.skipif(not LINUX, reason="what outlives a killed caller is cleaned up fully on Linux only")
@pytest.mark.parametrize("moment", ["starting", "running"])
@pytest.mark.parametrize("launcher", list(PROCESSES))
def test_a_caller_killed_outright_leaves_nothing(places, launcher, moment):
    """SIGKILL to the caller while its processes start, or once they run with their families:
    no process (descendants included), no listening port and no temporary file is left."""
    temp, signals, script = places
    caller = _fork_caller(launcher, signals, script, temp)
    ports: set[int] = set()
    if moment == "starting":
        time.sleep(0.1)
    else:
        _wait_for_families(signals, PROCESSES[launcher], caller)
        ports = _listening_ports(caller)
    os.kill(caller, signal.SIGKILL)
    os.waitpid(caller, 0)
    assert left_behind(grace=10) == []
    assert os.listdir(temp) == []
    # Nobody listens there any more, after the same grace as for the processes. (Binding the port would
    # prove too much: the killed processes' connections may linger in the kernel, in TIME_WAIT.)
    assert _still_listening(ports, grace=10) == set()


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
@pytest.mark.parametrize("delay", [0.02, 0.1, 0.3])
def test_ctrl_c_while_ranks_start_stops_the_launch(places, delay):
    """An interrupt that arrives while ranks are being forked is not lost in a fork hook."""
    temp, _, _ = places
    # Held until the child's own handler is in place: on a busy machine the child may not have run a
    # line when the SIGINT comes, and this process's handler would raise it outside the child's `try`.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            tempfile.tempdir = temp
            launch(time.sleep, 32, args=(600,), timeout=120)
        except KeyboardInterrupt:
            code = 3
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    time.sleep(delay)
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 60  # far less than the launch's timeout of 120 s
    while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    if not done[0]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the interrupted launch ran on")
    assert os.waitstatus_to_exitcode(done[1]) == 3  # a KeyboardInterrupt reached the caller
    assert left_behind(grace=10) == []
    assert os.listdir(temp) == []


def test_run_python_does_not_wait_for_what_the_child_left_running():
    """A grandchild holding the child's output must not keep run_python waiting, nor survive."""
    result = run_python("import subprocess; subprocess.Popen(['sleep', '1242']); print('done')", timeout=30)
    assert result.ok and result.stdout == "done\n"
    assert left_behind(grace=5) == []


# --- The watchdog signals only what it recorded, and sweeps until late starters are gone ---------


def test_the_watchdog_reads_groups_as_numbers_and_folders_in_hex_sparing_the_callers_group():
    """Forged lines, groups 0 and 1 and the caller's give nothing to signal; any path comes back whole."""
    namespace: dict = {}
    exec(watchdog._READ_LOG, namespace)
    folder = "/tmp/x\n+g77\n+d2f\n-g5"
    hexed = os.fsencode(folder).hex().encode()
    lines = [b"+g0", b"+g1", b"+g42", b"+g55", b"-g55", b"+g-3", b"+g 9", b"+gx", b"+d" + hexed, b"+dzz"]
    log = b"\n".join(lines)
    groups, folders = namespace["read_log"](log + b"\n+g77\n", {0, 1, 42})
    assert groups == {77}  # 42 is the caller's; 55 was released; the rest is no group number
    assert folders == {os.fsencode(folder)}
    with pytest.raises(ValueError, match="pgid must be a whole number from 2 to"):
        watchdog.watch_group(1)


def _dead(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def _wait_until(condition, timeout: float = 20.0) -> bool:
    """Poll `condition` until it holds or `timeout` s passed; whether it holds."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


@pytest.mark.skipif(not LINUX, reason="the watchdog sweeps marked processes through /proc on Linux only")
def test_a_temp_path_with_a_newline_cannot_make_the_watchdog_signal_anything_else(tmp_path):
    """A TMPDIR that holds "+g<group>" on a line of its own: the launch's folder inside it is removed
    when the caller is killed, and the group named in the path lives on."""
    victim = subprocess.Popen(["sleep", "600"], start_new_session=True)
    forged = tmp_path / f"t\n+g{victim.pid}\n"
    forged.mkdir()
    pid = os.fork()
    if pid == 0:
        try:
            tempfile.tempdir = str(forged)
            launch(os.kill, 1, args=(os.getpid(), signal.SIGKILL), timeout=60)  # the rank kills the caller
        finally:
            os._exit(1)
    try:
        os.waitpid(pid, 0)
        assert _wait_until(lambda: os.listdir(forged) == []), "the launch's folder was not removed"
        time.sleep(0.2)  # what the watchdog would do, it has done once the folder is gone
        assert victim.poll() is None, "the watchdog signalled a group that only the path named"
    finally:
        victim.kill()
        victim.wait()
    assert left_behind(grace=10) == []


def _canary_dead_then_pause(canary: int) -> None:
    """Between fork and exec: kill the caller, wait for the watchdog's first sweep (it kills the
    canary's group), then pause before exec, so that sweep cannot have seen the mark."""
    os.kill(os.getppid(), signal.SIGKILL)
    deadline = time.monotonic() + 20
    while not _dead(canary) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.2)


@pytest.mark.skipif(not LINUX, reason="the watchdog sweeps marked processes through /proc on Linux only")
def test_the_watchdog_sweeps_again_for_a_child_caught_between_fork_and_exec(tmp_path):
    """A child of a killed caller that execs only after the watchdog's first sweep is killed all the same."""
    pid = os.fork()
    if pid == 0:
        try:
            canary = subprocess.Popen(["sleep", "600"], start_new_session=True)
            (tmp_path / "canary").write_text(str(canary.pid))
            watchdog.watch_group(canary.pid)
            subprocess.Popen(
                ["sleep", "601"],
                env=os.environ | watchdog.mark(),
                preexec_fn=lambda: _canary_dead_then_pause(canary.pid),
            )
        finally:
            os._exit(1)
    os.waitpid(pid, 0)
    try:
        assert left_behind(grace=10) == []
    finally:
        with contextlib.suppress(ChildProcessError, ValueError):
            os.waitpid(int((tmp_path / "canary").read_text()), 0)  # adopted by this process: reap it


def _killed_caller_with_folders(tmp_path: Path) -> tuple[Path, Path]:
    """Fork a caller that makes two `temporary_folder`s, removes the second itself and makes a plain
    folder at its path again (as another program might), then is killed outright; wait for its
    watchdog to finish. Return (the folder left watched, the folder made again)."""
    pid = os.fork()
    if pid == 0:
        try:
            tempfile.tempdir = str(tmp_path)
            kept = wing.temporary_folder(prefix="course-15-")
            (Path(kept.name) / "checkpoint.pt").write_bytes(b"x")  # the watchdog removes what it holds too
            released = wing.temporary_folder(prefix="course-15-")
            released.cleanup()
            os.mkdir(released.name)
            (tmp_path / "made").write_text(f"{kept.name}\n{released.name}\n{watchdog._current.mark}")
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    os.waitpid(pid, 0)
    kept, released, mark = (tmp_path / "made").read_text().split("\n")
    watchdogs = [p for p in psutil.process_iter() if _has_argument(p, f"{watchdog.MARK}={mark}")]
    _, running = psutil.wait_procs(watchdogs, timeout=60)
    assert watchdogs and not running, "the killed caller's watchdog did not finish"
    return Path(kept), Path(released)


def _has_argument(proc: psutil.Process, argument: str) -> bool:
    """Whether `argument` is on the command line of `proc` (False for a process gone or not ours)."""
    try:
        return argument in proc.cmdline()
    except psutil.Error:
        return False


@pytest.mark.skipif(os.name != "posix", reason="the watchdog runs on POSIX only")
def test_a_temporary_folder_is_removed_when_its_caller_is_killed_outright(tmp_path):
    """A notebook's temporary_folder (15's WORK) goes when its kernel is killed, as nbval's end kills it;
    a folder it removed itself and that was made again at the same path is left alone."""
    kept, released = _killed_caller_with_folders(tmp_path)
    assert kept.name.startswith("course-15-") and kept.parent == tmp_path
    assert not kept.exists(), "the folder of a killed caller was left behind"
    assert released.is_dir(), "the watchdog removed a folder that cleanup() had released"


def test_a_temporary_folder_is_a_temporary_directory_and_refuses_a_bad_prefix(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with wing.temporary_folder(prefix="course-15-") as name:  # removed at the end of a with block
        assert Path(name).is_dir() and Path(name).parent == tmp_path
    assert not Path(name).exists()
    for prefix, error in ((None, TypeError), (15, TypeError), ("course\0", ValueError)):
        with pytest.raises(error, match="prefix"):
            wing.temporary_folder(prefix=prefix)
    assert list(tmp_path.iterdir()) == []
