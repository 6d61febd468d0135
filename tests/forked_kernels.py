"""Notebook kernels forked from a process that has already imported torch, for the notebook suite.

Every notebook's kernel otherwise spends seconds importing the same modules (torch, torch._dynamo,
matplotlib, ipykernel): on a 2-core machine a fresh kernel took 4.5 s to start and import torch and
pyplot, a forked one 0.5 s, paid again by each of the 32 notebooks. Where one pytest process runs
several notebooks, it starts a "zygote" once: a Python that imports those modules, runs no Python
thread but its main one, and waits. Each kernel is a fork of it that becomes what `python -m
ipykernel_launcher -f FILE` would be: its own session, the kernel manager's environment and working
folder, the same sys.path, stdin from /dev/null, the given stdout and stderr. Its cells then run as
in any kernel; only the imports are already done. `python3 course.py bench` times a notebook alone
without it, and COURSE_FORKED_KERNELS=0 turns it off.

The zygote talks to this process over a socketpair: EOF on it (this process ended, however) ends
the zygote, and a kernel whose zygote ended shuts itself down (ipykernel polls its parent, named
by JPY_PARENT_PID). The handle of each kernel holds a pidfd of it, and the zygote reaps a kernel
only when asked for its exit code: until then no other process can get its pid, which
jupyter_client signals as a process group. What forking cannot carry over: settings Python reads
once at its start (PYTHONHASHSEED, PYTHONPATH) and what a preloaded module read from the
environment when imported; the suite gives the zygote the environment its kernels get.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

import kernel_zygote
from jupyter_client.provisioning import LocalProvisioner
from kernel_sockets import SocketKernelManager

SWITCH = "COURSE_FORKED_KERNELS"  # "0": every kernel is a fresh process
MIN_NOTEBOOKS = 3  # a session with fewer notebooks (a notebook alone) starts its kernels afresh
READY_TIMEOUT_S = 120.0
RUNNING: set[int] = set()  # the pids of this process's zygotes, which the tests' process checks leave alone


def forkable(cmd: list[str]) -> bool:
    """Whether `cmd` starts an ipykernel with this Python (`python -m ipykernel_launcher ...`)."""
    return (
        len(cmd) >= 3
        and cmd[1:3] == ["-m", "ipykernel_launcher"]
        and os.path.abspath(cmd[0]) == os.path.abspath(sys.executable)  # not another venv's link to it
    )


def _fd(stream: IO[Any] | int | None, default: int, devnull: int) -> int:
    """The file descriptor a Popen-style stdout/stderr argument names (None: `default`)."""
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        return devnull
    return stream if isinstance(stream, int) else stream.fileno()


class Zygote:
    """The pre-imported Python that kernels are forked from, with its end of the socketpair."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        """Start a zygote that imports `preload` (none: kernel_zygote.PRELOAD); wait until it is ready."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, kernel_zygote.__file__, str(theirs.fileno()), *preload],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.channel = ours
        ready, _, _ = select.select([ours], [], [], READY_TIMEOUT_S)
        reply = json.loads(ours.recv(kernel_zygote.MESSAGE_BYTES) or b"{}") if ready else {}
        if not reply.get("ready"):
            self.stop()
            raise RuntimeError(f"the kernel zygote did not start (its reply: {reply}); set {SWITCH}=0")
        self.pid = self.process.pid
        RUNNING.add(self.pid)

    def start(self, cmd: list[str], env: dict[str, str], cwd: str, stdout: int, stderr: int) -> ForkedKernel:
        """Fork a kernel that runs `cmd`'s arguments; its handle."""
        request = {"op": "start", "argv": cmd[3:], "env": env, "cwd": cwd}
        with open(os.devnull, "rb") as stdin:
            socket.send_fds(self.channel, [json.dumps(request).encode()], [stdin.fileno(), stdout, stderr])
        data, fds, _, _ = socket.recv_fds(self.channel, kernel_zygote.MESSAGE_BYTES, 1)
        reply = json.loads(data or b"{}")
        if "pid" not in reply or len(fds) != 1:
            raise RuntimeError(f"the kernel zygote could not fork a kernel: {reply}")
        return ForkedKernel(self, reply["pid"], fds[0])

    def exit_code(self, pid: int) -> int:
        """The exit code of a kernel that has ended (as Popen.returncode gives it)."""
        self.channel.send(json.dumps({"op": "status", "pid": pid}).encode())
        reply = json.loads(self.channel.recv(kernel_zygote.MESSAGE_BYTES) or b"{}")
        if "code" not in reply:
            raise RuntimeError(f"the kernel zygote has no exit code for kernel {pid}: {reply}")
        return reply["code"]

    def stop(self) -> None:
        """End the zygote: closing its channel is its signal to exit."""
        self.channel.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        RUNNING.discard(self.process.pid)


