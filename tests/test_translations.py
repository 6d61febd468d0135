"""The Chinese edition: complete, current and built; and the tools that keep it so catch what they must."""

from __future__ import annotations

import json
import shutil

import polib
import pytest
from links import notebook_text
from notebook_hygiene import ROOT

import translations


def test_every_notebook_and_message_is_translated_current_and_built():
    assert translations.check() == []


def test_the_glossary_pages_list_the_same_terms_in_the_same_order():
    def terms(page: str) -> list[str]:
        rows = [
            line for line in (ROOT / page).read_text(encoding="utf-8").splitlines() if line.startswith("| ")
        ]
        return [row.split("|")[1].strip() for row in rows[1:]]

    english, chinese = terms("docs/glossary.md"), terms("docs/zh-CN/glossary.md")
    assert len(english) >= 80 and english == chinese


# The tools, on a small course of one notebook in tmp_path.
TITLE = "# 01 · Tiny\n\n[![Open In Colab](https://colab.example/badge.svg)](https://x)\n\nSome words."
CODE = 'x = torch.ones(2, device="meta")  # a tensor without data\nprint(f"shape: {x.shape}")'
PLAIN = "y = x + 1"


def tiny_notebook() -> dict:
    cells = [
        {"cell_type": "markdown", "id": "title", "metadata": {}, "source": TITLE},
        {
            "cell_type": "code",
            "id": "course-setup",
            "metadata": {},
            "outputs": [],
            "execution_count": 1,
            "source": "# Set-up",
        },
        {"cell_type": "markdown", "id": "words", "metadata": {}, "source": "Run it."},
        {
            "cell_type": "code",
            "id": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": 2,
            "source": CODE,
        },
        {
            "cell_type": "code",
            "id": "plain",
            "metadata": {},
            "outputs": [],
            "execution_count": 3,
            "source": PLAIN,
        },
    ]
    return {"cells": cells, "metadata": {"course": {"budget_r": 2}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def course(tmp_path):
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "notebooks" / "01_tiny.ipynb").write_text(notebook_text(tiny_notebook()), encoding="utf-8")
    translations.update(tmp_path)
    return tmp_path


def fill(course, chinese: dict[str, str]) -> None:
    path = course / "translations" / "zh-CN" / "01_tiny.po"
    po = polib.pofile(str(path), wrapwidth=0)
    for entry in po:
        if entry.msgctxt in chinese:
            entry.msgstr = chinese[entry.msgctxt]
            if "fuzzy" in entry.flags:
                entry.flags.remove("fuzzy")
    po.save()


GOOD = {
    "title": "# 01 · 小例子\n\n一些话。",
    "words": "运行它。",
    "code": 'x = torch.ones(2, device="meta")  # 没有数据的张量\nprint(f"形状：{x.shape}")',
}


def problems(course) -> list[str]:
    return translations.notebook_problems(course / "notebooks" / "01_tiny.ipynb", course)


def test_units_are_the_cells_with_words_and_the_title_loses_its_buttons(course):
    po = polib.pofile(str(course / "translations" / "zh-CN" / "01_tiny.po"))
    assert [e.msgctxt for e in po] == ["title", "words", "code"]  # not the set-up cell, not `plain`
    assert "Open In Colab" not in po[0].msgid


def test_untranslated_units_are_named_by_notebook_and_cell(course):
    assert problems(course) == [
        f"01_tiny.ipynb {kind} cell {n} (id {cell}): not translated"
        for kind, n, cell in [("markdown", 1, "title"), ("markdown", 3, "words"), ("code", 4, "code")]
    ]


def test_a_complete_translation_builds_the_chinese_notebook_with_its_own_buttons_and_set_up(course):
    fill(course, GOOD)
    assert problems(course) == [
        "notebooks/zh-CN/01_tiny.ipynb: missing: run `python3 course.py translate build`, then regenerate it"
    ]
    written, failed = translations.build(course)
    assert failed == [] and written == ["notebooks/zh-CN/01_tiny.ipynb: written, 3 code cells to run"]
    built = json.loads((course / "notebooks" / "zh-CN" / "01_tiny.ipynb").read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in built["cells"]]
    assert "notebooks/zh-CN/01_tiny.ipynb" in sources[0] and sources[0].startswith("# 01 · 小例子\n")
    assert 'os.environ["COURSE_LANGUAGE"] = "zh-CN"' in sources[1]
    assert sources[2:] == [GOOD["words"], GOOD["code"], PLAIN]
    assert [c["id"] for c in built["cells"]] == [c["id"] for c in tiny_notebook()["cells"]]
    assert problems(course) == [
        "notebooks/zh-CN/01_tiny.ipynb: has cells that never ran: run `python3 "
        "course.py regenerate notebooks/zh-CN/01_tiny.ipynb`"
    ]


@pytest.mark.parametrize(
    "code",
    [
        # a number, an expression in an f-string, a line added, another call
        'x = torch.ones(3, device="meta")  # 没有数据的张量\nprint(f"形状：{x.shape}")',
        'x = torch.ones(2, device="meta")  # 没有数据的张量\nprint(f"形状：{x.size()}")',
        'x = torch.ones(2, device="meta")\ny = 1  # 没有数据的张量\nprint(f"形状：{x.shape}")',
        'x = torch.zeros(2, device="meta")  # 没有数据的张量\nprint(f"形状：{x.shape}")',
    ],
)
def test_a_translation_that_changes_the_code_is_caught(course, code):
    fill(course, {**GOOD, "code": code})
    (found,) = problems(course)
    assert found.startswith("01_tiny.ipynb code cell 4 (id code): its code is not the English code")


def test_a_copied_english_text_is_caught(course):
    fill(course, {**GOOD, "words": "Run it."})
    assert problems(course) == [
        "01_tiny.ipynb markdown cell 3 (id words): the translation has no Chinese in it"
    ]


def test_a_change_to_the_english_makes_the_unit_stale_and_update_shows_the_old_english(course):
    fill(course, GOOD)
    translations.build(course)
    path = course / "notebooks" / "01_tiny.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][2]["source"] = "Run it twice."
    path.write_text(notebook_text(nb), encoding="utf-8")
    assert problems(course) == [
        "01_tiny.ipynb markdown cell 3 (id words): the English changed since it was translated; "
        "retranslate it in translations/zh-CN/01_tiny.po (`translate update` shows the old English as "
        "#| msgid)"
    ]
    translations.update(course)
    (entry,) = [
        e for e in polib.pofile(str(course / "translations/zh-CN/01_tiny.po")) if e.msgctxt == "words"
    ]
    assert entry.fuzzy and entry.previous_msgid == "Run it." and entry.msgid == "Run it twice."
    assert entry.msgstr == "运行它。"  # kept, for the translator to correct
    _, failed = translations.build(course)
    assert failed and "markdown cell 3 (id words)" in failed[0]


def test_a_hand_edit_of_the_chinese_notebook_is_caught(course):
    fill(course, GOOD)
    translations.build(course)
    path = course / "notebooks" / "zh-CN" / "01_tiny.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][2]["source"] = "运行它，快。"
    for cell in nb["cells"]:
        cell["execution_count"] = cell.get("execution_count") or 1
    path.write_text(notebook_text(nb), encoding="utf-8")
    assert problems(course) == [
        "notebooks/zh-CN/01_tiny.ipynb: not built from the current translation: run `python3 course.py "
        "translate build`"
    ]


def test_english_of_maps_both_editions_and_nothing_else(course):
    english = course / "notebooks" / "01_tiny.ipynb"
    assert translations.english_of(english, course) == english
    assert translations.english_of(course / "notebooks" / "zh-CN" / "01_tiny.ipynb", course) == english
    assert translations.english_of(course / "pyproject.toml", course) is None


def test_messages_must_be_literal_translated_and_keep_their_fields(tmp_path):
    package, messages = tmp_path / "pkg", tmp_path / "locale"
    package.mkdir()
    messages.mkdir()
    (package / "m.py").write_text(
        "from course_utils.i18n import _, N_\n"
        'A = N_("a constant")\n'
        "def f(n, what):\n"
        '    return _("{n} ranks ran") + _(f"{what}") + _("left")\n',
        encoding="utf-8",
    )
    po = translations.load_po(messages / "m.po")
    po.append(polib.POEntry(msgid="a constant", msgstr="一个常量"))
    po.append(polib.POEntry(msgid="{n} ranks ran", msgstr="运行了 {count} 个 rank"))
    po.append(polib.POEntry(msgid="left", msgstr="left"))
    po.append(polib.POEntry(msgid="gone", msgstr="没了"))
    po.save(str(messages / "m.po"))
    (messages / "other.po").write_text("", encoding="utf-8")
    found = translations.message_problems(package, messages)
    assert found == [
        "course_utils.m, line 4: _() takes one string literal (put values in with .format() after it), "
        "or the message cannot be translated",
        "m:4: the translation's fields ['{count}'] are not the English's ['{n}']",
        "m:4: the translation has no Chinese in it: 'left'",
        "m.po: 'gone' is no longer in the code",
        "other.po: no module course_utils.other marks messages",
    ]


def test_the_chinese_code_of_a_real_cell_passes_and_a_changed_constant_does_not():
    english = 'print("bytes:", 4 * 1024)  # four KiB'
    assert translations.code_difference(english, 'print("字节数：", 4 * 1024)  # 4 KiB') is None
    assert translations.code_difference(english, 'print("字节数：", 4 * 1000)') is not None
    assert translations.code_difference(english, 'print("字节数："  4 * 1024)').startswith(
        "the translation is not valid Python"
    )


def test_a_chinese_page_names_the_english_it_translates_and_goes_stale_with_it(tmp_path):
    (tmp_path / "docs" / "zh-CN").mkdir(parents=True)
    for chinese, english in translations.PAGES.items():
        (tmp_path / english).write_text("# Words\n", encoding="utf-8")
        digest = translations.page_digest(tmp_path / english)
        (tmp_path / chinese).write_text(f"<!-- translated from {english} at sha256 {digest} -->\n# 字\n")
    assert translations.page_problems(tmp_path) == []
    (tmp_path / "docs" / "seeds.md").write_text("# Other words\n", encoding="utf-8")
    (tmp_path / "README.zh-CN.md").write_text("# 字\n", encoding="utf-8")
    (tmp_path / "docs" / "zh-CN" / "glossary.md").unlink()
    digests = {
        english: translations.page_digest(tmp_path / english) for english in translations.PAGES.values()
    }
    assert translations.page_problems(tmp_path) == [
        f"README.zh-CN.md: no line `<!-- translated from README.md at sha256 {digests['README.md']} -->`",
        f"docs/zh-CN/seeds.md: docs/seeds.md changed since it was translated (`git log -p docs/seeds.md`): "
        f"bring the Chinese in line, then record sha256 {digests['docs/seeds.md']} in its first line",
        "docs/zh-CN/glossary.md: missing (the translation of docs/glossary.md)",
    ]


TIMED = (
    'timer = benchmark.Timer("a @ a", globals={"a": a}, label="matmul")\n'
    'print(f"mean: {timer.timeit(10).mean:.4f} s on", torch.ones(1, device="meta").device)\n'
    'dist.init_process_group("gloo")'
)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"a @ a"', '"a + a"'),  # the statement Timer runs
        (":.4f}", ":.2f}"),  # a format specification
        ('device="meta"', 'device="cpu"'),  # a keyword's value
        ('device="meta"', 'device="元"'),  # the same, even with Chinese in it
        ('("gloo")', '("nccl")'),  # a backend, by position
    ],
)
def test_a_translation_that_changes_a_string_that_is_code_is_caught(old, new):
    found = translations.code_difference(TIMED, TIMED.replace(old, new))
    assert found is not None and new.strip('()"') in found


