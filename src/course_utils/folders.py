"""Folders the course writes into, and the rule that it deletes only what it made.

A folder the course creates for a command's output (the website's build, the GPU lane's wheels
and runs, a student's copy of the course from `pytorch-on-gpus get`) gets a marker file at
creation. A command may write into a folder that is missing, empty or marked; one that holds
anything else is the user's, and the command refuses it with a message that says what to do.
Inside a marked folder the course removes only the entries it names, never through a link and
never outside the folder. Standard library only: `course.py`, the scripts that run before set-up
(through scripts/owned_folders.py) and the `pytorch-on-gpus` command use it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MARKER = ".made-by-pytorch-course"
MARKER_TEXT = (
    "This folder was made by the course's commands (python3 course.py ..., pytorch-on-gpus ...), which\n"
    "may replace what they wrote here. Delete this file to keep the folder from them: they will then\n"
    "refuse to use it.\n"
)


class NotOurFolder(ValueError):
    """A folder the course was asked to write into holds files the course did not make."""


def claim(folder: Path, option: str) -> Path:
    """Make `folder` the course's and return it resolved: created with the marker when missing or
    empty, accepted when it carries the marker; a folder with other content raises NotOurFolder,
    whose message names `option` (the command-line option that names the folder)."""
    folder = Path(folder).resolve()  # `..` and links in the name are resolved once, here
    if folder.exists() and not folder.is_dir():
        raise NotOurFolder(f"{option} {folder}: that is a file, not a folder: name a new or empty folder")
    if folder.is_dir() and not (folder / MARKER).is_file() and any(folder.iterdir()):
        raise NotOurFolder(
            f"{option} {folder}: that folder is not empty and was not made by the course, so the "
            f"course will not write into it (it would replace files there). Name a new or empty "
            f"folder with {option}."
        )
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.is_file():
        marker.write_text(MARKER_TEXT, encoding="utf-8")
    return folder


def adopt(folder: Path) -> None:
    """Mark a course's default output folder (under the course's git-ignored build/) that an
    older version made without a marker; a folder a user names is never adopted, only claimed."""
    folder = Path(folder)
    if folder.is_dir() and not folder.is_symlink() and not (folder / MARKER).exists():
        (folder / MARKER).write_text(MARKER_TEXT, encoding="utf-8")


def is_ours(folder: Path) -> bool:
    """Whether `folder` is a real folder (not a link) that carries the course's marker."""
    folder = Path(folder)
    return folder.is_dir() and not folder.is_symlink() and (folder / MARKER).is_file()


def remove(folder: Path, *names: str) -> None:
    """Remove the entries `names` of the course's `folder` (a folder tree, a file, or a link: the
    link alone, never what it points to). Raise NotOurFolder when `folder` lacks the marker and
    ValueError for a name that is not a plain entry of it (`..`, a path with a separator)."""
    folder = Path(folder)
    if not is_ours(folder):
        raise NotOurFolder(f"{folder} does not carry the course's marker ({MARKER}): nothing removed")
    for name in names:
        if name in {"", ".", "..", MARKER} or Path(name).name != name or "\\" in name:
            raise ValueError(f"{name!r} is not an entry of {folder} that the course may remove")
        entry = folder / name
        if entry.is_symlink() or entry.is_file():
            entry.unlink()
        elif entry.is_dir():
            shutil.rmtree(entry)
