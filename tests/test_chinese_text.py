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


# English left in the Chinese edition's outputs: three or more English words in a row, outside code
# (anything with _ . ( ) [ ] = : / in it, quotations, True/False/None), error outputs, the worker
# scripts that cells print whole (translated on their own: translations/zh-CN/workers/), and the
# text that PyTorch, torchrun or NVML print, which the Chinese edition quotes as it is: from a line
# that names an error, a warning, a traceback or a torchrun log prefix to the next blank line. One
# or two English words (a term in a table) are not looked for. What may stay (a run that begins with
# one of these), and why:
ALLOWED_OUTPUT_RUNS = {
    "In input size output size": "05 runs source article 003's Model, which prints this",
    "batch size in": "05 runs source article 002's forward, which prints this",
    "backward reaches layer": "an event of workers/bucket_events.py (09), whose code stays English",
    "all-reduce of bucket": "the same worker's other event",
    "Shared Library Not Found": "NVML's message when there is no driver (01, 11)",
    "Detected mismatch between collectives on ranks": "PyTorch's (11)",
    "rank Detected mismatch between collectives on ranks": "the same, after the rank's label (11)",
    "failed to pass": "PyTorch's monitoredBarrier message (11)",
    "traceback To enable traceback": "torchrun's line without @record (08)",
    "This flag results in an extra traversal": "DDP's find_unused_parameters warning (08)",
    "Setting environment variable for each process": "torchrun's OMP_NUM_THREADS notice (07)",
    "x mesh tp": "a layout's name, TP 8 x PP 4 x HSDP (2 x 2), before its mesh (14)",
}
CODE_LIKE = re.compile(
    r"`[^`]*`|\{[^}]*\}|“[^”]*”|\"[^\"]*\"|'[^']*'|https?://\S+|<[^>]*>|\S*[_.()\[\]=:/\\]\S*|\b(?:True|False|None)\b"
)
THREE_WORDS = re.compile(r"\b[A-Za-z][a-z'-]*(?:[ ,]+[A-Za-z][a-z'-]*){2,}\b")
QUOTES_FOREIGN_TEXT = re.compile(
    r"Error\b|Warning\b|Exception\b|Traceback|^\s*File \"|EMMDD|Root Cause|torch\.\w+\.\w+"
)


def english_in_output(text: str) -> list[str]:
    """The runs of English words in a Chinese notebook's output text, by the rules above."""
    found, quoting = [], False
    for line in text.splitlines():
        quoting = bool(line.strip()) and (quoting or bool(QUOTES_FOREIGN_TEXT.search(line)))
        if not quoting:
            found += [" ".join(run.split()) for run in THREE_WORDS.findall(CODE_LIKE.sub(" ", line))]
    return found


def allowed(run: str) -> bool:
    return any(run.startswith(allowed_run) for allowed_run in ALLOWED_OUTPUT_RUNS)


def test_the_chinese_outputs_keep_no_english_beyond_code_quotations_and_the_allowed():
    found = []
    for path in sorted((ROOT / "notebooks" / "zh-CN").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or ("workers/" in source and ".read_text()" in source):
                continue
            for output in cell.get("outputs", []):
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                runs = english_in_output("".join(text)) if output["output_type"] != "error" else []
                found += [f"{path.name} {cell.get('id')}: {run!r}" for run in runs if not allowed(run)]
    assert found == []


def test_the_output_detector_finds_a_label_and_spares_code_quotations_and_pytorchs_text():
    assert english_in_output("Adam step counters      16        16") == ["Adam step counters"]
    assert english_in_output("持有的字节数 bytes held per rank") == ["bytes held per rank"]
    assert english_in_output("参数  132,352\ntorch.cuda.current_device()  is_cuda False") == []
    warning = "UserWarning: There is an imbalance between your GPUs.\nYou may want to exclude GPU 1\n\n"
    assert english_in_output(warning + "one more line here") == ["one more line here"]
