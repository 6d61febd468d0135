"""The browser tests' tools: JupyterLab on loopback, and the system's Chromium driven by Playwright.

`jupyterlab` serves a temporary copy of a notebook (the repository is never touched) on 127.0.0.1,
on a port it picks itself, with a token and its own config/data/runtime dirs, and stops it and its
kernels afterwards. Chromium is found at $COURSE_CHROMIUM, /usr/bin/chromium, or on PATH, never
downloaded; without one the test that asks for a page skips. Screenshots go to $COURSE_ARTIFACTS
when set, else the test's tmp_path.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # Playwright is needed only where a page is asked for
    from playwright.sync_api import Locator, Page

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
UI_TIMEOUT_MS = 30_000
SERVER_START_S = 90
KERNEL_IDLE_S = 120
# JupyterLab lost the port it picked to another process between picking and listening: start again.
PORT_TAKEN = ("is not available", "is already in use")
STARTS = 3
# what a cell wrote to stderr (an error, a warning), as JupyterLab renders it
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'


def find_chromium() -> str | None:
    """The Chromium executable to drive, or None when this machine has none."""
    candidates = [os.environ.get("COURSE_CHROMIUM"), "/usr/bin/chromium"]
    candidates += [shutil.which(name) for name in ("chromium", "chromium-browser")]
    return next((c for c in candidates if c and Path(c).is_file() and os.access(c, os.X_OK)), None)


@contextmanager
def chromium_page(width: int = 1400, height: int = 1100) -> Iterator[object]:
    """A page of headless Chromium (the system's), closed afterwards; skips the test without Chromium.

    Every wait of the page and of Playwright's `expect` gets UI_TIMEOUT_MS: a busy machine is slow.
    """
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium here (set COURSE_CHROMIUM or install Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    sync_api.expect.set_options(timeout=UI_TIMEOUT_MS)
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


@dataclass
class Lab:
    """A running JupyterLab: its base URL, token and the folder it serves."""

    url: str
    token: str
    root: Path


def served_port(runtime: Path, proc: subprocess.Popen, deadline: float) -> int | None:
    """The port JupyterLab listens on (it picks a free one: port 0), from the server file it writes in
    its runtime dir once listening; None when the process ended first."""
    info = runtime / f"jpserver-{proc.pid}.json"
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return int(json.loads(info.read_text(encoding="utf-8"))["port"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.2)
    return None


def _get(url: str, timeout: float = 2) -> int:
    """HTTP status of a GET, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except (urllib.error.URLError, OSError):
        return 0


def wait_for_idle_kernel(lab: Lab, timeout: float = KERNEL_IDLE_S) -> None:
    """Wait until the page's kernel runs, is idle and connected (Run All before that may do nothing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        auth = {"Authorization": f"token {lab.token}"}
        request = urllib.request.Request(f"{lab.url}/api/kernels", headers=auth)
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                kernels = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            kernels = []
        if any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels):
            return
        time.sleep(0.3)
    pytest.fail(f"no idle kernel within {timeout} s")


def _stop(proc: subprocess.Popen, lab: Lab) -> None:
    """Ask the server to shut down (it stops its kernels), then terminate, then kill its process group."""
    if proc.poll() is None:
        request = urllib.request.Request(
            f"{lab.url}/api/shutdown", method="POST", headers={"Authorization": f"token {lab.token}"}
        )
        try:
            urllib.request.urlopen(request, timeout=5).close()
        except (urllib.error.URLError, OSError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    try:  # anything left in the server's own process group (kernels, their children)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=5)


@contextmanager
def jupyterlab(tmp_path: Path, notebook: Path) -> Iterator[Lab]:
    """JupyterLab serving a temporary copy of `notebook`, on loopback only, stopped afterwards."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(notebook, root / notebook.name)
    home = tmp_path / "jupyter"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    settings = {  # start the kernel without asking, render every cell (not only those in view), no news
        "notebook-extension/tracker": {"autoStartDefaultKernel": True, "windowingMode": "none"},
        "apputils-extension/notification": {"fetchNews": "false"},
    }
    for name, values in settings.items():
        target = home / "settings" / "@jupyterlab" / f"{name}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values), encoding="utf-8")
    token = secrets.token_hex(16)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port=0",  # a free port, chosen by the server itself: no port picked here and released
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=",
        "--LabApp.extension_manager=readonly",
        "--ServerApp.terminals_enabled=False",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI often run as root
        command.append("--allow-root")
    log_path = tmp_path / "jupyterlab.log"
    for _ in range(STARTS):
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        lab = Lab(url="http://127.0.0.1:0", token=token, root=root)
        try:
            deadline = time.monotonic() + SERVER_START_S
            port = served_port(home / "runtime", proc, deadline)
            lab.url = f"http://127.0.0.1:{port}"
            while port is None or _get(f"{lab.url}/api/status?token={token}") != 200:
                if proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            else:
                yield lab
                return
            if proc.poll() is None or not any(taken in log_path.read_text() for taken in PORT_TAKEN):
                pytest.fail(f"JupyterLab did not start:\n{log_path.read_text()[-3000:]}")
        finally:
            _stop(proc, lab)  # also after a start that lost its port, before the next
    pytest.fail(f"JupyterLab lost its port {STARTS} times:\n{log_path.read_text()[-3000:]}")


def run_all_cells(page: Page, lab: Lab, name: str) -> None:
    """Open notebook `name` of `lab` in `page`, wait for its kernel, and run all its cells from the menu."""
    from playwright.sync_api import expect

    page.goto(f"{lab.url}/lab/tree/{name}?token={lab.token}", wait_until="domcontentloaded")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible")
    wait_for_idle_kernel(lab)
    expect(page.locator(".jp-Dialog")).to_have_count(0)  # no kernel dialog: the settings above
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def wait_for_output(page: Page, target: Locator, timeout_ms: int) -> None:
    """Wait until `target`, a locator of a cell's output, is in the page; fail at once, with what was
    written, if a cell writes to stderr first (Run All stops at an error, so `target` never comes)."""
    errors = page.locator(STDERR_OUTPUT)
    target.or_(errors).first.wait_for(state="attached", timeout=timeout_ms)
    if errors.count():
        pytest.fail("a cell wrote to stderr:\n" + "\n".join(errors.all_inner_texts())[-3000:])


def report_page(page: Page, console: list[str], shot: Path) -> None:
    """Print what helps read a failure: the cells' execution prompts, the console's errors, a screenshot."""
    prompts = page.locator(".jp-InputArea-prompt").all_inner_texts()
    print("execution prompts:", " ".join(p.strip() for p in prompts))
    print("console errors:", "\n".join(c for c in console if c.startswith("error"))[-2000:])
    try:
        page.screenshot(path=str(shot), timeout=10_000)
        print(f"screenshot: {shot}")
    except Exception as err:  # never hide the test's own failure behind a failed screenshot
        print(f"no screenshot ({type(err).__name__}: {err})")
