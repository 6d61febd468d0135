"""The notebooks' set-up cell: silent where course_utils imports, else installs the course from its source.

No network: the source is a local copy of the course (COURSE_INSTALL_SOURCE), pip is told to use no
index, and the fresh environment sees this environment's packages (torch, numpy, ...) but not
course_utils, as on Colab or Kaggle where torch is there and the course is not.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import site
import subprocess
import sys
import venv

import links
import pytest
from notebook_hygiene import ROOT

PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
REPO = links.read_repository(PYPROJECT)


def run_cell(python, cell: str, source, probe: bool = True) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "PYTHON"))}
    env |= {
        "COURSE_INSTALL_SOURCE": str(source),
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
        timeout=120,
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
    """A copy of the course as pip would get it from git: the package's files, no installed state."""
    source = tmp_path / "course"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return source


def test_where_course_utils_imports_the_cell_prints_nothing_and_installs_nothing(tmp_path):
    cell = links.setup_cell_source(REPO, links.supported_torch(PYPROJECT))
    # An install from a source that does not exist would fail: the cell must not try one.
    result = run_cell(sys.executable, cell, tmp_path / "no-such-source", probe=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_runtime_with_supported_torch_gets_the_course_and_keeps_its_torch(bare_python, course_source):
    cell = links.setup_cell_source(REPO, links.supported_torch(PYPROJECT))
    result = run_cell(bare_python, cell, course_source)
    assert result.returncode == 0, result.stdout + result.stderr
    torch_version = importlib.metadata.version("torch")  # the same torch: the bare environment shares it
    lines = result.stdout.splitlines()
    assert (
        f"Installed the course from {course_source}, keeping this runtime's torch {torch_version}." in lines
    )
    assert lines[-1].startswith("course_utils from " + str(bare_python.parent.parent))


def test_a_runtime_with_unsupported_torch_installs_the_course_with_its_requirements(
    bare_python, course_source
):
    cell = links.setup_cell_source(REPO, ((1, 0), (1, 1)))  # no real torch is in this range
    result = run_cell(bare_python, cell, course_source)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f"Installed the course from {course_source} with the torch it supports." in lines
    assert lines[-1].startswith("course_utils from " + str(bare_python.parent.parent))


def test_a_failed_install_says_what_to_do(bare_python, tmp_path):
    cell = links.setup_cell_source(REPO, links.supported_torch(PYPROJECT))
    result = run_cell(bare_python, cell, tmp_path / "no-such-source")
    assert result.returncode != 0
    assert "needs internet access" in result.stderr
