"""Scaffolding for notebook 09: DDP workers that time their own steps, a results table, a chart.

The workers are plain functions to pass to `course_utils.launcher.launch` (or to run under
`torchrun`). They live in this module, not in the notebook, because a worker defined in a notebook
can only be started with `fork`, and `launch` must `spawn` once the notebook has touched CUDA (a
forked child cannot use its parent's CUDA context): on a GPU machine `torch.utils.benchmark`
synchronises the GPU, and so initialises CUDA, long before the DDP cells run. Notebook 09 prints
their source, so the DDP calls stay visible.

How a DDP worker measures, and why:

- every rank runs the **same number of steps** (a rank that stopped early would leave the others
  waiting in the gradient all-reduce), so the timing loop has a fixed length: no autorange;
- the first `warmup` steps are run but not timed (allocations, lazy initialisation, DDP's
  rebuilding of its gradient buckets after the first step);
- `dist.barrier()` before the timed steps, so that all ranks start together;
- on a GPU, `torch.cuda.synchronize()` before each clock reading, so that the time is that of the
  work and not of its launch;
- each rank returns its per-step times; the parent turns them into medians and throughput.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

# DDP's constructor imports torch._dynamo, which takes about a second. Imported here, once, in the
# parent, every worker that `launch` forks inherits it instead of paying that second again.
import torch._dynamo
import torch.distributed as dist
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

__all__ = [
    "bucket_events_worker",
    "ddp_throughput_worker",
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
MAX_BATCH_BYTES = 2**30  # the prepared batches of one rank; a benchmark in a 1.5 GiB budget needs far less
MAX_PARAMETERS = 10**9  # 4 GB of float32 weights: far beyond a benchmark model, a slip in the widths


def _check_widths(widths: object) -> list[int]:
    """`widths` as a list of two or more positive ints, of at most MAX_PARAMETERS weights; else ValueError."""
    if isinstance(widths, str) or not isinstance(widths, Sequence):
        raise ValueError(
            f"widths must be a list of two or more positive ints, such as (256, 10), not {widths!r}"
        )
    widths = list(widths)
    if len(widths) < 2 or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths):
        raise ValueError(
            f"widths must be two or more positive ints (input, hidden..., output), not {widths!r}"
        )
    parameters = sum((n_in + 1) * n_out for n_in, n_out in itertools.pairwise(widths))
    if parameters > MAX_PARAMETERS:
        raise ValueError(
            f"widths {widths!r} make a model of {parameters:.3g} parameters "
            f"({parameters * 4 / 2**30:.0f} GiB of float32 weights); the benchmark needs a few million "
            "at most, e.g. (256, 256, 256, 10)"
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


def _check_counts(global_batch: int, steps: int, warmup: int, threads: int) -> None:
    """Raise ValueError with what to pass when a benchmark count is not a sensible int."""
    for name, value, least in (("global_batch", global_batch, 1), ("steps", steps, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, not {value!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int (torch threads per process), not {threads!r}")


def ddp_throughput_worker(
    global_batch: int,
    steps: int,
    warmup: int,
    widths: Sequence[int] = (256, 256, 256, 10),
    threads: int = 1,
    device_type: str = "cpu",
    seed: int = 0,
) -> dict[str, Any]:
    """One DDP rank: train `warmup + steps` SGD steps on its share of each global batch, time `steps`.

    Every rank builds the same model and the same global batches from `seed`, and trains on its
    `1 / world_size` share of each batch (what `DistributedSampler` would give it), so any number
    of processes processes the same samples and, since DDP averages the gradients, reaches the same
    weights. `device_type="cpu"` uses gloo with `threads` torch threads per process; `"cuda"` uses
    nccl on GPU `LOCAL_RANK`. Keep `threads=1` in a process forked from a kernel that has used
    several threads: GNU OpenMP does not survive fork, and a child that starts a thread pool of its
    own can hang. Returns the per-step times of the timed steps and the facts the
    notebook checks: steps run, samples seen, threads, parameters held, final weights.
    """
    _check_counts(global_batch, steps, warmup, threads)
    widths = _check_widths(widths)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int of at least 0 (the same on every rank), not {seed!r}")
    batch_bytes = (warmup + steps) * global_batch * widths[0] * 4
    if batch_bytes > MAX_BATCH_BYTES:
        raise ValueError(
            f"the {warmup + steps} global batches of {global_batch} x {widths[0]} would take "
            f"{batch_bytes / 2**30:.1f} GiB to prepare (they are made before timing starts); "
            "use fewer steps, a smaller global_batch or a narrower input"
        )
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f'device_type must be "cpu" (gloo) or "cuda" (nccl), not {device_type!r}')
    if not {"LOCAL_RANK", "WORLD_SIZE"} <= os.environ.keys():
        raise RuntimeError(
            "ddp_throughput_worker is one rank of a job: start it with launch(ddp_throughput_worker, "
            "nprocs, args=...) or torchrun, which set LOCAL_RANK and WORLD_SIZE"
        )
    local_rank, world = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    if global_batch % world:  # before joining the group: no rank is left waiting for this one
        raise ValueError(f"global_batch={global_batch} does not split evenly over {world} processes")
    if device_type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(threads)
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def _train_and_time() -> dict[str, Any]:
        # A function of its own, so that DDP and everything it holds is released when it returns,
        # before the process group is destroyed (the other order can hang in gloo's teardown).
        torch.manual_seed(seed)
        model = make_mlp(widths).to(device)
        ddp = DDP(model, device_ids=[local_rank] if device_type == "cuda" else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(seed + 1)
        batches = []
        for _ in range(warmup + steps):  # the same global batches on every rank; this rank's share
            x = torch.randn(global_batch, widths[0], generator=generator)
            y = torch.randint(0, widths[-1], (global_batch,), generator=generator)
            batches.append((x.chunk(world)[rank].to(device), y.chunk(world)[rank].to(device)))

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(ddp(x), y).backward()  # DDP all-reduces the gradients in here
            optimizer.step()

        steps_run, samples_timed, step_times = 0, 0, []
        for x, y in batches[:warmup]:  # warm-up: run, not timed
            train_step(x, y)
            steps_run += 1
        sync()
        dist.barrier()  # all ranks start the clock together
        for x, y in batches[warmup:]:
            start = time.perf_counter()
            train_step(x, y)
            sync()  # the step is over when the device has finished it, not when Python has
            step_times.append(time.perf_counter() - start)
            steps_run += 1
            samples_timed += len(x)
        result = {
            "rank": rank,
            "world_size": world,
            "threads": torch.get_num_threads(),
            "steps_run": steps_run,
            "step_times": step_times,
            "samples_timed": samples_timed,
            "params": sum(p.numel() for p in model.parameters()),
            "weights": {name: p.detach().cpu().clone() for name, p in model.named_parameters()},
        }
        dist.barrier()  # every rank past its last all-reduce before any rank tears down
        return result

    try:
        return _train_and_time()
    finally:
        dist.destroy_process_group()


def bucket_events_worker(steps: int = 2, bucket_cap_mb: float = 0.01) -> list[list[str]]:
    """One DDP rank on gloo: record, step by step, when backward reaches each layer and when a bucket is sent.

    A communication hook (`ddp.register_comm_hook`) logs each gradient bucket as DDP hands it to
    the all-reduce; a hook on each `nn.Linear`'s output logs when backward reaches that layer.
    The order of the log shows whether communication starts while backward is still running (it does, from the
    second step, once DDP has rebuilt its buckets in the order the gradients became ready).
    """
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, not {steps!r}")
    if (
        isinstance(bucket_cap_mb, bool)
        or not isinstance(bucket_cap_mb, int | float)
        or not 0 < bucket_cap_mb < 2**20
    ):
        raise ValueError(
            f"bucket_cap_mb must be a positive number of megabytes, such as 0.01 (tiny buckets) or 25 "
            f"(DDP's default), not {bucket_cap_mb!r}"
        )
    dist.init_process_group("gloo")

    def _record() -> list[list[str]]:
        # A function of its own, so that DDP and everything it holds is released when it returns,
        # before the process group is destroyed (the other order can hang in gloo's teardown).
        torch.manual_seed(0)
        model = make_mlp((64, 64, 64, 4))
        names = {p: name for name, p in model.named_parameters()}
        ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
        events: list[str] = []

        # No annotations: DDP checks them, and this module's postponed (string) annotations fail that check.
        def logging_allreduce(state, bucket):  # noqa: ANN001, ANN202
            layers = sorted({names[p].split(".")[0] for p in bucket.parameters()}, reverse=True)
            events.append(f"  all-reduce of bucket {bucket.index()} starts (layers {', '.join(layers)})")
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(dist.group.WORLD, logging_allreduce)

        def log_backward(index: int) -> Callable[[nn.Module, Any, torch.Tensor], None]:
            def forward_hook(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
                # runs in backward when the gradient with respect to this layer's output is known
                output.register_hook(lambda grad: events.append(f"backward reaches layer {index}"))

            return forward_hook

        for index, layer in enumerate(model):
            if isinstance(layer, nn.Linear):
                layer.register_forward_hook(log_backward(index))
        x, y = torch.randn(8, 64), torch.randint(0, 4, (8,))
        log = []
        for _ in range(steps):
            events.clear()
            F.cross_entropy(ddp(x), y).backward()
            log.append(list(events))
        dist.barrier()  # every rank past its last all-reduce before any rank tears down
        return log

    try:
        return _record()
    finally:
        dist.destroy_process_group()


def median_and_iqr(times: Sequence[float]) -> tuple[float, float]:
    """The median and the interquartile range (75th minus 25th percentile) of `times`.

    Linear interpolation between order statistics, as `torch.utils.benchmark.Measurement` and
    NumPy compute them: the median and the IQR say what a typical run costs and how much runs
    spread, and one slow outlier moves neither much (unlike the mean).
    """
    if isinstance(times, str) or not isinstance(times, Sequence):
        raise ValueError(f"times must be a list of step times in seconds, not {times!r}")
    if not all(isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t < math.inf for t in times):
        raise ValueError(f"times must be finite numbers of seconds, at least 0, got {list(times)!r}")
    values = [float(t) for t in times]
    if len(values) < 2:
        raise ValueError(f"need at least 2 times for a median and an IQR, got {len(values)}")
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q2, q3 - q1


def throughput_row(label: str, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summarise the results of one launch of `ddp_throughput_worker` (one dict per rank).

    The job advances one global batch per step, and a step is as slow as its slowest rank (the
    ranks wait for each other in the all-reduce), so the job's step time is the largest of the
    ranks' median step times, and its throughput is the global batch divided by that.
    """
    if not isinstance(label, str):
        raise ValueError(
            f"label names the configuration in the table, a str such as '2 processes', not {label!r}"
        )
    if isinstance(results, str) or not isinstance(results, Sequence) or not results:
        raise ValueError(
            "results must be the non-empty list that launch(ddp_throughput_worker, ...) returned, "
            f"not {results!r}"
        )
    for result in results:
        if not isinstance(result, Mapping) or not _RESULT_KEYS <= result.keys():
            raise ValueError(
                "each result is the dict one ddp_throughput_worker rank returned "
                f"(with {sorted(_RESULT_KEYS)}); pass what launch(ddp_throughput_worker, ...) returned"
            )
    world = results[0]["world_size"]
    if len(results) != world or sorted(r["rank"] for r in results) != list(range(world)):
        raise ValueError(f"expected one result per rank 0..{world - 1}, got {len(results)}")
    steps = {len(r["step_times"]) for r in results}
    if len(steps) != 1:
        raise ValueError(f"the ranks timed different numbers of steps ({sorted(steps)}); they must be equal")
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
            f"rows must be the non-empty list of rows that throughput_row returned, not {rows!r}"
        )
    if not all(isinstance(row, Mapping) and _ROW_KEYS <= row.keys() for row in rows):
        raise ValueError(f"each row is a dict that throughput_row returned (with {sorted(_ROW_KEYS)})")


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A fixed-width text table of `throughput_row` results, with the speed-up over the first row."""
    _check_rows(rows)
    base = rows[0]["samples_per_s"]
    lines = [
        f"{'configuration':<24} {'procs':>5} {'threads':>7} {'median step':>12} {'IQR':>9} "
        f"{'samples/s':>10} {'speed-up':>8}"
    ]
    for row in rows:
        lines.append(
            f"{row['config']:<24} {row['processes']:>5} {row['threads']:>7} "
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
        raise ValueError(f"title is the chart's title, a str, not {title!r}")
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
