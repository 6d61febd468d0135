"""Running torchrun from a notebook: loopback, results, clear errors, nothing left behind.

Each torchrun start costs seconds on a small machine, so the tests run few of them: one job,
one two-node job, one failure, one timeout, one interrupt. Everything else is checked without
starting torchrun.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest
from processes import is_gone

from course_utils.processes import (
    LaunchError,
    TorchrunError,
    TorchrunResult,
    TorchrunTimeoutError,
    check_port_free,
    loopback_interface,
    run_nodes,
    run_torchrun,
    strip_paths,
    torchrun,
    torchrun_command,
)

WORKERS = Path(__file__).resolve().parents[1] / "notebooks" / "workers"
REPORT = """
import json, os, sys, psutil
names = ["RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "MASTER_ADDR", "GLOO_SOCKET_IFNAME", "EXTRA",
         "OMP_NUM_THREADS", "REMOVED"]
agent = psutil.Process(os.getppid())  # torchrun's agent, which hosts the rendezvous store
listens = [c.laddr for c in agent.net_connections("inet") if c.status == psutil.CONN_LISTEN]
row = {n: os.environ.get(n) for n in names} | {"argv": sys.argv[1:], "listens": listens}
print(json.dumps(row), flush=True)
"""
FAILS_ON_RANK_1 = """
import os
if os.environ["RANK"] == "1":
    raise ValueError("bad batch on rank 1")
print("rank 0 is fine")
"""
# A worker that starts a process of its own, in a session of its own, writes its pid to
# FOLDER/RANK.pid, and hangs.
HANGS = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
path = os.path.join(sys.argv[1], os.environ["RANK"] + ".pid")
with open(path + ".part", "w") as f:
    f.write(str(child.pid))
os.replace(path + ".part", path)
time.sleep(120)
"""


