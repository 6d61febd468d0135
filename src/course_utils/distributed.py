"""A launcher that runs a function in N real processes, as `torchrun` would, from a notebook.

`torchrun --nproc-per-node=N script.py` starts N copies of a script and tells each one who it
is through environment variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, ...).
`launch(fn, nprocs)` does the same for a function, so that notebook 06 can show real process
groups on the `gloo` backend with no GPU and no terminal. The worker calls
`dist.init_process_group` itself, exactly as it would under `torchrun`, so the same worker runs
unchanged under both.

What the launcher adds to a bare `multiprocessing` start, and why:

- Results come back: each worker's return value travels to the parent through a pipe and
  `launch` returns them as a list ordered by rank.
- Failure is loud and quick: a rank that raises makes `launch` raise `WorkerError` naming the
  rank, with the worker's message and traceback, within moments. The other ranks, which may be
  blocked for ever in a collective waiting for the dead one, are stopped.
- Nothing is left behind: every process is terminated, then killed after a grace period, and
  joined, on success, on error, on timeout and on Ctrl-C (a kernel interrupt) alike.
- Only loopback: like torchrun's agent, the launcher hosts the rendezvous TCPStore itself, on a
  socket bound to 127.0.0.1 (a store hosted by rank 0 would listen on every interface), and
  gloo is told to use the loopback interface (GLOO_SOCKET_IFNAME), so nothing of this demo
  listens on the machine's network addresses, and a hostname that does not resolve (common in
  containers) does not matter.

Start method. `fork` is used where it is safe: where the OS has it (Linux, macOS) and no GPU
runtime (CUDA, XPU) is initialised in the parent, because a forked child inherits a GPU
context it cannot use. `fork` also works with functions defined in a notebook, since nothing
is pickled. Otherwise `spawn` starts fresh interpreters, which must import the function by
name: a function defined in a notebook lives in `__main__`, which a fresh interpreter cannot
import, so `launch` refuses it with an error that says what to do. On macOS Python itself
defaults to spawn because some system frameworks are not fork-safe; if a forked worker hangs
or crashes there, put the worker in a .py file and pass `method="spawn"`.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing as mp
import os
import pickle
import signal
import socket
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any

import psutil
import torch
from torch.distributed import TCPStore

MASTER_ADDR = "127.0.0.1"
GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL when stopping ranks
_POLL_SECONDS = 0.1
# How long a failed rank stays alive (so that its peers stay blocked, not crash in turn) before
# it exits on its own; the parent stops it much sooner.
_FAILED_RANK_LINGER_SECONDS = 30.0
_FORK_WARNING = r".*is multi-threaded, use of fork\(\) may lead to deadlocks in the child"

__all__ = [
    "LaunchError",
    "LaunchTimeoutError",
    "WorkerError",
    "choose_start_method",
    "free_port",
    "launch",
    "loopback_interface",
    "torchrun_env",
]


class LaunchError(RuntimeError):
    """The launch could not start or finish (bad arguments, busy port, a rank that failed)."""


class WorkerError(LaunchError):
    """A rank raised an exception or died; the other ranks were stopped.

    Attributes:
        rank: the global rank that failed first.
        world_size: how many ranks the launch had.
        exc_type: the name of the exception class raised in the worker (e.g. "ValueError"),
            or None when the process died without raising (a crash, a signal, `os._exit`).
        message: the exception's message, or how the process ended.
        traceback: the worker's full formatted traceback ("" when it died without raising).
    """

    def __init__(
        self, rank: int, world_size: int, exc_type: str | None, message: str, traceback: str = ""
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        what = f"raised {exc_type}: {message}" if exc_type else message
        super().__init__(
            f"rank {rank} of {world_size} {what}\n"
            "The other ranks were stopped. The worker's traceback is in the error's `.traceback`."
        )


class LaunchTimeoutError(LaunchError):
    """The ranks did not all finish within the timeout; all of them were stopped.

    Attributes:
        running: the ranks that had not finished when time ran out, in order.
        timeout: the timeout in seconds.
    """

    def __init__(self, running: Sequence[int], world_size: int, timeout: float) -> None:
        self.running = list(running)
        self.world_size = world_size
        self.timeout = timeout
        ranks = ", ".join(str(r) for r in self.running)
        super().__init__(
            f"timed out after {timeout:g} s: rank(s) {ranks} of {world_size} were still running "
            "and were stopped. A rank waiting for ever is usually blocked in a collective that "
            "another rank never called."
        )


def free_port(host: str = MASTER_ADDR) -> int:
    """Return a TCP port that is free on `host` now, chosen by the OS (bind to port 0).

    For commands such as `torchrun --master-port`: another program could take the port before
    it is used, a race practically never lost on one machine. `launch` needs no such luck: it
    keeps its port bound from the moment it picks it.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _listening_socket(port: int | None, host: str = MASTER_ADDR) -> socket.socket:
    """A socket listening on host:port (port None: a free port the OS picks) for the TCPStore.

    Binding it here, in the parent, and keeping it until the store takes it over leaves no
    moment in which another program could take the port. A taken port is a clear LaunchError.
    """
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535):
        raise LaunchError(f"master_port must be an int from 1 to 65535 (or None to pick one), not {port!r}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if os.name != "nt":
            # Ignore connections lingering in TIME_WAIT from an earlier run, not a live listener.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port or 0))
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno in (errno.EADDRINUSE, errno.EACCES):
            raise LaunchError(
                f"port {port} on {host} is already in use (or not allowed): another program, or a "
                "process group that was not shut down, holds it. Pass master_port=None to let the "
                "launcher pick a free port."
            ) from None
        raise
    return sock


def loopback_interface() -> str | None:
    """The name of the network interface that carries 127.0.0.1 ("lo" on Linux, "lo0" on macOS).

    Gloo binds to the address of the machine's hostname unless GLOO_SOCKET_IFNAME names an
    interface; in containers and sandboxes the hostname may not resolve, or resolve to an
    address on the network. For processes on one machine, loopback is always right.
    """
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == MASTER_ADDR for a in addresses):
            return name
    return None


