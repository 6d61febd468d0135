"""The committed notebooks are executed, clean and checked; the checker itself catches breakage."""

from __future__ import annotations

import copy
import json
import re

import pytest
from notebook_hygiene import (
    ROOT,
    cell_text,
    course_metadata_problems,
    helper_row,
    helper_table_problems,
    map_minutes,
    notebook_problems,
    notebooks_where,
    reading_minutes,
    readme_notebook_table,
    readme_order_problems,
)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
README = (ROOT / "README.md").read_text(encoding="utf-8")
CHINESE = sorted((ROOT / "notebooks" / "zh-CN").glob("[0-9][0-9]_*.ipynb"))
README_ZH = ROOT / "README.zh-CN.md"


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert notebook_problems(nb, path.name, README) == []


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: f"zh-CN/{p.name}")
def test_chinese_notebook_is_clean(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert notebook_problems(nb, path.name, README_ZH.read_text(encoding="utf-8"), "zh-CN") == []


def test_the_chinese_readme_lists_the_chinese_notebooks_in_order():
    assert readme_notebook_table(README_ZH.read_text(encoding="utf-8")) == [p.name for p in NOTEBOOKS]


def test_the_checker_wants_each_edition_s_own_headings():
    nb = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    problems = notebook_problems(nb, NOTEBOOKS[0].name, README, "zh-CN")
    assert "the first cell has no '## 你将学到' section" in problems
    assert "no '## 小结' section" in problems


def test_readme_lists_notebooks_in_order():
    assert readme_order_problems([p.name for p in NOTEBOOKS], README) == []


def test_readme_table_is_what_is_checked():
    assert readme_notebook_table(README) == [p.name for p in NOTEBOOKS]


TABLE = "| notebook | what |\n|---|---|\n| `99_test.ipynb` | testing |\n"


def good_notebook() -> dict:
    title = "# 99 · Test\n\n## What you will learn\n- x\n\n## What you need\nNothing but a CPU.\n"
    course = {"starts_processes": False, "uses_gpus": "none", "budget_r": 4, "reads_device_variables": False}
    return {
        "metadata": {"course": course},
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
        ],
    }


def test_checker_accepts_a_good_notebook():
    assert notebook_problems(good_notebook(), "99_test.ipynb", TABLE) == []


def broken(change) -> list[str]:
    nb = copy.deepcopy(good_notebook())
    change(nb)
    return notebook_problems(nb, "99_test.ipynb", TABLE)


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
    assert any("What you need" in p for p in problems)
    unlisted = ["not listed in README.md's notebook table"]
    assert notebook_problems(good_notebook(), "99_test.ipynb", "README") == unlisted


def test_checker_wants_the_notebook_in_the_table_not_just_mentioned():
    prose = "Open `99_test.ipynb` on Binder.\n\n| notebook | what |\n|---|---|\n| `00_a.ipynb` | a |\n"
    assert notebook_problems(good_notebook(), "99_test.ipynb", prose) == [
        "not listed in README.md's notebook table"
    ]


def test_checker_catches_a_missing_or_wrong_what_you_need_section():
    def drop(nb):
        nb["cells"][0]["source"] = "# 99 · Test\n\n## What you will learn\n- x\n"

    assert broken(drop) == ["the first cell has no '## What you need' section"]

    def needs_a_gpu(nb):
        nb["cells"][0]["source"] = nb["cells"][0]["source"].replace("Nothing but a CPU.", "An NVIDIA GPU.")

    assert broken(needs_a_gpu) == ["the '## What you need' section does not answer 'Nothing but a CPU.'"]

    def elsewhere(nb):  # the section must be in the opening cell, not somewhere later
        nb["cells"][0]["source"] = "# 99 · Test\n\n## What you will learn\n- x\n"
        nb["cells"][-1]["source"] += "\n## What you need\nNothing but a CPU."

    assert broken(elsewhere) == ["the first cell has no '## What you need' section"]


