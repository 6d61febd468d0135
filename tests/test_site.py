"""The course's website: built once into a temporary folder, then checked page by page and in Chromium.

The build runs `scripts/website.py` as `python3 course.py site` does (every Sphinx warning is an
error). The checks read the built HTML of both editions: a page for every notebook in course
order with previous/next links, every internal link and anchor resolving, seed 003's per-replica
sizes on the DataParallel page, every stored output and figure shown, launch links made from
pyproject's repository URL, one path per page in each language, a landing page for students,
no path of the building machine. The browser test serves the site on 127.0.0.1 and drives
headless Chromium through it (see tests/browser.py for how Chromium is found).
"""

from __future__ import annotations

import functools
import html
import json
import logging
import os
import re
import runpy
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urlsplit

import pytest
from browser import UI_TIMEOUT_MS, artifact_dir, chromium_page
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document
from notebook_hygiene import ROOT
from website import CHINESE, EDITIONS, NOTEBOOK_ROW, course_notebooks, make_server

BUILD_TIMEOUT_S = 600  # a guard against a hang: both editions take 1.5 to 4 minutes on a busy 2-core machine
# Each edition: its language and the folder of its pages under the site's root.
LANGUAGES = {"en": "", CHINESE: f"{CHINESE}/"}
TEXT_SUFFIXES = {".html", ".js", ".json", ".txt", ".ipynb", ".css", ".inv"}
# Beside the clone in CI; $COURSE_SEEDS names them elsewhere (the site builds without them).
SEEDS = Path(os.environ.get("COURSE_SEEDS") or ROOT.parent / "shared" / "seeds")
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"][
    "Repository"
]


@dataclass
class Page:
    """What the checks need from one built HTML page."""

    ids: set[str] = field(default_factory=set)
    links: list[tuple[str, str]] = field(default_factory=list)  # (tag, url)
    classes_links: list[tuple[str, str]] = field(default_factory=list)  # (class attribute, href)
    text: str = ""


class PageParser(HTMLParser):
    """Collects ids, every href/src, and the visible text of a page (scripts and styles left out)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._skip = 0
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        for name in ("id", "name"):
            if values.get(name) and (name == "id" or tag == "a"):
                self.page.ids.add(values[name])
        for name in ("href", "src"):
            if name in values and tag in ("a", "link", "script", "img"):
                self.page.links.append((tag, values[name]))
        if tag == "a" and "href" in values:
            self.page.classes_links.append((values.get("class", ""), values["href"]))
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        self.page.text = "".join(self._text)


@functools.cache
def parse(path: Path) -> Page:
    """Parse one built page, once: the site does not change after its build, and most checks read
    every page (about a second and a half per pass over both editions)."""
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.page


@dataclass
class Site:
    """A built site: its HTML folder, the build's own folder, and what the build printed."""

    html: Path
    out: Path
    log: str

    def page(self, relative: str) -> Page:
        """The parsed page at `relative` (e.g. notebooks/05_data_parallel.html)."""
        return parse(self.html / relative)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site, built once for this module by the command `python3 course.py site` runs."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "website.py"), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"the site did not build:\n{log[-6000:]}"
    print(log)
    return Site(html=out / "html", out=out, log=log)


def built_pages(html_dir: Path) -> list[Path]:
    """Every page of the site (the theme's template fragments under _static/ are not pages)."""
    return sorted(p for p in html_dir.rglob("*.html") if "_static" not in p.relative_to(html_dir).parts)


