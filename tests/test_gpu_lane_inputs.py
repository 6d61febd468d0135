"""The GPU lane's inputs (scripts/gpu_lane_inputs.py): a run folder, the wheels' manifest and the
folders it writes, crafted or broken, end in one line that names the file and the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import gpu_lane
import owned_folders
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "gpu_lane_cpu_rehearsal"  # a recorded `gpu run` of notebook 00 on the CPU
SCRIPT = ROOT / "scripts" / "gpu_lane.py"
NASTY = "<script>alert(1)</script> *b* [a](javascript:x) {sub}`x` ``y`` | z # \\"
MYST_MARKUP = ("<script", "<a ", "<em>", "<strong>b", "<code>y</code>", "myst role")  # NASTY must not be
SHOWN = "&lt;script&gt;alert(1)&lt;/script&gt; *b* [a](javascript:x) {sub}`x` ``y``"  # NASTY, rendered


def lane(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """scripts/gpu_lane.py with `args`, as `course.py gpu` runs it (pip kept off any index)."""
    env = {**os.environ, "PIP_NO_INDEX": "1"}  # `prepare` must refuse before pip; if not, pip fails
    command = [sys.executable, str(SCRIPT), *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def files(folder: Path) -> set[Path]:
    """Every file and link under `folder`."""
    return {p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def assert_refused(done: subprocess.CompletedProcess[str], *named: str) -> None:
    """Status 2 and one line on stderr, without a traceback, that names each of `named`."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(name in lines[0] for name in named), lines[0]


def gpu_report() -> dict:
    """The recorded rehearsal's report, as if a GPU had run it."""
    report = json.loads((EXAMPLE / "report.json").read_text())
    report["rehearsal"] = False
    report["gpus"] = [{"index": 0, "name": "NVIDIA H100", "memory_gib": 79.2, "capability": "9.0"}]
    return report


def executed_notebook() -> bytes:
    """The executed notebook 00 of the recorded rehearsal."""
    with zipfile.ZipFile(EXAMPLE / "notebooks.zip") as bundle:
        return bundle.read("00_start_here.ipynb")


def run_folder(tmp_path: Path, report: dict | str, entries: dict[str, bytes] | bytes | None = None) -> Path:
    """A run folder: `report` as report.json (text as it is), and a notebooks.zip of `entries`
    (raw bytes as the whole file; None: the rehearsal's notebook)."""
    folder = tmp_path / "run"
    folder.mkdir()
    text = report if isinstance(report, str) else json.dumps(report)
    (folder / "report.json").write_text(text)
    entries = {"00_start_here.ipynb": executed_notebook()} if entries is None else entries
    if isinstance(entries, bytes):
        (folder / "notebooks.zip").write_bytes(entries)
    else:
        with zipfile.ZipFile(folder / "notebooks.zip", "w") as bundle:
            for name, data in entries.items():
                bundle.writestr(name, data)
    return folder


def changed(field: str, value: object) -> Callable[[dict], None]:
    """A change of a report: `field` (a path, `gpus/0/name`) set to `value`, or deleted for `...`."""

    def change(report: dict) -> None:
        *path, last = [int(part) if part.isdigit() else part for part in field.split("/")]
        where = report
        for part in path:
            where = where[part]
        if value is ...:
            del where[last]
        else:
            where[last] = value

    return change


def notebook_with(**cell: object) -> bytes:
    """Notebook 00 as executed, its first cell's fields replaced by `cell`."""
    notebook = json.loads(executed_notebook())
    notebook["cells"][0].update(cell)
    return json.dumps(notebook).encode()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (changed("started", "../../etc/x"), ("report.json", "field 'started'", '"../../etc/x"')),
        (changed("gpus/0/name", 5), ("report.json", "field 'gpus[0].name' must be a string")),
        (changed("torch", ...), ("report.json", "field 'torch' is missing")),
        (changed("torch/version", "2.11/../../x"), ("report.json", "field 'torch.version'")),
        (changed("seconds", "31"), ("report.json", "field 'seconds' must be a number")),
        (changed("timed_out", 1), ("report.json", "field 'timed_out' must be true or false")),
        (changed("pytest/workers", -1), ("report.json", "field 'pytest.workers'")),
        (changed("gpus", []), ("report.json", "field 'rehearsal'")),  # a rehearsal posing as a GPU run
        (
            changed("notebooks", {"../../x.ipynb": {"passed": 1, "failed": 0, "skipped": 0, "failures": []}}),
            ("report.json", "field 'notebooks' has a key", "../../x.ipynb"),
        ),
        (
            changed("notebooks/00_start_here.ipynb/failures", [{"cell": "2", "error": "x"}]),
            ("report.json", """field 'notebooks["00_start_here.ipynb"].failures[0].cell'"""),
        ),
    ],
    ids=[
        "started-a-path",
        "gpu-name-a-number",
        "torch-missing",
        "torch-version-a-path",
        "seconds-a-string",
        "timed-out-a-number",
        "workers-negative",
        "rehearsal-without-gpus",
        "notebook-name-a-path",
        "cell-a-string",
    ],
)
def test_report_refuses_a_crafted_report_in_one_line(tmp_path, change, named):
    report = gpu_report()
    change(report)
    run = run_folder(tmp_path, report)
    before = files(tmp_path)
    assert_refused(lane("report", run, "--docs", tmp_path / "docs"), *named)
    assert files(tmp_path) == before  # nothing written, in --docs or anywhere else


