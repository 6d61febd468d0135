"""Checks on committed notebooks that nbval itself does not make.

nbval passes a notebook whose cells have no stored outputs, one whose outputs are all
ignored, and one with a warning stored in it; these checks catch each of those.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from links import cell_text
from regenerate import jupyterlab_kernelspec as regenerate_kernelspec
from regenerate import marker_tags

ROOT = Path(__file__).resolve().parent.parent
MIN_COMPARED_FRACTION = 0.6
MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")
NBVAL_TAGS = {"nbval-ignore-output", "nbval-skip"}
# Top-level folders under which a path names somebody's machine: homes, installs (/usr/lib/python3/
# dist-packages, /opt/conda, /usr/local), data and scratch mounts. System paths that read the same
# on every machine (/proc, /sys, /etc, /dev) are not listed: a lesson may print them.
MACHINE_DIRS = (
    "home",
    "Users",
    "root",
    "opt",
    "srv",
    "usr",
    "var",
    "mnt",
    "media",
    "scratch",
    "tmp",
    "private",
    "nix",
    "workspace",
    "data",
)
MACHINE_PATH = re.compile(
    "|".join(
        [
            re.escape(str(ROOT)),
            *([re.escape(str(Path.home()))] if len(Path.home().parts) > 1 else []),  # HOME=/ is no path
            # an absolute path that starts at one of MACHINE_DIRS, not the tail of a URL or word
            r"(?<![\w.:/~+-])/(?:" + "|".join(MACHINE_DIRS) + r")(?:/|\b)",
            r"site-packages",
            r"dist-packages",
            r"(?<!\w)[A-Za-z]:\\{1,4}\w",  # C:\Users\..., also escaped by repr() and JSON
        ]
    )
)
# The headings every notebook has, and the first words of its "What you need" answer, per edition.
HEADINGS = {
    "en": {
        "learn": "## What you will learn",
        "need": "## What you need",
        "answer": "Nothing but a CPU",
        "sections": ("## Summary", "## Exercises"),
    },
    "zh-CN": {
        "learn": "## 你将学到",
        "need": "## 你需要",
        "answer": "只需要 CPU",
        "sections": ("## 小结", "## 练习"),
    },
}


def _output_text(output: dict) -> str:
    text = output.get("text", "")
    text = "".join(text) if isinstance(text, list) else text
    for mime, value in output.get("data", {}).items():
        if not mime.startswith("image/"):  # base64 is noise that only ever looks like a path
            text += json.dumps(value)
    return text + output.get("evalue", "")


def notebook_problems(nb: dict, name: str, readme: str, language: str = "en") -> list[str]:
    """Everything wrong with one notebook's committed form, as readable sentences.

    `language` is the notebook's edition, whose headings it must have (HEADINGS); `readme` is that
    edition's README, whose table must list it.
    """
    words = HEADINGS[language]
    problems: list[str] = []
    cells = nb.get("cells", [])
    code = [c for c in cells if c.get("cell_type") == "code"]
    if not cells or cells[0].get("cell_type") != "markdown":
        problems.append("the first cell is not a markdown title cell")
    else:
        first = cell_text(cells[0])
        if not re.match(r"#\s+\S", first):
            problems.append("the first cell does not start with a '# ' title")
        if words["learn"] not in first:
            problems.append(f"the first cell has no '{words['learn']}' section")
        need = re.search(
            rf"^{re.escape(words['need'])}\s*$(?P<body>.*?)(?=^#|\Z)", first, re.MULTILINE | re.DOTALL
        )
        if need is None:
            problems.append(f"the first cell has no '{words['need']}' section")
        elif not need["body"].strip().lower().startswith(words["answer"].lower()):
            problems.append(f"the '{words['need']}' section does not answer '{words['answer']}.'")
    headings = "\n".join(cell_text(c) for c in cells if c.get("cell_type") == "markdown")
    for section in words["sections"]:
        if section not in headings:
            problems.append(f"no '{section}' section")

    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        problems.append("execution counts are not 1..n: regenerate it with `course.py regenerate`")

    compared = 0
    for number, cell in enumerate(code, start=1):
        src = cell_text(cell)
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
    if name not in readme_notebook_table(readme):
        problems.append("not listed in README.md's notebook table")
    return problems + course_metadata_problems(nb)


@functools.cache
def jupyterlab_kernelspec() -> dict[str, str]:
    """The kernelspec JupyterLab writes on opening a course notebook: its python3 kernel's, which must be
    what `course.py regenerate` stores."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"name": "python3", "display_name": spec.display_name, "language": spec.language}