def notebook_pages() -> list[str]:
    """The page each notebooks/NN_*.ipynb should have, in course order."""
    return [f"notebooks/{path.stem}.html" for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


def cell_source_of(path: Path, number: int) -> str:
    """The source of a notebook's cell `number` (0: the first)."""
    return "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][number]["source"])


def notebook_title(path: Path) -> str:
    """The `# NN · Title` heading of a notebook's first cell."""
    first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
    return first.splitlines()[0].removeprefix("# ").strip()


def test_the_build_printed_no_warning(site):
    assert "WARNING" not in site.log and "ERROR" not in site.log, site.log[-4000:]
    count = len(course_notebooks()) + len(course_notebooks(CHINESE))
    assert f"Built {count} notebook pages in two languages" in site.log


def test_a_page_for_every_notebook_in_course_order(site):
    pages = notebook_pages()
    assert pages == sorted(pages) and len(pages) >= 10
    for path, relative in zip(course_notebooks(), pages, strict=True):
        page = site.page(relative)
        assert notebook_title(path) in page.text, f"{relative} lacks its title"
    # the home page's navigation lists them in the same order
    home = [
        href for _, href in site.page("index.html").links if re.fullmatch(r"notebooks/\d\d_\w+\.html", href)
    ]
    assert list(dict.fromkeys(home)) == pages
    # following "next" from the home page visits every notebook in order, then the seeds page
    visited, current = [], "index.html"
    for _ in range(len(pages) + 1):
        nexts = [href for cls, href in site.page(current).classes_links if "right-next" in cls.split()]
        assert len(nexts) == 1, f"{current} has {len(nexts)} 'next' links"
        current = os.path.normpath(Path(current).parent / nexts[0]).replace(os.sep, "/")
        visited.append(current)
    assert visited == [*pages, "seeds.html"]
    # and "previous" leads back
    previous = [href for cls, href in site.page(pages[1]).classes_links if "left-prev" in cls.split()]
    assert previous == [Path(pages[0]).name]


def test_every_internal_link_and_anchor_resolves(site):
    pages = built_pages(site.html)
    parsed = {path: parse(path) for path in pages}
    checked, broken = 0, []
    for path, page in parsed.items():
        for tag, url in page.links:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:")) or not url:
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.is_file():
                broken.append(f"{path.relative_to(site.html)}: <{tag}> {url} (no file)")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site.html)}: <{tag}> {url} (no such anchor)")
    assert not broken, "\n".join(broken)
    assert checked > 500, f"only {checked} internal links: is the parser still finding them?"
    # the seeds page links into the notebooks' sections, and those resolved above
    seeds = [url for _, url in site.page("seeds.html").links if url.startswith("notebooks/") and "#" in url]
    assert len(seeds) >= 40


def chinese_notebook_pages() -> list[str]:
    """The page each notebooks/zh-CN/NN_*.ipynb should have, under the site's zh-CN/ folder, in order:
    the English page's path in that folder."""
    return [f"{CHINESE}/notebooks/{path.stem}.html" for path in course_notebooks(CHINESE)]


def test_the_chinese_edition_has_every_notebook_in_order_with_its_chinese_title(site):
    pages = chinese_notebook_pages()
    assert [Path(p).name for p in pages] == [Path(p).name for p in notebook_pages()]
    for path, relative in zip(course_notebooks(CHINESE), pages, strict=True):
        assert notebook_title(path) in site.page(relative).text, f"{relative} lacks its title"
        raw = (site.html / relative).read_text(encoding="utf-8")
        assert '<html lang="zh-CN"' in raw, f"{relative} does not say it is Chinese"
    home = [
        href
        for _, href in site.page(f"{CHINESE}/index.html").links
        if re.fullmatch(r"notebooks/\d\d_\w+\.html", href)
    ]
    assert [f"{CHINESE}/{href}" for href in dict.fromkeys(home)] == pages
    assert "术语表" in site.page(f"{CHINESE}/glossary.html").text


def switch_target(page: Path) -> Path | None:
    """Where a page's language switch leads (None: it has none)."""
    links = [url for tag, url in parse(page).links if tag == "a"]
    raw = page.read_text(encoding="utf-8")
    found = re.search(r'<p class="language-switch"><a href="([^"]+)"', raw)
    assert found is None or found[1] in links
    return None if found is None else (page.parent / found[1]).resolve()


def test_every_page_switches_to_itself_in_the_other_language_and_back(site):
    pages = [p for p in built_pages(site.html) if p.name not in ("search.html", "genindex.html")]
    pairs = 0
    for page in pages:
        target = switch_target(page)
        assert target is not None, f"{page.relative_to(site.html)} has no language switch"
        assert target.is_file(), f"{page.relative_to(site.html)} switches to a missing page"
        assert (CHINESE in target.relative_to(site.html).parts) != (
            CHINESE in page.relative_to(site.html).parts
        )
        assert switch_target(target) == page.resolve(), f"{target} does not switch back"
        assert target.stem == page.stem
        pairs += 1
    assert pairs >= 2 * (len(notebook_pages()) + 3)


