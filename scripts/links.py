"""Every link to the course's repository, made from the one URL in pyproject.toml's [project.urls].

    python3 course.py retarget [URL] [--check]      (or python3 scripts/links.py ...)

Without URL: bring every notebook's launch buttons (Colab and SageMaker Studio Lab on every
notebook, Kaggle, with its free GPUs, from notebook 05 on) and its set-up cell (the code cell right
under the title) in line with the repository named in pyproject.toml and with this script, in both
editions (notebooks/ and notebooks/zh-CN/). With URL
(https://github.com/OWNER/NAME): first point pyproject.toml, the READMEs, CONTRIBUTING.md, the
translations and every notebook at that repository (a fork, say).
With --check: change nothing, list what is out of line and exit 1 if anything is.
Only the standard library is used, so any Python 3.11+ runs it without the course installed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BRANCH = "main"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE = "https://kaggle.com/static/images/open-in-kaggle.svg"
STUDIO_LAB_BADGE = "https://studiolab.sagemaker.aws/studiolab.svg"
KAGGLE_FROM = 5  # Kaggle's two free T4 GPUs suit the multi-GPU lessons: notebooks 05 onwards carry its button
BADGE_LINE = re.compile(r"^\[!\[Open In Colab\]\(.*$\n?", re.MULTILINE)
SETUP_CELL_ID = "course-setup"
# How a set-up cell without its id begins: this one, and the older ones that retarget replaces.
SETUP_OPENINGS = ('import importlib.util, os; os.environ["COURSE_LANGUAGE"]', "# Set-up for Colab")
# Text files that may link to the repository; notebooks are handled cell by cell.
TEXT_FILES = ("pyproject.toml", "README.md", "README.zh-CN.md", "CONTRIBUTING.md")
EDITIONS = {"en": "", "zh-CN": "zh-CN/"}  # each edition's language and its folder under notebooks/
NUMBERED = "[0-9][0-9]_*.ipynb"  # a course notebook's file name: NN_name.ipynb
TRANSLATIONS = "translations"  # translations/<language>/NN_name.po: the text of the editions but English
# The forms in which the course links to its own repository: Binder, Colab, clone and pip-from-git.
COURSE_LINK = re.compile(
    r"(?:mybinder\.org/v2/gh/|colab\.research\.google\.com/github/|git clone https://github\.com/"
    r"|git\+https://github\.com/|studiolab\.sagemaker\.aws/import/github/|kernels/welcome\?src=https://github\.com/)(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?(?=[/?#)\]\s\"'`]|$)"
)
GITHUB_URL = re.compile(r"^https://github\.com/(?P<owner>[^/]*)/(?P<name>[^/]*)/?$")
# What GitHub allows in an owner's and a repository's name, and how long each may be.
GITHUB_NAME = re.compile(r"[A-Za-z0-9_.-]+")
LONGEST = {"owner": 39, "name": 100}
GIVE_IT_AS = "give it as https://github.com/OWNER/NAME (Binder and Colab open notebooks from GitHub)."


@dataclass(frozen=True)
class Repository:
    """A GitHub repository, and every link the course makes to it."""

    owner: str
    name: str

    @property
    def url(self) -> str:
        """The repository's home page, as written in pyproject.toml."""
        return f"https://github.com/{self.owner}/{self.name}"

    def colab(self, notebook: str) -> str:
        """The address that opens `notebook` (a file name in notebooks/) on Colab."""
        return f"https://colab.research.google.com/github/{self.owner}/{self.name}/blob/{BRANCH}/notebooks/{notebook}"

    def github(self, notebook: str) -> str:
        """The notebook's page on GitHub, from which Kaggle imports it."""
        return f"{self.url}/blob/{BRANCH}/notebooks/{notebook}"

    def kaggle(self, notebook: str) -> str:
        """The address that imports `notebook` from GitHub into a Kaggle notebook."""
        return f"https://kaggle.com/kernels/welcome?src={self.github(notebook)}"

    def studio_lab(self, notebook: str) -> str:
        """The address that imports `notebook` from GitHub into SageMaker Studio Lab."""
        return f"https://studiolab.sagemaker.aws/import/github/{self.owner}/{self.name}/blob/{BRANCH}/notebooks/{notebook}"

    def binder(self, notebook: str) -> str:
        """The address that builds the course on Binder and opens `notebook` in JupyterLab."""
        return f"https://mybinder.org/v2/gh/{self.owner}/{self.name}/HEAD?labpath=notebooks%2F{notebook}"

    def badge(self, notebook: str) -> str:
        """The markdown line of `notebook`'s launch buttons: Colab, Kaggle from notebook 05 on, Studio Lab.

        `notebook` is its path under notebooks/: `05_data_parallel.ipynb`, `zh-CN/05_data_parallel.ipynb`.
        """
        buttons = [f"[![Open In Colab]({COLAB_BADGE})]({self.colab(notebook)})"]
        if int(Path(notebook).name[:2]) >= KAGGLE_FROM:
            buttons.append(f"[![Open In Kaggle]({KAGGLE_BADGE})]({self.kaggle(notebook)})")
        buttons.append(f"[![Open In SageMaker Studio Lab]({STUDIO_LAB_BADGE})]({self.studio_lab(notebook)})")
        return " ".join(buttons)


