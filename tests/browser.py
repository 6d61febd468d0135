"""Headless Chromium for the browser tests: the system's Chromium driven by Playwright, never a download.

Chromium is found at $COURSE_CHROMIUM, /usr/bin/chromium, or on PATH; without one the test that
asks for a page skips. Screenshots go to $COURSE_ARTIFACTS when set, else the test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
UI_TIMEOUT_MS = 30_000


def find_chromium() -> str | None:
    """The Chromium executable to drive, or None when this machine has none."""
    candidates = [os.environ.get("COURSE_CHROMIUM"), "/usr/bin/chromium"]
    candidates += [shutil.which(name) for name in ("chromium", "chromium-browser")]
    return next((c for c in candidates if c and Path(c).is_file() and os.access(c, os.X_OK)), None)


@contextmanager
def chromium_page(width: int = 1400, height: int = 1100) -> Iterator[object]:
    """A page of headless Chromium (the system's), closed afterwards; skips the test without Chromium."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium here (set COURSE_CHROMIUM or install Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS, timeout=UI_TIMEOUT_MS
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(UI_TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def artifact_dir(tmp_path: Path) -> Path:
    """Where screenshots go: $COURSE_ARTIFACTS when set, else this test's tmp_path."""
    target = Path(os.environ.get("COURSE_ARTIFACTS") or tmp_path / "artifacts")
    target.mkdir(parents=True, exist_ok=True)
    return target
