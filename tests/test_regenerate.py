"""The regenerate script: marker comments become nbval tags; a run writes outputs and leaves no kernel."""

from __future__ import annotations

import nbformat
from regenerate import marker_tags, regenerate, sync_marker_tags


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
    regenerate(path)
    (cell,) = nbformat.read(path, as_version=4).cells
    assert cell.execution_count == 1
    assert cell.outputs[0]["text"] == "42\n"
    assert cell.metadata["tags"] == ["nbval-ignore-output"]
