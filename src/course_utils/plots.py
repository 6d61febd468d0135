"""Small matplotlib charts for the notebooks; each returns its Figure and leaves showing it to the caller.

The Chinese edition's charts have Chinese text, which matplotlib's own font (DejaVu Sans) cannot draw:
`chart_text` looks for a Chinese font on the student's machine (`chinese_font`) and, where there is
none, says so in one line and gives the chart its English text instead of boxes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib import font_manager
from matplotlib.figure import Figure

from course_utils.i18n import N_, _, translated

# Fonts with simplified Chinese glyphs, the usual first: Linux (apt install fonts-noto-cjk, or the
# WenQuanYi fonts), Windows (Microsoft YaHei, SimHei), macOS (PingFang SC, Hiragino Sans GB, Heiti SC).
CHINESE_FONTS = (
    "Noto Sans CJK SC", "Source Han Sans SC", "Noto Sans SC", "Microsoft YaHei", "PingFang SC",
    "Hiragino Sans GB", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "SimHei", "Heiti SC", "Arial Unicode MS",
)  # fmt: skip
# Characters DejaVu Sans lacks: CJK ideographs and radicals, CJK and full-width punctuation.
_NEEDS_CHINESE_FONT = re.compile("[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")


@functools.cache
def chinese_font() -> str | None:
    """The first of CHINESE_FONTS that matplotlib can draw with on this machine, or None.

    matplotlib lists the machine's fonts once, the first time it runs, and keeps that list: a font
    installed since (`apt install fonts-noto-cjk`) is found by reading the system's font folders again.
    """
    known = {font.name for font in font_manager.fontManager.ttflist}
    if not known.intersection(CHINESE_FONTS):
        listed = {font.fname for font in font_manager.fontManager.ttflist}
        for path in sorted(set(font_manager.findSystemFonts()) - listed):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read: not a font to use
                continue
        known = {font.name for font in font_manager.fontManager.ttflist}
    return next((name for name in CHINESE_FONTS if name in known), None)


@functools.cache
def _without_chinese_font() -> None:
    """Say once per process that the charts fall back to English, and how to get them in Chinese."""
    print(
        _(
            "No Chinese font on this machine (such as {font}), so the charts' text is in English; "
            "install one (Debian/Ubuntu: `apt install fonts-noto-cjk`) and restart the kernel."
        ).format(font=CHINESE_FONTS[0])
    )


def chart_text(text: str, english: str) -> str:
    """`text` for a chart, as the notebook's language has it, or `english` where no font here can draw it.

    Text with Chinese in it makes matplotlib fall back to `chinese_font()` for the glyphs its own font
    lacks (Latin letters and digits keep their look); with no Chinese font, a line says so and the
    chart gets `english`, never boxes. The Chinese edition translates `text` and keeps `english`.
    """
    if not isinstance(text, str):
        raise TypeError(
            _("text is the chart's label in the notebook's language, a str, not {text!r}").format(text=text)
        )
    if not isinstance(english, str):
        raise TypeError(_("english is the label's English, a str, not {english!r}").format(english=english))
    if not _NEEDS_CHINESE_FONT.search(text):
        return text
    font = chinese_font()
    if font is None:
        _without_chinese_font()
        return english
    families = list(plt.rcParams["font.family"])
    if font not in families:
        plt.rcParams["font.family"] = [*families, font]
    return text


def _label(message: str, **fields: object) -> str:
    """A label of this module's charts (marked `N_`), in the notebook's language where it can be drawn."""
    return chart_text(translated(message).format(**fields), english=message.format(**fields))


def _row_counts(sizes: object) -> bool:
    """Whether `sizes` is a non-empty list of row counts: ints (not bools), none negative, of one batch
    (a tensor holds fewer than 2**63 rows, and matplotlib draws no larger int)."""
    return (
        isinstance(sizes, Sequence)
        and not isinstance(sizes, str)
        and len(sizes) > 0
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes)
        and sum(sizes) < 2**63
    )


def replica_sizes_chart(
    tables: Mapping[int, Sequence[Sequence[int]]], title: str = "Rows per replica, batch by batch"
) -> Figure:
    """Stacked bars of how many rows each replica got in each batch, one panel per GPU count.

    `tables` maps a GPU count to its batches, each a list of per-replica sizes in device
    order (what `SimulatedDataParallel.last_replica_sizes` records). A stack shorter than
    the others shows fewer replicas than GPUs.
    """
    shape = "{num_gpus: [[rows of replica 0, rows of replica 1, ...], ...]}"
    if not isinstance(tables, Mapping) or not tables:
        raise ValueError(
            _("tables must be a non-empty dict {shape}, not {tables!r}").format(shape=shape, tables=tables)
        )
    if not isinstance(title, str):
        raise TypeError(_("title is the chart's title, a str, not {title!r}").format(title=title))
    for gpus, batches in tables.items():
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise ValueError(
                _("each key of tables is a GPU count, an int of at least 1, not {gpus!r}; {shape}").format(
                    gpus=gpus, shape=shape
                )
            )
        if (
            isinstance(batches, str)
            or not isinstance(batches, Sequence)
            or not batches
            or not all(_row_counts(sizes) for sizes in batches)
        ):
            raise ValueError(
                _(
                    "tables[{gpus}] needs one non-empty list of row counts (ints, at least 0) per batch, "
                    "got {batches!r}"
                ).format(gpus=gpus, batches=batches)
            )
    fig, axes = plt.subplots(1, len(tables), figsize=(2.6 * len(tables), 2.6), sharey=True, squeeze=False)
    colours = plt.get_cmap("tab10")
    for ax, (gpus, batches) in zip(axes[0], tables.items(), strict=True):
        for b, sizes in enumerate(batches, start=1):
            bottom = 0
            for replica, rows in enumerate(sizes):
                ax.bar(b, rows, bottom=bottom, color=colours(replica % 10), edgecolor="white", width=0.7)
                if rows >= 2:
                    ax.text(b, bottom + rows / 2, str(rows), ha="center", va="center", fontsize=7)
                bottom += rows
        ax.set_title(_label(N_("{gpus} GPU") if gpus == 1 else N_("{gpus} GPUs"), gpus=gpus), fontsize=9)
        ax.set_xticks(range(1, len(batches) + 1))
        ax.set_xlabel(_label(N_("batch")), fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel(_label(N_("rows (colour = replica)")), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
