"""The Chinese edition: translation units of the English notebooks and messages, and its notebooks.

    python3 course.py translate update   put new and changed English text into the .po files
    python3 course.py translate build    write notebooks/zh-CN/*.ipynb from the English notebooks and
                                         translations/zh-CN/*.po (then `course.py regenerate` runs them)
    python3 course.py translate check    list what is untranslated, stale or not built; exit 1 if any

English is the source. A translation unit is one cell: every markdown cell, and every code cell
with a comment or a string in it (its translation may change only those). Each notebook's units
live in translations/zh-CN/NN_name.po, keyed by cell id (msgctxt), with the English they
translate as msgid, so a change to the English shows as a stale unit that names its cell. The
set-up cell and the launch buttons are not units: scripts/links.py writes them for each edition.
The messages that course_utils prints (marked `_()`) live in src/course_utils/locale/zh_CN/, one
.po file per module. Any PO editor (Poedit, Weblate, a text editor) edits both. The Chinese pages
(README.zh-CN.md, docs/zh-CN/) record the sha256 of the English page they translate in their first line.
The worker scripts that notebooks show whole are translated in translations/zh-CN/workers/ (comments
and docstrings only; the code must stay the English's), and `build` puts them in notebooks/zh-CN/workers/.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import io
import json
import os
import re
import string
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polib
from command_help import command_parser
from links import (
    BADGE_LINE,
    EDITIONS,
    NUMBERED,
    SETUP_CELL_ID,
    TRANSLATIONS,
    cell_text,
    notebook_text,
    read_repository,
    setup_cell_source,
    with_badge,
)

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE = "zh-CN"
PACKAGE = ROOT / "src" / "course_utils"
MESSAGES = PACKAGE / "locale" / LANGUAGE.replace("-", "_")
CJK = re.compile(r"[\u3400-\u9fff]")
MASK = "\x00string\x00"  # what every prose string becomes when two cells' code is compared


def english_notebooks(root: Path = ROOT) -> list[Path]:
    """The English notebooks, in course order."""
    return sorted((root / "notebooks").glob(NUMBERED))


def edition_path(english: Path, root: Path = ROOT) -> Path:
    """Where the Chinese edition of an English notebook lives."""
    return root / "notebooks" / EDITIONS[LANGUAGE] / english.name


def po_path(english: Path, root: Path = ROOT) -> Path:
    """The translation file of an English notebook."""
    return root / TRANSLATIONS / LANGUAGE / f"{english.stem}.po"


def has_words(code: str) -> bool:
    """Whether code has anything a translator translates: a comment or a string constant."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return True
    wordy = {tokenize.COMMENT, tokenize.STRING}
    if sys.version_info >= (3, 12):
        wordy.add(tokenize.FSTRING_MIDDLE)
    return any(token.type in wordy for token in tokens)


@dataclass(frozen=True)
class Unit:
    """One translatable cell: its id, its number among the notebook's cells, its kind and its English."""

    cell_id: str
    number: int
    kind: str
    english: str

    def where(self, notebook: str) -> str:
        """The cell as a reader finds it: notebook, kind and number, id."""
        return f"{notebook} {self.kind} cell {self.number} (id {self.cell_id})"


def title_text(markdown: str) -> str:
    """A title cell without its launch buttons, which each edition gets from scripts/links.py."""
    return BADGE_LINE.sub("", markdown)


def units(nb: dict) -> list[Unit]:
    """The translation units of an English notebook, in order."""
    found = []
    for number, cell in enumerate(nb["cells"], start=1):
        text, kind = cell_text(cell), cell["cell_type"]
        if cell.get("id") == SETUP_CELL_ID or kind not in ("markdown", "code"):
            continue
        if number == 1 and kind == "markdown":
            text = title_text(text)
        if kind == "markdown" or has_words(text):
            found.append(Unit(cell["id"], number, kind, text))
    return found


