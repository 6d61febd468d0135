"""Set the course up in a runtime that has not got it (Colab, Kaggle, Studio Lab), and the supported range.

Every notebook's first code cell installs `course_utils` alone (`pip install --no-deps SOURCE`:
the course's repository by default, or what `COURSE_SOURCE` names, a wheel file or `course-utils`
from a package index), then runs `python -m course_utils.setup SOURCE`: this module. It keeps
the runtime's PyTorch when that lies in `SUPPORTED_TORCH` (a multi-GB download saved), else
installs the pinned release, adds the course's other requirements, and copies the course's worker
scripts, which travel inside the package, into `./workers`, where notebooks 07, 08 and 09 start
them. Only the standard library is used and torch is never imported here: the torch this module
may replace must not be loaded in the kernel first.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import operator
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

# The PyTorch releases the course supports: every notebook runs and its compared outputs match on
# each. It travels with the installed package; tests/test_torch_range.py checks that it equals
# `[tool.course] supported-torch` in pyproject.toml.
SUPPORTED_TORCH = ">=2.9,<2.16"
DISTRIBUTION = "course-utils"
WORKERS = "workers"  # the folder, beside the notebook, that holds the scripts notebooks start
# Where the installed package keeps them, by the notebook's language (COURSE_LANGUAGE, which the set-up
# cell sets): the Chinese edition's have their comments and docstrings in Chinese, the same code.
PACKAGED_WORKERS = {"en": "workers", "zh-CN": "workers_zh"}
CLONE_WORKERS = {"en": Path("notebooks") / WORKERS, "zh-CN": Path("notebooks") / "zh-CN" / WORKERS}


def _edition() -> str:
    """The notebook's language as the set-up cell set it; English for anything else (i18n, which
    checks it, may not be importable yet: polib comes with the requirements)."""
    chosen = os.environ.get("COURSE_LANGUAGE", "").strip()
    return chosen if chosen in PACKAGED_WORKERS else "en"


def _(message: str) -> str:
    """A message in the notebook's language (course_utils.i18n); English while polib is not installed yet.

    This module runs before the course's requirements are installed, so it imports the translations
    only when it prints, after `install_requirements` brought polib.
    """
    importlib.invalidate_caches()  # polib may have been installed by pip since this process started
    try:
        from course_utils.i18n import translated
    except ImportError:
        return message
    return translated(message)


_COMPARE = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}


def _text(value: object, name: str, example: str) -> None:
    """TypeError naming `name` unless `value` is a str (`example` shows one)."""
    if not isinstance(value, str):
        raise TypeError(
            _("{name} must be a str such as {example}, not {value!r}").format(
                name=name, example=example, value=value
            )
        )


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version: "2.14.1+cu130" -> (2, 14, 1); "2.16.0.dev20260101" -> (2, 16, 0)."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    if found is None:
        raise ValueError(f"{version!r} is not a version; pass one such as torch.__version__ ('2.13.0+cpu').")
    return tuple(int(part) for part in found.group().split("."))


def torch_in_range(version: str, spec: str = SUPPORTED_TORCH) -> bool:
    """Whether a PyTorch version lies in a range such as ">=2.9,<2.16" (local labels like +cpu ignored)."""
    _text(version, "version", "torch.__version__ ('2.13.0+cpu')")
    _text(spec, "spec", "'>=2.9,<2.16'")
    have = _release(version)
    for clause in spec.split(","):
        found = re.fullmatch(r"\s*(>=|<=|==|>|<)\s*(\d+(?:\.\d+)*)\s*", clause)
        if found is None:
            raise ValueError(f"Cannot read {clause!r} in the range {spec!r}; write it like '>=2.9,<2.16'.")
        bound = _release(found.group(2))
        width = max(len(have), len(bound))
        padded = have + (0,) * (width - len(have)), bound + (0,) * (width - len(bound))
        if not _COMPARE[found.group(1)](*padded):
            return False
    return True


def course_requirements(requires: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the torch requirement, the others) among an installed course's requirements, extras left out."""
    if isinstance(requires, str) or not all(isinstance(r, str) for r in requires):
        raise TypeError(
            _(
                "requires must be a list of requirement strings such as ['torch>=2.9'], not {requires!r}"
            ).format(requires=requires)
        )
    torch, others = None, []
    for requirement in requires:
        if "extra ==" in requirement:
            continue
        if re.split(r"[\s=<>!~;(\[]", requirement, maxsplit=1)[0].lower() == "torch":
            torch = requirement
        else:
            others.append(requirement)
    return torch, others


