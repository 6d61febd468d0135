"""`course.py format`: every code line of both editions fits the page's width, and formatting never
changes what a cell does (scripts/format_cells.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import format_cells
import pytest
from format_cells import WIDTH, columns, format_code, too_wide

ROOT = Path(__file__).resolve().parent.parent


def value_of(code: str, name: str) -> object:
    """What `name` is after running `code`."""
    scope: dict[str, object] = {}
    exec(compile(code, "<cell>", "exec"), scope)
    return scope[name]


def test_a_wide_trailing_comment_moves_above_its_line_and_wraps():
    code = "x = compute_something(1, 2)  # " + "a long explanation " * 6 + "end"
    done = format_code(code)
    lines = done.split("\n")
    assert lines[-1] == "x = compute_something(1, 2)"
    assert all(line.startswith("# ") for line in lines[:-1]) and len(lines) >= 3
    assert " ".join(line[2:] for line in lines[:-1]) == code.split("  # ")[1]
    assert too_wide(done) == []


def test_a_wide_string_in_brackets_is_split_into_the_same_value():
    code = 'message = print_me("' + "word " * 30 + 'end")'
    done = format_code(code)
    assert too_wide(done) == []
    call = ast.parse(done).body[0].value
    assert call.args[0].value == "word " * 30 + "end"


@pytest.mark.parametrize(
    "code",
    [
        'text = "' + "part of a sentence " * 8 + '"',
        'def f(n):\n    return f"{n} items: ' + "and more words " * 6 + '{n + 1}"',
        'label = f"{1:<5}{2:>9}{3:>9}{4:>9}{5:>9}{6:>9}{7:>9}{8:>9}{9:>9}{10:>9}"',
    ],
    ids=["assignment", "return", "f-string fields"],
)
def test_a_wide_string_alone_on_the_right_is_parenthesized_and_keeps_its_value(code):
    done = format_code(code)
    assert too_wide(done) == [], done
    if code.startswith("def"):
        assert value_of(done, "f")(3) == value_of(code, "f")(3)
    else:
        name = code.split(" = ")[0]
        assert value_of(done, name) == value_of(code, name)


def test_a_wide_docstring_wraps_at_its_indentation():
    code = 'def f():\n    """' + "This explains the function at length. " * 4 + '"""\n    return 1'
    done = format_code(code)
    assert too_wide(done) == []
    assert value_of(done, "f")() == 1
    assert " ".join(value_of(done, "f").__doc__.split()) == " ".join(value_of(code, "f").__doc__.split())


def test_code_inside_a_script_string_is_formatted_as_code_and_parses_the_same():
    script = (
        'import os\nprint("the child sees", repr(os.environ.get("CUDA_VISIBLE_DEVICES", "unset")), '
        "flush=True)\n"
    )
    code = f'probe = """\n{script}"""'
    done = format_code(code)
    assert too_wide(done) == []
    new_script = value_of(done, "probe")
    assert ast.dump(ast.parse(new_script)) == ast.dump(ast.parse(script))


def test_chinese_counts_two_columns_and_breaks_between_characters():
    assert columns("中文ab") == 6
    code = "# " + "这是一段很长的中文注释，" * 8
    done = format_code(code)
    assert too_wide(done) == [] and len(done.split("\n")) > 1
    assert all(not line[2:].startswith("，") for line in done.split("\n"))
    assert "".join(line[2:] for line in done.split("\n")) == code[2:]


def test_magics_and_a_cell_that_does_not_parse_are_left_alone():
    magic = "%timeit sum(range(1000))  # " + "a comment " * 10
    assert format_code(magic).split("\n")[-1].startswith("%timeit")
    broken = "def f(:\n    pass  # " + "x " * 50
    assert format_code(broken) == broken


@pytest.mark.parametrize("edition", ["notebooks", "notebooks/zh-CN"])
def test_every_code_line_of_every_notebook_fits_the_page(edition):
    wide = []
    for path in sorted((ROOT / edition).glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                wide += [f"{path.name}: {line}" for line in too_wide("".join(cell["source"]), WIDTH)]
    assert wide == [], f"{len(wide)} lines over {WIDTH} columns: run `python3 course.py format`"


def test_the_check_names_each_line_too_wide(tmp_path):
    (tmp_path / "notebooks").mkdir()
    cells = [{"cell_type": "code", "id": "a", "metadata": {}, "source": "x = 1  # " + "why " * 23}]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "00_x.ipynb").write_text(json.dumps(notebook))
    said = format_cells.format_course(tmp_path, check=True)
    assert len(said) == 1 and said[0].startswith("00_x.ipynb: 101 columns: x = 1  # why")
    assert format_cells.format_course(tmp_path) == ["notebooks/00_x.ipynb: formatted"]
    assert format_cells.format_course(tmp_path, check=True) == []