@pytest.mark.parametrize(
    "path",
    [
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py",
        "/usr/local/lib/python3.11/site-packages/x.py",
        "/opt/conda/lib/python3.11/x.py",
        "/srv/conda/envs/notebook/bin/python",
        "/root/.cache/torch",
        "cwd is /root",
        "/home/jovyan/work",
        "/Users/ana/course",
        "/mnt/data/ckpt.pt",
        "/tmp/tmpabc123/model.pt",
        "C:\\Users\\ana\\course",
        "D:\\envs\\torch",
    ],
)
def test_checker_catches_machine_paths(path):
    output = {"output_type": "stream", "name": "stdout", "text": f"saved to {path}\n"}
    problems = broken(lambda nb: nb["cells"][1]["outputs"].append(output))
    assert any("machine path" in p for p in problems), path
    # the same path inside JSON data (an execute_result) is caught too
    result = {"output_type": "execute_result", "data": {"text/plain": repr(path)}}
    problems = broken(lambda nb: nb["cells"][3]["outputs"].append(result))
    assert any("machine path" in p for p in problems), path


@pytest.mark.parametrize(
    "text",
    [
        "https://pytorch.org/docs/stable/generated/torch.load.html",
        "CUDA_VISIBLE_DEVICES='MIG-GPU-1/1/0'",
        "input/output and/or CPU/GPU",
        "the variable /variance ratio",
        "a tensor of shape 2x3: tensor([1, 2])",
    ],
)
def test_checker_does_not_flag_ordinary_text(text):
    output = {"output_type": "stream", "name": "stdout", "text": text}
    assert broken(lambda nb: nb["cells"][1]["outputs"].append(output)) == []


def test_checker_ignores_image_data():
    image = {"output_type": "display_data", "data": {"image/png": "iVBOR/home/x+/usr/lib"}}
    assert broken(lambda nb: nb["cells"][3]["outputs"].append(image)) == []


def test_checker_catches_readme_order():
    table = "| `{}` | x |\n| `{}` | y |\n"
    names = ["00_a.ipynb", "01_b.ipynb"]
    assert readme_order_problems(names, table.format("01_b.ipynb", "00_a.ipynb"))
    assert readme_order_problems(names, table.format("00_a.ipynb", "01_b.ipynb")) == []


def test_readme_order_is_read_from_the_table_not_from_first_mentions():
    table = "| notebook | what |\n|---|---|\n| `00_a.ipynb` | a |\n| `01_b.ipynb` | b |\n"
    # prose that mentions 01 before 00 is fine: only the table's order counts
    assert readme_order_problems(["00_a.ipynb", "01_b.ipynb"], "See 01_b.ipynb.\n\n" + table) == []
    # a table out of order is caught even when the prose mentions them in order
    swapped = table.replace("00_a", "XX").replace("01_b", "00_a").replace("XX", "01_b")
    problems = readme_order_problems(["00_a.ipynb", "01_b.ipynb"], "00_a.ipynb 01_b.ipynb\n" + swapped)
    assert problems and "not ['00_a.ipynb', '01_b.ipynb']" in problems[0]
    # a notebook missing from the table, one the table invents, and no table at all
    assert readme_order_problems(["00_a.ipynb", "01_b.ipynb", "02_c.ipynb"], table) == [
        "README's table does not list ['02_c.ipynb']"
    ]
    invented = ["README's table lists ['01_b.ipynb'], which do not exist"]
    assert readme_order_problems(["00_a.ipynb"], table) == invented
    assert "no notebook table" in readme_order_problems(["00_a.ipynb"], "00_a.ipynb")[0]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"budget_r": 0}, "metadata.course.budget_r is 0, not a number of R above 0, at most 6"),
        ({"budget_r": 6.5}, "budget_r is 6.5"),
        ({"budget_r": True}, "budget_r is True"),
        ({"budget_r": float("nan")}, "budget_r is nan"),
        ({"floor_r": 9}, "has 'floor_r' without 'floor_why'"),
        ({"floor_r": 5, "floor_why": "it starts four fresh Pythons that import torch"}, "floor_r is 5"),
        ({"floor_r": 9, "floor_why": "slow"}, "floor_why is 'slow'"),
        ({"starts_processes": "yes"}, "starts_processes is 'yes', not true or false"),
        ({"uses_gpus": 2}, 'uses_gpus is 2, not "none", "1+" or "2+"'),
        ({"reads_device_variables": None}, "reads_device_variables is None"),
        ({"budget": 12}, "unknown keys ['budget']"),
    ],
)
def test_checker_catches_bad_course_metadata(change, problem):
    def edit(nb):
        nb["metadata"]["course"].update(change)

    assert any(problem in p for p in broken(edit))


