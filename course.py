#!/usr/bin/env python3
"""One entry point for the course: set up, open, test, regenerate and benchmark.

Usage: python3 course.py COMMAND [ARGUMENT ...]; `python3 course.py help` lists the commands.

Set-up means: create the virtual environment `.venv` beside this file if it is missing and
install the course (`pip install -e ".[test]"`) whenever `pyproject.toml` changed since the
last install. Only the standard library is used here, so any Python 3.11+ can run it.

Every command runs its work in a child process and behaves like that program run directly:
Ctrl-C goes to the child alone (JupyterLab's "Shut down this Jupyter server?" question
included), a SIGINT or SIGTERM sent to this script alone is passed on to the child (an IDE's
stop button), and the exit status is the child's (128 + N when signal N ended it, as a shell
shows it). `test` runs several children (ruff, then pytest): a Ctrl-C at any moment stops it
with 130 and one line saying what it stopped, even if the child it reached still succeeded.
What this script shares with the scripts it starts is in `scripts/course_shell.py`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))
import course_shell  # noqa: E402
from course_shell import (  # noqa: E402
    CHINESE,
    cli,
    env_python,
    exit_status,
    install,
    lint_and_test,
    pytest_workers,
    requirement_name,
    requirements_for_tests,
    run,
    say,
)

VENV = ROOT / ".venv"
# The language of course.py's own messages: `--language zh-CN` first, else COURSE_LANGUAGE or the locale.
LANGUAGE_FLAG = "--language"
LANGUAGES = ("en", CHINESE)
STAMP = VENV / "course-install.stamp"


def venv_python() -> Path:
    """Path of the Python interpreter inside the course's virtual environment."""
    return env_python(VENV)


def ensure_environment() -> Path:
    """Create `.venv` and install the course into it unless it is already up to date."""
    if sys.version_info < (3, 11):  # noqa: UP036 - an older python3 may start this script
        sys.exit(
            say("The course needs Python 3.11 or newer; this is {version}.").format(
                version=sys.version.split()[0]
            )
        )
    if not venv_python().exists():
        print(say("Creating the virtual environment {name}/ ...").format(name=VENV.name), flush=True)
        made_now = not VENV.exists()  # a .venv/ of the user's without a Python is never removed
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except (OSError, subprocess.CalledProcessError) as err:
            if made_now:  # a half-made .venv would fail every later run
                shutil.rmtree(VENV, ignore_errors=True)
            sys.exit(
                say(
                    "Creating {name}/ failed ({error}). Python's venv module with pip is needed: on Debian "
                    "or Ubuntu install it with `sudo apt install python3-venv`, then run this again."
                ).format(name=VENV.name, error=err)
            )
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text().strip() != wanted:
        install(venv_python(), "-e", ".[test]")
        STAMP.write_text(wanted + "\n")
    return venv_python()


def notebook_paths(args: list[str]) -> list[str]:
    """The arguments with notebook paths made absolute: the scripts run from the course root."""
    return [str(Path(arg).resolve()) if Path(arg).is_file() else arg for arg in args]


FIRST_NOTEBOOK = "notebooks/00_start_here.ipynb"
LAB_HELP = f"""\
usage: python3 course.py lab [NOTEBOOK ...] [JUPYTERLAB OPTION ...]

Set up .venv if needed (the first time: a few minutes), then open the course in JupyterLab at
notebook 00 ({FIRST_NOTEBOOK}), or at the NOTEBOOKs given. Every other argument goes to
JupyterLab, and notebook 00 still opens unless a notebook is named:
  --no-browser                print the address instead of opening a browser
  --port N                    serve on port N (default: the first free one from 8888)
  --ServerApp.ip=127.0.0.1    the address to listen on (JupyterLab's default: localhost)
As root (Docker, WSL, cloud shells) --allow-root is added. JupyterLab's own options, once the
course is set up: .venv/bin/jupyter lab --help
"""


def lab_command(python: Path, rest: list[str], euid: int | None) -> list[str]:
    """JupyterLab's command line, as the student's command builds it: notebook 00 unless an argument
    names a notebook or folder to open (options alone keep it), --allow-root as root."""
    opens_a_path = any(not arg.startswith("-") and (ROOT / arg).exists() for arg in rest)
    command = cli.jupyterlab_command(python, rest, None if opens_a_path else FIRST_NOTEBOOK, euid)
    if command[-1] == "--allow-root" and "--allow-root" not in rest:
        print(say(cli.ROOT_NOTE), flush=True)
    return command


