"""Build the course's website from the committed, executed notebooks (never re-executed), or serve it.

    python scripts/website.py [--out DIR]                  build into DIR/html (default build/site)
    python scripts/website.py [--out DIR] --serve [--port N]
                                                        build, then serve on http://127.0.0.1:N/

The pages of docs/ (the home page lists the notebooks with what README.md's table says each
teaches) and every notebooks/NN_*.ipynb are staged into DIR/src, laid out as in the repository,
and built by Sphinx with docs/conf.py.
The Chinese edition (docs/zh-CN/, README.zh-CN.md's table, notebooks/zh-CN/NN_*.ipynb) is staged into
DIR/src-zh-CN with the same layout (its notebooks in notebooks/) and built into DIR/html/zh-CN/,
so a page has one path in each language: notebooks/05_data_parallel.html and
zh-CN/notebooks/05_data_parallel.html. Every page links to itself in the other language, and each
notebook's page to a copy of the notebook beside it, for download. Every warning is an error.
Called through `python3 course.py site`.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from urllib.parse import quote

import owned_folders

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DEFAULT_OUT = ROOT / "build" / "site"


CHINESE = "zh-CN"
# Per edition: its pages under docs/, its README (whose table says what each notebook teaches), its
# notebooks' folder, and where its site goes under html/.
# Both editions stage their notebooks into notebooks/, so their pages have the same paths.
EDITIONS = {
    "en": (DOCS, "README.md", Path("notebooks"), Path(".")),
    CHINESE: (DOCS / CHINESE, f"README.{CHINESE}.md", Path("notebooks") / CHINESE, Path(CHINESE)),
}
STAGED_NOTEBOOKS = Path("notebooks")


def course_notebooks(language: str = "en") -> list[Path]:
    """An edition's notebooks in course order: notebooks/NN_*.ipynb (or notebooks/zh-CN/...) by name."""
    folder = ROOT / EDITIONS[language][2]
    notebooks = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(
            f"no {folder.relative_to(ROOT)}/NN_*.ipynb under {ROOT}: run this from a clone"
        )
    return notebooks


NOTEBOOK_ROW = re.compile(r"^\| `(?P<name>\d\d_\w+)\.ipynb` \| (?P<what>.+?) \|$", re.MULTILINE)
NOTEBOOK_LIST = (
    "<!-- notebook list: scripts/website.py puts one line per notebook here, from the README's table -->"
)
CHINESE_NOTEBOOK_LINK = re.compile(rf"(\]\()notebooks/{CHINESE}/")


def repository_url() -> str:
    """The course's repository, named once in pyproject.toml's [project.urls]."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"][
        "Repository"
    ]


def notebook_title(path: Path) -> str:
    """The `# NN · Title` heading of a notebook's first cell, without the `# `."""
    first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
    return first.splitlines()[0].removeprefix("# ").strip()


def notebook_list(language: str) -> str:
    """One line per notebook of an edition, in course order: its title as a link, then what it teaches
    (the README's table says that; a notebook the table lacks gets its title alone)."""
    readme = (ROOT / EDITIONS[language][1]).read_text(encoding="utf-8")
    what = {row["name"]: row["what"].strip() for row in NOTEBOOK_ROW.finditer(readme)}
    lines = []
    for path in course_notebooks(language):
        line = f"- [{notebook_title(path)}]({STAGED_NOTEBOOKS.as_posix()}/{path.name})"
        colon = ": " if language == "en" else "："  # a Chinese colon after a Chinese title
        lines.append(f"{line}{colon}{what[path.stem]}" if path.stem in what else line)
    return "\n".join(lines)


