"""Format the notebooks' code to the width a page shows it without wrapping or scrolling.

    python3 course.py format [--check]

The website shows a code cell in a box about 83 columns wide (13 px monospace in a 684 px column at
a 1280 px window), and a line wrapped back to the margin reads like a dedent in Python. So every
code line of both editions fits WIDTH display columns (a Chinese character counts two):

1. ruff formats the cells at WIDTH (ruff understands notebooks' magics);
2. a comment that still reaches past WIDTH is broken into comment lines, and a trailing one moves
   onto its own line above the code it explains;
3. a string that reaches past WIDTH inside brackets is split into adjacent literals, which Python
   joins into the same value;
4. ruff formats once more.

The English notebooks' code cells are formatted in place, and so are the Chinese edition's: each
code unit of translations/zh-CN/NN_name.po, its English (msgid, the cell's text) and its
translation (msgstr); `course.py translate build` then writes notebooks/zh-CN/. With --check,
nothing is written and every line that does not fit is listed (exit 1 if any).
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
import unicodedata
from pathlib import Path

import polib
from command_help import command_parser
from links import SETUP_CELL_ID, cell_text, notebook_text

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 79
LANGUAGE = "zh-CN"
MAGIC = re.compile(r"^\s*[%!]")
# Closing punctuation (Chinese and ASCII) a wrapped line may not start with.
CLOSING = "\uff0c\u3002\u3001\uff09\uff1a\uff1b\uff01\uff1f\u300d\u300f\u201d\u2019\u300b,.;:)"
STRING_START = re.compile(r"^(?P<prefix>[rRbBuUfF]{0,2})(?P<quote>'|\")(?!\2\2)")


def columns(text: str) -> int:
    """The display width of `text`: two columns for a wide (CJK) character, one for the others."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _ruff(sources: list[str], width: int) -> list[str] | None:
    """`sources` formatted by one ruff call as the cells of one notebook; None if ruff refuses one."""
    cells = [
        {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
        for s in sources
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    command = [sys.executable, "-m", "ruff", "format", "--isolated", f"--line-length={width}"]
    done = subprocess.run(
        [*command, "--stdin-filename=cells.ipynb", "-"],
        input=json.dumps(notebook),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    formatted = json.loads(done.stdout)["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in formatted]


def ruff_format(sources: list[str], width: int = WIDTH) -> list[str]:
    """The code cells `sources` formatted by ruff at `width`; a cell ruff cannot parse stays as it is."""
    together = _ruff(sources, width)
    if together is not None:
        return together
    return [(_ruff([source], width) or [source])[0] for source in sources]


def _split_comment(indent: str, comment: str, width: int) -> list[str]:
    """A comment (`# ...`) as comment lines at `indent` that fit `width` where its words allow."""
    words = comment[1:].strip().split(" ")
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if current and columns(f"{indent}# {candidate}") > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    lines.append(current)
    return [f"{indent}# {line}" for line in lines]


def _split_wide_comment(indent: str, comment: str, width: int) -> list[str]:
    """Like _split_comment, and a run of Chinese with no spaces is broken between its characters."""
    lines = _split_comment(indent, comment, width)
    fitted: list[str] = []
    for line in lines:
        while columns(line) > width and re.search(r"[\u3000-\u9fff\uff00-\uffef]", line):
            cut = len(line)
            while cut > len(indent) + 2 and columns(line[:cut]) > width:
                cut -= 1
            while cut > len(indent) + 2 and not _breakable(line, cut):
                cut -= 1
            if cut <= len(indent) + 2:
                break
            fitted.append(line[:cut].rstrip())
            line = f"{indent}# {line[cut:].lstrip()}"
        fitted.append(line)
    return fitted


def _breakable(line: str, cut: int) -> bool:
    """Whether a line may break before position `cut`: beside a wide character, never before
    closing punctuation (CLOSING) nor inside a run of ASCII letters or digits."""
    before, after = line[cut - 1], line[cut]
    if after in CLOSING:
        return False
    return columns(before) == 2 or columns(after) == 2 or after == " "


def _tokens(lines: list[str]) -> list[tokenize.TokenInfo] | None:
    """The Python tokens of a cell's lines, its magics read as `pass`; None where it does not tokenize."""
    masked = "\n".join("pass" if MAGIC.match(line) else line for line in lines)
    try:
        return list(tokenize.generate_tokens(io.StringIO(masked).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None


def fit_comments(code: str, width: int = WIDTH) -> str:
    """`code` with every comment that reaches past `width` broken into comment lines; a trailing
    comment that does moves onto its own lines above its code line."""
    lines = code.split("\n")
    tokens = _tokens(lines)
    if tokens is None:
        return code
    comments = {t.start[0] - 1: t for t in tokens if t.type == tokenize.COMMENT}
    out: list[str] = []
    for number, line in enumerate(lines):
        token = comments.get(number)
        if token is None or columns(line) <= width or MAGIC.match(line):
            out.append(line)
            continue
        column = token.start[1]
        code_part = line[:column].rstrip()
        indent = line[: len(line) - len(line.lstrip())]
        out += _split_wide_comment(indent, token.string, width)
        if code_part.strip():
            out.append(code_part)
    return "\n".join(out)


def _string_parts(literal: str, room: int) -> tuple[str, str] | None:
    """A one-line string literal split at a space into two literals of the same prefix and quote,
    the first at most `room` columns wide; None where it cannot be (no space, a brace of an
    f-string, a triple quote, an escape at the cut)."""
    match = STRING_START.match(literal)
    if match is None or not literal.endswith(match["quote"]):
        return None
    prefix, quote = match["prefix"], match["quote"]
    body = literal[len(prefix) + 1 : -1]
    formatted = "f" in prefix.lower()
    depth, best = 0, None
    for index, char in enumerate(body):
        if formatted and char in "{}":
            depth += 1 if char == "{" else -1
        after_brace = formatted and char == "}" and depth == 0
        if (
            (char == " " or after_brace or columns(char) == 2)
            and depth == 0
            and body[index - 1 : index] != "\\"
        ):
            if columns(f"{prefix}{quote}{body[: index + 1]}{quote}") <= room:
                best = index
    if best is None or best + 1 >= len(body):
        return None
    return f"{prefix}{quote}{body[: best + 1]}{quote}", f"{prefix}{quote}{body[best + 1 :]}{quote}"


def _assigned_alone(line: str, token: tokenize.TokenInfo) -> bool:
    """Whether the string `token` is the whole right side of an assignment, or what a `return`
    returns, on its line."""
    before, after = line[: token.start[1]].rstrip(), line[token.end[1] :]
    assigned = before.endswith("=") and not before.endswith(("==", "!=", "<=", ">="))
    return (assigned or before.strip() == "return") and not after.strip()


def fit_strings(code: str, width: int = WIDTH) -> str:
    """`code` with each string that reaches past `width` inside brackets split into adjacent literals
    (the same value), the second on its own line below the first."""
    lines = code.split("\n")
    tokens = _tokens(lines)
    if tokens is None:
        return code
    depth, splits = 0, {}
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif (
            token.type == tokenize.STRING
            and token.start[0] == token.end[0]
            and (depth > 0 or _assigned_alone(lines[token.start[0] - 1], token))
        ):
            row = token.start[0] - 1
            if columns(lines[row]) > width and len(token.string) > len(
                getattr(splits.get(row), "string", "")
            ):
                splits[row] = token  # the longest string of the line
    for row in sorted(splits, reverse=True):
        token = splits[row]
        line = lines[row]
        start, end = token.start[1], token.end[1]
        before, after = line[:start], line[end:]
        margin = line[: len(line) - len(line.lstrip())]
        if _assigned_alone(line, token):  # `name = "..."`: the parts go in parentheses
            lines[row : row + 1] = [f"{before}(", f"{margin}    {token.string}", f"{margin}){after}"]
            row, line, before, after = row + 1, lines[row + 1], f"{margin}    ", ""
        indent = " " * len(before) if not before.strip() else margin + "    "
        pieces, rest = [], token.string
        lead = before
        while columns(lead + rest + after) > width:
            parts = _string_parts(rest, width - columns(lead))
            if parts is None:
                break
            pieces.append(lead + parts[0])
            rest, lead = parts[1], indent
        if pieces:
            lines[row : row + 1] = [*pieces, lead + rest + after]
    return "\n".join(lines)


def fit_docstrings(code: str, width: int = WIDTH) -> str:
    """`code` with each one-line docstring (a triple-quoted string that is a statement of its own)
    that reaches past `width` broken into lines at its indentation: a docstring's words, not a value."""
    lines = code.split("\n")
    tokens = _tokens(lines)
    if tokens is None:
        return code
    statements = [
        t
        for previous, t in zip([None, *tokens], tokens, strict=False)
        if t.type == tokenize.STRING
        and t.string[-3:] in ('"""', "'''")
        and (
            previous is None
            or previous.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
        )
    ]
    rows = {row for t in statements for row in range(t.start[0] - 1, t.end[0])}
    for row in sorted(rows, reverse=True):
        line = lines[row]
        if columns(line) <= width:
            continue
        margin = line[: len(line) - len(line.lstrip())]
        wrapped = _split_wide_comment(margin, "# " + line.strip(), width)
        lines[row : row + 1] = [margin + w[len(margin) + 2 :] for w in wrapped]
    return "\n".join(lines)


def fit_embedded_code(code: str, width: int = WIDTH) -> str:
    """`code` with the Python inside its triple-quoted strings (a script a cell writes or runs)
    formatted as a cell is, where that string is code: it parses, and formatting keeps its syntax
    tree; any other string stays as it is."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code
    replacements = []
    for token in tokens:
        match = re.fullmatch(
            r'(?P<prefix>[rRuU]?)(?P<quote>"""|\'\'\')(?P<body>.*)(?P=quote)', token.string, re.S
        )
        if token.type != tokenize.STRING or match is None or "\n" not in match["body"]:
            continue
        body = match["body"]
        if not any(columns(line) > width for line in body.split("\n")) or "\\" in body:
            continue
        try:
            before = ast.dump(ast.parse(body))
        except SyntaxError:
            continue
        lead, trail = body[: len(body) - len(body.lstrip("\n"))], body[len(body.rstrip()) :]
        formatted = format_cells([body.strip("\n").rstrip()], width)[0]
        if match["quote"] in formatted or ast.dump(ast.parse(formatted)) != before:
            continue
        literal = f"{match['prefix']}{match['quote']}{lead}{formatted}{trail}{match['quote']}"
        replacements.append((token.start, token.end, literal))
    lines = code.split("\n")
    for (start_row, start_col), (end_row, end_col), literal in reversed(replacements):
        head, tail = lines[start_row - 1][:start_col], lines[end_row - 1][end_col:]
        lines[start_row - 1 : end_row] = (head + literal + tail).split("\n")
    return "\n".join(lines)


def format_code(code: str, width: int = WIDTH) -> str:
    """One code cell through the steps of the module's docstring (ruff, comments, strings, ruff)."""
    return format_cells([code], width)[0]


def format_cells(sources: list[str], width: int = WIDTH) -> list[str]:
    """Code cells through the steps of the module's docstring, with two ruff calls for them all."""
    first = ruff_format([fit_comments(fit_embedded_code(code, width), width) for code in sources], width)
    fitted = [fit_docstrings(fit_comments(fit_strings(code, width), width), width) for code in first]
    return ruff_format(fitted, width)


def too_wide(code: str, width: int = WIDTH) -> list[str]:
    """The lines of `code` wider than `width` display columns."""
    return [line for line in code.split("\n") if columns(line) > width]


def _code_cells(notebook: dict) -> list[dict]:
    """The code cells of a course notebook that the course formats: all but the set-up cell, which
    scripts/links.py writes."""
    return [c for c in notebook["cells"] if c["cell_type"] == "code" and c.get("id") != SETUP_CELL_ID]


def format_course(
    root: Path = ROOT, width: int = WIDTH, check: bool = False, only: list[str] | None = None
) -> list[str]:
    """Format every English notebook's code cells (or those of the notebooks named in `only`, such as
    05_data_parallel) and the code units of the Chinese translations; return a line for each file
    changed, or with `check` for each line too wide (nothing written)."""
    said: list[str] = []
    for english in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if only and english.stem not in only:
            continue
        notebook = json.loads(english.read_text(encoding="utf-8"))
        cells = _code_cells(notebook)
        po_path = root / "translations" / LANGUAGE / f"{english.stem}.po"
        po = polib.pofile(str(po_path), wrapwidth=0) if po_path.is_file() else None
        ids = {c.get("id") for c in cells}
        units = [e for e in po if e.msgctxt in ids] if po is not None else []
        texts = [cell_text(c) for c in cells] + [e.msgid for e in units] + [e.msgstr for e in units]
        if check:
            for text in texts:
                said += [f"{english.name}: {columns(line)} columns: {line}" for line in too_wide(text, width)]
            continue
        done = format_cells(texts, width)
        changed = False
        for cell, text in zip(cells, done, strict=False):
            if text != cell_text(cell):
                cell["source"], changed = text.splitlines(keepends=True), True
        if changed:
            english.write_text(notebook_text(notebook), encoding="utf-8")
            said.append(f"{english.relative_to(root)}: formatted")
        rest = done[len(cells) :]
        if units and [e.msgid for e in units] + [e.msgstr for e in units] != rest:
            for entry, msgid, msgstr in zip(units, rest[: len(units)], rest[len(units) :], strict=True):
                entry.msgid, entry.msgstr = msgid, msgstr if entry.msgstr else entry.msgstr
            po.save(str(po_path))
            said.append(f"{po_path.relative_to(root)}: formatted")
    return said


def main(argv: list[str]) -> int:
    """Format (or with --check, list what does not fit); see the module's docstring."""
    options = command_parser("format").parse_args(argv)
    said = format_course(check=options.check, only=[Path(name).stem for name in options.notebooks])
    print("\n".join(said))
    if options.check:
        print(f"{len(said)} code lines wider than {WIDTH} columns" if said else "Every code line fits.")
        return 1 if said else 0
    if said:
        print("Now run `python3 course.py translate build`, then `python3 course.py regenerate`.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