def pip_install(*args: str) -> None:
    """Run pip in this Python; stop with what to do if it fails."""
    status = subprocess.call([sys.executable, "-m", "pip", "install", "--quiet", *args])
    if status != 0:
        raise RuntimeError(
            _(
                "pip install {arguments} failed (exit status {status}; its messages are above). "
                "The runtime needs internet access (on Kaggle: turn Internet on in the notebook's settings)."
            ).format(arguments=" ".join(args), status=status)
        )


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_requirements(install: Callable[..., None] = pip_install) -> str:
    """Install what the course needs beside itself; keep a torch in the supported range. Say what was done."""
    if not callable(install):
        raise TypeError(
            _("install must be a function that installs requirements (pip_install), not {install!r}").format(
                install=install
            )
        )
    torch_requirement, others = course_requirements(importlib.metadata.requires(DISTRIBUTION) or [])
    have = _installed("torch")
    keep = have is not None and torch_in_range(have)
    pinned = torch_requirement or f"torch{SUPPORTED_TORCH}"
    wanted = others if keep else [pinned, *others]
    if wanted:
        install(*wanted)
    if keep:  # said after the install, which brings the translations' reader (polib)
        return _("kept this runtime's torch {version} (in the supported range {spec})").format(
            version=have, spec=SUPPORTED_TORCH
        )
    if have is None:
        found = _("no torch found")
    else:
        found = _("torch {version} is outside the supported range {spec}").format(
            version=have, spec=SUPPORTED_TORCH
        )
    return _("{found}: installed {pinned}").format(found=found, pinned=pinned)


def packaged_workers() -> Path:
    """The worker scripts inside the installed package in the notebook's language: course_utils/workers/
    (from notebooks/workers/), or course_utils/workers_zh/ (from notebooks/zh-CN/workers/)."""
    return Path(__file__).resolve().parent / PACKAGED_WORKERS[_edition()]


def fetch_workers(source: str, folder: Path, packaged: Path | None = None) -> str:
    """Put the course's worker scripts into `folder/workers` unless they are there; say what was done.

    They come from the installed package, so nothing is downloaded; an editable install from a
    clone has none there, and `source` (the clone's folder) holds them in notebooks/workers (the
    Chinese notebooks': notebooks/zh-CN/workers).
    """
    if not isinstance(source, str | os.PathLike):
        _text(source, "source", "'git+https://github.com/OWNER/NAME' or a folder")
    if not isinstance(folder, str | os.PathLike):
        raise TypeError(
            _("folder must be a folder's path, such as Path.cwd(), not {folder!r}").format(folder=folder)
        )
    destination = Path(folder) / WORKERS
    if destination.is_dir() and any(destination.glob("*.py")):
        return _("worker scripts already in {folder}").format(folder=destination)
    for found in (packaged or packaged_workers(), Path(source) / CLONE_WORKERS[_edition()]):
        if found.is_dir() and any(found.glob("*.py")):
            shutil.copytree(found, destination, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
            return _("copied the worker scripts to {folder}").format(folder=destination)
    raise RuntimeError(
        _(
            "The installed course_utils has no worker scripts ({folder} is missing): install the course "
            "again from its repository, a wheel file or a package index that has this version."
        ).format(folder=packaged or packaged_workers())
    )


def prepare_runtime(
    source: str, folder: Path | None = None, install: Callable[..., None] = pip_install
) -> None:
    """The set-up cell's second step, after `pip install --no-deps SOURCE`: requirements, then workers.

    A source that is not a text (a folder, a wheel file, a pip requirement) is refused before anything
    is installed.
    """
    if not isinstance(source, str | os.PathLike):
        _text(source, "source", "'git+https://github.com/OWNER/NAME', a wheel file or a folder")
    done = [install_requirements(install), fetch_workers(source, Path.cwd() if folder is None else folder)]
    print(_("Installed the course from {source}: {done}.").format(source=source, done=_("; ").join(done)))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: `python -m course_utils.setup SOURCE`, as the notebooks' set-up cell runs it."""
    if isinstance(argv, str):  # its characters would be read as arguments
        raise TypeError(
            _("argv must be a list of arguments such as [SOURCE], not the str {argv!r}").format(argv=argv)
        )
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.setup", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "source", help="where the course was installed from: git+https://github.com/O/N, a wheel, a folder"
    )
    args = parser.parse_args(argv)
    try:
        prepare_runtime(args.source)
    except (RuntimeError, ValueError, OSError) as err:
        print(_("error: {error}").format(error=err), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
