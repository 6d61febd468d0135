"""The notebooks' set-up cell and course_utils.setup behind it: silent where course_utils imports, else
installs the course from its source, keeps or replaces torch, and brings the worker scripts.

No network: the source is a local copy of the course or its wheel, pip is told to use no index or
one on 127.0.0.1, and the fresh environment sees this environment's packages (torch, numpy, ...)
but not course_utils, as on Colab or Kaggle where torch is there and the course is not.
"""

from __future__ import annotations

import http.server
import importlib.metadata
import os
import shutil
import site
import subprocess
import sys
import threading
import tomllib
import venv
import zipfile
from pathlib import Path

import links
import pytest
from notebook_hygiene import ROOT

from course_utils import setup

PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
REPO = links.read_repository(PYPROJECT)
RANGE = tomllib.loads(PYPROJECT)["tool"]["course"]["supported-torch"]
WHEEL_VERSION = "0.1.0.post1"


def run_cell(
    python, source, cwd, probe: bool = True, extra: dict | None = None
) -> subprocess.CompletedProcess:
    cell = links.setup_cell_source(str(source))
    skip = ("PIP_", "PYTHON", "COURSE_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(skip)}
    env |= {
        "PIP_NO_INDEX": "1",  # nothing may come from the network
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_BUILD_ISOLATION": "0",  # use this environment's setuptools
        "PYTHONNOUSERSITE": "1",
    }
    env |= extra or {}
    env = {key: value for key, value in env.items() if value}
    probe_code = "import course_utils\nprint('course_utils from', course_utils.__file__)\n"
    return subprocess.run(
        [str(python), "-c", cell + probe_code if probe else cell],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture
def bare_python(tmp_path):
    """A fresh virtual environment that sees this one's packages, except course_utils."""
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    target = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Paths listed in a .pth file join sys.path, but the .pth files inside them (the editable
    # install of course_utils is one) are not read: torch, pip and setuptools come along, the course not.
    (env_dir / target / "this_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    probe = (
        "from importlib.util import find_spec as f; "
        "print([bool(f(m)) for m in ('torch', 'pip', 'course_utils')])"
    )
    seen = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout
    assert seen == "[True, True, False]\n"
    return python


@pytest.fixture
def course_source(tmp_path):
    """The course as pip gets it from git: the package's files and the workers, no installed state."""
    source = tmp_path / "course"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    copy_package_files(source)
    return source


def copy_package_files(destination: Path) -> None:
    """What the package is built from: src/ and both editions' workers (the Chinese edition's are links
    to translations/ and to the English ones, copied as the files they name)."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", destination / "src", ignore=skip)
    for workers in (Path("notebooks") / "workers", Path("notebooks") / "zh-CN" / "workers"):
        shutil.copytree(ROOT / workers, destination / workers, ignore=skip)


def test_the_cell_is_at_most_six_lines_and_names_the_source_once():
    cell = links.setup_cell_source("git+https://github.com/o/n")
    assert len(cell.splitlines()) <= 6 and cell.startswith(links.SETUP_MARKER)
    assert cell.count("git+https://github.com/o/n") == 1 and 'os.environ.get("COURSE_SOURCE"' in cell
    compile(cell, "set-up cell", "exec")


def test_where_course_utils_imports_the_cell_prints_nothing_and_installs_nothing(tmp_path):
    # An install from a source that does not exist would fail: the cell must not try one.
    result = run_cell(sys.executable, tmp_path / "no-such-source", tmp_path, probe=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert list(tmp_path.iterdir()) == []  # no workers folder either


def test_a_runtime_with_supported_torch_gets_the_course_keeps_its_torch_and_gets_the_workers(
    bare_python, course_source, tmp_path
):
    runtime = tmp_path / "content"  # Colab's working folder, where the notebook's kernel starts
    runtime.mkdir()
    result = run_cell(bare_python, course_source, runtime)
    assert result.returncode == 0, result.stdout + result.stderr
    torch_version = importlib.metadata.version("torch")  # the same torch: the bare environment shares it
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"Installed the course from {course_source}: kept this runtime's torch {torch_version} "
        f"(in the supported range {RANGE}); copied the worker scripts to {runtime / 'workers'}."
    )
    assert lines[-1].startswith("course_utils from " + str(bare_python.parent.parent))
    shipped = sorted(p.name for p in (ROOT / "notebooks" / "workers").glob("*.py"))
    assert sorted(p.name for p in (runtime / "workers").glob("*.py")) == shipped and "train_ddp.py" in shipped
    # Installed (not editable) and run from another folder, notebook 00's report still names the range.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = subprocess.run(
        [str(bare_python), "-c", "from course_utils.env_report import environment_report as r; print(r())"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env={key: value for key, value in os.environ.items() if not key.startswith("PYTHON")},
        timeout=120,
    )
    assert f"(in the course's supported range {RANGE})" in report.stdout, report.stdout + report.stderr


def test_a_failed_install_stops_the_cell(bare_python, tmp_path):
    result = run_cell(bare_python, tmp_path / "no-such-source", tmp_path)
    assert result.returncode != 0
    assert "CalledProcessError" in result.stderr and "no-such-source" in result.stderr


NOT_FOUND = importlib.metadata.PackageNotFoundError


class FakeMetadata:
    """importlib.metadata as course_utils.setup reads it: the course's requirements, a torch or none."""

    PackageNotFoundError = NOT_FOUND

    def __init__(self, torch_version: str | None) -> None:
        self.torch_version = torch_version

    def requires(self, name: str) -> list[str]:
        assert name == "course-utils"
        return ["torch==2.13.*", "numpy>=1.26", "psutil>=5.9", 'pytest>=8.2; extra == "test"']

    def version(self, name: str) -> str:
        if name != "torch" or self.torch_version is None:
            raise NOT_FOUND(name)
        return self.torch_version


@pytest.mark.parametrize(
    ("torch_version", "wanted", "said"),
    [
        ("2.9.1+cu128", ["numpy>=1.26", "psutil>=5.9"], "kept this runtime's torch 2.9.1+cu128"),
        ("2.15.0", ["numpy>=1.26", "psutil>=5.9"], "kept this runtime's torch 2.15.0"),
        ("2.8.0+cu126", ["torch==2.13.*", "numpy>=1.26", "psutil>=5.9"], "torch 2.8.0+cu126 is outside"),
        ("2.16.0", ["torch==2.13.*", "numpy>=1.26", "psutil>=5.9"], "torch 2.16.0 is outside"),
        (None, ["torch==2.13.*", "numpy>=1.26", "psutil>=5.9"], "no torch found: installed torch==2.13.*"),
    ],
)
def test_torch_is_kept_in_the_range_and_replaced_by_the_pin_outside(monkeypatch, torch_version, wanted, said):
    monkeypatch.setattr(setup.importlib, "metadata", FakeMetadata(torch_version))
    monkeypatch.setattr(setup, "SUPPORTED_TORCH", ">=2.9,<2.16")
    installed = []
    assert said in setup.install_requirements(lambda *args: installed.append(args))
    assert installed == [tuple(wanted)]


def test_requirements_are_split_into_torch_and_the_rest():
    needs = ["Torch >= 2.9", "numpy", 'ruff; extra == "test"', "torchvision==0.24"]
    assert setup.course_requirements(needs) == ("Torch >= 2.9", ["numpy", "torchvision==0.24"])
    assert setup.course_requirements([]) == (None, [])


def test_a_failing_pip_says_the_runtime_needs_internet(monkeypatch):
    monkeypatch.setattr(setup.subprocess, "call", lambda cmd: 1)
    with pytest.raises(RuntimeError, match="needs internet access"):
        setup.pip_install("no-such-package")


def test_workers_come_from_the_package_else_the_source_folder_and_are_never_fetched(tmp_path):
    packaged = tmp_path / "site" / "course_utils" / "workers"
    packaged.mkdir(parents=True)
    (packaged / "train_ddp.py").write_text("print('train')\n")
    (packaged / "__init__.py").write_text("")
    here = tmp_path / "content"
    said = setup.fetch_workers("git+https://github.com/o/n", here, packaged=packaged)
    assert said == f"copied the worker scripts to {here / 'workers'}"
    assert sorted(p.name for p in (here / "workers").iterdir()) == ["train_ddp.py"]
    assert setup.fetch_workers("git+https://github.com/o/n", here, packaged=packaged).startswith(
        "worker scripts already"
    )
    # An editable install from a clone: the package has none, the clone's notebooks/workers has them.
    clone = tmp_path / "clone"
    (clone / "notebooks" / "workers").mkdir(parents=True)
    (clone / "notebooks" / "workers" / "who_am_i.py").write_text("")
    elsewhere = tmp_path / "elsewhere"
    setup.fetch_workers(str(clone), elsewhere, packaged=tmp_path / "none")
    assert [p.name for p in (elsewhere / "workers").iterdir()] == ["who_am_i.py"]


def test_a_package_without_workers_says_to_install_again(tmp_path):
    with pytest.raises(RuntimeError, match="install the course again"):
        setup.fetch_workers("course-utils", tmp_path / "here", packaged=tmp_path / "none")
    assert not (tmp_path / "here").exists()


def test_every_package_under_src_is_built_and_the_workers_travel_with_it():
    settings = tomllib.loads(PYPROJECT)["tool"]["setuptools"]
    under_src = {
        ".".join(init.parent.relative_to(ROOT / "src").parts) for init in (ROOT / "src").rglob("__init__.py")
    }
    assert set(settings["packages"]) == under_src | {"course_utils.workers", "course_utils.workers_zh"}
    assert settings["package-dir"]["course_utils.workers"] == "notebooks/workers"
    assert settings["package-dir"]["course_utils.workers_zh"] == "notebooks/zh-CN/workers"


def test_the_chinese_notebooks_get_the_chinese_workers_from_the_package_or_the_clone(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert setup.packaged_workers().name == "workers_zh"
    clone = tmp_path / "clone"
    for folder, text in (
        ("notebooks/workers", '"""English."""\n'),
        ("notebooks/zh-CN/workers", '"""中文。"""\n'),
    ):
        (clone / folder).mkdir(parents=True)
        (clone / folder / "who_am_i.py").write_text(text, encoding="utf-8")
    setup.fetch_workers(str(clone), tmp_path / "zh", packaged=tmp_path / "none")
    assert (tmp_path / "zh" / "workers" / "who_am_i.py").read_text(encoding="utf-8") == '"""中文。"""\n'
    monkeypatch.setenv("COURSE_LANGUAGE", "en")
    assert setup.packaged_workers().name == "workers"
    setup.fetch_workers(str(clone), tmp_path / "en", packaged=tmp_path / "none")
    assert (tmp_path / "en" / "workers" / "who_am_i.py").read_text(encoding="utf-8") == '"""English."""\n'


@pytest.fixture(scope="module")
def course_wheel(tmp_path_factory):
    """The course built as a wheel from a copy of its files (setuptools' own build, no pip, no network)."""
    copy = tmp_path_factory.mktemp("course")
    for name in ("README.md", "LICENSE"):
        shutil.copy(ROOT / name, copy / name)
    # A version of its own: this environment's editable course-utils 0.1.0, which the bare environment
    # sees, would satisfy a plain `course-utils`, and pip would install nothing.
    (copy / "pyproject.toml").write_text(
        PYPROJECT.replace('version = "0.1.0"', f'version = "{WHEEL_VERSION}"')
    )
    copy_package_files(copy)
    wheels = tmp_path_factory.mktemp("wheels")
    build = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    built = subprocess.run(
        [sys.executable, "-c", build, str(wheels)], cwd=copy, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr
    return wheels / built.stdout.splitlines()[-1]


def test_the_wheel_carries_both_editions_workers(course_wheel):
    with zipfile.ZipFile(course_wheel) as wheel:
        names = set(wheel.namelist())
        chinese = wheel.read("course_utils/workers_zh/who_am_i.py").decode()
    for edition in ("workers", "workers_zh"):
        assert {
            f"course_utils/{edition}/{p.name}" for p in (ROOT / "notebooks" / "workers").glob("*.py")
        } <= names
    assert chinese == (ROOT / "translations" / "zh-CN" / "workers" / "who_am_i.py").read_text(
        encoding="utf-8"
    )


@pytest.fixture
def local_index(course_wheel, tmp_path):
    """A package index on 127.0.0.1 (a free port) that holds the course's wheel alone; yields (url, asked)."""
    project = tmp_path / "index" / "simple" / "course-utils"
    project.mkdir(parents=True)
    shutil.copy(course_wheel, project / course_wheel.name)
    (project / "index.html").write_text(f'<a href="{course_wheel.name}">{course_wheel.name}</a>\n')
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path / "index"), **kwargs)

        def log_message(self, format, *args):
            asked.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", asked
    server.shutdown()
    server.server_close()
    thread.join(timeout=30)


@pytest.mark.parametrize("route", ["index", "wheel"])
def test_the_cell_installs_from_an_index_or_a_wheel_without_github_and_the_workers_come_from_the_package(
    route, bare_python, course_wheel, local_index, tmp_path
):
    index, asked = local_index
    runtime = tmp_path / "content"
    runtime.mkdir()
    source = f"course-utils=={WHEEL_VERSION}" if route == "index" else str(course_wheel)
    cut_off = "http://127.0.0.1:9"  # nothing listens there: any request beyond 127.0.0.1 fails
    result = run_cell(
        bare_python,
        "git+https://github.com/no-such/repository",  # the default, which COURSE_SOURCE overrides
        runtime,
        extra={
            "COURSE_SOURCE": source,
            "PIP_INDEX_URL": index,
            "PIP_NO_INDEX": "",
            "HTTP_PROXY": cut_off,
            "HTTPS_PROXY": cut_off,
            "http_proxy": cut_off,
            "https_proxy": cut_off,
            "NO_PROXY": "127.0.0.1",
            "no_proxy": "127.0.0.1",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"Installed the course from {source}: kept this runtime's torch ")
    assert f"copied the worker scripts to {runtime / 'workers'}." in result.stdout
    wanted = {"/simple/course-utils/", f"/simple/course-utils/{course_wheel.name}"}
    assert (wanted <= set(asked)) == (route == "index"), f"the course came by name from the index: {asked}"
    shipped = sorted(p.name for p in (ROOT / "notebooks" / "workers").glob("*.py"))
    assert sorted(p.name for p in (runtime / "workers").glob("*.py")) == shipped
    ran = subprocess.run(
        [str(bare_python), "workers/who_am_i.py"],
        cwd=runtime,
        env={
            "RANK": "1",
            "LOCAL_RANK": "1",
            "GROUP_RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0 and '"RANK": 1' in ran.stdout, ran.stderr


def test_the_chinese_notebook_gets_the_set_up_lines_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")  # the Chinese punctuation is left out of the literals
    monkeypatch.setattr(setup.importlib, "metadata", FakeMetadata("2.8.0+cu126"))
    monkeypatch.setattr(setup, "SUPPORTED_TORCH", ">=2.9,<2.16")
    said = setup.install_requirements(lambda *args: None)
    assert (
        said.startswith("torch 2.8.0+cu126 不在支持的范围 >=2.9,<2.16 内") and "已安装 torch==2.13.*" in said
    )
    monkeypatch.setattr(setup.subprocess, "call", lambda cmd: 1)
    with pytest.raises(RuntimeError, match="运行时需要联网"):
        setup.pip_install("no-such-package")


def test_before_polib_is_installed_the_set_up_lines_are_english(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    monkeypatch.setitem(sys.modules, "course_utils.i18n", None)  # importing it raises ImportError
    assert setup._("no torch found") == "no torch found"


def _never_installs(*requirements: str) -> None:
    raise AssertionError(f"pip install {requirements} ran on bad input")


@pytest.mark.parametrize(
    ("call", "error", "names"),
    [
        (lambda: setup.torch_in_range(2.13), TypeError, "version must be a str"),
        (lambda: setup.torch_in_range("2.13", None), TypeError, "spec must be a str"),
        (lambda: setup.course_requirements("torch>=2.9"), TypeError, "requires must be a list"),
        (lambda: setup.course_requirements([None]), TypeError, "requires must be a list"),
        (lambda: setup.fetch_workers(42, "."), TypeError, "source must be a str"),
        (lambda: setup.fetch_workers("x", None), TypeError, "folder must be a folder's path"),
        (lambda: setup.install_requirements("pip"), TypeError, "install must be a function"),
        (lambda: setup.prepare_runtime(42, install=_never_installs), TypeError, "source must be a str"),
        (lambda: setup.prepare_runtime(None, install=_never_installs), TypeError, "source must be a str"),
        (lambda: setup.main("git+https://github.com/o/n"), TypeError, "argv must be a list"),
    ],
)
def test_bad_input_names_the_argument_and_installs_nothing(call, error, names):
    with pytest.raises(error, match=names):
        call()
