"""The GPU lane (scripts/gpu_lane.py): what `prepare` brings, a CPU rehearsal of `run`, `report`'s page."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import gpu_lane
import gpu_lane_plugin
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
# A `gpu run` of notebook 00 on a CPU-only machine: the recorded input of `gpu report`'s tests.
EXAMPLE = ROOT / "tests" / "gpu_lane_cpu_rehearsal"
REHEARSED = "notebooks/00_start_here.ipynb"


def pip_item(name: str, version: str, *requires: str) -> dict:
    """One entry of pip's install report."""
    return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)}}


def test_plan_brings_what_the_machine_and_its_packages_lack():
    report = {
        "install": [
            pip_item("nbval", "0.11.0", "pytest>=7", "ipykernel", "coverage"),
            pip_item("ipykernel", "7.4.0", "traitlets>=5", 'appnope; platform_system == "Darwin"'),
            pip_item("pytest", "9.2.0", "pluggy>=1.5", 'colorama; sys_platform == "win32"'),
            pip_item(
                "pluggy",
                "1.7.0",
                'typing-extensions; python_version >= "3.12"',
                'tomli; python_version < "3.12"',
            ),
            pip_item("Traitlets", "5.16.1"),
            pip_item("coverage", "7.17.5", 'tomli; python_full_version <= "3.11.0a6" and extra == "toml"'),
            pip_item("nvidia-nccl-cu13", "2.28.9"),
            pip_item("matplotlib", "3.11.2", "pyparsing>=3"),
            pip_item("pyparsing", "3.3.3"),
        ]
    }
    bring, have = gpu_lane.plan(report, ["pytest>=8", "matplotlib"])
    assert bring == [
        ("Traitlets", "5.16.1"),
        ("coverage", "7.17.5"),
        ("ipykernel", "7.4.0"),
        ("nbval", "0.11.0"),
    ]
    assert {"pytest", "pluggy", "matplotlib", "pyparsing"} <= set(have)  # what the machine's packages need
    # Markers are read for the GPU machine (Linux, Python 3.12), not for the Python running this.
    assert "typing-extensions" in have and not {"tomli", "colorama", "appnope"} & set(have)


def test_the_target_list_and_the_needed_requirements_never_bring_torch():
    target = gpu_lane.target_requirements()
    # The machine's transformers is older than the course's range: the lane brings it.
    assert target[0].startswith("torch==2.11") and "transformers" not in target
    needed = {gpu_lane.requirement_name(r) for r in gpu_lane.needed_requirements()}
    assert {"nbval", "ipykernel", "ipywidgets", "polib", "nbformat", "nbclient"} <= needed
    assert not needed & {"torch", "ruff", "playwright", "jupyterlab", "sphinx", "myst-nb"}
    options = gpu_lane.pip_target_options()
    assert "--only-binary=:all:" in options and options[options.index("--python-version") + 1] == "3.12"
    assert "manylinux_2_17_x86_64" in options and "manylinux_2_28_x86_64" in options


def test_the_gpu_tests_are_the_files_that_ask_torch_about_cuda():
    files = gpu_lane.gpu_test_files()
    assert {"tests/test_gpus.py", "tests/test_devices.py", "tests/test_parallel.py"} <= set(files)
    assert "tests/test_site.py" not in files and "tests/test_gpu_lane.py" not in files


# A pytest plugin that warns when pytest starts, as pytest-benchmark (which a GPU machine had) does
# under xdist: with the course's `filterwarnings = ["error"]` it stops pytest unless kept out.
WARNING_PLUGIN = """
import warnings
def pytest_configure(config):
    warnings.warn("benchmarks are disabled under xdist", UserWarning)
"""


