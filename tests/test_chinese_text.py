"""The Chinese edition reads as Chinese text: no line break or stray space between two Chinese words.

A line break inside a markdown paragraph renders as a space, and Chinese puts no space between
words: the translation tooling joins such lines (translations.joined), and the translations hold
no space between two Chinese characters.
"""

from __future__ import annotations

import json
import re

import polib
import pytest
from notebook_hygiene import ROOT

import translations

HAN = "\u3400-\u9fff"
STRAY_SPACE = re.compile(f"[{HAN}] +[{HAN}]")
BROKEN_LINE = re.compile(f"[{HAN}\u3000-\u303f\uff00-\uffef]\n[{HAN}]")
PO_FILES = sorted((ROOT / "translations" / "zh-CN").glob("*.po"))


def prose(markdown: str) -> str:
    """The markdown without code: fenced blocks and `spans`."""
    return re.sub(r"`[^`\n]*`", "x", re.sub(r"```.*?```", "", markdown, flags=re.DOTALL))


@pytest.mark.parametrize("path", PO_FILES, ids=lambda p: p.name)
def test_no_space_between_two_chinese_words(path):
    stray = [
        f"{entry.msgctxt}: {found!r}"
        for entry in polib.pofile(str(path))
        if entry.msgstr and not entry.obsolete
        for found in STRAY_SPACE.findall(prose(entry.msgstr))
    ]
    assert stray == []


def test_the_chinese_notebooks_have_no_line_break_inside_a_paragraph():
    broken = []
    for path in sorted((ROOT / "notebooks" / "zh-CN").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            if translations.joined(text) != text:
                broken.append(f"{path.name} {cell.get('id')}: {BROKEN_LINE.findall(prose(text))}")
    assert broken == []


@pytest.mark.parametrize(
    ("markdown", "wanted"),
    [
        ("第一行\n第二行。", "第一行第二行。"),
        ("计数，\n说明", "计数，说明"),
        ("## 你需要\n只需要 CPU。", "## 你需要\n只需要 CPU。"),
        ("- 一项\n- 两项", "- 一项\n- 两项"),
        ("```\n代码\n代码\n```", "```\n代码\n代码\n```"),
        ("English line\nnext line", "English line\nnext line"),
        ("| 表 |\n| 格 |", "| 表 |\n| 格 |"),
    ],
)
def test_joining_keeps_headings_lists_code_and_tables(markdown, wanted):
    assert translations.joined(markdown) == wanted
