"""A launcher that runs a function in N real processes, as `torchrun` would, from a notebook.

`torchrun --nproc-per-node=N script.py` starts N copies of a script and tells each one who it
is through environment variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, ...).
`launch(fn, nprocs)` does the same for a function, so that notebooks can show real process
groups on `gloo` with no GPU and no terminal; the worker calls `dist.init_process_group`
itself, so the same worker runs unchanged under torchrun. What it adds, and why:

- Results come back by rank, through a pipe. A rank that ends with `sys.exit(0)` (or exit
  code 0) succeeded, as under torchrun; its result is None.
- Failure is loud and quick: every 0.05 s the parent reads every rank's pipe and exit code, so
  a rank that raises, crashes or is killed makes `launch` raise `WorkerError` within moments,
  naming the rank, with the worker's message and traceback (chained as the error's cause). The
  other ranks, maybe blocked for ever in a collective, are stopped. A death is seen from the
  exit code: processes the rank started (DataLoader workers) inherit its pipe and keep it open.
- Nothing is left behind: each rank leads a session (process group) of its own, like torchrun's
  workers, and every group is stopped as `course_utils.processes.supervision.stop` says (SIGTERM, a
  grace period, SIGKILL; a second Ctrl-C kills at once) on success, error, timeout and Ctrl-C
  alike. On Linux each rank also dies with the launching process (PR_SET_PDEATHSIG), so a
  kernel killed outright (out of memory on Binder) leaves no rank behind. A process that a rank
  moves into a session of its own escapes this, as it would escape torchrun.
- Only loopback: like torchrun's agent, the launcher hosts the rendezvous TCPStore itself, on a
  socket bound to 127.0.0.1 (a store hosted by rank 0 would listen on every interface), and
  gloo uses the loopback interface (GLOO_SOCKET_IFNAME).

Start method: `fork` where it is safe, which also runs functions defined in a notebook (nothing
is pickled); otherwise `spawn`, whose fresh interpreters import the worker by name from a .py
file. Where fork is not safe (CUDA or autograd's GPU threads started in this process), a worker
defined in a notebook travels by value instead (cloudpickle sends its code and what it uses),
so the notebook's cells still run on a GPU machine. `choose_start_method` says when and why. On
macOS Python defaults to spawn because some system frameworks are not fork-safe; if a forked
worker hangs or crashes there, put the worker in a .py file and pass `method="spawn"`.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any

import cloudpickle
import torch
from torch.distributed import TCPStore

from course_utils._checks import path, text, timeout_seconds, whole_number
from course_utils.gpus import cuda_driver_started
from course_utils.i18n import N_, _, translated
from course_utils.processes.supervision import (
    FORK_WARNING,
    KILL,
    LOOPBACK,
    POLL_SECONDS,
    LaunchError,
    gloo_env,
    isolate,
    listening_socket,
    signal_group,
    stop,
)
from course_utils.processes.watchdog import mark, release_folder, release_group, watch_folder, watch_group

# After every rank has sent its result, how long the ranks may take to exit by themselves
# before they are stopped like the others.
_EXIT_PATIENCE_SECONDS = 1.0
# After the first failure, how long to keep collecting, so that ranks failing at the same
# moment are all seen and the report does not depend on which message arrived first.
_FAILURE_WINDOW_SECONDS = 0.25
# How long a failed rank stays alive (so that its peers stay blocked, not crash in turn) before
# it exits on its own; the parent stops it much sooner.
_FAILED_RANK_LINGER_SECONDS = 30.0
# Messages from a rank on POSIX: an 8-byte length, then the pickled message. The parent reads
# them without blocking, so a rank that dies half-way through a message cannot hang it.
_HEADER = struct.Struct("!Q")
_RAW_PIPES = os.name == "posix"
_PROC_MAPS = "/proc/self/maps"  # the libraries mapped into this process (Linux)
_PROC_TASKS = "/proc/self/task"  # this process's threads, each with its name in `comm` (Linux)
# The name autograd gives the threads it starts for each GPU (torch/csrc/autograd/engine.cpp,
# Engine::thread_init) at the first backward() on a machine with one; from then on a forked
# child's backward() raises "Unable to handle autograd's threading in combination with fork".
_AUTOGRAD_THREAD_PREFIX = "pt_autograd_"
_STORE_TIMEOUT_FLOOR_SECONDS = 30.0
# The timeout counts from the moment every rank is ready to call the function: a spawned rank
# first imports PyTorch, which takes seconds on a busy machine. A rank that never gets there is
# stopped this long after the timeout would have ended had it counted from the start.
_START_ALLOWANCE_SECONDS = 60.0
MAX_NPROCS = 64  # more processes than one machine runs usefully (each has its pipes and its fork)
MAX_WORLD_SIZE = 2**31 - 1  # c10d counts ranks in a 32-bit int
_HOLD_INTERRUPTS = hasattr(signal, "pthread_sigmask")  # POSIX
_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}

__all__ = [
    "LaunchTimeoutError",
    "RemoteTraceback",
    "WorkerError",
    "choose_start_method",
    "launch",
    "torchrun_env",
]


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process.

    `WorkerError` carries it as its `__cause__`, as `concurrent.futures` does, so that an
    uncaught `WorkerError` shows the worker's traceback above its own, in a terminal and in
    Jupyter alike.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


class WorkerError(LaunchError):
    """A rank raised an exception or died; the other ranks were stopped.

    Attributes:
        rank: the global rank reported. When several ranks fail within a moment of each other,
            a rank that died without raising (a crash, a signal, `os._exit`) is reported before
            ranks that raised, since a peer's death makes the others raise in turn; then the
            lowest rank. The others are in `also_failed`.
        world_size: how many ranks the launch had.
        exc_type: the name of the exception class raised in the worker (e.g. "ValueError"),
            or None when the process died without raising (a crash, a signal, `os._exit`).
        message: the exception's message, or how the process ended.
        traceback: the worker's full formatted traceback ("" when it died without raising);
            also chained as the error's `__cause__` (a `RemoteTraceback`).
        hint: what to check, where the launcher can tell ("" otherwise).
        also_failed: the other ranks that failed at the same time, by rank.
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        exc_type: str | None,
        message: str,
        traceback: str = "",
        hint: str = "",
        also_failed: dict[int, WorkerError] | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        self.hint = hint
        self.also_failed = dict(also_failed or {})
        what = (
            _("raised {exc_type}: {message}").format(exc_type=exc_type, message=message)
            if exc_type
            else message
        )
        lines = [_("rank {rank} of {world_size} {what}").format(rank=rank, world_size=world_size, what=what)]
        if hint:
            lines.append(hint)
        if self.also_failed:
            others = ", ".join(
                f"rank {r} ({e.exc_type or _('died')})" for r, e in sorted(self.also_failed.items())
            )
            lines.append(_("Also failed: {others}; see the error's `.also_failed`.").format(others=others))
        if traceback:
            lines.append(
                _(
                    "The other ranks were stopped. The worker's traceback is in the error's "
                    "`.traceback`, and shown above this error when it is not caught."
                )
            )
            self.__cause__ = RemoteTraceback(traceback)
        else:
            lines.append(_("The other ranks were stopped."))
        super().__init__("\n".join(lines))


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
            _(
                "timed out after {timeout:g} s: rank(s) {ranks} of {world_size} were still running "
                "and were stopped. A rank waiting for ever is usually blocked in a collective that "
                "another rank never called."
            ).format(timeout=timeout, ranks=ranks, world_size=world_size)
        )


