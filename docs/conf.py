"""Sphinx configuration of the course's website: the committed notebooks as pages, never executed.

`scripts/website.py` stages the pages of this folder, README.md and notebooks/NN_*.ipynb into one
source tree laid out as the repository is, and builds it with this file (`sphinx-build -c docs`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import quote

from docutils import nodes
from sphinx.application import Sphinx
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
WIDGET_SCREENSHOTS = {
    ("notebooks/04_choosing_gpus", "GpuPicker(demo_inventory())"): (
        "/images/04_gpu_picker_demo.png",
        "Screenshot of the GPU picker on the demo fleet (made-up GPUs), taken in JupyterLab after "
        "asking for the 3 GPUs with most free memory.",
    ),
}

project = "PyTorch on GPUs, hands-on"
author = "the course's authors"
copyright = "the course's authors, MIT licence"
language = "en"

extensions = ["myst_nb", "sphinx_copybutton", "sphinx.ext.githubpages"]  # githubpages: .nojekyll
root_doc = "index"
exclude_patterns = ["README.md", "_build", "**.ipynb_checkpoints"]
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


def stand_in_for_widget(
    doctree: nodes.document, docname: str, screenshot: tuple[str, str] | None
) -> nodes.Element:
    """A static page's stand-in for a live widget: a labelled screenshot or a note, with launch links."""
    binder, colab = launch_links(docname)
    note = nodes.admonition(classes=["note", "widget-stand-in"])
    note += nodes.title(text="A live widget: this page is static")
    if screenshot is not None:
        uri, caption = screenshot
        figure = nodes.figure(classes=["widget-screenshot"])
        doctree.set_id(figure)
        figure += nodes.image(uri=uri, alt=caption)
        figure += nodes.caption(text=caption)
        note += figure
    text = nodes.paragraph()
    text += nodes.Text("The widget runs in a live notebook. Run it on ")
    text += nodes.reference(text="Binder", refuri=binder)
    text += nodes.Text(" or on ")
    text += nodes.reference(text="Colab", refuri=colab)
    text += nodes.Text(", or locally with ")
    text += nodes.literal(text="python3 course.py lab")
    text += nodes.Text(".")
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
            wanted[code][0],
        )


def setup(app: Sphinx) -> None:
    """Register the widget stand-ins before Sphinx collects the images (priority below 500)."""
    app.connect("doctree-read", replace_widgets, priority=400)