def lab(python: Path, args: list[str]) -> int:
    """Open the course in JupyterLab, at notebook 00 or at the NOTEBOOKs given."""
    euid = os.geteuid() if hasattr(os, "geteuid") else None  # Windows has no user ids
    return run(lab_command(python, notebook_paths(args), euid))


TEST_HELP = f"""\
Run ruff, then pytest: every unit test and every notebook under strict nbval, or the pytest
ARGUMENTs given (paths, -k EXPR, -x, ...: any argument not listed below goes to pytest).

pytest runs in parallel with pytest-xdist, one worker more than this machine's CPUs ({pytest_workers()}
here: part of the time a test waits rather than computes): each notebook's cells in order in one
worker, the unit tests spread module by module.
  -n 0                        run serially, in one process (for debugging: --pdb, -s, print())
  -n N                        N workers instead

Instead of the course's own .venv:
  --here                      test the Python running this command (a conda env, a lab server's
                              venv, a GPU machine, Colab) as it is: no .venv is made; it says what
                              it found and, where a test dependency is missing, the pip line
  --torch VERSION [--cuda|--cpu] [--python X.Y]
                              another PyTorch release, in .venv-torch-VERSION/ (docs/instructors.md)
  --stress [--rounds N]       the notebooks that start processes, N rounds (default 3), in
                              parallel, with every CPU kept busy
"""


def test_parser() -> argparse.ArgumentParser:
    """`course.py test`'s own options; everything else is pytest's."""
    parser = argparse.ArgumentParser(
        prog="python3 course.py test",
        usage="python3 course.py test [--here | --torch VERSION ... | --stress ...] [PYTEST ARGUMENT ...]",
        description=TEST_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # --py must reach pytest, not become --python
        add_help=False,
    )
    parser.add_argument("-h", "--help", action="store_true")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--here", action="store_true")
    modes.add_argument("--torch", metavar="VERSION")
    modes.add_argument("--stress", action="store_true")
    return parser


def test(python: Path, args: list[str]) -> int:
    """Run ruff, then pytest in parallel (`-n 0`: serially); --here, --torch VERSION, --stress: see --help."""
    if "--stress" in args:  # the notebooks that start processes, N rounds, CPUs kept busy
        return run([python, "scripts/stress.py", *(a for a in args if a != "--stress")])
    return lint_and_test(python, args)


# Run in the Python to be tested: what it has, as JSON. torch (and CUDA) start here, not in course.py.
PROBE = r"""
import importlib.metadata, importlib.util, json, sys
found = {"python": sys.version.split()[0], "missing": [], "course_utils": None}
for name in json.loads(sys.argv[1]):
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        found["missing"].append(name)
spec = importlib.util.find_spec("course_utils")
found["course_utils"] = spec.origin if spec else None
try:
    import torch
except ImportError:
    found["torch"] = None
else:
    found["torch"] = torch.__version__
    found["build"] = (
        f"CUDA {torch.version.cuda}" if torch.version.cuda
        else f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None) else "CPU-only"
    )
    count = torch.cuda.device_count()
    found["devices"] = [torch.cuda.get_device_name(i) for i in range(count)]
print(json.dumps(found))
"""


def here_requirements(pyproject: Path) -> list[str]:
    """What the tests need besides torch and ruff: the course's requirements and its test extra."""
    project = tomllib.loads(pyproject.read_text())["project"]
    wanted = [*project["dependencies"], *requirements_for_tests(project)]
    return [r for r in wanted if requirement_name(r) not in ("torch", "ruff")]


def describe_here(found: dict) -> list[str]:
    """What `--here` found, one line each: the Python, torch and its build, the CUDA devices."""
    lines = [f"Python {found['python']} ({sys.executable})"]
    if found.get("torch") is None:
        return [*lines, "PyTorch: not installed"]
    lines.append(f"PyTorch {found['torch']}, {found['build']} build")
    devices = found["devices"]
    lines.append(
        f"CUDA devices: {len(devices)}: " + ", ".join(f"{i}: {name}" for i, name in enumerate(devices))
        if devices
        else "CUDA devices: none (the notebooks take their CPU path)"
    )
    return lines


