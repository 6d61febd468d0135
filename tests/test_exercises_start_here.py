"""The checks of notebook 00: right answers pass, typical wrong ones get a hint, never the answer."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual, assert_not_yet, odd_answers

from course_utils.exercises import describe_error, not_a_function, start_here


def _accelerator() -> str | None:
    found = torch.accelerator.current_accelerator(check_available=True)
    return None if found is None else found.type


def test_accelerator_right_answer_passes():
    result = start_here.check_accelerator(_accelerator())
    assert result and str(result).startswith("Correct: ")


def test_accelerator_with_no_accelerator_wants_none(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: None)
    assert start_here.check_accelerator(None)
    result = start_here.check_accelerator("cpu")  # the CPU is no accelerator
    assert not result and "'Accelerator' row" in result.message


@pytest.mark.parametrize("wrong", ["cuda", "mps", "xpu", "CUDA", ""])
def test_accelerator_wrong_device_types_get_a_hint(wrong):
    if wrong == _accelerator():
        pytest.skip("this machine really has that accelerator")
    result = start_here.check_accelerator(wrong)
    assert not result and "not what PyTorch found" in result.message


@pytest.mark.parametrize("wrong", [0, True, ["cuda"], torch.device("cpu")])
def test_accelerator_wrong_types_are_named(wrong):
    result = start_here.check_accelerator(wrong)
    assert not result and f"not a {type(wrong).__name__}" in result.message


def test_accelerator_placeholder_says_what_to_write():
    result = start_here.check_accelerator(...)
    assert not result and str(result).startswith("Not yet: replace ...")


def test_cpu_threads_right_answer_passes():
    assert start_here.check_cpu_threads(torch.get_num_threads())


def test_cpu_threads_wrong_answers_get_a_hint_not_the_number():
    threads = torch.get_num_threads()
    result = start_here.check_cpu_threads(threads + 1)
    assert not result and "num_threads" in result.message and str(threads) not in result.message
    for wrong in (float(threads), str(threads), True, None):
        result = start_here.check_cpu_threads(wrong)
        assert not result and "whole number" in result.message
    assert str(start_here.check_cpu_threads(...)).startswith("Not yet: replace ...")


def test_accelerator_odd_answers_are_not_yet():
    for wrong in odd_answers():
        assert_not_yet(start_here.check_accelerator(wrong), "give a string or None")


def test_cpu_threads_integers_of_every_kind_pass():
    threads = torch.get_num_threads()
    assert start_here.check_cpu_threads(np.int64(threads))
    assert start_here.check_cpu_threads(torch.tensor(threads))


def test_cpu_threads_odd_answers_are_not_yet():
    for wrong in [*odd_answers(), 2.9, "4"]:
        assert_not_yet(start_here.check_cpu_threads(wrong), "whole number")


def test_an_answer_equal_to_everything_does_not_pass():
    assert not start_here.check_accelerator(AlwaysEqual()) and not start_here.check_cpu_threads(AlwaysEqual())


def test_the_chinese_notebook_gets_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    hint = str(start_here.check_cpu_threads(2.0))  # the Chinese punctuation is left out of the literals
    assert hint.startswith("未通过") and "线程数应当是整数" in hint and "float" in hint
    hint = str(start_here.check_accelerator(...))
    assert hint.startswith("未通过") and "换成一个设备类型" in hint
    assert str(start_here.check_cpu_threads(torch.get_num_threads())).startswith("正确")
    right = str(start_here.check_accelerator(_accelerator()))
    assert right.startswith("正确") and "在这里报告的也是" in right


def test_the_shared_hints_come_in_chinese_too(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert "传入函数本身" in not_a_function(3, "f(x)").message
    assert "写出 `f(x)`" in not_a_function(None, "f(x)").message
    assert describe_error(SystemExit(3)).startswith("调用了 sys.exit(3)")
    assert describe_error(KeyError("grad")) == "抛出了 KeyError: 'grad'"
    monkeypatch.setenv("COURSE_LANGUAGE", "en")
    assert describe_error(KeyError("grad")) == "raised KeyError: 'grad'"


@pytest.mark.parametrize("kind", ["cuda", "mps", "xpu"])
def test_accelerator_on_a_stand_in_accelerator_wants_its_type(monkeypatch, kind):
    """The check asks torch.accelerator on every machine, also one with an accelerator (a stand-in here)."""
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: torch.device(kind)
    )
    assert start_here.check_accelerator(kind)
    for wrong in (None, "cpu", "cuda" if kind != "cuda" else "mps"):
        assert not start_here.check_accelerator(wrong), wrong


@pytest.fixture
def threads_unlike_the_cores():
    """PyTorch set to a thread count that is not the machine's core count, restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads((os.cpu_count() or 1) + 1)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_cpu_threads_is_pytorchs_count_not_the_cores(threads_unlike_the_cores):
    assert start_here.check_cpu_threads(threads_unlike_the_cores)
    assert not start_here.check_cpu_threads(os.cpu_count())
