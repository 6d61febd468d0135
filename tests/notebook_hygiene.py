"""Checks on committed notebooks that nbval itself does not make.

nbval passes a notebook whose cells have no stored outputs, one whose outputs are all
ignored, and one with a warning stored in it; these checks catch each of those.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from regenerate import marker_tags

ROOT = Path(__file__).resolve().parent.parent
MIN_COMPARED_FRACTION = 0.6
MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")
NBVAL_TAGS = {"nbval-ignore-output", "nbval-skip"}
MACHINE_PATH = re.compile(
    "|".join(
        [
            re.escape(str(ROOT)),
            re.escape(str(Path.home())),
            r"/tmp/\S",
            r"site-packages",
            r"/home/\w",
            r"/Users/\w",
            r"[A-Za-z]:\\Users\\",
        ]
    )
)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _output_text(output: dict) -> str:
    text = output.get("text", "")
    text = "".join(text) if isinstance(text, list) else text
    for value in output.get("data", {}).values():
        text += json.dumps(value)
    return text + output.get("evalue", "")


def notebook_problems(nb: dict, name: str, readme: str) -> list[str]:
    """Everything wrong with one notebook's committed form, as readable sentences."""
    problems: list[str] = []
    cells = nb.get("cells", [])
    code = [c for c in cells if c.get("cell_type") == "code"]
    if not cells or cells[0].get("cell_type") != "markdown":
        problems.append("the first cell is not a markdown title cell")
    else:
        first = _source(cells[0])
        if not re.match(r"#\s+\S", first):
            problems.append("the first cell does not start with a '# ' title")
        if "## What you will learn" not in first:
            problems.append("the first cell has no '## What you will learn' section")
    headings = "\n".join(_source(c) for c in cells if c.get("cell_type") == "markdown")
    for section in ("## Summary", "## Exercises"):
        if section not in headings:
            problems.append(f"no '{section}' section")

    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        problems.append("execution counts are not 1..n: regenerate it with `course.py regenerate`")

    compared = 0
    for number, cell in enumerate(code, start=1):
        src = _source(cell)
        marker = next((m for m in MARKERS if m in src), None)
        if marker:
            line = next(ln for ln in src.splitlines() if marker in ln)
            if len(line.split(marker, 1)[1].strip(" :-#")) < 5:
                problems.append(f"code cell {number}: {marker} without a reason: {line.strip()}")
        elif cell.get("outputs"):
            compared += 1
        tags = set(cell.get("metadata", {}).get("tags", [])) & NBVAL_TAGS
        if tags != marker_tags(src):
            problems.append(
                f"code cell {number}: nbval tags {sorted(tags)} do not match its marker comments "
                "(regenerate it: `course.py regenerate` syncs them)"
            )
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"code cell {number}: a stored error ({output.get('ename')})")
            if output.get("name") == "stderr":
                problems.append(f"code cell {number}: stored stderr output")
            found = MACHINE_PATH.search(_output_text(output))
            if found:
                problems.append(f"code cell {number}: an output shows a machine path ({found[0]})")
    if code and compared < MIN_COMPARED_FRACTION * len(code):
        problems.append(
            f"only {compared} of {len(code)} code cells have outputs that nbval compares "
            f"(at least {MIN_COMPARED_FRACTION:.0%} must)"
        )
    if name not in readme:
        problems.append("not listed in README.md")
    return problems


def readme_order_problems(names: list[str], readme: str) -> list[str]:
    """Notebooks listed in the README out of their numbered order."""
    positions = [(readme.find(n), n) for n in names if n in readme]
    listed = [n for _, n in sorted(positions)]
    expected = sorted(listed)
    return [] if listed == expected else [f"README lists notebooks as {listed}, not {expected}"]