@pytest.fixture
def script(tmp_path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


def test_a_job_runs_on_loopback_with_this_python(script, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # as on many clusters
    monkeypatch.setenv("REMOVED", "from the kernel")
    result = run_torchrun(
        script("report.py", REPORT),
        ["--flag", "x y"],
        nproc_per_node=2,
        env={"EXTRA": "passed", "OMP_NUM_THREADS": None, "REMOVED": None},
    )
    rows = sorted(result.json_lines(), key=lambda r: r["RANK"])
    assert [(r["RANK"], r["LOCAL_RANK"], r["WORLD_SIZE"]) for r in rows] == [("0", "0", "2"), ("1", "1", "2")]
    assert {r["MASTER_ADDR"] for r in rows} == {"127.0.0.1"}
    if torchrun._FORK_AGENT:  # the store is the helper's, on loopback; elsewhere torchrun's, everywhere
        assert rows[0]["listens"] == [["127.0.0.1", result.master_port]]
    if loopback_interface():
        assert {r["GLOO_SOCKET_IFNAME"] for r in rows} == {loopback_interface()}
    assert rows[0]["argv"] == ["--flag", "x y"] and rows[0]["EXTRA"] == "passed"
    # None removes a variable: torchrun saw no OMP_NUM_THREADS, so it set 1 and said so.
    assert {r["REMOVED"] for r in rows} == {None}
    assert {r["OMP_NUM_THREADS"] for r in rows} == {"1"}
    assert "Setting OMP_NUM_THREADS environment variable for each process" in result.stderr
    assert result.returncode == 0 and result.module == "torch.distributed.run"
    assert result.shell().startswith(
        "torchrun --nnodes=1 --node-rank=0 --nproc-per-node=2 --master-addr=127.0.0.1 "
        "--master-port=$MASTER_PORT "
    )
    assert result.shell().endswith("report.py --flag 'x y'")
    assert str(result.master_port) not in result.shell()


def test_two_nodes_form_one_job_that_communicates_and_leave_no_files(tmp_path, monkeypatch):
    """Notebook 07's worker, `who_am_i.py --all-reduce`, as two "nodes": one process group."""
    scratch = tmp_path / "scratch"  # torchrun's temporary files must go, and be removed
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(torchrun.tempfile, "tempdir", None)  # make tempfile read TMPDIR again
    results = run_nodes(WORKERS / "who_am_i.py", ["--all-reduce"], nnodes=2, nproc_per_node=1)
    assert os.listdir(scratch) == []
    seen = [(r["RANK"], r["GROUP_RANK"], r["WORLD_SIZE"]) for res in results for r in res.json_lines()]
    assert seen == [(0, 0, 2), (1, 1, 2)]
    # all_reduce of the ranks gives 0 + 1 on both nodes: the two torchruns made one job.
    assert [r["sum of all ranks"] for res in results for r in res.json_lines()] == [1, 1]
    assert "--node-rank=1" in results[1].shell()
    assert results[0].master_port == results[1].master_port


def test_a_failing_worker_gives_a_clear_error_without_paths(script, tmp_path):
    start = time.monotonic()
    with pytest.raises(TorchrunError) as info:
        run_torchrun(script("fails.py", FAILS_ON_RANK_1), nproc_per_node=2, timeout=60)
    err = info.value
    assert time.monotonic() - start < 30
    message = str(err)
    assert message.startswith("`torchrun --nnodes=1 --node-rank=0 --nproc-per-node=2")
    assert f"exited with code {err.returncode}" in message and err.returncode != 0
    assert "ValueError: bad batch on rank 1" in message
    assert 'File "fails.py"' in message  # the worker's frame, by file name
    for path in (str(tmp_path), sys.prefix, str(Path.home()), "site-packages", "/tmp/"):
        assert path not in message and path not in err.stderr
    assert "ChildFailedError" in err.stderr and "ChildFailedError" not in message
    assert err.node_rank == 0


def test_a_timeout_stops_every_process(script, tmp_path, monkeypatch):
    """The timeout expires only once the worker has started its own process, which must go too."""
    pid_file = tmp_path / "0.pid"
    pause = torchrun._pause
    seen_at: list[float] = []

    def wait_for_the_worker():
        # A short timeout, but the helper's clock is not looked at again before the worker has
        # written its pid file (up to 60 s on a slow machine): the run then times out at once.
        limit = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < limit:
            time.sleep(0.05)
        if not seen_at:
            seen_at.append(time.monotonic())
        pause()

    monkeypatch.setattr(torchrun, "_pause", wait_for_the_worker)
    with pytest.raises(TorchrunTimeoutError) as info:
        run_torchrun(script("hangs.py", HANGS), [str(tmp_path)], timeout=2)
    assert pid_file.exists(), "the hanging worker never started its own process"
    assert time.monotonic() - seen_at[0] < 2 * torchrun.GRACE_SECONDS + 3  # stopped promptly
    assert "still running after 2 s" in str(info.value)
    assert "$MASTER_PORT" in info.value.command
    assert is_gone(int(pid_file.read_text()))  # the worker's own process, in a session of its own


def test_an_interrupt_stops_every_process(script, tmp_path, monkeypatch):
    """Ctrl-C in the notebook (KeyboardInterrupt) while workers and their children run."""
    pid_files = [tmp_path / "0.pid", tmp_path / "1.pid"]
    pause = torchrun._pause

    def interrupt_once_started():
        if all(f.exists() for f in pid_files):  # both workers have started their own process
            raise KeyboardInterrupt
        pause()

    monkeypatch.setattr(torchrun, "_pause", interrupt_once_started)
    with pytest.raises(KeyboardInterrupt):
        run_torchrun(script("hangs.py", HANGS), [str(tmp_path)], nproc_per_node=2, timeout=60)
    assert all(is_gone(int(f.read_text())) for f in pid_files)


def test_a_port_in_use_is_refused_before_anything_starts(script):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port} on 127.0.0.1 is already in use"):
            run_torchrun(script("report.py", REPORT), master_port=port)
        with pytest.raises(LaunchError, match="master_port=None"):
            check_port_free(port)
    check_port_free(port)  # free again


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"script": "no_such_script.py"}, FileNotFoundError, "relative to the notebook"),
        ({"script": 42}, TypeError, "script must be the path of a file"),
        ({"script": "w\0.py"}, ValueError, "script holds a NUL character"),
        ({"script_args": ["--epochs", "2\0"]}, ValueError, "script_args holds a NUL character"),
        ({"module": ["torch.distributed.run"]}, ValueError, "module must be one of"),
        ({"master_port": "29500"}, ValueError, "master_port must be an int from 1 to 65535"),
        ({"script_args": "--epochs 2"}, TypeError, "list of strings"),
        ({"script_args": ["--epochs", 2]}, TypeError, "strings only"),
        ({"nproc_per_node": 0}, ValueError, "nproc_per_node"),
        ({"nproc_per_node": True}, ValueError, "nproc_per_node"),
        ({"timeout": 0}, ValueError, "timeout"),
        ({"master_port": 70000}, ValueError, "master_port"),
        ({"extra_args": ["--master-addr=10.0.0.1"]}, ValueError, "may not set --master-addr"),
        ({"extra_args": ["--nnodes", "2"]}, ValueError, "may not set --nnodes"),
        ({"module": "torch.distributed.elastic"}, ValueError, "module must be one of"),
        ({"env": {"X": 1}}, TypeError, "env must map"),
        ({"env": {"X": b"1"}}, TypeError, "or None"),
    ],
)
def test_bad_arguments_say_what_to_pass(script, kwargs, error, says):
    kwargs = {"script": script("report.py", REPORT)} | kwargs
    with pytest.raises(error, match=says):
        run_torchrun(**kwargs)