def kernelspec_problems(nb: dict) -> list[str]:
    """A stored kernelspec other than JupyterLab's, which makes the notebook open as modified."""
    stored, wanted = nb.get("metadata", {}).get("kernelspec"), jupyterlab_kernelspec()
    if (stores := regenerate_kernelspec()) != wanted:
        return [f"course.py regenerate stores the kernelspec {stores}, JupyterLab writes {wanted}"]
    if stored != wanted:
        return [
            f"metadata.kernelspec is {stored}, not JupyterLab's {wanted}: run `python3 course.py regenerate`"
        ]
    return []


# metadata.course of every notebook: key -> (what is valid, check). Documented in CONTRIBUTING.md.
MOST_R = 6  # no notebook over 6 R alone (R: a fresh `import torch`; scripts/benchmark.py measures it)


def _number(value: object) -> bool:
    """A real number, not a bool: what a budget in R is."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


COURSE_KEYS = {
    "starts_processes": ("true or false", lambda v: isinstance(v, bool)),
    "uses_gpus": ('"none", "1+" or "2+"', lambda v: v in ("none", "1+", "2+")),
    "budget_r": (f"a number of R above 0, at most {MOST_R}", lambda v: _number(v) and 0 < v <= MOST_R),
    "reads_device_variables": ("true or false", lambda v: isinstance(v, bool)),
}
# Optional, and only together: where a notebook cannot keep MOST_R without losing its lesson.
FLOOR_KEYS = {
    "floor_r": (f"a number of R above {MOST_R}", lambda v: _number(v) and v > MOST_R),
    "floor_why": ("a sentence saying why", lambda v: isinstance(v, str) and len(v.split()) >= 5),
}


def course_metadata_problems(nb: dict) -> list[str]:
    """What is missing or invalid in the notebook's `metadata.course` block (COURSE_KEYS, FLOOR_KEYS)."""
    course = nb.get("metadata", {}).get("course")
    if not isinstance(course, dict):
        return [f"no metadata.course block with the keys {', '.join(COURSE_KEYS)}"]
    unknown = set(course) - set(COURSE_KEYS) - set(FLOOR_KEYS)
    problems = [f"metadata.course has unknown keys {sorted(unknown)}"] if unknown else []
    for key, (valid, ok) in COURSE_KEYS.items():
        if key not in course:
            problems.append(f"metadata.course has no {key!r} ({valid})")
        elif not ok(course[key]):
            problems.append(f"metadata.course.{key} is {course[key]!r}, not {valid}")
    floors = [key for key in FLOOR_KEYS if key in course]
    if floors and len(floors) < len(FLOOR_KEYS):
        lacking = next(key for key in FLOOR_KEYS if key not in course)
        problems.append(f"metadata.course has {floors[0]!r} without {lacking!r}")
    for key in floors:
        valid, ok = FLOOR_KEYS[key]
        if not ok(course[key]):
            problems.append(f"metadata.course.{key} is {course[key]!r}, not {valid}")
    return problems


def notebooks_where(key: str, root: Path = ROOT) -> list[str]:
    """The notebooks (as notebooks/NN_x.ipynb) whose metadata.course[key] is true, in order."""
    paths = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    return [
        f"notebooks/{p.name}"
        for p in paths
        if json.loads(p.read_text(encoding="utf-8")).get("metadata", {}).get("course", {}).get(key) is True
    ]


TABLE_ROW = re.compile(r"^\|\s*`?(?P<name>\d\d_[\w-]+\.ipynb)`?\s*\|")


def readme_notebook_table(readme: str) -> list[str]:
    """Notebook names in the README's notebook table (the first table whose rows name notebooks), in order.

    A notebook mentioned in prose (the Binder link, the layout section) is not "listed": only the
    table tells the reader what the course contains and in which order.
    """
    names: list[str] = []
    for line in readme.splitlines():
        row = TABLE_ROW.match(line.strip())
        if row:
            names.append(row["name"])
        elif names and not line.strip().startswith("|"):
            break  # the table has ended
    return names