def make_wheel(folder: Path) -> str:
    """A wheel of one module, `lane_probe`, part of it in `.data/purelib` as some wheels have it, and
    a plugin registered as pytest-benchmark registers itself."""
    name = "lane_probe-0.1-py3-none-any.whl"
    with zipfile.ZipFile(folder / name, "w") as wheel:
        wheel.writestr("lane_probe/__init__.py", "from lane_probe.inner import WHERE\n")
        wheel.writestr("lane_probe-0.1.data/purelib/lane_probe/inner.py", "WHERE = __file__\n")
        wheel.writestr("lane_probe/bench.py", WARNING_PLUGIN)
        wheel.writestr(
            "lane_probe-0.1.dist-info/entry_points.txt", "[pytest11]\nbenchmark = lane_probe.bench\n"
        )
        wheel.writestr(
            "lane_probe-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: lane_probe\nVersion: 0.1\n"
        )
        wheel.writestr("lane_probe-0.1.dist-info/RECORD", "")
    return name


def test_unpacked_wheels_import_through_the_lanes_pythonpath(tmp_path):
    name = make_wheel(tmp_path)
    site = tmp_path / "site"
    gpu_lane.unpack_wheels(tmp_path, [name], site)
    env = gpu_lane.lane_environment(site, tmp_path / "results")
    probe = "import lane_probe, course_utils; print(lane_probe.WHERE); print(course_utils.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    inner, course_utils = where.stdout.splitlines()
    assert Path(inner).is_relative_to(site) and Path(course_utils).is_relative_to(ROOT / "src")
    assert not list(site.glob("*.data"))
    assert env["COURSE_FORKED_KERNELS"] == "0"  # fresh kernels on the GPU machine, as a student's