def test_the_chinese_search_index_holds_chinese_words(site):
    script = (site.html / CHINESE / "searchindex.js").read_text(encoding="utf-8")
    terms = json.loads(script.removeprefix("Search.setIndex(").removesuffix(")"))["terms"]
    for word in ("梯度", "张量", "进程"):
        assert word in terms, f"{word} is not in the Chinese search index: is jieba installed?"
    language_data = (site.html / CHINESE / "_static" / "language_data.js").read_text(encoding="utf-8")
    stemmer = re.search(r"window\.Stemmer = (\w+);", language_data)
    assert stemmer and f"var {stemmer[1]}=" in language_data, "the search page names a stemmer it lacks"


def seed_003_listing(gpus: int, replicas: list[list[int]]) -> re.Pattern[str]:
    """The lines seed 003's loop prints for `gpus` GPUs, replicas in device order, under a heading
    that names the GPU count (in the page's language)."""
    lines = []
    for batch in replicas:
        for rows in batch:
            lines.append(
                f"\tIn Model: input size torch.Size([{rows}, 5]) output size torch.Size([{rows}, 2])"
            )
        total = sum(batch)
        lines.append(f"Outside: input size torch.Size([{total}, 5]) output_size torch.Size([{total}, 2])")
    return re.compile(rf"^[^\n]*\b{gpus}\b[^\n\d]*\n" + re.escape("\n".join(lines)), re.MULTILINE)


@pytest.mark.parametrize("language", LANGUAGES)
def test_seed_003_per_replica_tables_on_the_dataparallel_page(site, language):
    text = site.page(f"{LANGUAGES[language]}notebooks/05_data_parallel.html").text
    spec = {  # COURSE_SPEC's seed 003 reference, in device order
        2: [[15, 15], [15, 15], [15, 15], [5, 5]],
        3: [[10, 10, 10], [10, 10, 10], [10, 10, 10], [4, 4, 2]],
        8: [[4] * 7 + [2], [4] * 7 + [2], [4] * 7 + [2], [2] * 5],
    }
    for gpus, replicas in spec.items():
        assert seed_003_listing(gpus, replicas).search(text), (
            f"seed 003's {gpus}-GPU listing is not on the page"
        )
    if language == "en":
        assert "SIMULATED 8 GPUs (replicas run one after another on the CPU, in device order)" in text
        assert "SIMULATED 4 GPUs" not in text


def test_every_image_exists_and_the_notebook_figures_are_there(site):
    images = 0
    for path in built_pages(site.html):
        for tag, url in parse(path).links:
            if tag != "img" or urlsplit(url).scheme:
                continue
            target = (path.parent / unquote(urlsplit(url).path)).resolve()
            assert target.is_file() and target.stat().st_size > 100, f"{path.name}: missing image {url}"
            head = target.read_bytes()[:200]
            assert head.startswith(b"\x89PNG") or b"<svg" in head, f"{url} is not a PNG or SVG image"
            images += 1
    for language, folder in LANGUAGES.items():
        for notebook in course_notebooks(language):
            # counted in the English notebook, so a Chinese page whose figures went missing fails too
            cells = json.loads((ROOT / "notebooks" / notebook.name).read_text(encoding="utf-8"))["cells"]
            plots = sum(
                "image/png" in out.get("data", {}) for cell in cells for out in cell.get("outputs", [])
            )
            shown = [u for t, u in site.page(f"{folder}notebooks/{notebook.stem}.html").links if t == "img"]
            assert len([u for u in shown if "_images/" in u]) >= plots, f"{notebook}: a figure is missing"
    assert images >= 6


