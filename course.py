#!/usr/bin/env python3
"""One entry point for the course: set up, open, test, regenerate and benchmark.

Usage: python3 course.py COMMAND [ARGUMENT ...]; `python3 course.py help` lists the commands.

Set-up means: create the virtual environment `.venv` beside this file if it is missing and
install the course (`pip install -e ".[test]"`) whenever `pyproject.toml` changed since the
last install. Only the standard library is used here, so any Python 3.11+ can run it.

Every command runs its work in a child process and behaves like that program run directly:
Ctrl-C goes to the child alone (JupyterLab's "Shut down this Jupyter server?" question
included), SIGTERM sent to this script is passed on to the child, and the exit status is the
child's (128 + N when signal N ended it, as a shell shows it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import venv
from collections.abc import Callable
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / "course-install.stamp"
# What pip prints when it cannot reach a package index (connection refused, DNS, proxy, timeout).
NO_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Connection refused|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"ProxyError|ConnectTimeoutError|ReadTimeoutError|Could not fetch URL|"
    r"connection broken by|Max retries exceeded"
)


def venv_python() -> Path:
    """Path of the Python interpreter inside the course's virtual environment."""
    sub = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    return VENV / sub


def run(cmd: list[str | Path], output: list[str] | None = None, env: dict[str, str] | None = None) -> int:
    """Run a command from the course root as if it ran alone; return its exit status as a shell shows it.

    Ctrl-C reaches the child directly (same process group) and is ignored here, so the child's own
    handling applies; SIGTERM is passed on to the child. When `output` is a list, the child's
    stdout and stderr are echoed as they come and also collected there, line by line. `env`, when
    given, is the child's whole environment.
    """
    print("+", " ".join(str(c) for c in cmd), flush=True)
    child: subprocess.Popen[str] | None = None
    early: list[int] = []  # a SIGTERM that arrived before the child existed

    def pass_on(signum: int, frame: FrameType | None) -> None:
        if child is None:
            early.append(signum)
        else:
            child.send_signal(signum)

    # A Python-level handler (unlike SIG_IGN) is reset to the default in the child at exec.
    # A SIGINT this process was started ignoring (a background job) stays ignored, for both.
    ignoring_sigint = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN if ignoring_sigint else lambda s, f: None)
    previous_term = signal.signal(signal.SIGTERM, pass_on)
    try:
        capture = subprocess.PIPE if output is not None else None
        with subprocess.Popen(
            [str(c) for c in cmd],
            cwd=ROOT,
            env=env,
            stdout=capture,
            stderr=subprocess.STDOUT if capture else None,
            text=True,
        ) as child:
            for signum in early:
                child.send_signal(signum)
            if child.stdout is not None and output is not None:
                for line in child.stdout:
                    print(line, end="", flush=True)
                    output.append(line)
        status = child.returncode
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
    return 128 - status if status < 0 else status


def install(python: Path, *pip_args: str) -> None:
    """`pip install` into the environment of `python`; exit with one line saying why if that fails."""
    output: list[str] = []
    status = run([python, "-m", "pip", "install", "--quiet", *pip_args], output=output)
    if status == 0:
        return
    if any(NO_NETWORK.search(line) for line in output):
        sys.exit(
            "Installing the course failed: pip could not download the packages (no connection to the "
            "package index, see above). Check the network, set a proxy (HTTPS_PROXY=http://host:port) "
            "or point pip at a reachable index (PIP_INDEX_URL=...), then run this again."
        )
    sys.exit(f"Installing the course failed (pip exit status {status}); see above.")


