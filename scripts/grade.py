"""Grade a class's notebooks with the course's own checks, each submission in a sandbox of its own.

    python scripts/grade.py SUBMISSION ... [--out DIR] [--language zh-CN] [--jobs N] [limits]

Called through `python3 course.py grade`. A SUBMISSION is a notebook file or a folder searched for
them (either edition, any mix). The student is a file's name without `.ipynb`, or, for a file in a
folder inside a folder given, that folder's name (`class/alice/02.ipynb` is alice's). Which
notebook a submission is comes from its content (`grade_notebooks`), never from its name.

Each submission is run as the student would run it, top to bottom in a fresh kernel, from the
course's own copy of every cell but the student's answers, by `grade_runner.py` in a sandbox:
see that script, and the report's last section for what was and was not applied. Submissions run
in parallel (`--jobs`, default: the machine's CPUs), each independent of the others: one can fail
only itself. A line says each result as it comes; Ctrl-C stops the run and still writes the
report of what was graded (a second Ctrl-C stops at once). The report (`grade_report`) goes to
DIR/grades.csv and DIR/grades.html, in the language of `--language`, else of COURSE_LANGUAGE or the
locale.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import queue
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import course_shell
from grade_notebooks import REASONS
from grade_report import (
    VERDICTS,
    WHYS,
    ExerciseResult,
    Result,
    Settings,
    protection_lines,
    say,
    summary,
    write_report,
)

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "grade_runner.py"
DEFAULT_OUT = ROOT / "build" / "grades"
LARGEST_MIB = 50  # a larger submission is not read
EVENT_BYTES = 4 << 20  # what a runner may report in all; more is cut off
# Unprivileged users for the sandboxes, as root: user ids of no account, from a range that systemd's
# documentation leaves unused (1879048192-2147352575), a block of them picked at random for each run.
UID_BASE, UID_SPAN = 0x7A000000, 1 << 24
# The instructor's variables that the sandbox keeps (where Python, CUDA and the locale are); no other.
KEPT_VARIABLES = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
)
SUBMISSION_MARK = "COURSE_GRADE_SUBMISSION"  # in every sandboxed process's environment: one value each
INTERRUPTED = 130
POLL_SECONDS = 0.2  # how often the main loop looks for a Ctrl-C between two results


def positive(kind: type) -> Any:
    """An argparse type: a number of `kind` above 0, else an error naming what was given."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not above 0")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    """The command line of `course.py grade` (standard library only: --help needs no set-up)."""
    parse = argparse.ArgumentParser(
        prog="python3 course.py grade",
        description="Grade students' notebooks with the course's own checks, each in a sandbox of its "
        "own: a CSV file and an HTML page of every student's verdict on every exercise.",
    )
    parse.add_argument("submissions", nargs="+", metavar="SUBMISSION", help="a notebook, or a folder of them")
    parse.add_argument(
        "--out", metavar="DIR", type=Path, default=DEFAULT_OUT, help="where the report goes (build/grades)"
    )
    parse.add_argument("--language", choices=["en", "zh-CN"], help="the report's language (COURSE_LANGUAGE)")
    parse.add_argument(
        "--jobs", metavar="N", type=positive(int), help="submissions graded at once (the CPUs)"
    )
    parse.add_argument(
        "--cell-timeout",
        metavar="SECONDS",
        type=positive(int),
        default=120,
        help="seconds a cell may run (120)",
    )
    parse.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive(int),
        default=900,
        help="seconds a notebook may run (900)",
    )
    parse.add_argument(
        "--memory", metavar="GIB", type=positive(float), help="GiB a process may use (memory / jobs, 2-16)"
    )
    parse.add_argument(
        "--max-processes", metavar="N", type=positive(int), default=512, help="processes and threads (512)"
    )
    parse.add_argument(
        "--max-file-size", metavar="MIB", type=positive(int), default=256, help="MiB a file may have (256)"
    )
    return parse


