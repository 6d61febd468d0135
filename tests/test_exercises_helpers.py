"""The shared readers of answers: one rule for whole numbers and numbers, and a reader's call in words."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual

from course_utils.exercises import call_reader, integral_list, integral_value, real_value


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
    for wrong in (True, "0.5", float("nan"), float("inf"), meta, AlwaysEqual(), None):
        assert real_value(wrong) is None


def _exits() -> None:
    sys.exit(3)


def test_a_readers_call_in_words():
    assert call_reader(lambda x: x + 1, 1).value == 2 and call_reader(lambda: None).problem is None
    assert call_reader(lambda: {}["k"]).problem == "raised KeyError: 'k'"
    assert "called sys.exit(3)" in call_reader(_exits).problem
    assert "called sys.exit()" in call_reader(sys.exit).problem
