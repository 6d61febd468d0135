"""Sphinx configuration of the course's website: the committed notebooks as pages, never executed.

`scripts/website.py` stages the pages of this folder, README.md and notebooks/NN_*.ipynb into one
source tree laid out as the repository is, and builds it with this file (`sphinx-build -c docs`);
then the Chinese edition (docs/zh-CN/, README.zh-CN.md, notebooks/zh-CN/) the same way into the
site's zh-CN/ folder, with COURSE_SITE_LANGUAGE=zh-CN. Every page links to itself in the other language.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from urllib.parse import quote

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.search.zh import SearchChinese
from sphinx.util import logging

ROOT = Path(__file__).resolve().parent.parent
# The one place that names the course's repository is pyproject.toml's [project.urls].
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"][
    "Repository"
]
BRANCH = "main"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# Widgets cannot run on a static page. Where a screenshot of one exists, the page shows it in the
# widget's place: keyed by page and by a piece of the code of the cell that displays the widget.
# Any other widget gets a note. The screenshot is the widget alone as tests/test_browser_picker.py
# leaves it (it saves 04_gpu_picker_widget.png under $COURSE_ARTIFACTS); copy that file here to renew it.
# Keys name the English page; the Chinese page of the same notebook shows the same screenshot.
WIDGET_SCREENSHOTS = {
    ("notebooks/04_choosing_gpus", "GpuPicker(demo_inventory())"): "/images/04_gpu_picker_demo.png",
}

# The edition this build makes: "en" at the site's root, "zh-CN" in its zh-CN/ folder.
EDITION = os.environ.get("COURSE_SITE_LANGUAGE", "en")
CHINESE = "zh-CN"
if EDITION not in ("en", CHINESE):
    raise ValueError(f"COURSE_SITE_LANGUAGE is {EDITION!r}: the site has the editions en and {CHINESE}")
# Words the site itself shows, per edition (the pages' own text comes from the staged sources).
WORDS = {
    "en": {
        "title": "PyTorch on GPUs, hands-on",
        "switch": "中文",
        "switch_title": "这一页的中文版",
        "widget_title": "A live widget: this page is static",
        "widget_runs": [
            "The widget runs in a live notebook. Run it on ",
            " or on ",
            ", or locally with ",
            ".",
        ],
        "picker_caption": "Screenshot of the GPU picker on the demo fleet (made-up GPUs), taken in "
        "JupyterLab after asking for the 3 GPUs with most free memory.",
    },
    CHINESE: {
        "title": "PyTorch on GPUs, hands-on（中文版）",
        "switch": "English",
        "switch_title": "This page in English",
        "widget_title": "一个实时的小部件：这个网页是静态的",
        "widget_runs": [
            "这个小部件要在运行中的笔记本里才能用。可以在 ",
            " 或 ",
            " 上运行，也可以在本地用 ",
            " 运行。",
        ],
        "picker_caption": "GPU 选择器在演示机群（虚构的 GPU）上的截图，摄于 JupyterLab，"
        "选的是空闲显存最多的 3 个 GPU。",
    },
}[EDITION]

if EDITION == CHINESE:  # Sphinx's Chinese search splits words with jieba: quietly, its cache in the build
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.dt.tmp_dir = os.environ.get("COURSE_SITE_CACHE") or None
    # Sphinx loads jieba's own dictionary a second time, as a user dictionary, unless told another
    # one (a second and a half, word by word, which also doubles the total that jieba divides each
    # word's frequency by). None: jieba's dictionary, loaded once.
    html_search_options = {"dict": ""}

project = WORDS["title"]
author = "the course's authors"
copyright = "the course's authors, MIT licence"
language = "zh_CN" if EDITION == CHINESE else "en"

extensions = ["myst_nb", "sphinx_copybutton", "sphinx.ext.githubpages"]  # githubpages: .nojekyll
root_doc = "index"
exclude_patterns = ["README.md", "README.zh-CN.md", "_build", "**.ipynb_checkpoints"]
nitpicky = True

# MyST-NB: show the stored outputs, the ones nbval compares; never run a notebook here.
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "sphinx_book_theme"
html_title = project
html_favicon = "images/favicon.svg"
# The theme reads its colour mode from here; without one it logs an error in the browser console.
html_context = {"default_mode": "light"}
html_last_updated_fmt = None
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": BRANCH,
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": False,
    "launch_buttons": {
        "binderhub_url": "https://mybinder.org",
        "colab_url": "https://colab.research.google.com",
        "notebook_interface": "jupyterlab",
    },
    "show_toc_level": 2,
}

copybutton_exclude = ".linenos, .gp, .go"


def launch_links(docname: str) -> tuple[str, str]:
    """The Binder and Colab addresses that open `docname`'s notebook live."""
    owner_repo = REPOSITORY.removeprefix("https://github.com/").strip("/")
    path = f"{docname}.ipynb"
    binder = f"https://mybinder.org/v2/gh/{owner_repo}/{BRANCH}?labpath={quote(path, safe='')}"
    colab = f"https://colab.research.google.com/github/{owner_repo}/blob/{BRANCH}/{path}"
    return binder, colab