def torchrun_env(
    rank: int,
    world_size: int,
    master_port: int,
    master_addr: str = LOOPBACK,
    error_file: str | None = None,
) -> dict[str, str]:
    """The environment variables `torchrun --nproc-per-node=world_size` gives the worker `rank`.

    These are the names torchrun's elastic agent sets on a single node (one worker group, the
    default role, the default run id "none", no restarts), so code that reads them runs
    unchanged under torchrun, and `torch.distributed.is_torchelastic_launched()` is True. Like
    torchrun, the launcher hosts the rendezvous TCPStore itself, which
    TORCHELASTIC_USE_AGENT_STORE=True tells `init_process_group` (every rank connects as a
    client). TORCHELASTIC_ERROR_FILE, where a worker decorated with torchrun's `@record` writes
    its error, is set only when `error_file` names a place for it (`launch` names one per rank
    and removes it afterwards). Not set: TORCHELASTIC_SIGNALS_TO_HANDLE, which torchrun's agent
    sets in its own environment for its own signal handling (the workers merely inherit it).
    """
    rank = whole_number("rank", rank)
    world_size = whole_number("world_size", world_size, high=MAX_WORLD_SIZE)
    master_port = whole_number("master_port", master_port)
    if world_size < 1:
        raise ValueError(
            _("world_size must be the number of processes, at least 1, not {world_size}").format(
                world_size=world_size
            )
        )
    text("master_addr", master_addr, repr(LOOPBACK))
    if not 0 <= rank < world_size:
        raise ValueError(
            _("rank must be in 0..{last} for world_size={world_size}, not {rank}").format(
                last=world_size - 1, world_size=world_size, rank=rank
            )
        )
    if not 1 <= master_port <= 65535:
        raise ValueError(
            _("master_port must be a port number from 1 to 65535, not {master_port}").format(
                master_port=master_port
            )
        )
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
        "TORCHELASTIC_RUN_ID": "none",  # torchrun's default --rdzv-id
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }
    if error_file is not None:
        env["TORCHELASTIC_ERROR_FILE"] = path("error_file", error_file, "'error-0.json'")
    # torchrun sets OMP_NUM_THREADS=1 for more than one process unless the user set it.
    if "OMP_NUM_THREADS" in os.environ:
        env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
    elif world_size > 1:
        env["OMP_NUM_THREADS"] = "1"
    return env


