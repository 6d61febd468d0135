"""Every exercise has a solution, in both editions, and each solution passes its own check.

A solution file fills in the exercise cells of one notebook (`notebooks/solutions/NN_name.py`); the
Chinese one (`notebooks/zh-CN/solutions/`) has the same code with Chinese comments. Running the
English file through the checks proves both that every check accepts a right answer and that every
solution is right; the Chinese file is the same program, which the code comparison proves.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import runpy

import pytest
from notebook_hygiene import ROOT

import translations

NOTEBOOKS = ROOT / "notebooks"
EXERCISES = re.compile(r"^## Exercises", re.MULTILINE)
DEEPER = re.compile(r"^## Going deeper", re.MULTILINE)
SOURCE_DIGEST = re.compile(
    r"^# 译自 notebooks/solutions/(?P<name>[\w.]+)，sha256 前 12 位：(?P<digest>[0-9a-f]{12})$"
)


def exercise_code(notebook: dict) -> str:
    """The code cells between a notebook's "## Exercises" heading and its "Going deeper" part."""
    code, inside = [], False
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            exercises = [m.start() for m in EXERCISES.finditer(text)]
            deeper = [m.start() for m in DEEPER.finditer(text)]
            if exercises or deeper:  # the later heading of the cell decides
                inside = max(exercises, default=-1) > max(deeper, default=-1)
        elif inside:
            code.append(text)
    return "\n".join(code)


def checks_called(code: str) -> set[str]:
    """The names of the `check_...` functions that a piece of code calls."""
    calls = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)]
    names = {call.func.id for call in calls if isinstance(call.func, ast.Name)}
    return {name for name in names if name.startswith("check_")}


def digest(text: str) -> str:
    """The first 12 hex digits of a text's sha256, which a Chinese solution records of its English."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


WITH_EXERCISES = [
    path
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if exercise_code(json.loads(path.read_text(encoding="utf-8")))
]


def test_the_notebooks_with_exercises_are_found():
    assert len(WITH_EXERCISES) >= 14, [path.name for path in WITH_EXERCISES]


@pytest.mark.parametrize("notebook", WITH_EXERCISES, ids=lambda path: path.stem)
def test_each_solution_passes_every_check_of_its_notebook(notebook, capsys, monkeypatch):
    monkeypatch.delenv("COURSE_LANGUAGE", raising=False)
    solution = NOTEBOOKS / "solutions" / f"{notebook.stem}.py"
    assert solution.exists(), f"{notebook.name} has exercises but no solutions/{solution.name}"
    wanted = checks_called(exercise_code(json.loads(notebook.read_text(encoding="utf-8"))))
    given = checks_called(solution.read_text(encoding="utf-8"))
    assert given == wanted, f"solutions/{solution.name} calls {sorted(given)}, the exercises {sorted(wanted)}"
    runpy.run_path(str(solution), run_name="__main__")
    verdicts = capsys.readouterr().out.splitlines()
    assert len(verdicts) >= len(wanted), verdicts
    assert all(line.startswith("Correct: ") for line in verdicts), "\n".join(verdicts)


@pytest.mark.parametrize("notebook", WITH_EXERCISES, ids=lambda path: path.stem)
def test_each_chinese_solution_is_the_same_code_translated_from_the_current_english(notebook):
    english = (NOTEBOOKS / "solutions" / f"{notebook.stem}.py").read_text(encoding="utf-8")
    chinese_path = NOTEBOOKS / "zh-CN" / "solutions" / f"{notebook.stem}.py"
    assert chinese_path.exists(), f"no Chinese solution zh-CN/solutions/{chinese_path.name}"
    chinese = chinese_path.read_text(encoding="utf-8")
    first = SOURCE_DIGEST.match(chinese.splitlines()[0])
    assert first and first["name"] == chinese_path.name, (
        f"zh-CN/solutions/{chinese_path.name} must start with "
        f"'# 译自 notebooks/solutions/{chinese_path.name}，sha256 前 12 位：{digest(english)}'"
    )
    assert first["digest"] == digest(english), (
        f"solutions/{chinese_path.name} changed since it was translated: update the Chinese comments, "
        f"then its first line's digest to {digest(english)}"
    )
    difference = translations.code_difference(english, chinese.split("\n", 1)[1])
    assert difference is None, f"zh-CN/solutions/{chinese_path.name}: {difference}"
    assert not translations.untranslated(english, chinese), f"zh-CN/solutions/{chinese_path.name}: no Chinese"


def test_the_code_comparison_sees_a_changed_solution():
    english = (NOTEBOOKS / "solutions" / "05_data_parallel.py").read_text(encoding="utf-8")
    assert translations.code_difference(english, english.replace("dim=1", "dim=0")) is not None