# Strings that are code, which a translation keeps as the English has them: what these calls run or
# name (statements given to Timer, a backend, a device), every keyword value but these prose ones,
# and format specifications. (Dictionary keys and compared strings may be words that the
# translation changes everywhere it uses them.)
CODE_CALLS = {
    "Timer", "timeit", "repeat", "exec", "eval", "device", "to", "init_process_group", "new_group",
    "set_start_method", "get_context", "getenv", "import_module",
}  # fmt: skip
PROSE_KEYWORDS = {"end", "sep", "title", "label", "xlabel", "ylabel", "name", "help", "description", "msg"}
# A string with no space that reads as a name or an expression ("cpu", "cuda:0", ".4f", "a@a") is code
# wherever it stands, unless the translation puts Chinese in it.
CODE_LIKE = re.compile(r"[\w.:/@+*%=<>\[\]()\-]+", re.ASCII)
CHINESE_TEXT = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def call_name(call: ast.Call) -> str:
    """The called name: `Timer` for `benchmark.Timer(...)`, `to` for `x.to(...)`."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def code_strings(tree: ast.AST) -> set[int]:
    """The ids of the string constants in `tree` that stand where code stands (see CODE_CALLS)."""
    found: set[int] = set()

    def strings(node: ast.AST | None) -> None:
        for child in ast.walk(node) if node is not None else ():
            if isinstance(child, ast.Constant) and isinstance(child.value, str):
                found.add(id(child))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if call_name(node) in CODE_CALLS:
                for argument in node.args:
                    strings(argument)
            for keyword in node.keywords:
                if keyword.arg not in PROSE_KEYWORDS:
                    strings(keyword.value)
        elif isinstance(node, ast.FormattedValue):
            strings(node.format_spec)
    return found


@dataclass(frozen=True)
class Masked:
    """A cell's code for comparison: its syntax tree with prose strings masked, and those strings."""

    tree: ast.AST
    prose: list[tuple[int, str, bool]]  # (line, the string, whether it is part of an f-string)

    def dump(self) -> str:
        """The tree as text, without line numbers: equal for equal code."""
        return ast.dump(self.tree)


def first_difference(old: ast.AST, new: ast.AST) -> int | None:
    """The line, in `new`, of the first node where two masked trees differ (None: no such node)."""
    for before, after in zip(ast.walk(old), ast.walk(new), strict=False):
        fields = [name for name in before._fields if not isinstance(getattr(before, name), ast.AST | list)]
        if type(before) is not type(after) or any(getattr(before, f) != getattr(after, f) for f in fields):
            return getattr(after, "lineno", None)
        if any(
            len(getattr(before, f)) != len(getattr(after, f))
            for f in before._fields
            if isinstance(getattr(before, f), list)
        ):
            return getattr(after, "lineno", None)
    return None