def _gpu_runtime_initialised() -> bool:
    """True when PyTorch holds a GPU context in this process that a forked child could not use."""
    if torch.cuda.is_initialized():
        return True
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and hasattr(xpu, "is_initialized") and xpu.is_initialized())


def _fork_loses_cuda(maps: str | None = None) -> bool:
    """Whether a child forked now could not use CUDA because the driver started here. Cautious:
    on Linux (a memory map to read) a driver that cannot be asked counts as started. `maps`: for tests."""
    maps = maps or _PROC_MAPS
    started = cuda_driver_started(maps)
    return started if started is not None else os.path.exists(maps)


def _autograd_threads_started(tasks: str | None = None) -> bool:
    """Whether autograd runs its GPU threads in this process, so a forked child cannot run backward().

    The first backward() on a machine with a GPU starts them (even for a CPU model); a CPU-only
    machine never does. Read from the threads' names (Linux); elsewhere False. `tasks`: for tests.
    """
    tasks = tasks or _PROC_TASKS
    try:
        threads = os.listdir(tasks)
    except OSError:
        return False
    for thread in threads:
        with contextlib.suppress(OSError), open(os.path.join(tasks, thread, "comm")) as comm:
            if comm.read().startswith(_AUTOGRAD_THREAD_PREFIX):
                return True
    return False


def _cuda_started() -> bool:
    """Whether CUDA (the runtime or the driver), or autograd's GPU threads, started here, so forked
    ranks can use neither CUDA nor backward()."""
    return _gpu_runtime_initialised() or _fork_loses_cuda() or _autograd_threads_started()


def _wait_for_exit(processes: Sequence[mp.process.BaseProcess], patience: float) -> None:
    """Wait up to `patience` s for `processes` to exit, woken by each exit rather than a poll interval.

    A process's sentinel is readable once it has exited (or closed it), shortly before it can be
    reaped: then a 1 ms nap, not a spin. Processes it started may hold the sentinel open after
    it ended, so its exit code is also looked at every `POLL_SECONDS`.
    """
    deadline = time.monotonic() + patience
    while running := [p for p in processes if p.exitcode is None]:
        if (left := deadline - time.monotonic()) <= 0:
            return
        if wait([p.sentinel for p in running], timeout=min(left, POLL_SECONDS)):
            time.sleep(0.001)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while a rank is forked, and take them right after.

    A signal handled during a fork runs its Python handler inside a fork hook (logging's
    `_releaseLock`), where the KeyboardInterrupt is printed as "Exception ignored" and lost:
    the launch would run on to its timeout. Held back, the signal arrives as the block ends,
    in the launcher's own code, which then stops every rank started so far.
    """
    if not _HOLD_INTERRUPTS:
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _MainFinder(pickle.Pickler):
    """Pickles to nowhere, noting the functions and classes it would send by name from __main__."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL)
        self.found: list[str] = []

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type | types.FunctionType) and getattr(obj, "__module__", None) == "__main__":
            self.found.append(getattr(obj, "__name__", repr(obj)))
        return NotImplemented  # pickle it as usual


