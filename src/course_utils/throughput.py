"""Scaffolding for notebook 09: the model it trains, medians and IQRs, a results table, a chart,
and a dataset whose samples cost real work to load.

The DDP workers that notebook 09 teaches from live in `notebooks/workers/` (`ddp_timing.py`,
`bucket_events.py`), shown whole in the notebook; this module holds what they and the notebook
share and what only summarises their results.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from matplotlib.figure import Figure
from PIL import Image, ImageFilter
from torch import nn
from torch.utils.data import Dataset

from course_utils._checks import whole_number
from course_utils.i18n import _, pad

__all__ = [
    "EncodedImages",
    "format_table",
    "make_mlp",
    "median_and_iqr",
    "throughput_chart",
    "throughput_row",
]


_RESULT_KEYS = frozenset({"rank", "world_size", "threads", "step_times", "samples_timed"})
_ROW_KEYS = frozenset(
    {"config", "processes", "threads", "global_batch", "median_step_s", "iqr_step_s", "samples_per_s"}
)
MAX_PARAMETERS = 10**9  # 4 GB of float32 weights: far beyond a benchmark model, a slip in the widths
MAX_IMAGES = 10_000  # the lesson needs a few dozen; more is a slip that would take minutes to encode
MAX_IMAGE_SIZE = 1024


def _check_widths(widths: object) -> list[int]:
    """`widths` as a list of two or more positive ints, of at most MAX_PARAMETERS weights; else ValueError."""
    if isinstance(widths, str) or not isinstance(widths, Sequence):
        raise ValueError(
            _("widths must be a list of two or more positive ints, such as (256, 10), not {widths!r}").format(
                widths=widths
            )
        )
    widths = list(widths)
    if len(widths) < 2 or any(
        isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_PARAMETERS for w in widths
    ):
        raise ValueError(
            _("widths must be two or more positive ints (input, hidden..., output), not {widths!r}").format(
                widths=widths
            )
        )
    parameters = sum((n_in + 1) * n_out for n_in, n_out in itertools.pairwise(widths))
    if parameters > MAX_PARAMETERS:
        raise ValueError(
            _(
                "widths {widths!r} make a model of {parameters:.3g} parameters "
                "({gib:.0f} GiB of float32 weights); the benchmark needs a few million "
                "at most, e.g. (256, 256, 256, 10)"
            ).format(widths=widths, parameters=parameters, gib=parameters * 4 / 2**30)
        )
    return widths


def make_mlp(widths: Sequence[int]) -> nn.Sequential:
    """A multilayer perceptron with ReLUs between `nn.Linear(widths[i], widths[i + 1])` layers.

    The model every benchmark in notebook 09 trains: its cost is set by the widths alone, so the
    same widths give the same work on every machine.
    """
    widths = _check_widths(widths)
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        if i:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(n_in, n_out))
    return nn.Sequential(*layers)


def median_and_iqr(times: Sequence[float]) -> tuple[float, float]:
    """The median and the interquartile range (75th minus 25th percentile) of `times`.

    Linear interpolation between order statistics, as `torch.utils.benchmark.Measurement` and
    NumPy compute them: the median and the IQR say what a typical run costs and how much runs
    spread, and one slow outlier moves neither much (unlike the mean).
    """
    if isinstance(times, str) or not isinstance(times, Sequence):
        raise ValueError(
            _("times must be a list of step times in seconds, not {times!r}").format(times=times)
        )
    if not all(isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t < math.inf for t in times):
        raise ValueError(
            _("times must be finite numbers of seconds, at least 0, got {times!r}").format(times=list(times))
        )
    values = [float(t) for t in times]
    if len(values) < 2:
        raise ValueError(
            _("need at least 2 times for a median and an IQR, got {count}").format(count=len(values))
        )
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q2, q3 - q1


def throughput_row(label: str, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summarise one launch of `ddp_throughput_worker` (notebooks/workers/ddp_timing.py), one dict per rank.

    The job advances one global batch per step, and a step is as slow as its slowest rank (the
    ranks wait for each other in the all-reduce), so the job's step time is the largest of the
    ranks' median step times, and its throughput is the global batch divided by that.
    """
    if not isinstance(label, str):
        raise ValueError(
            _(
                "label names the configuration in the table, a str such as '2 processes', not {label!r}"
            ).format(label=label)
        )
    if isinstance(results, str) or not isinstance(results, Sequence) or not results:
        raise ValueError(
            _(
                "results must be the non-empty list that launch(ddp_throughput_worker, ...) returned, "
                "not {results!r}"
            ).format(results=results)
        )
    for result in results:
        if not isinstance(result, Mapping) or not _RESULT_KEYS <= result.keys():
            raise ValueError(
                _(
                    "each result is the dict one ddp_throughput_worker rank returned "
                    "(with {keys}); pass what launch(ddp_throughput_worker, ...) returned"
                ).format(keys=sorted(_RESULT_KEYS))
            )
    world = results[0]["world_size"]
    if len(results) != world or sorted(r["rank"] for r in results) != list(range(world)):
        raise ValueError(
            _("expected one result per rank 0..{last}, got {count}").format(
                last=world - 1, count=len(results)
            )
        )
    steps = {len(r["step_times"]) for r in results}
    if len(steps) != 1:
        raise ValueError(
            _("the ranks timed different numbers of steps ({steps}); they must be equal").format(
                steps=sorted(steps)
            )
        )
    per_rank = [median_and_iqr(r["step_times"]) for r in results]
    slowest = max(range(world), key=lambda i: per_rank[i][0])
    median, iqr = per_rank[slowest]
    global_batch = sum(r["samples_timed"] for r in results) // steps.pop()
    return {
        "config": label,
        "processes": world,
        "threads": results[0]["threads"],
        "global_batch": global_batch,
        "median_step_s": median,
        "iqr_step_s": iqr,
        "samples_per_s": global_batch / median,
    }


