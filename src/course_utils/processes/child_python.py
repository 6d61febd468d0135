"""Run a snippet in a fresh Python and read the error it ends with, as a user would see it.

Used by notebooks 03, 04 and 11 for every child-Python demonstration. Some behaviours only show
in a *new* process: a machine without GPUs (an environment that hides them), a script that sets
an environment variable before anything else, a spawned worker that must import its function
by name. `run_python` runs such a snippet in a fresh interpreter (this very
Python, with this process's environment plus the changes asked for) and returns what it
printed and, when it failed, the last line of its traceback: the `ExceptionType: message`
line a user reads at the bottom of a crash, with this machine's paths replaced by
placeholders and built-in modules written the same way on every Python version
(`<module '__main__'>`), so that the notebook's output is the same on every machine.

The child's stdin carries bytes from the parent when asked (for example a pickle), so that
nothing is written to disk and no file path needs printing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from course_utils._checks import environment, flag, text, timeout_seconds
from course_utils.i18n import _
from course_utils.processes.supervision import KILL, child_env, signal_group
from course_utils.processes.watchdog import mark, release_group, watch_group

__all__ = [
    "ChildPythonError",
    "ChildRun",
    "last_error_line",
    "mask_machine_paths",
    "run_python",
    "shorten_builtin_modules",
]

# How Python shows a module that has no file, such as the __main__ of `python -c`: after its
# name comes its loader, `(built-in)` up to 3.11, `(<class '_frozen_importlib.BuiltinImporter'>)`
# from 3.12 (as in "Can't get attribute 'work' on <module '__main__' (built-in)>").
_BUILTIN_MODULE = re.compile(
    r"<module '([^']+)' \((?:built-in|<class '_frozen_importlib\.BuiltinImporter'>)\)>"
)


@dataclass(frozen=True)
class ChildRun:
    """What a fresh Python did: its exit status, what it printed, and the error it ended with."""

    returncode: int
    stdout: str
    error: str | None  # "ExceptionType: message" (see run_python) when it failed, else None

    @property
    def ok(self) -> bool:
        """True when the child exited with status 0."""
        return self.returncode == 0


def _machine_paths() -> dict[str, str]:
    """This machine's paths that may appear in a traceback, mapped to the placeholder shown instead."""
    paths: dict[str, str] = {}
    labels = {
        "stdlib": "<stdlib>",
        "platstdlib": "<stdlib>",
        "purelib": "<packages>",
        "platlib": "<packages>",
    }
    for name, label in labels.items():
        value = sysconfig.get_paths().get(name)
        if value:
            paths[value] = label
    for value in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        paths[value] = "<python>"
    paths[str(Path(sys.executable))] = "<python>"
    paths[tempfile.gettempdir()] = "<tmp>"
    paths[os.getcwd()] = "<cwd>"
    paths[str(Path.home())] = "<home>"
    return {path: label for path, label in paths.items() if len(path) > 1}


def mask_machine_paths(text: str) -> str:
    """Replace this machine's paths (Python install, packages, temp folder, cwd, home) in `text`.

    The longest paths are replaced first, so a package path becomes `<packages>` rather than
    `<python>/lib/...`. Output that goes into a committed notebook must not carry anyone's
    machine paths; this is what makes a child's error line printable.
    """
    if not isinstance(text, str):
        raise TypeError(f"mask_machine_paths expects a str, got {type(text).__name__}")
    for path, label in sorted(_machine_paths().items(), key=lambda item: -len(item[0])):
        text = text.replace(path, label)
    return text


def shorten_builtin_modules(text: str) -> str:
    """Write every built-in module in `text` by its name alone (`<module '__main__'>`), without its loader.

    Python 3.11 shows the `__main__` of a fresh interpreter as `<module '__main__' (built-in)>`,
    3.12 and later as `<module '__main__' (<class '_frozen_importlib.BuiltinImporter'>)>`; the
    short form is what both mean, and it keeps a printed error the same on every version.
    """
    if not isinstance(text, str):
        raise TypeError(f"shorten_builtin_modules expects a str, got {type(text).__name__}")
    return _BUILTIN_MODULE.sub(r"<module '\1'>", text)


def last_error_line(stderr: str) -> str | None:
    """The `ExceptionType: message` line a Python traceback ends with, or None when there is none.

    That is the last line of the traceback that is not indented (frames and source lines are).
    A message that spans several lines gives its first line only.
    """
    if not isinstance(stderr, str):
        raise TypeError(f"last_error_line expects the child's stderr as a str, got {type(stderr).__name__}")
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return None
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return lines[-1]
    after_frames = [
        line for line in lines[starts[-1] + 1 :] if not line.startswith((" ", "\t")) and line.strip("^~ ")
    ]
    return after_frames[0] if after_frames else None


