"""What the GPU lane reads from elsewhere, checked before it is used.

A run folder (report.json, notebooks.zip) comes back from a GPU machine and the wheels folder
(lane.json and its wheels) travels there: either may have been changed on the way. Each JSON file
is checked against a schema (`check`: types, ranges, plain file names, a parseable time), each zip
is read with plain, bounded entries, and a path taken from a file stays inside its folder. Every
problem raises BadInput, whose message is the one line the lane prints (the file, the field, what
to do) before it exits with status 2. Standard library only: `gpu run` uses it with the GPU
machine's own Python.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
JSON_LIMIT = 16 * MIB  # report.json and lane.json are a few KiB
ENTRY_LIMIT = 64 * MIB  # one executed notebook (its pictures inline) is at most a few MiB
ZIP_LIMIT = 256 * MIB
ZIP_ENTRIES = 200
NOTEBOOK_ENTRY = re.compile(r"[0-9]{2}_[A-Za-z0-9_]+\.ipynb")
RAN_KEY = "gpu_lane_ran"  # set by gpu_lane_plugin in the metadata of each cell that a run executed


class BadInput(ValueError):
    """A file or folder the lane was given that it cannot use; the message names it and the field."""


@dataclass(frozen=True)
class Text:
    """A string that `pattern` matches in full, at most `longest` characters; `means` names it."""

    pattern: str = r"(?s).*"
    means: str = "a string"
    longest: int = 100_000


@dataclass(frozen=True)
class Number:
    """A finite JSON number from `least` to `most`, a whole one when `whole`."""

    least: float = 0
    most: float = math.inf
    whole: bool = False


@dataclass(frozen=True)
class OneOf:
    """One of a few JSON values (compared with their type: true is not 1)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class Nullable:
    """What `schema` allows, or null."""

    schema: Schema


@dataclass(frozen=True)
class Either:
    """What one of `schemas` allows (a notebook's text: a string or a list of lines)."""

    schemas: tuple[Schema, ...]
    means: str


@dataclass(frozen=True)
class Keyed:
    """An object with any keys that `key` allows, each value as `value` says."""

    key: Text
    value: Schema


@dataclass(frozen=True)
class Timestamp:
    """An ISO 8601 time that datetime.fromisoformat reads, e.g. 2026-11-26T13:51:32+00:00."""


# A schema is one of the kinds above, `bool`, a list `[item]` (a JSON list of items), or a dict
# {key: schema} (a JSON object with these keys and maybe others, which are ignored; a key that
# ends with "?" may be missing).
Schema = Text | Number | OneOf | Nullable | Either | Keyed | Timestamp | type | list | dict

KINDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list"}


def kind(value: Any) -> str:
    """A JSON value's kind in words, for a message: `a string`, `null`, `an object`."""
    return "null" if value is None else KINDS.get(type(value), "an object")


def shown(value: Any) -> str:
    """A value in a message: short, on one line, with its quotes."""
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= 60 else f"{text[:57]}..."


def check(value: Any, schema: Schema, where: str = "") -> None:
    """Raise BadInput (`field 'WHERE' must be ..., not ...`) unless `value` is what `schema` allows."""
    field = f"field '{where}'" if where else "the file"

    def wrong_kind(expected: str) -> BadInput:
        return BadInput(f"{field} must be {expected}, not {kind(value)}")

    def wrong_value(expected: str) -> BadInput:
        return BadInput(f"{field} must be {expected}, not {shown(value)}")

    if isinstance(schema, Nullable):
        if value is not None:
            check(value, schema.schema, where)
    elif isinstance(schema, Text):
        if not isinstance(value, str):
            raise wrong_kind("a string")
        if len(value) > schema.longest or not re.fullmatch(schema.pattern, value):
            raise wrong_value(schema.means)
    elif isinstance(schema, Number):
        number = "an integer" if schema.whole else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise wrong_kind(number)
        span = (
            f"of at least {schema.least}"
            if schema.most == math.inf
            else f"from {schema.least} to {schema.most}"
        )
        if not math.isfinite(value) or not schema.least <= value <= schema.most:
            raise wrong_value(f"{number} {span}")
        if schema.whole and not isinstance(value, int):
            raise wrong_value(number)
    elif isinstance(schema, OneOf):
        if not any(type(value) is type(v) and value == v for v in schema.values):
            raise wrong_value(f"one of {', '.join(shown(v) for v in schema.values)}")
    elif isinstance(schema, Either):
        for option in schema.schemas:
            try:
                return check(value, option, where)
            except BadInput:
                continue
        raise wrong_kind(schema.means)
    elif isinstance(schema, Timestamp):
        try:
            datetime.datetime.fromisoformat(value if isinstance(value, str) else "")
        except ValueError:
            raise wrong_value("an ISO 8601 time such as 2026-11-26T13:51:32+00:00") from None
    elif schema is bool:
        if not isinstance(value, bool):
            raise wrong_kind("true or false")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise wrong_kind("a list")
        for index, item in enumerate(value):
            check(item, schema[0], f"{where}[{index}]")
    elif isinstance(schema, Keyed):
        if not isinstance(value, dict):
            raise wrong_kind("an object")
        for key, item in value.items():
            if len(key) > schema.key.longest or not re.fullmatch(schema.key.pattern, key):
                raise BadInput(f"{field} has a key that is not {schema.key.means}: {shown(key)}")
            check(item, schema.value, f"{where}[{shown(key)}]")
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            raise wrong_kind("an object")
        for key, part in schema.items():
            name = key.removesuffix("?")
            inner = f"{where}.{name}" if where else name
            if name in value:
                check(value[name], part, inner)
            elif not key.endswith("?"):
                raise BadInput(f"field '{inner}' is missing")
    else:
        raise TypeError(f"not a schema: {schema!r}")