def test_the_gpu_picker_is_a_labelled_screenshot_with_live_links(site):
    page = site.page("notebooks/04_choosing_gpus.html")
    cells = json.loads((ROOT / "notebooks" / "04_choosing_gpus.ipynb").read_text(encoding="utf-8"))["cells"]
    widgets = [
        "".join(cell["source"])
        for cell in cells
        for out in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in out.get("data", {})
    ]
    assert any("GpuPicker(demo_inventory())" in source for source in widgets)
    assert page.text.count("A live widget: this page is static") == len(widgets)
    assert page.text.count("Screenshot of the GPU picker on the demo fleet") == 1
    assert any(t == "img" and url.endswith("04_gpu_picker_demo.png") for t, url in page.links)
    raw = (site.html / "notebooks" / "04_choosing_gpus.html").read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in raw  # no dead widget placeholder


def test_launch_links_come_from_the_one_repository_url(site):
    owner_repo = urlsplit(REPOSITORY).path.strip("/")
    for relative in notebook_pages():
        hrefs = [href for _, href in site.page(relative).links]
        notebook = relative.removesuffix(".html") + ".ipynb"
        binder = [h for h in hrefs if h.startswith(f"https://mybinder.org/v2/gh/{owner_repo}/")]
        colab = [h for h in hrefs if h.startswith("https://colab.research.google.com/github/")]
        assert binder and all(notebook.replace("/", "%2F") in h or notebook in h for h in binder), relative
        assert colab and all(h.endswith(f"/{owner_repo}/blob/main/{notebook}") for h in colab), relative


def test_the_chinese_pages_launch_the_chinese_notebooks(site):
    owner_repo = urlsplit(REPOSITORY).path.strip("/")
    for relative in chinese_notebook_pages():
        hrefs = [href for _, href in site.page(relative).links]
        notebook = f"notebooks/{CHINESE}/{Path(relative).stem}.ipynb"
        binder = [h for h in hrefs if h.startswith(f"https://mybinder.org/v2/gh/{owner_repo}/")]
        colab = [h for h in hrefs if h.startswith("https://colab.research.google.com/github/")]
        assert notebook.startswith(f"notebooks/{CHINESE}/")
        assert binder and all(notebook.replace("/", "%2F") in h or notebook in h for h in binder), relative
        assert colab and all(h.endswith(f"/{owner_repo}/blob/main/{notebook}") for h in colab), relative


def test_no_page_contains_a_path_of_the_building_machine(site):
    paths = {str(site.out), str(site.out.resolve()), str(ROOT), os.path.expanduser("~")}
    paths = {p for p in paths if len(p) > 1}
    leaks = []
    for path in sorted(site.html.rglob("*")):
        if not path.is_file() or path.suffix not in {
            ".html",
            ".js",
            ".json",
            ".txt",
            ".ipynb",
            ".css",
            ".inv",
        }:
            continue
        content = path.read_bytes().decode("utf-8", errors="replace")
        leaks += [f"{path.relative_to(site.html)}: {p}" for p in paths if p in content]
        leaks += [f"{path.relative_to(site.html)}: /tmp/" for _ in re.findall(r"(?<![\w.])/tmp/\w", content)]
    assert not leaks, "\n".join(leaks[:20])


def test_the_seeds_page_cites_every_seed_and_copies_none(site):
    page = site.page("seeds.html")
    for number in ("000", "001", "002", "003", "004"):
        assert f"Seed {number}" in page.text
    if not SEEDS.is_dir():
        pytest.skip(f"the seeds are not beside this clone ({SEEDS}); the page was checked without them")
    cjk = re.compile(r"[\u4e00-\u9fff]{8,}")
    for seed in sorted(SEEDS.glob("00[0-4]_*.txt")):
        runs = set(cjk.findall(seed.read_text(encoding="utf-8")))
        copied = [run for run in runs if run in page.text and len(run) > 12]
        assert not copied, f"{seed.name}: text copied onto the seeds page: {copied}"


def test_the_chinese_seeds_page_quotes_each_seed_in_its_own_words_briefly(site):
    page = site.page(f"{CHINESE}/seeds.html")
    if not SEEDS.is_dir():
        pytest.skip(f"the seeds are not beside this clone ({SEEDS}); the page was checked without them")
    cjk = re.compile(r"[\u4e00-\u9fff]{6,}")
    for seed in sorted(SEEDS.glob("00[0-4]_*.txt")):
        runs = set(cjk.findall(seed.read_text(encoding="utf-8")))
        quoted = [run for run in runs if run in page.text]
        assert quoted, f"{seed.name}: the Chinese seeds page quotes none of its words"
        assert all(len(run) <= 60 for run in quoted), f"{seed.name}: a long passage is copied: {quoted}"


