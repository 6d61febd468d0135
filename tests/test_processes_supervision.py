"""The supervision core: timeouts, environments, process groups stopped with grace, loopback ports."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from processes import is_gone, wait_until_gone

from course_utils._checks import MAX_TIMEOUT, environment, timeout_seconds
from course_utils.processes import run_python, run_torchrun, supervision
from course_utils.processes.supervision import (
    LOOPBACK,
    LaunchError,
    child_env,
    free_port,
    gloo_env,
    listening_socket,
    loopback_interface,
    signal_group,
    stop,
)

posix_only = pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups: POSIX")

# A parent that starts a child in its own group, prints the child's pid, and (with "stubborn")
# ignores SIGTERM like a worker saving a checkpoint.
PARENT = """
import signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)
time.sleep(120)
"""


def start_group(kind: str = "polite") -> tuple[subprocess.Popen, int]:
    """A process leading its own group, and the pid of a child it started in that group."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, kind], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    with parent.stdout:
        return parent, int(parent.stdout.readline())


def members_of(parent: subprocess.Popen):
    return lambda: [(parent.pid, parent.poll() is None)]


@pytest.mark.parametrize("seconds", [0.5, 1, 60, MAX_TIMEOUT])
def test_a_timeout_in_range_is_taken_as_seconds(seconds):
    assert timeout_seconds("timeout", seconds) == float(seconds)


@pytest.mark.parametrize("seconds", [0, -1, math.inf, -math.inf, math.nan, MAX_TIMEOUT * 2, 1e15])
def test_a_timeout_out_of_range_says_what_to_pass(seconds):
    with pytest.raises(
        ValueError, match=r"wait must be a positive number of seconds, at most 604800 \(a week\)"
    ):
        timeout_seconds("wait", seconds)


@pytest.mark.parametrize("seconds", ["60", None, True, [60]])
def test_a_timeout_that_is_no_number_says_what_to_pass(seconds):
    with pytest.raises(TypeError, match="timeout must be a number of seconds, such as 60"):
        timeout_seconds("timeout", seconds)


def test_env_changes_set_and_remove_variables_of_the_child_only(monkeypatch):
    monkeypatch.setenv("COURSE_KEPT", "1")
    monkeypatch.setenv("COURSE_GONE", "1")
    env = child_env({"COURSE_GONE": None, "COURSE_NEW": "x"})
    assert env["COURSE_KEPT"] == "1" and env["COURSE_NEW"] == "x" and "COURSE_GONE" not in env
    assert os.environ["COURSE_GONE"] == "1" and "COURSE_NEW" not in os.environ
    assert environment("env", None) == {} and child_env() == dict(os.environ)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ([("X", "1")], "env must be a mapping such as"),
        ("X=1", "env must be a mapping"),
        ({"": "1"}, "variable names"),
        ({1: "1"}, "variable names"),
        ({"X": 1}, "X is int 1: write it as a string, e.g. '1'"),
    ],
)
def test_a_bad_env_says_what_to_pass(env, match):
    with pytest.raises(TypeError, match=match):
        environment("env", env)


@posix_only
def test_signalling_a_group_reaches_what_its_leader_started():
    parent, child = start_group()
    signal_group(parent.pid, signal.SIGTERM)
    parent.wait(10)
    assert wait_until_gone([child], timeout=10) == []


@posix_only
def test_a_group_is_signalled_after_its_leader_ended():
    parent, child = start_group()
    os.kill(parent.pid, signal.SIGKILL)  # the leader alone: its child lives on in the group
    parent.wait(10)
    assert not is_gone(child)
    signal_group(parent.pid, signal.SIGKILL, running=False)
    assert wait_until_gone([child], timeout=10) == []


@posix_only
def test_stop_waits_for_a_polite_group_and_kills_a_stubborn_one(monkeypatch):
    parent, child = start_group("stubborn")
    started = time.monotonic()
    stop(members_of(parent), grace=0.5)
    parent.wait(10)
    assert parent.returncode == -signal.SIGKILL  # SIGTERM was ignored: SIGKILL after the grace period
    assert time.monotonic() - started >= 0.5
    assert wait_until_gone([child], timeout=10) == []
    polite, polite_child = start_group()
    stop(members_of(polite), grace=60)  # ends at once: no need to wait out the grace period
    polite.wait(10)
    assert polite.returncode == -signal.SIGTERM
    assert wait_until_gone([polite_child], timeout=10) == []


