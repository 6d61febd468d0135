"""course_utils.worker_env: the worker scripts' checks of their launcher's variables, their counts, and
their bounded wait for the other ranks, with rank 0's store bound to MASTER_ADDR.

The scripts themselves, run in processes without torchrun, are tests/test_worker_inputs.py.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from datetime import timedelta

import psutil
import pytest
import torch.distributed as dist

from course_utils import worker_env
from course_utils.processes import free_port
from course_utils.worker_env import WorkerExit, at_least, check_torchrun_env, joining

GOOD = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "0",
    "GROUP_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}


@pytest.fixture
def env(monkeypatch):
    """torchrun's variables for rank 1 of 4 (two nodes of two), and nothing else of the launchers'."""
    for name in (*GOOD, worker_env.TIMEOUT_VARIABLE, "TORCHELASTIC_USE_AGENT_STORE", "COURSE_LANGUAGE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in GOOD.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(worker_env, "_HOSTED", {})  # a store hosted by a test closes with it
    return monkeypatch


def test_good_variables_pass(env):
    check_torchrun_env("GROUP_RANK", "GROUP_WORLD_SIZE")
    env.setenv(worker_env.TIMEOUT_VARIABLE, " 2.5 ")
    check_torchrun_env()


@pytest.mark.parametrize("name", ["RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"])
def test_a_missing_variable_says_how_to_start_the_worker(env, capsys, name):
    env.setenv(name, " ")  # empty counts as missing, as it does for env://
    with pytest.raises(WorkerExit) as stopped:
        check_torchrun_env(launch="launch(worker, 2)")
    assert stopped.value.code == 2
    started = "start it as: launch(worker, 2)"
    assert str(stopped.value) == f"{name} is not set, so no launcher started this process; {started}"
    assert capsys.readouterr().err == f"{stopped.value}\n"  # the process's one line on stderr


def test_a_variable_named_in_also_must_be_set_and_the_default_start_is_torchrun(env, monkeypatch):
    env.delenv("GROUP_RANK")
    monkeypatch.setattr(sys, "argv", ["workers/train_ddp.py", "--out", "run"])
    check_torchrun_env()  # not read: not needed
    with pytest.raises(
        WorkerExit, match=r"^GROUP_RANK is not set.*: torchrun --nproc-per-node=2 workers/tr"
    ) as stopped:
        check_torchrun_env("GROUP_RANK")
    assert str(stopped.value).endswith(": torchrun --nproc-per-node=2 workers/train_ddp.py --out run")
    with pytest.raises(ValueError, match=r"also names variables that torchrun does not set: .'RANKS'"):
        check_torchrun_env("RANKS")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("WORLD_SIZE", "0", "WORLD_SIZE must be a whole number from 1 to 2147483647, not 0"),
        ("WORLD_SIZE", "nan", "WORLD_SIZE must be a whole number (an int such as 2), not 'nan'"),
        ("WORLD_SIZE", "1" + "0" * 30, "WORLD_SIZE must be a whole number from 1 to 2147483647"),
        ("WORLD_SIZE", "1", "LOCAL_WORLD_SIZE must be a whole number from 1 to 1, not 2"),
        ("RANK", "4", "RANK must be a whole number from 0 to 3, not 4"),
        ("RANK", "-1", "RANK must be a whole number from 0 to 3, not -1"),
        ("RANK", "1.0", "RANK must be a whole number (an int such as 2), not '1.0'"),
        ("LOCAL_RANK", "2", "LOCAL_RANK must be a whole number from 0 to 1, not 2"),  # LOCAL_WORLD_SIZE=2
        ("GROUP_RANK", "2", "GROUP_RANK must be a whole number from 0 to 1, not 2"),
        ("LOCAL_WORLD_SIZE", "5", "LOCAL_WORLD_SIZE must be a whole number from 1 to 4, not 5"),
        ("GROUP_WORLD_SIZE", "", "GROUP_WORLD_SIZE must be a whole number (an int such as 2), not ''"),
        ("MASTER_PORT", "0", "MASTER_PORT must be a whole number from 1 to 65535, not 0"),
        ("MASTER_PORT", "65536", "MASTER_PORT must be a whole number from 1 to 65535, not 65536"),
        ("MASTER_PORT", "http", "MASTER_PORT must be a whole number (an int such as 2), not 'http'"),
    ],
)
def test_a_wrong_count_or_port_is_named_with_its_range(env, name, value, message):
    env.setenv(name, value)
    with pytest.raises(WorkerExit) as stopped:
        check_torchrun_env(launch="torchrun --nproc-per-node=2 workers/x.py")
    assert stopped.value.code == 2
    assert str(stopped.value).startswith(message)
    assert str(stopped.value).endswith("; start this process as: torchrun --nproc-per-node=2 workers/x.py")


def test_without_local_world_size_a_local_rank_is_below_world_size(env):
    env.delenv("LOCAL_WORLD_SIZE")
    env.setenv("LOCAL_RANK", "3")
    check_torchrun_env()
    env.setenv("LOCAL_RANK", "4")
    with pytest.raises(WorkerExit, match="LOCAL_RANK must be a whole number from 0 to 3, not 4"):
        check_torchrun_env()


def test_a_master_addr_that_does_not_resolve_is_named(env, monkeypatch):
    def unknown(*args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    env.setenv("MASTER_ADDR", "node-0.example")
    with pytest.raises(WorkerExit, match=r"^MASTER_ADDR='node-0.example' is not an address or host name"):
        check_torchrun_env()


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon", "1e9"])
def test_a_wrong_group_timeout_is_named(env, value):
    env.setenv(worker_env.TIMEOUT_VARIABLE, value)
    with pytest.raises(WorkerExit, match=f"^{worker_env.TIMEOUT_VARIABLE} must be .*number of seconds"):
        check_torchrun_env()


def test_the_chinese_notebook_gets_the_message_in_chinese(env):
    env.setenv("COURSE_LANGUAGE", "zh-CN")
    env.delenv("RANK")
    with pytest.raises(WorkerExit, match="RANK 没有设置") as stopped:
        check_torchrun_env(launch="launch(worker, 2)")
    assert str(stopped.value).endswith("launch(worker, 2)")


@pytest.mark.parametrize("text", ["0", "-1", "nan", "1.5", "", "two", "inf"])
def test_at_least_refuses_what_is_not_a_count_and_argparse_names_the_option(capsys, text):
    parser = argparse.ArgumentParser(prog="train_ddp.py")
    parser.add_argument("--epochs", type=at_least(1))
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--epochs", text])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    error = "train_ddp.py: error: argument --epochs: "
    assert last == f"{error}must be a whole number of at least 1, not {text!r}"


def test_at_least_gives_back_the_count():
    assert at_least(1)("3") == 3 and at_least(0)("0") == 0 and at_least(1024)(" 2048 ") == 2048
    with pytest.raises(argparse.ArgumentTypeError, match="at least 1024, not '1023'"):
        at_least(1024)("1023")
    with pytest.raises(TypeError, match="low must be a whole number"):
        at_least("1")


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("rank", 2, ValueError),
        ("rank", "0", TypeError),
        ("world_size", 0, ValueError),
        ("master_port", 70000, ValueError),
        ("master_addr", "", ValueError),
        ("master_addr", 127, TypeError),
    ],
)
def test_joining_refuses_a_bad_value_given_by_name(env, argument, value, error):
    given = {"rank": 1, "world_size": 2, "master_addr": "127.0.0.1", "master_port": 29500, argument: value}
    with pytest.raises(error, match=argument), joining(**given):
        pass


def test_joining_yields_the_group_timeout(env):
    with joining() as timeout:
        assert timeout == timedelta(seconds=worker_env.DEFAULT_TIMEOUT_S)
    env.setenv(worker_env.TIMEOUT_VARIABLE, "2.5")
    with joining() as timeout:
        assert timeout == timedelta(seconds=2.5)


def _listening(port: int) -> list[str]:
    """The addresses on which this process listens on `port`."""
    return [
        c.laddr.ip
        for c in psutil.Process().net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]


def test_rank_0_hosts_the_store_on_master_addr_alone_unless_a_launcher_does(env):
    port = free_port()
    env.setenv("RANK", "0")
    env.setenv("MASTER_PORT", str(port))
    env.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    with joining():
        assert _listening(port) == []  # torchrun, or the course launcher, hosts it
    env.delenv("TORCHELASTIC_USE_AGENT_STORE")
    with joining():
        assert _listening(port) == ["127.0.0.1"]  # not "::" or "0.0.0.0", every interface
    client = dist.TCPStore("127.0.0.1", port, timeout=timedelta(seconds=30))
    client.set("key", "value")  # the store works, and stays while the process lives
    assert worker_env._HOSTED[port].get("key") == b"value"
    with joining():  # again, in the same process: the same store
        assert _listening(port) == ["127.0.0.1"]


def test_a_host_name_that_resolves_here_to_loopback_is_left_to_pytorch(env, monkeypatch):
    """Debian resolves a machine's own name to 127.0.1.1, other machines to its real address: a store
    bound to 127.0.1.1 would be out of their reach, so init_process_group's own serves it."""
    port, resolve = free_port(), socket.getaddrinfo

    def debian(host, *args, **kwargs):
        if host == "node-0":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", port))]
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", debian)
    env.setenv("RANK", "0")
    env.setenv("MASTER_PORT", str(port))
    env.setenv("MASTER_ADDR", "node-0")
    env.setenv(worker_env.TIMEOUT_VARIABLE, "5")  # were it hosted, its own client could not reach it
    with joining():
        assert _listening(port) == [] and worker_env._HOSTED == {}
    env.setenv("MASTER_ADDR", "localhost")  # a loopback name: meant for this machine alone
    with joining():
        assert _listening(port) in (["127.0.0.1"], ["::1"])


