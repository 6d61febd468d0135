"""The replica-size chart draws one stacked bar per batch and refuses tables it cannot draw; a chart of the
Chinese edition is drawn in a Chinese font, or in English where the machine has none (never boxes)."""

from __future__ import annotations

import io
import warnings

import matplotlib.pyplot as plt
import pytest
from matplotlib import font_manager

from course_utils import plots
from course_utils.plots import chart_text, chinese_font, replica_sizes_chart


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


def drawn(title: str) -> tuple[plt.Figure, list[str]]:
    """A chart drawn to PNG with `title`, and the warnings matplotlib gave while drawing it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = replica_sizes_chart({2: [[15, 15], [5, 5]]}, title=title)
        fig.savefig(io.BytesIO(), format="png")
    return fig, [str(w.message) for w in caught]


def test_a_chinese_chart_is_drawn_with_a_chinese_font_and_no_missing_glyph(monkeypatch):
    chinese_font.cache_clear()
    if chinese_font() is None:
        pytest.skip(
            "no Chinese font on this machine (`fc-list :lang=zh` lists none): install fonts-noto-cjk "
            "(Debian/Ubuntu) to test the Chinese edition's charts"
        )
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    monkeypatch.setitem(plt.rcParams, "font.family", ["sans-serif"])  # as a fresh kernel has it
    fig, caught = drawn(chart_text("每个副本的行数（模拟）", english="Rows per replica (SIMULATION)"))
    try:
        left = fig.axes[0]
        assert (fig.get_suptitle(), left.get_title(), left.get_xlabel(), left.get_ylabel()) == (
            "每个副本的行数（模拟）",
            "2 个 GPU",
            "批量",
            "行数（颜色 = 副本）",
        )
        assert not [w for w in caught if "missing from font" in w], caught
        used = {
            str(p) for p in font_manager.fontManager._find_fonts_by_props(left.title.get_fontproperties())
        }
        names = {font.name for font in font_manager.fontManager.ttflist if font.fname in used}
        assert {"DejaVu Sans", chinese_font()} <= names, (
            "Latin in matplotlib's own font, Chinese in the other"
        )
    finally:
        plt.close(fig)


def test_without_a_chinese_font_the_chart_says_so_once_and_uses_the_english(monkeypatch, capsys):
    monkeypatch.setattr(plots, "chinese_font", lambda: None)
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    plots._without_chinese_font.cache_clear()
    assert chart_text("批量", english="batch") == "batch"
    assert chart_text("行数", english="rows") == "rows"
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("本机没有中文字体（如 Noto Sans CJK SC），所以图中的文字改用英文。")
    fig, caught = drawn(chart_text("每个副本的行数", english="Rows per replica"))
    try:
        assert (fig.get_suptitle(), fig.axes[0].get_xlabel()) == ("Rows per replica", "batch")
        assert not [w for w in caught if "missing from font" in w], caught
    finally:
        plt.close(fig)


def test_english_text_is_kept_as_it_is_and_leaves_the_fonts_alone(monkeypatch):
    monkeypatch.setattr(plots, "chinese_font", lambda: pytest.fail("English text needs no Chinese font"))
    monkeypatch.setitem(plt.rcParams, "font.family", ["sans-serif"])
    assert chart_text("Rows per replica", english="Rows per replica") == "Rows per replica"
    assert plt.rcParams["font.family"] == ["sans-serif"]


@pytest.mark.parametrize(("text", "english", "named"), [(None, "x", "text is"), ("行", 5, "english is")])
def test_chart_text_refuses_what_is_not_text_and_names_it(text, english, named):
    with pytest.raises(TypeError, match=named):
        chart_text(text, english=english)