def test_checker_wants_every_course_key():
    nb = good_notebook()
    del nb["metadata"]["course"]["uses_gpus"]
    assert course_metadata_problems(nb) == ['metadata.course has no \'uses_gpus\' ("none", "1+" or "2+")']
    assert "no metadata.course block" in course_metadata_problems({"metadata": {}})[0]


def test_odd_env_notebooks_come_from_the_metadata():
    names = notebooks_where("reads_device_variables")
    assert names and all(p.startswith("notebooks/") and (ROOT / p).is_file() for p in names)
    for path in NOTEBOOKS:
        course = json.loads(path.read_text(encoding="utf-8"))["metadata"]["course"]
        assert (f"notebooks/{path.name}" in names) is course["reads_device_variables"]


CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_contributing_maps_each_notebook_to_its_helpers_and_their_tests():
    notebooks = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in NOTEBOOKS}
    assert helper_table_problems(notebooks, CONTRIBUTING) == []


def test_the_helper_map_checker_catches_stale_rows(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": "from course_utils.devices import best_device\n"}]}
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_devices.py").write_text("")
    heading = "## Which helpers each notebook uses\n| notebook | helpers | tests |\n|---|---|---|\n"
    right = heading + helper_row("99_x.ipynb", ["devices"]) + "\n"
    assert helper_table_problems({"99_x.ipynb": nb}, right, tmp_path) == []
    stale = heading + "| `99_x.ipynb` | `gpus` | `tests/test_gpus.py` |\n"
    assert helper_table_problems({"99_x.ipynb": nb}, stale, tmp_path) == [
        "99_x.ipynb: the table should say | `99_x.ipynb` | `devices` | `tests/test_devices.py` |"
    ]
    gone = right + helper_row("98_gone.ipynb", ["devices"]) + "\n"
    assert helper_table_problems({"99_x.ipynb": nb}, gone, tmp_path) == [
        "the table lists 98_gone.ipynb, which does not exist"
    ]
    (tmp_path / "tests" / "test_devices.py").unlink()
    assert helper_table_problems({"99_x.ipynb": nb}, right, tmp_path) == [
        "99_x.ipynb: tests/test_devices.py does not exist"
    ]
    assert "no section" in helper_table_problems({}, "# nothing", tmp_path)[0]


PLACEHOLDER = re.compile(r"^\s*\w+\s*=\s*(None|\.\.\.)\s*#", re.MULTILINE)


def exercise_placeholders(nb: dict) -> set[str]:
    """The placeholders (`x = ...  # your answer`) of the cells that call an exercise check."""
    return {
        found
        for cell in nb["cells"]
        if cell["cell_type"] == "code" and "check_" in "".join(cell["source"])
        for found in PLACEHOLDER.findall("".join(cell["source"]))
    }


def test_every_exercise_leaves_its_answer_as_an_ellipsis():
    found = {
        path.name: exercise_placeholders(json.loads(path.read_text(encoding="utf-8"))) for path in NOTEBOOKS
    }
    assert {name: kinds for name, kinds in found.items() if kinds - {"..."}} == {}
    assert (
        found["05_data_parallel.ipynb"] == found["10_beyond_ddp.ipynb"] == {"..."}
    )  # the detector sees them
    cell = {
        "cell_type": "code",
        "source": ["my_sizes = None  # your prediction\n", "check_replica_sizes(my_sizes)"],
    }
    assert exercise_placeholders({"cells": [cell]}) == {"None"}


def test_the_course_map_gives_each_notebooks_reading_time_in_both_editions():
    wanted = {
        path.name[:2]: reading_minutes(json.loads(path.read_text(encoding="utf-8"))) for path in NOTEBOOKS
    }
    for edition in (NOTEBOOKS, CHINESE):
        start = json.loads(edition[0].read_text(encoding="utf-8"))
        course_map = next(cell_text(c) for c in start["cells"] if "| 15 " in cell_text(c))
        assert map_minutes(course_map) == wanted, f"{edition[0]}: write these reading times into the map"
    assert map_minutes("| 05 data parallel | how it splits | 25 min |\n| 06 x | y |") == {"05": 25}
    assert reading_minutes({"cells": [{"cell_type": "markdown", "source": ["word " * 3000]}]}) == 15