def missing_here(found: dict, requirements: list[str], python: str) -> list[str]:
    """The commands that install what the tests need and the Python at `python` lacks (none: ready)."""
    commands = []
    if found.get("torch") is None:
        commands.append(f"{python} -m pip install torch   # or the build your platform needs")
    lacking = [r for r in requirements if requirement_name(r) in found["missing"]]
    if lacking:
        commands.append(f"{python} -m pip install " + " ".join(shlex.quote(r) for r in lacking))
    origin = found.get("course_utils")
    if origin is None or not Path(origin).resolve().is_relative_to(ROOT / "src"):
        commands.append(f"{python} -m pip install --no-deps -e {shlex.quote(str(ROOT))}")
    return commands


def test_here(args: list[str]) -> int:
    """`test --here`: say what this Python offers, name what it lacks and stop, or run the tests in it."""
    python = sys.executable
    requirements = here_requirements(ROOT / "pyproject.toml")
    names = json.dumps([requirement_name(r) for r in requirements])
    probe = subprocess.run([python, "-c", PROBE, names], cwd=ROOT, capture_output=True, text=True)
    if probe.returncode != 0:
        print(probe.stderr, end="", file=sys.stderr)
        print(f"Could not inspect {python} (above).", file=sys.stderr)
        return 1
    found = json.loads(probe.stdout.splitlines()[-1])
    print("Testing the Python that runs this command, as it is (no .venv):")
    print("\n".join("  " + line for line in describe_here(found)), flush=True)
    commands = missing_here(found, requirements, python)
    if commands:
        print(
            "This Python lacks what the tests need. Install it with the line(s) below (they leave "
            "its torch as it is), or test in .venv with `python3 course.py test`:",
            file=sys.stderr,
        )
        print("\n".join("  " + c for c in commands), file=sys.stderr)
        return 1
    print("ruff is not run: the code's style does not depend on the environment.", flush=True)
    return lint_and_test(python, args, lint=False)


def regenerate(python: Path, args: list[str]) -> int:
    """Re-execute every notebook, or the NOTEBOOKs given, and store their outputs."""
    return run([python, "scripts/regenerate.py", *notebook_paths(args)])


def bench(python: Path, args: list[str]) -> int:
    """Measure the notebooks, the suite and the whole test against the course's budgets."""
    return run([python, "scripts/benchmark.py", *folder_paths(args)])


def site(python: Path, args: list[str]) -> int:
    """Build the website from the stored outputs into build/site/html; --serve: serve it on 127.0.0.1."""
    return run([python, "scripts/website.py", *folder_paths(args)])


def bundle(python: Path, args: list[str]) -> int:
    """Write one .zip for an offline classroom: the course's wheel and every wheel it needs (--help)."""
    return run([python, "scripts/bundle.py", *folder_paths(args)])


def grade(python: Path, args: list[str]) -> int:
    """Grade students' notebooks with the course's checks, each in a sandbox: a CSV and an HTML page."""
    paths = [
        str(Path(arg).resolve()) if not arg.startswith("-") and Path(arg).exists() else arg
        for arg in folder_paths(args)
    ]
    language = ["--language", course_shell.chosen_language] if course_shell.chosen_language else []
    return run([python, "scripts/grade.py", *language, *paths])


def format_notebooks(python: Path, args: list[str]) -> int:
    """Format the notebooks' code, both editions, to the width the website shows; --check lists the rest."""
    return run([python, "scripts/format_cells.py", *args])


def translate(python: Path, args: list[str]) -> int:
    """Keep the Chinese edition in step: `update` the .po files, `build` its notebooks, or `check` them."""
    return run([python, "scripts/translations.py", *args])


def retarget(python: Path, args: list[str]) -> int:
    """Point every link (Binder, Colab, install lines) at [URL] (a fork), or at pyproject's; --check."""
    return run([python, "scripts/links.py", *args])


FOLDER_OPTIONS = ("--out", "--wheels", "--docs", "--json", "--markdown", "--replay")


def folder_paths(args: list[str]) -> list[str]:
    """The arguments with the paths of FOLDER_OPTIONS (`--out DIR` or `--out=DIR`, a bench's files) and
    `gpu report`'s DIR made absolute against the working folder: the scripts run from the course root."""
    folders, previous = [], None
    for arg in args:
        option, equals, value = arg.partition("=")
        if equals and option in FOLDER_OPTIONS:
            folders.append(f"{option}={Path(value).resolve()}")
        elif previous in FOLDER_OPTIONS or (previous == "report" and not arg.startswith("-")):
            folders.append(str(Path(arg).resolve()))
        else:
            folders.append(arg)
        previous = arg
    return notebook_paths(folders)


