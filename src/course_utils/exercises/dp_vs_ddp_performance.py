"""Self-checks for notebook 09 (measuring DP and DDP): throughput arithmetic and correct timing code.

The numbers here are fixed example numbers, not measurements, so the checks give the same
verdict on every machine. Each check says what is wrong with an answer, never the answer.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable

import torch

from course_utils.exercises import (
    CheckResult,
    call_reader,
    failed,
    not_a_function,
    passed,
    real_value,
    unanswered,
)
from course_utils.i18n import N_, _, translated

# Exercise 1: a DDP job of 4 processes, 32 samples per process per step. Each rank timed 8
# steps after 2 warm-up steps; the lists hold all 10 step times in seconds (example numbers).
PER_RANK_BATCH = 32
WARMUP_STEPS = 2
EXAMPLE_STEP_TIMES = {
    0: [0.910, 0.130, 0.050, 0.052, 0.049, 0.051, 0.050, 0.120, 0.050, 0.051],
    1: [0.905, 0.128, 0.050, 0.051, 0.050, 0.052, 0.049, 0.118, 0.051, 0.050],
    2: [0.930, 0.140, 0.060, 0.062, 0.064, 0.066, 0.068, 0.120, 0.061, 0.063],
    3: [0.920, 0.133, 0.051, 0.050, 0.052, 0.050, 0.051, 0.119, 0.050, 0.052],
}

# Exercise 2: which snippets time `model(x)` on a GPU correctly?
TIMING_SNIPPETS = {
    "A": """start = time.time()
y = model(x)
print(time.time() - start)""",
    "B": """for _ in range(5):
    model(x)  # warm-up
start = time.perf_counter()
for _ in range(50):
    model(x)
print((time.perf_counter() - start) / 50)""",
    "C": """for _ in range(5):
    model(x)  # warm-up
times = []
for _ in range(50):
    torch.cuda.synchronize()
    start = time.perf_counter()
    model(x)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
print(statistics.median(times))""",
    "D": """timer = torch.utils.benchmark.Timer("model(x)", globals={"model": model, "x": x})
print(timer.blocked_autorange(min_run_time=0.2).median)""",
    "E": """torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(50):
    model(x)
elapsed = time.perf_counter() - start
torch.cuda.synchronize()
print(elapsed / 50)""",
}
_CORRECT_SNIPPETS = frozenset({"C", "D"})
_FLAWS = {
    "A": N_("one of your choices times a single, cold call and reads the clock before the GPU has finished"),
    "B": N_("one of your choices never waits for the GPU, so it measures how fast Python queues the work"),
    "E": N_("one of your choices waits for the GPU only after it has read the clock"),
}


def _job_step_time(step_times: dict[int, list[float]], warmup: int) -> float:
    """The job's step time: the slowest rank's median over its timed steps."""
    return max(statistics.median(times[warmup:]) for times in step_times.values())


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.005)


def check_samples_per_second(answer: object) -> CheckResult:
    """Check the job's throughput, in samples per second, computed from `EXAMPLE_STEP_TIMES`."""
    if answer is None or answer is ...:
        return failed(_("compute the job's samples per second from EXAMPLE_STEP_TIMES and assign the number"))
    value = real_value(answer)
    if value is None:
        return failed(
            _("the answer should be a number of samples per second, not {kind}").format(
                kind=type(answer).__name__
            )
        )
    answer = value
    world = len(EXAMPLE_STEP_TIMES)
    truth = world * PER_RANK_BATCH / _job_step_time(EXAMPLE_STEP_TIMES, WARMUP_STEPS)
    if _close(answer, truth):
        return passed(
            _(
                "about {truth:.0f} samples/s: {world} x {batch} samples per step, divided by the "
                "median step time of the slowest rank, warm-up left out"
            ).format(truth=truth, world=world, batch=PER_RANK_BATCH)
        )
    if _close(answer, truth / world):
        return failed(
            _(
                "that is the throughput of one process: every step of the job processes the batches "
                "of all ranks"
            )
        )
    if _close(answer, 1 / _job_step_time(EXAMPLE_STEP_TIMES, WARMUP_STEPS)):
        return failed(_("that is steps per second; multiply by the samples one step of the job processes"))
    with_warmup = world * PER_RANK_BATCH / _job_step_time(EXAMPLE_STEP_TIMES, 0)
    mean_with_warmup = world * PER_RANK_BATCH / max(statistics.mean(t) for t in EXAMPLE_STEP_TIMES.values())
    mean_timed = (
        world * PER_RANK_BATCH / max(statistics.mean(t[WARMUP_STEPS:]) for t in EXAMPLE_STEP_TIMES.values())
    )
    fastest = (
        world * PER_RANK_BATCH / min(statistics.median(t[WARMUP_STEPS:]) for t in EXAMPLE_STEP_TIMES.values())
    )
    warmup_hint = _("the first {warmup} steps of every rank are warm-up: leave them out").format(
        warmup=WARMUP_STEPS
    )
    mistakes = [  # what a typical wrong answer computes, and the hint for it
        (with_warmup, warmup_hint),
        (mean_with_warmup, warmup_hint),
        (mean_timed, _("the mean is pulled by the slow outlier in every rank's list; use the median")),
        (
            fastest,
            _(
                "the ranks wait for each other in the gradient all-reduce, so a step of the job takes "
                "as long as on the slowest rank, not the fastest"
            ),
        ),
    ]
    for value, hint in mistakes:
        if _close(answer, value):
            return failed(hint)
    return failed(
        _(
            "not the job's throughput: samples per step of the whole job, divided by a typical (median) "
            "step time of the slowest rank, warm-up steps left out"
        )
    )


