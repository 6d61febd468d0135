"""Kernels on Unix sockets instead of TCP ports, for the course's tests and tools that start kernels.

jupyter_client gives a TCP kernel five ports that it found free (bound, then released at once); the
kernel binds them about a second later, once Python and ipykernel have loaded. On a machine that
runs tests in parallel, another process can take one of those ports in that second (every outgoing
connection takes a free port), and the kernel dies at its start: "Kernel died before replying to
kernel_info". A kernel on Unix sockets (jupyter_client's "ipc" transport) has no port to lose.
Windows has no such sockets for kernels: there they keep TCP.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

from jupyter_client.manager import AsyncKernelManager, KernelManager


def socket_options() -> dict[str, str]:
    """Keyword arguments for a jupyter_client kernel manager: the "ipc" transport, its connection file
    and sockets under a name of their own in the temporary folder (POSIX; elsewhere none).

    jupyter_client removes both files when the kernel is shut down.
    """
    if os.name != "posix":
        return {}
    stem = os.path.join(tempfile.gettempdir(), f"kernel-{uuid.uuid4().hex}")
    return {"transport": "ipc", "connection_file": f"{stem}.json", "ip": f"{stem}-ipc"}


class _OnUnixSockets:
    """Mixin: a kernel manager that starts its kernel with `socket_options()`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**socket_options(), **kwargs})


class SocketKernelManager(_OnUnixSockets, KernelManager):
    """jupyter_client's KernelManager on Unix sockets: the one nbval uses under the course's pytest."""


class AsyncSocketKernelManager(_OnUnixSockets, AsyncKernelManager):
    """jupyter_client's AsyncKernelManager on Unix sockets: the one nbclient uses in the course's scripts."""
