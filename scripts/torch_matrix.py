"""Test the course against another PyTorch release, in a virtual environment of its own.

    python3 course.py test --torch 2.14.1 [--cuda | --cpu] [--python 3.12] [PYTEST ARGUMENTS ...]

The course's `.venv` keeps the pinned release whose outputs the notebooks store. This creates
`.venv-torch-2.14.1/` beside it (`-cuda` or `-cpu` added when a build is asked for), installs
the course's requirements from pyproject.toml with `torch==2.14.1` in place of the pin, then
runs what `python3 course.py test` runs: ruff and pytest (all tests, or the arguments given).
Without a flag pip picks the build (the CUDA build on Linux); `--cuda` and `--cpu` ask for one
and fail when pip installed the other. `--python 3.12` builds the environment with the
`python3.12` on PATH instead of the Python running this. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

from course_shell import ROOT, env_python, install, lint_and_test, requirements_for_tests

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Request:
    """What to test: a PyTorch release, the build and Python asked for (None: default), pytest's arguments."""

    version: str
    build: str | None
    pytest_args: tuple[str, ...]
    python: str | None = None

    @property
    def env_name(self) -> str:
        """The virtual environment's folder name, beside `.venv`: one per release, build and Python."""
        build = f"-{self.build}" if self.build else ""
        return f".venv-torch-{self.version}{build}" + (f"-py{self.python}" if self.python else "")


def release(text: str) -> str:
    """A full release number such as 2.14.1 (argparse's `type`)."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a full release number; pass one such as 2.14.1")
    return text


def minor_python(text: str) -> str:
    """A Python minor version such as 3.12 (argparse's `type`)."""
    if not re.fullmatch(r"3\.\d+", text):
        raise argparse.ArgumentTypeError(f"pass --python a minor version such as 3.12, not {text!r}")
    return text


def parser() -> argparse.ArgumentParser:
    """`--torch VERSION [--cuda | --cpu] [--python X.Y]`; every other argument is pytest's."""
    parser = argparse.ArgumentParser(
        prog="python3 course.py test",
        usage="python3 course.py test --torch VERSION [--cuda | --cpu] [--python X.Y] [PYTEST ARGUMENT ...]",
        description="Test the course against another PyTorch release, in .venv-torch-VERSION/ beside .venv.",
        epilog="Any other argument goes to pytest, as for `python3 course.py test`.",
        allow_abbrev=False,  # pytest's --py... must not become --python
    )
    parser.add_argument("--torch", type=release, required=True, metavar="VERSION", help="e.g. 2.14.1")
    builds = parser.add_mutually_exclusive_group()
    builds.add_argument("--cuda", dest="build", action="store_const", const="cuda", help="the CUDA build")
    builds.add_argument("--cpu", dest="build", action="store_const", const="cpu", help="the CPU-only build")
    parser.add_argument(
        "--python", type=minor_python, metavar="X.Y", help="build the environment with pythonX.Y"
    )
    return parser


def parse(argv: list[str]) -> Request:
    """Read `--torch VERSION [--cuda|--cpu] [--python X.Y] [PYTEST ARGS]`; exits 2 saying what to pass."""
    options, pytest_args = parser().parse_known_args(argv)
    return Request(options.torch, options.build, tuple(pytest_args), options.python)


def requirements(request: Request, pyproject: Path) -> list[str]:
    """pip's arguments: the course's requirements (with the test extra), the pinned torch replaced."""
    project = tomllib.loads(pyproject.read_text())["project"]
    others = [req for req in project["dependencies"] if not re.match(r"torch\s*[=<>!~;\[]", req)]
    if len(others) != len(project["dependencies"]) - 1:
        raise ValueError(f"Expected one torch requirement in {pyproject}; found {project['dependencies']}.")
    torch = f"torch=={request.version}" + ("+cpu" if request.build == "cpu" else "")
    index = ["--extra-index-url", CPU_INDEX] if request.build == "cpu" else []
    return [*index, torch, *others, *requirements_for_tests(project)]


def ensure_env(request: Request, root: Path = ROOT) -> Path:
    """Create the release's environment and install into it unless it is up to date; return its python."""
    env = root / request.env_name
    python = env_python(env)
    made_now = not python.exists()
    if made_now:
        print(f"Creating {env.name}/ ...", flush=True)
        if request.python is None:
            venv.EnvBuilder(with_pip=True).create(env)
        else:
            interpreter = shutil.which(f"python{request.python}")
            if interpreter is None:
                sys.exit(f"No python{request.python} on PATH: install it, or leave out --python.")
            if subprocess.call([interpreter, "-m", "venv", str(env)]) != 0:
                shutil.rmtree(env, ignore_errors=True)  # no half-made environment for the next run
                sys.exit(
                    f"{interpreter} could not create {env.name}/ (its message is above). With pyenv, "
                    f"name that Python's version in PYENV_VERSION or `pyenv global` first."
                )
        (env / ".gitignore").write_text("*\n")  # never committed, wherever the course is cloned
    reqs = requirements(request, root / "pyproject.toml")
    stamp = env / "course-install.stamp"
    wanted = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != wanted:
        try:
            install(python, *reqs)  # exits with one line that says why, as for .venv
            install(python, "--no-deps", "-e", str(root))
        except BaseException:  # a failed install or Ctrl-C: an environment made now goes, not half-made
            if made_now:
                shutil.rmtree(env, ignore_errors=True)
                print(f"Removed {env.name}/, which this run had created.", file=sys.stderr, flush=True)
            raise
        stamp.write_text(wanted + "\n")
    return python


def check_build(python: Path, request: Request) -> str:
    """Say which torch build is installed; exit when it is not the one asked for."""
    probe = "import torch; print(torch.__version__, torch.version.cuda or 'cpu')"
    version, cuda = subprocess.check_output([str(python), "-c", probe], cwd=ROOT, text=True).split()
    build = "cpu" if cuda == "cpu" else "cuda"
    print(f"Testing PyTorch {version} ({'CPU-only build' if build == 'cpu' else f'CUDA {cuda} build'})")
    if request.build not in (None, build):
        sys.exit(
            f"pip installed the {build} build, not the {request.build} build asked for: a pip "
            "configuration (find-links, extra index) offers it. Run without --cuda/--cpu to test it."
        )
    return build


def main(argv: list[str]) -> int:
    """Set up the release's environment, then run ruff and pytest there."""
    request = parse(argv)
    python = ensure_env(request)
    check_build(python, request)
    return lint_and_test(python, list(request.pytest_args))  # what `python3 course.py test` runs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