# Spellings torchrun's parser reads as an option the helpers set: prefixes, "_" for "-", "=" or not.
SMUGGLED = [
    ["--master-ad=0.0.0.0"],
    ["--master_a", "0.0.0.0"],
    ["--master-port=1"],
    ["--rdzv_b=c10d"],
    ["--rdzv-endp=0.0.0.0:0"],
    ["--rdzv_endpoint", "0.0.0.0:0"],
    ["--standalone"],
    ["--stand"],
    ["--nnodes", "2"],
    ["--nn=2"],
    ["--node_r=1"],
    ["--nproc_per", "2"],
    ["--max-restarts=0", "--nproc-per=4"],
]


@pytest.mark.parametrize("extra_args", SMUGGLED, ids=lambda a: " ".join(a))
def test_every_spelling_of_an_option_the_helpers_set_is_refused(extra_args):
    """Each spelling is refused by name, and torchrun's own parser does read it as that option."""
    from torch.distributed.run import get_args_parser

    named = [a.split("=")[0] for a in extra_args if a.startswith("--")][-1]
    with pytest.raises(ValueError, match=f"may not set {named}"):
        torchrun_command("x.py", master_port=1, extra_args=extra_args)
    parser = get_args_parser()
    parsed = vars(parser.parse_args([*extra_args, "x.py"]))
    defaults = vars(parser.parse_args(["x.py"]))
    assert {k for k in parsed if parsed[k] != defaults[k]} & torchrun._SET_HERE


@pytest.mark.parametrize("extra_args", [["--max-restarts=0"], ["--rdzv-conf", "timeout=5"]])
def test_options_the_helpers_leave_to_the_reader_pass(extra_args):
    assert (
        torchrun_command("x.py", master_port=1, extra_args=extra_args)[-len(extra_args) - 1 : -1]
        == extra_args
    )


