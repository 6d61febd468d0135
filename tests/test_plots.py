"""The replica-size chart draws one stacked bar per batch and refuses tables it cannot draw."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from course_utils.plots import replica_sizes_chart


def test_chart_has_a_panel_per_gpu_count_and_a_segment_per_replica():
    fig = replica_sizes_chart({2: [[15, 15], [5, 5]], 8: [[4] * 7 + [2], [2] * 5]})
    try:
        left, right = fig.axes
        assert left.get_title() == "2 GPUs" and right.get_title() == "8 GPUs"
        assert len(left.patches) == 4 and len(right.patches) == 13
        heights = [p.get_height() for p in right.patches]
        assert heights == [4] * 7 + [2] + [2] * 5
        assert max(p.get_y() + p.get_height() for p in right.patches) == 30
    finally:
        plt.close(fig)


@pytest.mark.parametrize("bad", [{}, {2: []}, {2: [[]]}, {2: [[3, -1]]}])
def test_chart_refuses_empty_or_negative_tables(bad):
    with pytest.raises(ValueError, match="tables"):
        replica_sizes_chart(bad)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([[2, 2]], "tables must be a non-empty dict"),
        ({0: [[1]]}, "each key of tables is a GPU count, an int of at least 1, not 0"),
        ({2.0: [[1]]}, "each key of tables is a GPU count"),
        ({True: [[1]]}, "each key of tables is a GPU count"),
        ({2: "15,15"}, r"tables\[2\] needs one non-empty list of row counts"),
        ({2: [[1.5, 1]]}, r"tables\[2\] needs .*\(ints, at least 0\)"),
        ({2: [["3", 1]]}, r"tables\[2\] needs"),
        ({2: [15, 15]}, r"tables\[2\] needs"),
    ],
)
def test_chart_refuses_tables_of_the_wrong_shape_and_says_which(bad, message):
    with pytest.raises(ValueError, match=message):
        replica_sizes_chart(bad)
    assert plt.get_fignums() == [], "no half-drawn figure is left open"


def test_chart_title_must_be_text():
    with pytest.raises(TypeError, match="title is the chart's title, a str"):
        replica_sizes_chart({2: [[1, 1]]}, title=3)


def test_a_bad_table_is_explained_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(ValueError, match=r"^tables 的每个键都是 GPU 数，一个至少为 1 的 int，而不是 0；"):
        replica_sizes_chart({0: [[1, 1]]})