def torchrun_env(
    rank: int, world_size: int, master_port: int, master_addr: str = MASTER_ADDR
) -> dict[str, str]:
    """The environment variables `torchrun --nproc-per-node=world_size` gives the worker `rank`.

    These are the names torchrun's elastic agent sets on a single node (one worker group, the
    default role), so code that reads them runs unchanged under torchrun. Like torchrun, the
    launcher hosts the rendezvous TCPStore itself, which TORCHELASTIC_USE_AGENT_STORE=True
    tells `init_process_group` (every rank connects as a client). The other TORCHELASTIC_*
    variables (run id, restart counts) are left out: there is no elastic agent to restart ranks.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in 0..{world_size - 1}, not {rank}")
    env = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),  # one node: the local rank is the global rank
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_RANK": "0",  # the node's rank
        "GROUP_WORLD_SIZE": "1",  # the number of nodes
        "ROLE_NAME": "default",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }
    # torchrun sets OMP_NUM_THREADS=1 for more than one process unless the user set it.
    if "OMP_NUM_THREADS" in os.environ:
        env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
    elif world_size > 1:
        env["OMP_NUM_THREADS"] = "1"
    return env


def _gpu_runtime_initialised() -> bool:
    """True when this process holds a GPU context that a forked child could not use."""
    if torch.cuda.is_initialized():
        return True
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and hasattr(xpu, "is_initialized") and xpu.is_initialized())


def choose_start_method() -> str:
    """The start method `launch` uses by default here: "fork" where it is safe, else "spawn".

    fork needs an OS that has it (Linux, macOS; not Windows) and no initialised GPU runtime in
    the parent: CUDA cannot be used in a forked child once the parent has initialised it.
    """
    if "fork" in mp.get_all_start_methods() and not _gpu_runtime_initialised():
        return "fork"
    return "spawn"


def _check_spawnable(fn: Callable[..., Any], args: tuple) -> None:
    """Raise LaunchError if a spawned interpreter could not import `fn` or unpickle `args`."""
    main = sys.modules.get("__main__")
    if getattr(fn, "__module__", None) == "__main__" and not getattr(main, "__file__", None):
        if _gpu_runtime_initialised():
            why = (
                "CUDA is initialised in this process, so the launcher cannot fork (a forked child "
                "cannot use its parent's CUDA context) and must spawn fresh interpreters. "
            )
        else:
            why = "With spawn, each rank is a fresh interpreter. "
        raise LaunchError(
            why + f"A spawned interpreter imports the worker by name, and {fn.__name__!r} is "
            "defined in the notebook (the module __main__), which a fresh interpreter cannot "
            "import. Move the function into a .py file next to the notebook and import it, or "
            "restart the kernel and launch before anything touches CUDA, so that fork can be used."
        )
    try:
        pickle.dumps((fn, args))
    except Exception as err:
        raise LaunchError(
            f"spawn must pickle the worker and its args, and that failed ({type(err).__name__}: "
            f"{err}). Use a function defined at the top level of a .py module, and picklable args."
        ) from None


def _bootstrap(
    fn: Callable[..., Any],
    args: tuple,
    env: dict[str, str],
    conn: Connection,
    parent_pid: int,
    inherited_fds: tuple[int, ...],
) -> None:
    """Run in each worker: set torchrun's environment, call fn, send the result or the error."""
    for fd in inherited_fds:  # the parent's listening socket, inherited through fork
        with contextlib.suppress(OSError):
            os.close(fd)
    os.environ.update(env)
    if env.get("OMP_NUM_THREADS") == "1":
        # The variable only acts when a process starts; a forked child must be told directly.
        torch.set_num_threads(1)
    try:
        result = fn(*args)
        try:
            payload = pickle.dumps(("ok", result))
        except Exception as err:
            raise TypeError(
                f"the return value ({type(result).__name__}) cannot be pickled, so it cannot be "
                f"sent back to the launcher: {err}. Return plain values (numbers, lists, tensors)."
            ) from err
        conn.send_bytes(payload)
    except BaseException as err:
        frames = traceback.format_exception(type(err), err, err.__traceback__)
        with contextlib.suppress(Exception):
            conn.send_bytes(pickle.dumps(("error", type(err).__name__, str(err), "".join(frames))))
        # Stay alive until the parent stops us (or goes away): if this rank exited now, its
        # peers blocked in a collective would fail in turn, and their secondary errors could
        # reach the parent before this one. The parent stops every rank at once instead.
        deadline = time.monotonic() + _FAILED_RANK_LINGER_SECONDS
        while time.monotonic() < deadline and os.getppid() == parent_pid:
            with contextlib.suppress(Exception):
                if conn.poll(_POLL_SECONDS):
                    break
        os._exit(1)
    finally:
        conn.close()