def site_page(text: str, language: str) -> str:
    """A page of docs/ as the site shows it: the notebook list and the course's addresses filled in
    (from pyproject.toml, so `course.py retarget` moves them), and a Chinese page's links to
    notebooks/zh-CN/ (right in the repository) pointing where the site stages them, notebooks/."""
    repository = repository_url().rstrip("/")
    owner_repo = repository.removeprefix("https://github.com/")
    first = f"notebooks/{'' if language == 'en' else language + '/'}00_start_here.ipynb"
    binder = f"https://mybinder.org/v2/gh/{owner_repo}/main?labpath={quote(first, safe='')}"
    colab = f"https://colab.research.google.com/github/{owner_repo}/blob/main/{first}"
    text = (
        text.replace(NOTEBOOK_LIST, notebook_list(language))
        .replace("{{ repository }}", repository)
        .replace("{{ binder }}", f"[Binder]({binder})")
        .replace("{{ colab }}", f"[Colab]({colab})")
    )
    return text if language == "en" else CHINESE_NOTEBOOK_LINK.sub(r"\1notebooks/", text)


def stage_sources(stage: Path, language: str = "en") -> list[Path]:
    """Copy an edition's pages and notebooks into `stage`, a folder that must not exist yet, the
    notebooks in notebooks/.

    Return the notebooks. docs/images/ and docs/_static/ serve both editions.
    """
    pages = EDITIONS[language][0]
    shutil.copytree(pages, stage, ignore=shutil.ignore_patterns("conf.py", "__pycache__", CHINESE))
    if language != "en":
        for shared in ("images", "_static"):  # serve both editions
            shutil.copytree(DOCS / shared, stage / shared)
    for page in stage.rglob("*.md"):
        page.write_text(site_page(page.read_text(encoding="utf-8"), language), encoding="utf-8")
    (stage / STAGED_NOTEBOOKS / SOLUTIONS).mkdir(parents=True)
    notebooks = course_notebooks(language)
    for notebook in notebooks:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        for cell in nb["cells"]:  # a notebook's link to its solutions file leads to their page here
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                cell["source"] = SOLUTIONS_LINK.sub(r"](solutions/\1.md)", text)
        (stage / STAGED_NOTEBOOKS / notebook.name).write_text(
            json.dumps(nb, ensure_ascii=False), encoding="utf-8"
        )
        solution = notebook.parent / SOLUTIONS / f"{notebook.stem}.py"
        if solution.is_file():
            page = stage / STAGED_NOTEBOOKS / SOLUTIONS / f"{notebook.stem}.md"
            page.write_text(solutions_page(solution, notebook_title(notebook), language), encoding="utf-8")
    return notebooks


SOLUTIONS = "solutions"
SOLUTIONS_LINK = re.compile(r"\]\(solutions/(\d\d_\w+)\.py\)")
SOLUTIONS_WORDS = {
    "en": (
        "Solutions: {title}",
        "A solution to each exercise of [{title}](../{name}.ipynb). Try each exercise first. In the "
        "notebook's folder, `%run solutions/{name}.py` runs this file: every check says it is right.",
    ),
    CHINESE: (
        "参考答案：{title}",
        "[{title}](../{name}.ipynb) 每道练习的参考答案。请先自己做每道练习。在笔记本所在的文件夹里，"
        "`%run solutions/{name}.py` 运行这个文件：每个检查都会说答案正确。",
    ),
}


def solutions_page(solution: Path, title: str, language: str) -> str:
    """The site's page of a notebook's solutions file: its code whole, under a title and a line on
    how to use it (a page no table of contents lists: each notebook links to its own)."""
    heading, intro = SOLUTIONS_WORDS[language]
    name = solution.stem
    code = solution.read_text(encoding="utf-8").rstrip("\n")
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", code)), default=0) + 1)
    front = "---\norphan: true\n---\n\n"
    words = f"# {heading.format(title=title)}\n\n{intro.format(title=title, name=name)}\n\n"
    return f"{front}{words}{fence}python\n{code}\n{fence}\n"


