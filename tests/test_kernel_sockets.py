import glob
import json
import os
import subprocess
import tempfile
from pathlib import Path

import kernel_sockets
import nbval.kernel
import pytest

posix_only = pytest.mark.skipif(os.name != "posix", reason="Unix sockets for kernels: POSIX")


@posix_only
def test_each_kernel_gets_sockets_of_its_own_in_the_temporary_folder():
    first, second = kernel_sockets.socket_options(), kernel_sockets.socket_options()
    assert first["transport"] == "ipc"
    assert first["ip"] != second["ip"] and first["connection_file"] != second["connection_file"]
    assert os.path.dirname(first["ip"]) == tempfile.gettempdir()
    assert len(first["ip"]) + len("-5") < 104, "a Unix socket's path has at most 103 characters (macOS)"


def test_nbval_under_the_course_pytest_starts_its_kernels_on_unix_sockets():
    # forked or not (tests/forked_kernels.py): a subclass that keeps the sockets
    assert issubclass(nbval.kernel.KernelManager, kernel_sockets.SocketKernelManager)


@posix_only
def test_a_kernel_on_unix_sockets_runs_code_and_leaves_no_file():
    """Its five channels (shell, iopub, stdin, control, heartbeat) are Unix sockets, removed at shutdown."""
    km, kc = nbval.kernel.start_new_kernel(kernel_name="python3", stderr=subprocess.DEVNULL)
    try:
        reply = kc.execute_interactive("print('hello')", timeout=30)
        assert reply["content"]["status"] == "ok"
        info = json.loads(Path(km.connection_file).read_text())
        assert info["transport"] == "ipc" and info["ip"] == km.ip
        assert len(glob.glob(f"{km.ip}-*")) == 5
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert glob.glob(f"{km.ip}*") == [] and not os.path.exists(km.connection_file)