@pytest.mark.parametrize(
    ("report", "entries", "named"),
    [
        ('{"format": 1, "seconds": NaN', None, ("report.json", "not JSON")),
        (
            json.dumps(gpu_report()).replace("79.2", "NaN"),
            None,
            ("report.json", "field 'gpus[0].memory_gib'"),
        ),
        ("[1, 2]", None, ("report.json", "the file must be an object, not a list")),
        (gpu_report(), b"PK\x03\x04 not a zip", ("notebooks.zip", "not a readable zip archive")),
        (gpu_report(), {"../evil.ipynb": b"{}"}, ("notebooks.zip", 'entry "../evil.ipynb"', "NN_name.ipynb")),
        (gpu_report(), {"00_start_here.ipynb": b"{not json"}, ("notebooks.zip", "is not a notebook")),
        (
            gpu_report(),
            {"00_start_here.ipynb": notebook_with(source=5)},
            ("notebooks.zip", "field 'cells[0].source' must be a string or a list of strings"),
        ),
    ],
    ids=["not-json", "nan", "a-list", "bad-zip", "entry-a-path", "entry-not-json", "entry-bad-cell"],
)
def test_report_refuses_a_broken_run_folder_in_one_line(tmp_path, report, entries, named):
    run = run_folder(tmp_path, report, entries)
    before = files(tmp_path)
    assert_refused(lane("report", run, "--docs", tmp_path / "docs"), *named)
    assert files(tmp_path) == before


def test_report_follows_no_link_out_of_the_run_folder_or_the_docs(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(gpu_report()))
    run = run_folder(tmp_path, gpu_report())
    (run / "report.json").unlink()
    (run / "report.json").symlink_to(secret)
    assert_refused(lane("report", run, "--docs", tmp_path / "docs"), "report.json", "leads out of")
    (run / "report.json").unlink()
    (run / "report.json").write_text(json.dumps(gpu_report()))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "gpu-runs").symlink_to(elsewhere)
    assert_refused(lane("report", run, "--docs", tmp_path / "docs"), "--docs", "leads out of it")
    assert not any(elsewhere.iterdir()) and not (tmp_path / "docs" / "zh-CN").exists()


def test_report_escapes_every_text_of_the_run_on_the_page(tmp_path):
    """A GPU's name, a test's id, file names and errors reach the page as text, never as markup."""
    parser = pytest.importorskip("myst_parser.parsers.mdit")
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig

    report = gpu_report()
    report["gpus"][0]["name"] = NASTY
    report["driver"] = report["torch"]["build"] = NASTY
    report["outside"] = [NASTY]
    report["notebooks"]["00_start_here.ipynb"]["failures"] = [{"cell": 2, "error": NASTY}]
    report["tests"] = {"tests/test_x.py": {"passed": 0, "failed": 1, "skipped": 0, "failures": []}}
    report["tests"]["tests/test_x.py"]["failures"] = [{"test": f"test_x[{NASTY}]", "error": NASTY}]
    notebook = json.loads(executed_notebook())
    cells = gpu_lane.code_cells(notebook)
    cells[2]["source"] = [f"{NASTY}\n", "print(1)\n"]
    cells[2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"{NASTY}\r\rmore\n"}]
    run = run_folder(tmp_path, report, {"00_start_here.ipynb": json.dumps(notebook).encode()})
    (tmp_path / "docs").mkdir()
    before = files(tmp_path)
    done = lane("report", run, "--docs", tmp_path / "docs")
    assert done.returncode == 0, done.stderr
    written = files(tmp_path) - before
    name = gpu_lane.page_name(report)
    assert name.startswith("2026-11-26-script-alert-1-script-b-a-javascript-x-sub-x")
    assert all(path.is_relative_to(tmp_path / "docs") for path in written) and len(written) == 4
    markdown = parser.create_md_parser(MdParserConfig(enable_extensions={"colon_fence"}), RendererHTML)
    for edition in ("gpu-runs", "zh-CN/gpu-runs"):
        html = markdown.render((tmp_path / "docs" / edition / f"{name}.md").read_text())
        assert not [markup for markup in MYST_MARKUP if markup in html], html
        assert html.count(SHOWN) == 10, html  # title, GPU, driver, build, outside, 2 tests, 3 errors
        assert f"<pre>{SHOWN}" in html and "&#10;more</pre>" in html  # the GPU's output, in one HTML block


