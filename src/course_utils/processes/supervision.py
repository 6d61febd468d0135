"""What every process the course starts shares: its own process group, loopback, a timeout, a clean stop.

The notebook launcher (`launcher`), the torchrun helpers (`torchrun`) and `run_python`
(`child_python`), the modules of `course_utils.processes` beside this one, all start processes
from a notebook and must never leave one behind. They share these rules:

- Each child leads a process group (a session) of its own, so one signal to the group reaches
  the child and everything it started (`signal_group`); a forked child also dies with its
  parent on Linux (`isolate`).
- Stopping is SIGTERM to every group, a grace period to exit, then SIGKILL to every group; a
  second Ctrl-C (KeyboardInterrupt) during the grace period kills at once (`stop`).
- Everything listens on loopback only (`LOOPBACK`, `listening_socket`, `gloo_env`).
- Every wait has a timeout, checked once for all (`course_utils._checks.timeout_seconds`, where
  every argument a student passes is checked).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping

import psutil

from course_utils._checks import environment, text
from course_utils.i18n import _

LOOPBACK = "127.0.0.1"
GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL when stopping processes
POLL_SECONDS = 0.05  # between two looks at running processes
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows has no SIGKILL; SIGTERM kills there
# What Python 3.12+ warns when a process with threads (a Jupyter kernel has several) forks.
FORK_WARNING = r".*is multi-threaded, use of fork\(\) may lead to deadlocks in the child"
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class LaunchError(RuntimeError):
    """A launch could not start or finish (bad arguments, busy port, a process that failed)."""


class _PortValueError(LaunchError, ValueError):
    """`master_port` is not a port number: a LaunchError, and a ValueError like any bad argument."""


def child_env(changes: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment with `changes` on top (a None value removes that variable)."""
    env = dict(os.environ)
    for name, value in environment("changes", changes).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def signal_group(pid: int, sig: int, running: bool = True) -> None:
    """Send `sig` to the process group that `pid` leads: the process and everything it started.

    A process that leads no group (it has not called setsid yet, or it is a member of another's
    group) gets the signal alone while it is `running` (not yet reaped, so its pid is still its
    own). A group outlives its leader while processes it started are alive, so a group is
    signalled even after its leader ended. Without process groups (Windows) the process alone.
    """
    if hasattr(os, "killpg"):
        try:
            os.killpg(pid, sig)
            return
        except ProcessLookupError:
            pass  # no such group
        except PermissionError:
            return
    if running:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def stop(
    members: Callable[[], Iterable[tuple[int, bool]]], grace: float | None = None, patience: float = 0.0
) -> None:
    """Stop process groups: up to `patience` s to exit alone, SIGTERM, up to `grace` s, SIGKILL.

    `members()` lists `(pid, running)` for every process whose group is to be stopped; it is
    asked anew at every step, so it must reap the caller's own children (an exited child no
    longer counts as running) and may add processes found meanwhile. SIGTERM and SIGKILL go to
    every group, also of processes that ended, since what they started may have outlived them.
    A KeyboardInterrupt (a second Ctrl-C) while waiting sends SIGKILL at once, then is re-raised.
    """
    grace = GRACE_SECONDS if grace is None else grace
    try:
        _wait_for(members, time.monotonic() + patience)
        for pid, running in members():
            signal_group(pid, signal.SIGTERM, running)
        _wait_for(members, time.monotonic() + grace)
    finally:  # also on a KeyboardInterrupt, which then goes on up
        for pid, running in members():
            signal_group(pid, KILL, running)


def _set_parent_death_signal(sig: int) -> bool:
    """Linux: have the kernel send `sig` to this process when its parent dies. True if it did."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def isolate(parent_pid: int) -> None:
    """First thing in a forked child (a rank, a torchrun agent): a session of its own, death with its parent.

    The session (a new process group) lets the parent stop the child and everything it
    started with one signal to the group, as torchrun does. The parent-death signal makes the
    kernel kill the child if the parent dies without stopping it; checking the parent
    afterwards closes the gap in which the parent died before the request was made.
    """
    if hasattr(os, "setsid"):
        with contextlib.suppress(OSError):
            os.setsid()
    if sys.platform.startswith("linux"):
        _set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent_pid:
            os._exit(1)  # orphaned already: the launcher is gone


def _wait_for(members: Callable[[], Iterable[tuple[int, bool]]], deadline: float) -> None:
    """Wait until none of `members()` runs, or until `deadline`."""
    while any(running for _, running in members()) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)


def alive(proc: psutil.Process) -> bool:
    """Whether `proc` (the very process, not a later one with its pid) still runs; a zombie does not."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def check_port(port: object) -> None:
    """Raise an error that says what to pass unless `port` is None or a port number 1..65535."""
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535):
        raise _PortValueError(
            _("master_port must be an int from 1 to 65535 (or None to pick one), not {port!r}").format(
                port=port
            )
        )


def listening_socket(port: int | None, host: str = LOOPBACK) -> socket.socket:
    """A socket listening on host:port (port None: a free port the OS picks).

    Binding in the parent and keeping the socket until it is used leaves no moment in which
    another program could take the port. A taken port is a clear LaunchError at once (torchrun
    would fail after seconds with a long traceback). Connections of an earlier run lingering in
    TIME_WAIT do not count: only a live listener (or a forbidden port) fails.
    """
    check_port(port)
    text("host", host, repr(LOOPBACK))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if os.name != "nt":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port or 0))
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno in (errno.EADDRINUSE, errno.EACCES):
            raise LaunchError(
                _(
                    "port {port} on {host} is already in use (or not allowed): another program, or a "
                    "process group that was not shut down, holds it. Pass master_port=None to let the "
                    "launcher pick a free port."
                ).format(port=port, host=host)
            ) from None
        raise ValueError(
            _(
                "host must be an IPv4 address of this machine such as {loopback!r}, not {host!r} ({err})"
            ).format(loopback=LOOPBACK, host=host, err=err)
        ) from None
    return sock


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port that is free on `host` now, chosen by the OS, for `torchrun --master-port`.

    Another program could take it before it is used, a race practically never lost on one
    machine; `launch` avoids even that by keeping its port bound (`listening_socket`).
    """
    text("host", host, repr(LOOPBACK))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as err:
            raise ValueError(
                _(
                    "host must be an IPv4 address of this machine such as {loopback!r}, not {host!r} ({err})"
                ).format(loopback=LOOPBACK, host=host, err=err)
            ) from None
        return sock.getsockname()[1]


def loopback_interface() -> str | None:
    """The name of the network interface that carries 127.0.0.1 ("lo" on Linux, "lo0" on macOS).

    Gloo binds to the address of the machine's hostname unless GLOO_SOCKET_IFNAME names an
    interface; in containers and sandboxes the hostname may not resolve, or resolve to an
    address on the network. For processes on one machine, loopback is always right.
    """
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == LOOPBACK for a in addresses):
            return name
    return None


def gloo_env() -> dict[str, str]:
    """`{"GLOO_SOCKET_IFNAME": <loopback>}` for children, unless this environment already names one."""
    interface = None if "GLOO_SOCKET_IFNAME" in os.environ else loopback_interface()
    return {"GLOO_SOCKET_IFNAME": interface} if interface else {}