def _name_problem(part: str, value: str) -> str | None:
    """What is wrong with `value` as a repository's `part` ("owner" or "name") on GitHub, or None."""
    if not value:
        return "is empty"
    if not GITHUB_NAME.fullmatch(value):
        bad = next(c for c in value if not GITHUB_NAME.fullmatch(c))
        return f"holds {bad!r}: GitHub allows only letters, digits, '-', '_' and '.'"
    if value in (".", ".."):
        return "is a folder's name ('.' or '..'), which GitHub does not allow"
    if part == "owner" and value.startswith("-"):
        return "starts with '-', which GitHub does not allow for an owner"
    if part == "name" and value.endswith(".git"):
        return "ends in .git even after one .git was taken off, which GitHub does not allow"
    if len(value) > LONGEST[part]:
        return f"has {len(value)} characters; GitHub allows at most {LONGEST[part]}"
    return None


def parse_repository(url: str) -> Repository:
    """The repository that `url` names (one trailing `.git` taken off); only GitHub works with Binder's
    and Colab's links. A URL that names no repository GitHub could have is a ValueError saying why."""
    if not isinstance(url, str):
        raise ValueError(f"{url!r} is not a GitHub repository address: {GIVE_IT_AS}")
    match = GITHUB_URL.match(url.strip())
    if match is None:
        raise ValueError(f"{url!r} is not a GitHub repository address: {GIVE_IT_AS}")
    owner, name = match["owner"], match["name"].removesuffix(".git")
    for part, value in (("owner", owner), ("name", name)):
        problem = _name_problem(part, value)
        if problem is not None:
            raise ValueError(f"{url!r}: the repository's {part} {value!r} {problem}; {GIVE_IT_AS}")
    return Repository(owner, name)


def read_repository(pyproject: str) -> Repository:
    """The repository named by [project.urls] Repository in the text of pyproject.toml."""
    urls = tomllib.loads(pyproject).get("project", {}).get("urls", {})
    if "Repository" not in urls:
        raise ValueError('pyproject.toml has no [project.urls] Repository = "https://github.com/OWNER/NAME".')
    return parse_repository(urls["Repository"])


