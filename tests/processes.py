"""What "no process left behind" means in these tests, in one place for every module that starts processes.

A process left behind by a test is usually no longer a descendant of the test process: when its
parent (a launcher's rank, a torchrun agent) exits first, the orphan is reparented, normally to
init, and `psutil.Process().children()` no longer sees it. Two things make such orphans visible:

- On Linux the test process becomes a "child subreaper" (`watch_orphans`): orphans of its
  descendants are reparented to it instead of to init, so they stay among its descendants.
  This sees every orphan, whichever way it was started (fork too).
- Every platform: `watch_orphans` puts a marker, unique to this test session, in the
  environment (COURSE_TEST_SESSION), which every process started by `exec` inherits, and
  `left_behind` also looks for live processes of this user whose environment carries it.
  (A process that forks without exec keeps the environment it was exec'd with, as
  /proc/PID/environ shows it, so a forked orphan carries no marker: hence the subreaper.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
import uuid

import psutil

# multiprocessing starts this helper at the first spawn and keeps it for the life of its parent, by design.
RESOURCE_TRACKER = "multiprocessing.resource_tracker"
SESSION_VARIABLE = "COURSE_TEST_SESSION"
_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
_session_started = time.time()


def watch_orphans() -> bool:
    """Mark this session's environment, and on Linux adopt orphaned descendants; True if adopting.

    Call once, at the start of the test session, before any test starts a process.
    """
    global _session_started
    _session_started = time.time()
    os.environ[SESSION_VARIABLE] = uuid.uuid4().hex
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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


def _is_own_watchdog(proc: psutil.Process) -> bool:
    """Whether `proc` is the watchdog of this test process, which lives as long as it does."""
    from course_utils.processes import watchdog

    own = watchdog._current
    try:
        return own is not None and f"{watchdog.MARK}={own.mark}" in proc.cmdline()
    except psutil.Error:
        return False


def _is_zygote(proc: psutil.Process) -> bool:
    """Whether `proc` is one of this process's kernel zygotes (tests/forked_kernels.py), kept for its life."""
    import forked_kernels

    return proc.pid in forked_kernels.RUNNING


def _proc_table() -> dict[int, tuple[int, float]] | None:
    """Linux: every process as pid -> (parent pid, start time), in one pass over /proc/PID/stat.

    About a third of what psutil's `children(recursive=True)` and `process_iter` cost together,
    which matters in a check that runs twice per test. None where there is no such /proc.
    """
    if not sys.platform.startswith("linux"):
        return None
    table = {}
    ticks, boot = os.sysconf("SC_CLK_TCK"), psutil.boot_time()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:  # it ended meanwhile
            continue
        fields = stat.rsplit(b")", 1)[1].split()  # after "pid (comm)": state, ppid, ... starttime (22nd)
        table[int(name)] = (int(fields[1]), boot + int(fields[19]) / ticks)
    return table


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _carries_marker(pid: int, marker: str) -> bool:
    try:
        return psutil.Process(pid).environ().get(SESSION_VARIABLE) == marker
    except psutil.Error:
        return False


def _marked(
    exclude: set[int], since: float | None = None, table: dict[int, tuple[int, float]] | None = None
) -> list[psutil.Process]:
    """Live processes of this user, started during this session (or since `since`), that carry its marker.

    `table`: a `_proc_table()` already read (Linux), so that /proc is read once per check.
    """
    marker = os.environ.get(SESSION_VARIABLE)
    if not marker:
        return []
    since = _session_started if since is None else since
    me = psutil.Process()
    try:
        my_uid = me.uids().real
    except (AttributeError, psutil.Error):
        my_uid = None
    table = _proc_table() if table is None else table
    if table is not None:  # only new processes of this user have their environment read
        found = []
        for pid, (_, started) in table.items():
            if pid in exclude or pid == me.pid or started < since - 1:
                continue
            if (my_uid is None or _owner(pid) == my_uid) and _carries_marker(pid, marker):
                with contextlib.suppress(psutil.NoSuchProcess):
                    found.append(psutil.Process(pid))
        return found
    found = []
    for proc in psutil.process_iter(["uids", "create_time"]):
        info = proc.info
        if proc.pid in exclude or proc.pid == me.pid or (info["create_time"] or 0) < since - 1:
            continue
        if my_uid is not None and (info["uids"] is None or info["uids"].real != my_uid):
            continue
        if _carries_marker(proc.pid, marker):
            found.append(proc)
    return found


def _descendants(table: dict[int, tuple[int, float]] | None) -> dict[int, psutil.Process]:
    """This process's live descendants (orphans it adopted included), from `table` where there is one."""
    if table is None:
        return {c.pid: c for c in psutil.Process().children(recursive=True)}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in found:
                with contextlib.suppress(psutil.NoSuchProcess):
                    found[pid] = psutil.Process(pid)
                    todo.append(pid)
    return found


# When the last check found nothing left behind: a marked process started before then was seen by it
# and had ended, so the next check reads the environment only of processes started since.
_clean_since: float | None = None


def left_behind(grace: float = 1.0) -> list[psutil.Process]:
    """Live processes this session started and left, but for the resource tracker, watchdog and zygote.

    That is: descendants of this process (orphans included, where `watch_orphans` made this
    process their reaper) and processes carrying this session's marker, after `grace` s to exit.
    """
    global _clean_since
    checked_at = time.time()
    table = _proc_table()
    candidates = _descendants(table)
    candidates.update((p.pid, p) for p in _marked(set(candidates), since=_clean_since, table=table))
    kept = (_is_resource_tracker, _is_own_watchdog, _is_zygote)
    ours = [p for p in candidates.values() if not any(keeps(p) for keeps in kept)]
    suspects = [p for p in ours if _alive(p)]
    _, alive = psutil.wait_procs(suspects, timeout=grace) if suspects else ([], [])
    left = [p for p in alive if _alive(p)]
    _clean_since = None if left else checked_at
    return left


def is_gone(pid: int) -> bool:
    """True when no live process has this pid (a zombie counts as gone)."""
    try:
        return not _alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return True


def wait_until_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait up to `timeout` s for every pid to be gone; return those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if not is_gone(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)
