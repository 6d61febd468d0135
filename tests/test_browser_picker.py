"""Notebook 04's GPU picker in a real browser: JupyterLab on loopback, headless Chromium, real clicks.

The test copies the notebook into a temporary root (the repository is never touched), starts
JupyterLab on 127.0.0.1 with a token and temporary config/data/runtime dirs, opens the notebook
in headless Chromium through Playwright, runs all cells, then ticks GPUs and asks for the N
freest in the demo-fleet picker, checking the `CUDA_VISIBLE_DEVICES` text the page shows. It
saves screenshots under $COURSE_ARTIFACTS (or pytest's tmp_path) and prints where: the page, and
the widget alone, which the website shows as docs/images/04_gpu_picker_demo.png.

Chromium is found as tests/browser.py says; without one the test skips. Playwright's own browser
downloads are never used. Every wait has a timeout, and the server and the browser are stopped
in `finally` blocks whatever happens.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Lab, artifact_dir, chromium_page, jupyterlab, report_page, run_all_cells
from notebook_hygiene import ROOT

NOTEBOOK = ROOT / "notebooks" / "04_choosing_gpus.ipynb"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """JupyterLab serving a temporary copy of notebook 04, on loopback only, stopped afterwards."""
    with jupyterlab(tmp_path, NOTEBOOK) as running:
        yield running


@pytest.fixture
def browser_page() -> Iterator[object]:
    """A page of headless Chromium, closed afterwards."""
    with chromium_page() as page:
        yield page


def test_picker_renders_and_reacts_in_a_real_browser(browser_page, lab, tmp_path):
    from playwright.sync_api import expect

    page = browser_page
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    original = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    started = time.monotonic()
    shot = artifact_dir(tmp_path) / "04_gpu_picker.png"
    try:
        run_all_cells(page, lab, NOTEBOOK.name)

        picker = page.locator(".gpu-picker.gpu-picker-demo").first
        picker.wait_for(state="attached", timeout=60_000)
        picker.scroll_into_view_if_needed()
        value = picker.locator(".gpu-picker-value")
        expect(picker.locator(".gpu-picker-source")).to_have_text("DEMO FLEET (made up, not this machine)")
        # nothing ticked yet: a hint, never CUDA_VISIBLE_DEVICES="" (copied, it would hide every GPU)
        expect(value).to_have_text("nothing selected yet: tick GPUs, or pick the N with most free memory")
        expect(value).not_to_contain_text("CUDA_VISIBLE_DEVICES")
        code = picker.locator(".gpu-picker-code")
        expect(code).to_contain_text("once GPUs are selected")
        expect(code).not_to_contain_text("CUDA_VISIBLE_DEVICES")

        # tick GPUs 0 and 4, seed 000's choice: cuda:1 becomes physical GPU 4
        picker.locator(".gpu-picker-check-0 input[type=checkbox]").check()
        picker.locator(".gpu-picker-check-4 input[type=checkbox]").check()
        expect(value).to_have_text('CUDA_VISIBLE_DEVICES="0,4"')
        mapping = picker.locator(".gpu-picker-mapping")
        expect(mapping).to_contain_text("cuda:1 -> physical GPU 4")
        expect(mapping).to_contain_text("when CUDA_DEVICE_ORDER=PCI_BUS_ID is set")
        expect(code).to_contain_text('os.environ["CUDA_VISIBLE_DEVICES"] = "0,4"')
        expect(code).to_contain_text("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,4 python train.py")

        # untick GPU 0
        picker.locator(".gpu-picker-check-0 input[type=checkbox]").uncheck()
        expect(value).to_have_text('CUDA_VISIBLE_DEVICES="4"')

        # ask for the 3 GPUs with most free memory
        n_box = picker.locator(".gpu-picker-n input")
        n_box.fill("3")
        n_box.press("Enter")
        picker.locator("button.gpu-picker-pick").click()
        expect(value).to_have_text('CUDA_VISIBLE_DEVICES="3,6,1"')
        for index, ticked in enumerate([False, True, False, True, False, False, True, False]):
            box = picker.locator(f".gpu-picker-check-{index} input[type=checkbox]")
            expect(box).to_be_checked(checked=ticked)
        expect(picker.locator(".gpu-picker-table")).to_contain_text("cuda:2")
        # the widget alone, in this state: the website shows it as docs/images/04_gpu_picker_demo.png
        widget_shot = artifact_dir(tmp_path) / "04_gpu_picker_widget.png"
        picker.screenshot(path=str(widget_shot))
        print(f"widget screenshot: {widget_shot}")
    finally:
        report_page(page, console, shot)
    print(f"browser part took {time.monotonic() - started:.1f} s")
    assert hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest() == original, "the repository's notebook changed"
