"""Grade one submission in a sandbox: the process that `course.py grade` starts for each submission.

    python scripts/grade_runner.py JOB        (JOB: the job as JSON, written by scripts/grade.py)

It is started as root or as the instructor, in a session of its own, with a small environment of
its own (never the instructor's) and its working folder as HOME and TMPDIR. First, while it is
still alone (no thread, no child), it puts itself in the sandbox that its children inherit: a
network namespace of its own with only a loopback (as root; otherwise in a user namespace of its
own where the system allows one), limits on CPU time, memory, processes and file size, the
parent of every orphan below it (a subreaper), and, where the job names one, an unprivileged user
of its own (uid and gid, no groups), which cannot write the instructor's files. Then it recognises
the submission (`grade_notebooks`) and runs it with nbclient in a fresh kernel, cell by cell, and
reports on the stdout it was given, one JSON object a line: what protections are in force, which
notebook the submission is, each exercise's verdict as soon as it is known, notes. Everything the
kernel printed or started goes elsewhere (its own log), and everything it started is killed at the
end. What it reports is data for scripts/grade.py, which trusts none of it.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = "16sH22x"  # struct ifreq: the interface's name, its flags, the rest of the union
TEXT_LIMIT = 2000  # characters of a hint or error kept for the report
COURSE_CELL_NOTES = 3  # course cells that failed, named in the report at the most
Emit = Callable[..., None]


def libc() -> ctypes.CDLL:
    """The C library, for the system calls Python 3.11's os module lacks (unshare, prctl)."""
    return ctypes.CDLL(None, use_errno=True)


def call(result: int) -> None:
    """Raise the OSError of a C call that returned -1."""
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def loopback_up() -> None:
    """Bring up `lo` in this (new) network namespace: ranks can meet on 127.0.0.1, nothing else."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack(IFREQ, fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def own_network() -> str | None:
    """Leave the machine's network for a namespace of this process's own (only a loopback); None if
    done, else why not. Root makes one directly; anyone else inside a user namespace of their own,
    mapped to themselves, where the system allows unprivileged user namespaces."""
    if not sys.platform.startswith("linux"):
        return "no network namespaces on this system"
    try:
        if os.geteuid() == 0:
            call(libc().unshare(CLONE_NEWNET))
        else:
            uid, gid = os.getuid(), os.getgid()
            call(libc().unshare(CLONE_NEWUSER | CLONE_NEWNET))
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        loopback_up()
    except OSError as err:
        return f"unshare: {err.strerror or err}"
    return None


def tasks_of_this_user() -> int:
    """How many processes and threads this user runs now (Linux), which its RLIMIT_NPROC counts."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def set_limits(job: dict[str, Any]) -> dict[str, str]:
    """Lower this process's limits, which its children inherit; for each that failed, why."""
    processes = job["processes"] + (0 if job["uid"] is not None else tasks_of_this_user())
    limits = {
        "cpu": (resource.RLIMIT_CPU, job["cpu_seconds"]),
        "memory": (resource.RLIMIT_DATA, job["memory_bytes"]),
        "file_size": (resource.RLIMIT_FSIZE, job["file_bytes"]),
        "processes": (getattr(resource, "RLIMIT_NPROC", None), processes),
        "core": (resource.RLIMIT_CORE, 0),
    }
    missing = {}
    for name, (which, value) in limits.items():
        try:
            if which is None:
                raise OSError("not on this system")
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError) as err:
            missing[name] = str(err)
    return missing


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2), which Python's os module lacks."""
    c = libc()
    c.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    encoded = [None if text is None else os.fsencode(text) for text in (source, target, fstype, data)]
    call(c.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]))


def needed_paths(folder: Path) -> set[Path]:
    """What a sandbox's user must reach: this Python and its environment, the course, the sandbox's folder."""
    paths = {sys.prefix, sys.base_prefix, sys.executable, os.path.realpath(sys.executable), folder}
    paths |= {entry for entry in sys.path if os.path.isabs(entry) and os.path.exists(entry)}
    return {Path(path) for path in paths} | {Path(__file__).resolve().parent.parent}


def closed_folders(paths: set[Path]) -> dict[Path, set[str]]:
    """The folders on the way to `paths` that let no other user through, and the entries wanted in each."""
    closed: dict[Path, set[str]] = {}
    for path in paths:
        for parent, entry in zip(path.parents[::-1], path.parts[1:], strict=True):
            if not os.stat(parent).st_mode & 0o001:
                closed.setdefault(parent, set()).add(entry)
    return closed