def test_a_translation_changes_prose_strings_freely():
    chinese = (
        TIMED.replace('"matmul"', '"矩阵乘法"').replace("mean: ", "平均：").replace(" s on", " 秒，设备")
    )
    assert translations.code_difference(TIMED, chinese) is None
    # a prose string that is a single word may become Chinese, not another English word
    assert translations.code_difference('print("done")', 'print("完成")') is None
    assert translations.code_difference('x = "cuda"', 'x = "cpu"') is not None


ENGLISH_WORKER = '''"""Print who this process is."""

import os

RANK = int(os.environ.get("RANK", "0"))  # set by torchrun


def main() -> None:
    """Print the rank."""
    print("rank", RANK)
'''
CHINESE_WORKER = (
    ENGLISH_WORKER.replace("Print who this process is.", "打印这个进程是谁。")
    .replace("set by torchrun", "由 torchrun 设置")
    .replace("Print the rank.", "打印 rank。")
)
ENGLISH_BATCH = "#!/bin/bash\n# two nodes\n#SBATCH --nodes=2   # N machines\nsrun python w.py  # every rank\n"


@pytest.fixture
def workers(tmp_path):
    """A course with two English worker files, one of them translated and built."""
    (tmp_path / "notebooks" / "workers").mkdir(parents=True)
    (tmp_path / "notebooks" / "workers" / "w.py").write_text(ENGLISH_WORKER, encoding="utf-8")
    (tmp_path / "notebooks" / "workers" / "job.sbatch").write_text(ENGLISH_BATCH, encoding="utf-8")
    (tmp_path / "notebooks" / "zh-CN").mkdir()
    (tmp_path / "notebooks" / "zh-CN" / "workers").symlink_to("../workers")  # the layout before
    folder = tmp_path / translations.WORKER_TRANSLATIONS
    folder.mkdir(parents=True)
    (folder / "w.py").write_text(CHINESE_WORKER, encoding="utf-8")
    digest = translations.page_digest(tmp_path / "notebooks" / "workers" / "w.py")
    (folder / translations.WORKER_SOURCES).write_text(json.dumps({"w.py": digest}), encoding="utf-8")
    return tmp_path