class ChildPythonError(RuntimeError):
    """A child Python ran past its timeout (and was killed), or failed where success was required."""


def run_python(
    code: str,
    *args: str | os.PathLike[str] | int,
    env: Mapping[str, str | None] | None = None,
    stdin: bytes = b"",
    timeout: float = 60.0,
    check: bool = False,
) -> ChildRun:
    """Run `code` with this Python in a new process; return its status, stdout and final error.

    `args` arrive in the child's `sys.argv[1:]` (pass file paths there, so they are never
    printed). `env` changes the child's environment on top of this process's: a string sets a
    variable, None removes it (`{"CUDA_VISIBLE_DEVICES": None}` runs the child as if it had
    never been set; `course_utils.devices.HIDE_GPUS` runs it as on a machine without GPUs).
    `stdin` is fed to the child's standard input. A child that fails is not an error here
    unless `check`: its last traceback line is in `.error`, with paths scrubbed and built-in
    modules written the same way on every Python version (`shorten_builtin_modules`). With
    `check`, a failing child raises ChildPythonError carrying its stderr.

    The child leads a process group of its own; one that runs longer than `timeout` seconds is
    killed with everything it started (the whole group), and ChildPythonError is raised. A
    process that `code` starts in a session of its own (`start_new_session=True`, a daemon) is
    outside that group: it runs on after `run_python` returns, until this process ends, when the
    watchdog stops it (it carries the course's mark); `code` that starts one should stop it.
    """
    if not text("code", code, "'print(1)'", empty=True).strip():
        raise ValueError(_("run_python needs the Python code to run, as a non-empty string"))
    if not isinstance(stdin, bytes):
        raise TypeError(
            _("stdin must be bytes (e.g. pickle.dumps(obj)), not {stdin_type}").format(
                stdin_type=type(stdin).__name__
            )
        )
    argv = []
    for arg in args:
        if isinstance(arg, bool) or not isinstance(arg, str | os.PathLike | int):
            raise TypeError(
                _("args must be strings, paths or whole numbers for sys.argv, not {arg!r}").format(arg=arg)
            )
        argv.append(
            str(arg) if isinstance(arg, int) else text("args", os.fspath(arg), "'data.pt'", empty=True)
        )
    timeout = timeout_seconds("timeout", timeout)
    flag("check", check)
    command = [sys.executable, "-c", code, *argv]
    # Plain tracebacks (Python 3.13 colours them); the watchdog's mark last, so env cannot drop it.
    child_environment = {"PYTHON_COLORS": "0"} | child_env(environment("env", env)) | mark()
    # Files, not pipes, for its input and output: a process the child leaves running (which
    # holds them too) cannot keep this call waiting, and being unlinked they leave nothing on disk.
    with (
        tempfile.TemporaryFile() as given,
        tempfile.TemporaryFile() as out_file,
        tempfile.TemporaryFile() as err_file,
    ):
        given.write(stdin)
        given.seek(0)
        child = subprocess.Popen(
            command,
            env=child_environment,
            stdin=given,
            stdout=out_file,
            stderr=err_file,
            start_new_session=True,  # its own process group, so that it is stopped with all it started
        )
        watch_group(child.pid)  # killed by the watchdog should this process be killed outright
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ChildPythonError(
                _(
                    "the child Python did not finish within {timeout:g} s and was killed; "
                    "pass a larger timeout or check the code for a wait that never ends"
                ).format(timeout=timeout)
            ) from None
        finally:  # what it started is stopped with it, also when it has ended
            signal_group(child.pid, KILL, running=child.poll() is None)
            child.wait()
            release_group(child.pid)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    stdout = mask_machine_paths(out.decode("utf-8", errors="replace"))
    if child.returncode == 0:
        return ChildRun(returncode=0, stdout=stdout, error=None)
    stderr = shorten_builtin_modules(mask_machine_paths(err.decode("utf-8", errors="replace")))
    if check:
        raise ChildPythonError(
            _("the child Python exited with status {status}; its stderr:\n{stderr}").format(
                status=child.returncode, stderr=stderr
            )
        )
    error = last_error_line(stderr) or _("the child exited with status {status}, printing no error").format(
        status=child.returncode
    )
    return ChildRun(returncode=child.returncode, stdout=stdout, error=error)
