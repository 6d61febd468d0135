"""The notebook suite's forked kernels (tests/forked_kernels.py): the same kernel as a fresh one, held safely.

A zygote that imports only matplotlib's figure module stands in for the suite's (which imports torch),
so that these tests start in a second; the suite's notebooks are what runs on the real one.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import forked_kernels
import nbval.kernel
import psutil
import pytest
from forked_kernels import ForkingKernelManager, Zygote, forkable
from kernel_sockets import SocketKernelManager
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager

LINUX = sys.platform.startswith("linux") and hasattr(os, "pidfd_open")
pytestmark = pytest.mark.skipif(not LINUX, reason="forked kernels need Linux pidfds")
# What a kernel reports of itself: what a notebook's cells could see differ between the two ways.
REPORT = """
import sys
preloaded = "matplotlib.figure" in sys.modules  # before this cell imports it
import json, os, tempfile, matplotlib.pyplot as plt
print(json.dumps({
    "argv0": os.path.basename(sys.argv[0]), "path": sys.path, "cwd": os.getcwd(),
    "main": repr(sys.modules["__main__"]), "name": __name__, "backend": plt.get_backend(),
    "leads its session": os.getsid(0) == os.getpid(), "marker": os.environ.get("FORKED_KERNELS_TEST"),
    "temporary folder": tempfile.gettempdir(), "preloaded": preloaded, "ppid": os.getppid(),
    "parent": os.environ.get("JPY_PARENT_PID"), "pid": os.getpid(),
}))
"""


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    started = Zygote(preload=["matplotlib.figure"])
    yield started
    started.stop()


def start(manager: SocketKernelManager, cwd: Path) -> object:
    """Start the manager's kernel in `cwd` (stderr to /dev/null, as nbval does) and return its client."""
    with open(os.devnull, "w") as devnull:
        manager.start_kernel(cwd=str(cwd), stderr=devnull)
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return client


def report(client: object) -> dict:
    """Run REPORT in the kernel; what it printed."""
    reply = client.execute_interactive(REPORT, timeout=60, output_hook=(out := _Collect()))
    assert reply["content"]["status"] == "ok", reply["content"]
    return json.loads(out.text)


class _Collect:
    """An output hook that keeps what the kernel printed."""

    def __init__(self) -> None:
        self.text = ""

    def __call__(self, message: dict) -> None:
        if message["msg_type"] == "stream":
            self.text += message["content"]["text"]


def managers(zygote: Zygote) -> tuple[SocketKernelManager, ForkingKernelManager]:
    """A fresh-process kernel manager and a forking one, as nbval makes them."""
    fresh, forking = (
        kind(kernel_name=CURRENT_ENV_KERNEL_NAME, kernel_spec_manager=NbvalKernelspecManager())
        for kind in (SocketKernelManager, ForkingKernelManager)
    )
    forking.zygote = zygote
    return fresh, forking


def test_a_forked_kernel_is_the_kernel_a_fresh_process_would_be(zygote, tmp_path, monkeypatch):
    monkeypatch.setenv("FORKED_KERNELS_TEST", "from the test's environment")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the zygote started with another
    reports = {}
    for manager in managers(zygote):
        client = start(manager, tmp_path)
        try:
            reports[type(manager).__name__] = report(client)
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=False)
    fresh, forked = reports["SocketKernelManager"], reports["ForkingKernelManager"]
    assert forked["ppid"] == zygote.pid and forked["parent"] == str(zygote.pid)  # it ends if the zygote does
    assert fresh["ppid"] == os.getpid() and (fresh["preloaded"], forked["preloaded"]) == (False, True)
    for differs in ("ppid", "parent", "pid", "preloaded"):
        del fresh[differs], forked[differs]
    assert forked == fresh
    assert fresh["cwd"] == fresh["temporary folder"] == str(tmp_path)
    assert fresh["marker"] == "from the test's environment"
    assert fresh["leads its session"] and fresh["backend"] == "module://matplotlib_inline.backend_inline"


def test_exit_codes_signals_and_shutdown(zygote, tmp_path):
    _, manager = managers(zygote)
    manager.shutdown_wait_time = 120  # a busy machine's kernel may take seconds to exit
    client = start(manager, tmp_path)
    process = manager.provisioner.process
    assert psutil.Process(process.pid).ppid() == zygote.pid and process.poll() is None
    client.stop_channels()
    manager.shutdown_kernel(now=False)  # asked to shut down: it exits with 0
    assert process.returncode == 0 and not psutil.pid_exists(process.pid)  # reaped once its code was read
    _, manager = managers(zygote)
    client = start(manager, tmp_path)
    process = manager.provisioner.process
    client.stop_channels()
    manager.shutdown_kernel(now=True)  # nbval's way: SIGKILL to the kernel's process group
    assert process.returncode == -signal.SIGKILL and not psutil.pid_exists(process.pid)
    process.kill()  # an ended kernel's handle: no error, no signal


def test_a_kernel_ends_when_its_zygote_does(tmp_path):
    own = Zygote(preload=["json"])
    _, manager = managers(own)
    client = start(manager, tmp_path)
    kernel = psutil.Process(manager.provisioner.process.pid)
    client.stop_channels()
    own.stop()  # the test process closes its end of the channel: the zygote exits
    assert own.process.returncode == 0
    kernel.wait(timeout=60)  # ipykernel polls its parent once a second; raises if it is still running
    manager.cleanup_resources()


def test_only_this_pythons_ipykernel_is_forked():
    assert forkable([sys.executable, "-m", "ipykernel_launcher", "-f", "kernel.json"])
    assert not forkable([sys.executable, "-m", "other_kernel", "-f", "kernel.json"])
    assert not forkable(["/bin/sh", "-m", "ipykernel_launcher", "-f", "kernel.json"])
    assert not forkable([sys.executable])


def test_a_notebook_alone_or_the_switch_starts_kernels_afresh(monkeypatch):
    monkeypatch.setattr(nbval.kernel, "KernelManager", SocketKernelManager)
    monkeypatch.delenv(forked_kernels.SWITCH, raising=False)
    assert not forked_kernels.enable(forked_kernels.MIN_NOTEBOOKS - 1)
    monkeypatch.setenv(forked_kernels.SWITCH, "0")
    assert not forked_kernels.enable(forked_kernels.MIN_NOTEBOOKS)
    assert nbval.kernel.KernelManager is SocketKernelManager
    monkeypatch.delenv(forked_kernels.SWITCH)
    assert forked_kernels.enable(forked_kernels.MIN_NOTEBOOKS)
    assert nbval.kernel.KernelManager is ForkingKernelManager
