"""What cleans up after a caller that is killed outright: a small watchdog process, one per caller.

A launcher stops what it started when it returns, raises or is interrupted; a caller killed
with SIGKILL (or by the out-of-memory killer) runs no code at all. On Linux each child the
course forks dies with it (PR_SET_PDEATHSIG, `supervision.isolate`), but not what that child
started in turn, nor a child that is a new interpreter (`run_python`, torchrun's workers).

So the first launch in a process starts a watchdog: a fresh Python without site packages,
in a session of its own, not a child of the caller (it forks once and the first process
exits, so the caller's children are only what it launched), reading a pipe that only the
caller holds open. The caller tells it
which process groups and temporary folders are in use (and when they are done with) in an
unlinked file they share, which wakes nothing (a message on the pipe would wake the watchdog
on every launch, which on a busy machine costs the launch milliseconds); a group is written
as digits and a folder in hexadecimal, so no path (a TMPDIR with a newline in it) can pass for
an instruction. Every process the course starts carries a mark in its environment (`MARK`),
inherited by every new interpreter below it. When the pipe reaches its end (the caller ended,
however it ended), the watchdog kills the groups still listed, then every process of this user
whose environment carries the caller's mark (and the group it leads), again until it has found
none for a second if anything was still listed, a tenth of a second if not (a child caught
between fork and exec carries the mark only after its exec),
removes the folders still listed (whatever went wrong before), and exits. It never signals
group 0 or 1, its caller's group or its own. A caller that ends normally has nothing listed
and no marked process left. A notebook's own folders go the same way (`temporary_folder`): a
kernel killed outright, as a test run's end kills it, runs no finalizer that could remove them.

Windows has neither process groups nor a parent-death signal: no watchdog runs there.
macOS has no /proc: there the groups and folders are cleaned up, not marked processes
outside them; without PR_SET_PDEATHSIG a forked rank outlives its killed caller until the
watchdog kills its group.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import uuid

from course_utils._checks import path as _path
from course_utils._checks import text, whole_number

MARK = "COURSE_PROCESS_MARK"  # the environment variable that marks the course's processes
_MAX_PID = 2**31 - 1  # pid_t is a 32-bit int: no process group has a larger number
_POSIX = os.name == "posix"  # Windows has no process groups to kill nor fds to pass: no watchdog

# What the watchdog reads from the log, defined apart so that a test can run it on forged lines.
# A line is "+g" or "-g" and a group number in decimal digits, or "+d" or "-d" and a folder's path
# in hexadecimal: no path, whatever characters it holds, can be read as another line.
_READ_LOG = r"""
def read_log(text, spared):
    groups, folders = set(), set()
    for line in text.split(b"\n"):
        sign, kind, item = line[:1], line[1:2], line[2:]
        if sign not in (b"+", b"-"):
            continue
        if kind == b"g" and item.isdigit() and int(item) not in spared:
            (groups.add if sign == b"+" else groups.discard)(int(item))
        elif kind == b"d" and item and len(item) % 2 == 0 and not item.strip(b"0123456789abcdef"):
            (folders.add if sign == b"+" else folders.discard)(bytes.fromhex(item.decode()))
    return groups, folders
"""

_MAIN = r"""
import os, shutil, signal, sys, time
if os.fork():  # the watchdog is the grandchild: no child of the caller to count or to wait for
    os._exit(0)
mark, log, caller_group = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
# Never signalled: every process (-1), this group (0), init's (1), the caller's, the watchdog's.
spared = {-1, 0, 1, caller_group, os.getpgrp()}
while os.read(0, 65536):  # the caller writes nothing here: the end of the pipe is its end
    pass
groups, folders = set(), set()
try:
    os.lseek(log, 0, os.SEEK_SET)
    text = b""
    while chunk := os.read(log, 1 << 20):
        text += chunk
    groups, folders = read_log(text, spared)
    kill = getattr(signal, "SIGKILL", signal.SIGTERM)

    def sweep():  # kill the listed groups and every process carrying the mark; True if one was marked
        found = False
        for group in groups:
            try:
                os.killpg(group, kill)
            except OSError:
                pass
        if not os.path.isdir("/proc"):
            return False
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                pid = int(entry)
                try:
                    with open(f"/proc/{entry}/environ", "rb") as env:
                        marked = b"\0" + mark + b"\0" in b"\0" + env.read()
                    if marked:
                        found = True
                        if os.getpgid(pid) == pid and pid not in spared:  # a group the mark leads
                            os.killpg(pid, kill)
                        os.kill(pid, kill)
                except OSError:
                    pass
        return found

    # A process that was forked but had not yet exec'd a new interpreter when a sweep read /proc
    # carries the mark only once it has: sweep until none was found for a second (5 s at the most)
    # when the caller ended in the middle of a launch (something still listed); a caller that
    # ended normally has nothing listed, and a tenth of a second does.
    patience = 1.0 if groups or folders else 0.1
    quiet_since, deadline = time.monotonic(), time.monotonic() + 5
    while time.monotonic() < deadline and time.monotonic() - quiet_since < patience:
        if sweep():
            quiet_since = time.monotonic()
        time.sleep(0.05)
