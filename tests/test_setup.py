"""The notebooks' set-up cell and course_utils.setup behind it: silent where course_utils imports, else
installs the course by name (or from COURSE_SOURCE), keeps or replaces torch, and puts the edition's
worker scripts and solutions beside the notebook.

The cell runs as a notebook runs it, in IPython (its %pip and %run). No network: the course comes
from a local copy, its wheel, or a package index on 127.0.0.1; pip is told to use no other index.
The fresh environment sees this environment's packages (torch, numpy, IPython, ...) but neither
course_utils nor its metadata, as on Colab or Kaggle, where torch is there and the course is not.
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
from bundle import copy_build_inputs
from format_cells import too_wide
from IPython.core.inputtransformer2 import TransformerManager
from notebook_hygiene import ROOT

from course_utils import setup
from course_utils.processes import free_port

PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
RANGE = tomllib.loads(PYPROJECT)["tool"]["course"]["supported-torch"]
WHEEL_VERSION = "0.1.0.post1"
EDITIONS = {"en": "", "zh-CN": "zh-CN"}  # each edition's folder under notebooks/
PROBE = "import course_utils\nprint('course_utils from', course_utils.__file__)\n"


def run_cell(
    python, cwd, language: str = "en", probe: bool = True, extra: dict | None = None
) -> subprocess.CompletedProcess:
    """The edition's set-up cell (and a probe after it), run by `python` as one IPython cell in `cwd`."""
    cell = links.setup_cell_source(language)
    skip = ("PIP_", "PYTHON", "COURSE_", "IPYTHON")
    env = {key: value for key, value in os.environ.items() if not key.startswith(skip)}
    env |= {
        "PIP_NO_INDEX": "1",  # nothing may come from the network
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_BUILD_ISOLATION": "0",  # use this environment's setuptools
        "PYTHONNOUSERSITE": "1",
        "IPYTHONDIR": str(
            Path(cwd).parent / "ipython"
        ),  # IPython's own files: not in ~ nor beside the notebook
    }
    env |= extra or {}
    env = {key: value for key, value in env.items() if value}
    return subprocess.run(
        [
            str(python),
            "-m",
            "IPython",
            "--quick",
            "--no-banner",
            "--colors=nocolor",
            "-c",
            cell + PROBE * probe,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def edition_files(notebooks: Path, language: str) -> dict[str, bytes]:
    """What the set-up puts beside a notebook of the edition, by place: the workers and solutions of
    the course whose notebooks/ is `notebooks`."""
    files = {}
    for folder, pattern in (("workers", "*"), ("solutions", "*.py")):
        for path in sorted((notebooks / EDITIONS[language] / folder).glob(pattern)):
            if path.is_file() and path.name != "__init__.py":
                files[f"{folder}/{path.name}"] = path.read_bytes()
    return files


def wheel_files(wheel: Path, language: str) -> dict[str, bytes]:
    """The same, as the wheel carries them: in course_utils/workers(_zh)/ and course/.../solutions/."""
    inside = {
        "en": {"workers": "course_utils/workers/", "solutions": "course_utils/course/solutions/"},
        "zh-CN": {"workers": "course_utils/workers_zh/", "solutions": "course_utils/course/zh-CN/solutions/"},
    }[language]
    with zipfile.ZipFile(wheel) as archive:
        return {
            f"{folder}/{name.removeprefix(prefix)}": archive.read(name)
            for folder, prefix in inside.items()
            for name in archive.namelist()
            if name.startswith(prefix)
            and "/" not in name.removeprefix(prefix)
            and not name.endswith("__init__.py")
        }


def files_beside(runtime: Path) -> dict[str, bytes]:
    """The files the set-up left in the notebook's folder, under workers/ and solutions/."""
    return {
        path.relative_to(runtime).as_posix(): path.read_bytes()
        for folder in ("workers", "solutions")
        for path in sorted((runtime / folder).rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def bare_python(tmp_path):
    """A fresh virtual environment that sees this one's packages, except the course (its code and its
    metadata: pip would take this environment's editable install for the course, and install nothing)."""
    shared = tmp_path / "shared-packages"
    shared.mkdir()
    for folder in map(Path, site.getsitepackages()):
        for entry in folder.iterdir():
            course = entry.name.startswith(("course_utils", "pytorch_on_gpus_hands_on", "__editable__"))
            if not course and entry.suffix != ".pth" and not (shared / entry.name).exists():
                (shared / entry.name).symlink_to(entry)
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    target = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (env_dir / target / "this_env.pth").write_text(f"{shared}\n")
    probe = (
        "import importlib.metadata as m; from importlib.util import find_spec as f; "
        "print([bool(f(n)) for n in ('torch', 'pip', 'IPython', 'course_utils')], "
        "[d.name for d in m.distributions() if 'hands' in (d.name or '')])"
    )
    seen = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout
    assert seen == "[True, True, True, False] []\n"
    return python


@pytest.fixture
def course_source(tmp_path):
    """The course as a folder that pip builds it from: the package's files and the notebooks."""
    return copy_build_inputs(tmp_path / "course")


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_cell_is_five_lines_within_79_columns_that_ipython_runs(language):
    cell = links.setup_cell_source(language)
    assert len(cell.splitlines()) <= 5 and too_wide(cell) == []  # a Chinese character counts two
    assert f'os.environ["COURSE_LANGUAGE"] = "{language}"' in cell.splitlines()[0]
    # Installed by its name, or what COURSE_SOURCE names; the kernel's own pip (%pip), not PATH's.
    assert cell.count(f'os.getenv("COURSE_SOURCE", "{setup.DISTRIBUTION}")') == 1 and "github" not in cell
    assert "%pip install -q --no-deps" in cell and "%run -m course_utils.setup" in cell and "!" not in cell
    compile(TransformerManager().transform_cell(cell), "set-up cell", "exec")
    assert links.is_setup_cell({"cell_type": "code", "source": cell})  # known without its id too
    assert (links.DISTRIBUTION, links.SOURCE_VARIABLE) == (setup.DISTRIBUTION, setup.SOURCE_VARIABLE)


def test_where_course_utils_imports_the_cell_prints_nothing_and_installs_nothing(tmp_path):
    # An install from a source that does not exist would fail: the cell must not try one.
    here = tmp_path / "here"
    here.mkdir()
    extra = {"COURSE_SOURCE": str(tmp_path / "no-such-source")}
    result = run_cell(sys.executable, here, probe=False, extra=extra)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert list(here.iterdir()) == []  # no workers or solutions either


def test_a_runtime_with_supported_torch_gets_the_course_keeps_its_torch_and_the_student_s_files(
    bare_python, course_source, tmp_path
):
    runtime = tmp_path / "content"  # Colab's working folder, where the notebook's kernel starts
    mine = {"workers/train_ddp.py": b"# my own version\n", "solutions/05_data_parallel.py": b"# my try\n"}
    for place, data in mine.items():
        (runtime / place).parent.mkdir(parents=True, exist_ok=True)
        (runtime / place).write_bytes(data)
    result = run_cell(bare_python, runtime, extra={"COURSE_SOURCE": str(course_source)})
    assert result.returncode == 0, result.stdout + result.stderr
    torch_version = importlib.metadata.version("torch")  # the same torch: the bare environment shares it
    shipped = edition_files(course_source / "notebooks", "en")
    said = (
        f"Installed the course from {course_source}: kept this runtime's torch {torch_version} "
        f"(in the supported range {RANGE}); copied {len(shipped) - len(mine)} of the {len(shipped)} files "
        f"to {runtime / 'workers'} and {runtime / 'solutions'}: the others were there and were kept."
    )
    lines = result.stdout.splitlines()
    assert said in lines, result.stdout
    assert lines[-1].startswith("course_utils from " + str(bare_python.parent.parent))
    assert files_beside(runtime) == shipped | mine and "workers/train_ddp.py" in shipped
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
    runtime = tmp_path / "content"
    runtime.mkdir()
    result = run_cell(bare_python, runtime, extra={"COURSE_SOURCE": str(tmp_path / "no-such-source")})
    said = result.stdout + result.stderr
    assert result.returncode != 0 and "course_utils from /" not in said, said  # the probe never ran
    assert "no-such-source" in result.stderr and "No module named 'course_utils'" in result.stdout, said
    assert list(runtime.iterdir()) == []


NOT_FOUND = importlib.metadata.PackageNotFoundError


class FakeMetadata:
    """importlib.metadata as course_utils.setup reads it: the course's requirements, a torch or none."""

    PackageNotFoundError = NOT_FOUND

    def __init__(self, torch_version: str | None) -> None:
        self.torch_version = torch_version

    def requires(self, name: str) -> list[str]:
        assert name == "pytorch-on-gpus-hands-on"
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


def fake_package(root: Path) -> Path:
    """course_utils's folder as a wheel installs it, with one worker and one solution per edition (and
    what must not be copied: the packages' __init__.py, a notebook)."""
    package = root / "site" / "course_utils"
    files = {
        "workers/__init__.py": "",
        "workers/train_ddp.py": "print('train')\n",
        "workers/slurm_srun.sbatch": "#!/bin/bash\n",
        "workers_zh/train_ddp.py": "print('train')  # 训练\n",
        "workers_zh/slurm_srun.sbatch": "#!/bin/bash\n# 中文\n",
        "course/05_data_parallel.ipynb": "{}",
        "course/solutions/05_data_parallel.py": "answer = 1\n",
        "course/zh-CN/05_data_parallel.ipynb": "{}",
        "course/zh-CN/solutions/05_data_parallel.py": "answer = 1  # 答案\n",
    }
    for place, text in files.items():
        (package / place).parent.mkdir(parents=True, exist_ok=True)
        (package / place).write_text(text, encoding="utf-8")
    return package


@pytest.mark.parametrize(
    ("language", "workers", "solutions"),
    [("en", "workers", "course/solutions"), ("zh-CN", "workers_zh", "course/zh-CN/solutions")],
)
def test_the_edition_s_workers_and_solutions_are_copied_from_the_package_never_over_a_file(
    tmp_path, monkeypatch, language, workers, solutions
):
    monkeypatch.setenv("COURSE_LANGUAGE", language)
    package, here = fake_package(tmp_path), tmp_path / "content"
    said = setup.copy_beside(here, package=package)
    wanted = {
        "workers/train_ddp.py": package / workers / "train_ddp.py",
        "workers/slurm_srun.sbatch": package / workers / "slurm_srun.sbatch",
        "solutions/05_data_parallel.py": package / solutions / "05_data_parallel.py",
    }
    assert files_beside(here) == {place: path.read_bytes() for place, path in wanted.items()}
    if language == "en":
        assert (
            said
            == f"copied the worker scripts to {here / 'workers'} and the solutions to {here / 'solutions'}"
        )
    # The student changed one and removed another: the changed one stays, the missing one comes back.
    (here / "solutions" / "05_data_parallel.py").write_text("answer = 2  # mine\n")
    (here / "workers" / "train_ddp.py").unlink()
    said = setup.copy_beside(here, package=package)
    assert (here / "solutions" / "05_data_parallel.py").read_text() == "answer = 2  # mine\n"
    assert (here / "workers" / "train_ddp.py").read_bytes() == wanted["workers/train_ddp.py"].read_bytes()
    if language == "en":
        assert (
            said
            == f"copied 1 of the 3 files to {here / 'workers'} and {here / 'solutions'}: the others were "
            "there and were kept"
        )


def test_an_editable_install_takes_the_files_from_its_clone(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    for place in (
        "notebooks/00_start_here.ipynb",
        "notebooks/solutions/00_start_here.py",
        "notebooks/workers/who_am_i.py",
        "notebooks/zh-CN/00_start_here.ipynb",
        "notebooks/zh-CN/solutions/00_start_here.py",
        "notebooks/zh-CN/workers/who_am_i.py",
    ):
        (clone / place).parent.mkdir(parents=True, exist_ok=True)
        (clone / place).write_text("中文\n" if "zh-CN" in place else "English\n", encoding="utf-8")
    (clone / "src" / "course_utils").mkdir(parents=True)  # the package's folder: no course/, no workers/
    for language, text in (("zh-CN", "中文\n"), ("en", "English\n")):
        monkeypatch.setenv("COURSE_LANGUAGE", language)
        here = tmp_path / language
        setup.copy_beside(here, package=clone / "src" / "course_utils")
        assert {place: data.decode() for place, data in files_beside(here).items()} == {
            "workers/who_am_i.py": text,
            "solutions/00_start_here.py": text,
        }


def test_a_package_without_workers_or_solutions_says_to_install_again(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "en")
    with pytest.raises(RuntimeError, match="install the course again"):
        setup.copy_beside(tmp_path / "here", package=tmp_path / "none")
    package = fake_package(tmp_path)
    shutil.rmtree(package / "course" / "solutions")
    with pytest.raises(RuntimeError, match="no worker scripts or no solutions"):
        setup.copy_beside(tmp_path / "here", package=package)
    assert not (tmp_path / "here").exists()


def test_every_package_under_src_is_built_and_the_workers_travel_with_it():
    settings = tomllib.loads(PYPROJECT)["tool"]["setuptools"]
    under_src = {
        ".".join(init.parent.relative_to(ROOT / "src").parts) for init in (ROOT / "src").rglob("__init__.py")
    }
    beside = {"course_utils.workers", "course_utils.workers_zh", "course_utils.course"}
    assert set(settings["packages"]) == under_src | beside
    assert settings["package-dir"]["course_utils.workers"] == "notebooks/workers"
    assert settings["package-dir"]["course_utils.workers_zh"] == "notebooks/zh-CN/workers"
    assert settings["package-dir"]["course_utils.course"] == "notebooks"


@pytest.fixture(scope="module")
def course_wheel(tmp_path_factory):
    """The course built as a wheel from a copy of its files (setuptools' own build, no pip, no network)."""
    copy = copy_build_inputs(tmp_path_factory.mktemp("course"))
    # A version of its own: this environment's editable install 0.1.0, which the bare environment
    # sees, would satisfy a plain `pytorch-on-gpus-hands-on`, and pip would install nothing.
    (copy / "pyproject.toml").write_text(
        PYPROJECT.replace('version = "0.1.0"', f'version = "{WHEEL_VERSION}"')
    )
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


def test_the_wheel_carries_the_whole_course_once(course_wheel):
    """Both editions' notebooks and solutions under course_utils/course/, the Slurm files beside the
    workers, the Chinese workers as file contents, the `pytorch-on-gpus` command; no workers twice."""
    with zipfile.ZipFile(course_wheel) as wheel:
        names = set(wheel.namelist())
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith("entry_points.txt"))
        chinese_sbatch = wheel.read("course_utils/workers_zh/slurm_srun.sbatch")
    for edition in ("", "zh-CN/"):
        for pattern in ("[0-9][0-9]_*.ipynb", "solutions/*.py"):
            wanted = {
                p.relative_to(ROOT / "notebooks").as_posix()
                for p in (ROOT / "notebooks").glob(edition + pattern)
            }
            assert wanted and {f"course_utils/course/{name}" for name in wanted} <= names
    assert {
        "course_utils/workers/slurm_torchrun.sbatch",
        "course_utils/workers/slurm_stored_run.txt",
    } <= names
    assert chinese_sbatch == (ROOT / "translations" / "zh-CN" / "workers" / "slurm_srun.sbatch").read_bytes()
    assert not [name for name in names if "/course/" in name and "/workers/" in name]
    assert "pytorch-on-gpus = course_utils.cli:main" in entry_points


@pytest.fixture
def local_index(course_wheel, tmp_path):
    """A package index on 127.0.0.1 (a free port) that holds the course's wheel alone; yields (url, asked)."""
    project = tmp_path / "index" / "simple" / "pytorch-on-gpus-hands-on"
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


@pytest.mark.parametrize(("route", "language"), [("index", "en"), ("wheel", "zh-CN")])
def test_the_cell_installs_by_name_from_the_index_or_from_a_wheel_and_the_files_come_from_the_package(
    route, language, bare_python, course_wheel, local_index, tmp_path
):
    index, asked = local_index
    runtime = tmp_path / "content"
    runtime.mkdir()
    # By name from the runtime's index (the cell's default), or the wheel that COURSE_SOURCE names.
    source = {"index": None, "wheel": str(course_wheel)}[route]
    cut_off = "http://127.0.0.1:9"  # nothing listens there: any request beyond 127.0.0.1 fails
    result = run_cell(
        bare_python,
        runtime,
        language,
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
    installed = source or setup.DISTRIBUTION
    said = {
        "en": (
            f"Installed the course from {installed}: kept this runtime's torch ",
            f"; copied the worker scripts to {runtime / 'workers'} and the solutions to "
            f"{runtime / 'solutions'}.",
        ),
        "zh-CN": (
            f"已从 {installed} 安装课程：保留了这个运行时的 torch ",
            f"；已把工作进程脚本复制到 {runtime / 'workers'}，把参考答案复制到 {runtime / 'solutions'}。",
        ),
    }[language]
    assert any(line.startswith(said[0]) and line.endswith(said[1]) for line in result.stdout.splitlines()), (
        result.stdout
    )
    wanted = {
        "/simple/pytorch-on-gpus-hands-on/",
        f"/simple/pytorch-on-gpus-hands-on/{course_wheel.name}",
    }
    assert (wanted <= set(asked)) == (route == "index"), f"the course came by name from the index: {asked}"
    version = subprocess.run(
        [str(bare_python), "-c", f"import importlib.metadata as m; print(m.version('{setup.DISTRIBUTION}'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout == f"{WHEEL_VERSION}\n"
    assert files_beside(runtime) == wheel_files(course_wheel, language)
    assert wheel_files(course_wheel, language).keys() == edition_files(ROOT / "notebooks", language).keys()
    # A worker runs where the notebook starts it, with what torchrun would set.
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
            "MASTER_PORT": str(free_port()),
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
        (lambda: setup.copy_beside(None), TypeError, "folder must be a folder's path"),
        (lambda: setup.copy_beside("x\0y"), ValueError, "folder must be a non-empty path"),
        (lambda: setup.copy_beside(".", package=5), TypeError, "package must be a folder's path"),
        (lambda: setup.files_beside(package=""), ValueError, "package must be a non-empty path"),
        (lambda: setup.install_requirements("pip"), TypeError, "install must be a function"),
        (lambda: setup.prepare_runtime(42, install=_never_installs), TypeError, "source must be a str"),
        (
            lambda: setup.prepare_runtime("", install=_never_installs),
            ValueError,
            "source must be a non-empty",
        ),
        (
            lambda: setup.prepare_runtime("x", 5, install=_never_installs),
            TypeError,
            "folder must be a folder",
        ),
        (lambda: setup.main("git+https://github.com/o/n"), TypeError, "argv must be a list"),
    ],
)
def test_bad_input_names_the_argument_and_installs_nothing(call, error, names):
    with pytest.raises(error, match=names):
        call()
