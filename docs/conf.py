"""Sphinx configuration of the course's website: the committed notebooks as pages, never executed.

`scripts/website.py` stages the pages of this folder, README.md and notebooks/NN_*.ipynb into one
source tree laid out as the repository is, and builds it with this file (`sphinx-build -c docs`);
then the Chinese edition (docs/zh-CN/, README.zh-CN.md, notebooks/zh-CN/) the same way into the
site's zh-CN/ folder, with COURSE_SITE_LANGUAGE=zh-CN; its notebooks are staged in notebooks/ too,
so a page has the same path in both editions. Every page links to itself in the other language,
and every notebook's page to its notebook, for download.
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
        "download": "Download this notebook",
        "download_title": "The notebook with its outputs, to open in JupyterLab",
        "footer": "{course}: a course in Jupyter notebooks, under the {licence}.",
        "licence": "MIT licence",
        "authors": "the course's authors",
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
        "download": "下载这个笔记本",
        "download_title": "带输出的笔记本，可在 JupyterLab 中打开",
        "footer": "{course}：一门用 Jupyter 笔记本讲授的课程，采用 {licence}。",
        "licence": "MIT 许可证",
        "authors": "本课程的作者们",
    },
}[EDITION]

if EDITION == CHINESE:  # Sphinx's Chinese search splits words with jieba: quietly, its cache in the build
    # Python's own logging under another name: `logging` is Sphinx's, whose warnings fail the build.
    import logging as python_logging

    import jieba

    jieba.setLogLevel(python_logging.WARNING)
    jieba.dt.tmp_dir = os.environ.get("COURSE_SITE_CACHE") or None
    # Sphinx loads jieba's own dictionary a second time, as a user dictionary, unless told another
    # one (a second and a half, word by word, which also doubles the total that jieba divides each
    # word's frequency by). None: jieba's dictionary, loaded once.
    html_search_options = {"dict": ""}

project = WORDS["title"]
author = WORDS["authors"]
copyright = f"{WORDS['authors']}, {WORDS['licence']}"
language = "zh_CN" if EDITION == CHINESE else "en"

extensions = ["myst_nb", "sphinx_copybutton", "sphinx.ext.githubpages"]  # githubpages: .nojekyll
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
nitpicky = True

# MyST-NB: show the stored outputs, the ones nbval compares; never run a notebook here.
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "sphinx_book_theme"
html_title = project
html_favicon = "images/favicon.svg"
html_static_path = ["_static"]  # staged from docs/_static for both editions
html_css_files = ["course.css"]
html_js_files = ["course-search.js"]  # search snippets without the theme's menus
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
    "navbar_persistent": [],  # one search box, the sidebar's (see _static/course.css)
    "extra_footer": '<p class="course-footer">'
    + WORDS["footer"].format(
        course=WORDS["title"],
        licence=f'<a href="{REPOSITORY.rstrip("/")}/blob/{BRANCH}/LICENSE">{WORDS["licence"]}</a>',
    )
    + "</p>",
}

copybutton_exclude = ".linenos, .gp, .go"


def repository_path(docname: str) -> str:
    """Where the notebook of a page lives in the repository: the Chinese ones in notebooks/zh-CN/."""
    if EDITION == CHINESE:
        return docname.replace("notebooks/", f"notebooks/{CHINESE}/", 1) + ".ipynb"
    return f"{docname}.ipynb"


def launch_links(docname: str) -> tuple[str, str]:
    """The Binder and Colab addresses that open `docname`'s notebook live."""
    owner_repo = REPOSITORY.removeprefix("https://github.com/").strip("/")
    path = repository_path(docname)
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
    wanted = {code: shot for (page, code), shot in WIDGET_SCREENSHOTS.items() if page == docname}
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


def is_notebook_page(app: Sphinx, pagename: str) -> bool:
    """Whether the page is made from a course notebook (notebooks/NN_name)."""
    return pagename.startswith("notebooks/") and app.env.doc2path(pagename).suffix == ".ipynb"


def language_switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Put a link to this page in the other language at the top of the page (the same path in the other
    edition's folder), and tell search engines; on a notebook's page, a link to download it."""
    up = "../" * pagename.count("/")
    href = f"{up}{CHINESE}/{pagename}.html" if EDITION == "en" else f"{up}../{pagename}.html"
    lang = "zh-CN" if EDITION == "en" else "en"
    title = WORDS["switch_title"]
    links = f'<a href="{href}" hreflang="{lang}" lang="{lang}" title="{title}">{WORDS["switch"]}</a>'
    if is_notebook_page(app, pagename):
        name = pagename.rsplit("/", 1)[-1]
        links += (
            f' · <a class="download-notebook" href="{name}.ipynb" download="{name}.ipynb" '
            f'title="{WORDS["download_title"]}">{WORDS["download"]} (.ipynb)</a>'
        )
    context["body"] = f'<p class="language-switch">{links}</p>' + context.get("body", "")
    context["metatags"] = (
        context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{lang}" href="{href}">'
    )


def chinese_launch_buttons(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object
) -> None:
    """The theme's Binder and Colab buttons on a Chinese page open the Chinese notebook (notebooks/zh-CN/)."""
    if EDITION != CHINESE:
        return
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if group.get("label") == "launch-buttons" else []:
            button["url"] = button["url"].replace(f"/{pagename}.ipynb", "/" + repository_path(pagename))


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search, whose page script can run: Sphinx 9.0 names the stemmer after
    `language_name` ("ChineseStemmer", which no script defines) while it ships the English one."""

    language_name = "English"


def setup(app: Sphinx) -> None:
    """Register the widget stand-ins before Sphinx collects the images (priority below 500), and the
    language switch of every page."""
    app.connect("doctree-read", replace_widgets, priority=400)
    app.connect("html-page-context", language_switch)
    app.connect("html-page-context", chinese_launch_buttons, priority=502)  # after the theme makes them
    app.add_search_language(ChineseSearch)
