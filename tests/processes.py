"""What "no process left behind" means in these tests, in one place for every module that starts processes."""

from __future__ import annotations

import psutil

# multiprocessing starts this helper at the first spawn and keeps it for the life of its parent, by design.
RESOURCE_TRACKER = "multiprocessing.resource_tracker"


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_resource_tracker(proc: psutil.Process) -> bool:
    try:
        return RESOURCE_TRACKER in " ".join(proc.cmdline())
    except psutil.Error:
        return False


def left_behind(grace: float = 1.0) -> list[psutil.Process]:
    """Live descendants of this process other than the resource tracker, after `grace` s to exit."""
    children = [c for c in psutil.Process().children(recursive=True) if not _is_resource_tracker(c)]
    _, alive = psutil.wait_procs(children, timeout=grace) if children else ([], [])
    return [c for c in alive if _alive(c)]


def is_gone(pid: int) -> bool:
    """True when no live process has this pid (a zombie counts as gone)."""
    try:
        return not _alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return True