def rehearse(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`course.py gpu run` here, its `prepare` faked: the wheels are one probe, the rest is this Python's."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    manifest = {"python": "3.12", "needed": gpu_lane.needed_requirements(), "wheels": [make_wheel(wheels)]}
    (wheels / gpu_lane.MANIFEST).write_text(json.dumps(manifest))
    out = tmp_path / "out"
    command = [sys.executable, "course.py", "gpu", "run", "--out", out, "--wheels", wheels, *options]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return done, json.loads((out / "report.json").read_text())


def test_cpu_rehearsal_of_a_gpu_run_writes_a_well_formed_report(tmp_path):
    done, report = rehearse(tmp_path, "--notebooks", REHEARSED, "--tests", "--workers", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    cells = len(gpu_lane.code_cells(json.loads((ROOT / REHEARSED).read_text())))
    assert "GPUs: none (a CPU rehearsal)" in done.stdout and f"{cells} passed, 0 failed" in done.stdout
    assert report["rehearsal"] is True and report["gpus"] == [] and not report["timed_out"]
    assert report["torch"]["version"] == torch.__version__ and report["torch"]["build"] == "CPU-only"
    assert (
        report["packages"]["lane-probe"]["from"] == "lane"
        and report["packages"]["nbval"]["from"] == "machine"
    )
    assert report["missing"] == [] and report["outside"] == []
    assert report["course_utils"] == "src/course_utils/__init__.py"
    assert report["notebooks"] == {
        "00_start_here.ipynb": {"passed": cells, "failed": 0, "skipped": 0, "failures": []}
    }
    with zipfile.ZipFile(tmp_path / "out" / "notebooks.zip") as bundle:
        executed = json.loads(bundle.read("00_start_here.ipynb"))
    cells = gpu_lane.code_cells(executed)
    assert all(cell["metadata"][gpu_lane.RAN_KEY] for cell in cells)
    assert "notebooks: 00, 01, 02" in gpu_lane.output_text(
        cells[1]["outputs"]
    )  # the kernel ran in notebooks/


def test_a_run_its_timeout_stops_still_writes_its_report(tmp_path):
    timeout = str(gpu_lane.REPORT_MARGIN_S + 1)  # pytest gets about a second
    done, report = rehearse(
        tmp_path, "--notebooks", REHEARSED, "--tests", "--timeout", timeout, "--workers", "0"
    )
    assert done.returncode == 1 and report["timed_out"] is True and report["pytest"]["exit_status"] is None
    assert set(report["notebooks"]) == {"00_start_here.ipynb"}
    assert "[the lane stopped pytest after" in (tmp_path / "out" / "pytest-output.txt").read_text()


def test_the_inventory_names_a_package_outside_the_courses_range(tmp_path):
    env = gpu_lane.lane_environment(tmp_path, tmp_path / "results")
    found = gpu_lane.inventory(env, tmp_path, ["pytest", "nbval"], ranges={"pytest": "<1", "nbval": ">=0.1"})
    assert found["outside"] == [f"pytest {pytest.__version__} (the course needs <1)"]
    ranges = gpu_lane.course_ranges()
    assert ranges["torch"] == ">=2.9,<2.16" and {"transformers", "nbval"} <= set(ranges)  # not the pin


def test_run_names_the_missing_preparation(tmp_path):
    command = [sys.executable, "scripts/gpu_lane.py", "run", "--out", tmp_path / "out", "--wheels", tmp_path]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "python3 course.py gpu prepare" in done.stderr


def test_the_table_of_contributing_has_a_row_per_notebook_and_a_column_per_machine():
    table = gpu_lane.gpu_table()
    assert "00" in table and "13" in table
    assert set(table["05"]) == {"1 GPU", "2 GPUs (Kaggle's T4 x2)", "8 GPUs"}
    assert [gpu_lane.table_column(n) for n in (0, 1, 2, 4, 8)] == [
        None,
        "1 GPU",
        "2 GPUs (Kaggle's T4 x2)",
        "2 GPUs (Kaggle's T4 x2)",
        "8 GPUs",
    ]


def test_report_of_a_cpu_rehearsal_says_so_and_stays_out_of_the_sites_runs(tmp_path, monkeypatch):
    assert gpu_lane.gpu_report(EXAMPLE, tmp_path / "docs") == 0
    report = json.loads((EXAMPLE / "report.json").read_text())
    name = gpu_lane.page_name(report)
    assert "cpu-rehearsal" in name
    english = (tmp_path / "docs" / "gpu-runs" / f"{name}.md").read_text()
    chinese = (tmp_path / "docs" / "zh-CN" / "gpu-runs" / f"{name}.md").read_text()
    assert english.startswith("# CPU rehearsal (no GPU)") and "Verified on" not in english
    assert chinese.startswith("# CPU 预演（没有 GPU）")
    assert "| 00\\_start\\_here.ipynb | 12 / 0 / 0 |" in english  # file names escaped for Markdown
    assert "side by side" not in english  # one pytest worker: nothing ran beside the timings
    assert name in (tmp_path / "docs" / "gpu-runs" / "index.md").read_text()
    monkeypatch.setattr(gpu_lane, "DOCS", tmp_path / "site")  # the website's pages, as gpu_report knows them
    assert gpu_lane.gpu_report(EXAMPLE, tmp_path / "site") == 2  # never among the GPU runs of the site
    assert not (tmp_path / "site").exists()


def test_report_of_a_gpu_run_shows_each_differing_output_beside_the_cpus(tmp_path):
    report = json.loads((EXAMPLE / "report.json").read_text())
    report["rehearsal"] = False
    report["gpus"] = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.2, "capability": "9.0"}]
    report["torch"] = {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900, "build": "CUDA 13.0"}
    report["pytest"]["workers"] = 16
    report["notebooks"]["00_start_here.ipynb"]["failed"] = 1
    error = "FileNotFoundError: /tmp/pytest-0/boom.json"  # the GPU machine's paths stay off the page
    coloured = "\x1b[91mNotebook cell execution failed\x1b[0m"  # from a run before the plugin stripped it
    failures = [{"cell": 2, "error": error}, {"cell": 3, "error": coloured}]
    report["notebooks"]["00_start_here.ipynb"]["failures"] = failures
    with zipfile.ZipFile(EXAMPLE / "notebooks.zip") as bundle:
        executed = json.loads(bundle.read("00_start_here.ipynb"))
    dependent = [i for i, c in enumerate(gpu_lane.code_cells(executed)) if gpu_lane.hardware_dependent(c)]
    gpu_cell = gpu_lane.code_cells(executed)[dependent[0]]
    gpu_cell["outputs"] = [
        {"output_type": "stream", "name": "stdout", "text": f"cuda:0 <the GPU>\n{ROOT}/src/x.py /tmp/snaps\n"}
    ]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "report.json").write_text(json.dumps(report))
    with zipfile.ZipFile(run_dir / "notebooks.zip", "w") as bundle:
        bundle.writestr("00_start_here.ipynb", json.dumps(executed))
    assert gpu_lane.gpu_report(run_dir, tmp_path / "docs") == 0
    name = gpu_lane.page_name(report)
    assert name.endswith("-nvidia-h100-80gb-hbm3-torch2.11.0")
    page = (tmp_path / "docs" / "gpu-runs" / f"{name}.md").read_text()
    assert page.startswith("# Verified on NVIDIA H100 80GB HBM3 · torch 2.11.0+cu130")
    assert f"### 00\\_start\\_here.ipynb, Cell {dependent[0]}" in page and "cuda:0 &lt;the GPU&gt;" in page
    assert (
        "### 00\\_start\\_here.ipynb, Cell 2 — failed: `FileNotFoundError: $TMPDIR/pytest-0/boom.json`"
        in page
    )
    assert "src/x.py $TMPDIR/snaps" in page and "/tmp/" not in page and str(ROOT) not in page
    assert "Cell 3 — failed: `Notebook cell execution failed`" in page and "\x1b" not in page
    assert "The table in CONTRIBUTING (1 GPU) says:" in page
    assert "side by side on the same cores" in page  # 16 workers: the timings were taken under load
    assert "\n\n<table>" in page and "&#10;" in page  # an HTML block on one line: no blank line ends it
    assert f"> {gpu_lane.gpu_table()['00']['1 GPU']}" in page