@dataclass(frozen=True)
class Submission:
    """A notebook to grade: its file, its student, and how the report names it."""

    path: Path
    student: str
    shown: str


def submissions(arguments: Iterable[str]) -> list[Submission]:
    """The notebooks that the arguments name, each once, with their students (see the module's doc)."""
    found: dict[Path, Submission] = {}
    for argument in arguments:
        given = Path(argument)
        if given.is_file():
            found.setdefault(given.resolve(), Submission(given, given.stem, given.name))
        elif given.is_dir():
            for path in sorted(given.rglob("*.ipynb")):
                inside = path.relative_to(given)
                if any(part.startswith(".") for part in inside.parts):  # .ipynb_checkpoints and the like
                    continue
                student = inside.parts[0] if len(inside.parts) > 1 else path.stem
                found.setdefault(path.resolve(), Submission(path, student, str(Path(given.name) / inside)))
        else:
            raise SystemExit(f"SUBMISSION {argument!r}: no such file or folder")
    if not found:
        raise SystemExit(f"SUBMISSION: no .ipynb file in {' '.join(arguments)}")
    return list(found.values())


def memory_gib(jobs: int) -> float:
    """The default memory of a sandboxed process: the machine's memory shared by the jobs, 2 to 16 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        total = 8.0
    return max(2.0, min(16.0, round(total / jobs * 2) / 2))


def free_uids(count: int) -> list[int]:
    """`count` user ids that no account has and no process runs as: one sandbox user per job."""
    import grp
    import pwd

    import psutil

    running = {
        uid
        for process in psutil.process_iter(["uids"])
        if process.info["uids"]
        for uid in process.info["uids"]
    }
    while True:
        start = UID_BASE + secrets.randbelow(UID_SPAN // count) * count
        uids = list(range(start, start + count))
        if running.isdisjoint(uids) and not any(
            known(pwd.getpwuid, uid) or known(grp.getgrgid, uid) for uid in uids
        ):
            return uids


def known(lookup: Any, number: int) -> bool:
    """Whether the account database has `number` (`lookup`: pwd.getpwuid or grp.getgrgid)."""
    try:
        lookup(number)
    except KeyError:
        return False
    return True


def job_for(folder: Path, uid: int | None, settings: Settings, *, probe: bool = False) -> dict[str, Any]:
    """What grade_runner.py is told: its folder, user and limits; with `probe`, only to check the sandbox."""
    return {
        "folder": str(folder),
        "uid": uid,
        "parent": os.getpid(),
        "cell_timeout": settings.cell_timeout,
        "cpu_seconds": settings.cpu_seconds,
        "memory_bytes": int(settings.memory_gib * 2**30),
        "file_bytes": settings.file_mib << 20,
        "processes": settings.processes,
        "probe": probe,
    }


def user_can_run(uid: int, settings: Settings) -> str | None:
    """Whether the sandbox, as user `uid`, runs this Python with its own standard library and the
    course's packages (None), else what went wrong: a sandbox of the runner's that checks only that."""
    folder = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        os.chown(folder, uid, uid)
        done = subprocess.run(
            [sys.executable, str(RUNNER), json.dumps(job_for(folder, uid, settings, probe=True))],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=sandbox_variables(folder),
            cwd=folder,
            start_new_session=True,
            timeout=300,
        )
    except (OSError, subprocess.SubprocessError) as err:
        return str(err)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event.get("event") == "probe":
            return event.get("why")
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def sandbox_variables(folder: Path) -> dict[str, str]:
    """A sandbox's environment: the few KEPT_VARIABLES of the instructor's, its own folders, a user name."""
    env = {name: os.environ[name] for name in KEPT_VARIABLES if name in os.environ}
    env.update(
        HOME=str(folder / "home"),
        TMPDIR=str(folder / "tmp"),
        USER="course-grade",  # an account-less user still needs a name (getpass, torch's caches)
        LOGNAME="course-grade",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


@dataclass
class Sandbox:
    """What every job of a run shares: its users (None: this one's own), its limits, what is missing."""

    users: queue.Queue[int | None]
    missing: dict[str, str]
    settings: Settings
    stop: threading.Event


def plan_sandbox(options: argparse.Namespace, jobs: int) -> Sandbox:
    """The sandbox of this run: an unprivileged user per job as root (or an error where that user
    cannot run the course), this user otherwise, and the protections therefore missing, with why."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    uids: list[int | None] = list(free_uids(jobs)) if root else [None] * jobs
    settings = Settings(
        processes=options.max_processes,
        memory_gib=options.memory or memory_gib(jobs),
        file_mib=options.max_file_size,
        cpu_seconds=2 * options.timeout,
        cell_timeout=options.cell_timeout,
        timeout=options.timeout,
        by_user=root,
    )
    missing = {}
    if not root:
        missing["user"] = "the grader does not run as root, so it cannot start its sandboxes as another user"
        missing["processes"] = "counted together with the instructor's own processes (not run as root)"
    elif (why := user_can_run(uids[0], settings)) is not None:  # type: ignore[arg-type]
        raise SystemExit(
            "As root, course.py grade runs each submission as an unprivileged user of its own, but such "
            f"a user cannot run this Python or the course here ({why}). It will not run students' code "
            "as root, where nothing bounds a fork bomb or guards your files: make the course and its "
            "Python readable by every user (or clone the course where they are), or run the grader as "
            "an ordinary user."
        )
    users: queue.Queue[int | None] = queue.Queue()
    for uid in uids:
        users.put(uid)
    return Sandbox(users, missing, settings, threading.Event())


def read_events(
    process: subprocess.Popen[bytes], deadline: float, stop: threading.Event
) -> tuple[list[Any], str | None]:
    """What the runner reports, line by line, until it ends (then None), the deadline passes
    ("whole"), the run is stopped ("stopped") or it reports too much ("runner")."""
    assert process.stdout is not None
    fd, events, pending, total = process.stdout.fileno(), [], b"", 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if stop.is_set():
                return events, "stopped"
            if time.monotonic() > deadline:
                return events, "whole"
            if not selector.select(timeout=0.2):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return events, None
            total += len(chunk)
            if total > EVENT_BYTES:
                return events, "runner"
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue


def sweep(leader: int, uid: int | None, mark: str) -> None:
    """Kill a sandbox's every process: the runner's process group, and every process of its user
    (`uid`) or, without one, every process that carries its `mark`; until none is left (10 s at most)."""
    import psutil

    def belongs(process: psutil.Process) -> bool:
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if uid is not None:
            return uid in process.uids()
        return process.environ().get(SUBMISSION_MARK) == mark

    deadline = time.monotonic() + 10
    while True:
        try:
            os.killpg(leader, signal.SIGKILL)
        except OSError:
            pass
        found = []
        for process in psutil.process_iter():
            try:
                if belongs(process):
                    process.kill()
                    found.append(process)
            except psutil.Error:
                continue
        if not found or time.monotonic() > deadline:
            return
        psutil.wait_procs(found, timeout=0.5)


def take(event: dict[str, Any], result: Result, exercises: dict[int, ExerciseResult]) -> None:
    """Note one event of a runner in the result: protections, the notebook, a verdict, a note, a failure.
    Runners are sandboxed student code: anything malformed is ignored."""
    kind = event.get("event")
    if kind == "protections" and isinstance(event.get("missing"), dict):
        result.missing.update({str(k): str(v) for k, v in event["missing"].items()})
    elif kind == "rejected" and event.get("reason") in REASONS:
        result.reason, result.detail = event["reason"], str(event.get("detail", ""))
    elif kind == "identified" and isinstance(event.get("exercises"), list):
        result.notebook, result.edition = str(event.get("notebook")), str(event.get("edition"))
        for item in event["exercises"]:
            if isinstance(item, dict) and isinstance(item.get("number"), int):
                number = item["number"]
                exercises[number] = ExerciseResult(number, tuple(map(str, item.get("checks", []))), "")
    elif kind == "exercise" and event.get("number") in exercises and event.get("verdict") in VERDICTS:
        exercise = exercises[event["number"]]
        exercise.verdict, exercise.text = event["verdict"], str(event.get("text", ""))
        exercise.exit = event.get("exit") if isinstance(event.get("exit"), int) else None
        exercise.seconds = event.get("seconds") if isinstance(event.get("seconds"), int | float) else None
        exercise.why = event.get("why") if event.get("why") in WHYS else None
        exercise.detail = str(event.get("detail", ""))
    elif kind == "note" and isinstance(event.get("cell"), int):
        result.notes.append((event["cell"], str(event.get("text", ""))))
    elif kind == "failed" and result.notebook is None:
        result.reason, result.detail = "failed", str(event.get("text", ""))


def finish(
    result: Result, exercises: dict[int, ExerciseResult], ended: str | None, timeout: int, log: Path
) -> None:
    """Complete a result once its runner is gone: exercises without a verdict did not run (why:
    `ended` early, else the runner ended without one); a runner that said nothing failed."""
    if result.notebook is not None:
        for exercise in exercises.values():
            if not exercise.verdict:
                whole = ended == "whole"
                exercise.verdict = "timed_out" if whole else "not_run"
                exercise.why, exercise.seconds = ended or "runner", timeout if whole else None
        result.exercises = sorted(exercises.values(), key=lambda exercise: exercise.number)
    elif result.reason is None and ended == "stopped":
        result.reason = "stopped"
    elif result.reason is None:  # the runner's own last words
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines() if log.exists() else []
        result.reason = "failed"
        result.detail = lines[-1][-300:] if lines else "the sandbox reported nothing"


def grade_one(submission: Submission, sandbox: Sandbox, watchdog: ModuleType) -> Result:
    """Grade one submission in a sandbox of its own, then kill whatever it left and remove its folder."""
    result = Result(submission.path, submission.student, submission.shown, missing=dict(sandbox.missing))
    started, settings = time.monotonic(), sandbox.settings
    if sandbox.stop.is_set():
        result.reason = "stopped"
        return result
    try:
        if submission.path.stat().st_size > LARGEST_MIB << 20:
            result.reason, result.detail = "too_large", str(LARGEST_MIB)
            return result
        data = submission.path.read_bytes()
    except OSError as err:
        result.reason, result.detail = "failed", f"{type(err).__name__}: {err.strerror or err}"
        return result
    uid = sandbox.users.get()
    folder = Path(tempfile.mkdtemp(prefix="course-grade-"))
    watchdog.watch_folder(str(folder))
    mark, process, exercises = uuid.uuid4().hex, None, {}
    try:
        (folder / "submission.ipynb").write_bytes(data)
        if uid is not None:
            os.chown(folder, uid, uid)
        job = job_for(folder, uid, settings)
        env = {**sandbox_variables(folder), SUBMISSION_MARK: mark, **watchdog.mark()}
        with (folder / "runner.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, str(RUNNER), json.dumps(job)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=folder,
                start_new_session=True,  # its own group; a Ctrl-C at the terminal reaches the grader alone
            )
        watchdog.watch_group(process.pid)
        events, ended = read_events(process, started + settings.timeout, sandbox.stop)
        for event in events:
            if isinstance(event, dict):
                take(event, result, exercises)
        finish(result, exercises, ended, settings.timeout, folder / "runner.log")
    finally:
        if process is not None:
            sweep(process.pid, uid, mark)
            process.wait()
            watchdog.release_group(process.pid)
        shutil.rmtree(folder, ignore_errors=True)
        watchdog.release_folder(str(folder))
        sandbox.users.put(uid)
    result.seconds = time.monotonic() - started
    return result


def course_watchdog() -> ModuleType:
    """`course_utils.processes.watchdog`, loaded by itself: it needs only the standard library, and its
    package would import torch, which the grader does not need (seconds of every run)."""
    package = importlib.util.find_spec("course_utils")
    if package is None or not package.submodule_search_locations:
        raise SystemExit("course_utils is not installed: run this through `python3 course.py grade`")
    path = Path(next(iter(package.submodule_search_locations))) / "processes" / "watchdog.py"
    spec = importlib.util.spec_from_file_location("course_grade_watchdog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stop_on_signals(stop: threading.Event) -> threading.Event:
    """Ctrl-C and SIGTERM (a stop button, `kill`) set `stop`, which every sandbox watches, and the event
    returned, which the main loop watches; a Ctrl-C after either raises KeyboardInterrupt at once.

    The handler only sets events. A KeyboardInterrupt raised by the default handler is lost when it
    lands while the main thread runs a finalizer (printed as "Exception ignored"), and the grading ran on.
    """
    asked = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        asked.set()
        stop.set()
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when started ignoring it
        signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return asked


def run(options: argparse.Namespace, language: str) -> int:
    """Grade every submission, report each as it comes, write the report; 130 if stopped by Ctrl-C."""
    todo = submissions(options.submissions)
    jobs = min(options.jobs or course_shell.worker_count(), len(todo))
    sandbox = plan_sandbox(options, jobs)
    watchdog = course_watchdog()  # kills the sandboxes should the grader be killed outright
    watchdog.start_watchdog()
    started, status = time.monotonic(), 0
    print(say("start", language, total=len(todo), jobs=jobs), flush=True)
    missing = {name: {why} for name, why in sandbox.missing.items()}
    for applied, line in protection_lines(missing, sandbox.settings, language):
        if not applied:
            print(line, flush=True)
    results: dict[Submission, Result] = {}
    asked = stop_on_signals(sandbox.stop)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(grade_one, submission, sandbox, watchdog): submission for submission in todo}
        pending = set(futures)
        while pending and not asked.is_set():
            done, pending = concurrent.futures.wait(
                pending, timeout=POLL_SECONDS, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in sorted(done, key=lambda future: todo.index(futures[future])):
                result = results[futures[future]] = future.result()
                what = result.outcome(language) + (f" ({result.notebook})" if result.graded else "")
                print(
                    say(
                        "progress",
                        language,
                        done=len(results),
                        total=len(todo),
                        student=result.student,
                        file=result.shown,
                        what=what,
                        seconds=round(time.monotonic() - started),
                        left=len(todo) - len(results),
                    ),
                    flush=True,
                )
        if asked.is_set():
            status = INTERRUPTED
            print(say("stopping", language), flush=True)
            for future, submission in futures.items():
                future.cancel()
                if not future.cancelled() and submission not in results:
                    results[submission] = future.result()
    stopped = [Result(s.path, s.student, s.shown, reason="stopped") for s in todo if s not in results]
    ordered = [results[s] for s in todo if s in results] + stopped
    seconds = time.monotonic() - started
    csv_path, html_path = write_report(ordered, sandbox.settings, seconds, options.out, language)
    print(summary(ordered, seconds, language), flush=True)
    print(say("written", language, html=html_path, csv=csv_path), flush=True)
    return status


def main(argv: list[str]) -> int:
    """Parse the command line, then grade; a bad argument gets one line naming it, not a traceback."""
    options = parser().parse_args(argv)
    if os.name != "posix":
        sys.exit("course.py grade needs Linux or macOS: it cannot isolate students' code on this system")
    if options.language:
        course_shell.chosen_language = options.language
    return run(options, course_shell.language())


if __name__ == "__main__":
    sys.exit(course_shell.exit_status(main, sys.argv[1:]))
