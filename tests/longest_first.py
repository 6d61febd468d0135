"""Run the test files that take longest first, so that parallel workers finish together.

pytest-xdist's `loadscope` hands each worker one file (a notebook, a test module) at a time, in the
order of the collection. A long file handed out last keeps one worker busy while the others idle;
handed out first, the short files fill the gaps. `tests/scope_seconds.json` holds each file's
seconds from an earlier run (`python3 course.py test --store-durations` refreshes it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

SCOPE_SECONDS = Path(__file__).with_name("scope_seconds.json")


class HasNodeId(Protocol):
    """What ordering needs of a pytest item: its node id."""

    nodeid: str


Item = TypeVar("Item", bound=HasNodeId)


def scope(nodeid: str) -> str:
    """The file a test belongs to (`notebooks/05_x.ipynb::Cell 3` -> `notebooks/05_x.ipynb`)."""
    return nodeid.split("::", 1)[0]


def read_seconds(path: Path = SCOPE_SECONDS) -> dict[str, float]:
    """Each file's seconds as last stored; none where the file does not exist yet."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def longest_first(items: Sequence[Item], seconds: dict[str, float]) -> list[Item]:
    """`items` with the files that took longest first; a file never measured counts as the longest.

    Each file's tests keep their order (a notebook's cells must run in order), as do files that took
    equally long.
    """
    unmeasured = max(seconds.values(), default=0.0) + 1.0
    return sorted(items, key=lambda item: -seconds.get(scope(item.nodeid), unmeasured))


def add_durations(seconds: dict[str, float], reports: Iterable[tuple[str, float]]) -> dict[str, float]:
    """`seconds` with every file that `reports` (node id, seconds of a setup, call or teardown) ran replaced.

    Files that did not run keep their old figure; the result is sorted by file for a stable diff.
    """
    measured: dict[str, float] = {}
    for nodeid, duration in reports:
        measured[scope(nodeid)] = measured.get(scope(nodeid), 0.0) + duration
    merged = seconds | {name: round(total, 1) for name, total in measured.items()}
    return dict(sorted(merged.items()))


def write_seconds(seconds: dict[str, float], path: Path = SCOPE_SECONDS) -> None:
    """Store `seconds` as JSON, one file per line."""
    path.write_text(json.dumps(seconds, indent=1) + "\n", encoding="utf-8")
