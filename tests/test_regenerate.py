"""The regenerate script: marker comments become nbval tags; a run writes outputs and leaves no kernel."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import regenerate as regenerate_module
from notebook_args import notebooks_from_args
from regenerate import WIDGET_VIEW, change_summary, marker_tags, merge_streams, regenerate, sync_marker_tags


def test_marker_tags_read_leading_comments_only():
    assert marker_tags("# NBVAL_IGNORE_OUTPUT: lists GPUs\nprint(1)") == {"nbval-ignore-output"}
    assert marker_tags("# NBVAL_SKIP: needs 2 GPUs\n# NBVAL_IGNORE_OUTPUT: timing\nx") == {
        "nbval-skip",
        "nbval-ignore-output",
    }
    assert marker_tags("x = 1\n# NBVAL_IGNORE_OUTPUT: too late to count") == set()
    assert marker_tags("print('NBVAL_IGNORE_OUTPUT')") == set()


def test_sync_adds_missing_tags_and_drops_stale_ones_keeping_others():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT: depends on GPUs\nprint(1)"),
            nbformat.v4.new_code_cell("print(2)", metadata={"tags": ["nbval-ignore-output", "keep"]}),
            nbformat.v4.new_code_cell("print(3)", metadata={"tags": ["nbval-skip"]}),
            nbformat.v4.new_markdown_cell("# NBVAL_SKIP: markdown is never run"),
        ]
    )
    sync_marker_tags(nb)
    assert nb.cells[0].metadata["tags"] == ["nbval-ignore-output"]
    assert nb.cells[1].metadata["tags"] == ["keep"]
    assert "tags" not in nb.cells[2].metadata
    assert "tags" not in nb.cells[3].metadata


def test_regenerate_writes_outputs_and_shuts_its_kernel_down(tmp_path):
    """The autouse fixture fails this test if the kernel outlives regenerate()."""
    path = tmp_path / "tiny.ipynb"
    cells = [nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT: a pid\nimport os\nprint(6 * 7)")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    assert regenerate(path)[1].startswith("changed: ")
    (cell,) = nbformat.read(path, as_version=4).cells
    assert cell.execution_count == 1
    assert cell.outputs[0]["text"] == "42\n"
    assert cell.metadata["tags"] == ["nbval-ignore-output"]


def test_printing_in_chunks_is_stored_as_one_output_and_a_second_run_changes_no_byte(tmp_path):
    path = tmp_path / "chunks.ipynb"
    chunks = "import sys\nfor i in range(5):\n    print(i, flush=True)\n_ = sys.stdout.write('end\\n')\n"
    cells = [nbformat.v4.new_code_cell(chunks), nbformat.v4.new_code_cell("print('a', flush=True); 1 + 1")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    _, change = regenerate(path)
    assert change.startswith("changed: ")
    first = path.read_bytes()
    printed, answered = nbformat.reads(first.decode(), as_version=4).cells
    assert [(o.output_type, o.get("text")) for o in printed.outputs] == [("stream", "0\n1\n2\n3\n4\nend\n")]
    assert [o.output_type for o in answered.outputs] == ["stream", "execute_result"]
    assert regenerate(path)[1] == "unchanged"
    assert path.read_bytes() == first


def test_a_notebook_with_widgets_is_byte_stable_too(tmp_path):
    path = tmp_path / "widgets.ipynb"
    code = "import ipywidgets\nipywidgets.IntSlider(3)\n"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for _ in "ab"]), path)
    regenerate(path)
    first = path.read_bytes()
    ids = [
        c.outputs[0].data[WIDGET_VIEW]["model_id"] for c in nbformat.reads(first.decode(), as_version=4).cells
    ]
    assert len(set(ids)) == 2  # each view its own id, stable from run to run
    assert regenerate(path)[1] == "unchanged"


def test_merge_streams_joins_only_consecutive_outputs_of_one_stream():
    out = nbformat.v4.new_output
    cell = nbformat.v4.new_code_cell(
        "x",
        outputs=[
            out("stream", name="stdout", text="a"),
            out("stream", name="stdout", text="b\n"),
            out("stream", name="stderr", text="c\n"),
            out("stream", name="stdout", text="d\n"),
            out("display_data", data={"text/plain": "e"}),
            out("stream", name="stdout", text="f\n"),
        ],
    )
    nb = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("m")])
    merge_streams(nb)
    assert [(o.output_type, o.get("name"), o.get("text")) for o in cell.outputs] == [
        ("stream", "stdout", "ab\n"),
        ("stream", "stderr", "c\n"),
        ("stream", "stdout", "d\n"),
        ("display_data", None, None),
        ("stream", "stdout", "f\n"),
    ]


def test_change_summary_counts_lines_like_git_diff_stat():
    assert change_summary("a\nb\n", "a\nb\n") == "unchanged"
    assert change_summary("a\nb\nc\n", "a\nB\nc\nd\n") == "changed: 2 line(s) added, 1 removed (see git diff)"


def start_regenerate(path: Path, *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    """regenerate.py on `path` in a new session, SIGINT at Python's default (or ignored), as from a shell.

    A wrapper sets SIGINT, compiles the script, says "starting" and runs it as __main__ (no
    preexec_fn: a pytest-xdist worker runs threads). Returned after "starting".
    """
    script = Path(regenerate_module.__file__)
    disposition = "SIG_IGN" if ignore_sigint else "default_int_handler"  # what Python sets at its start
    wrapper = (
        f"import signal, sys; signal.signal(signal.SIGINT, signal.{disposition}); "
        f"sys.argv = [{str(script)!r}, {str(path)!r}]; sys.path.insert(0, {str(script.parent)!r}); "
        f"code = compile(open({str(script)!r}).read(), {str(script)!r}, 'exec'); "
        f"print('starting', flush=True); exec(code, {{'__name__': '__main__', '__file__': {str(script)!r}}})"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", wrapper],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout.readline() == "starting\n"
    return proc


def interrupt_during_a_cell(tmp_path, ignore_sigint):
    """Run regenerate.py on a notebook whose cell waits for a file; SIGINT its process group during the cell.

    Returns the exit status, stdout, stderr, and the notebook's bytes before and after.
    """
    started, go = tmp_path / "started", tmp_path / "go"
    path = tmp_path / "slow.ipynb"
    wait = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\n"
    wait += f"while not pathlib.Path({str(go)!r}).exists():\n    time.sleep(0.05)"
    cells = [nbformat.v4.new_code_cell(wait), nbformat.v4.new_code_cell("print('second cell')")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    before = path.read_bytes()

    proc = start_regenerate(path, ignore_sigint=ignore_sigint)
    try:
        deadline = time.monotonic() + 120  # a kernel start on a loaded machine; not a speed check
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        go.touch()  # a cell that was not interrupted finishes now
        out, err = proc.communicate(timeout=120)
    finally:
        go.touch()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err, before, path.read_bytes()


def test_ctrl_c_interrupts_the_running_cell_and_writes_nothing(tmp_path):
    """Ctrl-C (SIGINT to the process group) during a cell: exit 130, the file untouched, no kernel left."""
    status, out, err, before, after = interrupt_during_a_cell(tmp_path, ignore_sigint=False)
    assert status == 128 + signal.SIGINT
    assert out == "Interrupted (SIGINT): slow.ipynb was not written; the notebooks before it were.\n"
    assert "Traceback" not in err
    assert after == before


def test_started_ignoring_sigint_as_a_background_job_it_runs_on(tmp_path):
    status, out, err, _, after = interrupt_during_a_cell(tmp_path, ignore_sigint=True)
    assert (status, "Traceback" in err) == (0, False), out
    assert out.startswith("regenerated ") and "second cell" in after.decode()


def test_ctrl_c_in_the_first_seconds_says_one_line_and_leaves_no_kernel(tmp_path):
    """Interrupted while the script imports, while the kernel starts, or at its first cell: one line, 130.

    From the script's first line on; during the interpreter's own start (about 0.1 s before it)
    Python prints its traceback whatever the script does.
    """
    path = tmp_path / "waits.ipynb"
    cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    before = path.read_bytes()
    for delay in (0.1, 0.25, 0.5, 1.0, 2.0, 3.5):  # from 0.1 s: the wrapper is in the script by then
        proc = start_regenerate(path)
        try:
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 128 + signal.SIGINT, (delay, out, err)
        assert out in (
            "Interrupted (SIGINT) before any notebook ran; nothing was written.\n",
            "Interrupted (SIGINT): waits.ipynb was not written; the notebooks before it were.\n",
        ), (delay, out, err)
        assert "Traceback" not in err and "Error" not in err, (delay, err)  # the kernel may warn
        assert path.read_bytes() == before


def test_a_file_that_is_not_a_notebook_is_named_and_left_alone(tmp_path, capsys):
    path = tmp_path / "broken.ipynb"
    path.write_text("{ not json")
    assert regenerate_module.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert out == "FAILED broken.ipynb: not a valid notebook file (NotJSONError); nothing was written.\n"
    assert path.read_text() == "{ not json"


def test_notebook_arguments_are_a_list_of_names_not_one_string():
    with pytest.raises(TypeError, match=r"args is a list of notebook paths or names, such as \['05_"):
        notebooks_from_args("05_data_parallel.ipynb")
