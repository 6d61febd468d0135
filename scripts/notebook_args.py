"""Which notebooks the arguments of `course.py regenerate` and `course.py bench` name."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from links import edition_notebooks

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def notebook_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The parser of a script that takes notebooks: `[NOTEBOOK ...]` (none: every notebook), and --help."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "notebooks", nargs="*", metavar="NOTEBOOK", help="a path or a name such as 05_data_parallel.ipynb"
    )
    return parser


def all_notebooks() -> list[Path]:
    """Every notebook of the course: each edition's (`links.edition_notebooks`) in order, English first."""
    return [path for path, _, _ in edition_notebooks(ROOT)]


def notebooks_from_args(args: Sequence[str]) -> tuple[list[Path], list[str]]:
    """The notebooks named by `args` (all of the course's, both editions, when empty) and the arguments
    that name none.

    An argument is a path (relative to the course root, where `course.py` runs the scripts) or
    the bare name of a notebook in `notebooks/`, such as `05_data_parallel.ipynb`.
    """
    if isinstance(args, str) or not all(isinstance(arg, str) for arg in args):
        raise TypeError(
            f"args is a list of notebook paths or names, such as ['05_data_parallel.ipynb'], not {args!r}"
        )
    if not args:
        return all_notebooks(), []
    found, missing = [], []
    for arg in args:
        candidates = [Path(arg), ROOT / arg, NOTEBOOKS / arg]
        path = next((c.resolve() for c in candidates if c.suffix == ".ipynb" and c.is_file()), None)
        if path is None:
            missing.append(arg)
        else:
            found.append(path)
    return found, missing
