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

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import course  # noqa: E402 - the course's own way to install, run a child and test

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
USAGE = "usage: python3 course.py test --torch VERSION [--cuda | --cpu] [--python X.Y] [PYTEST ARGUMENTS ...]"


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


def parse(argv: list[str]) -> Request:
    """Read `--torch VERSION [--cuda|--cpu] [--python X.Y] [PYTEST ARGS]`; ValueError says what to pass."""
    if len(argv) < 2 or argv[0] != "--torch":
        raise ValueError(f"Name the PyTorch release to test. {USAGE}")
    version, rest = argv[1], argv[2:]
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ValueError(f"{version!r} is not a full release number; pass one such as 2.14.1. {USAGE}")
    python = None
    if "--python" in rest:
        at = rest.index("--python")
        python = rest[at + 1] if at + 1 < len(rest) else ""
        if not re.fullmatch(r"3\.\d+", python):
            raise ValueError(f"Pass --python a minor version such as 3.12, not {python!r}. {USAGE}")
        rest = rest[:at] + rest[at + 2 :]
    builds = [arg[2:] for arg in rest if arg in ("--cuda", "--cpu")]
    if len(builds) > 1:
        raise ValueError(f"Ask for one build, --cuda or --cpu, not both. {USAGE}")
    pytest_args = tuple(arg for arg in rest if arg not in ("--cuda", "--cpu"))
    return Request(version, builds[0] if builds else None, pytest_args, python)


def requirements(request: Request, pyproject: Path) -> list[str]:
    """pip's arguments: the course's requirements (with the test extra), the pinned torch replaced."""
    project = tomllib.loads(pyproject.read_text())["project"]
    others = [req for req in project["dependencies"] if not re.match(r"torch\s*[=<>!~;\[]", req)]
    if len(others) != len(project["dependencies"]) - 1:
        raise ValueError(f"Expected one torch requirement in {pyproject}; found {project['dependencies']}.")
    torch = f"torch=={request.version}" + ("+cpu" if request.build == "cpu" else "")
    index = ["--extra-index-url", CPU_INDEX] if request.build == "cpu" else []
    return [*index, torch, *others, *requirements_for_tests(project)]


def requirements_for_tests(project: dict) -> list[str]:
    """The test extra's requirements, the course's own extras it names (`course-utils[site]`) spelt out."""
    extras, wanted = project["optional-dependencies"], []
    for requirement in extras["test"]:
        own = re.fullmatch(rf"{re.escape(project['name'])}\[([\w,\s-]+)\]", requirement)
        wanted += [r for extra in own[1].split(",") for r in extras[extra.strip()]] if own else [requirement]
    return wanted


def env_python(env: Path) -> Path:
    """The interpreter inside a virtual environment."""
    return env / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def ensure_env(request: Request, root: Path = ROOT) -> Path:
    """Create the release's environment and install into it unless it is up to date; return its python."""
    env = root / request.env_name
    python = env_python(env)
    if not python.exists():
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
        course.install(python, *reqs)  # exits with one line that says why, as for .venv
        course.install(python, "--no-deps", "-e", ".")
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
    try:
        request = parse(argv)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    python = ensure_env(request)
    check_build(python, request)
    return course.test(python, list(request.pytest_args))  # what `python3 course.py test` runs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