DISTRIBUTION = "pytorch-on-gpus-hands-on"  # its name on a package index, as course_utils.setup has it
SOURCE_VARIABLE = "COURSE_SOURCE"  # what the set-up cell installs instead, where the runtime sets it
# The set-up cell, right under the title: 5 lines, each within 79 columns (the website's code width;
# a Chinese character counts two). It names the notebook's language; where course_utils does not
# import, the kernel's own pip (IPython's %pip) installs the course alone, and course_utils.setup,
# run in the kernel, does the rest. {{course_source}} is IPython's: it puts the variable's value in.
SETUP_TEMPLATE = "\n".join(
    [
        'import importlib.util, os; os.environ["COURSE_LANGUAGE"] = "{language}"  # {language_comment}',
        'if not importlib.util.find_spec("course_utils"):  # {install_comment}',
        f'    course_source = os.getenv("{SOURCE_VARIABLE}", "{DISTRIBUTION}")',
        '    %pip install -q --no-deps "{{course_source}}"',
        "    %run -m course_utils.setup",
        "",
    ]
)
# The set-up cell's comments in each edition's language; its code is the same in every edition.
SETUP_WORDS = {
    "en": {"language_comment": "set-up step", "install_comment": "Colab, Kaggle, Studio Lab"},
    "zh-CN": {"language_comment": "准备步骤", "install_comment": "Colab、Kaggle、Studio Lab"},
}
SETUP_POSITION = 1  # the set-up cell's index: right after the title cell, before the lesson starts


def setup_cell_source(language: str = "en") -> str:
    """The set-up cell of every notebook of the edition in `language` ("en", "zh-CN"): it sets the
    notebook's language (course_utils's messages follow it) and, where `course_utils` does not import,
    installs the course by name from the runtime's package index (or what `COURSE_SOURCE` names: a
    wheel file, another requirement) and runs course_utils.setup (torch kept or installed, the other
    requirements, the worker scripts and solutions beside the notebook).
    """
    if language not in SETUP_WORDS:
        raise ValueError(
            f"no set-up cell words for {language!r}: add them to SETUP_WORDS in scripts/links.py"
        )
    return SETUP_TEMPLATE.format(language=language, **SETUP_WORDS[language])


