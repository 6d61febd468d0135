"""course_utils speaks the notebook's language: the one its set-up cell names, not the machine's locale."""

from __future__ import annotations

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
    assert str(CheckResult(False, "x")) == "还没对：x"
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
    i18n.catalog.cache_clear()
    try:
        assert i18n.catalog("zh-CN") == {"m": {"done": "完成"}}
    finally:
        i18n.catalog.cache_clear()


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