@pytest.mark.parametrize(
    ("longrepr", "line"),
    [
        (
            "\x1b[91mNotebook cell execution failed\x1b[0m\n\x1b[94mCell 31: Cell outputs differ\n\nInput:\n",
            "Cell 31: Cell outputs differ",
        ),
        ("def test_x():\n>       assert 1 == 2\nE       assert 1 == 2\n", "assert 1 == 2"),
    ],
)
def test_the_first_error_line_of_a_failure_is_its_reason_without_colour_codes(longrepr, line):
    report = pytest.TestReport("nb.ipynb::Cell 31", ("nb.ipynb", 0, ""), {}, "failed", longrepr, "call")
    assert gpu_lane_plugin.first_error_line(report, []) == line


def test_the_sites_index_of_runs_lists_the_pages_there():
    for language in gpu_lane.WORDS:
        folder = gpu_lane.edition_folder(gpu_lane.DOCS, language)
        pages = [p.stem for p in folder.glob("*.md") if p.name != "index.md"]
        assert (folder / "index.md").read_text() == gpu_lane.index_page(pages, language)
    listed = gpu_lane.index_page(["2026-01-02-a-torch2.11.0", "2026-03-04-b-torch2.12.0"], "en")
    assert listed.index("2026-03-04-b") < listed.index("2026-01-02-a")  # newest first


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["run"], "--out"),
        (["run", "--out", "x", "--timeout", "5"], "argument --timeout: must be more than 20 s"),
        (
            ["run", "--out", "x", "--notebooks", "notebooks/99_none.ipynb"],
            "notebooks/99_none.ipynb is not a file",
        ),
        (["run", "--out", "x", "--tests", "/etc/hostname"], "/etc/hostname is not a file under"),
        (["report"], "run_dir"),
    ],
)
def test_bad_arguments_are_named(arguments, named, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_lane.main(arguments)
    assert stop.value.code == 2 and named in capsys.readouterr().err
