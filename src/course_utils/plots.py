"""Small matplotlib charts for the notebooks; each returns its Figure and leaves showing it to the caller."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from course_utils.i18n import _


def _row_counts(sizes: object) -> bool:
    """Whether `sizes` is a non-empty list of row counts: ints (not bools), none negative."""
    return (
        isinstance(sizes, Sequence)
        and not isinstance(sizes, str)
        and len(sizes) > 0
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes)
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
        ax.set_title(f"{gpus} GPU{'s' if gpus != 1 else ''}", fontsize=9)
        ax.set_xticks(range(1, len(batches) + 1))
        ax.set_xlabel("batch", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("rows (colour = replica)", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