def _notebook_names(fn: Callable[..., Any], args: tuple = ()) -> list[str]:
    """The functions and classes among `fn` and `args` that a spawned interpreter cannot import.

    Those defined in a notebook: in the module __main__ of a process with no main file (a
    kernel). A script's __main__ can be imported by a spawned interpreter, so it is not listed.
    """
    if getattr(sys.modules.get("__main__"), "__file__", None):
        return []
    finder = _MainFinder()
    with contextlib.suppress(Exception):  # what cannot be pickled is reported by _check_spawnable
        finder.dump((fn, args))
    return list(dict.fromkeys(finder.found))


class _Shipped:
    """A worker and its arguments pickled by value (cloudpickle), for spawned ranks: a function
    defined in a notebook travels as its code and the values it uses, not as a name that a fresh
    interpreter could not import."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def __call__(self) -> Any:
        fn, args = pickle.loads(self.payload)  # cloudpickle's output loads with pickle
        return fn(*args)


class _ByValuePickler(cloudpickle.Pickler):
    """cloudpickle, which also sends by name the modules that are instances of a ModuleType
    subclass, as it sends plain modules: torch's config modules (`torch._dynamo.config`) are."""

    def reducer_override(self, obj: Any) -> Any:
        if (
            isinstance(obj, types.ModuleType)
            and type(obj) is not types.ModuleType
            and sys.modules.get(obj.__name__) is obj
        ):
            return importlib.import_module, (obj.__name__,)
        return super().reducer_override(obj)


def _shipped(fn: Callable[..., Any], args: tuple) -> _Shipped | None:
    """`fn(*args)` by value for spawned ranks where it holds something from a notebook and
    cloudpickle can take all of it; otherwise None (spawn imports it by name, or it must fork)."""
    if not _notebook_names(fn, args):
        return None
    try:
        buffer = io.BytesIO()
        _ByValuePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((fn, args))
        return _Shipped(buffer.getvalue())
    except Exception:  # a lock, an open file, a generator: only fork can hand it over
        return None


def _spawnable(fn: Callable[..., Any], args: tuple = ()) -> bool:
    """Whether a spawned interpreter could receive `fn` and `args`: nothing from a notebook, all picklable."""
    try:
        _check_spawnable(fn, args, "", explicit=False)
    except LaunchError:
        return False
    return True


def _start_method_and_reason(fn: Callable[..., Any] | None = None, args: tuple = ()) -> tuple[str, str]:
    """The start method to use here for `fn(*args)`, and why spawn ("" for fork), for error messages."""
    if "fork" not in mp.get_all_start_methods():
        return "spawn", _(
            "This platform has no fork (Windows), so every rank is a fresh interpreter (spawn). "
        )
    if _gpu_runtime_initialised():
        return "spawn", _(
            "CUDA is initialised in this process, so the launcher cannot fork (a forked child "
            "cannot use its parent's CUDA context) and must spawn fresh interpreters. "
        )
    if _fork_loses_cuda():
        why = _(
            "The CUDA driver has been started in this process, and a child forked after that "
            "cannot use CUDA, so the launcher spawns fresh interpreters. "
        )
    elif _autograd_threads_started():
        why = _(
            "autograd's GPU threads run in this process (the first backward() on a machine with "
            "a GPU starts them), and a child forked after that cannot run backward(), so the "
            "launcher spawns fresh interpreters. "
        )
    else:
        return "fork", ""
    if fn is None or _spawnable(fn, args) or _shipped(fn, args) is not None:
        return "spawn", why
    return "fork", ""


def choose_start_method(fn: Callable[..., Any] | None = None, args: Sequence[Any] = ()) -> str:
    """The start method `launch` uses by default here (for `fn(*args)`): "fork" where safe, else "spawn".

    fork needs an OS that has it (Linux, macOS; not Windows) and no GPU runtime started in the
    parent: once PyTorch has initialised CUDA here, a forked child cannot use it, so spawn.
    On Linux a CUDA driver that was merely started also counts (`torch.cuda.is_available()`
    starts it, and so does the first `backward()` on a machine with a GPU, while
    `torch.cuda.is_initialized()` stays False), and so do autograd's GPU threads, which that
    first `backward()` starts and after which a forked child's `backward()` fails: then
    `launch` spawns. A spawned interpreter imports an importable worker by name; a function
    defined in a notebook (or given one in `args`) travels by value, pickled by cloudpickle.
    Only what cloudpickle cannot take (a lock, an open file) is still forked; such a worker
    must then use neither CUDA nor backward(), and the WorkerError says why if it does.
    Without `fn`, the answer is for an importable worker. A driver that cannot be asked counts
    as started; count GPUs before launching with `torch.cuda.device_count()`, which asks NVML
    and leaves the driver alone. Windows has no fork: use a .py worker, or WSL2.
    """
    if fn is not None:
        _check_arguments(fn, 1, args, 1.0)
    return _start_method_and_reason(fn, tuple(args))[0]


