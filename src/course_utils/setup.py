"""Set the course up in a runtime that has not got it (Colab, Kaggle, Studio Lab), and the supported range.

Every notebook's set-up cell, the code cell right under its title, installs the course alone by its
name from the runtime's package index (`%pip install --no-deps pytorch-on-gpus-hands-on`, or what
`COURSE_SOURCE` names: a wheel file, another requirement), then runs this module in the kernel
(`%run -m course_utils.setup`). It keeps the runtime's PyTorch when that lies in `SUPPORTED_TORCH`
(a multi-GB download saved), else installs the pinned release, adds the course's other
requirements, and copies the notebook's edition's worker scripts (which notebooks 07-09 start) and
solutions, which travel inside the package, into `./workers` and `./solutions`, never over a file
that is there. Only the standard library is used and torch is never imported here: the torch this
module may replace must not be loaded in the kernel first.
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

from course_utils.cli import EDITION_FOLDERS, PACKAGE, Unavailable, course_files, course_locations

# The PyTorch releases the course supports: every notebook runs and its compared outputs match on
# each. It travels with the installed package; tests/test_torch_range.py checks that it equals
# `[tool.course] supported-torch` in pyproject.toml.
SUPPORTED_TORCH = ">=2.9,<2.16"
DISTRIBUTION = "pytorch-on-gpus-hands-on"
SOURCE_VARIABLE = "COURSE_SOURCE"  # what the set-up cell installs instead of DISTRIBUTION, where set
# The folders, beside the notebook, that the set-up fills from the package: the scripts notebooks
# start, and the exercises' solutions. Each edition has its own (COURSE_LANGUAGE, which the set-up
# cell sets): the Chinese ones have their comments and docstrings in Chinese, the same code.
BESIDE = ("workers", "solutions")


def _edition() -> str:
    """The notebook's language as the set-up cell set it; English for anything else (i18n, which
    checks it, may not be importable yet: polib comes with the requirements)."""
    chosen = os.environ.get("COURSE_LANGUAGE", "").strip()
    return chosen if chosen in EDITION_FOLDERS else "en"


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


def _no_nul(value: str | os.PathLike[str], name: str) -> str:
    """`value` as a str, or a ValueError naming `name` when it is empty or holds a NUL character,
    which no path or pip argument can carry."""
    written = os.fspath(value)
    if not written or "\0" in written:
        raise ValueError(
            _("{name} must be a non-empty path or address without NUL characters, not {value!r}").format(
                name=name, value=written
            )
        )
    return written


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version: "2.14.1+cu130" -> (2, 14, 1); "2.16.0.dev20260101" -> (2, 16, 0)."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    if found is None:
        raise ValueError(
            f"version {version!r} is not a version; pass one such as torch.__version__ ('2.13.0+cpu')."
        )
    return tuple(int(part) for part in found.group().split("."))


def torch_in_range(version: str, spec: str = SUPPORTED_TORCH) -> bool:
    """Whether a PyTorch version lies in a range such as ">=2.9,<2.16" (local labels like +cpu ignored)."""
    _text(version, "version", "torch.__version__ ('2.13.0+cpu')")
    _text(spec, "spec", "'>=2.9,<2.16'")
    have = _release(version)
    for clause in spec.split(","):
        found = re.fullmatch(r"\s*(>=|<=|==|>|<)\s*(\d+(?:\.\d+)*)\s*", clause)
        if found is None:
            raise ValueError(
                f"spec: cannot read {clause!r} in the range {spec!r}; write it like '>=2.9,<2.16'."
            )
        bound = _release(found.group(2))
        width = max(len(have), len(bound))
        padded = have + (0,) * (width - len(have)), bound + (0,) * (width - len(bound))
        if not _COMPARE[found.group(1)](*padded):
            return False
    return True


def course_requirements(requires: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the torch requirement, the others) among an installed course's requirements, extras left out."""
    if (
        isinstance(requires, str)
        or not isinstance(requires, Sequence)
        or not all(isinstance(r, str) for r in requires)
    ):
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


