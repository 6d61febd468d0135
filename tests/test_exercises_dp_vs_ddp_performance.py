"""The self-checks of notebook 09 accept right answers and reject wrong ones without giving them away."""

from __future__ import annotations

import statistics
import sys

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual

from course_utils.exercises import CheckResult
from course_utils.exercises.dp_vs_ddp_performance import (
    EXAMPLE_STEP_TIMES,
    PER_RANK_BATCH,
    TIMING_SNIPPETS,
    WARMUP_STEPS,
    check_correct_snippets,
    check_median_and_iqr,
    check_samples_per_second,
)

WORLD = len(EXAMPLE_STEP_TIMES)
SLOWEST = max(statistics.median(t[WARMUP_STEPS:]) for t in EXAMPLE_STEP_TIMES.values())
TRUTH = WORLD * PER_RANK_BATCH / SLOWEST


def not_yet(result: CheckResult) -> str:
    assert isinstance(result, CheckResult)
    assert not result and str(result).startswith("Not yet: ")
    return str(result)


def test_samples_per_second_accepts_the_right_number():
    assert check_samples_per_second(TRUTH)
    assert check_samples_per_second(np.float32(TRUTH)) and check_samples_per_second(torch.tensor(TRUTH))
    assert check_samples_per_second(round(TRUTH))
    assert str(check_samples_per_second(TRUTH)).startswith("Correct: ")


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "compute the job's"),
        ("2000", "should be a number"),
        (True, "should be a number"),
        (AlwaysEqual(), "should be a number"),
        (np.array([TRUTH, TRUTH]), "should be a number"),
        (torch.tensor(TRUTH, device="meta"), "should be a number"),
        (float("nan"), "should be a number"),
        (TRUTH / WORLD, "throughput of one process"),
        (1 / SLOWEST, "steps per second"),
        (WORLD * PER_RANK_BATCH / max(statistics.median(t) for t in EXAMPLE_STEP_TIMES.values()), "warm-up"),
        (
            WORLD
            * PER_RANK_BATCH
            / max(statistics.mean(t[WARMUP_STEPS:]) for t in EXAMPLE_STEP_TIMES.values()),
            "median",
        ),
        (
            WORLD
            * PER_RANK_BATCH
            / min(statistics.median(t[WARMUP_STEPS:]) for t in EXAMPLE_STEP_TIMES.values()),
            "slowest",
        ),
        (12345.0, "not the job's throughput"),
    ],
)
def test_samples_per_second_rejects_with_a_hint_not_the_answer(answer, hint):
    message = not_yet(check_samples_per_second(answer))
    assert hint in message
    assert f"{TRUTH:.0f}" not in message


def test_snippets_accepts_the_correct_pair_in_any_form():
    assert set(TIMING_SNIPPETS) == {"A", "B", "C", "D", "E"}
    for answer in ({"C", "D"}, ["d", "c"], "C, D", ("C", "D")):
        assert check_correct_snippets(answer), answer


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (None, "write the letters"),
        (42, "set of letters"),
        ([["C"], ["D"]], "remove"),
        (AlwaysEqual(), "set of letters"),
        ({AlwaysEqual()}, "remove"),
        ({"C", "Z"}, "remove ['Z']"),
        ({"C"}, "left out 1"),
        ({"A", "C", "D"}, "single, cold call"),
        ({"B", "C", "D"}, "never waits for the GPU"),
        ({"C", "D", "E"}, "after it has read the clock"),
        (set(), "left out 2"),
    ],
)
def test_snippets_rejects_with_a_hint(answer, hint):
    message = not_yet(check_correct_snippets(answer))
    assert hint in message
    assert "C and D" not in message and "{'C', 'D'}" not in message


def right_summarize(times, warmup):
    q1, q2, q3 = statistics.quantiles(times[warmup:], n=4, method="inclusive")
    return q2, q3 - q1


def with_numpy(times, warmup):
    q1, q2, q3 = np.percentile(times[warmup:], [25, 50, 75])
    return [q2, q3 - q1]  # a list, of NumPy floats


