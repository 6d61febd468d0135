"""course.py, the README's entry point: it behaves like the program it starts, and says what went wrong.

The signal tests start course.py's `run` on a tiny stand-in child in a session of its own and
signal it as a terminal would (Ctrl-C: SIGINT to the whole foreground process group) or as
`kill` would (SIGTERM to course.py alone). Each one starts its course.py with SIGINT at its
default, as a shell starts a foreground job, so the tests hold whether or not the test run
itself ignores SIGINT (a background job does); `test_..._when_started_ignoring_sigint` covers
the background case of course.py itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import course

WAIT = 60  # seconds: generous bound for a loaded machine; no test waits for it unless broken

# Stands in for JupyterLab: on Ctrl-C it asks its question and carries on; it ends when a line
# with an exit status arrives on stdin, or with SIGTERM's default action.
ASKS_ON_CTRL_C = """
import signal, sys
signal.signal(signal.SIGINT, lambda s, f: print("Shut down (y/[n])?", flush=True))
print("ready", flush=True)
sys.exit(int(sys.stdin.readline()))
"""
# A child that Ctrl-C ends (SIGINT's default action), like most programs.
DIES_ON_CTRL_C = """
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
print("ready", flush=True)
sys.stdin.readline()
"""


# A child that only waits: nothing but a signal ends it (stdin closing does not).
WAITS = """
import time
print("ready", flush=True)
time.sleep(600)
"""


# A child that keeps the SIGINT disposition it inherits (Python ignores it if started ignoring it).
INHERITS = """
import sys
print("ready", flush=True)
sys.stdin.readline()
"""


def start_course_run(child: str, *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    """course.run on `python -c child`, in a new session, SIGINT at its default (or ignored); at "ready"."""
    driver = (
        f"import sys; sys.path.insert(0, {str(course.ROOT)!r}); import course; "
        f"sys.exit(course.run([sys.executable, '-c', {child!r}]))"
    )

    def like_a_shell() -> None:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=like_a_shell,  # the test process starts no threads here, as preexec_fn needs
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("+ "), "course.run echoes the command first"
    for line in proc.stdout:  # the rest of the echoed command, then the child's first line
        if line == "ready\n":
            return proc
    finish(proc)
    raise AssertionError(f"the stand-in child never got ready: {proc.stderr.read()}")


def finish(proc: subprocess.Popen[str], stdin: str = "") -> tuple[int, str, str]:
    """Send `stdin`, wait for course.py to end; its status, the rest of its stdout, and its stderr."""
    try:
        out, err = proc.communicate(stdin, timeout=WAIT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


def test_ctrl_c_goes_to_the_child_whose_question_course_py_outlives():
    proc = start_course_run(ASKS_ON_CTRL_C)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    assert proc.stdout.readline() == "Shut down (y/[n])?\n"
    assert proc.poll() is None, "course.py must wait while the child carries on"
    status, out, err = finish(proc, "3\n")  # the child's answer, then its exit status
    assert (status, out, err) == (3, "", "")


def test_a_child_that_ctrl_c_ends_gives_130_and_no_traceback():
    proc = start_course_run(DIES_ON_CTRL_C)
    os.killpg(proc.pid, signal.SIGINT)
    assert finish(proc) == (128 + signal.SIGINT, "", "")


def test_sigterm_to_course_py_alone_is_passed_on_to_the_child():
    proc = start_course_run(WAITS)
    os.kill(proc.pid, signal.SIGTERM)  # course.py only, as `kill PID` sends it
    assert finish(proc) == (128 + signal.SIGTERM, "", "")


def test_started_ignoring_sigint_the_child_ignores_it_too_as_a_background_job_does():
    proc = start_course_run(INHERITS, ignore_sigint=True)
    os.killpg(proc.pid, signal.SIGINT)  # ignored by both; then the child ends normally
    assert finish(proc, "\n") == (0, "", "")


def test_run_restores_this_process_signal_handlers(capsys):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert course.run([sys.executable, "-c", "raise SystemExit(4)"]) == 4
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_unknown_command_is_named_and_the_commands_listed(capsys):
    assert course.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert '"frobnicate" is not a command' in err
    assert all(f"  {name} " in err for name in course.COMMANDS)


def test_no_command_lists_the_commands_and_help_succeeds(capsys):
    assert course.main([]) == 2
    assert "No command given" in capsys.readouterr().err
    assert course.main(["--help"]) == 0
    assert "  regenerate  Re-execute every notebook" in capsys.readouterr().out


def test_a_venv_that_cannot_be_created_is_removed_and_the_fix_named(tmp_path, monkeypatch):
    target = tmp_path / ".venv"
    monkeypatch.setattr(course, "VENV", target)

    def half_made(self, env_dir):
        (target / "bin").mkdir(parents=True)
        (target / "bin" / "python").touch()  # what a failed ensurepip leaves behind
        raise subprocess.CalledProcessError(1, ["python", "-m", "ensurepip"])

    monkeypatch.setattr(venv.EnvBuilder, "create", half_made)
    with pytest.raises(SystemExit, match="sudo apt install python3-venv"):
        course.ensure_environment()
    assert not target.exists()


@pytest.fixture
def unreachable_index(monkeypatch):
    """pip with no configuration but an index nobody listens on (the discard port), one retry."""
    for name in [n for n in os.environ if n.startswith("PIP_") or n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip names the connection error only when it retries
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "5")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")


def test_without_network_the_install_says_so_in_one_line_and_keeps_pips_output(
    unreachable_index, tmp_path, capsys
):
    target = tmp_path / "target"
    with pytest.raises(SystemExit) as failed:
        course.install(Path(sys.executable), "--no-deps", "--target", str(target), "course-demo-package")
    message = str(failed.value.code)
    assert message.startswith("Installing the course failed: pip could not download the packages")
    assert "PIP_INDEX_URL" in message and "\n" not in message
    assert "Retrying" in capsys.readouterr().out, "pip's own report is shown as it came"
    assert not any(target.glob("*")), "nothing was installed"


def test_an_install_that_fails_for_another_reason_does_not_blame_the_network(
    unreachable_index, tmp_path, capsys
):
    with pytest.raises(SystemExit) as failed:
        course.install(Path(sys.executable), "--no-deps", "--target", str(tmp_path), str(tmp_path / "none"))
    assert str(failed.value.code).startswith("Installing the course failed (pip exit status 1)")
    assert "ERROR" in capsys.readouterr().out, "pip's own report is shown"
