"""The notebooks' set-up cell and course_utils.setup behind it: silent where course_utils imports, else
installs the course from its source, keeps or replaces torch, and brings the worker scripts.

No network: the source is a local copy of the course, pip is told to use no index, and the fresh
environment sees this environment's packages (torch, numpy, ...) but not course_utils, as on Colab
or Kaggle where torch is there and the course is not. Archives come from a stand-in opener.
"""

from __future__ import annotations

import importlib.metadata
import io
import os
import shutil
import site
import subprocess
import sys
import tarfile
import tomllib
import venv

import links
import pytest
from notebook_hygiene import ROOT

from course_utils import setup

PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
REPO = links.read_repository(PYPROJECT)
RANGE = tomllib.loads(PYPROJECT)["tool"]["course"]["supported-torch"]


def run_cell(python, source, cwd, probe: bool = True) -> subprocess.CompletedProcess:
    cell = links.setup_cell_source(str(source))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "PYTHON"))}
    env |= {
        "PIP_NO_INDEX": "1",  # nothing may come from the network
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_BUILD_ISOLATION": "0",  # use this environment's setuptools
        "PYTHONNOUSERSITE": "1",
    }
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
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", source / "src", ignore=skip)
    shutil.copytree(ROOT / "notebooks" / "workers", source / "notebooks" / "workers", ignore=skip)
    return source


def test_the_cell_is_at_most_five_lines_and_names_the_source():
    cell = links.setup_cell_source("git+https://github.com/o/n")
    assert len(cell.splitlines()) <= 5 and cell.startswith(links.SETUP_MARKER)
    assert (
        cell.count("git+https://github.com/o/n") == 2
    )  # pip installs it; course_utils.setup fetches its workers
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


def archive(files: dict[str, bytes]) -> bytes:
    """A gzipped tar such as GitHub serves for a repository: every path under one top folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_workers_are_fetched_from_the_repository_archive(tmp_path):
    served = archive(
        {
            "course-main/README.md": b"not a worker",
            "course-main/notebooks/workers/train_ddp.py": b"print('train')\n",
            "course-main/notebooks/workers/sub/helper.py": b"x = 1\n",
            "course-main/notebooks/workers/__pycache__/train_ddp.pyc": b"stale",
            "course-main/notebooks/00_start_here.ipynb": b"{}",
        }
    )
    asked = []
    said = setup.fetch_workers(
        "git+https://github.com/o/n@v1", tmp_path, opener=lambda url: asked.append(url) or served
    )
    assert asked == ["https://github.com/o/n/archive/v1.tar.gz"]
    assert said == f"fetched 2 worker scripts from {asked[0]} into {tmp_path / 'workers'}"
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["workers/sub/helper.py", "workers/train_ddp.py"]
    assert (tmp_path / "workers" / "train_ddp.py").read_text() == "print('train')\n"
    # Where the workers are (a clone, a second run), nothing is fetched.
    refuse = lambda url: pytest.fail("fetched again")  # noqa: E731
    assert setup.fetch_workers("git+https://github.com/o/n", tmp_path, opener=refuse).startswith(
        "worker scripts already"
    )


def test_an_archive_without_workers_or_with_escaping_paths_writes_nothing_outside(tmp_path):
    served = archive({"x/README.md": b"", "x/notebooks/workers/../../../evil.py": b"bad"})
    with pytest.raises(RuntimeError, match="holds no notebooks/workers"):
        setup.fetch_workers("git+https://github.com/o/n", tmp_path / "here", opener=lambda url: served)
    assert not (tmp_path / "evil.py").exists() and not (tmp_path / "here" / "workers").exists()


@pytest.mark.parametrize(
    ("source", "url"),
    [
        ("git+https://github.com/o/n", "https://github.com/o/n/archive/HEAD.tar.gz"),
        ("git+https://github.com/o/n.git@main", "https://github.com/o/n/archive/main.tar.gz"),
        ("git+https://github.com/o/n@0123abc", "https://github.com/o/n/archive/0123abc.tar.gz"),
    ],
)
def test_the_archive_address_follows_the_source(source, url):
    assert setup.workers_archive(source) == url


@pytest.mark.parametrize("bad", ["course-utils", "git+https://gitlab.com/o/n", "/no/such/folder"])
def test_a_source_without_a_known_archive_says_what_to_give(bad):
    with pytest.raises(ValueError, match=r"git\+https://github\.com/OWNER/NAME"):
        setup.workers_archive(bad)


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
        (lambda: setup.workers_archive(None), TypeError, "source must be a str"),
        (lambda: setup.fetch_workers(42, "."), TypeError, "source must be a str"),
        (lambda: setup.fetch_workers("x", None), TypeError, "folder must be a folder's path"),
        (lambda: setup.install_requirements("pip"), TypeError, "install must be a function"),
        (lambda: setup.prepare_runtime("not a source", install=_never_installs), ValueError, "OWNER/NAME"),
        (lambda: setup.prepare_runtime(None, install=_never_installs), TypeError, "source must be a str"),
        (lambda: setup.main("git+https://github.com/o/n"), TypeError, "argv must be a list"),
    ],
)
def test_bad_input_names_the_argument_and_installs_nothing(call, error, names):
    with pytest.raises(error, match=names):
        call()