def test_a_rank_other_than_0_hosts_nothing(env):
    port = free_port()
    env.setenv("MASTER_PORT", str(port))
    with joining():
        assert _listening(port) == []


@pytest.mark.parametrize("address", ["192.0.2.1", "127.0.0.1"])  # not this machine's; a port taken
def test_a_store_that_cannot_listen_names_master_addr_and_port(env, address):
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    env.setenv("RANK", "0")
    env.setenv("MASTER_ADDR", address)
    env.setenv("MASTER_PORT", str(port))
    with taken, pytest.raises(WorkerExit) as stopped, joining():
        pass
    assert stopped.value.code == 2
    assert str(stopped.value).startswith(
        f"rank 0 hosts the rendezvous store at MASTER_ADDR:MASTER_PORT={address}:{port} and cannot listen "
    )


def test_a_rank_that_gives_up_waiting_names_the_address_and_the_ranks(env):
    env.setenv(worker_env.TIMEOUT_VARIABLE, "3")
    timeout_error = dist.DistStoreError("Timed out after 3 seconds waiting for clients. 3/4 clients joined.")
    with pytest.raises(WorkerExit) as stopped, joining():
        raise timeout_error
    assert stopped.value.code == 1
    assert str(stopped.value) == (
        "rank 1 of WORLD_SIZE=4 waited 3 s at MASTER_ADDR:MASTER_PORT=127.0.0.1:29500 for the other ranks "
        "(0, 2, 3), and not all of them came (Timed out after 3 seconds waiting for clients. 3/4 clients "
        "joined.). Start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or let them wait "
        f"longer with {worker_env.TIMEOUT_VARIABLE}"
    )
    many = joining(7, 100, "127.0.0.1", 1)
    with pytest.raises(WorkerExit, match=r"for the other ranks \(0-99 but 7\)"), many:
        raise dist.DistNetworkError("The client socket has timed out")


def test_other_errors_pass_through_joining(env):
    with pytest.raises(RuntimeError, match=r"^invalid device ordinal$"), joining():
        raise RuntimeError("invalid device ordinal")


def test_importing_the_module_does_not_import_torch():
    """who_am_i.py imports it and must start at once: PyTorch takes seconds to import."""
    code = "import sys, course_utils.worker_env; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert found.stdout == "False\n"