def test_translated_workers_are_built_as_links_beside_links_to_the_english_ones(workers):
    assert translations.worker_problems(workers) == [
        "notebooks/zh-CN/workers: not built from translations/zh-CN/workers; run `course.py translate build`"
    ]
    assert len(translations.build_workers(workers)) == 2
    built = workers / "notebooks" / "zh-CN" / "workers"
    assert (built / "w.py").read_text(encoding="utf-8") == CHINESE_WORKER  # through a link to it
    assert (built / "job.sbatch").read_text(encoding="utf-8") == ENGLISH_BATCH  # the English, linked
    (built / "__pycache__").mkdir()  # what importing a worker from a Chinese notebook leaves
    assert translations.worker_problems(workers) == [] and translations.build_workers(workers) == []
    assert (built / "__pycache__").is_dir()
    (built / "w.py").unlink()
    (built / "w.py").write_text(CHINESE_WORKER + "# 手改\n", encoding="utf-8")  # a copy, edited by hand
    assert translations.worker_problems(workers)[-1].endswith("run `course.py translate build`")
    (built / "w.py").unlink()
    (built / "w.py").symlink_to("../../workers/w.py")  # the English, where a translation exists
    assert translations.worker_problems(workers)[-1].endswith("run `course.py translate build`")
    assert len(translations.build_workers(workers)) == 1 and translations.worker_problems(workers) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"RANK", "0"', '"RANK", "1"'),  # a constant
        ('print("rank", RANK)', 'print("rank：", RANK)'),  # a string: the scripts keep theirs
        ("    print", "    return\n    print"),  # a statement
    ],
)
def test_a_translated_worker_whose_code_differs_is_caught(workers, old, new):
    path = workers / translations.WORKER_TRANSLATIONS / "w.py"
    path.write_text(CHINESE_WORKER.replace(old, new), encoding="utf-8")
    translations.build_workers(workers)
    assert translations.worker_problems(workers) == [
        "translations/zh-CN/workers/w.py: its code differs from notebooks/workers/w.py's; "
        "translate only comments and docstrings"
    ]


def test_a_change_to_an_english_worker_makes_its_translation_stale(workers):
    english = workers / "notebooks" / "workers" / "w.py"
    english.write_text(ENGLISH_WORKER.replace("set by torchrun", "torchrun sets it"), encoding="utf-8")
    translations.build_workers(workers)
    digest = translations.page_digest(english)
    assert translations.worker_problems(workers) == [
        "translations/zh-CN/workers/w.py: notebooks/workers/w.py changed since it was translated "
        "(`git log -p notebooks/workers/w.py`): bring the Chinese in line, then record sha256 "
        f"{digest} for it in translated_from.json"
    ]


def test_a_batch_scripts_comments_translate_and_its_directives_do_not():
    code = translations.script_code(ENGLISH_BATCH, ".sbatch")
    chinese = ENGLISH_BATCH.replace("# two nodes", "# 两个节点").replace("# N machines", "# N 台机器")
    assert translations.script_code(chinese, ".sbatch") == code
    assert translations.script_code(ENGLISH_BATCH.replace("--nodes=2", "--nodes=3"), ".sbatch") != code
    assert translations.script_code(ENGLISH_BATCH.replace("w.py  #", "v.py  #"), ".sbatch") != code