def _train_ddp():
    """notebooks/workers/train_ddp.py as a module (it only defines functions when imported)."""
    spec = importlib.util.spec_from_file_location("train_ddp", WORKERS / "train_ddp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("local_rank", "gpu_count"), [(1, 1), (0, 0), (4, 2)])
def test_train_ddp_says_what_to_run_with_fewer_gpus_than_processes(local_rank, gpu_count):
    """`torchrun --nproc-per-node=2 train_ddp.py` on one GPU: a clear error, not "invalid device ordinal"."""
    with pytest.raises(
        RuntimeError, match=f"LOCAL_RANK={local_rank}, but this machine shows only {gpu_count}"
    ) as info:
        _train_ddp().check_enough_gpus(local_rank, gpu_count)
    assert "--nproc-per-node=gpu" in str(info.value) and "--cpu" in str(info.value)


def test_train_ddp_checks_before_it_touches_a_gpu(monkeypatch, tmp_path):
    """main() on a "one-GPU machine" as LOCAL_RANK=1: the check stops it before set_device or nccl."""
    train_ddp = _train_ddp()

    def must_not_run(*args, **kwargs):
        raise AssertionError("reached a GPU call before checking the number of GPUs")

    monkeypatch.setattr(train_ddp.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(train_ddp.torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(train_ddp.torch.cuda, "set_device", must_not_run)
    monkeypatch.setattr(train_ddp.dist, "init_process_group", must_not_run)
    # what torchrun sets for the second of two processes on this machine
    torchrun = {"RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    for name, value in torchrun.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")  # never used: the check stops main() before any connection
    monkeypatch.setattr(sys, "argv", ["train_ddp.py", "--out", str(tmp_path)])
    with pytest.raises(RuntimeError, match="LOCAL_RANK=1, but this machine shows only 1 GPU"):
        train_ddp.main()


def test_train_ddp_accepts_one_gpu_per_process():
    train_ddp = _train_ddp()
    for local_rank in range(4):
        train_ddp.check_enough_gpus(local_rank, 4)  # no error
    assert "--cpu" in train_ddp.__doc__ and "--nproc-per-node=gpu" in train_ddp.__doc__


def test_bad_node_counts(script):
    with pytest.raises(ValueError, match="nnodes must be"):
        run_nodes(script("report.py", REPORT), nnodes=0)
    with pytest.raises(ValueError, match=r"node_rank must be in 0\.\.1"):
        torchrun_command("x.py", nnodes=2, node_rank=2, master_port=1)


def test_the_command_is_this_pythons_torchrun():
    command = torchrun_command("w.py", ["--a"], nproc_per_node=2, nnodes=2, node_rank=1, master_port=1234)
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert command[3:] == [
        "--nnodes=2",
        "--node-rank=1",
        "--nproc-per-node=2",
        "--master-addr=127.0.0.1",
        "--master-port=1234",
        "w.py",
        "--a",
    ]
    legacy = torchrun_command("w.py", master_port=1, module="torch.distributed.launch")
    assert legacy[1:3] == ["-m", "torch.distributed.launch"]


# A stand-in for torchrun's module: it prints, as one JSON line, what a module run with
# `python -m` sees, logs and warns as torchrun does, then exits with a code of its own.
AGENT_PROBE = """
import json, logging, os, sys, tempfile, warnings
warnings.warn("deprecated in __main__", DeprecationWarning)  # shown by a fresh Python
warnings.warn("deprecated elsewhere", DeprecationWarning, stacklevel=2)  # hidden by one
warnings.warn("the old launcher is deprecated", FutureWarning)
logging.getLogger("agent_probe").warning("a record for the root logger")
print(json.dumps({
    "name": __name__, "argv": sys.argv[1:], "stdin": sys.stdin.read(), "probe": os.environ.get("PROBE"),
    "removed": os.environ.get("REMOVED"), "tempdir": tempfile.gettempdir(),
    "sid": os.getsid(0) == os.getpid(),
}))
if sys.argv[1] == "raise":
    raise ValueError("the agent failed")
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("code", ["3", "raise"])
def test_a_forked_agent_runs_its_module_as_a_new_python_would(tmp_path, monkeypatch, code):
    """The forked start (Linux) and the new interpreter give the same output and exit code."""
    (tmp_path / "agent_probe.py").write_text(AGENT_PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("REMOVED", "in the parent")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = torchrun._child_env({"PROBE": "passed", "REMOVED": None, "PYTHONPATH": str(tmp_path)}, str(scratch))
    runs = {}
    for fork in (True, False):
        with open(tmp_path / "out", "w+b") as out, open(tmp_path / "err", "w+b") as err:
            command = [sys.executable, "-m", "agent_probe", code, "x y"]
            agent = torchrun._start(command, env, out, err, fork=fork)
            assert isinstance(agent, torchrun._ForkedAgent) == fork
            runs[fork] = (agent.wait(), torchrun._read(out), torchrun._read(err).splitlines())
    (forked_code, forked_out, forked_err), (fresh_code, fresh_out, fresh_err) = runs[True], runs[False]
    assert forked_code == fresh_code == (3 if code == "3" else 1)
    assert forked_out == fresh_out
    assert json.loads(forked_out) == {
        "name": "__main__",
        "argv": [code, "x y"],
        "stdin": "",
        "probe": "passed",
        "removed": None,
        "tempdir": str(scratch),
        "sid": True,
    }
    # Warnings and log records reach stderr as in a new interpreter (not this process's handlers).
    # Tracebacks differ only in the frames of runpy, the module that runs `python -m`.
    assert [line for line in forked_err if not line.startswith(" ")] == [
        line for line in fresh_err if not line.startswith(" ")
    ]
    assert any("DeprecationWarning: deprecated in __main__" in line for line in forked_err)
    assert not any("deprecated elsewhere" in line for line in forked_err)
    assert any("FutureWarning: the old launcher is deprecated" in line for line in forked_err)
    assert "a record for the root logger" in forked_err
    assert (forked_err[-1] == "ValueError: the agent failed") == (code == "raise")


def test_env_sets_and_removes_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.setenv("KEPT", "yes")
    env = torchrun._child_env({"OMP_NUM_THREADS": None, "NOT_THERE": None, "NEW": "1"}, str(tmp_path))
    assert "OMP_NUM_THREADS" not in env and "NOT_THERE" not in env
    assert env["NEW"] == "1" and env["KEPT"] == "yes" and env["TMPDIR"] == str(tmp_path)
    assert os.environ["OMP_NUM_THREADS"] == "8"  # this process's environment is untouched


def test_shell_line_and_json_lines():
    result = TorchrunResult(
        args=("--nproc-per-node=1", "--master-port=4321", "w.py", "a b"),
        module="torch.distributed.launch",
        master_port=4321,
        returncode=0,
        stdout='{"RANK": 0}\nnot json\n{broken\n{"RANK": 1}{"RANK": 2}\n\n[1]\n',  # two lines run together
        stderr="",
    )
    assert (
        result.shell()
        == "python -m torch.distributed.launch --nproc-per-node=1 --master-port=$MASTER_PORT w.py 'a b'"
    )
    assert result.shell(port="29500").count("29500") == 1
    assert result.json_lines() == [{"RANK": 0}, {"RANK": 1}, {"RANK": 2}]


def test_strip_paths_keeps_file_names_and_urls():
    text = (
        'File "/home/me/.venv/lib/python3.11/site-packages/torch/x.py", line 3\n'
        "W1122 05:15:38.959000 1 .venv/lib/python3.11/site-packages/torch/run.py:874] note\n"
        "error_file: <N/A> see https://pytorch.org/docs/stable/elastic/errors.html\n"
        "binary: /opt/venv/bin/python, script workers/who_am_i.py, C:\\Users\\me\\a.py:3, ratio 1/2"
    )
    assert strip_paths(text) == (
        'File "x.py", line 3\n'
        "W1122 05:15:38.959000 1 run.py:874] note\n"
        "error_file: <N/A> see https://pytorch.org/docs/stable/elastic/errors.html\n"
        "binary: python, script workers/who_am_i.py, a.py:3, ratio 1/2"
    )


def test_the_error_shows_the_workers_lines_not_torchruns_report():
    stderr = textwrap.dedent(
        """\
        *****************************************
        Setting OMP_NUM_THREADS environment variable for each process to be 1 in default
        *****************************************
        Traceback (most recent call last):
          File "w.py", line 2, in <module>
        KeyError: 'LOCAL_RANK'
        E1122 05:22:31.141000 22904 api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 7)
        Traceback (most recent call last):
          File "run.py", line 1019, in run
        torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
        ============================================================
          time      : 2026-11-22_05:22:31
        """
    )
    err = TorchrunError("torchrun w.py", 1, stderr)
    assert err.worker_lines == [
        "Traceback (most recent call last):",
        '  File "w.py", line 2, in <module>',
        "KeyError: 'LOCAL_RANK'",
    ]
    assert "pid" not in str(err) and "2026" not in str(err)
    busy = TorchrunError("torchrun w.py", 1, "EADDRINUSE\n")
    assert "master_port=None" in str(busy)
    assert json.dumps(err.worker_lines)  # plain strings


def test_the_error_states_the_workers_own_exit_code(script):
    """torchrun itself exits with 1 when a worker fails; the worker's code (here 3) is what tells why."""
    with pytest.raises(
        TorchrunError, match=r"exited with code 1 because a worker exited with code 3\."
    ) as err:
        run_torchrun(script("exits_3.py", "import os\nos._exit(3)\n"), timeout=60)
    assert err.value.returncode == 1


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ([("X", "1")], r"env must be a mapping such as \{'OMP_NUM_THREADS': '1'\}.*not list"),
        ("X=1", "env must be a mapping"),
        ({3: "1"}, "variable names"),
    ],
)
def test_an_env_that_is_no_mapping_of_str_says_what_to_pass(script, env, match):
    with pytest.raises(TypeError, match=match):
        run_torchrun(script("report.py", REPORT), env=env)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"timeout": float("inf")}, ValueError, "at most 604800"),
        ({"timeout": 1e15}, ValueError, "at most 604800"),
        ({"timeout": float("nan")}, ValueError, "not nan"),
        ({"timeout": -5}, ValueError, "positive number of seconds"),
        ({"timeout": "60"}, TypeError, "number of seconds, such as 60"),
        ({"nnodes": 0}, ValueError, "nnodes must be a whole number from 1 to 8"),
        ({"nnodes": 100}, ValueError, "nnodes must be a whole number from 1 to 8"),
        ({"master_port": -1}, ValueError, "master_port must be an int from 1 to 65535"),
    ],
)
def test_run_nodes_refuses_what_it_cannot_use(script, kwargs, error, match):
    with pytest.raises(error, match=match):
        run_nodes(script("report.py", REPORT), **kwargs)