def installed_from() -> str:
    """What the set-up cell installed the course from: `COURSE_SOURCE` where the runtime sets it, else
    the course's name, which pip looks up on the runtime's package index."""
    return os.environ.get(SOURCE_VARIABLE, DISTRIBUTION)


def _folder(value: object, name: str) -> Path:
    """`value` as a Path, or an error naming `name` unless it is a folder's path (str or PathLike)."""
    if not isinstance(value, str | os.PathLike):
        raise TypeError(
            _("{name} must be a folder's path, such as Path.cwd(), not {folder!r}").format(
                name=name, folder=value
            )
        )
    return Path(_no_nul(value, name))


def files_beside(package: Path | None = None) -> dict[str, Path]:
    """The notebook's edition's worker scripts and solutions by their place beside the notebook
    ("workers/train_ddp.py", "solutions/05_data_parallel.py"), each the file of the installed course
    (`package`, course_utils's folder) it comes from.

    An installed package carries them (course_utils/course/, workers/, workers_zh/); an editable
    install from a clone takes them from the clone's notebooks/ (course_utils.cli finds either).
    """
    package = PACKAGE if package is None else _folder(package, "package")
    try:
        files = course_files(*course_locations(package))
    except Unavailable:
        files = {}
    prefix = EDITION_FOLDERS[_edition()]
    found = {
        place.removeprefix(prefix): source
        for place, source in files.items()
        if place.startswith(prefix) and place.removeprefix(prefix).split("/")[0] in BESIDE
    }
    if not all(any(place.startswith(f"{name}/") for place in found) for name in BESIDE):
        raise RuntimeError(
            _(
                "The installed course_utils ({package}) has no worker scripts or no solutions: install the "
                "course again (pip install --force-reinstall --no-deps {distribution}) from a package "
                "index or a wheel file that has this version."
            ).format(package=package, distribution=DISTRIBUTION)
        )
    return found


def copy_beside(folder: Path, package: Path | None = None) -> str:
    """Copy the worker scripts and the solutions into `folder`/workers and `folder`/solutions, each file
    that is not there yet: one that is, the student's or an earlier copy, is kept. Say what was done."""
    folder = _folder(folder, "folder")
    copied, kept = 0, 0
    for place, source in files_beside(package).items():
        target = folder / place
        if os.path.lexists(target):  # a file, a link, a folder: whatever is there stays
            kept += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied += 1
    places = {name: folder / name for name in BESIDE}
    if not kept:
        return _("copied the worker scripts to {workers} and the solutions to {solutions}").format(**places)
    return _(
        "copied {copied} of the {total} files to {workers} and {solutions}: "
        "the others were there and were kept"
    ).format(copied=copied, total=copied + kept, **places)


def prepare_runtime(
    source: str | None = None, folder: Path | None = None, install: Callable[..., None] = pip_install
) -> None:
    """The set-up cell's second step, after `pip install --no-deps SOURCE`: requirements, then the files
    beside the notebook (in `folder`, the working folder by default). `source` (what was installed:
    `installed_from()` by default) is named in what it prints.

    A source that is not a text is refused before anything is installed.
    """
    if source is None:
        source = installed_from()
    if not isinstance(source, str):
        _text(source, "source", "'pytorch-on-gpus-hands-on' or a wheel file")
    _no_nul(source, "source")
    here = Path.cwd() if folder is None else _folder(folder, "folder")
    done = [install_requirements(install), copy_beside(here)]
    print(_("Installed the course from {source}: {done}.").format(source=source, done=_("; ").join(done)))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: `python -m course_utils.setup [SOURCE]`; the set-up cell runs it with `%run -m`."""
    if isinstance(argv, str):  # its characters would be read as arguments
        raise TypeError(
            _("argv must be a list of arguments such as [SOURCE], not the str {argv!r}").format(argv=argv)
        )
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.setup", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "source",
        nargs="?",
        help=f"what the course was installed from (default: ${SOURCE_VARIABLE}, else {DISTRIBUTION})",
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