def _check_rows(rows: object) -> None:
    """ValueError unless `rows` is a non-empty list of `throughput_row` results."""
    if isinstance(rows, str) or not isinstance(rows, Sequence) or not rows:
        raise ValueError(
            _("rows must be the non-empty list of rows that throughput_row returned, not {rows!r}").format(
                rows=rows
            )
        )
    if not all(isinstance(row, Mapping) and _ROW_KEYS <= row.keys() for row in rows):
        raise ValueError(
            _("each row is a dict that throughput_row returned (with {keys})").format(keys=sorted(_ROW_KEYS))
        )
    for row in rows:
        speed = row["samples_per_s"]
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not (0 < speed < math.inf):
            raise ValueError(
                _(
                    "samples_per_s must be a positive number of samples per second, not {speed!r} "
                    "(row {config!r}); pass the rows that throughput_row returned"
                ).format(speed=speed, config=row["config"])
            )


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A fixed-width text table of `throughput_row` results, with the speed-up over the first row."""
    _check_rows(rows)
    base = rows[0]["samples_per_s"]
    columns = [
        (_("configuration"), 24, "<"),
        (_("procs"), 5, ">"),
        (_("threads"), 7, ">"),
        (_("median step"), 12, ">"),
        ("IQR", 9, ">"),
        (_("samples/s"), 10, ">"),
        (_("speed-up"), 8, ">"),
    ]
    lines = [" ".join(pad(label, width, align) for label, width, align in columns)]
    for row in rows:
        lines.append(
            f"{pad(row['config'], 24)} {row['processes']:>5} {row['threads']:>7} "
            f"{row['median_step_s'] * 1e3:>9.2f} ms {row['iqr_step_s'] * 1e3:>6.2f} ms "
            f"{row['samples_per_s']:>10.0f} {row['samples_per_s'] / base:>7.2f}x"
        )
    return "\n".join(lines)


def throughput_chart(rows: Sequence[Mapping[str, Any]], title: str = "Training throughput") -> Figure:
    """A bar per configuration: samples per second, with the spread of the step times as error bars.

    The error bar spans the throughput at the 25th and 75th percentile step time (approximated
    from the median and IQR), so overlapping bars are a sign that the difference may be noise.
    """
    import matplotlib.pyplot as plt  # here, so that spawned DDP workers need not import it

    _check_rows(rows)
    if not isinstance(title, str):
        raise ValueError(_("title is the chart's title, a str, not {title!r}").format(title=title))
    fig, ax = plt.subplots(figsize=(5.2, 2.6))
    labels = [row["config"] for row in rows]
    values = [row["samples_per_s"] for row in rows]
    low, high = [], []
    for row in rows:
        fast = row["global_batch"] / max(row["median_step_s"] - row["iqr_step_s"] / 2, 1e-12)
        slow = row["global_batch"] / (row["median_step_s"] + row["iqr_step_s"] / 2)
        low.append(row["samples_per_s"] - slow)
        high.append(fast - row["samples_per_s"])
    ax.barh(labels, values, xerr=[low, high], color="tab:blue", capsize=3)
    ax.invert_yaxis()
    ax.set_xlabel("samples per second (median step; bar: IQR)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


class EncodedImages(Dataset):
    """Random RGB images kept PNG-encoded; each sample is decoded and blurred when it is read.

    A dataset with a real per-sample cost (decoding, then an augmentation), as image datasets
    have, so that DataLoader workers have work to take off the training loop. A sample is
    `(image, label, pid)`: a float image `(3, size, size)` in [0, 1], a label in 0-3, and the
    id of the process that decoded it (the loop's own process, or a worker's).
    """

    def __init__(self, num_images: int, size: int = 64, seed: int = 0) -> None:
        for name, value, high in (("num_images", num_images, MAX_IMAGES), ("size", size, MAX_IMAGE_SIZE)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(
                    _("{name} must be an int from 1 to {high}, such as 32, not {value!r}").format(
                        name=name, high=high, value=value
                    )
                )
        generator = torch.Generator().manual_seed(whole_number("seed", seed, 0, 2**64 - 1))
        self.encoded: list[bytes] = []
        for _image in range(num_images):
            pixels = torch.randint(0, 256, (size, size, 3), dtype=torch.uint8, generator=generator)
            buffer = io.BytesIO()
            Image.fromarray(pixels.numpy()).save(buffer, format="PNG")
            self.encoded.append(buffer.getvalue())
        self.labels = torch.randint(0, 4, (num_images,), generator=generator)

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        image = Image.open(io.BytesIO(self.encoded[index])).convert("RGB")  # decode
        image = image.filter(ImageFilter.GaussianBlur(radius=2))  # augment
        pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
        pixels = pixels.view(image.height, image.width, 3).permute(2, 0, 1)
        return pixels.float() / 255, self.labels[index], os.getpid()