def masked_code(code: str) -> Masked:
    """The code's syntax tree with comments gone and every prose string masked; code strings stay."""
    tree = ast.parse(code)
    keep = code_strings(tree)
    in_fstring = {
        id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values
    }
    prose: list[tuple[int, str, bool]] = []

    class Masker(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.Constant:
            if not isinstance(node.value, str) or id(node) in keep:
                return node
            prose.append((node.lineno, node.value, id(node) in in_fstring))
            return ast.Constant(MASK)

    return Masked(Masker().visit(tree), prose)


def code_difference(english: str, chinese: str) -> str | None:
    """None when the two cells differ only in comments and prose strings; else what differs.

    Strings that are code (see CODE_CALLS) must be the English ones; a prose string may change, but a
    code-like one (no space, see CODE_LIKE) only into one with Chinese in it.
    """
    try:
        old, new = masked_code(english), masked_code(chinese)
    except SyntaxError as err:
        return f"the translation is not valid Python ({err.msg}, line {err.lineno})"
    if old.dump() == new.dump():
        for (_, before, _), (line, after, part) in zip(old.prose, new.prose, strict=True):
            if (
                before != after
                and not part
                and CODE_LIKE.fullmatch(before)
                and not CHINESE_TEXT.search(after)
            ):
                return f"line {line}: the string {before!r} became {after!r} (a string that is code stays)"
        return None
    line = first_difference(old.tree, new.tree)
    if line is not None and line <= len(chinese.splitlines()):
        return f"line {line}: {chinese.splitlines()[line - 1].strip()!r} is not the English code"
    return "the code differs beyond comments and strings (compare it with the English cell)"


def untranslated(english: str, chinese: str) -> bool:
    """Whether a translation of English words holds no Chinese at all (a copy, or a forgotten unit)."""
    return bool(re.search("[A-Za-z]{3}", english)) and not CJK.search(chinese)


def placeholders(message: str) -> list[str]:
    """The `{name}` fields of a format string, sorted (a translation must keep the same ones)."""
    try:
        return sorted(
            f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
            for _, name, spec, conv in string.Formatter().parse(message)
            if name is not None
        )
    except ValueError:
        return ["<not a valid format string>"]


def load_po(path: Path) -> polib.POFile:
    """A .po file, or an empty catalog with the course's header when there is none yet."""
    if path.is_file():
        return polib.pofile(str(path), wrapwidth=0)
    po = polib.POFile(wrapwidth=0)
    po.metadata = {
        "Project-Id-Version": "pytorch-on-gpus-hands-on",
        "Language": LANGUAGE.replace("-", "_"),
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return po


def merge(po: polib.POFile, wanted: list[tuple[str | None, str, str]]) -> polib.POFile:
    """A catalog with exactly the `wanted` (context, English, comment) entries, in that order.

    Translations are kept; an entry whose English changed keeps its translation marked fuzzy, with
    the old English as `#| msgid`, as gettext's msgmerge does, so the translator sees what changed.
    """
    by_key = {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}
    by_context = {e.msgctxt: e for e in po if not e.obsolete and e.msgctxt is not None}
    merged = polib.POFile(wrapwidth=0)
    merged.metadata = po.metadata
    for context, english, comment in wanted:
        old = by_key.get((context, english))
        if old is None and context is not None and context in by_context:
            old = copy.copy(by_context[context])
            if old.msgstr:
                old.previous_msgid = old.previous_msgid or old.msgid
                if "fuzzy" not in old.flags:
                    old.flags.append("fuzzy")
            old.msgid = english
        entry = old or polib.POEntry(msgctxt=context, msgid=english, msgstr="")
        entry.comment = comment
        merged.append(entry)
    return merged


def notebook_entries(english: Path) -> list[tuple[str | None, str, str]]:
    """The (cell id, English, comment) of each unit of an English notebook."""
    nb = json.loads(english.read_text(encoding="utf-8"))
    return [(u.cell_id, u.english, f"{u.kind} cell {u.number}") for u in units(nb)]


def message_calls(path: Path) -> Iterator[tuple[int, str | None]]:
    """(line, English) of each `_(...)` or `N_(...)` call in a module; None where it is not one literal."""
    nodes = sorted(
        (
            node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call)
        ),
        key=lambda node: (node.lineno, node.col_offset),
    )
    for node in nodes:
        if isinstance(node.func, ast.Name) and node.func.id in ("_", "N_"):
            literal = (
                node.args[0].value
                if len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
                else None
            )
            yield node.lineno, literal if isinstance(literal, str) else None


def message_modules(package: Path = PACKAGE) -> dict[str, list[tuple[int, str | None]]]:
    """Each module that marks messages (dotted name under course_utils) -> its `_()` calls."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        calls = list(message_calls(path))
        if calls:
            parts = path.relative_to(package).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = calls
    return found


def message_entries(calls: list[tuple[int, str | None]], module: str) -> list[tuple[str | None, str, str]]:
    """The (no context, English, comment) entries of one module's messages, each once, in order."""
    seen: dict[str, str] = {}
    for line, english in calls:
        if english is not None and english not in seen:
            seen[english] = f"{module}:{line}"
    return [(None, english, where) for english, where in seen.items()]


def update(root: Path = ROOT) -> list[str]:
    """Bring every .po file in line with the English; return one line per file written."""
    written = []
    targets: list[tuple[Path, list[tuple[str | None, str, str]]]] = [
        (po_path(english, root), notebook_entries(english)) for english in english_notebooks(root)
    ]
    messages = root / MESSAGES.relative_to(ROOT)
    for module, calls in message_modules(root / PACKAGE.relative_to(ROOT)).items():
        targets.append((messages / f"{module}.po", message_entries(calls, module)))
    for path, wanted in targets:
        merged = merge(load_po(path), wanted)
        text = str(merged)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            todo = sum(1 for e in merged if not e.msgstr or e.fuzzy)
            written.append(f"{path.relative_to(root)}: {len(merged)} units, {todo} to translate")
    return written


_WIDE = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"  # Chinese characters and punctuation
_BLOCK_START = re.compile(r"\s*(?:[#|>*+-]|\d+[.)]\s|```|\$\$)")


def joined(markdown: str) -> str:
    """Chinese markdown with the line breaks inside its paragraphs removed: a break between two
    Chinese characters renders as a space. Code blocks, headings, lists and tables keep their lines."""
    lines = markdown.split("\n")
    out: list[str] = []
    fenced = False
    for line in lines:
        previous = out[-1] if out else ""
        if (
            not fenced
            and re.search(f"[{_WIDE}]$", previous)
            and re.match(f"[{_WIDE}]", line)
            and not _BLOCK_START.match(previous)
            and not _BLOCK_START.match(line)
        ):
            out[-1] = previous + line
        else:
            out.append(line)
        if line.lstrip().startswith("```"):
            fenced = not fenced
    return "\n".join(out)


def translated(po: polib.POFile) -> dict[str, polib.POEntry]:
    """The catalog's entries by cell id."""
    return {e.msgctxt: e for e in po if not e.obsolete and e.msgctxt is not None}


def build_notebook(english: Path, root: Path = ROOT) -> dict:
    """The Chinese notebook of `english`: its cells with the translated text, outputs kept where unchanged.

    Raises ValueError naming every unit that has no current translation.
    """
    nb = json.loads(english.read_text(encoding="utf-8"))
    entries = translated(load_po(po_path(english, root)))
    target = edition_path(english, root)
    before = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {"cells": []}
    stored = {c.get("id"): c for c in before["cells"]}
    wanted = {u.cell_id: u for u in units(nb)}
    missing = []
    repo = read_repository((root / "pyproject.toml").read_text(encoding="utf-8"))
    cells = []
    for number, cell in enumerate(nb["cells"], start=1):
        cell = copy.deepcopy(cell)
        text = cell_text(cell)
        if cell.get("id") == SETUP_CELL_ID:
            text = setup_cell_source(LANGUAGE)
        elif cell.get("id") in wanted:
            unit, entry = wanted[cell["id"]], entries.get(cell["id"])
            if entry is None or not entry.msgstr or entry.fuzzy or entry.msgid != unit.english:
                missing.append(unit.where(english.name))
                continue
            text = joined(entry.msgstr) if cell["cell_type"] == "markdown" else entry.msgstr
            if number == 1:
                text = with_badge(text, repo.badge(EDITIONS[LANGUAGE] + english.name))
        cell["source"] = text.splitlines(keepends=True)
        if cell["cell_type"] == "code":
            old = stored.get(cell.get("id"))
            if old is not None and cell_text(old) == text:
                cell["outputs"], cell["execution_count"] = old["outputs"], old["execution_count"]
            else:
                cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    if missing:
        raise ValueError(
            f"{len(missing)} cells have no current translation in "
            f"{po_path(english, root).relative_to(root)}: " + "; ".join(missing)
        )
    nb["cells"] = cells
    nb["metadata"] = {
        **nb["metadata"],
        **{k: v for k, v in before.get("metadata", {}).items() if k == "language_info"},
    }
    return nb


def build(root: Path = ROOT, only: list[Path] | None = None) -> tuple[list[str], list[str]]:
    """Write every Chinese notebook (or those of the English notebooks `only`) whose translation is
    complete: (lines on what was written, lines on what could not be built and why)."""
    written, problems = [], []
    for english in english_notebooks(root):
        if only is not None and english not in only:
            continue
        try:
            nb = build_notebook(english, root)
        except ValueError as err:
            problems.append(f"{english.name}: {err}")
            continue
        target = edition_path(english, root)
        text = notebook_text(nb)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            fresh = sum(1 for c in nb["cells"] if c["cell_type"] == "code" and c["execution_count"] is None)
            written.append(f"{target.relative_to(root)}: written, {fresh} code cells to run")
    return written, problems


def english_of(path: Path, root: Path = ROOT) -> Path | None:
    """The English notebook of a course notebook of either edition; None for any other file."""
    path = path.resolve()
    for english in english_notebooks(root):
        if path in (english.resolve(), edition_path(english, root).resolve()):
            return english
    return None


def notebook_problems(english: Path, root: Path = ROOT) -> list[str]:
    """What keeps the Chinese edition of one notebook from being complete, current and built."""
    name = english.name
    path = po_path(english, root)
    if not path.is_file():
        return [
            f"{name}: no translation file {path.relative_to(root)} (`python3 course.py translate update`)"
        ]
    nb = json.loads(english.read_text(encoding="utf-8"))
    entries = translated(load_po(path))
    problems = []
    wanted = units(nb)
    for unit in wanted:
        entry = entries.get(unit.cell_id)
        where = unit.where(name)
        if entry is None or not entry.msgstr:
            problems.append(f"{where}: not translated")
        elif entry.msgid != unit.english or entry.fuzzy:
            problems.append(
                f"{where}: the English changed since it was translated; retranslate it in "
                f"{path.relative_to(root)} (`translate update` shows the old English as #| msgid)"
            )
        elif unit.kind == "code" and (difference := code_difference(unit.english, entry.msgstr)):
            problems.append(f"{where}: its code is not the English code: {difference}")
        elif (
            unit.kind == "markdown"
            and re.search("[A-Za-z]{3}", unit.english)
            and not CJK.search(entry.msgstr)
        ):
            problems.append(f"{where}: the translation has no Chinese in it")
    extra = set(entries) - {u.cell_id for u in wanted}
    problems += [
        f"{name}: {path.relative_to(root)} translates cell {cell}, which the English no longer has"
        for cell in sorted(extra)
    ]
    return problems or built_problems(english, root)


def cell_form(cell: dict) -> tuple[str, str | None, str, list[str]]:
    """What a built cell must match: type, id, source and tags (outputs come from running it)."""
    return cell["cell_type"], cell.get("id"), cell_text(cell), cell.get("metadata", {}).get("tags", [])


def built_problems(english: Path, root: Path = ROOT) -> list[str]:
    """Whether the stored Chinese notebook is what `build` makes now, and has been run since."""
    target = edition_path(english, root)
    shown = f"notebooks/{EDITIONS[LANGUAGE]}{english.name}"
    if not target.is_file():
        return [f"{shown}: missing: run `python3 course.py translate build`, then regenerate it"]
    stored = json.loads(target.read_text(encoding="utf-8"))
    built = build_notebook(english, root)
    if [cell_form(c) for c in stored["cells"]] != [cell_form(c) for c in built["cells"]]:
        return [f"{shown}: not built from the current translation: run `python3 course.py translate build`"]
    if stored["metadata"].get("course") != built["metadata"].get("course"):
        return [
            f"{shown}: its metadata.course differs from the English: run `python3 course.py translate build`"
        ]
    if any(c["cell_type"] == "code" and c.get("execution_count") is None for c in stored["cells"]):
        return [f"{shown}: has cells that never ran: run `python3 course.py regenerate {shown}`"]
    return []


def message_problems(package: Path = PACKAGE, messages: Path = MESSAGES) -> list[str]:
    """What is wrong with the translated messages of course_utils: missing, stale, unmarked or broken."""
    problems = []
    modules = message_modules(package)
    for module, calls in modules.items():
        problems += [
            f"course_utils.{module}, line {line}: _() takes one string literal (put values in with "
            ".format() after it), or the message cannot be translated"
            for line, english in calls
            if english is None
        ]
        path = messages / f"{module}.po"
        catalog = {e.msgid: e for e in load_po(path) if not e.obsolete}
        for _, english, where in message_entries(calls, module):
            entry = catalog.pop(english, None)
            if entry is None or not entry.msgstr or entry.fuzzy:
                problems.append(f"{where}: not translated in {path.name}: {english!r}")
            elif placeholders(entry.msgstr) != placeholders(english):
                problems.append(
                    f"{where}: the translation's fields {placeholders(entry.msgstr)} are not the English's "
                    f"{placeholders(english)}"
                )
            elif untranslated(english, entry.msgstr):
                problems.append(f"{where}: the translation has no Chinese in it: {entry.msgstr!r}")
        problems += [f"{path.name}: {english!r} is no longer in the code" for english in catalog]
    problems += [
        f"{path.name}: no module course_utils.{path.stem} marks messages"
        for path in sorted(messages.glob("*.po"))
        if path.stem not in modules
    ]
    return problems


# The Chinese pages that translate a whole English page, and that page.
PAGES = {
    "README.zh-CN.md": "README.md",
    "docs/zh-CN/seeds.md": "docs/seeds.md",
    "docs/zh-CN/glossary.md": "docs/glossary.md",
    "docs/zh-CN/index.md": "docs/index.md",
    "docs/zh-CN/instructors.md": "docs/instructors.md",
}
PAGE_MARK = re.compile(
    r"^<!-- translated from (?P<page>\S+) at sha256 (?P<digest>[0-9a-f]{12}) -->$", re.MULTILINE
)


def page_digest(path: Path) -> str:
    """The short sha256 of a page, which its translation records."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def page_problems(root: Path = ROOT) -> list[str]:
    """Chinese pages that are missing, or whose English changed since they were translated."""
    problems = []
    for chinese, english in PAGES.items():
        if not (root / chinese).is_file():
            problems.append(f"{chinese}: missing (the translation of {english})")
            continue
        mark = PAGE_MARK.search((root / chinese).read_text(encoding="utf-8"))
        digest = page_digest(root / english)
        if mark is None or mark["page"] != english:
            problems.append(f"{chinese}: no line `<!-- translated from {english} at sha256 {digest} -->`")
        elif mark["digest"] != digest:
            problems.append(
                f"{chinese}: {english} changed since it was translated (`git log -p {english}`): bring the "
                f"Chinese in line, then record sha256 {digest} in its first line"
            )
    return problems


# The worker scripts that the notebooks show whole: translated copies, with their comments and
# docstrings in Chinese and the English's code, live in translations/zh-CN/workers/, with the short
# sha256 of the English each translates in translated_from.json. `build` makes notebooks/zh-CN/workers/
# of links to them and to the English scripts that have no translation.
WORKERS = Path("notebooks") / "workers"
CHINESE_WORKERS = Path("notebooks") / LANGUAGE / "workers"
WORKER_TRANSLATIONS = Path("translations") / LANGUAGE / "workers"
WORKER_SOURCES = "translated_from.json"
SHELL_COMMENT = re.compile(r"(^|\s)#.*$")


def script_code(text: str, suffix: str) -> str:
    """What a translation of a worker script must keep: Python's syntax tree without docstrings (comments
    are not in it); a shell script's lines without comments, its #! line and #SBATCH directives kept."""
    if suffix == ".py":
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                first = node.body[0] if node.body else None
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    if isinstance(first.value.value, str):
                        first.value.value = ""
        return ast.dump(tree)
    lines = []
    for line in text.splitlines():
        if line.startswith(("#!", "#SBATCH")):
            line = line[:2] + SHELL_COMMENT.sub("", line[2:])
        else:
            line = SHELL_COMMENT.sub("", line)
        if line.strip():
            lines.append(line.rstrip())
    return "\n".join(lines)


