"""The checks of notebook 11's exercises accept right answers and explain wrong ones."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch
from exercise_answers import AlwaysEqual, assert_refused

from course_utils.exercises.troubleshooting import QUESTIONS, check_error_fix, check_select_gpus, question


def test_every_question_shows_its_message_and_four_options():
    for number, q in QUESTIONS.items():
        text = question(number)
        assert q.message in text
        for letter in "ABCD":
            assert f"  {letter}) " in text
        assert set(q.options) == set("ABCD")
        assert q.answer in q.options
        assert set(q.hints) == set(q.options) - {q.answer}, "every wrong letter needs a hint"


@pytest.mark.parametrize("number", sorted(QUESTIONS))
def test_the_right_letter_passes_in_any_case(number):
    right = QUESTIONS[number].answer
    assert check_error_fix(number, right).ok
    assert check_error_fix(number, f" {right.lower()} ").ok
    assert str(check_error_fix(number, right)).startswith("Correct: ")


@pytest.mark.parametrize("number", sorted(QUESTIONS))
def test_each_wrong_letter_fails_with_its_own_hint(number):
    q = QUESTIONS[number]
    for wrong in set(q.options) - {q.answer}:
        result = check_error_fix(number, wrong)
        assert not result.ok
        assert q.hints[wrong] in result.message
        assert str(result).startswith("Not yet: ")


@pytest.mark.parametrize("answer", [..., None, "E", 3, "AB", "", AlwaysEqual(), ["C"], np.array(["C"])])
def test_non_letters_are_refused_with_a_hint(answer):
    result = check_error_fix(1, answer)
    assert not result.ok
    assert "letter" in result.message


def test_question_numbers_of_every_integer_kind():
    for number in [np.int64(1), torch.tensor(1)]:
        assert check_error_fix(number, "C").ok


def test_unknown_question_numbers_are_not_yet():
    for number in [99, 1.0, 1.5, "1", [1], AlwaysEqual(), np.array([1, 2])]:
        result = check_error_fix(number, "C")
        assert not result.ok and "there is no question" in result.message


def test_unknown_question_numbers():
    assert not check_error_fix(99, "A").ok
    assert question(np.int64(2)) == question(2)


@pytest.mark.parametrize("number", [99, 0, -1, 10**400])
def test_a_question_that_does_not_exist_is_refused_with_the_ones_that_do(number):
    assert_refused(lambda: question(number), "number must be one of the questions [1, 2, 3, 4]")


@pytest.mark.parametrize("number", ["1", 1.0, None, [1], {}, "1\0", True])
def test_a_question_number_that_is_no_whole_number_is_refused(number):
    assert_refused(lambda: question(number), "number must be one of the questions")


def assign(environ: dict, value: str) -> None:
    environ["CUDA_VISIBLE_DEVICES"] = value


def seed_002(environ: dict, value: str) -> None:
    environ.setdefault("CUDA_VISIBLE_DEVICES", value)


def writes_os_environ(environ: dict, value: str) -> None:
    os.environ["COURSE_TEST_ONLY"] = value  # the wrong mapping (and not the right name)


def writes_both(environ: dict, value: str) -> None:
    environ["CUDA_VISIBLE_DEVICES"] = value
    os.environ["COURSE_TEST_ONLY_BOTH"] = value  # the kernel's own environment as well


def raises(environ: dict, value: str) -> None:
    raise KeyError(value)


def updates(environ: dict, value: str) -> None:
    environ.update(CUDA_VISIBLE_DEVICES=value)


def pops_then_sets(environ: dict, value: str) -> None:
    environ.pop("CUDA_VISIBLE_DEVICES", None)
    environ.setdefault("CUDA_VISIBLE_DEVICES", value)


def hard_coded(environ: dict, value: str) -> None:
    environ["CUDA_VISIBLE_DEVICES"] = "3,6"  # the exercise's example value, written in


def clears_everything(environ: dict, value: str) -> None:
    environ.clear()
    environ["CUDA_VISIBLE_DEVICES"] = value


def exits(environ: dict, value: str) -> None:
    sys.exit(1)


@pytest.mark.parametrize("right", [assign, updates, pops_then_sets])
def test_select_gpus_right(right):
    assert check_select_gpus(right).ok


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (hard_coded, "not '2'"),
        (clears_everything, "the other variables changed"),
        (exits, "called sys.exit(1)"),
        (seed_002, "still '7'"),
    ],
)
def test_select_gpus_wrong(wrong, hint):
    result = check_select_gpus(wrong)
    assert not result.ok and hint in result.message, result


def test_select_gpus_seed_002_setdefault_is_caught():
    result = check_select_gpus(seed_002)
    assert not result.ok
    assert "still '7'" in result.message


def test_select_gpus_other_mistakes(monkeypatch):
    monkeypatch.delenv("COURSE_TEST_ONLY", raising=False)
    result = check_select_gpus(writes_os_environ)
    assert not result.ok and "environ passed in" in result.message
    result = check_select_gpus(raises)
    assert not result.ok and "KeyError" in result.message
    monkeypatch.delenv("COURSE_TEST_ONLY_BOTH", raising=False)
    result = check_select_gpus(writes_both)
    assert not result.ok and "also changed this process's os.environ (COURSE_TEST_ONLY_BOTH" in result.message
    assert "COURSE_TEST_ONLY_BOTH" not in os.environ, "the check undoes what the function wrote"


@pytest.mark.parametrize("answer", [..., None, "environ['CUDA_VISIBLE_DEVICES'] = value"])
def test_select_gpus_needs_a_function(answer):
    result = check_select_gpus(answer)
    assert not result.ok
    assert "function" in result.message


def test_a_chinese_notebook_gets_the_questions_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    text = question(3)
    assert "用哪个解决办法？" in text and "让每个批量都是满的" in text
    assert "Expected more than 1 value per channel" in text, "PyTorch's message stays in English"
    wrong = check_error_fix(1, "B")
    assert str(wrong).startswith("未通过：") and "weights_only 决定哪些对象可以被反序列化" in wrong.message
    right = check_error_fix(1, " c ")
    assert str(right).startswith("正确：") and "map_location 指定" in right.message
    kept = check_select_gpus(seed_002)
    assert str(kept).startswith("未通过：") and "变量已设为 '7' 时，它仍然是 '7'" in kept.message
    assert str(check_select_gpus(assign)).startswith("正确：不管这个变量之前有没有设置")