def stored_output_cells(notebook: Path) -> int:
    """How many code cells of a notebook store an output."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum(1 for cell in cells if cell["cell_type"] == "code" and cell.get("outputs"))


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_notebook_page_shows_the_outputs_stored_in_its_notebook(site, language):
    for notebook in course_notebooks(language):
        raw = (site.html / f"{LANGUAGES[language]}notebooks/{notebook.stem}.html").read_text(encoding="utf-8")
        shown = raw.count('class="cell_output docutils container"')
        assert shown == stored_output_cells(notebook) > 0, (
            f"{language} {notebook.name}: {shown} outputs shown"
        )


def test_each_page_has_one_path_in_each_language(site):
    english = {p.relative_to(site.html).as_posix() for p in built_pages(site.html) if CHINESE not in p.parts}
    chinese = {p.relative_to(site.html / CHINESE).as_posix() for p in built_pages(site.html / CHINESE)}
    assert english == chinese
    assert {f"notebooks/{p.stem}.html" for p in course_notebooks(CHINESE)} <= chinese
    repeated = [p for p in site.html.rglob("*") if f"{CHINESE}/notebooks/{CHINESE}" in p.as_posix()]
    assert not repeated, repeated[:5]
    for page in built_pages(site.html):
        for _, url in parse(page).links:
            assert urlsplit(url).scheme or f"notebooks/{CHINESE}/" not in url, f"{page}: links {url}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_notebook_page_links_its_notebook_for_download(site, language):
    for notebook in course_notebooks(language):
        relative = f"{LANGUAGES[language]}notebooks/{notebook.stem}.html"
        downloads = [href for cls, href in site.page(relative).classes_links if "download-notebook" in cls]
        assert downloads == [notebook.name], relative
        assert (site.html / relative).with_name(notebook.name).read_bytes() == notebook.read_bytes()


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_notebook_with_exercises_links_its_solutions_page_which_holds_the_file(site, language):
    for notebook in course_notebooks(language):
        solution = notebook.parent / "solutions" / f"{notebook.stem}.py"
        if not solution.is_file():
            continue
        relative = f"{LANGUAGES[language]}notebooks/{notebook.stem}.html"
        links = [href for _, href in site.page(relative).classes_links]
        assert f"solutions/{notebook.stem}.html" in links, f"{relative} does not link its solutions"
        page = (site.html / relative).with_name("solutions") / f"{notebook.stem}.html"
        shown = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        last = solution.read_text(encoding="utf-8").strip().splitlines()[-1]
        assert last in shown, f"{page.name} lacks the solution's code"


def test_every_page_names_the_course_and_its_licence_in_its_footer(site):
    licence = f"{REPOSITORY.rstrip('/')}/blob/main/LICENSE"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    for page in built_pages(site.html):
        raw = page.read_text(encoding="utf-8")
        footer = re.search(r'<p class="course-footer">(.*?)</p>', raw, re.DOTALL)
        assert footer and "PyTorch on GPUs, hands-on" in footer[1], page
        assert f'href="{licence}"' in footer[1] and "MIT" in footer[1], page


TYPOGRAPHIC = str.maketrans({"’": "'", "“": '"', "”": '"'})  # the site's quotes, as the README types them


def readme_rows(language: str) -> dict[str, str]:
    """What an edition's README table says each notebook teaches, by notebook name (no suffix)."""
    readme = (ROOT / EDITIONS[language][1]).read_text(encoding="utf-8")
    return {row["name"]: row["what"] for row in NOTEBOOK_ROW.finditer(readme)}


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_home_page_is_for_students_and_links_every_notebook_with_a_line(site, language):
    folder = LANGUAGES[language]
    raw = (site.html / f"{folder}index.html").read_text(encoding="utf-8")
    main = raw[raw.index("<main") : raw.index("</main>")]
    listed = re.findall(r'<li><p><a class="reference internal" href="(notebooks/\d\d_\w+\.html)">', main)
    assert listed == [f"notebooks/{p.stem}.html" for p in course_notebooks(language)]
    text = site.page(f"{folder}index.html").text.translate(TYPOGRAPHIC)
    rows = readme_rows(language)
    for notebook in course_notebooks(language):
        assert notebook_title(notebook) in text
        words = re.sub(r"`([^`]*)`", r"\1", rows[notebook.stem]).translate(TYPOGRAPHIC)
        assert words in text, f"{notebook.stem}'s line is not on the home page"
    for word in ("Binder", "Colab", "Kaggle", "git clone", "download.pytorch.org/whl/cpu"):
        assert word in text
    for insider in ("PIP_CONSTRAINT", "retarget", "course.py bench", "course.py test", "nbval"):
        assert insider not in text, f"the home page speaks of {insider}"
    instructors = [href for _, href in site.page(f"{folder}index.html").links if href == "instructors.html"]
    assert instructors
    page = site.page(f"{folder}instructors.html").text
    for word in ("course.py test", "course.py bench", "retarget", ">=2.9,<2.16"):
        assert word in page, f"the instructors' page lacks {word}"