@pytest.mark.parametrize(
    ("manifest", "named"),
    [
        (
            {"python": "3.12", "needed": [], "wheels": ["../x.whl"]},
            ("lane.json", "field 'wheels[0]'", "../x.whl"),
        ),
        (
            {"python": "3.12", "needed": [], "wheels": ["gone-1.0-py3-none-any.whl"]},
            ("lane.json", "is not in"),
        ),
        ({"python": 3.12, "needed": [], "wheels": []}, ("lane.json", "field 'python' must be a string")),
        ({"python": "3.12", "wheels": []}, ("lane.json", "field 'needed' is missing")),
        ({"python": "3.12", "needed": ["<b>"], "wheels": []}, ("lane.json", "field 'needed[0]'")),
    ],
    ids=["wheel-a-path", "wheel-missing", "python-a-number", "needed-missing", "needed-not-a-requirement"],
)
def test_run_refuses_a_crafted_manifest_before_it_writes(tmp_path, manifest, named):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "lane.json").write_text(json.dumps(manifest))
    (tmp_path / "x.whl").write_bytes(b"outside the wheels folder")
    done = lane("run", "--out", tmp_path / "out", "--wheels", wheels, "--notebooks", "--tests")
    assert_refused(done, *named)
    assert not (tmp_path / "out").exists()


def prepared(tmp_path: Path, wheel: bytes = b"") -> Path:
    """A wheels folder as `prepare` writes it, its one wheel's bytes `wheel`."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    name = "lane_probe-0.1-py3-none-any.whl"
    (wheels / name).write_bytes(wheel)
    (wheels / "lane.json").write_text(json.dumps({"python": "3.12", "needed": [], "wheels": [name]}))
    return wheels


def test_run_refuses_a_folder_of_the_users_and_one_it_cannot_write(tmp_path):
    wheels = prepared(tmp_path)
    users = tmp_path / "mine"
    users.mkdir()
    (users / "report.json").write_text("the user's own")
    done = lane("run", "--out", users, "--wheels", wheels, "--notebooks", "--tests")
    assert_refused(done, "--out", str(users), "not empty and was not made by the course")
    assert files(users) == {users / "report.json"} and (users / "report.json").read_text() == "the user's own"
    # Under a regular file no one, root included, can make a folder (chmod does not stop root).
    (tmp_path / "a-file").write_text("")
    done = lane("run", "--out", tmp_path / "a-file" / "out", "--wheels", wheels, "--notebooks", "--tests")
    assert_refused(done, "--out", "cannot write there")


def test_run_replaces_its_files_in_its_own_folder_and_refuses_a_wheel_that_is_no_zip(tmp_path):
    wheels = prepared(tmp_path, b"not a zip")
    out = owned_folders.claim(tmp_path / "out", "--out")  # an earlier run's folder
    (tmp_path / "elsewhere.txt").write_text("not the run's")
    (out / "report.json").symlink_to(tmp_path / "elsewhere.txt")  # a run writes no file through it
    (out / "keep.txt").write_text("kept")
    done = lane("run", "--out", out, "--wheels", wheels, "--notebooks", "--tests")
    assert_refused(done, "lane_probe-0.1-py3-none-any.whl", "not a wheel")
    assert files(out) == {out / owned_folders.MARKER, out / "keep.txt"}  # the run's files went first
    assert (tmp_path / "elsewhere.txt").read_text() == "not the run's"


@pytest.mark.parametrize(
    ("option", "value"),
    [("--timeout", "nan"), ("--timeout", "inf"), ("--workers", "-1"), ("--workers", "1.5")],
)
def test_run_refuses_a_timeout_or_workers_it_cannot_keep(tmp_path, option, value):
    done = lane("run", "--out", tmp_path / "out", "--wheels", prepared(tmp_path), option, value)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"argument {option}: must be" in done.stderr and repr(value) in done.stderr
    assert not (tmp_path / "out").exists()


def test_prepare_refuses_a_folder_of_the_users_before_pip_runs(tmp_path):
    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("the user's own")
    done = lane("prepare", "--wheels", users)
    assert_refused(done, "--wheels", str(users), "not empty and was not made by the course")
    assert "Resolving" not in done.stdout  # refused before pip was asked anything
    assert files(users) == {users / "notes.txt"} and (users / "notes.txt").read_text() == "the user's own"
