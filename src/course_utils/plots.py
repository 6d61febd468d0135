"""Small matplotlib charts for the notebooks; each returns its Figure and leaves showing it to the caller."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def replica_sizes_chart(
    tables: Mapping[int, Sequence[Sequence[int]]], title: str = "Rows per replica, batch by batch"
) -> Figure:
    """Stacked bars of how many rows each replica got in each batch, one panel per GPU count.

    `tables` maps a GPU count to its batches, each a list of per-replica sizes in device
    order (what `SimulatedDataParallel.last_replica_sizes` records). A stack shorter than
    the others shows fewer replicas than GPUs.
    """
    if not tables:
        raise ValueError(
            "tables is empty: pass {num_gpus: [[rows of replica 0, rows of replica 1, ...], ...]}"
        )
    for gpus, batches in tables.items():
        if not batches or any(not sizes or min(sizes) < 0 for sizes in batches):
            raise ValueError(
                f"tables[{gpus}] needs one non-empty list of row counts per batch, got {batches!r}"
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