def cell_text(cell: dict) -> str:
    """A cell's source as one string (nbformat stores it as a string or a list of lines)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


def with_badge(markdown: str, badge: str) -> str:
    """`markdown` (a notebook's first cell) with `badge` on its own line right under the title."""
    body = BADGE_LINE.sub("", markdown)
    title, _, rest = body.partition("\n")
    rest = rest.lstrip("\n")
    return f"{title}\n\n{badge}\n" + (f"\n{rest}" if rest else "")


def retarget_text(text: str, old: Repository, new: Repository) -> str:
    """`text` with every link to repository `old` pointed at `new` (other repositories untouched)."""
    link = re.compile(
        r"(github\.com/|/v2/gh/|\.com/github/|/import/github/)"
        + re.escape(f"{old.owner}/{old.name}")
        + r"(?=\.git|[/?#)\]\s\"'`]|$)",
        re.MULTILINE,
    )
    return link.sub(lambda m: f"{m[1]}{new.owner}/{new.name}", text)


def foreign_links(text: str, repo: Repository) -> list[str]:
    """The course links in `text` (Binder, Colab, clone, pip-from-git) that name another repository."""
    return [m[0] for m in COURSE_LINK.finditer(text) if (m["owner"], m["name"]) != (repo.owner, repo.name)]


def is_setup_cell(cell: dict) -> bool:
    """Whether `cell` is a set-up cell: a code cell with its id, or with the opening words of this one
    or of an older one."""
    return cell.get("cell_type") == "code" and (
        cell.get("id") == SETUP_CELL_ID or cell_text(cell).startswith(SETUP_OPENINGS)
    )


def sync_notebook(nb: dict, name: str, repo: Repository, language: str = "en") -> list[str]:
    """Put the badge and the set-up cell, right under the title, into notebook `nb` (in place); return
    what was changed.

    `name` is the notebook's path under notebooks/ (`zh-CN/05_data_parallel.ipynb` for a Chinese one).
    A set-up cell elsewhere is moved there (with its id and stored outputs), a second one removed.
    """
    changes = []
    cells = nb["cells"]
    title = cells[0]
    if title.get("cell_type") != "markdown":
        raise ValueError(f"{name}: the first cell must be the markdown title cell to carry the badge.")
    badged = with_badge(cell_text(title), repo.badge(name))
    if badged != cell_text(title):
        _set_source(title, badged)
        changes.append("badge")
    wanted = setup_cell_source(language)
    found = [c for c in cells if is_setup_cell(c)]
    if found:
        setup = found[0]
        if cells.index(setup) != SETUP_POSITION:
            changes.append("set-up cell moved under the title")
        if len(found) > 1:
            changes.append(f"{len(found) - 1} more set-up cell(s) removed")
        if cell_text(setup) != wanted:
            _set_source(setup, wanted)
            setup["outputs"] = []  # where the course is installed it prints nothing: still its stored form
            changes.append("set-up cell updated")
    else:
        setup = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": []}
        if nb.get("nbformat", 4) > 4 or nb.get("nbformat_minor", 0) >= 5:
            setup = {"cell_type": "code", "execution_count": None, "id": SETUP_CELL_ID, **setup}
        _set_source(setup, wanted)
        changes.append("set-up cell inserted")
    lesson = [c for c in cells if not is_setup_cell(c)]
    nb["cells"] = [*lesson[:SETUP_POSITION], setup, *lesson[SETUP_POSITION:]]
    return changes


def edition_notebooks(root: Path) -> list[tuple[Path, str, str]]:
    """(path, name under notebooks/, language) of every notebook of every edition under `root`."""
    found = []
    for language, folder in EDITIONS.items():
        for path in sorted((root / "notebooks" / folder).glob(NUMBERED)):
            found.append((path, folder + path.name, language))
    return found


def notebook_text(nb: dict) -> str:
    """A notebook as the course stores it (the layout that nbformat writes)."""
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def update(root: Path, new_url: str | None = None, check: bool = False) -> list[str]:
    """Bring every link under `root` in line (retargeted to `new_url` if given); return what differs.

    With `check`, nothing is written and the returned lines say what would change.
    """
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    old = read_repository(pyproject)
    new = old if new_url is None else parse_repository(new_url)  # "" is a bad URL, not "no URL"
    report = []
    translations = sorted(p.relative_to(root).as_posix() for p in (root / TRANSLATIONS).glob("*/*.po"))
    for rel in (*TEXT_FILES, *translations):
        path = root / rel
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        changed = retarget_text(text, old, new)
        if changed != text:
            report.append(f"{rel}: links retargeted to {new.url}")
        report += [
            f"{rel}: {link} names another repository than {new.url}" for link in foreign_links(changed, new)
        ]
        if changed != text and not check:
            path.write_text(changed, encoding="utf-8")
    for path, name, language in edition_notebooks(root):
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        for cell in nb["cells"]:
            source = cell_text(cell)
            if (moved := retarget_text(source, old, new)) != source:
                _set_source(cell, moved)
        changes = sync_notebook(nb, name, new, language)
        changed = notebook_text(nb)
        if changed != text:
            report.append(f"notebooks/{name}: " + ", ".join(changes or ["links retargeted"]))
        report += [
            f"notebooks/{name}: {link} names another repository" for link in foreign_links(changed, new)
        ]
        if changed != text and not check:
            path.write_text(changed, encoding="utf-8")
    return report


def main(argv: Sequence[str]) -> int:
    """Command line: [URL] [--check]; see the module's docstring."""
    parser = argparse.ArgumentParser(
        prog="python3 course.py retarget",
        description="Bring every link to the course's repository and every notebook's launch buttons and "
        "set-up cell in line with pyproject.toml's [project.urls] Repository.",
    )
    parser.add_argument(
        "url", nargs="?", help="first point everything at this repository: https://github.com/OWNER/NAME"
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; list what is out of line, exit 1 if any"
    )
    args = parser.parse_args(argv)
    try:
        report = update(ROOT, args.url, check=args.check)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for line in report:
        print(line)
    if args.check:
        return 1 if report else 0
    if any(line.startswith("notebooks/") for line in report):
        print("Now run `python3 course.py regenerate` on the notebooks listed to store their outputs.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