def _stop(processes: Sequence[mp.process.BaseProcess], grace: float = GRACE_SECONDS) -> None:
    """Terminate every live process, kill those still alive after `grace` seconds, join all."""
    started = [p for p in processes if p.pid is not None]
    for proc in started:
        if proc.is_alive():
            with contextlib.suppress(OSError):
                proc.terminate()
    deadline = time.monotonic() + grace
    for proc in started:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in started:
        if proc.is_alive():
            with contextlib.suppress(OSError):
                proc.kill()
    for proc in started:
        proc.join()
        proc.close()


def _describe_exit(exitcode: int | None) -> str:
    """How a worker process ended, in words, without a pid."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name} before returning a result"
    return f"exited with code {exitcode} before returning a result"


def _check_arguments(fn: object, nprocs: object, args: object, timeout: object) -> None:
    """Raise an error that says what to pass when launch's arguments are wrong."""
    if not callable(fn):
        raise TypeError(f"fn must be a function to run in each process, not {type(fn).__name__}")
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise ValueError(f"nprocs must be a whole number of processes, at least 1, not {nprocs!r}")
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a tuple or list of arguments for fn, not {type(args).__name__}")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")


def _receive(conn: Connection) -> tuple | None:
    """One message from a worker's pipe, or None when it closed without sending one."""
    try:
        return pickle.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return None
    finally:
        conn.close()


def _collect(
    processes: Sequence[mp.process.BaseProcess], connections: dict[Connection, int], timeout: float
) -> list[Any]:
    """Wait for every rank's result; raise at the first failure or when time runs out.

    `connections` maps each rank's pipe to its rank; read pipes are removed from it.
    """
    nprocs = len(processes)
    results: dict[int, Any] = {}
    sentinels = {proc.sentinel: rank for rank, proc in enumerate(processes)}
    deadline = time.monotonic() + timeout
    while len(results) < nprocs:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LaunchTimeoutError([r for r in range(nprocs) if r not in results], nprocs, timeout)
        ready = wait([*connections, *sentinels], timeout=remaining)
        readable = {connections[c] for c in ready if c in connections}
        dead = {sentinels.pop(s) for s in ready if s in sentinels}
        failures: list[WorkerError] = []
        for rank in sorted(readable | dead):
            conn = next((c for c, r in connections.items() if r == rank), None)
            if conn is None:
                continue  # its message was read on an earlier pass
            del connections[conn]
            # A rank that died has closed its end: poll() sees its message or the end of file.
            message = _receive(conn) if rank in readable or conn.poll() else None
            conn.close()
            if message is None:
                processes[rank].join(GRACE_SECONDS)  # its pipe is closed: it is exiting
                failures.append(WorkerError(rank, nprocs, None, _describe_exit(processes[rank].exitcode)))
            elif message[0] == "ok":
                results[rank] = message[1]
            else:
                _, exc_type, text, trace = message
                failures.append(WorkerError(rank, nprocs, exc_type, text, trace))
        if failures:
            # Several at once: report the lowest rank, so the report does not depend on timing.
            raise min(failures, key=lambda f: f.rank)
    return [results[rank] for rank in range(nprocs)]


