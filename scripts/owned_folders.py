"""Folders the course writes into, and the rule that it deletes only what it made: the scripts' name for
`course_utils.folders` (src/course_utils/folders.py), which the installed `pytorch-on-gpus` command
shares. Standard library only: the scripts that run before set-up, in a Python without the course
installed, import it from src/ of this checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)  # this checkout's course_utils, installed or not
from course_utils.folders import MARKER, MARKER_TEXT, NotOurFolder, adopt, claim, is_ours, remove  # noqa: E402

__all__ = ["MARKER", "MARKER_TEXT", "NotOurFolder", "adopt", "claim", "is_ours", "remove"]