def check_correct_snippets(answer: object) -> CheckResult:
    """Check the set of letters of `TIMING_SNIPPETS` that time `model(x)` on a GPU correctly."""
    if answer is None or answer is ...:
        return failed(_('write the letters of the correct snippets as a set of strings, e.g. {"A"}'))
    if isinstance(answer, str):
        answer = {answer} if len(answer) == 1 else set(answer.replace(",", " ").split())
    if not isinstance(answer, Iterable):
        return failed(_('the answer should be a set of letters such as {"A", "B"}'))
    chosen = {str(letter).strip().upper() for letter in answer}
    unknown = sorted(chosen - set(TIMING_SNIPPETS))
    if unknown:
        return failed(
            _("there are only snippets {letters}; remove {unknown}").format(
                letters=", ".join(TIMING_SNIPPETS), unknown=unknown
            )
        )
    if chosen == _CORRECT_SNIPPETS:
        return passed(
            _(
                "both wait for the GPU before every clock reading (torch.utils.benchmark's timer "
                "synchronises for you), leave out warm-up runs and report a median over many runs"
            )
        )
    hints = [translated(_FLAWS[letter]) for letter in sorted(chosen - _CORRECT_SNIPPETS)]
    missed = len(_CORRECT_SNIPPETS - chosen)
    if missed:
        hints.append(
            _(
                "you left out {missed} snippet(s) that measure correctly (what does torch.utils.benchmark's "
                "timer do before it reads the clock?)"
            ).format(missed=missed)
        )
    return failed(_("; ").join(hints))


def _summary_cases() -> list[tuple[list[float], int]]:
    """The lists `summarize` is tried on: small ones a reader can follow, then random ones (fixed seed)."""
    cases = [([0.9, 0.2, 0.1, 0.4, 0.3], 1), ([5.0, 1.0, 2.0, 3.0, 4.0, 100.0], 1), ([2.0, 4.0, 6.0, 8.0], 0)]
    rng = random.Random(9)
    for length in (7, 8, 11, 12):
        warmup = rng.randrange(4)
        cases.append(([round(rng.uniform(0.01, 1.0), 4) for _ in range(length + warmup)], warmup))
    return cases


def _median_and_iqr(values: list[float]) -> tuple[float, float]:
    """The median and the interquartile range with linear interpolation, as numpy computes them."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return median, q3 - q1


def _close_pair(got: tuple[float, float], want: tuple[float, float]) -> bool:
    return all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, want, strict=True))


def check_median_and_iqr(fn: Callable[[list[float], int], tuple[float, float]]) -> CheckResult:
    """Check `fn(times, warmup)`: the median and IQR of `times` without the first `warmup` entries."""
    if (verdict := not_a_function(fn, "summarize(times, warmup)")) is not None:
        return verdict
    goal = _("return (median, iqr) of times without its first warmup entries")
    if (verdict := unanswered(fn, "summarize(times, warmup)", goal)) is not None:
        return verdict
    for times, warmup in _summary_cases():
        call = f"summarize({times}, {warmup})"
        outcome = call_reader(fn, list(times), warmup)
        if outcome.problem is not None:
            return failed(_("{call}: your function {problem}").format(call=call, problem=outcome.problem))
        result = outcome.value
        pair = isinstance(result, tuple | list) and len(result) == 2
        if pair and any(isinstance(v, torch.Tensor) for v in result):
            return failed(
                _(
                    "{call} returned {result!r}; return a tuple of two floats (median, iqr) "
                    "(got tensors: use .item())"
                ).format(call=call, result=result)
            )
        values = [real_value(v) for v in result] if pair else []
        if not pair or any(v is None for v in values):
            return failed(
                _("{call} returned {result!r:.80}; return a tuple of two floats (median, iqr)").format(
                    call=call, result=result
                )
            )
        got_median, got_iqr = values
        kept = times[warmup:]
        median, iqr = _median_and_iqr(kept)
        if not math.isclose(got_median, median, rel_tol=1e-6):
            if warmup and _close_pair((got_median, got_iqr), _median_and_iqr(times)):
                return failed(_("{call}: the median includes the warm-up entries").format(call=call))
            if math.isclose(got_median, statistics.mean(kept), rel_tol=1e-6):
                return failed(_("{call}: that is the mean, not the median").format(call=call))
            return failed(_("{call}: the median is not right").format(call=call))
        if not math.isclose(got_iqr, iqr, rel_tol=1e-6):
            return failed(
                _(
                    "{call}: the IQR is not right; it is the 75th minus the 25th "
                    "percentile with linear interpolation, as torch.utils.benchmark and numpy compute it "
                    "(statistics.quantiles has a `method` argument)"
                ).format(call=call)
            )
    return passed(_("median and IQR without the warm-up entries, as torch.utils.benchmark reports them"))


__all__ = [
    "EXAMPLE_STEP_TIMES",
    "PER_RANK_BATCH",
    "TIMING_SNIPPETS",
    "WARMUP_STEPS",
    "check_correct_snippets",
    "check_median_and_iqr",
    "check_samples_per_second",
]
