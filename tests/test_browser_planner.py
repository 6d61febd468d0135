"""Notebook 16's planner in a real browser: JupyterLab on loopback, headless Chromium, a real control.

The test serves a temporary copy of the notebook (and the workers folder its cells read) with
JupyterLab as tests/browser.py does, runs all its cells in headless Chromium, checks that the
planner's text shows `course_utils.planner`'s plan for its first setting, picks another number of
GPUs in the widget's "GPUs" dropdown, and waits for the text to show the planner's new peak memory
per GPU and its torchrun line, and for the figure to be redrawn. The repository is never touched.

Without Chromium the test skips (tests/browser.py). Every wait has a timeout sized for a busy
machine, and JupyterLab, its kernel and Chromium are stopped whatever happens.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time

from browser import (
    artifact_dir,
    chromium_page,
    jupyterlab,
    report_page,
    run_all_cells,
    wait_for_output,
)
from notebook_hygiene import ROOT

from course_utils import planner

NOTEBOOK = ROOT / "notebooks" / "16_plan_a_real_run.ipynb"
# the whole notebook runs before the planner shows: its ranks' launch is the longest part
NOTEBOOK_RUN_MS = 300_000
# the widget's first setting (notebook 16, section 9), and the number of GPUs the test picks
FIRST = {
    "model": planner.LLAMA_3_1_8B,
    "hardware": planner.H100_SXM,
    "seq_len": 8192,
    "micro_batch": 1,
    "micro_batches": 1,
    "policy": planner.BF16_MIXED,
    "checkpointing": "full",
}
FIRST_GPUS, PICKED_GPUS = 8, 16


def planned(gpus: int) -> planner.Plan:
    """The planner's plan for the widget's first setting on `gpus` GPUs, all of them FSDP."""
    return planner.plan(mesh=planner.Mesh(dp_shard=gpus), **FIRST)


def peak_line(p: planner.Plan) -> str:
    """The part of the widget's first text line that names the GPUs and their peak memory."""
    return f"on {p.mesh.world_size} {p.hardware.name}: at most {p.peak_memory / planner.GB:.1f} GB per GPU"


def test_planner_redraws_for_another_gpu_count_in_a_real_browser(tmp_path):
    from playwright.sync_api import expect

    before, after = planned(FIRST_GPUS), planned(PICKED_GPUS)
    assert peak_line(before) != peak_line(after), "pick a GPU count whose plan reads differently"
    original = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    console: list[str] = []
    started = time.monotonic()
    # Chromium first: without one the test skips before JupyterLab starts
    with chromium_page() as page, jupyterlab(tmp_path, NOTEBOOK) as lab:
        shutil.copytree(NOTEBOOK.parent / "workers", lab.root / "workers")  # section 10 reads a script
        page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        try:
            run_all_cells(page, lab, NOTEBOOK.name)
            gpus = page.get_by_label("GPUs", exact=True)  # the dropdown the widget describes as "GPUs"
            wait_for_output(page, gpus, NOTEBOOK_RUN_MS)
            widget = page.locator(".widget-vbox").filter(has=gpus)
            widget.scroll_into_view_if_needed()
            text = widget.locator(".widget-html pre")
            figure = widget.locator("img")
            expect(gpus).to_have_value(str(FIRST_GPUS))
            expect(text).to_contain_text(f"{before.model.name} {peak_line(before)}")
            expect(figure).to_have_attribute("src", re.compile(r"^blob:"))  # the first figure's PNG
            first_figure = figure.get_attribute("src")

            gpus.select_option(label=str(PICKED_GPUS))
            expect(text).to_contain_text(f"{after.model.name} {peak_line(after)}")
            torchrun = planner.launch_command(after.mesh, after.hardware.gpus_per_node).splitlines()[0]
            expect(text).to_contain_text(torchrun)  # 2 nodes of 8 now
            expect(figure).not_to_have_attribute("src", first_figure)  # a new PNG, and it decodes
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=figure.element_handle())
            widget_shot = artifact_dir(tmp_path) / "16_planner_widget.png"
            widget.screenshot(path=str(widget_shot))
            print(f"widget screenshot: {widget_shot}")
        finally:
            report_page(page, console, artifact_dir(tmp_path) / "16_planner.png")
    print(f"browser part took {time.monotonic() - started:.1f} s")
    assert hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest() == original, "the repository's notebook changed"
