"""The course's messages in the notebook's language: English, or Chinese where a notebook asks for it.

A notebook chooses its language in its set-up cell, `os.environ["COURSE_LANGUAGE"] = "zh-CN"`, not
the machine's locale: the English and the Chinese notebooks run side by side on one machine, and
ranks and child processes inherit the choice with the environment. Messages are marked with `_()`
in the source, as gettext does (`N_()` marks text kept in a constant and translated where it is
shown, with `translated()`); their translations are gettext catalogs, one `.po` file per module
under `course_utils/locale/<language>/` (a module's own domain: the same English may read differently
in two modules), read with polib (a translator edits them with any PO tool).
`python3 course.py translate update` collects the marked messages into those files.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import unicodedata
from pathlib import Path
from types import FrameType

import polib

LANGUAGE_VARIABLE = "COURSE_LANGUAGE"
ENGLISH = "en"
LANGUAGES = (ENGLISH, "zh-CN")
LOCALE = Path(__file__).resolve().parent / "locale"
MAX_WIDTH = 10_000  # columns: `pad` would build a string of any width it is given


def language() -> str:
    """The language the current notebook asked for (`COURSE_LANGUAGE`), English when it asked none."""
    chosen = os.environ.get(LANGUAGE_VARIABLE, "").strip() or ENGLISH
    if chosen not in LANGUAGES:
        raise ValueError(
            f"{LANGUAGE_VARIABLE} is {chosen!r}, a language the course does not have: set it to one of "
            f"{', '.join(LANGUAGES)} in the notebook's set-up cell, or remove it for English."
        )
    return chosen


def _known(lang: object) -> str:
    """`lang` if the course has that language, else a ValueError that lists the ones it has."""
    if not isinstance(lang, str) or lang not in LANGUAGES:
        raise ValueError(f"the course's languages are {', '.join(LANGUAGES)}; {lang!r} is not one of them")
    return lang


def _text(value: object, name: str) -> str:
    """`value` if it is a str, else a TypeError that names `name`."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def catalog_folder(lang: str) -> Path:
    """The folder of `lang`'s catalogs, named as gettext names locales (zh-CN -> zh_CN)."""
    return LOCALE / _known(lang).replace("-", "_")


def catalog(lang: str) -> dict[str, dict[str, str]]:
    """`lang`'s translations by module (a file's name: "exercises.ranks"), each English text -> its
    translation (untranslated or fuzzy: absent). One English text may read differently in two modules."""
    return _catalog(_known(lang))


@functools.cache
def _catalog(lang: str) -> dict[str, dict[str, str]]:
    """`catalog`, read once per language."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(catalog_folder(lang).glob("*.po")):
        found[path.stem] = {
            entry.msgid: entry.msgstr
            for entry in polib.pofile(str(path))
            if entry.msgstr and not entry.fuzzy and not entry.obsolete
        }
    return found


def _module_of(frame: FrameType | None) -> str:
    """The catalog name of the module whose code runs in `frame`: course_utils.exercises.x -> exercises.x."""
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name.removeprefix("course_utils.")


def _in_language(message: str, module: str) -> str:
    _text(message, "message")
    lang = language()
    if lang == ENGLISH:
        return message
    domains = catalog(lang)
    found = domains.get(module, {}).get(message)
    if found is None:  # a constant marked in one module (N_) and shown by another
        found = next((texts[message] for texts in domains.values() if message in texts), message)
    return found


def translated(message: str) -> str:
    """`message` in the notebook's language, as the calling module's catalog has it (another module's
    where the constant came from there); the English itself where no translation exists."""
    return _in_language(message, _module_of(sys._getframe(1)))


def _(message: str) -> str:
    """Mark a message (one string literal) and return it in the notebook's language."""
    return _in_language(message, _module_of(sys._getframe(1)))


def N_(message: str) -> str:
    """Mark a message kept in a constant (one string literal); `translated()` shows it where it is used."""
    return message


_CJK = "\u3400-\u9fff\uf900-\ufaff"
# A code span that touches a Chinese character: the space that Chinese typesetting puts around code.
_CODE_AFTER_CJK = re.compile(f"(?<=[{_CJK}])(`[^`\n]+`)")
_CODE_BEFORE_CJK = re.compile(f"(`[^`\n]+`)(?=[{_CJK}])")


def spaced(text: str) -> str:
    """`text` with a space between each `code` span and a Chinese character it touches ("把`x`换成" ->
    "把 `x` 换成"), as Chinese technical writing sets code; English text is returned unchanged."""
    _text(text, "text")
    return _CODE_BEFORE_CJK.sub(r"\1 ", _CODE_AFTER_CJK.sub(r" \1", text))


def display_width(text: str) -> int:
    """How many columns `text` takes in a monospaced font: a Chinese (wide) character takes two."""
    _text(text, "text")
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def pad(text: object, width: int, align: str = "<") -> str:
    """`text` padded with spaces to `width` display columns (`align` "<" left, ">" right), the
    width-aware `f"{text:<width}"` that keeps a table of Chinese labels aligned."""
    if align not in ("<", ">"):
        raise ValueError(f'align must be "<" or ">", not {align!r}.')
    if isinstance(width, bool) or not isinstance(width, int):
        raise TypeError(f"width must be a number of columns, an int such as 17, not {width!r}")
    if width < 0:
        raise ValueError(f"width must be a number of columns, 0 or more, not {width!r}")
    if width > MAX_WIDTH:
        raise ValueError(f"width must be a number of columns, at most {MAX_WIDTH}: no screen is wider")
    text = str(text)
    room = " " * max(0, width - display_width(text))
    return text + room if align == "<" else room + text