def open_the_way(folder: Path) -> None:
    """In a mount namespace of this process's own, let the sandbox's user reach `needed_paths`: a
    folder on the way that lets no other user through (a home of mode 700 holding this Python) is
    covered by an empty folder (tmpfs), into which only the wanted entries are brought back. Its
    other contents stay out of sight; nothing changes outside the namespace."""
    closed_on_the_way = closed_folders(needed_paths(folder))
    if not closed_on_the_way:
        return
    call(libc().unshare(CLONE_NEWNS))
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the machine's mounts
    staging = folder / "mounts"
    for number, (closed, entries) in enumerate(sorted(closed_on_the_way.items())):
        kept = {}
        for entry in sorted(entries):
            original = closed / entry
            kept[entry] = staging / f"{number}-{len(kept)}", original.is_dir()
            kept[entry][0].mkdir(parents=True) if original.is_dir() else kept[entry][0].touch()
            mount(str(original), str(kept[entry][0]), None, MS_BIND | MS_REC)
        mount("tmpfs", str(closed), "tmpfs", 0, "mode=0755")
        for entry, (stage, is_dir) in kept.items():
            (closed / entry).mkdir() if is_dir else (closed / entry).touch()
            mount(str(stage), str(closed / entry), None, MS_BIND | MS_REC)


def become(uid: int) -> None:
    """Drop root for the unprivileged user `uid` (its own group, no supplementary groups), for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(f"still running as uid {os.geteuid()}")


def isolate(job: dict[str, Any]) -> dict[str, str]:
    """Put this process, still alone, into the sandbox its children inherit; for each protection
    that could not be applied, why. Dropping to the job's user is the one that must not fail."""
    missing = {}
    if (why := own_network()) is not None:
        missing["network"] = why
    missing.update(set_limits(job))
    if sys.platform.startswith("linux"):
        call(libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
    if job["uid"] is not None:
        open_the_way(Path(job["folder"]))
        become(job["uid"])
    if sys.platform.startswith("linux"):  # after the change of user, which clears it
        call(libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0))
        if os.getppid() != job["parent"]:
            os._exit(1)  # the grader is gone already
    return missing


def short(text: object) -> str:
    """A text for the report, cut to TEXT_LIMIT characters."""
    text = str(text)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def error_of(outputs: list[dict[str, Any]]) -> str | None:
    """`Name: message` of the first error among a cell's outputs, or None."""
    for output in outputs:
        if output.get("output_type") == "error":
            return short(f"{output.get('ename', '')}: {output.get('evalue', '')}".strip(": "))
    return None


def verdicts_of(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts a check cell showed (grade_notebooks.VERDICT_MIME), in order."""
    from grade_notebooks import VERDICT_MIME

    shown = [output.get("data", {}).get(VERDICT_MIME) for output in outputs]
    return [verdict for verdict in shown if isinstance(verdict, dict)]


def check_verdict(outputs: list[dict[str, Any]]) -> dict[str, str]:
    """The exercise's verdict from its check cell, as the fields of its event: right when every check
    said "Correct", else wrong with the hints of those that did not; error when a check raised,
    showed no verdict (why: no_verdict) or returned something else (why: returned)."""
    verdicts, error = verdicts_of(outputs), error_of(outputs)
    odd = next((verdict["returned"] for verdict in verdicts if "returned" in verdict), None)
    if odd is not None:
        return {"verdict": "error", "why": "returned", "detail": short(odd)}
    if error is not None:
        return {"verdict": "error", "text": error}
    if not verdicts:
        return {"verdict": "error", "why": "no_verdict"}
    texts = [str(verdict.get("text", "")) for verdict in verdicts]
    if all(verdict.get("ok") is True for verdict in verdicts):
        return {"verdict": "right", "text": short("\n".join(texts))}
    wrong = [text for verdict, text in zip(verdicts, texts, strict=True) if verdict.get("ok") is not True]
    return {"verdict": "wrong", "text": short("\n".join(wrong))}


def link_course_folder(folder: Path, edition: str) -> None:
    """Fill the notebook's working folder as the course's own folder of that edition looks: links
    to its notebooks, workers and solutions (which the sandbox's user can read, not change)."""
    from grade_notebooks import EDITION_FOLDERS

    for entry in EDITION_FOLDERS[edition].iterdir():
        if not entry.name.startswith("."):
            (folder / entry.name).symlink_to(entry.resolve())


def kernel_exit(client: Any) -> int | None:
    """The dead kernel's exit status (negative: the signal that killed it), where it can be read."""
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    return process.poll() if process is not None else None


def run_cells(cells: list[Any], folder: Path, job: dict[str, Any], emit: Emit) -> None:
    """Run the cells in a fresh kernel, in order, and emit each exercise's verdict once it is known.

    A cell that runs longer than the job's cell timeout is interrupted; if the kernel then does not
    answer a trivial cell within the timeout either, or if it died, the exercises not reached are
    emitted as not run, with why.
    """
    import nbformat
    from kernel_sockets import AsyncSocketKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbclient.util import run_sync
    from regenerate import KERNEL_NAME, CurrentEnvKernelSpecs

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.source) for cell in cells])
    km = AsyncSocketKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=CurrentEnvKernelSpecs())
    client = NotebookClient(
        notebook,
        km=km,
        timeout=job["cell_timeout"],
        allow_errors=True,
        record_timing=False,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(folder)}},
    )
    pending = {cell.exercise for cell in cells if cell.exercise is not None}
    failed: dict[int, str] = {}  # an exercise whose answer raised: the error
    notes = 0

    def settle(number: int, verdict: str, **more: Any) -> None:
        if number in pending:
            pending.discard(number)
            emit(event="exercise", number=number, verdict=verdict, **more)

    stopped: dict[str, Any] | None = None
    with client.setup_kernel():
        for index, (cell, spec) in enumerate(zip(notebook.cells, cells, strict=True)):
            if spec.role == "check":
                if not cells[index - 1].answered:
                    settle(spec.exercise, "not_answered")
                elif spec.exercise in failed:
                    settle(spec.exercise, "error", text=failed[spec.exercise])
                if spec.exercise not in pending:  # settled already: its check does not run
                    continue
            try:
                client.execute_cell(cell, index)
            except DeadKernelError:
                stopped = {"why": "crashed", "exit": kernel_exit(client)}
                if spec.exercise is not None:
                    settle(spec.exercise, "crashed", exit=stopped["exit"])
                break
            except CellTimeoutError:
                if spec.exercise is not None:
                    settle(spec.exercise, "timed_out", seconds=job["cell_timeout"])
                elif notes < COURSE_CELL_NOTES:
                    notes += 1
                    emit(event="note", cell=spec.position, text=f"a timeout ({job['cell_timeout']} s)")
                run_sync(km.interrupt_kernel)()
                probe = nbformat.v4.new_code_cell("pass")
                try:
                    client.execute_cell(probe, index)
                except (CellTimeoutError, DeadKernelError):
                    stopped = {"why": "stuck"}
                    break
                continue
            error = error_of(cell.outputs)
            if spec.role == "answer" and error is not None:
                failed[spec.exercise] = error
            elif spec.role == "check":
                settle(spec.exercise, **check_verdict(cell.outputs))
            elif spec.role == "course" and error is not None and notes < COURSE_CELL_NOTES:
                notes += 1
                emit(event="note", cell=spec.position, text=error)
    for number in sorted(pending):
        settle(number, "not_run", **(stopped or {"why": "runner"}))