finally:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
"""
_WATCHDOG = _READ_LOG + _MAIN


class _Watchdog:
    """This process's watchdog: the pipe to it, and the mark its processes carry."""

    def __init__(self) -> None:
        self.mark = f"{os.getpid()}-{uuid.uuid4().hex}"
        self._log = tempfile.TemporaryFile()  # unlinked: nothing on disk, whoever ends first
        read_end, self._pipe = os.pipe()
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    *("-I", "-S", "-c", _WATCHDOG),
                    f"{MARK}={self.mark}",
                    str(self._log.fileno()),
                    str(os.getpgrp()),  # the caller's group, which the watchdog never signals
                ],
                pass_fds=(self._log.fileno(),),
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C or a signal to the caller's group does not reach it
            )
        finally:
            os.close(read_end)
        self.process.wait()  # the intermediate process, which exits at once
        os.set_inheritable(self._pipe, False)

    def tell(self, line: bytes) -> None:
        """Note lines for the watchdog to read when this process ends (appended: one write each)."""
        if line:
            os.write(self._log.fileno(), line + b"\n")


_current: _Watchdog | None = None


def _forget_after_fork() -> None:
    """In a forked child: the parent's watchdog is the parent's; the child starts its own if it needs one."""
    global _current
    if _current is not None:
        with contextlib.suppress(OSError):
            os.close(_current._pipe)
        _current._log.close()  # this process's copy only
    _current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _watchdog() -> _Watchdog:
    """This process's watchdog, started at the first use."""
    global _current
    if _current is None:
        _current = _Watchdog()
    return _current


def start_watchdog() -> None:
    """Start this process's watchdog now, if it is not running yet (before a launch makes anything)."""
    if _POSIX:
        _watchdog()


def mark() -> dict[str, str]:
    """The environment entry that marks a child (and all it starts) as this caller's, for the watchdog."""
    return {MARK: _watchdog().mark} if _POSIX else {}


def _group(pgid: int) -> int:
    """`pgid` as a process group the watchdog may signal: a whole number above 1 (a process id)."""
    return whole_number("pgid", pgid, 2, _MAX_PID)


def watch_group(*pgids: int) -> None:
    """Have the watchdog kill process groups `pgids` should this process end before `release_group`."""
    if _POSIX:
        _watchdog().tell(b"\n".join(b"+g%d" % _group(pgid) for pgid in pgids))


def release_group(*pgids: int) -> None:
    """Process groups `pgids` were stopped: nothing for the watchdog to do about them."""
    if _POSIX:
        _watchdog().tell(b"\n".join(b"-g%d" % _group(pgid) for pgid in pgids))


def _folder(path: str | os.PathLike[str]) -> bytes:
    """`path` made absolute, in hexadecimal for the log; '' (which would mean the current folder) refused."""
    return os.fsencode(os.path.abspath(_path("path", path, "'/tmp/course-15-x'"))).hex().encode()


def watch_folder(path: str | os.PathLike[str]) -> None:
    """Have the watchdog remove the folder `path` should this process end before `release_folder`."""
    line = b"+d" + _folder(path)
    if _POSIX:
        _watchdog().tell(line)


def release_folder(path: str | os.PathLike[str]) -> None:
    """The folder `path` was removed: nothing for the watchdog to do about it."""
    line = b"-d" + _folder(path)
    if _POSIX:
        _watchdog().tell(line)


class _WatchedFolder(tempfile.TemporaryDirectory):
    """A TemporaryDirectory that the watchdog also removes, should this process be killed outright."""

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix=text("prefix", prefix, "'course-15-'", empty=True))
        watch_folder(self.name)

    def cleanup(self) -> None:
        """Remove the folder now, and tell the watchdog it is gone."""
        super().cleanup()
        release_folder(self.name)


def temporary_folder(prefix: str = "course-") -> tempfile.TemporaryDirectory:
    """A new temporary folder (its path is `.name`) removed when this process ends, however it ends.

    A `tempfile.TemporaryDirectory` is removed when the interpreter exits normally, or by `cleanup()`;
    a kernel killed outright (a test run's end, the out-of-memory killer, Jupyter's restart after a
    hang) runs no code, and its folders would stay. This one is also listed with the watchdog, which
    removes it then. `prefix` begins the folder's name, so a folder left by another cause is found.
    """
    return _WatchedFolder(prefix)