def _spawn_advice(names: Sequence[str], fn: Callable[..., Any], why: str, explicit: bool) -> str:
    """The LaunchError text for notebook functions (or classes) that spawn cannot import."""
    fn_name = getattr(fn, "__name__", None)
    if list(names) == [fn_name]:
        what = _("{fn_name!r} is defined in the notebook").format(fn_name=fn_name)
    else:
        listed = ", ".join(repr(n) for n in names)
        if len(names) == 1:
            what = _("{listed} (the worker or its arguments) is defined in the notebook").format(
                listed=listed
            )
        else:
            what = _("{listed} (the worker or its arguments) are defined in the notebook").format(
                listed=listed
            )
    cannot = _(
        "A spawned interpreter imports the worker and its arguments by name, and {what} (the "
        "module __main__), which a fresh interpreter cannot import. "
    ).format(what=what)
    if explicit:
        return (
            _("You asked for method='spawn': each rank is a fresh interpreter. ")
            + cannot
            + _(
                "Leave "
                "method unset: the launcher then forks where that is safe, and fork runs functions "
                "defined in a notebook. Or move the function into a .py file next to the notebook "
                "and import it."
            )
        )
    if "fork" not in mp.get_all_start_methods():
        return (
            why
            + cannot
            + _(
                "Move the function into a .py file next to the notebook and import "
                "it, or run the course in WSL2 (Linux on Windows), where the launcher can fork."
            )
        )
    return (
        why
        + cannot
        + _(
            "Move the function into a .py file next to the notebook and import it, or "
            "restart the kernel and launch before anything starts CUDA (count GPUs with "
            "torch.cuda.device_count(), which leaves the driver alone, not torch.cuda.is_available()), "
            "so that fork can be used."
        )
    )


def _check_spawnable(fn: Callable[..., Any], args: tuple, why: str, explicit: bool) -> None:
    """Raise LaunchError if a spawned interpreter could not import `fn` or unpickle `args`."""
    names = _notebook_names(fn, args)
    if names:
        raise LaunchError(_spawn_advice(names, fn, why, explicit))
    try:
        pickle.dumps((fn, args))
    except Exception as err:
        raise LaunchError(
            _(
                "spawn must pickle the worker and its args, and that failed ({error_type}: "
                "{err}). Use a function defined at the top level of a .py module, and picklable args."
            ).format(error_type=type(err).__name__, err=err)
        ) from None


def _send(conn: Connection, payload: bytes) -> None:
    """Send one pickled message to the launcher (framed for the parent's non-blocking reader)."""
    if not _RAW_PIPES:
        conn.send_bytes(payload)
        return
    fd = conn.fileno()
    for part in (_HEADER.pack(len(payload)), payload):
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]


def _bootstrap(
    fn: Callable[..., Any],
    args: tuple,
    env: dict[str, str],
    conn: Connection,
    parent_pid: int,
    inherited_fds: tuple[int, ...],
    forked: bool,
    ready: Any,
    index: int,
) -> None:
    """Run in each worker: set torchrun's environment, say it is ready, call fn, send the result or
    the error (`ready[index]` is set in memory shared with the launcher, which starts the clock)."""
    if _HOLD_INTERRUPTS:  # held by the parent while it forked: a worker takes them as usual
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _INTERRUPTS)
    isolate(parent_pid)
    for fd in inherited_fds:  # the parent's listening socket and pipe ends, inherited through fork
        with contextlib.suppress(OSError):
            os.close(fd)
    os.environ.update(env)
    if forked or env.get("OMP_NUM_THREADS") == "1":  # a fork cannot use its parent's OpenMP pool
        torch.set_num_threads(1)  # and the variable acts only at start-up: told directly
    ready[index] = 1
    try:
        try:
            result = fn(*args)
        except SystemExit as err:
            if err.code not in (None, 0):
                raise
            result = None  # sys.exit(0) ends a rank successfully, as under torchrun
        try:
            payload = pickle.dumps(("ok", result))
        except Exception as err:
            raise TypeError(
                _(
                    "the return value ({result_type}) cannot be pickled, so it cannot be "
                    "sent back to the launcher: {err}. Return plain values (numbers, lists, tensors)."
                ).format(result_type=type(result).__name__, err=err)
            ) from err
        _send(conn, payload)
    except BaseException as err:
        frames = traceback.format_exception(type(err), err, err.__traceback__)
        with contextlib.suppress(Exception):
            _send(conn, pickle.dumps(("error", type(err).__name__, str(err), "".join(frames))))
        # Stay alive until the parent stops us (or goes away): if this rank exited now, its
        # peers blocked in a collective would fail in turn, and their secondary errors could
        # reach the parent before this one. The parent stops every rank at once instead.
        deadline = time.monotonic() + _FAILED_RANK_LINGER_SECONDS
        while time.monotonic() < deadline and os.getppid() == parent_pid:
            with contextlib.suppress(Exception):
                if conn.poll(POLL_SECONDS):  # the parent closed its end
                    break
        os._exit(1)
    finally:
        conn.close()