def ensure_environment() -> Path:
    """Create `.venv` and install the course into it unless it is already up to date."""
    if sys.version_info < (3, 11):  # noqa: UP036 - an older python3 may start this script
        sys.exit(f"The course needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    if not venv_python().exists():
        print(f"Creating the virtual environment {VENV.name}/ ...", flush=True)
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except (OSError, subprocess.CalledProcessError) as err:
            shutil.rmtree(VENV, ignore_errors=True)  # a half-made .venv would fail every later run
            sys.exit(
                f"Creating {VENV.name}/ failed ({err}). Python's venv module with pip is needed: on "
                "Debian or Ubuntu install it with `sudo apt install python3-venv`, then run this again."
            )
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text().strip() != wanted:
        install(venv_python(), "-e", ".[test]")
        STAMP.write_text(wanted + "\n")
    return venv_python()


def notebook_paths(args: list[str]) -> list[str]:
    """The arguments with notebook paths made absolute: the scripts run from the course root."""
    return [str(Path(arg).resolve()) if Path(arg).is_file() else arg for arg in args]


def lab_command(python: Path, rest: list[str], euid: int | None) -> list[str | Path]:
    """JupyterLab's command line; as root (Docker, WSL, cloud shells) JupyterLab needs --allow-root."""
    command: list[str | Path] = [python, "-m", "jupyterlab", *(rest or ["notebooks/00_start_here.ipynb"])]
    if euid == 0 and "--allow-root" not in rest:
        print("Running as root: starting JupyterLab with --allow-root.", flush=True)
        command.append("--allow-root")
    return command


def lab(python: Path, args: list[str]) -> int:
    """Open the course in JupyterLab, at notebook 00 or at the NOTEBOOKs given."""
    euid = os.geteuid() if hasattr(os, "geteuid") else None  # Windows has no user ids
    return run(lab_command(python, args, euid))


def test(python: Path, args: list[str]) -> int:
    """Run ruff, then pytest (or the pytest ARGUMENTs given); --torch VERSION, --stress: see README."""
    if args[:1] == ["--stress"]:  # the notebooks that start processes, N rounds, CPUs kept busy
        return run([python, "scripts/stress.py", *args])
    for lint in (["check"], ["format", "--check"]):
        status = run([python, "-m", "ruff", *lint, "."])
        if status != 0:
            print("ruff found problems (above); `ruff check --fix . && ruff format .` fixes most.")
            return status
    return run([python, "-m", "pytest", *args])


def regenerate(python: Path, args: list[str]) -> int:
    """Re-execute every notebook, or the NOTEBOOKs given, and store their outputs."""
    return run([python, "scripts/regenerate.py", *notebook_paths(args)])


def bench(python: Path, args: list[str]) -> int:
    """Time every notebook (or the NOTEBOOKs given) under nbval and measure its peak memory."""
    return run([python, "scripts/benchmark.py", *notebook_paths(args)])


def site(python: Path, args: list[str]) -> int:
    """Build the website from the stored outputs into build/site/html; --serve: serve it on 127.0.0.1."""
    return run([python, "scripts/website.py", *args])


def retarget(python: Path, args: list[str]) -> int:
    """Point every link (Binder, Colab, install lines) at [URL] (a fork), or at pyproject's; --check."""
    return run([python, "scripts/links.py", *args])


COMMANDS: dict[str, Callable[[Path, list[str]], int]] = {
    "lab": lab,
    "test": test,
    "regenerate": regenerate,
    "bench": bench,
    "site": site,
    "retarget": retarget,
}
# Commands that need only the standard library: they run with this Python, before any set-up.
WITHOUT_SETUP = {"retarget"}


def usage() -> str:
    """The list of commands, one line each, from the first line of their docstrings."""
    lines = ["Usage: python3 course.py COMMAND [ARGUMENT ...]", "", "Commands (set-up first, if needed):"]
    for name, command in COMMANDS.items():
        lines.append(f"  {name:<12}{(command.__doc__ or '').splitlines()[0]}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the command that argv names; 2 (with the list of commands) when it names none."""
    if argv and argv[0] in {"help", "-h", "--help"}:
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        unknown = f'"{argv[0]}" is not a command of course.py.\n' if argv else "No command given.\n"
        print(unknown + usage(), file=sys.stderr)
        return 2
    if argv[:2] == ["test", "--torch"]:  # another release, in its own environment: not .venv
        return run([sys.executable, "scripts/torch_matrix.py", *argv[1:]])
    python = Path(sys.executable) if argv[0] in WITHOUT_SETUP else ensure_environment()
    return COMMANDS[argv[0]](python, argv[1:])


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # Ctrl-C while no child runs (creating .venv, say): stop quietly
        sys.exit(128 + signal.SIGINT)
