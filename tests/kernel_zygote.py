"""The zygote of tests/forked_kernels.py: `python kernel_zygote.py FD [MODULE ...]` imports what
notebook kernels share (PRELOAD, or the modules named), then forks a kernel for each request that
arrives on the socket FD, until that socket closes.

It runs as a script with nothing of the tests on its path, so it imports only the standard library
at module level; it checks that no Python thread runs but its main one (a fork copies only the
thread that forks).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import tempfile
from typing import Any

PRELOAD = (  # what most notebooks import; torch._dynamo brings sympy, which DTensor and meta tensors need
    "torch",
    "torch.distributed",
    "torch.nn.functional",
    "torch._dynamo",
    "torch.distributed.checkpoint",  # 10, 13 and 15
    "matplotlib.figure",
    "matplotlib.image",
    "matplotlib.backend_bases",
    "ipykernel.ipkernel",  # not kernelapp, whose traits read JPY_PARENT_PID when it is imported
    "course_utils.processes",
)
INLINE = "module://matplotlib_inline.backend_inline"  # what ipykernel sets when MPLBACKEND is unset
MESSAGE_BYTES = 1 << 20


def serve(channel: socket.socket) -> None:
    """Answer requests until the other end closes: fork kernels, report their exit codes.

    A kernel that ended stays a zombie until its exit code is asked for: until then its pid, which
    jupyter_client also signals as a process group, cannot be given to another process.
    """
    while True:
        data, fds, _, _ = socket.recv_fds(channel, MESSAGE_BYTES, 3)
        if not data:
            return
        request = json.loads(data)
        try:
            if request["op"] == "status":
                _, status = os.waitpid(request["pid"], 0)  # it has ended: this returns at once
                channel.send(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode())
                continue
            pid = os.fork()
            if pid == 0:
                become_kernel(channel, request, fds)  # never returns
            pidfd = os.pidfd_open(pid)
        except OSError as error:  # a fork refused (a process limit), a pid that is not a kernel of ours
            channel.send(json.dumps({"error": f"{type(error).__name__}: {error}"}).encode())
            continue
        finally:
            for fd in fds:
                os.close(fd)
        socket.send_fds(channel, [json.dumps({"pid": pid}).encode()], [pidfd])
        os.close(pidfd)


def become_kernel(channel: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become `python -m ipykernel_launcher ARGV` and exit with its status."""
    code = 1
    try:
        channel.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # read again from TMPDIR, as torchrun does for the ranks it forks
        if "torch" in sys.modules:  # a fresh kernel's generator starts from a seed of its own
            sys.modules["torch"].seed()
        os.environ["JPY_PARENT_PID"] = str(os.getppid())  # the kernel ends if the zygote does
        os.environ.setdefault("MPLBACKEND", INLINE)
        import ipykernel_launcher

        sys.argv = [ipykernel_launcher.__file__, *request["argv"]]
        from ipykernel import kernelapp

        try:
            kernelapp.launch_new_instance()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        atexit._run_exitfuncs()  # what an interpreter's exit runs (temporary folders, ...); os._exit does not
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def main(fd: int, preload: tuple[str, ...] = PRELOAD) -> None:
    """Import what kernels share, check that no thread of ours runs, say ready, serve, then exit at
    once (tearing down torch's modules would only cost the test run seconds)."""
    channel = socket.socket(fileno=fd)
    os.environ.setdefault("MPLBACKEND", INLINE)  # before matplotlib reads it, as ipykernel would
    import importlib

    for name in preload:
        importlib.import_module(name)
    import threading

    if threading.active_count() != 1:
        channel.send(json.dumps({"error": f"threads after import: {threading.enumerate()}"}).encode())
        return
    channel.send(json.dumps({"ready": True}).encode())
    serve(channel)
    os._exit(0)


if __name__ == "__main__":
    sys.path.pop(0)  # this folder, as ipykernel_launcher drops its own (IPython puts the cwd first)
    main(int(sys.argv[1]), tuple(sys.argv[2:]) or PRELOAD)