@pytest.mark.parametrize("port", [None, 0, "29500", 1.5])
def test_check_port_free_needs_a_port_number(port):
    with pytest.raises(ValueError, match="1 to 65535"):
        check_port_free(port)


@pytest.mark.parametrize("port", [None, 0, "29500", 70000, True])
def test_a_command_needs_a_port_number(port):
    with pytest.raises(ValueError, match="master_port"):
        torchrun_command("w.py", master_port=port)


def test_strip_paths_needs_text():
    with pytest.raises(TypeError, match="strip_paths expects a str"):
        strip_paths(b"/a/b")


def test_an_env_name_with_an_equals_sign_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="env: a variable name holds neither"):
        run_torchrun(tmp_path / "never_run.py", env={"A=B": "1"})


def test_check_port_free_refuses_the_empty_host_that_means_every_interface():
    with pytest.raises(TypeError, match="'' would mean every interface"):
        check_port_free(1, host="")


def test_torchrun_errors_come_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(ValueError, match=r"^nproc_per_node 必须是 1 到 16 之间的整数，而不是 0$"):
        torchrun_command("train.py", nproc_per_node=0, master_port=29500)
    stuck = str(TorchrunTimeoutError("torchrun x.py", 2.0, ""))
    assert stuck.startswith("`torchrun x.py` 在 2 秒后仍在运行；它和它所有的工作进程都已被停止。")
