"""course_utils speaks the notebook's language: the one its set-up cell names, not the machine's locale."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import polib
import pytest

from course_utils import i18n
from course_utils.exercises import CheckResult


def test_english_is_the_default_and_the_locale_does_not_matter(monkeypatch):
    monkeypatch.delenv(i18n.LANGUAGE_VARIABLE, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    assert i18n.language() == "en"
    assert str(CheckResult(False, "x")) == "Not yet: x"


def test_the_notebook_s_choice_picks_the_catalog(monkeypatch):
    monkeypatch.setenv(i18n.LANGUAGE_VARIABLE, "zh-CN")
    assert i18n.language() == "zh-CN"
    assert str(CheckResult(True, "x")) == "正确：x"
    assert str(CheckResult(False, "x")) == "未通过：x"
    assert i18n.translated("a message no catalog has") == "a message no catalog has"
    assert i18n.N_("Not yet: {message}") == "Not yet: {message}"  # marks, does not translate


@pytest.mark.parametrize("value", ["fr", "zh", "EN", "zh_CN"])
def test_a_language_the_course_does_not_have_is_refused_with_what_to_set(monkeypatch, value):
    monkeypatch.setenv(i18n.LANGUAGE_VARIABLE, value)
    with pytest.raises(ValueError, match="set it to one of en, zh-CN in the notebook's set-up cell"):
        i18n.language()


def test_untranslated_and_fuzzy_entries_fall_back_to_english(tmp_path, monkeypatch):
    folder = tmp_path / "zh_CN"
    folder.mkdir()
    po = polib.POFile()
    po.append(polib.POEntry(msgid="done", msgstr="完成"))
    po.append(polib.POEntry(msgid="empty", msgstr=""))
    po.append(polib.POEntry(msgid="stale", msgstr="旧的", flags=["fuzzy"]))
    po.save(str(folder / "m.po"))
    monkeypatch.setattr(i18n, "LOCALE", tmp_path)
    i18n._catalog.cache_clear()
    try:
        assert i18n.catalog("zh-CN") == {"m": {"done": "完成"}}
    finally:
        i18n._catalog.cache_clear()


def test_each_module_reads_its_own_catalog_and_a_constant_is_found_where_it_was_marked(monkeypatch):
    monkeypatch.setenv(i18n.LANGUAGE_VARIABLE, "zh-CN")
    # "DEMO FLEET ..." is a title in gpus and in picker, each with its own translation
    english = "DEMO FLEET (made up, not this machine)"
    domains = i18n.catalog("zh-CN")
    assert domains["gpus"][english] != domains["picker"][english]
    for module in ("gpus", "picker"):  # code running in that module's globals
        names = {"__name__": f"course_utils.{module}", "_": i18n._, "translated": i18n.translated}
        assert eval("_(text), translated(text)", names, {"text": english}) == (domains[module][english],) * 2
    # called from a module without a catalog (this test), the message is found where it was marked
    assert i18n.translated(english) in (domains["gpus"][english], domains["picker"][english])


# English left inside a Chinese message: three or more English words in a row, outside `code`,
# {placeholders}, quotations (“...”, "...", '...') and addresses. PyTorch's own messages, which the
# Chinese edition quotes as they are, and argument lists are the allow-list.
QUOTED = re.compile(r"`[^`]*`|\{[^}]*\}|“[^”]*”|\"[^\"]*\"|'[^']*'|https?://\S+")
ENGLISH_RUN = re.compile(r"\b[A-Za-z][\w'-]*(?:[ ,]+[A-Za-z][\w'-]*){2,}")
ALLOWED_RUNS = {
    "model, mesh, plan",  # an argument list
    "a, b, c",  # an argument list
    "Expected more than",  # PyTorch's BatchNorm error, quoted
    "value per channel when training, got input size torch",
    "terminated with exit code",  # torch.multiprocessing's error, quoted
    "pip install nvidia-ml-py",  # a command
}
PACKAGE = Path(i18n.__file__).resolve().parent
HINT_BUILDERS = {"whole_number_hint", "failed", "passed"}


def english_runs(message: str) -> list[str]:
    return [run for run in ENGLISH_RUN.findall(QUOTED.sub(" ", message)) if run not in ALLOWED_RUNS]


def test_no_chinese_message_keeps_english_words_outside_code_and_quotes():
    found = [
        f"{path.name}: {run!r} in {entry.msgstr!r}"
        for path in sorted((PACKAGE / "locale" / "zh_CN").glob("*.po"))
        for entry in polib.pofile(str(path))
        if entry.msgstr and not entry.obsolete
        for run in english_runs(entry.msgstr)
    ]
    assert found == []


def test_the_english_detector_finds_a_phrase_and_spares_code_and_quotes():
    assert english_runs("a GPU's number 应当是整数") == ["a GPU's number"]
    assert english_runs("`a b c` 与 “No matching distribution” 和 {what}") == []


def test_every_text_given_to_a_hint_is_marked_for_translation():
    unmarked = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or getattr(node.func, "id", None) not in HINT_BUILDERS:
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    if re.search(r"[A-Za-z]{2,}", QUOTED.sub(" ", arg.value)):
                        unmarked.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {arg.value!r}")
    assert unmarked == []


def test_a_hint_about_a_gpu_number_is_chinese_in_the_chinese_notebook(monkeypatch):
    from course_utils.exercises.choosing_gpus import check_physical_gpu

    monkeypatch.setenv(i18n.LANGUAGE_VARIABLE, "zh-CN")
    hint = str(check_physical_gpu("3"))
    assert hint == "未通过：GPU 编号应当是整数：不要加引号。" and english_runs(hint) == []


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("把`x`换成", "把 `x` 换成"),
        ("`reduce_scatters`只数了", "`reduce_scatters` 只数了"),
        ("已经 `x` 了", "已经 `x` 了"),
        ("replace `x`, then", "replace `x`, then"),
    ],
)
def test_code_in_a_chinese_sentence_gets_its_spaces(text, wanted):
    assert i18n.spaced(text) == wanted


def test_padding_counts_a_chinese_character_as_two_columns():
    assert i18n.display_width("内存") == 4 and i18n.display_width("RAM") == 3
    assert i18n.pad("内存", 6) + "|" == "内存  |"
    assert i18n.pad("RAM", 6, ">") == "   RAM"
    assert i18n.pad("加速器设备数", 4) == "加速器设备数"  # wider than the column: left as it is
    with pytest.raises(ValueError, match="align must be"):
        i18n.pad("x", 3, "^")


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_throughput_table_aligns_by_display_width_in_both_languages(monkeypatch, language):
    from course_utils.throughput import format_table

    monkeypatch.setenv(i18n.LANGUAGE_VARIABLE, language)
    row = {"config": "DDP，2 个进程", "processes": 2, "threads": 1, "median_step_s": 0.01}
    row |= {"iqr_step_s": 0.001, "samples_per_s": 1000.0, "global_batch": 64}
    lines = format_table([{**row, "config": "one process"}, row]).splitlines()
    assert len({i18n.display_width(line) for line in lines}) == 1, lines
    assert ("配置" in lines[0]) == (language == "zh-CN")


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: i18n.pad("x", "3"),
            TypeError,
            "width must be a number of columns, an int such as 17, not '3'",
        ),
        (lambda: i18n.pad("x", 3.5), TypeError, "width must be a number of columns"),
        (lambda: i18n.pad("x", -1), ValueError, "width must be a number of columns, 0 or more, not -1"),
        (lambda: i18n.pad("x", True), TypeError, "width must be a number of columns"),
        (lambda: i18n.display_width(None), TypeError, "text must be a str, not NoneType"),
        (lambda: i18n.spaced(b"x"), TypeError, "text must be a str, not bytes"),
        (lambda: i18n.translated(None), TypeError, "message must be a str, not NoneType"),
        (
            lambda: i18n.catalog("fr"),
            ValueError,
            "the course's languages are en, zh-CN; 'fr' is not one of them",
        ),
        (lambda: i18n.catalog(["zh-CN"]), ValueError, "the course's languages are en, zh-CN"),
        (lambda: i18n.catalog_folder(None), ValueError, "None is not one of them"),
    ],
)
def test_bad_input_gets_an_error_that_names_the_argument(call, error, match):
    with pytest.raises(error, match=re.escape(match)):
        call()