@posix_only
def test_a_ctrl_c_while_stopping_kills_at_once(monkeypatch):
    parent, child = start_group("stubborn")
    calls = {"n": 0}
    real_sleep = time.sleep

    def interrupted_sleep(seconds):
        calls["n"] += 1
        if calls["n"] == 3:  # during the grace period, after SIGTERM
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(supervision.time, "sleep", interrupted_sleep)
    with pytest.raises(KeyboardInterrupt):
        stop(members_of(parent), grace=600)
    monkeypatch.setattr(supervision.time, "sleep", real_sleep)
    parent.wait(10)
    assert parent.returncode == -signal.SIGKILL
    assert wait_until_gone([child], timeout=10) == []


def test_a_listening_socket_is_on_loopback_and_a_taken_port_is_a_clear_error():
    with listening_socket(None) as sock:
        host, port = sock.getsockname()
        assert host == LOOPBACK
        with pytest.raises(
            LaunchError, match=f"port {port} on 127.0.0.1 is already in use.*master_port=None"
        ):
            listening_socket(port)
    with socket.socket() as probe:
        probe.bind((LOOPBACK, free_port()))


@pytest.mark.parametrize("port", [0, -1, 65536, "29500", 2.5, True])
def test_a_port_that_is_no_port_number_is_refused(port):
    with pytest.raises(ValueError, match="master_port must be an int from 1 to 65535"):
        listening_socket(port)
    with pytest.raises(LaunchError):
        listening_socket(port)


def test_gloo_stays_on_loopback_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    interface = loopback_interface()
    assert gloo_env() == ({"GLOO_SOCKET_IFNAME": interface} if interface else {})
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    assert gloo_env() == {}  # the user's choice stands


def test_a_forked_child_that_finds_its_parent_gone_exits_at_once():
    # The parent died before the child asked for the parent-death signal: it must not run on.
    proc = mp.get_context("fork").Process(target=supervision.isolate, args=(-1,))
    proc.start()
    proc.join(5)
    assert proc.exitcode == (1 if sys.platform.startswith("linux") else 0)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"A\0B": "1"}, "holds neither '=' nor a NUL"),
        ({"A=B": "1"}, "holds neither '=' nor a NUL"),
        ({"A": "x\0y"}, "the value of A holds a NUL character"),
    ],
)
def test_env_names_and_values_that_no_environment_can_carry_are_refused(env, match):
    with pytest.raises(ValueError, match=match):
        environment("env", env)


def test_a_timeout_too_big_for_a_float_is_refused_like_any_too_long_timeout():
    with pytest.raises(ValueError, match="at most 604800"):
        timeout_seconds("timeout", 10**400)


@pytest.mark.parametrize("host", ["192.0.2.1"])  # TEST-NET-1: an address, but of no machine here
def test_a_host_that_is_no_address_here_is_refused_by_name(host):
    with pytest.raises(ValueError, match="host must be an IPv4 address of this machine"):
        supervision.free_port(host)
    with pytest.raises(ValueError, match="host must be an IPv4 address of this machine"):
        supervision.listening_socket(None, host)


def test_a_bad_timeout_is_explained_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(
        ValueError, match=r"^timeout 必须是正的秒数，最多 604800（一周），而不是 -1；例如传 timeout=60$"
    ):
        timeout_seconds("timeout", -1)


@pytest.mark.parametrize("value", ["yes", "no", 1, None])
@pytest.mark.parametrize("call", ["run_python", "run_torchrun"])
def test_check_is_true_or_false_not_a_string_that_would_count_as_true(call, value, tmp_path):
    script = tmp_path / "w.py"
    script.write_text("")
    with pytest.raises(TypeError, match=f"check is True or False, not {value!r}"):
        if call == "run_python":
            run_python("pass", check=value)
        else:
            run_torchrun(script, check=value)