def inside(folder: Path, name: str) -> Path:
    """`folder / name`, refused (BadInput) where it leads out of `folder`: `..`, a path, a link."""
    path = folder / name
    if Path(name).name != name or not path.resolve().is_relative_to(folder.resolve()):
        raise BadInput(f"{path} leads out of {folder} (a link or a path): the lane keeps to its folders")
    return path


def load_json(path: Path, schema: Schema, hint: str) -> Any:
    """The JSON in `path`, checked against `schema`; BadInput (the path, the field, `hint`) otherwise."""
    if not path.is_file():
        raise BadInput(f"{path} is missing: {hint}")
    if path.stat().st_size > JSON_LIMIT:
        raise BadInput(f"{path}: larger than {JSON_LIMIT // MIB} MiB: {hint}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        check(value, schema)
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text: {hint}") from None
    except json.JSONDecodeError as err:
        raise BadInput(f"{path}: not JSON ({err}): {hint}") from None
    except BadInput as err:
        raise BadInput(f"{path}: {err}: {hint}") from None
    return value


def read_zip(path: Path, entry: re.Pattern[str], means: str, hint: str) -> dict[str, bytes]:
    """The entries of the zip at `path`, by name: each a plain name that `entry` matches, stored or
    deflated, not encrypted, within the size limits; BadInput (the archive, the entry) otherwise."""
    if not path.is_file():
        raise BadInput(f"{path} is missing: {hint}")
    try:
        with zipfile.ZipFile(path) as bundle:
            infos = bundle.infolist()
            if len(infos) > ZIP_ENTRIES:
                raise BadInput(f"{path}: more than {ZIP_ENTRIES} entries: {hint}")
            if sum(info.file_size for info in infos) > ZIP_LIMIT:
                raise BadInput(f"{path}: unpacks to more than {ZIP_LIMIT // MIB} MiB: {hint}")
            entries: dict[str, bytes] = {}
            for info in infos:
                name = info.filename
                if not entry.fullmatch(name) or name in entries:
                    problem = "appears twice" if name in entries else f"is not {means}"
                    raise BadInput(f"{path}: entry {shown(name)} {problem}: {hint}")
                if info.file_size > ENTRY_LIMIT or info.flag_bits & 0x1:
                    raise BadInput(f"{path}: entry {shown(name)} is encrypted or too large: {hint}")
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise BadInput(f"{path}: entry {shown(name)} uses an unknown compression: {hint}")
                entries[name] = bundle.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError) as err:
        raise BadInput(f"{path}: not a readable zip archive ({err}): {hint}") from None
    return entries


SOURCE = Either((Text(), [Text()]), "a string or a list of strings")
NOTEBOOK = {
    "cells": [
        {
            "cell_type": Text(),
            "source": SOURCE,
            "id?": Text(),
            "metadata?": {"tags?": [Text()], f"{RAN_KEY}?": bool},
            "outputs?": [
                {
                    "output_type": Text(),
                    "text?": SOURCE,
                    "ename?": Text(),
                    "evalue?": Text(),
                    "data?": {"text/plain?": SOURCE},
                }
            ],
        }
    ]
}


def read_notebooks(path: Path, hint: str) -> dict[str, dict[str, Any]]:
    """The executed notebooks in notebooks.zip, by name (`NN_name.ipynb`), each checked as a notebook."""
    notebooks = {}
    for name, data in read_zip(path, NOTEBOOK_ENTRY, "a plain NN_name.ipynb", hint).items():
        try:
            notebooks[name] = json.loads(data.decode("utf-8"))
            check(notebooks[name], NOTEBOOK)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise BadInput(f"{path}: entry {shown(name)} is not a notebook ({err}): {hint}") from None
        except BadInput as err:
            raise BadInput(f"{path}: entry {shown(name)}: {err}: {hint}") from None
    return notebooks


