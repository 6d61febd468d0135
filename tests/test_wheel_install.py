"""The whole course from a package index, and from an offline bundle, as a student installs it: for real.

One wheelhouse is downloaded once for both tests (every wheel `pytorch-on-gpus-hands-on[lab]` needs, plus
nbval and setuptools, for this Python on Linux x86_64, with this environment's torch: here the CPU
build on disk) and kept under build/test-wheelhouse/ for later runs, using pip as this machine is
configured. Everything after that is offline: a PEP 503 package index served from the wheelhouse on
127.0.0.1, pip with no configuration and proxies that lead nowhere, bare virtual environments.
`course.py bundle` builds the course's wheel (its build backend from that index) and the archive;
the first test installs the course by name from the index and runs notebook 00 of both editions
from the copy `pytorch-on-gpus get` makes, the second installs from the bundle with no index at all,
as its README.txt says, and opens JupyterLab on the copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import http.server
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from bundle import PLATFORM, download
from notebook_hygiene import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NAME = PROJECT["name"]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CACHE = ROOT / "build" / "test-wheelhouse"
INSTALL_S = 900  # a hang guard for one pip install or pytest run, never a time to beat
if sysconfig.get_platform() != "linux-x86_64":
    pytest.skip(
        f"the wheelhouse is for Linux x86_64 ({PLATFORM}), not {sysconfig.get_platform()}",
        allow_module_level=True,
    )


def requirements() -> list[str]:
    """What the wheelhouse must serve: the course's requirements and `lab` extra, this environment's torch
    (the cheapest that satisfies the pin where it is on disk), nbval to run the notebooks, and
    setuptools to build the course's wheel."""
    nbval = next(r for r in PROJECT["optional-dependencies"]["test"] if r.startswith("nbval"))
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    torch = f"torch=={importlib.metadata.version('torch')}"
    return [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["lab"], torch, nbval, *setuptools]


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """The shared wheelhouse: downloaded once per set of requirements, then read from build/."""
    wanted = requirements()
    key = hashlib.sha256(json.dumps([wanted, PYTHON, PLATFORM]).encode()).hexdigest()[:16]
    folder, stamp = CACHE / key, CACHE / key / "complete.json"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:  # another pytest run may fill it at the same moment
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            started = time.monotonic()
            download(wanted, folder, PLATFORM, PYTHON)  # pip as this machine is configured
            wheels = sorted(p.name for p in folder.glob("*.whl"))
            stamp.write_text(json.dumps({"requirements": wanted, "wheels": wheels}, indent=1))
            print(f"downloaded {len(wheels)} wheels in {time.monotonic() - started:.0f} s into {folder}")
            for earlier in CACHE.glob("*/complete.json"):  # a wheelhouse for older requirements
                if earlier != stamp:
                    shutil.rmtree(earlier.parent)
    return folder


def project_name(wheel: str) -> str:
    """A wheel's project, normalised as PEP 503 names its page: "Jinja2-3.1.whl" -> "jinja2"."""
    return re.sub(r"[-_.]+", "-", wheel.split("-")[0]).lower()


def write_simple_index(root: Path, wheels: list[Path]) -> None:
    """A PEP 503 "simple" tree under `root`: a page per project linking to its wheels (links in files/)."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    pages: dict[str, list[str]] = {}
    for wheel in wheels:
        if not (root / "files" / wheel.name).exists():
            (root / "files" / wheel.name).symlink_to(wheel)
        pages.setdefault(project_name(wheel.name), []).append(wheel.name)
    for project, names in pages.items():
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        links = "".join(f'<a href="../../files/{n}">{n}</a>\n' for n in sorted(names))
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")


@pytest.fixture(scope="module")  # closed when this file's tests end: a later test forks no listener
def package_index(
    wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, list]]:
    """The wheelhouse as a package index on 127.0.0.1 (a free port); yields (its URL, its folder, the
    paths asked for)."""
    root = tmp_path_factory.mktemp("index")
    write_simple_index(root, sorted(wheelhouse.glob("*.whl")))
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format, *args):
            asked.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", root, asked
    server.shutdown()
    server.server_close()
    thread.join(timeout=30)


def offline(tmp: Path, **pip: str) -> dict[str, str]:
    """This environment without pip's settings, Python's or the course's variables, with `pip`'s, no
    pip configuration, and proxies that lead nowhere: nothing beyond 127.0.0.1 can be reached.
    Jupyter's and IPython's own folders are under `tmp`."""
    skip = ("PIP_", "PYTHON", "COURSE_", "JUPYTER_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip) and not k.lower().endswith("_proxy")}
    dead = "http://127.0.0.1:9"  # the discard port: nothing answers there
    env |= {name: dead for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    env |= {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1", "PIP_CONFIG_FILE": os.devnull}
    env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}
    env |= {
        "JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "jupyter-run"),
    }
    env |= {"IPYTHONDIR": str(tmp / "ipython"), "MPLCONFIGDIR": str(tmp / "matplotlib")}
    return env | pip


def run(command: list[str | Path] | str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `command` (a string: through the shell) and show what it printed if it fails."""
    started = time.monotonic()
    result = subprocess.run(
        command if isinstance(command, str) else [str(c) for c in command],
        shell=isinstance(command, str),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=INSTALL_S,
    )
    shown = command if isinstance(command, str) else shlex.join(str(c) for c in command)
    print(f"[{time.monotonic() - started:.0f} s] {shown}")
    assert result.returncode == 0, f"{shown}\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result


