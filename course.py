#!/usr/bin/env python3
"""One entry point for the course: set up, open, test, regenerate and benchmark.

    python3 course.py lab          set up (if needed) and open the course in JupyterLab
    python3 course.py test         set up (if needed) and run every test: ruff, unit tests,
                                   every notebook under strict nbval
    python3 course.py test --torch VERSION [--cuda|--cpu] [PYTEST ARGS]
                                   the same tests against another PyTorch release, in its own
                                   environment .venv-torch-VERSION/ (scripts/torch_matrix.py)
    python3 course.py test --stress [--rounds N]
                                   the notebooks that start processes, N times (default 3),
                                   while the CPUs are kept busy (scripts/stress.py)
    python3 course.py regenerate [NOTEBOOK ...]
                                   re-execute notebooks top to bottom and store their outputs
    python3 course.py bench        time every notebook under nbval and measure its peak memory

Set-up means: create the virtual environment `.venv` beside this file if it is missing and
install the course (`pip install -e ".[test]"`) whenever `pyproject.toml` changed since the
last install. Only the standard library is used here, so any Python 3.11+ can run it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / "course-install.stamp"


def venv_python() -> Path:
    """Path of the Python interpreter inside the course's virtual environment."""
    sub = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    return VENV / sub


def run(cmd: list[str | Path], **kwargs: object) -> int:
    """Run a command from the course root, echoing it first; return its exit status."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kwargs)


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
        status = run([venv_python(), "-m", "pip", "install", "--quiet", "-e", ".[test]"])
        if status != 0:
            sys.exit(f"Installing the course failed (pip exit status {status}); see above.")
        STAMP.write_text(wanted + "\n")
    return venv_python()


def main(argv: list[str]) -> int:
    commands = {"lab", "test", "regenerate", "bench"}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "test" and rest[:1] == ["--torch"]:
        return run([sys.executable, "scripts/torch_matrix.py", *rest])
    python = ensure_environment()
    if command == "test" and rest[:1] == ["--stress"]:
        return run([python, "scripts/stress.py", *rest])
    if command == "lab":
        start = rest or ["notebooks/00_start_here.ipynb"]
        return run([python, "-m", "jupyterlab", *start])
    if command == "test":
        for lint in (["check"], ["format", "--check"]):
            status = run([python, "-m", "ruff", *lint, "."])
            if status != 0:
                print("ruff found problems (above); `ruff check --fix . && ruff format .` fixes most.")
                return status
        return run([python, "-m", "pytest", *rest])
    # The scripts run from the course root: a notebook path given from elsewhere is made absolute.
    rest = [str(Path(arg).resolve()) if Path(arg).is_file() else arg for arg in rest]
    if command == "regenerate":
        return run([python, "scripts/regenerate.py", *rest])
    return run([python, "scripts/benchmark.py", *rest])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