def test_a_warning_of_the_chinese_site_configuration_reaches_sphinx(monkeypatch, caplog):
    """A warning from docs/conf.py goes to Sphinx's logger, which --fail-on-warning watches, in both editions
    (the Chinese build imports jieba, which must not take the name `logging`)."""
    document = new_document("page", get_default_settings(Parser))
    for language in LANGUAGES:
        monkeypatch.setenv("COURSE_SITE_LANGUAGE", language)
        conf = runpy.run_path(str(ROOT / "docs" / "conf.py"), run_name="course_site_conf")
        app = SimpleNamespace(env=SimpleNamespace(docname="notebooks/04_choosing_gpus"))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            conf["replace_widgets"](app, document)  # no widget on this page: the screenshot is unused
        assert [r.name for r in caplog.records] == ["sphinx.course_site_conf"], language


@pytest.fixture(scope="module")
def served(site: Site) -> Iterator[str]:
    """The built site served on 127.0.0.1 by the server `--serve` uses, stopped afterwards."""
    server = make_server(site.html, 0)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


TINY_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'


def foreign_snippets(page: object) -> list[str]:
    """The search results' snippets that are not the words of their page's article (the theme's menus,
    the page's table of contents and the language switch are not)."""
    return page.evaluate(
        """async () => {
            const flat = (text) => text.replace(/\\s+/g, " ").trim();
            const foreign = [];
            for (const item of document.querySelectorAll("#search-results ul.search li")) {
                const snippet = item.querySelector("p.context");
                if (!snippet) continue;
                const html = await (await fetch(item.querySelector("a").href)).text();
                const article = new DOMParser().parseFromString(html, "text/html").querySelector("article");
                article.querySelectorAll(".headerlink").forEach((link) => link.remove());  // as Sphinx does
                const words = flat(snippet.textContent).replace(/^\\.\\.\\./, "").replace(/\\.\\.\\.$/, "");
                if (!flat(article.textContent).includes(words)) foreign.push(words.slice(0, 120));
            }
            return foreign;
        }"""
    )


def sideways_code(page: object) -> list[str]:
    """The widest line of every code cell of the shown page that does not fit its box (it would
    scroll sideways), and of every code block or output that wraps its lines instead of keeping them."""
    return page.evaluate(
        """() => {
            const widest = (pre) => pre.innerText.split("\\n").sort((a, b) => b.length - a.length)[0];
            const all = [...document.querySelectorAll(".bd-article pre")];
            const cells = all.filter((pre) => pre.closest(".cell_input"));
            const scrolls = cells.filter((pre) => pre.scrollWidth > pre.clientWidth + 1);
            const wraps = all.filter((pre) => getComputedStyle(pre).whiteSpace !== "pre");
            const said = (what) => (pre) => what + widest(pre);
            return [...scrolls.map(said("scrolls: ")), ...wraps.map(said("wraps: "))];
        }"""
    )