def launch(
    fn: Callable[..., Any],
    nprocs: int,
    args: Sequence[Any] = (),
    timeout: float = 60.0,
    master_port: int | None = None,
    method: str | None = None,
) -> list[Any]:
    """Run `fn(*args)` in `nprocs` processes with torchrun's environment; return results by rank.

    Each process gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
    MASTER_PORT and the rest of what `torchrun --nproc-per-node=nprocs` sets, so `fn` calls
    `dist.init_process_group("gloo")` itself and runs unchanged under torchrun. As torchrun's
    agent does, the launcher hosts the rendezvous store, on 127.0.0.1 only, on `master_port`
    (None: a free port). Return values must be picklable; they come back ordered by rank.
    `method` is the start method, "fork" or "spawn"; None picks one (see `choose_start_method`).

    Raises:
        WorkerError: a rank raised (or died); it names the rank and carries the message and
            the traceback. The other ranks are stopped at once.
        LaunchTimeoutError: not every rank finished within `timeout` seconds; it lists those
            still running. All ranks are stopped.
        LaunchError: `master_port` is taken, or spawn cannot run `fn` (a notebook function).
        TypeError, ValueError: bad arguments.
    """
    _check_arguments(fn, nprocs, args, timeout)
    args = tuple(args)
    if method is None:
        method = choose_start_method()
    elif method not in ("fork", "spawn"):
        raise ValueError(f'method must be "fork", "spawn" or None (choose), not {method!r}')
    elif method not in mp.get_all_start_methods():
        raise LaunchError(f"this platform cannot start processes with {method!r}; use method=None")
    if method == "spawn":
        _check_spawnable(fn, args)
    ctx = mp.get_context(method)
    base_env: dict[str, str] = {}
    if "GLOO_SOCKET_IFNAME" not in os.environ:
        interface = loopback_interface()
        if interface:
            base_env["GLOO_SOCKET_IFNAME"] = interface

    listener = _listening_socket(master_port)
    port = listener.getsockname()[1]
    inherited = (listener.fileno(),) if method == "fork" else ()
    store: TCPStore | None = None
    processes: list[mp.process.BaseProcess] = []
    connections: dict[Connection, int] = {}
    try:
        for rank in range(nprocs):
            parent_end, child_end = ctx.Pipe(duplex=True)
            connections[parent_end] = rank
            proc = ctx.Process(
                target=_bootstrap,
                args=(
                    fn,
                    args,
                    base_env | torchrun_env(rank, nprocs, port),
                    child_end,
                    os.getpid(),
                    inherited,
                ),
                name=f"rank{rank}",
                daemon=False,  # a daemonic worker could not start DataLoader workers
            )
            with warnings.catch_warnings():
                # Python 3.12+ warns when a process with threads forks (a Jupyter kernel has
                # several), because a lock held by another thread at that moment stays locked
                # in the child. The child here runs only the worker: it does not use the
                # kernel's threads or sockets, and CPython resets its own locks after a fork.
                warnings.filterwarnings("ignore", message=_FORK_WARNING, category=DeprecationWarning)
                proc.start()
            child_end.close()
            processes.append(proc)
        # The store, like torchrun's agent store, lives in this process, on the socket bound
        # above; the ranks connect to it in init_process_group and queue until it accepts.
        store = TCPStore(
            MASTER_ADDR,
            port,
            world_size=nprocs,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout),
            master_listen_fd=listener.detach(),
        )

        return _collect(processes, connections, timeout)
    finally:
        for conn in connections:
            conn.close()
        _stop(processes)
        del store  # shuts the store's server down and closes its port
        if listener.fileno() != -1:
            listener.close()