@pytest.fixture(scope="module")
def bundle_zip(package_index: tuple[str, Path, list], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`course.py bundle`'s archive, every wheel from the local index (the course's build backend too)."""
    url, _, _ = package_index
    out = tmp_path_factory.mktemp("bundle") / "course.zip"
    env = offline(out.parent, PIP_INDEX_URL=url)
    command = [sys.executable, "scripts/bundle.py", "--out", out, "--platform", PLATFORM, "--python", PYTHON]
    printed = run(command, env, ROOT).stdout
    assert f"Wrote {out}" in printed, printed
    print(printed.splitlines()[-1])  # its size, its number of wheels, its torch
    return out


def bare_venv(folder: Path) -> Path:
    """A new virtual environment that sees no other packages; its bin/ folder."""
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(folder)
    return folder / "bin"


def test_a_student_installs_the_course_by_name_from_an_index_and_runs_notebook_00_of_both_editions(
    package_index, bundle_zip, tmp_path
):
    url, root, asked = package_index
    with zipfile.ZipFile(bundle_zip) as archive:  # the course's wheel, as `course.py bundle` built it
        (member,) = [n for n in archive.namelist() if Path(n).name.startswith(NAME.replace("-", "_"))]
        course_wheel = tmp_path / Path(member).name
        course_wheel.write_bytes(archive.read(member))
    write_simple_index(root, [course_wheel])
    bin_ = bare_venv(tmp_path / "env")
    env = offline(tmp_path, PIP_INDEX_URL=url)
    run([bin_ / "python", "-m", "pip", "install", "--no-compile", f"{NAME}[lab]", "nbval"], env, tmp_path)
    assert f"/simple/{NAME}/" in asked and f"/files/{course_wheel.name}" in asked, asked

    got = run([bin_ / "pytorch-on-gpus", "get", "course"], env, tmp_path).stdout
    copy = tmp_path / "course"
    assert f"into {copy}" in got and (copy / "zh-CN" / "workers" / "who_am_i.py").exists(), got
    notebooks = ["00_start_here.ipynb", "zh-CN/00_start_here.ipynb"]
    nbval = ["--nbval", "--nbval-current-env", "--nbval-cell-timeout", "300"]
    nbval += ["--nbval-sanitize-with", ROOT / "tests" / "nbval_sanitize.cfg"]
    pytest_ = [bin_ / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", copy, *nbval]
    ran = run([*pytest_, *notebooks], env, copy).stdout
    cells = sum(
        cell["cell_type"] == "code"
        for notebook in notebooks
        for cell in json.loads((copy / notebook).read_text(encoding="utf-8"))["cells"]
    )
    assert re.search(rf"\b{cells} passed\b", ran) and "failed" not in ran, ran


def served(port: int, url: str, token: str) -> int:
    """The HTTP status of `url` from the server on 127.0.0.1:`port` (straight, never through a proxy)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", url, headers={"Authorization": f"token {token}"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_bundle_alone_installs_the_course_with_no_index_and_opens_it_in_jupyterlab(bundle_zip, tmp_path):
    with zipfile.ZipFile(bundle_zip) as archive:
        archive.extractall(tmp_path)
    (top,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    readme = (top / "README.txt").read_text(encoding="utf-8")
    install = f'PIP_NO_INDEX=1 PIP_FIND_LINKS=wheelhouse pip install "{NAME}[lab]"'
    assert install in readme and "\n  pytorch-on-gpus lab\n" in readme, readme
    bin_ = bare_venv(tmp_path / "env")
    env = offline(tmp_path, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")  # as after `. .venv/bin/activate`
    run(install.replace("pip install", "pip install --no-compile"), env, top)  # the README's line

    token = "course-test-token"
    lab = [bin_ / "pytorch-on-gpus", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0"]
    lab.append(f"--IdentityProvider.token={token}")  # port 0: the system picks a free one
    printed: list[str] = []
    with subprocess.Popen(
        [str(c) for c in lab], cwd=top, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as server:
        reader = threading.Thread(target=lambda: printed.extend(server.stdout), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 300  # a hang guard: JupyterLab is up within seconds
            while not (found := re.search(r"http://127\.0\.0\.1:(\d+)/lab", "".join(printed))):
                assert server.poll() is None and time.monotonic() < deadline, "".join(printed)
                time.sleep(0.5)
            port = int(found[1])
            for notebook in ("00_start_here.ipynb", "zh-CN/00_start_here.ipynb"):
                assert served(port, f"/api/contents/{notebook}?content=0", token) == 200
            assert served(port, "/lab", token) == 200
        finally:
            server.send_signal(signal.SIGTERM)  # JupyterLab shuts down without asking
            server.wait(timeout=120)
            reader.join(timeout=60)
    assert re.search(r"Copied \d+ files of the course", "".join(printed)), "".join(printed)
    assert (top / "pytorch-on-gpus-course" / "zh-CN" / "solutions" / "00_start_here.py").exists()