def with_torch(times, warmup):
    q1, q2, q3 = torch.quantile(torch.tensor(times[warmup:]), torch.tensor([0.25, 0.5, 0.75]))
    return q2.item(), (q3 - q1).item()  # float32 arithmetic


def torch_median(times, warmup):
    kept = torch.tensor(times[warmup:])
    q1, q3 = torch.quantile(kept, torch.tensor([0.25, 0.75]))
    return kept.median().item(), (q3 - q1).item()  # torch.median: the lower middle value


def exclusive_quartiles(times, warmup):
    q1, q2, q3 = statistics.quantiles(times[warmup:], n=4)
    return q2, q3 - q1


def middle_element(times, warmup):
    kept = sorted(times[warmup:])
    return kept[len(kept) // 2], right_summarize(times, warmup)[1]


def exits(times, warmup):
    sys.exit("done")


@pytest.mark.parametrize("right", [right_summarize, with_numpy, with_torch])
def test_median_and_iqr_accepts_a_right_function(right):
    assert check_median_and_iqr(right)


@pytest.mark.parametrize(
    ("fn", "hint"),
    [
        (None, "write `summarize"),
        (3, "pass the function itself"),
        (lambda t, w: 1 / 0, "ZeroDivisionError"),
        (lambda t, w: None, "`summarize(times, warmup)` is not answered yet"),
        (lambda t, w: print(t[w:]), "return a tuple of two floats"),
        (lambda t, w: tuple(torch.tensor(v) for v in right_summarize(t, w)), "got tensors: use .item()"),
        (lambda t, w: (torch.tensor(1.0), 2.0), "got tensors: use .item()"),
        (lambda t, w: right_summarize(t, 0), "includes the warm-up"),
        (lambda t, w: (statistics.mean(t[w:]), right_summarize(t, w)[1]), "that is the mean"),
        (lambda t, w: (statistics.median(t[w:]), max(t[w:]) - min(t[w:])), "the IQR is not right"),
        (torch_median, "the median is not right"),
        (middle_element, "the median is not right"),
        (
            lambda t, w: (
                statistics.median(t[w:]),
                statistics.quantiles(t[w:], n=4)[2] - statistics.quantiles(t[w:], n=4)[0],
            ),
            "the IQR",
        ),
        (exits, "called sys.exit('done')"),
        (lambda t, w: AlwaysEqual(), "return a tuple of two floats"),
        (lambda t, w: (AlwaysEqual(), AlwaysEqual()), "return a tuple of two floats"),
    ],
)
def test_median_and_iqr_rejects_with_a_hint(fn, hint):
    assert hint in not_yet(check_median_and_iqr(fn))


def test_feedback_in_chinese(monkeypatch):
    """Where a notebook asks for Chinese, hints and verdicts come back in Chinese."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert str(check_samples_per_second(TRUTH / WORLD)) == (
        "未通过：这是一个进程的吞吐量：任务的每一步处理的是所有 rank 的批量"
    )
    assert str(check_samples_per_second(TRUTH)).startswith(
        f"正确：约 {TRUTH:.0f} 样本/秒：每步 4 x 32 个样本"
    )
    assert str(check_correct_snippets({"A", "C"})) == (
        "未通过：你选的片段中有一个只给一次还没预热的调用计时，而且在 GPU 完成之前就读了时钟；"
        "你漏掉了 1 个测量正确的片段（torch.utils.benchmark 的计时器在读时钟之前做了什么？）"
    )
    assert str(check_correct_snippets({"C", "D"})).startswith("正确：两者都在每次读时钟之前等待 GPU")
    assert str(check_median_and_iqr(lambda t, w: right_summarize(t, 0))) == (
        "未通过：summarize([0.9, 0.2, 0.1, 0.4, 0.3], 1)：中位数把预热的那些项也算进去了"
    )
    assert str(check_median_and_iqr(right_summarize)) == (
        "正确：去掉预热项后的中位数和 IQR，与 torch.utils.benchmark 报告的一致"
    )