def english_workers(root: Path = ROOT) -> list[Path]:
    """The English worker scripts (and other files the notebooks start or read) in notebooks/workers."""
    return sorted(p for p in (root / WORKERS).iterdir() if p.is_file() and not p.name.startswith("."))


def worker_translations(root: Path = ROOT) -> list[Path]:
    """The translated worker scripts in translations/zh-CN/workers/."""
    folder = root / WORKER_TRANSLATIONS
    return sorted(p for p in folder.iterdir() if p.name != WORKER_SOURCES) if folder.is_dir() else []


def build_workers(root: Path = ROOT) -> list[str]:
    """Make notebooks/zh-CN/workers/ of links: to each translated script, and to each English file
    without one (a link of the whole folder is replaced). Lines on what changed."""
    target = root / CHINESE_WORKERS
    if target.is_symlink():
        target.unlink()
    target.mkdir(parents=True, exist_ok=True)
    translated = {p.name: p for p in worker_translations(root)}
    wanted = {p.name for p in english_workers(root)}
    written = []
    for stale in sorted(p for p in _entries(target) if p.name not in wanted):
        stale.unlink()
        written.append(f"{stale.relative_to(root)}: removed (no such English file)")
    for name in sorted(wanted):
        path = target / name
        link = worker_link(name, name in translated)
        if not path.is_symlink() or os.readlink(path) != link:
            path.unlink(missing_ok=True)
            path.symlink_to(link)
            written.append(
                f"{path.relative_to(root)}: a link to {(target / link).resolve().relative_to(root.resolve())}"
            )
    return written


