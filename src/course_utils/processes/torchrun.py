"""Run `torchrun` from a notebook: one job, or several "nodes" on this machine, always cleaned up.

Notebook 07 launches real worker scripts with real `torchrun`. Starting it with `subprocess`
by hand is easy to get wrong in a notebook: a hung worker blocks the kernel, an interrupted
cell leaves processes running that keep the port, and the error a failing run prints is a page
of tracebacks with the paths of this machine. `run_torchrun` and `run_nodes` add only that
safety around the command; the command line itself is torchrun's own and is shown.

- The venv's PyTorch: the command is `sys.executable -m torch.distributed.run`, which is what
  the `torchrun` console script runs, with the Python of this kernel (a bare `torchrun` could
  be another installation's on PATH). On Linux it runs without a new interpreter: a process
  forked from this one, which has imported PyTorch already, runs the module as `python -m`
  would (`__main__`, its arguments in sys.argv, the command's environment, stdin from
  /dev/null); a fresh Python would first spend seconds importing PyTorch. The workers that
  torchrun starts are new interpreters either way, unless it is told to fork them from its own
  process (`--run-path --start-method=fork`, as notebook 08 does).
- Loopback only: `--master-addr=127.0.0.1`, and gloo on the loopback interface
  (GLOO_SOCKET_IFNAME). torchrun's own store (node 0's rendezvous TCPStore) would listen on every
  interface, as a multi-node job needs; on Linux, where node 0's agent is forked from this
  process, the helper starts that store itself before torchrun's code runs, on a socket bound
  to 127.0.0.1 here, and torchrun uses it (a process has one store server per port). Where the
  agent is a new interpreter (macOS, Windows) torchrun's store listens on every interface, on
  its port, for as long as the run lasts (seconds here).
- A free port, or the one you pass if it is free: a port in use is a clear `LaunchError`
  before anything starts.
- A timeout, after which every process of the run is stopped, as when the cell is interrupted
  or raises. Each torchrun, and each of its workers, leads a session of its own; they are
  tracked by parent and stopped group by group (`course_utils.processes.supervision.stop`).
- A clear error: a run that exits with a non-zero code raises `TorchrunError`, which names the
  command and shows the tail of its stderr with machine paths reduced to file names.
- Nothing left on disk: torchrun's own temporary files (its log folder, the workers' error
  files) go to a temporary folder (TMPDIR) that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import runpy
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil
from torch.distributed import TCPStore

from course_utils._checks import environment, flag, path, strings, timeout_seconds
from course_utils.i18n import _
from course_utils.processes.supervision import (
    FORK_WARNING,
    GRACE_SECONDS,
    LOOPBACK,
    POLL_SECONDS,
    LaunchError,
    alive,
    check_port,
    child_env,
    free_port,
    gloo_env,
    isolate,
    listening_socket,
    stop,
)
from course_utils.processes.watchdog import (
    mark,
    release_folder,
    release_group,
    start_watchdog,
    watch_folder,
    watch_group,
)

__all__ = [
    "MODULES",
    "TorchrunError",
    "TorchrunResult",
    "TorchrunTimeoutError",
    "check_port_free",
    "run_nodes",
    "run_torchrun",
    "strip_paths",
    "torchrun_command",
]

# The launchers this module runs, and how each is written on a command line.
MODULES = {
    "torch.distributed.run": "torchrun",  # the console script `torchrun` runs this module
    "torch.distributed.launch": "python -m torch.distributed.launch",  # deprecated
}
TAIL_LINES = 12
# What the helpers set themselves (as torchrun's parser names it): a run stays on loopback, on its port.
_SET_HERE = frozenset(
    "master_addr master_port rdzv_endpoint rdzv_backend standalone nnodes node_rank nproc_per_node".split()
)
# A path: from a token's start ("/", "~/", "./", ".venv/", "C:\\") or one running through
# site-packages, up to the next space, quote or bracket.
_PATH_TOKEN = re.compile(
    r"""(?<![^\s"'(<\[=])(?:[A-Za-z]:[\\/]|~?[\\/]|\.[\w.-]*[\\/]|[^\s"'(<\[=]*site-packages)[^\s"'()<>\[\]=,]*"""
)
# torchrun's own lines on stderr: its log records ("E1122 05:22:31.141000 123 api.py:1002] ...").
_TORCHRUN_LOG = re.compile(r"^[DIWE]\d{4} \d\d:\d\d:\d\d\.\d+ \d+ ")
_WORKER_EXIT = re.compile(r"\bexitcode\s*:\s*(-?\d+)")
# Where torchrun's agent is forked from this process instead of started as a new interpreter:
# Linux, where fork is the default start method (macOS libraries are not all fork-safe).
_FORK_AGENT = sys.platform.startswith("linux")
# The warning filters a fresh Python starts with (the `warnings` documentation, "Default Warning
# Filter"); a forked agent gets them instead of this kernel's, so it warns as `python -m` would.
_FRESH_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)


class TorchrunError(LaunchError):
    """A torchrun command exited with a non-zero code.

    Attributes:
        command: the command as a shell line (`torchrun ...`).
        returncode: its exit code (negative: killed by that signal).
        stderr: its whole stderr, machine paths reduced to file names.
        node_rank: which "node" it was (0 for a single-node run).
        worker_lines: the lines of stderr before torchrun's own report of the failure, where
            the workers' errors are.
    """

    def __init__(self, command: str, returncode: int, stderr: str, node_rank: int = 0) -> None:
        self.command = command
        self.returncode = returncode
        self.stderr = stderr
        self.node_rank = node_rank
        self.worker_lines = _workers_stderr(stderr)
        tail = "\n".join(self.worker_lines[-TAIL_LINES:]) or _("(nothing but torchrun's own report)")
        hint = ""
        if "EADDRINUSE" in stderr or "address already in use" in stderr.lower():
            hint = "\n" + _(
                "The port was taken between choosing it and using it: run it again (master_port=None)."
            )
        # torchrun reports each failed worker as "exitcode: N" (its own exit code is then 1).
        codes = ", ".join(dict.fromkeys(_WORKER_EXIT.findall(stderr)))
        workers = _(" because a worker exited with code {codes}").format(codes=codes) if codes else ""
        super().__init__(
            _("`{command}` exited with code {returncode}{workers}. ").format(
                command=command, returncode=returncode, workers=workers
            )
            + _("The last lines the workers wrote to stderr:\n{tail}{hint}").format(tail=tail, hint=hint)
        )


class TorchrunTimeoutError(LaunchError):
    """A torchrun command did not finish in time; every process of the run was stopped.

    Attributes:
        command: the command (or the first of them) still running when time ran out.
        timeout: the timeout in seconds.
        stderr: what that command had written to stderr, machine paths reduced to file names.
    """

    def __init__(self, command: str, timeout: float, stderr: str) -> None:
        self.command = command
        self.timeout = timeout
        self.stderr = stderr
        super().__init__(
            _(
                "`{command}` was still running after {timeout:g} s; it and all its workers were stopped. "
                "A worker that never finishes is usually waiting for a peer (in the rendezvous or a "
                "collective) that never comes."
            ).format(command=command, timeout=timeout)
        )


@dataclass(frozen=True)
class TorchrunResult:
    """What one torchrun command did.

    Attributes:
        args: the command's arguments after the launcher, as run (the port included).
        module: the launcher module, "torch.distributed.run" (torchrun) or the deprecated
            "torch.distributed.launch".
        master_port: the port the run used.
        returncode: the exit code of the torchrun process.
        stdout: what the workers printed (torchrun passes their output through).
        stderr: torchrun's and the workers' stderr, machine paths reduced to file names.
    """

    args: tuple[str, ...]
    module: str
    master_port: int
    returncode: int
    stdout: str
    stderr: str

    def shell(self, port: str = "$MASTER_PORT") -> str:
        """The command as you would type it, with `port` in place of the port number.

        The port changes on every run; a placeholder keeps printed commands the same.
        """
        line = " ".join([MODULES[self.module], *(shlex.quote(a) for a in self.args)])
        return line.replace(f"--master-port={self.master_port}", f"--master-port={port}")

    def json_lines(self) -> list[dict[str, Any]]:
        """The JSON objects the workers printed, in the order they appear in stdout.

        torchrun runs its workers unbuffered (`python -u`), so `print(line)` writes the line and
        its newline separately, and two workers' lines can run together (`{...}{...}`);
        the objects are read one after the other, whatever separates them.
        """
        decoder = json.JSONDecoder()
        rows, position = [], self.stdout.find("{")
        while position != -1:
            try:
                value, end = decoder.raw_decode(self.stdout, position)
            except json.JSONDecodeError:
                end = position + 1
            else:
                if isinstance(value, dict):
                    rows.append(value)
            position = self.stdout.find("{", end)
        return rows


def _workers_stderr(stderr: str) -> list[str]:
    """The lines of a failed run's stderr that the workers wrote, without torchrun's own report.

    torchrun ends a failed run with its log records, a traceback of its own (ending in
    ChildFailedError) and a summary with times and pids; the cause is in the lines before.
    """
    lines = stderr.rstrip().splitlines()
    own = next((n for n, line in enumerate(lines) if "ChildFailedError" in line), None)
    if own is not None:
        starts = [
            n for n, line in enumerate(lines[:own]) if line.startswith("Traceback (most recent call last)")
        ]
        lines = lines[: starts[-1]] if starts else lines[:own]
    banner = ("*****", "Setting OMP_NUM_THREADS")
    return [line for line in lines if not _TORCHRUN_LOG.match(line) and not line.startswith(banner)]


def strip_paths(text: str) -> str:
    """Reduce every file-system path in `text` to its last part, keeping URLs.

    `/home/me/.venv/lib/python3.11/site-packages/torch/distributed/run.py:874` becomes
    `run.py:874`: what matters in an error is the file and line, not where this machine keeps it.
    """
    if not isinstance(text, str):
        raise TypeError(f"strip_paths expects a str, got {type(text).__name__}")

    def shorten(match: re.Match[str]) -> str:
        token = match.group(0)
        if "://" in token:
            return token
        return re.split(r"[\\/]", token.rstrip("\\/"))[-1] or token

    return _PATH_TOKEN.sub(shorten, text)


def check_port_free(port: int, host: str = LOOPBACK) -> None:
    """Raise LaunchError at once if a program listens on `host:port` (or it may not be used), where
    torchrun would fail after seconds with a long traceback."""
    if port is None:
        raise ValueError(_("check_port_free needs a port number from 1 to 65535, not None"))
    if not isinstance(host, str) or not host:
        raise TypeError(
            _(
                "host must be an address such as {loopback!r} ('' would mean every interface), not {host!r}"
            ).format(loopback=LOOPBACK, host=host)
        )
    listening_socket(port, host).close()


def torchrun_command(
    script: str | os.PathLike[str],
    script_args: Sequence[str] = (),
    *,
    nproc_per_node: int = 1,
    nnodes: int = 1,
    node_rank: int = 0,
    master_port: int,
    extra_args: Sequence[str] = (),
    module: str = "torch.distributed.run",
) -> list[str]:
    """The full argument list to run `script` under torchrun with this Python, on loopback.

    `[sys.executable, "-m", module, "--nnodes=...", "--node-rank=...", "--nproc-per-node=...",
    "--master-addr=127.0.0.1", "--master-port=...", *extra_args, script, *script_args]`.
    """
    _check_arguments(script, script_args, nproc_per_node, nnodes, node_rank, extra_args, module)
    check_port(master_port)
    if master_port is None:
        raise ValueError(_("torchrun_command needs master_port, a port number from 1 to 65535"))
    options = [
        f"--nnodes={nnodes}",
        f"--node-rank={node_rank}",
        f"--nproc-per-node={nproc_per_node}",
        f"--master-addr={LOOPBACK}",
        f"--master-port={master_port}",
        *extra_args,
    ]
    return [sys.executable, "-m", module, *options, os.fspath(script), *script_args]


def run_torchrun(
    script: str | os.PathLike[str],
    script_args: Sequence[str] = (),
    *,
    nproc_per_node: int = 1,
    master_port: int | None = None,
    timeout: float = 60.0,
    check: bool = True,
    extra_args: Sequence[str] = (),
    module: str = "torch.distributed.run",
    env: Mapping[str, str | None] | None = None,
) -> TorchrunResult:
    """Run `torchrun --nproc-per-node=N script ...` on this machine and wait for it to finish.

    The command is `sys.executable -m torch.distributed.run` (what `torchrun` runs) with
    `--master-addr=127.0.0.1` and `master_port` (None: a free port). `module` may be
    "torch.distributed.launch", the deprecated launcher, to see what it does. `env` changes the
    environment of torchrun and its workers: a string sets a variable, None removes it
    (`{"OMP_NUM_THREADS": None}` runs as if it had never been set, whatever this kernel has).
    With `check` (the default) a non-zero exit raises TorchrunError.

    Raises:
        TorchrunError: the command failed (check=True); it shows the tail of its stderr.
        TorchrunTimeoutError: it did not finish within `timeout` s; every process was stopped.
        LaunchError: `master_port` is in use.
        ValueError, TypeError, FileNotFoundError: bad arguments.
    """
    return run_nodes(
        script,
        script_args,
        nnodes=1,
        nproc_per_node=nproc_per_node,
        master_port=master_port,
        timeout=timeout,
        check=check,
        extra_args=extra_args,
        module=module,
        env=env,
    )[0]


def run_nodes(
    script: str | os.PathLike[str],
    script_args: Sequence[str] = (),
    *,
    nnodes: int = 2,
    nproc_per_node: int = 1,
    master_port: int | None = None,
    timeout: float = 60.0,
    check: bool = True,
    extra_args: Sequence[str] = (),
    module: str = "torch.distributed.run",
    env: Mapping[str, str | None] | None = None,
) -> list[TorchrunResult]:
    """Run one job as `nnodes` "nodes" on this machine: one torchrun per node, all at once.

    Node k runs `torchrun --nnodes=N --node-rank=k --nproc-per-node=P --master-addr=127.0.0.1
    --master-port=PORT script ...`, the command each machine of a real cluster would run, here
    all on loopback. Returns one result per node, in node order. If one node fails, the others
    (which would wait for it) are stopped, and the failing node's error is raised. The other
    arguments are those of `run_torchrun`.

    Raises: as `run_torchrun`.
    """
    if not _whole(nnodes, 1, 8):
        raise ValueError(
            _("nnodes must be a whole number from 1 to 8 on one machine, not {nnodes!r}").format(
                nnodes=nnodes
            )
        )
    _check_arguments(script, script_args, nproc_per_node, nnodes, 0, extra_args, module)
    check_port(master_port)
    timeout_seconds("timeout", timeout)
    flag("check", check)
    environment("env", env)
    if not Path(script).is_file():
        raise FileNotFoundError(
            _("no script {script!r} here; give its path relative to the notebook's folder.").format(
                script=os.fspath(script)
            )
        )
    listener = None
    if _FORK_AGENT:  # node 0's store will listen on this socket, bound to loopback (`_host_store`)
        listener = listening_socket(master_port)
        master_port = listener.getsockname()[1]
    elif master_port is None:
        master_port = free_port(LOOPBACK)
    else:
        check_port_free(master_port)
    commands = [
        torchrun_command(
            script,
            script_args,
            nproc_per_node=nproc_per_node,
            nnodes=nnodes,
            node_rank=node,
            master_port=master_port,
            extra_args=extra_args,
            module=module,
        )
        for node in range(nnodes)
    ]
    try:
        start_watchdog()  # before anything it must clean up exists
        folder = tempfile.mkdtemp(prefix="course-torchrun-")
        watch_folder(folder)  # removed by the watchdog should this process be killed outright
        try:
            child_env = _child_env(env, folder)
            returncodes, outputs, timed_out, first_failed = _run_group(
                commands, child_env, timeout, folder, listener
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            release_folder(folder)
    finally:
        if listener is not None:
            listener.close()
    results = [
        TorchrunResult(
            args=tuple(c[3:]),
            module=module,
            master_port=master_port,
            returncode=code,
            stdout=out,
            stderr=strip_paths(err),
        )
        for c, code, (out, err) in zip(commands, returncodes, outputs, strict=True)
    ]
    if timed_out is not None:
        stuck = results[timed_out]
        raise TorchrunTimeoutError(strip_paths(stuck.shell()), timeout, stuck.stderr)
    if check and first_failed is not None:
        failed = results[first_failed]
        raise TorchrunError(strip_paths(failed.shell()), failed.returncode, failed.stderr, first_failed)
    return results


def _whole(value: object, low: int, high: int) -> bool:
    """Whether `value` is an int (not a bool) from `low` to `high`."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@functools.cache
def _reserved_spellings() -> tuple[str, ...]:
    """Every option string of torchrun's own parser for what the helpers set (`--master-addr`,
    `--master_addr`, ...), read from the parser of the PyTorch installed, not written out here."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    return tuple(s for action in parser._actions if action.dest in _SET_HERE for s in action.option_strings)


def _reserved(arg: str) -> bool:
    """Whether torchrun would read `arg` as an option the helpers set: one of its spellings or, as
    argparse accepts an unambiguous prefix of a long option, a prefix of one, with or without `=value`."""
    name = arg.split("=", 1)[0]
    return name.startswith("--") and len(name) > 2 and any(s.startswith(name) for s in _reserved_spellings())


def _check_arguments(
    script: object,
    script_args: object,
    nproc_per_node: object,
    nnodes: object,
    node_rank: object,
    extra_args: object,
    module: object,
) -> None:
    """Raise an error that says what to pass when the arguments are wrong."""
    path("script", script, "'workers/train.py'")
    strings("script_args", script_args)
    strings("extra_args", extra_args)
    if not _whole(nproc_per_node, 1, 16):
        raise ValueError(
            _("nproc_per_node must be a whole number from 1 to 16, not {nproc_per_node!r}").format(
                nproc_per_node=nproc_per_node
            )
        )
    if not _whole(nnodes, 1, 10_000):
        raise ValueError(_("nnodes must be a whole number, at least 1, not {nnodes!r}").format(nnodes=nnodes))
    if not _whole(node_rank, 0, nnodes - 1):  # type: ignore[operator]
        raise ValueError(
            _("node_rank must be in 0..{last}, not {node_rank!r}").format(
                last=nnodes - 1, node_rank=node_rank
            )  # type: ignore[operator]
        )
    reserved = [a for a in extra_args if _reserved(a)]  # type: ignore[union-attr]
    if reserved:
        raise ValueError(
            _(
                "extra_args may not set {reserved}: the helper sets the nodes, processes, "
                "address and port itself (use nproc_per_node=, nnodes=, master_port=)."
            ).format(reserved=", ".join(reserved))
        )
    if not isinstance(module, str) or module not in MODULES:
        raise ValueError(
            _("module must be one of {modules}, not {module!r}").format(
                modules=", ".join(MODULES), module=module
            )
        )


def _child_env(extra: Mapping[str, str | None] | None, folder: str) -> dict[str, str]:
    """The environment for torchrun: this one, gloo on loopback, temporary files (its log folder,
    the workers' error files) in `folder`, then `extra` on top (None removes a variable)."""
    return child_env({**gloo_env(), "TMPDIR": folder, **(extra or {})}) | mark()


def _run_group(
    commands: Sequence[Sequence[str]],
    env: dict[str, str],
    timeout: float,
    folder: str,
    listener: socket.socket | None = None,
) -> tuple[list[int], list[tuple[str, str]], int | None, int | None]:
    """Run the commands at once; return their exit codes, (stdout, stderr) pairs, the index of
    the command still running when time ran out, and of the first one that failed (or None).
    The first command (node 0) hosts the store on `listener`, if given; the others never hold it.

    When one command fails, the others are stopped (they would wait for it for minutes).
    Every process is stopped in any case: on success, failure, timeout, error and interrupt.
    """
    files: list[tuple[IO[bytes], IO[bytes]]] = []
    processes: list[_Agent] = []
    known: dict[int, psutil.Process] = {}
    timed_out: int | None = None
    first_failed: int | None = None
    try:
        for node, command in enumerate(commands):
            out = open(os.path.join(folder, f"node{node}.out"), "w+b")
            err = open(os.path.join(folder, f"node{node}.err"), "w+b")
            files.append((out, err))
            processes.append(_start(command, env, out, err, listener=listener if node == 0 else None))
            watch_group(processes[-1].pid)
            if listener is not None:
                listener.close()  # node 0 holds it now
        deadline = time.monotonic() + timeout
        while True:
            _remember_descendants(processes, known)
            running = [n for n, p in enumerate(processes) if p.poll() is None]
            failed = [n for n, p in enumerate(processes) if p.returncode not in (None, 0)]
            if failed:
                first_failed = failed[0]
                break
            if not running:
                break
            if time.monotonic() >= deadline:
                timed_out = running[0]
                break
            _pause()
    finally:
        _stop(processes, known)
        outputs: list[tuple[str, str]] = []
        for out, err in files:
            outputs.append((_read(out), _read(err)))
            out.close()
            err.close()
    return [p.returncode for p in processes], outputs, timed_out, first_failed


def _start(
    command: Sequence[str],
    env: dict[str, str],
    out: IO[bytes],
    err: IO[bytes],
    fork: bool = _FORK_AGENT,
    listener: socket.socket | None = None,
) -> _Agent:
    """Start one torchrun command (`[python, "-m", module, *args]`) in a session of its own, its
    output into `out` and `err`: forked from this process with `fork` (hosting the rendezvous
    store on `listener`, if given), else as a new interpreter."""
    if fork:
        return _ForkedAgent(command[2], command[3:], env, out, err, listener)
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        env=env,
        start_new_session=True,  # its own process group, so that it can be stopped whole
    )


class _ForkedAgent:
    """`python -m module args` run by a child forked from this process, which has imported PyTorch.

    It offers what `_run_group` uses of `subprocess.Popen`: `pid`, `poll`, `wait`, `returncode`.
    """

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        env: dict[str, str],
        out: IO[bytes],
        err: IO[bytes],
        listener: socket.socket | None = None,
    ) -> None:
        parent = os.getpid()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=FORK_WARNING, category=DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            code = 1
            try:
                isolate(parent)
                store = _host_store(listener) if listener is not None else None
                _redirect_stdio(out.fileno(), err.fileno())
                code = _run_module_as_main(module, list(args), env)
                del store
            except BaseException:  # the set-up failed: say why on (the new or the inherited) stderr
                traceback.print_exc()
            finally:
                os._exit(code)
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        """Wait for it to end; return its exit code."""
        code = self._reap(0)
        assert code is not None
        return code

    def _reap(self, flags: int) -> int | None:
        """Collect the child's exit status (`os.waitpid` with `flags`) unless already done."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, flags)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


_Agent = subprocess.Popen | _ForkedAgent  # one started torchrun


def _host_store(listener: socket.socket) -> TCPStore:
    """In node 0's forked agent: the rendezvous store's server, on `listener` (bound to loopback).

    torchrun's static rendezvous creates its store with `multi_tenant=True`, and a process has
    one such server per port: it finds this one and uses it, where it would have bound the port
    on every interface. Keep the returned store for as long as the agent runs.
    """
    return TCPStore(
        LOOPBACK,
        listener.getsockname()[1],
        is_master=True,
        multi_tenant=True,
        wait_for_workers=False,
        master_listen_fd=listener.detach(),
    )


def _redirect_stdio(out_fd: int, err_fd: int) -> None:
    """In a forked agent: stdin from /dev/null, stdout and stderr to these files, as a new process's.

    Logging as after a fresh `import torch`: PyTorch's handlers (created when this process
    imported it) write to the new streams, and the root logger has no handler (the caller's,
    pytest's say, stay behind), so records that reach it go to stderr, through logging's last
    resort, as in a new interpreter.
    """
    old = {
        id(stream): name
        for name in ("stdout", "stderr")
        for stream in (getattr(sys, name), getattr(sys, f"__{name}__"))
    }
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)
    root = logging.getLogger()
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    for logger in logging.Logger.manager.loggerDict.values():
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and id(handler.stream) in old:
                handler.setStream(getattr(sys, old[id(handler.stream)]))


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: IO[str] | None = None,
    line: str | None = None,
) -> None:
    """Show a warning as a new interpreter does: formatted, on stderr."""
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def _run_module_as_main(module: str, args: list[str], env: dict[str, str]) -> int:
    """Run `module` as `python -m module args` would, in this (forked) process; return the exit code."""
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # read TMPDIR again, as a new interpreter would
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a fresh Python's handlers, not the kernel's
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    warnings.resetwarnings()  # a fresh Python's filters, not the parent's
    for action, category, where in reversed(_FRESH_FILTERS):
        warnings.filterwarnings(action, category=category, module=where)
    warnings.showwarning = _show_warning  # on stderr, not to a recorder the parent set (pytest's)
    torch = sys.modules.get("torch")
    if torch is not None:  # a fork must not use the OpenMP threads of a parent that has computed
        torch.set_num_threads(1)  # so workers torchrun forks (--start-method=fork) use one, as
        # OMP_NUM_THREADS=1, torchrun's default, tells a new interpreter
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:
            print(done.code, file=sys.stderr)
            code = 1
    except BaseException:  # printed as Python prints an uncaught exception
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _pause() -> None:
    """Wait a moment between two looks at the running commands."""
    time.sleep(POLL_SECONDS)


def _read(file: IO[bytes]) -> str:
    """Everything written to `file`, as text."""
    file.seek(0)
    return file.read().decode("utf-8", errors="replace")


def _remember_descendants(processes: Sequence[_Agent], known: dict[int, psutil.Process]) -> None:
    """Add the live children of each command (torchrun's workers and theirs) to `known`.

    Workers run in sessions of their own, and a worker whose agent died is adopted by init,
    so they are remembered while their agent is alive, to be stopped later whatever happens.
    """
    for proc in processes:
        if proc.poll() is not None:
            continue
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(proc.pid)
            known.setdefault(parent.pid, parent)
            for child in parent.children(recursive=True):
                known.setdefault(child.pid, child)


def _stop(processes: Sequence[_Agent], known: dict[int, psutil.Process]) -> None:
    """Stop every command and every process it started (`supervision.stop`); torchrun passes SIGTERM
    on to its workers, and what outlives it is known from `_remember_descendants`."""

    def members() -> list[tuple[int, bool]]:
        _remember_descendants(processes, known)
        commands = [(p.pid, p.poll() is None) for p in processes]
        started = [(c.pid, True) for c in known.values() if c.pid not in dict(commands) and alive(c)]
        return commands + started  # only live ones: a dead one's pid may be another process's now

    try:
        stop(members)
    finally:
        for proc in processes:
            proc.wait()
            release_group(proc.pid)
        psutil.wait_procs([c for c in known.values() if alive(c)], timeout=GRACE_SECONDS)
