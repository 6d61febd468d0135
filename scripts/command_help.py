"""The parsers of the commands whose scripts need the course's environment (`regenerate`, `bench`,
`translate`), in the standard library alone: `course.py COMMAND --help` prints them before any
set-up, and the scripts parse their arguments with the same parsers."""

from __future__ import annotations

import argparse
from pathlib import Path

from notebook_args import notebook_parser

DESCRIPTIONS = {
    "regenerate": "Re-execute notebooks top to bottom and store their outputs (no NOTEBOOK: all, both "
    "editions; an English notebook brings its Chinese twin along).",
    "bench": "Measure the notebooks, the notebook suite, the unit tests and the whole test against the "
    "course's budgets. With NOTEBOOKs: those alone and as a suite.",
    "format": "Format the notebooks' code cells (both editions: the English notebooks and the Chinese "
    "translations) to the width the website shows without wrapping; --check lists the lines that do not fit.",
    "translate": "Keep the Chinese edition in step with the English: update the .po files, build the "
    "Chinese notebooks, or check that everything is translated, current and built.",
}


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of `python3 course.py COMMAND` for one of DESCRIPTIONS' commands."""
    prog = f"python3 course.py {command}"
    if command == "format":
        parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTIONS[command])
        parser.add_argument("--check", action="store_true", help="list the lines too wide; write nothing")
        parser.add_argument(
            "notebooks", nargs="*", metavar="NOTEBOOK", help="these English notebooks only (default: all)"
        )
        return parser
    if command == "translate":
        parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTIONS[command])
        parser.add_argument("action", choices=["update", "build", "check"])
        return parser
    parser = notebook_parser(prog, DESCRIPTIONS[command])
    if command == "bench":
        parser.add_argument(
            "--json", type=Path, metavar="FILE", help="write every figure there (default: build/bench.json)"
        )
        parser.add_argument(
            "--markdown",
            type=Path,
            metavar="FILE",
            help="also write CONTRIBUTING.md's table of the figures there",
        )
        parser.add_argument(
            "--replay", type=Path, metavar="FILE", help="report a bench.json written earlier; measure nothing"
        )
    return parser
