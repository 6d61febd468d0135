"""The shared readers of answers: one rule for whole numbers and numbers, and a reader's call in words."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from exercise_answers import NOT_COUNTS, AlwaysEqual, assert_refused

from course_utils.exercises import (
    call_reader,
    describe_error,
    integral_list,
    integral_value,
    is_placeholder,
    positive_count,
    real_value,
    unanswered,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (np.int64(3), 3), (np.uint8(3), 3), (torch.tensor(3), 3), (-2, -2), (0, 0)],
)
def test_integers_of_every_kind_are_read_alike(value, expected):
    assert integral_value(value) == expected and type(integral_value(value)) is int


def test_anything_else_is_not_a_whole_number():
    for value in [
        3.0,
        3.7,
        "3",
        True,
        np.bool_(True),
        np.float64(3.0),
        torch.tensor(3.0),
        torch.tensor([3]),
        torch.tensor(3, device="meta"),
        np.array([3, 4]),
        AlwaysEqual(),
        None,
        [3],
    ]:
        assert integral_value(value) is None


def test_integral_lists():
    assert integral_list([1, np.int32(2), torch.tensor(3)]) == [1, 2, 3]
    assert integral_list((4,)) == [4] and integral_list(np.array([5, 6])) == [5, 6]
    assert integral_list(torch.tensor([7, 8])) == [7, 8] and integral_list(torch.Size([2, 6])) == [2, 6]
    meta = torch.ones(2, device="meta")
    for wrong in ([1.0, 2], ["1"], "12", {1, 2}, np.array([[1]]), meta, [AlwaysEqual()]):
        assert integral_list(wrong) is None


def test_real_numbers():
    for right in (0.5, np.float32(0.5), torch.tensor(0.5)):
        assert real_value(right) == 0.5
    assert real_value(2) == 2.0
    meta = torch.tensor(0.5, device="meta")
    for wrong in (True, "0.5", float("nan"), float("inf"), meta, AlwaysEqual(), None, 10**400, -(10**400)):
        assert real_value(wrong) is None


def _exits() -> None:
    sys.exit(3)


def test_a_readers_call_in_words():
    assert call_reader(lambda x: x + 1, 1).value == 2 and call_reader(lambda: None).problem is None
    assert call_reader(lambda: {}["k"]).problem == "raised KeyError: 'k'"
    assert "called sys.exit(3)" in call_reader(_exits).problem
    assert "called sys.exit()" in call_reader(sys.exit).problem


@pytest.mark.parametrize("value", NOT_COUNTS)
def test_a_count_that_cannot_be_is_refused_with_its_name(value):
    assert_refused(lambda: positive_count(value, "layers"), "layers must be", "")


def test_a_count_above_its_most_is_refused_and_a_huge_one_is_not_printed_whole():
    assert positive_count(2**63 - 1, "n") == 2**63 - 1 and positive_count(8, "n", most=8) == 8
    assert_refused(lambda: positive_count(9, "ranks", most=8), "ranks", "must be at most 8, not 9")
    with pytest.raises(ValueError) as caught:
        positive_count(10**5000, "n")  # Python refuses to print an int of over 4300 digits
    assert len(str(caught.value)) < 100, str(caught.value)


def test_an_error_s_own_full_stop_is_not_doubled_by_the_hint_after_it():
    assert describe_error(RuntimeError("Use tensor.detach().numpy() instead.")) == (
        "raised RuntimeError: Use tensor.detach().numpy() instead"
    )
    assert describe_error(ValueError()) == "raised ValueError"
    assert describe_error(KeyError("k")) == "raised KeyError: 'k'"


def _docstring_only(x):
    """Write me."""


def _pass_only(x):
    pass


def _returns_ellipsis(x):
    return ...


def _raises_not_implemented(x):
    raise NotImplementedError


def _raises_not_implemented_with_words(x):
    """Write me."""
    raise NotImplementedError("exercise 2", 3)


def _forgets_return(x):
    x + 1


def _returns_none_on_purpose(x):
    print(x)
    return None


def _raises_something_else(x):
    raise ValueError("no")


@pytest.mark.parametrize(
    "placeholder",
    [
        _docstring_only,
        _pass_only,
        _returns_ellipsis,
        _raises_not_implemented,
        _raises_not_implemented_with_words,
    ],
)
def test_the_notebooks_placeholders_are_told_apart(placeholder):
    assert is_placeholder(placeholder)
    hint = unanswered(placeholder, "f(x)", "return x doubled")
    assert hint.message == (
        "`f(x)` is not answered yet: its body is still the notebook's placeholder. "
        "Replace it with your code: return x doubled."
    )


@pytest.mark.parametrize(
    "written",
    [_forgets_return, _returns_none_on_purpose, _raises_something_else, lambda x: x, len, print, None, 3],
)
def test_a_function_with_code_of_its_own_is_no_placeholder(written):
    assert not is_placeholder(written) and unanswered(written, "f(x)", "anything") is None


def test_not_answered_yet_reads_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    hint = str(unanswered(_pass_only, "f(x)", "返回 x 的两倍"))
    assert (
        hint
        == "未通过：`f(x)` 还没有作答：它的函数体仍是 notebook 给的占位内容。请换成你的代码：返回 x 的两倍。"
    )
