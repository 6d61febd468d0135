"""What `course.py grade` knows about notebooks: which course notebook a submission is, and what runs.

A submission is recognised by its content, not its file name: its top-level metadata must carry the
course block (`metadata.course`), and its cells' ids say which notebook it is (a student's edits
keep them; the two editions share them). Where the ids are gone, the title in the first cell
decides. The edition is the language its set-up cell sets.

What runs is the course's own notebook of that edition, cell for cell, with each exercise cell's
answer taken from the submission. An exercise cell of the course splits into three parts: its
imports from `course_utils.exercises`, the answer the student writes, and the statements that call
the `check_...` functions. The imports and checks come from the course, the answer from the
student, so that a student cannot change what is checked or how; each check's result is also shown
under a MIME type of its own (`VERDICT_MIME`), from which the grader reads the verdict.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHINESE = "zh-CN"
EDITION_FOLDERS = {"en": ROOT / "notebooks", CHINESE: ROOT / "notebooks" / CHINESE}
EXERCISES = re.compile(r"^## Exercises", re.MULTILINE)
DEEPER = re.compile(r"^## Going deeper", re.MULTILINE)
SET_UP_LANGUAGE = re.compile(r"""os\.environ\[["']COURSE_LANGUAGE["']\]\s*=\s*["']([\w-]+)["']""")
SHARED_IDS = {"course-setup"}  # a cell id that every notebook has: it names none of them
VERDICT_MIME = "application/vnd.course-grade.verdict+json"
RECORDER = "_course_grade_verdict_"
# Defined in each check cell: shows a check's result under VERDICT_MIME and returns it unchanged.
RECORDER_SOURCE = f'''def {RECORDER}(result):
    from IPython.display import display
    from course_utils.exercises import CheckResult

    if isinstance(result, CheckResult):
        verdict = {{"ok": result.ok is True, "text": str(result)}}
    else:
        verdict = {{"ok": False, "text": "", "returned": type(result).__name__}}
    display({{"{VERDICT_MIME}": verdict}}, raw=True)
    return result


'''


@dataclass(frozen=True)
class Exercise:
    """One exercise of a course notebook: its number there (from 1), its cell's id, the checks it calls."""

    number: int
    cell_id: str
    checks: tuple[str, ...]


@dataclass(frozen=True)
class CourseNotebook:
    """A notebook of the course: its name (`02_tensors_on_devices`), cell ids, exercises, titles."""

    stem: str
    cell_ids: frozenset[str]
    exercises: tuple[Exercise, ...]
    titles: dict[str, str] = field(compare=False)

    def path(self, edition: str) -> Path:
        """The course's own file of this notebook in `edition` ("en" or "zh-CN")."""
        return EDITION_FOLDERS[edition] / f"{self.stem}.ipynb"

    @property
    def checks(self) -> frozenset[str]:
        """Every check function the notebook's exercises call."""
        return frozenset(name for exercise in self.exercises for name in exercise.checks)


@dataclass(frozen=True)
class Identified:
    """A submission recognised as `notebook` in `edition`."""

    notebook: CourseNotebook
    edition: str


@dataclass(frozen=True)
class Rejected:
    """A submission that is not graded, and why: `reason` is one of REASONS, `detail` what it names."""

    reason: str
    detail: str = ""


# Why a submission is not graded (the report words each): not a notebook at all, a notebook without
# the course block, one that matches none of the course's notebooks, an edition whose checks the
# course no longer has.
REASONS = ("unreadable", "no_course_block", "unknown", "other_edition")


@dataclass(frozen=True)
class Cell:
    """A code cell to run: its source, what it is (ROLES), and for an exercise's cells the exercise."""

    source: str
    role: str
    position: int  # the course cell's place in its notebook, from 1 (markdown cells count)
    exercise: int | None = None
    answered: bool = True


# The roles of the cells that run: a course cell as the course has it, an exercise's imports, its
# answer (the student's), its checks (the course's, each result shown under VERDICT_MIME).
ROLES = ("course", "imports", "answer", "check")


def source_of(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat allows a string or a list of lines)."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def code_cells(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    """The notebook's code cells (well-formed ones only: a submission may hold anything)."""
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        return []
    return [cell for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"]


def python_of(source: str) -> str:
    """A cell's source as Python, IPython's `%magic` and `!shell` lines made calls, as the kernel does."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def parsed(source: str) -> ast.Module | None:
    """The syntax tree of a cell's Python (`python_of`), or None when it does not parse."""
    try:
        return ast.parse(python_of(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def calls_a_check(node: ast.AST) -> bool:
    """Whether a statement calls a `check_...` function anywhere in it."""
    return any(
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Name)
        and inner.func.id.startswith("check_")
        for inner in ast.walk(node)
    )


def checks_called(source: str) -> set[str]:
    """The `check_...` functions a cell calls (none when it does not parse)."""
    tree = parsed(source)
    if tree is None:
        return set()
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("check_")
    }


def imports_exercises(node: ast.stmt) -> bool:
    """Whether a statement imports from the course's exercise checks."""
    return isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils.exercises")


def exercise_cells(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    """The code cells of the "## Exercises" part (up to "## Going deeper") that call a check."""
    found, inside = [], False
    for cell in notebook.get("cells", []):
        text = source_of(cell)
        if cell.get("cell_type") == "markdown":
            exercises = [m.start() for m in EXERCISES.finditer(text)]
            deeper = [m.start() for m in DEEPER.finditer(text)]
            if exercises or deeper:  # the later heading of the cell decides
                inside = max(exercises, default=-1) > max(deeper, default=-1)
        elif inside and cell.get("cell_type") == "code" and checks_called(text):
            found.append(cell)
    return found


def title_of(notebook: dict[str, Any]) -> str:
    """The first line of the notebook's first cell without `# ` (the course's `NN · Title`), or ""."""
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not cells or not isinstance(cells[0], dict):
        return ""
    lines = source_of(cells[0]).strip().splitlines()
    return lines[0].removeprefix("# ").strip() if lines else ""


def read_notebook(path: Path) -> dict[str, Any]:
    """A notebook file as JSON."""
    return json.loads(path.read_text(encoding="utf-8"))


def course_notebooks() -> list[CourseNotebook]:
    """Every notebook of the course (notebooks/NN_*.ipynb), with its exercises and both titles."""
    found = []
    for path in sorted(EDITION_FOLDERS["en"].glob("[0-9][0-9]_*.ipynb")):
        english = read_notebook(path)
        exercises = tuple(
            Exercise(number, cell["id"], tuple(sorted(checks_called(source_of(cell)))))
            for number, cell in enumerate(exercise_cells(english), start=1)
        )
        ids = frozenset(cell.get("id") for cell in english["cells"]) - SHARED_IDS
        titles = {"en": title_of(english)}
        chinese = EDITION_FOLDERS[CHINESE] / path.name
        if chinese.exists():
            titles[CHINESE] = title_of(read_notebook(chinese))
        found.append(CourseNotebook(path.stem, ids, exercises, titles))
    return found


def edition_of(submission: dict[str, Any], notebook: CourseNotebook) -> str:
    """The edition of a submission: the language its set-up cell sets, else the one its title is in."""
    for cell in code_cells(submission):
        match = SET_UP_LANGUAGE.search(source_of(cell))
        if match and match[1] in EDITION_FOLDERS:
            return match[1]
    title = title_of(submission)
    return next((edition for edition, text in notebook.titles.items() if text == title), "en")


def identify(submission: object, course: list[CourseNotebook]) -> Identified | Rejected:
    """Which of the course's notebooks `submission` (parsed JSON) is, or why it is not graded."""
    if not isinstance(submission, dict) or not isinstance(submission.get("cells"), list):
        return Rejected("unreadable")
    metadata = submission.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("course"), dict):
        return Rejected("no_course_block")
    ids = {cell.get("id") for cell in submission["cells"] if isinstance(cell, dict)}
    overlap = {notebook.stem: len(notebook.cell_ids & ids) for notebook in course}
    best = max(course, key=lambda notebook: overlap[notebook.stem], default=None)
    if best is None or overlap[best.stem] * 2 < len(best.cell_ids):  # cells without their ids: the title
        title = title_of(submission)
        best = next((notebook for notebook in course if title and title in notebook.titles.values()), None)
    if best is None:
        return Rejected("unknown")
    foreign = set().union(*(checks_called(source_of(cell)) for cell in code_cells(submission))) - best.checks
    if foreign:
        return Rejected("other_edition", ", ".join(sorted(foreign)))
    return Identified(best, edition_of(submission, best))


def split_exercise(source: str) -> tuple[list[ast.stmt], list[ast.stmt], list[ast.stmt]] | None:
    """A course exercise cell's statements: its imports of the checks, its answer, its check calls."""
    tree = parsed(source)
    if tree is None:
        return None
    imports = [node for node in tree.body if imports_exercises(node)]
    checks = [node for node in tree.body if node not in imports and calls_a_check(node)]
    answer = [node for node in tree.body if node not in imports and node not in checks]
    return imports, answer, checks


def answer_of(source: str) -> tuple[str, str | None]:
    """The student's answer in an exercise cell: the code to run (the cell without its imports of the
    checks and its check calls) and its syntax tree as text, to compare with the placeholder's.

    A cell that does not parse runs whole, so that the student's SyntaxError is what the report says.
    """
    split = split_exercise(source)
    if split is None:
        return source, None
    imports, answer, checks = split
    code = python_of(source)
    dropped = {line for node in imports + checks for line in range(first_line(node), node.end_lineno + 1)}
    kept_lines = {line for node in answer for line in range(first_line(node), node.end_lineno + 1)}
    if dropped & kept_lines:  # statements that share a line (`a = 1; check_a(a)`): rewritten
        text = ast.unparse(ast.Module(answer, []))
    else:
        text = "".join(
            line for number, line in enumerate(code.splitlines(True), start=1) if number not in dropped
        )
    return text.strip("\n") + "\n", ast.dump(ast.Module(answer, []))


def first_line(node: ast.stmt) -> int:
    """The first line of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


class _Recorded(ast.NodeTransformer):
    """Wraps each `check_...(...)` call in the recorder, which shows its result as a verdict."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id.startswith("check_"):
            return ast.Call(ast.Name(RECORDER, ast.Load()), [node], [])
        return node


def check_source(checks: list[ast.stmt]) -> str:
    """The course's check statements with every check's result recorded, after the recorder itself."""
    recorded = [ast.fix_missing_locations(_Recorded().visit(node)) for node in checks]
    return RECORDER_SOURCE + ast.unparse(ast.Module(recorded, []))


def student_cell(submission: dict[str, Any], exercise: Exercise) -> dict[str, Any] | None:
    """The submission's cell for `exercise`: the one with its id, else the first that calls its checks."""
    cells = code_cells(submission)
    by_id = next((cell for cell in cells if cell.get("id") == exercise.cell_id), None)
    if by_id is not None:
        return by_id
    wanted = set(exercise.checks)
    return next((cell for cell in cells if checks_called(source_of(cell)) == wanted), None)


def cells_to_run(
    course_notebook: dict[str, Any], notebook: CourseNotebook, submission: dict[str, Any]
) -> list[Cell]:
    """The code cells that grade `submission`: the course's notebook (`course_notebook`, of the
    submission's edition), each exercise cell split into the course's imports, the student's
    answer and the course's checks."""
    exercises = {exercise.cell_id: exercise for exercise in notebook.exercises}
    cells = []
    for position, cell in enumerate(course_notebook["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        source = source_of(cell)
        exercise = exercises.get(cell.get("id"))
        split = split_exercise(source) if exercise is not None else None
        if exercise is None or split is None:
            cells.append(Cell(source, "course", position))
            continue
        imports, _, checks = split
        placeholder, placeholder_tree = answer_of(source)
        theirs = student_cell(submission, exercise)
        code, tree = answer_of(source_of(theirs)) if theirs is not None else (placeholder, placeholder_tree)
        if imports:
            cells.append(Cell(ast.unparse(ast.Module(imports, [])), "imports", position, exercise.number))
        cells.append(Cell(code, "answer", position, exercise.number, answered=tree != placeholder_tree))
        cells.append(Cell(check_source(checks), "check", position, exercise.number))
    return cells