def gpu(python: Path, args: list[str]) -> int:
    """The GPU lane: `prepare` the wheels here, `run` the course on a GPU machine, `report` the run."""
    if args[:1] == ["prepare"] and not wants_help(args):  # pip in .venv; `run` uses the GPU machine's
        python = ensure_environment()  # own Python and torch
    return run([python, "scripts/gpu_lane.py", *folder_paths(args)])


COMMANDS: dict[str, Callable[[Path, list[str]], int]] = {
    "lab": lab,
    "test": test,
    "regenerate": regenerate,
    "bench": bench,
    "site": site,
    "bundle": bundle,
    "grade": grade,
    "format": format_notebooks,
    "translate": translate,
    "retarget": retarget,
    "gpu": gpu,
}
# Commands that need only the standard library: they run with this Python, before any set-up.
WITHOUT_SETUP = {"retarget", "gpu"}
# Commands whose scripts answer --help with the standard library alone: run by this Python for it.
SCRIPT_HELP = {"site", "bundle", "grade", "retarget", "gpu"}


def wants_help(args: list[str]) -> bool:
    """Whether the arguments ask for help (-h or --help before any `--`)."""
    before = args[: args.index("--")] if "--" in args else args
    return any(arg in {"-h", "--help"} for arg in before)


def command_help(command: str) -> str | None:
    """`course.py COMMAND --help`'s text where course.py itself prints it, at once and without set-up;
    None where the command's script prints its own (SCRIPT_HELP)."""
    if command == "lab":
        return LAB_HELP
    if command == "test":
        return test_parser().format_usage() + "\n" + TEST_HELP
    if command in SCRIPT_HELP:
        return None
    import command_help as parsers  # scripts/, standard library only

    return parsers.command_parser(command).format_help()


def usage() -> str:
    """The list of commands, one line each, from the first line of their docstrings."""
    lines = [
        "Usage: python3 course.py [--language zh-CN] COMMAND [ARGUMENT ...]",
        "",
        "Commands (set-up first, if needed):",
    ]
    for name, command in COMMANDS.items():
        lines.append(f"  {name:<12}{(command.__doc__ or '').splitlines()[0]}")
    lines += ["", "`python3 course.py COMMAND --help` says more about one command."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the command that argv names; 2 (with the list of commands) when it names none."""
    if argv and argv[0].startswith(LANGUAGE_FLAG):
        flag, _, value = argv[0].partition("=")
        if flag == LANGUAGE_FLAG:
            if not value:
                value, argv = (argv[1] if len(argv) > 1 else ""), argv[1:]
            if value not in LANGUAGES:
                print(
                    say("{flag} takes a language: {languages}.").format(
                        flag=flag, languages=", ".join(LANGUAGES)
                    ),
                    file=sys.stderr,
                )
                return 2
            course_shell.chosen_language = value
            argv = argv[1:]
    command, args = (argv[0], argv[1:]) if argv else (None, [])
    if command in {"help", "-h", "--help"}:
        print(usage())
        return 0
    if command not in COMMANDS:
        unknown = (
            say('"{command}" is not a command of course.py.').format(command=command)
            if command
            else say("No command given.")
        )
        unknown += "\n"
        print(unknown + usage(), file=sys.stderr)
        return 2
    if wants_help(args):  # at once, before any set-up: nothing is installed to answer it
        text = command_help(command)
        if text is not None:
            print(text, end="")
            return 0
        return COMMANDS[command](Path(sys.executable), args)
    if command == "test":
        options, _ = test_parser().parse_known_args(args)
        if options.here:
            return test_here([a for a in args if a != "--here"])
        if options.torch is not None:  # another release, in its own environment: not .venv
            return run([sys.executable, "scripts/torch_matrix.py", *args])
    python = Path(sys.executable) if command in WITHOUT_SETUP else ensure_environment()
    return COMMANDS[command](python, args)


if __name__ == "__main__":
    sys.exit(exit_status(main, sys.argv[1:]))  # Ctrl-C: 130 and one line saying what it stopped