def readme_order_problems(names: list[str], readme: str) -> list[str]:
    """Problems with the README's notebook table: missing, out of numbered order, or naming no notebook."""
    listed = readme_notebook_table(readme)
    if not listed:
        return ["README.md has no notebook table (rows like '| `00_start_here.ipynb` | ... |')"]
    problems = []
    if listed != sorted(listed):
        problems.append(f"README's table lists notebooks as {listed}, not {sorted(listed)}")
    missing = [n for n in names if n not in listed]
    if missing:
        problems.append(f"README's table does not list {missing}")
    unknown = [n for n in listed if n not in names]
    if unknown:
        problems.append(f"README's table lists {unknown}, which do not exist")
    return problems


HELPER_IMPORT = re.compile(r"^\s*(?:from|import)\s+course_utils\.(?P<module>[\w.]+)", re.MULTILINE)
HELPER_ROW = re.compile(
    r"^\|\s*`(?P<name>\d\d_[\w-]+\.ipynb)`\s*\|(?P<modules>[^|]*)\|(?P<tests>[^|]*)\|\s*$"
)
HELPERS_HEADING = "## Which helpers each notebook uses"


def helper_modules(nb: dict) -> list[str]:
    """The `course_utils` modules a notebook's code cells import, sorted (`exercises.x` for exercises)."""
    found = {
        match["module"]
        for cell in nb.get("cells", [])
        if cell.get("cell_type") == "code"
        for match in HELPER_IMPORT.finditer(cell_text(cell))
    }
    return sorted(found)


def helper_test_file(module: str) -> str:
    """The unit-test file of a `course_utils` module: `tests/test_<module, dots as underscores>.py`."""
    return f"tests/test_{module.replace('.', '_')}.py"


def helper_row(name: str, modules: list[str]) -> str:
    """The CONTRIBUTING table row for notebook `name` and the modules it imports."""
    helpers = ", ".join(f"`{m}`" for m in modules)
    tests = ", ".join(f"`{helper_test_file(m)}`" for m in modules)
    return f"| `{name}` | {helpers} | {tests} |"


def helper_table(contributing: str) -> dict[str, tuple[list[str], list[str]]]:
    """The rows of CONTRIBUTING's helper table: notebook -> (modules, test files), as written."""
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in contributing.split(HELPERS_HEADING, 1)[-1].splitlines():
        row = HELPER_ROW.match(line.strip())
        if row:
            modules, tests = (re.findall(r"`([^`]+)`", row[part]) for part in ("modules", "tests"))
            rows[row["name"]] = (modules, tests)
    return rows


def helper_table_problems(notebooks: dict[str, dict], contributing: str, root: Path = ROOT) -> list[str]:
    """Where CONTRIBUTING's notebook -> helpers -> tests table disagrees with the notebooks' imports.

    The expected rows are derived from the notebooks present; each problem gives the row to write.
    """
    if HELPERS_HEADING not in contributing:
        return [f"CONTRIBUTING.md has no section {HELPERS_HEADING!r}"]
    table = helper_table(contributing)
    problems = []
    for name, nb in sorted(notebooks.items()):
        modules = helper_modules(nb)
        expected = (modules, [helper_test_file(m) for m in modules])
        if table.get(name) != expected:
            problems.append(f"{name}: the table should say {helper_row(name, modules)}")
        problems += [f"{name}: {test} does not exist" for test in expected[1] if not (root / test).is_file()]
    problems += [
        f"the table lists {name}, which does not exist" for name in sorted(set(table) - set(notebooks))
    ]
    return problems


READING_WORDS_PER_MINUTE = 200


def reading_minutes(nb: dict) -> int:
    """About how long a notebook takes to read, as 00's map says: its markdown's words and its code's
    lines (two words each) at READING_WORDS_PER_MINUTE, to the nearest 5 minutes, at least 5."""
    words = sum(len(cell_text(c).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    lines = sum(len(cell_text(c).splitlines()) for c in nb["cells"] if c["cell_type"] == "code")
    return max(5, 5 * round((words + 2 * lines) / READING_WORDS_PER_MINUTE / 5))


def map_minutes(markdown: str) -> dict[str, int]:
    """The reading time that each row of 00's course map gives, by notebook number."""
    rows = re.findall(r"^\| (\d\d) .*\| \D*(\d+) \D*\|$", markdown, flags=re.MULTILINE)
    return {number: int(minutes) for number, minutes in rows}
