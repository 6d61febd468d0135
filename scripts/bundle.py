"""One archive for a classroom without internet: the course's wheel and every wheel it needs.

    python scripts/bundle.py [--out FILE.zip] [--platform TAG] [--python X.Y]

Builds the course's wheel from a clean copy of what it is built from, then `pip download`s the
wheels of `pytorch-on-gpus-hands-on[lab]` for the named platform and Python (binary wheels only,
from the package indexes pip is configured with: the PyTorch build is the one they serve), and
writes them with a README.txt into one .zip. From the unpacked archive alone, with no index,
`PIP_NO_INDEX=1 PIP_FIND_LINKS=wheelhouse pip install "pytorch-on-gpus-hands-on[lab]"` installs the
course and `pytorch-on-gpus lab` opens it. Called through `python3 course.py bundle`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from course_shell import PIP_BOUNDS, ROOT, check_indexes, run

PLATFORM = "manylinux_2_28_x86_64"
PYTHON = "3.11"
EXTRA = "lab"  # what a student needs to open the course: JupyterLab and its kernel
BUNDLE_FILE = "bundle.json"  # in the archive: what marks a file as a bundle this script wrote
# What the course's wheel is built from (pyproject.toml's readme, license, package-dir): copied to a
# clean folder first, so that nothing an earlier build left in build/ or src/ ends up in the wheel.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "src", "notebooks")
BUILD_LEFTOVERS = ("__pycache__", "*.egg-info", ".ipynb_checkpoints")
README = """\
{title} {version}: the course for a classroom without internet

This archive holds the course's wheel and every package it needs (wheelhouse/, {count} wheels,
PyTorch {torch}), for Python {python} on {platform}. On such a machine, in this folder
(ideally in a fresh virtual environment: python3 -m venv .venv && . .venv/bin/activate):

  PIP_NO_INDEX=1 PIP_FIND_LINKS=wheelhouse pip install "{name}[{extra}]"
  pytorch-on-gpus lab

The first installs the course from wheelhouse/ alone, without any package index (on Windows:
pip install --no-index --find-links wheelhouse "{name}[{extra}]"). The second copies the course
(the notebooks of both editions, their workers and solutions) into ./pytorch-on-gpus-course and
opens JupyterLab at notebook 00; `pytorch-on-gpus lab --language zh-CN` opens the Chinese edition,
`pytorch-on-gpus --help` says more.
"""


class BadInput(ValueError):
    """An argument that cannot make a bundle: the message names it and says what to do."""


def project() -> dict:
    """pyproject.toml's [project] table: the course's distribution name and version."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def copy_build_inputs(destination: Path) -> Path:
    """Copy what the course's wheel is built from into `destination`: the Chinese edition's workers,
    links into translations/, as the files they name. Returns `destination`."""
    skip = shutil.ignore_patterns(*BUILD_LEFTOVERS)
    destination.mkdir(parents=True, exist_ok=True)
    for name in BUILD_INPUTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=skip)
        else:
            shutil.copy2(source, destination / name)
    return destination


def build_course_wheel(wheelhouse: Path, python: str = sys.executable) -> Path:
    """Build the course's wheel with pip (its build backend from the package index, as any install from
    source gets it), put it into `wheelhouse` and return its path there."""
    with tempfile.TemporaryDirectory(prefix="course-build-") as scratch:
        source, built = copy_build_inputs(Path(scratch) / "course"), Path(scratch) / "wheel"
        command = [python, "-m", "pip", "wheel", "--no-deps", *PIP_BOUNDS, "--wheel-dir", built, source]
        if run(command) != 0:
            raise RuntimeError("building the course's wheel failed (pip's messages are above)")
        (wheel,) = built.glob("*.whl")
        wheelhouse.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheel, wheelhouse / wheel.name))


def platform_tags(platform: str) -> list[str]:
    """The tags pip is to accept for `platform`: a manylinux_2_Y tag with every older glibc's (pip itself
    takes only the tag given, and many projects publish manylinux2014 wheels alone), else the tag."""
    found = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if found is None:
        return [platform]
    newest, arch = int(found[1]), found[2]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for glibc in range(newest, 4, -1):
        tags.append(f"manylinux_2_{glibc}_{arch}")
        if glibc in legacy:
            tags.append(f"{legacy[glibc]}_{arch}")
    return tags


def download(
    requirements: list[str],
    wheelhouse: Path,
    platform: str,
    python_version: str,
    python: str = sys.executable,
) -> None:
    """`pip download` the wheels of `requirements` and of all they need, for `platform` and
    `python_version`, into `wheelhouse`: binary wheels only, from the indexes pip is configured with."""
    check_indexes(Path(python))
    command = [
        python,
        "-m",
        "pip",
        "download",
        *PIP_BOUNDS,
        "--only-binary=:all:",
        *(option for tag in platform_tags(platform) for option in ("--platform", tag)),
        "--python-version",
        python_version,
        "--dest",
        wheelhouse,
        *requirements,
    ]
    if run(command) != 0:
        raise RuntimeError(
            f"pip could not download every wheel for Python {python_version} on {platform} (its messages "
            "are above): a package without a wheel for that platform, or an index that does not answer"
        )


