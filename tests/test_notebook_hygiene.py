"""The committed notebooks are executed, clean and checked; the checker itself catches breakage."""

from __future__ import annotations

import copy
import json

import pytest
from notebook_hygiene import ROOT, notebook_problems, readme_order_problems

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert notebook_problems(nb, path.name, README) == []


def test_readme_lists_notebooks_in_order():
    assert readme_order_problems([p.name for p in NOTEBOOKS], README) == []


def good_notebook() -> dict:
    title = "# 99 · Test\n\n## What you will learn\n- x"
    return {
        "cells": [
            {"cell_type": "markdown", "source": title, "metadata": {}},
            {
                "cell_type": "code",
                "execution_count": 1,
                "source": "print(1)",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}],
            },
            {
                "cell_type": "code",
                "execution_count": 2,
                "metadata": {"tags": ["nbval-ignore-output"]},
                "source": "# NBVAL_IGNORE_OUTPUT: lists this machine's GPUs\nprint(2)",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "2\n"}],
            },
            {
                "cell_type": "code",
                "execution_count": 3,
                "source": "3",
                "outputs": [{"output_type": "execute_result", "data": {"text/plain": "3"}}],
            },
            {"cell_type": "markdown", "source": "## Summary\n## Exercises", "metadata": {}},
        ]
    }


def test_checker_accepts_a_good_notebook():
    assert notebook_problems(good_notebook(), "99_test.ipynb", "99_test.ipynb") == []


def broken(change) -> list[str]:
    nb = copy.deepcopy(good_notebook())
    change(nb)
    return notebook_problems(nb, "99_test.ipynb", "99_test.ipynb")


def test_checker_catches_unexecuted_cells():
    def strip(nb):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["execution_count"], cell["outputs"] = None, []

    problems = broken(strip)
    assert any("execution counts" in p for p in problems)
    assert any("compares" in p for p in problems)


def test_checker_catches_out_of_order_execution():
    problems = broken(lambda nb: nb["cells"][1].update(execution_count=5))
    assert any("execution counts" in p for p in problems)


def test_checker_catches_stderr_and_machine_paths():
    warning = {"output_type": "stream", "name": "stderr", "text": f"{ROOT}/x.py: UserWarning"}
    problems = broken(lambda nb: nb["cells"][1]["outputs"].append(warning))
    assert any("stderr" in p for p in problems)
    assert any("machine path" in p for p in problems)


def test_checker_catches_marker_without_reason_and_too_few_compared_cells():
    def ignore_all(nb):
        for cell in nb["cells"][1:4]:
            cell["source"] = "# NBVAL_IGNORE_OUTPUT\n" + cell["source"]

    problems = broken(ignore_all)
    assert any("without a reason" in p for p in problems)
    assert any("only 0 of 3" in p for p in problems)


def test_checker_catches_a_marker_that_nbval_would_not_honour():
    """nbval ignores output only for the bare marker or its tag; a reasoned marker needs the tag."""
    problems = broken(lambda nb: nb["cells"][2].pop("metadata"))
    assert any("do not match its marker comments" in p for p in problems)
    problems = broken(lambda nb: nb["cells"][1].update(metadata={"tags": ["nbval-skip"]}))
    assert any("code cell 1: nbval tags ['nbval-skip']" in p for p in problems)


def test_checker_catches_missing_title_sections_and_readme_entry():
    def untitle(nb):
        nb["cells"][0]["source"] = "Some text"
        nb["cells"][-1]["source"] = "The end"

    problems = broken(untitle)
    assert any("'# ' title" in p for p in problems)
    assert any("What you will learn" in p for p in problems)
    assert any("Summary" in p for p in problems)
    assert notebook_problems(good_notebook(), "99_test.ipynb", "README") == ["not listed in README.md"]


def test_checker_catches_readme_order():
    readme = "01_b.ipynb then 00_a.ipynb"
    assert readme_order_problems(["00_a.ipynb", "01_b.ipynb"], readme)
    assert readme_order_problems(["00_a.ipynb", "01_b.ipynb"], "00_a.ipynb 01_b.ipynb") == []
