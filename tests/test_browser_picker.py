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
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser import artifact_dir, chromium_page
from notebook_hygiene import ROOT

NOTEBOOK = ROOT / "notebooks" / "04_choosing_gpus.ipynb"
SERVER_START_S = 40


# JupyterLab lost the port it picked to another process between picking and listening: start again.
PORT_TAKEN = ("is not available", "is already in use")
STARTS = 3


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


@dataclass
class Lab:
    """A running JupyterLab: its base URL, token and the folder it serves."""

    url: str
    token: str
    root: Path


def _get(url: str, timeout: float = 2) -> int:
    """HTTP status of a GET, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except (urllib.error.URLError, OSError):
        return 0


def wait_for_idle_kernel(lab: Lab, timeout: float = 40) -> None:
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


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """JupyterLab serving a temporary copy of notebook 04, on loopback only, stopped afterwards."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
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
        page.goto(f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}", wait_until="domcontentloaded")
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible")
        wait_for_idle_kernel(lab)
        expect(page.locator(".jp-Dialog")).to_have_count(0)  # no kernel dialog: the settings above

        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

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
        prompts = page.locator(".jp-InputArea-prompt").all_inner_texts()
        print("execution prompts:", " ".join(p.strip() for p in prompts))
        print("console errors:", "\n".join(c for c in console if c.startswith("error"))[-2000:])
        try:
            page.screenshot(path=str(shot), timeout=10_000)
            print(f"screenshot: {shot}")
        except Exception as err:  # never hide the test's own failure behind a failed screenshot
            print(f"no screenshot ({type(err).__name__}: {err})")
    print(f"browser part took {time.monotonic() - started:.1f} s")
    assert hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest() == original, "the repository's notebook changed"