class ForkedKernel:
    """A Popen-like handle of a forked kernel (a child of the zygote), held by a pidfd."""

    stdin = stdout = stderr = None

    def __init__(self, zygote: Zygote, pid: int, pidfd: int) -> None:
        self.zygote, self.pid, self.pidfd = zygote, pid, pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the kernel has ended, else None."""
        if self.returncode is None and select.select([self.pidfd], [], [], 0)[0]:
            try:
                self.returncode = self.zygote.exit_code(self.pid)
            finally:
                os.close(self.pidfd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the kernel to end; raise subprocess.TimeoutExpired after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout or 0)
            select.select([self.pidfd], [], [], 0.1)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        """Signal the kernel itself, through its pidfd."""
        if self.poll() is None:
            signal.pidfd_send_signal(self.pidfd, signum)

    def terminate(self) -> None:
        """SIGTERM, as Popen.terminate."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, as Popen.kill."""
        self.send_signal(signal.SIGKILL)


class ForkingProvisioner(LocalProvisioner):
    """The local provisioner, launching ipykernels as forks of the zygote."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        streams = [kwargs.get("stdout"), kwargs.get("stderr")]
        piped = any(isinstance(s, int) and s in (subprocess.PIPE, subprocess.STDOUT) for s in streams)
        if piped or not forkable(cmd):  # a pipe to this process, or another kernel: started as usual
            return await super().launch_kernel(cmd, **kwargs)
        zygote = getattr(self.parent, "zygote", None) or shared_zygote()
        cwd = str(kwargs.get("cwd") or os.getcwd())
        env = dict(kwargs.get("env") or os.environ)
        with open(os.devnull, "wb") as devnull:
            fds = [
                _fd(stream, default, devnull.fileno())
                for stream, default in zip(streams, (1, 2), strict=True)
            ]
            self.process = zygote.start(cmd, env, cwd, *fds)
        for stream in streams:  # the kernel has its own copies (nbval opens /dev/null for its stderr)
            if stream is not None and not isinstance(stream, int):
                stream.close()
        self.pid = self.pgid = self.process.pid  # the kernel leads its own session, as launch_kernel's does
        self.cwd = cwd
        return self.connection_info


class ForkingKernelManager(SocketKernelManager):
    """The course's kernel manager for nbval (on Unix sockets), its local kernels forked from the zygote."""

    zygote: Zygote | None = None  # None: this process's shared one

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        if type(self.provisioner) is LocalProvisioner:
            self.provisioner.__class__ = ForkingProvisioner
        return cmd, kw


_zygote: Zygote | None = None  # started by the first kernel this process forks


def shared_zygote() -> Zygote:
    """This process's zygote, started by the first kernel it forks and stopped when it exits."""
    global _zygote
    if _zygote is None or _zygote.process.poll() is not None:  # none yet, or it died: a new one
        _zygote = Zygote()
        atexit.register(_zygote.stop)
    return _zygote


def enable(notebooks: int) -> bool:
    """Have nbval fork its kernels when this session collected `notebooks` >= MIN_NOTEBOOKS; True if so."""
    if notebooks < MIN_NOTEBOOKS or os.environ.get(SWITCH) == "0":
        return False
    if not (sys.platform.startswith("linux") and hasattr(os, "pidfd_open")):
        return False
    import nbval.kernel

    if nbval.kernel.KernelManager is SocketKernelManager:  # as the project's conftest.py sets it
        nbval.kernel.KernelManager = ForkingKernelManager
    return nbval.kernel.KernelManager is ForkingKernelManager