# The plain names and versions that report.json and lane.json hold.
NOTEBOOK_NAME = Text(NOTEBOOK_ENTRY.pattern, "a notebook's file name such as 00_start_here.ipynb", 200)
SEGMENT = r"[A-Za-z0-9_-][A-Za-z0-9_.-]*"
COURSE_FILE = Text(f"{SEGMENT}(/{SEGMENT})*", "a relative path such as tests/test_gpus.py", 300)
WHEEL = Text(r"[A-Za-z0-9_][A-Za-z0-9_.+!-]*\.whl", "a wheel's file name (NAME-VERSION-...whl)", 300)
PACKAGE = Text(r"[A-Za-z0-9][A-Za-z0-9._-]*", "a package's name", 200)
REQUIREMENT = Text(r"[A-Za-z0-9][A-Za-z0-9._-]*.*", "a requirement such as nbval>=0.11", 300)
VERSION = Text(r"[0-9]+(\.[0-9A-Za-z]+)*(\+[0-9A-Za-z.]+)?", "a version such as 2.11.0+cu130", 100)
LINE = Text(longest=2000)
COUNT = Number(whole=True)


def group(failure: dict[str, Schema]) -> dict[str, Schema]:
    """A notebook's or a test file's results: counts and each failure (`failure`: where it failed)."""
    return {"passed": COUNT, "failed": COUNT, "skipped": COUNT, "failures": [{**failure, "error": LINE}]}


REPORT = {
    "format": OneOf((1,)),
    "rehearsal": bool,
    "started": Timestamp(),
    "seconds": Number(),
    "timeout_s": Number(),
    "timed_out": bool,
    "pytest": {
        "exit_status": Nullable(Number(-255, 255, whole=True)),
        "workers": Number(0, 4096, whole=True),
        "arguments": [LINE],
    },
    "machine": {
        "python": Text(r"[0-9][0-9A-Za-z.+]*", "a Python version such as 3.12.3", 50),
        "platform": LINE,
        "cpus": Number(0, 1 << 20, whole=True),
        "memory_gib": Number(),
    },
    "torch": {"version": VERSION, "cuda": Nullable(LINE), "cudnn": Nullable(COUNT), "build": LINE},
    "gpus": [
        {
            "index": COUNT,
            "name": Text(r"[^\x00-\x1f\x7f]+", "a GPU's name on one line", 200),
            "memory_gib": Number(),
            "capability": Text(r"[0-9]{1,3}\.[0-9]{1,3}", "a compute capability such as 9.0", 10),
        }
    ],
    "driver": Nullable(LINE),
    "inventory_error?": Nullable(LINE),
    "packages": Nullable(Keyed(PACKAGE, {"version": LINE, "from": OneOf(("lane", "machine"))})),
    "missing": Nullable([PACKAGE]),
    "outside?": Nullable([LINE]),
    "course_utils": Nullable(LINE),
    "wheels": [WHEEL],
    "executed": [NOTEBOOK_NAME],
    "notebooks": Keyed(NOTEBOOK_NAME, group({"cell": COUNT})),
    "tests": Keyed(COURSE_FILE, group({"test": LINE})),
}
REPORT_HINT = "give the folder that `gpu run --out DIR` wrote, as it wrote it"


def load_report(run_dir: Path) -> dict[str, Any]:
    """A run folder's report.json, checked: REPORT's schema, and a rehearsal exactly when no GPU ran."""
    path = inside(run_dir, "report.json")
    report = load_json(path, REPORT, REPORT_HINT)
    if report["rehearsal"] != (not report["gpus"]):
        raise BadInput(
            f"{path}: field 'rehearsal' must be {shown(not report['gpus'])} where 'gpus' holds "
            f"{len(report['gpus'])}: {REPORT_HINT}"
        )
    return report


MANIFEST = {
    "python": Text(r"3\.[0-9]{1,2}", "a Python version such as 3.12", 10),
    "needed": [REQUIREMENT],
    "wheels": [WHEEL],
    "prepared?": Timestamp(),
    "platforms?": [LINE],
    "target?": [REQUIREMENT],
    "machine_has?": [PACKAGE],
    "brings?": [REQUIREMENT],
}
MANIFEST_HINT = (
    "run `python3 course.py gpu prepare` on a machine with pip and carry the folder it writes, unchanged"
)


def load_manifest(wheels: Path, name: str) -> dict[str, Any]:
    """The wheels folder's manifest `name` (lane.json), checked: each wheel it names lies in `wheels`."""
    path = inside(wheels, name)
    manifest = load_json(path, MANIFEST, MANIFEST_HINT)
    for index, wheel in enumerate(manifest["wheels"]):
        if not inside(wheels, wheel).is_file():
            raise BadInput(
                f"{path}: field 'wheels[{index}]' names {wheel}, which is not in {wheels}: {MANIFEST_HINT}"
            )
    return manifest