# The pages whose code and outputs the browser test measures at 1280 px: 00 and 05 (the set-up and
# long listings), 13 (its bytes table) and 15 (the widest code).
WIDTH_CHECKED = (
    "00_start_here",
    "05_data_parallel",
    "13_fsdp_and_tp_in_practice",
    "15_capstone_train_a_transformer",
)


def test_home_and_dataparallel_pages_in_a_real_browser(served, tmp_path):
    from playwright.sync_api import expect

    with chromium_page(1400, 900) as page:
        console: list[str] = []
        outside: list[tuple[str, str]] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda err: console.append(f"page error: {err}"))

        def offline(route: object) -> None:
            # The test machine has no network: anything from elsewhere is recorded and answered here.
            request = route.request
            if request.url.startswith(served):
                route.continue_()
            else:
                outside.append((request.resource_type, request.url))
                route.fulfill(status=200, content_type="image/svg+xml", body=TINY_SVG)

        page.route("**/*", offline)
        shots = artifact_dir(tmp_path)
        try:
            page.goto(f"{served}/index.html")
            expect(page.locator("h1").first).to_contain_text(
                "PyTorch on GPUs, hands-on", timeout=UI_TIMEOUT_MS
            )
            # the landing page: every notebook a link that opens, one search box, the switch and back
            page.wait_for_load_state("load")
            for language, folder in LANGUAGES.items():
                listed = page.locator("article li > p > a.reference.internal[href^='notebooks/']")
                expect(listed).to_have_count(len(course_notebooks(language)), timeout=UI_TIMEOUT_MS)
                for href in listed.evaluate_all("(links) => links.map((a) => a.href)"):
                    assert page.request.get(href).status == 200, href
                expect(page.locator(".search-button-field:visible")).to_have_count(1, timeout=UI_TIMEOUT_MS)
                expect(page.locator("button.search-button:visible")).to_have_count(0, timeout=UI_TIMEOUT_MS)
                assert sideways_code(page) == [], f"{folder}index.html"
                page.screenshot(path=str(shots / f"site_home_{language}.png"))
                page.locator("p.language-switch a[hreflang]").first.click()
                other = "" if folder else f"{CHINESE}/"
                expect(page).to_have_url(
                    re.compile(rf"127\.0\.0\.1:\d+/{other}index\.html$"), timeout=UI_TIMEOUT_MS
                )
                page.wait_for_load_state("load")
            expect(page.locator("html")).to_have_attribute("lang", "en", timeout=UI_TIMEOUT_MS)
            # at 1280 px, code cells fit their box and nothing wraps (outputs may scroll), both languages
            page.set_viewport_size({"width": 1280, "height": 900})
            for language, folder in LANGUAGES.items():
                for name in WIDTH_CHECKED:
                    page.goto(f"{served}/{folder}notebooks/{name}.html")
                    page.wait_for_load_state("load")
                    assert sideways_code(page) == [], f"{folder}notebooks/{name}.html"
                    page.screenshot(path=str(shots / f"site_{name}_{language}.png"), full_page=True)
            page.set_viewport_size({"width": 1400, "height": 900})
            page.goto(f"{served}/index.html")
            expect(page.locator("nav.bd-links")).to_contain_text("05 · DataParallel", timeout=UI_TIMEOUT_MS)

            page.locator("nav.bd-links a", has_text="05 · DataParallel").first.click()
            expect(page).to_have_url(re.compile(r"/notebooks/05_data_parallel\.html$"), timeout=UI_TIMEOUT_MS)
            expect(page.locator("h1").first).to_contain_text("05 · DataParallel", timeout=UI_TIMEOUT_MS)
            listing = page.locator("pre", has_text="SIMULATED 8 GPUs").first
            listing.scroll_into_view_if_needed()
            expect(listing).to_contain_text(
                "In Model: input size torch.Size([2, 5]) output size", timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("a[href^='https://mybinder.org/v2/gh/']")).to_have_count(
                1, timeout=UI_TIMEOUT_MS
            )
            # two ways to Colab: the theme's launch button and the notebook's own badge under its title
            expect(page.locator("a[href^='https://colab.research.google.com/github/']")).to_have_count(
                2, timeout=UI_TIMEOUT_MS
            )
            # the page's own table of contents, and a copy button on the code cells
            toc = page.locator("#pst-page-toc-nav")
            expect(toc).to_contain_text("Source article 003 on 2, 3 and 8 GPUs", timeout=UI_TIMEOUT_MS)
            expect(page.locator("button.copybtn").first).to_be_attached(timeout=UI_TIMEOUT_MS)
            page.screenshot(path=str(shots / "site_05_data_parallel.png"))

            page.locator("a.right-next").click()
            expect(page).to_have_url(
                re.compile(r"/notebooks/06_distributed_data_parallel\.html$"), timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("h1").first).to_contain_text("06 ·", timeout=UI_TIMEOUT_MS)

            page.wait_for_load_state("load")  # the theme's scripts (search dialog) have run
            page.locator("button.search-button-field:visible").first.click()
            box = page.locator("input[name=q]:visible").first
            expect(box).to_be_focused(timeout=UI_TIMEOUT_MS)
            box.fill("DistributedSampler")
            box.press("Enter")
            expect(page).to_have_url(
                re.compile(r"/search\.html\?q=DistributedSampler"), timeout=UI_TIMEOUT_MS
            )
            results = page.locator("#search-results ul.search li")
            expect(results.first).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.locator("#search-results")).to_contain_text(
                "DistributedDataParallel with real processes", timeout=UI_TIMEOUT_MS
            )
            page.screenshot(path=str(shots / "site_search.png"))

            # the language switch leads to the same notebook in Chinese, whose search finds Chinese words
            page.goto(f"{served}/notebooks/05_data_parallel.html")
            page.locator("p.language-switch a[hreflang]").click()
            expect(page).to_have_url(
                re.compile(rf"/{CHINESE}/notebooks/05_data_parallel\.html$"), timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("html")).to_have_attribute("lang", CHINESE, timeout=UI_TIMEOUT_MS)
            expect(page.locator("h1").first).to_contain_text("05 ·", timeout=UI_TIMEOUT_MS)
            page.goto(f"{served}/{CHINESE}/search.html?q=梯度")
            expect(page.locator("#search-results ul.search li").first).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.locator("#search-results ul.search li p.context").first).to_be_visible(
                timeout=UI_TIMEOUT_MS
            )
            assert foreign_snippets(page) == []
            page.screenshot(path=str(shots / "site_search_zh.png"))
            page.goto(f"{served}/{CHINESE}/notebooks/06_distributed_data_parallel.html")
            page.locator("p.language-switch a[hreflang]").click()
            expect(page).to_have_url(
                re.compile(r"/notebooks/06_distributed_data_parallel\.html$"), timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("html")).to_have_attribute("lang", "en", timeout=UI_TIMEOUT_MS)
        finally:
            try:
                page.screenshot(path=str(shots / "site_last_page.png"), timeout=10_000)
            except Exception as err:  # never hide the test's own failure behind a failed screenshot
                print(f"no screenshot ({type(err).__name__}: {err})")
            print(f"screenshots in {shots}")
        assert console == [], "\n".join(console)
        # only images come from elsewhere (the README's Binder badge): scripts and styles are local
        assert all(kind == "image" for kind, _ in outside), outside


def test_the_pages_name_the_notebooks_that_have_kaggle_buttons():
    """The READMEs and the home pages say which notebooks open in Kaggle: those the buttons are on."""
    firsts = set()
    for language in LANGUAGES:
        numbers = [path.name[:2] for path in course_notebooks(language)]
        kaggle = [
            path.name[:2]
            for path in course_notebooks(language)
            if "Open In Kaggle" in cell_source_of(path, 0)
        ]
        assert kaggle and kaggle == [n for n in numbers if n >= kaggle[0]], language
        firsts.add(kaggle[0])
    (first,) = firsts
    said = {
        "README.md": f"notebooks {first} and later",
        "README.zh-CN.md": f"笔记本 {first} 及以后",
        "docs/index.md": f"notebooks {first} and later",
        "docs/zh-CN/index.md": f"笔记本 {first} 及以后",
    }
    for page, words in said.items():
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        assert words in text, f"{page} does not say that {words} have Kaggle buttons"