class _Inbox:
    """The parent's end of one rank's pipe, read without ever blocking."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.closed = False  # the pipe reached its end, or broke
        self._buffer = bytearray()
        self._whole: bytes | None = None
        if _RAW_PIPES:
            os.set_blocking(conn.fileno(), False)

    def pump(self) -> None:
        """Take in whatever has arrived."""
        if self.closed or self._whole is not None:
            return
        if not _RAW_PIPES:
            try:
                if self.conn.poll():
                    self._whole = self.conn.recv_bytes()
            except (EOFError, OSError):
                self.closed = True
            return
        while True:
            try:
                chunk = os.read(self.conn.fileno(), 1 << 20)
            except BlockingIOError:
                return
            except OSError:
                self.closed = True
                return
            if not chunk:
                self.closed = True
                return
            self._buffer += chunk

    def message(self) -> tuple | None:
        """The rank's message once it has arrived whole, else None."""
        if _RAW_PIPES and self._whole is None and len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            if len(self._buffer) >= _HEADER.size + size:
                self._whole = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
                self._buffer.clear()
        if self._whole is None:
            return None
        try:
            return pickle.loads(self._whole)
        except Exception as err:  # sent by the rank, but not readable here: the rank's failure
            return (
                "error",
                type(err).__name__,
                _(
                    "its result could not be unpickled by the launcher ({err}); return plain values "
                    "(numbers, lists, dicts, tensors) or instances of classes the launcher can import"
                ).format(err=err),
                "",
            )


def _describe_exit(exitcode: int | None) -> str:
    """How a worker process ended, in words, without a pid."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return _("was killed by {name} before returning a result").format(name=name)
    return _("exited with code {exitcode} before returning a result").format(exitcode=exitcode)


_FORKED_CUDA_HINT = N_(
    "This rank was forked from a process that had already started CUDA (torch.cuda.is_available() "
    "starts its driver; the first backward() on a machine with a GPU starts the driver and "
    "autograd's GPU threads), and a forked process can then use neither CUDA nor backward(). Put "
    "the worker in a .py file and import it (the launcher then spawns it), or restart the kernel "
    "and launch before anything starts CUDA or runs backward()."
)
_SPAWN_HINT = N_(
    "A spawned rank that exits with code 1 before sending anything usually could not load the "
    "worker: Python printed why on the launching process's stderr (the terminal, or the "
    "notebook's output). Check that the function can be imported by name from a .py file, and "
    "that its arguments can be unpickled."
)


def _check_arguments(fn: object, nprocs: object, args: object, timeout: object) -> None:
    """Raise an error that says what to pass when launch's arguments are wrong."""
    if not callable(fn):
        raise TypeError(
            _("fn must be a function to run in each process, not {fn_type}").format(fn_type=type(fn).__name__)
        )
    if not isinstance(nprocs, int) or isinstance(nprocs, bool):
        raise TypeError(
            _("nprocs must be a whole number of processes (an int such as 2), not {nprocs!r}").format(
                nprocs=nprocs
            )
        )
    if not 1 <= nprocs <= MAX_NPROCS:
        raise ValueError(
            _(
                "nprocs must be a whole number of processes from 1 to {most} on one machine, not {nprocs!r}"
            ).format(most=MAX_NPROCS, nprocs=nprocs)
        )
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise TypeError(
            _("args must be a tuple or list of arguments for fn, not {args_type}").format(
                args_type=type(args).__name__
            )
        )
    timeout_seconds("timeout", timeout)