def grade(job: dict[str, Any], emit: Emit) -> None:
    """Recognise the job's submission and, if it is a course notebook, run it and emit the verdicts."""
    from grade_notebooks import Rejected, cells_to_run, course_notebooks, identify, read_notebook

    folder = Path(job["folder"])
    for name in ("home", "tmp", "notebook"):
        (folder / name).mkdir(exist_ok=True)
    try:
        submission: object = json.loads((folder / "submission.ipynb").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        submission = None
    course = course_notebooks()
    found = identify(submission, course)
    if isinstance(found, Rejected):
        emit(event="rejected", reason=found.reason, detail=found.detail)
        return
    assert isinstance(submission, dict)
    notebook = found.notebook
    emit(
        event="identified",
        notebook=notebook.stem,
        edition=found.edition,
        exercises=[{"number": e.number, "checks": list(e.checks)} for e in notebook.exercises],
    )
    link_course_folder(folder / "notebook", found.edition)
    cells = cells_to_run(read_notebook(notebook.path(found.edition)), notebook, submission)
    run_cells(cells, folder / "notebook", job, emit)


def probe() -> str | None:
    """Whether a fresh interpreter of this Python, started in the sandbox, finds this one's standard
    library and the course's packages (None), or what went wrong: the check before any grading."""
    import ast
    import subprocess

    code = "import ast, course_utils, nbclient, psutil; print(ast.__file__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        return lines[-1] if lines else f"exit status {done.returncode}"
    if done.stdout.strip() != ast.__file__:
        return f"it finds another standard library ({done.stdout.strip()}, not {ast.__file__})"
    return None


def kill_descendants() -> None:
    """Kill everything below this process (orphans included: it is their subreaper), until none is left."""
    import psutil

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        below = psutil.Process().children(recursive=True)
        if not below:
            return
        for process in below:
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(below, timeout=1)


def main(argv: list[str]) -> int:
    """Isolate, grade the job's submission, report on stdout; everything else goes to stderr (the log)."""
    job = json.loads(argv[0])
    report = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)  # not inherited by children
    os.dup2(2, 1)  # what this process and its children print goes to the log

    def emit(**event: Any) -> None:
        report.write(json.dumps(event, ensure_ascii=False) + "\n")

    try:
        emit(event="protections", missing=isolate(job))
        os.chdir(job["folder"])
        if job.get("probe"):
            emit(event="probe", why=probe())
        else:
            grade(job, emit)
    except Exception as err:  # any failure of the grading itself, reported rather than lost
        emit(event="failed", text=short(f"{type(err).__name__}: {err}"))
        raise
    finally:
        kill_descendants()
        emit(event="done")
        report.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