def _entries(folder: Path) -> list[Path]:
    """The files and links in `folder`; not its folders, such as the __pycache__ that Python writes
    beside a worker that a Chinese notebook imports."""
    return [p for p in folder.iterdir() if p.is_symlink() or not p.is_dir()]


def worker_link(name: str, translated: bool) -> str:
    """Where notebooks/zh-CN/workers/NAME points: its translation, or the English file without one."""
    return f"../../../{(WORKER_TRANSLATIONS / name).as_posix()}" if translated else f"../../workers/{name}"


def workers_built(root: Path = ROOT) -> bool:
    """Whether notebooks/zh-CN/workers/ is what `build_workers` makes of the translations now."""
    target = root / CHINESE_WORKERS
    if not target.is_dir() or target.is_symlink():
        return False
    translated = {p.name for p in worker_translations(root)}
    names = {p.name for p in english_workers(root)}
    if {p.name for p in _entries(target)} != names:
        return False
    return all(
        (target / name).is_symlink() and os.readlink(target / name) == worker_link(name, name in translated)
        for name in names
    )


def worker_problems(root: Path = ROOT) -> list[str]:
    """Translated worker scripts whose code is not the English's, whose English changed since they
    were translated, or that are not built into notebooks/zh-CN/workers/."""
    problems = []
    sources_path = root / WORKER_TRANSLATIONS / WORKER_SOURCES
    sources = json.loads(sources_path.read_text(encoding="utf-8")) if sources_path.is_file() else {}
    for path in worker_translations(root):
        shown, source = path.relative_to(root), WORKERS / path.name
        if not (root / source).is_file():
            problems.append(f"{shown}: there is no English {source} to translate")
            continue
        digest = page_digest(root / source)
        english = (root / source).read_text(encoding="utf-8")
        if script_code(path.read_text(encoding="utf-8"), path.suffix) != script_code(english, path.suffix):
            problems.append(
                f"{shown}: its code differs from {source}'s; translate only comments and docstrings"
            )
        elif sources.get(path.name) != digest:
            problems.append(
                f"{shown}: {source} changed since it was translated (`git log -p {source}`): bring the "
                f"Chinese in line, then record sha256 {digest} for it in {WORKER_SOURCES}"
            )
    if (root / WORKER_TRANSLATIONS).is_dir() and not workers_built(root):
        problems.append(
            f"{CHINESE_WORKERS}: not built from {WORKER_TRANSLATIONS}; run `course.py translate build`"
        )
    return problems


def check(root: Path = ROOT) -> list[str]:
    """Every problem of the Chinese edition: notebooks, messages, worker scripts, then pages."""
    problems = []
    for english in english_notebooks(root):
        problems += notebook_problems(english, root)
    problems += message_problems(root / PACKAGE.relative_to(ROOT), root / MESSAGES.relative_to(ROOT))
    return problems + worker_problems(root) + page_problems(root)


def main(argv: list[str]) -> int:
    """Command line: update, build or check; see the module's docstring."""
    action = command_parser("translate").parse_args(argv).action
    if action == "update":
        for line in update():
            print(line)
        return 0
    if action == "build":
        written, problems = build()
        for line in written + build_workers() + problems:
            print(line)
        if any(not line.endswith(" 0 code cells to run") for line in written):
            print("Now run `python3 course.py regenerate` on the notebooks written, to store their outputs.")
        return 1 if problems else 0
    problems = check()
    for line in problems:
        print(line)
    print(f"{len(problems)} problems" if problems else "The Chinese edition is complete, current and built.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