def _first_failure(failures: dict[int, WorkerError]) -> WorkerError:
    """The failure to report, with the others attached: deaths before raises, then by rank."""
    first = min(failures.values(), key=lambda f: (f.exc_type is not None, f.rank))
    others = {rank: f for rank, f in failures.items() if rank != first.rank}
    if not others:
        return first
    return WorkerError(
        first.rank, first.world_size, first.exc_type, first.message, first.traceback, first.hint, others
    )


def _forked_cuda_failure(text: str) -> bool:
    """Whether a worker's error message is CUDA (or autograd) refusing to work in a forked process."""
    return (
        "Cannot re-initialize CUDA in forked subprocess" in text
        or "autograd's threading in combination with fork" in text
        or ("CUDA" in text and "initialization error" in text)
    )


def _collect(
    processes: Sequence[mp.process.BaseProcess],
    inboxes: Sequence[_Inbox],
    timeout: float,
    method: str,
    ready: Any,
) -> list[Any]:
    """Wait for every rank's result; raise shortly after the first failure, or when time runs out.

    Every pass (at most `POLL_SECONDS` apart) reads what the pipes hold and looks at every
    rank's exit code: a rank's death is seen even while processes it started hold its pipe open.
    The timeout, and the window in which failures are gathered, count from the moment every rank
    is ready (`ready`, set by each rank) or already ended, so a spawned rank's start-up is not
    counted against it.
    """
    nprocs = len(processes)
    results: dict[int, Any] = {}
    failures: dict[int, WorkerError] = {}
    deadline = time.monotonic() + timeout + _START_ALLOWANCE_SECONDS  # until every rank is ready
    all_ready = False
    report_at: float | None = None
    while True:
        pending = [r for r in range(nprocs) if r not in results and r not in failures]
        now = time.monotonic()
        if not all_ready and all(ready[r] or r not in pending for r in range(nprocs)):
            all_ready, deadline = True, min(deadline, now + timeout)
        if failures and (not pending or (report_at is not None and now >= report_at) or now >= deadline):
            raise _first_failure(failures)
        if not pending:
            return [results[rank] for rank in range(nprocs)]
        if now >= deadline:
            raise LaunchTimeoutError(pending, nprocs, timeout)
        wake = min(deadline, report_at or deadline, now + POLL_SECONDS)
        open_pipes = [inboxes[r].conn for r in pending if not inboxes[r].closed]
        if open_pipes:
            wait(open_pipes, timeout=max(0.0, wake - now))
        else:
            time.sleep(max(0.0, wake - now))
        for rank in pending:
            inbox, proc = inboxes[rank], processes[rank]
            inbox.pump()
            exitcode = proc.exitcode
            if exitcode is not None:
                inbox.pump()  # everything it wrote before it ended is in the pipe now
            message = inbox.message()
            if message is not None and message[0] == "ok":
                results[rank] = message[1]
            elif message is not None:
                _, exc_type, text, trace = message
                forked_cuda = method == "fork" and _forked_cuda_failure(text) and _cuda_started()
                hint = translated(_FORKED_CUDA_HINT) if forked_cuda else ""
                failures[rank] = WorkerError(rank, nprocs, exc_type, text, trace, hint)
            elif exitcode == 0:
                results[rank] = None  # exit code 0 is success, as under torchrun
            elif exitcode is not None:
                hint = translated(_SPAWN_HINT) if method == "spawn" and exitcode == 1 else ""
                failures[rank] = WorkerError(rank, nprocs, None, _describe_exit(exitcode), hint=hint)
                signal_group(proc.pid, KILL, running=False)  # what it started is of no use now
        if failures and report_at is None and all_ready:
            report_at = time.monotonic() + _FAILURE_WINDOW_SECONDS


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
    (None: a free port). Return values must be picklable; they come back ordered by rank (None
    for a rank that ended with `sys.exit(0)`). `method` is the start method, "fork" or
    "spawn"; leave it None to fork where that is safe (see `choose_start_method`).

    Raises:
        WorkerError: a rank raised (or died); it names the rank and carries the message and
            the traceback. The other ranks are stopped at once.
        LaunchTimeoutError: not every rank finished within `timeout` seconds, counted from the
            moment every rank is ready to call `fn` (a spawned rank first imports PyTorch); it
            lists those still running. All ranks are stopped.
        LaunchError: `master_port` is taken, or spawn cannot run `fn` (a notebook function with
            method="spawn", or one that cloudpickle cannot take where fork is unsafe).
        TypeError, ValueError: bad arguments.
    """
    _check_arguments(fn, nprocs, args, timeout)
    args = tuple(args)
    explicit = method is not None
    why = ""
    if method is None:
        method, why = _start_method_and_reason(fn, args)
    elif method not in ("fork", "spawn"):
        raise ValueError(
            _('method must be "fork", "spawn" or None (choose), not {method!r}').format(method=method)
        )
    elif method not in mp.get_all_start_methods():
        raise LaunchError(
            _("this platform cannot start processes with {method!r}; leave method unset (None)").format(
                method=method
            )
        )
    if method == "spawn":
        # Spawn chosen here because fork is unsafe (not asked for, and not a platform without
        # fork, where the advice stays a .py worker or WSL2): a notebook's worker goes by value.
        unsafe_fork = not explicit and "fork" in mp.get_all_start_methods()
        shipped = _shipped(fn, args) if unsafe_fork else None
        if shipped is None:
            _check_spawnable(fn, args, why, explicit)
        else:
            fn, args = shipped, ()
    ctx = mp.get_context(method)
    base_env = gloo_env() | mark()  # gloo on loopback; the watchdog's mark
    listener = listening_socket(master_port)
    port = listener.getsockname()[1]
    error_folder = tempfile.mkdtemp(prefix="course-launch-")
    watch_folder(error_folder)  # removed by the watchdog should this process be killed outright
    store: TCPStore | None = None
    processes: list[mp.process.BaseProcess] = []
    inboxes: list[_Inbox] = []
    ready = ctx.RawArray("b", nprocs)  # set by each rank once it is about to call fn
    finished = False
    try:
        for rank in range(nprocs):
            parent_end, child_end = ctx.Pipe(duplex=True)
            inboxes.append(_Inbox(parent_end))
            inherited = (listener.fileno(), *(i.conn.fileno() for i in inboxes)) if method == "fork" else ()
            env = base_env | torchrun_env(
                rank, nprocs, port, error_file=os.path.join(error_folder, f"error-{rank}.json")
            )
            proc = ctx.Process(
                target=_bootstrap,
                args=(fn, args, env, child_end, os.getpid(), inherited, method == "fork", ready, rank),
                name=f"rank{rank}",
                daemon=False,  # a daemonic worker could not start DataLoader workers
            )
            with warnings.catch_warnings(), _interrupts_held():
                # Python 3.12+ warns when a process with threads forks (a Jupyter kernel has
                # several), because a lock held by another thread at that moment stays locked
                # in the child. The child here runs only the worker: it does not use the
                # kernel's threads or sockets, and CPython resets its own locks after a fork.
                warnings.filterwarnings("ignore", message=FORK_WARNING, category=DeprecationWarning)
                proc.start()
                processes.append(proc)
                watch_group(proc.pid)  # killed by the watchdog should this process be killed outright
            child_end.close()
        # The store, like torchrun's agent store, lives in this process, on the socket bound
        # above; the ranks connect to it in init_process_group and queue until it accepts.
        store = TCPStore(
            LOOPBACK,
            port,
            world_size=nprocs,
            is_master=True,
            wait_for_workers=False,
            # The ranks are stopped at `timeout` anyway; the store's own timeout also bounds its
            # connection to itself, which a tiny launch timeout would fail with a C++ error.
            timeout=timedelta(seconds=max(timeout, _STORE_TIMEOUT_FLOOR_SECONDS)),
            master_listen_fd=listener.detach(),
        )
        results = _collect(processes, inboxes, timeout, method, ready)
        finished = True
        return results
    finally:
        for inbox in inboxes:
            inbox.conn.close()  # a failed rank that waits for this end to close exits by itself
        started = [p for p in processes if p.pid is not None]
        try:  # a second Ctrl-C while stopping kills the ranks at once
            if finished:  # every rank sent its result: give them a moment to exit by themselves
                _wait_for_exit(started, _EXIT_PATIENCE_SECONDS)
            stop(lambda: [(p.pid, p.exitcode is None) for p in started])
        finally:
            for proc in started:
                proc.join()
            release_group(*(proc.pid for proc in started))
            for proc in started:
                proc.close()
            del store  # shuts the store's server down and closes its port
            if listener.fileno() != -1:
                listener.close()
            shutil.rmtree(error_folder, ignore_errors=True)
            release_folder(error_folder)