def cell_source(node: nodes.Element) -> str:
    """The code of the notebook cell an output node belongs to ("" outside a code cell)."""
    cell = node.parent
    while cell is not None and cell.get("nb_element") != "cell_code":
        cell = cell.parent
    if cell is None:
        return ""
    return next((block.astext() for block in cell.findall(nodes.literal_block)), "")


def stand_in_for_widget(doctree: nodes.document, docname: str, screenshot: str | None) -> nodes.Element:
    """A static page's stand-in for a live widget: a labelled screenshot or a note, with launch links."""
    binder, colab = launch_links(docname)
    note = nodes.admonition(classes=["note", "widget-stand-in"])
    note += nodes.title(text=WORDS["widget_title"])
    if screenshot is not None:
        figure = nodes.figure(classes=["widget-screenshot"])
        doctree.set_id(figure)
        figure += nodes.image(uri=screenshot, alt=WORDS["picker_caption"])
        figure += nodes.caption(text=WORDS["picker_caption"])
        note += figure
    before, between, local, after = WORDS["widget_runs"]
    text = nodes.paragraph()
    text += nodes.Text(before)
    text += nodes.reference(text="Binder", refuri=binder)
    text += nodes.Text(between)
    text += nodes.reference(text="Colab", refuri=colab)
    text += nodes.Text(local)
    text += nodes.literal(text="python3 course.py lab")
    text += nodes.Text(after)
    note += text
    return note


def replace_widgets(app: Sphinx, doctree: nodes.document) -> None:
    """Put a stand-in in place of every widget output (widget state is not stored in the notebooks)."""
    docname = app.env.docname
    english = other_edition_page(docname) if EDITION == CHINESE else docname
    wanted = {code: shot for (page, code), shot in WIDGET_SCREENSHOTS.items() if page == english}
    used = set()
    for bundle in list(doctree.findall(nodes.container)):
        if bundle.get("nb_element") != "mime_bundle":
            continue
        if not any(child.get("mime_type") == WIDGET_MIME for child in bundle.children):
            continue
        source = cell_source(bundle)
        code = next((code for code in wanted if code in source), None)
        used.add(code)
        bundle.replace_self(stand_in_for_widget(doctree, docname, wanted.get(code)))
    for code in wanted.keys() - used:
        logging.getLogger(__name__).warning(
            "%s has no widget shown by a cell with %r, for the screenshot %s: update WIDGET_SCREENSHOTS "
            "in docs/conf.py",
            docname,
            code,
            wanted[code],
        )


def other_edition_page(pagename: str) -> str:
    """The same page in the other edition: its notebooks live in notebooks/zh-CN/, its other pages by
    the same names."""
    if EDITION == CHINESE:
        return pagename.replace(f"notebooks/{CHINESE}/", "notebooks/", 1)
    return pagename.replace("notebooks/", f"notebooks/{CHINESE}/", 1)


def language_switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Put a link to this page in the other language at the top of the page, and tell search engines."""
    up = "../" * pagename.count("/")
    other = other_edition_page(pagename)
    href = f"{up}{CHINESE}/{other}.html" if EDITION == "en" else f"{up}../{other}.html"
    lang = "zh-CN" if EDITION == "en" else "en"
    switch = (
        f'<p class="language-switch"><a href="{href}" hreflang="{lang}" lang="{lang}" '
        f'title="{WORDS["switch_title"]}">{WORDS["switch"]}</a></p>'
    )
    context["body"] = switch + context.get("body", "")
    context["metatags"] = (
        context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{lang}" href="{href}">'
    )


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search, whose page script can run: Sphinx 9.0 names the stemmer after
    `language_name` ("ChineseStemmer", which no script defines) while it ships the English one."""

    language_name = "English"


def setup(app: Sphinx) -> None:
    """Register the widget stand-ins before Sphinx collects the images (priority below 500), and the
    language switch of every page."""
    app.connect("doctree-read", replace_widgets, priority=400)
    app.connect("html-page-context", language_switch)
    app.add_search_language(ChineseSearch)