def is_bundle(path: Path) -> bool:
    """Whether `path` is an archive this script wrote (a zip with its bundle.json inside)."""
    if not path.is_file() or path.is_symlink() or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(Path(name).name == BUNDLE_FILE and name.count("/") == 1 for name in archive.namelist())


def check_arguments(out: Path, platform: str, python_version: str) -> None:
    """Raise BadInput naming the argument when --out, --platform or --python cannot make a bundle."""
    if out.suffix != ".zip":
        raise BadInput(f"--out {out}: the bundle is a .zip archive; name a file that ends in .zip")
    if out.exists() and not is_bundle(out):
        raise BadInput(
            f"--out {out}: that file exists and is not a bundle this command wrote, so it is not replaced; "
            "name a new file with --out"
        )
    if not re.fullmatch(r"[a-z0-9_]+", platform):
        raise BadInput(
            f"--platform {platform!r} is not a platform tag: write one as pip names it, such as {PLATFORM}, "
            "manylinux_2_28_aarch64, macosx_14_0_arm64 or win_amd64"
        )
    found = re.fullmatch(r"(\d+)\.(\d+)", python_version)
    if found is None or (int(found[1]), int(found[2])) < (3, 11):
        raise BadInput(f"--python {python_version!r}: give a Python of the course, 3.11 or newer, as X.Y")


def torch_version(wheelhouse: Path) -> str:
    """The version of the torch wheel in `wheelhouse` ("2.13.0+cpu"), or "none" if there is none."""
    wheels = sorted(wheelhouse.glob("torch-*.whl"))
    return wheels[0].name.split("-")[1] if wheels else "none"


def write_archive(out: Path, wheelhouse: Path, platform: str, python_version: str) -> Path:
    """Write the bundle: one top folder with wheelhouse/, README.txt and bundle.json. The archive appears
    under its name only when complete; wheels are stored as they are (they are compressed already)."""
    meta = project()
    top = f"{meta['name']}-{meta['version']}"
    wheels = sorted(wheelhouse.glob("*.whl"))
    readme = README.format(
        title="PyTorch on GPUs, hands-on",
        version=meta["version"],
        count=len(wheels),
        torch=torch_version(wheelhouse),
        python=python_version,
        platform=platform,
        name=meta["name"],
        extra=EXTRA,
    )
    record = {
        "course": meta["name"],
        "version": meta["version"],
        "platform": platform,
        "python": python_version,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    os.close(handle)
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(f"{top}/README.txt", readme)
            archive.writestr(f"{top}/{BUNDLE_FILE}", json.dumps(record, indent=1) + "\n")
            for wheel in wheels:
                archive.write(wheel, f"{top}/wheelhouse/{wheel.name}", compress_type=zipfile.ZIP_STORED)
        os.replace(partial, out)
    finally:
        Path(partial).unlink(missing_ok=True)
    return out


def parser() -> argparse.ArgumentParser:
    """`python3 course.py bundle`'s options."""
    name, version = project()["name"], project()["version"]
    result = argparse.ArgumentParser(
        prog="python3 course.py bundle",
        description="Write one .zip for a classroom without internet: the course's wheel and every wheel "
        f'that `pip install "{name}[{EXTRA}]"` needs on the named platform and Python, with a README.txt '
        "that gives the two commands that install and open the course from the archive alone. The wheels "
        "come from the package indexes pip is configured with; PyPI's torch for Linux is the CUDA build "
        "(a few GB with its nvidia-* wheels): for CPU-only machines, run it with "
        "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu.",
    )
    result.add_argument(
        "--out",
        type=Path,
        metavar="FILE.zip",
        help=f"the archive to write (default: build/{name}-{version}-py<X><Y>-<platform>.zip); "
        "an existing file is replaced only if this command wrote it",
    )
    result.add_argument(
        "--platform", default=PLATFORM, help=f"the students' platform tag (default: {PLATFORM})"
    )
    result.add_argument(
        "--python", default=PYTHON, metavar="X.Y", help=f"the students' Python (default: {PYTHON})"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """Build the bundle; 2 with one line naming the argument on bad input, 1 when pip fails."""
    args = parser().parse_args(argv)
    meta = project()
    tag = args.python.replace(".", "")
    out = args.out or ROOT / "build" / f"{meta['name']}-{meta['version']}-py{tag}-{args.platform}.zip"
    try:
        check_arguments(out, args.platform, args.python)
    except BadInput as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="course-bundle-") as scratch:
        wheelhouse = Path(scratch) / "wheelhouse"
        try:
            course_wheel = build_course_wheel(wheelhouse)
            download([f"{course_wheel}[{EXTRA}]"], wheelhouse, args.platform, args.python)
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        write_archive(out, wheelhouse, args.platform, args.python)
        count, torch = len(list(wheelhouse.glob("*.whl"))), torch_version(wheelhouse)
    print(f"Wrote {out} ({out.stat().st_size / 2**20:.0f} MiB, {count} wheels, PyTorch {torch}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