def sphinx(stage: Path, html: Path, doctrees: Path, language: str) -> None:
    """Build one edition from `stage` into `html`; raise if Sphinx warns or fails."""
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "--builder=html",
        "--fail-on-warning",
        "--keep-going",
        "--nitpicky",
        "--quiet",
        f"--conf-dir={DOCS}",
        f"--doctree-dir={doctrees}",
        str(stage),
        str(html),
    ]
    env = {**os.environ, "COURSE_SITE_LANGUAGE": language, "COURSE_SITE_CACHE": str(doctrees)}
    status = subprocess.call(command, cwd=ROOT, env=env)
    if status != 0:
        raise RuntimeError(
            f"Sphinx failed on the {language} edition (exit status {status}): fix the warnings above and "
            f"build again (files under {stage} are copies of the course's pages and notebooks)"
        )


def unmatched_pages(html: Path) -> list[str]:
    """Pages of one edition that the other lacks: each page's language switch must lead somewhere."""
    english = {p.relative_to(html).as_posix() for p in html.rglob("*.html") if CHINESE not in p.parts}
    chinese = {p.relative_to(html / CHINESE).as_posix() for p in (html / CHINESE).rglob("*.html")}
    inner = {"genindex.html", "search.html"}
    pages = {p for p in english ^ chinese if "_static" not in p and p not in inner}
    return sorted(pages)


def build_folders() -> list[str]:
    """The entries of the build folder that a build writes, and so replaces: html/ and, per
    edition, the staged sources and Sphinx's doctrees."""
    suffixes = ["" if language == "en" else f"-{language}" for language in EDITIONS]
    return ["html", *(f"{kind}{suffix}" for suffix in suffixes for kind in ("src", "doctrees"))]


def build(out: Path, option: str = "--out") -> Path:
    """Build both editions into `out`/html from scratch and return that folder; raise if Sphinx warns.

    `out` must be missing, empty or a build folder of the course's (owned_folders): a folder of
    the user's raises NotOurFolder (its message names `option`), and only the entries a build
    writes are replaced, so nothing else in `out` is ever removed.
    """
    out = owned_folders.claim(out, option)
    owned_folders.remove(out, *build_folders())
    html = out / "html"
    started, count = time.monotonic(), 0
    for language, (_, _, _, subfolder) in EDITIONS.items():
        suffix = "" if language == "en" else f"-{language}"
        stage, doctrees = out / f"src{suffix}", out / f"doctrees{suffix}"
        notebooks = stage_sources(stage, language)
        sphinx(stage, html / subfolder, doctrees, language)
        for notebook in notebooks:  # beside its page, which links to it for download
            shutil.copy2(notebook, html / subfolder / STAGED_NOTEBOOKS / notebook.name)
        count += len(notebooks)
    if missing := unmatched_pages(html):
        raise RuntimeError(
            f"these pages exist in one language only, so a language switch leads nowhere: {missing}"
        )
    seconds = time.monotonic() - started
    print(f"Built {count} notebook pages in two languages in {seconds:.1f} s: {html / 'index.html'}")
    return html


def make_server(html: Path, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server for the built site in `html`, bound to 127.0.0.1 only (port 0: any free one)."""
    if not (html / "index.html").is_file():
        raise FileNotFoundError(f"no site in {html}: build it first with `python3 course.py site`")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(html: Path, port: int) -> None:
    """Serve `html` on 127.0.0.1 until Ctrl+C."""
    with make_server(html, port) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        print(f"Serving the course at {url} (Ctrl+C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("Stopped.")


def main(argv: list[str]) -> int:
    """Parse the command line, build, and serve when asked."""
    parser = argparse.ArgumentParser(
        prog="python3 course.py site",
        description="Build (and serve) the course's website, both languages, from the stored outputs.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="build folder: new, empty or one an earlier build made (default build/site)",
    )
    parser.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building")
    parser.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000; 0: any free)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be between 0 and 65535, not {args.port}")
    if args.out == DEFAULT_OUT:  # the course's own folder under build/, also from before markers
        owned_folders.adopt(DEFAULT_OUT)
    try:
        html = build(args.out)
    except (RuntimeError, FileNotFoundError, owned_folders.NotOurFolder) as err:
        print(err, file=sys.stderr)
        return 1
    if args.serve:
        try:
            serve(html, args.port)
        except OSError as err:
            print(f"Cannot serve on 127.0.0.1:{args.port} ({err}): pick another with --port", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
