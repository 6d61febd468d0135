"""The self-checks of notebook 04 accept the right answers, reject wrong ones, never give them away."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual, assert_not_yet, odd_answers

from course_utils.exercises.choosing_gpus import check_cuda_reading, check_freest_value, check_physical_gpu


@pytest.mark.parametrize("check", [check_physical_gpu, check_freest_value, check_cuda_reading])
@pytest.mark.parametrize("placeholder", [None, ...])
def test_unanswered_placeholder_is_not_yet(check, placeholder):
    result = check(placeholder)
    assert not result and str(result).startswith("Not yet: no answer yet")


def test_physical_gpu():
    assert check_physical_gpu(2)
    assert str(check_physical_gpu(2)).startswith("Correct:")
    assert "logical id itself" in str(check_physical_gpu(1))
    assert "start at 0" in str(check_physical_gpu(5))
    assert "not even visible" in str(check_physical_gpu(0))
    assert "without quotes" in str(check_physical_gpu("2"))
    assert not check_physical_gpu(True)


def test_freest_value():
    assert check_freest_value("3,6,1")
    assert check_freest_value("GPU-3,GPU-6,GPU-1")  # UUID prefixes name the same GPUs
    assert "another order" in str(check_freest_value("6,3,1"))
    assert "you named 2" in str(check_freest_value("3,6"))
    assert "without spaces" in str(check_freest_value("3, six"))
    assert "in quotes" in str(check_freest_value([3, 6, 1]))
    assert not check_freest_value("0,1,2")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("3, 6, 1", "entry 2 (' 6') has spaces around it"),
        ("+3,6,1", "entry 1 ('+3') is not a GPU index"),
        ("3,6,1,", "entry 4 ('') is empty"),
        ("3,6,-1", "entry 3 ('-1') is negative"),
        ("3,6,6", "repeats GPU 6"),
        ("3,6,9", "there is no GPU 9"),
    ],
)
def test_freest_value_reads_answers_with_the_strict_parser(answer, reason):
    """CUDA would read these differently from what they say; they are not right yet, with the reason."""
    result = check_freest_value(answer)
    assert not result
    message = str(result)
    assert message.startswith("Not yet: the course's strict parser refuses that value: ")
    assert reason in message and "e.g. '0,1,2'" in message
    assert "CUDA_VISIBLE_DEVICES=" not in message  # the value is not repeated back as a variable


def test_cuda_reading():
    assert check_cuda_reading([1, 3])
    assert check_cuda_reading((1, 3))
    assert "order" in str(check_cuda_reading([3, 1]))
    assert "read on" in str(check_cuda_reading([1, 3, 0]))
    assert not check_cuda_reading([1])
    assert "list of ints" in str(check_cuda_reading("1,3"))


@pytest.mark.parametrize(
    ("check", "wrong"), [(check_physical_gpu, 7), (check_freest_value, "0,1,2"), (check_cuda_reading, [0])]
)
def test_hints_never_contain_the_solution(check, wrong):
    message = str(check(wrong))
    for solution in ("3,6,1", "[1, 3]", " 2 "):
        assert solution not in message


def test_physical_gpu_integers_of_every_kind_pass():
    for right in [2, np.int64(2), torch.tensor(2)]:
        assert check_physical_gpu(right)


def test_physical_gpu_refuses_what_is_no_integer():
    for wrong in [2.0, 2.4, "2", np.float64(2.0), *odd_answers()]:
        assert_not_yet(check_physical_gpu(wrong), "whole number")


def test_cuda_reading_equivalent_right_answers_pass():
    for right in [[1, 3], (1, 3), np.array([1, 3]), [np.int64(1), torch.tensor(3)]]:
        assert check_cuda_reading(right)


def test_cuda_reading_refuses_what_only_looks_like_the_list():
    for wrong in [
        [AlwaysEqual(), AlwaysEqual()],
        [1.0, 3.0],
        ["1", "3"],
        [[1], [3]],
        {1, 3},
        np.array([[1, 3]]),
    ]:
        assert_not_yet(check_cuda_reading(wrong), "list of ints")


def test_freest_value_refuses_what_is_no_string():
    for wrong in [AlwaysEqual(), *odd_answers()]:
        assert_not_yet(check_freest_value(wrong), "in quotes")


def test_a_chinese_notebook_gets_the_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert str(check_physical_gpu(1)) == "未通过：这是逻辑编号本身；逻辑编号是列表中的位置，请沿着列表数。"
    assert str(check_physical_gpu(2)) == "正确：cuda:1 是 '5,2,7' 的第二项：逻辑编号按列表来数。"
    assert str(check_cuda_reading([1, 3, 0])).startswith("未通过：看看 CUDA 遇到第一个用不了的条目时怎么做")
    assert str(check_cuda_reading([1, 3])).startswith("正确：CUDA 在第一个无效条目（-1）处停下")
    assert str(check_freest_value("3,6")) == "未通过：你写了 2 个 GPU；练习要求 3 个。"
    assert str(check_freest_value(...)).startswith("未通过：还没有答案：")
