"""The checks of notebook 02: right answers pass, typical wrong ones get a hint."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from exercise_answers import assert_not_yet

from course_utils.exercises import tensors_on_devices as tensors


def test_to_numpy_right_answers_pass():
    assert tensors.check_to_numpy(lambda t: t.detach().cpu().numpy())
    assert tensors.check_to_numpy(lambda t: t.numpy(force=True))


def forgets_return(t):
    """A function the reader wrote, with all the right calls, that returns nothing."""
    t.detach().cpu().numpy()


def stub(t): ...  # your code here


def stub_with_docstring(a, b):
    """The notebook's placeholder, with a docstring."""


def stub_that_raises(*args):
    raise NotImplementedError("write me")


@pytest.mark.parametrize("placeholder", [stub, stub_that_raises, lambda t: None])
def test_an_untouched_to_numpy_is_not_answered_yet_and_says_what_to_write(placeholder):
    hint = tensors.check_to_numpy(placeholder).message
    assert (
        hint.startswith("`to_numpy(t)` is not answered yet") and "return t's values as a NumPy array" in hint
    )
    assert "forget `return`" not in hint


@pytest.mark.parametrize("placeholder", [stub_with_docstring, stub_that_raises, lambda a, b: ...])
def test_an_untouched_add_on_device_of_is_not_answered_yet(placeholder):
    hint = tensors.check_add_on_device_of(placeholder).message
    assert hint.startswith("`add_on_device_of(a, b)` is not answered yet") and "on a's device" in hint


def test_the_numpy_hint_quotes_pytorch_s_message_without_a_doubled_full_stop():
    hint = tensors.check_to_numpy(lambda t: t.numpy()).message
    assert "Use tensor.detach().numpy() instead. The message says what to add." in hint, hint
    assert ".." not in hint.replace("...", ""), hint


@pytest.mark.parametrize(
    ("wrong", "mistake"),
    [
        (lambda a, b: (a + b.to(a.device)).cpu(), "it moved a tensor it computed (the sum?) off a's device"),
        (
            lambda a, b: (a + b.to(a.device)).to("cpu"),
            "it moved a tensor it computed (the sum?) off a's device",
        ),
        (lambda a, b: a.cpu() + b, "it moved a itself off its device"),
        (lambda a, b: a.to(b.device) + b, "it moved a itself off its device"),
    ],
)
def test_a_move_off_a_s_device_is_named_as_the_mistake(wrong, mistake):
    hint = tensors.check_add_on_device_of(wrong).message
    assert mistake in hint and "move only b" in hint, hint
    assert "which one should move" not in hint


def test_to_numpy_wrong_answers_get_hints():
    result = tensors.check_to_numpy(lambda t: t.numpy())
    assert not result and "requires grad" in result.message
    result = tensors.check_to_numpy(lambda t: t.detach().numpy())  # no .cpu(): caught via meta
    assert not result and "only because this tensor is on the CPU" in result.message
    result = tensors.check_to_numpy(lambda t: t.detach().cpu())
    assert not result and "not a numpy.ndarray" in result.message
    result = tensors.check_to_numpy(forgets_return)
    assert not result and "returned None: did you forget `return`?" in result.message
    assert not tensors.check_to_numpy(lambda t: t.detach().cpu().numpy() + 1)
    assert "pass your function itself" in tensors.check_to_numpy(None).message
    assert str(tensors.check_to_numpy(lambda t: t.numpy())).startswith("Not yet: ")


def test_add_on_device_of():
    assert tensors.check_add_on_device_of(lambda a, b: a + b.to(a.device))
    result = tensors.check_add_on_device_of(lambda a, b: a + b)
    assert not result and "RuntimeError" in result.message
    assert not tensors.check_add_on_device_of(lambda a, b: a.to(b.device) + b)
    result = tensors.check_add_on_device_of(lambda a, b: (a + b.to(a.device)).to("meta"))
    assert not result and "should stay on a's device" in result.message
    assert not tensors.check_add_on_device_of(lambda a, b: a - b.to(a.device))
    assert not tensors.check_add_on_device_of(lambda a, b: (a + b.to(a.device)).tolist())


def test_errors_come_with_a_hint_not_only_the_message():
    def raises_value_error(*args):
        raise ValueError("boom")

    result = tensors.check_add_on_device_of(raises_value_error)
    assert (
        not result and "ValueError: boom" in result.message and "names the call that failed" in result.message
    )

    def type_error_on_meta(t):
        if t.device.type == "meta":
            raise TypeError("unsupported")
        return t.detach().cpu().numpy()

    result = tensors.check_to_numpy(type_error_on_meta)
    assert not result and "should move it before anything reads them" in result.message


@pytest.mark.parametrize(
    "right",
    [
        lambda t: t.detach().cpu().numpy(),
        lambda t: t.cpu().detach().numpy(),
        lambda t: t.detach().to("cpu").numpy().copy(),
        lambda t: t.numpy(force=True),
        lambda t: np.asarray(t.detach().cpu()),
    ],
)
def test_to_numpy_equivalent_right_answers_pass(right):
    assert tensors.check_to_numpy(right)


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (lambda t: t.detach().cpu().numpy().astype(np.float64), "not the tensor's"),  # dtype lost
        (lambda t: np.array(t.tolist(), dtype=np.float32), "not the tensor's"),
        (lambda t: t.detach().cpu().numpy().reshape(-1), "does not hold"),
        (lambda t: np.zeros(tuple(t.shape), dtype=t.detach().cpu().numpy().dtype), "does not hold"),
        (lambda t: sys.exit(0), "called sys.exit(0)"),
    ],
)
def test_to_numpy_wrong_answers(wrong, hint):
    assert_not_yet(tensors.check_to_numpy(wrong), hint)


@pytest.mark.parametrize(
    "right",
    [
        lambda a, b: a + b.to(a.device),
        lambda a, b: b.to(a.device) + a,
        lambda a, b: torch.add(a, b.to(a.device)),
        lambda a, b: a.add_(b.to(a.device)),  # in place: a is the reader's own argument
        lambda a, b: a.add(b.to(a.device, non_blocking=True)),
    ],
)
def test_add_on_device_of_equivalent_right_answers_pass(right):
    assert tensors.check_add_on_device_of(right)


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (lambda a, b: a + 1, "not a + b"),  # right only where b holds ones
        (lambda a, b: a + b.to(a.device).sum(), "not a + b"),
        (lambda a, b: (a + b.to(a.device)).double(), "dtype"),
        (lambda a, b: (a + b.to(a.device))[..., :1], "shape"),
        (lambda a, b: sys.exit(1), "called sys.exit(1)"),
    ],
)
def test_add_on_device_of_wrong_answers(wrong, hint):
    assert_not_yet(tensors.check_add_on_device_of(wrong), hint)


def test_the_chinese_notebook_gets_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")  # the Chinese punctuation is left out of the literals
    hint = str(tensors.check_to_numpy(lambda t: t.numpy()))
    assert hint.startswith("未通过") and "在需要梯度的张量上" in hint
    assert "你的函数抛出了 RuntimeError: Can't call numpy()" in hint and "错误消息说明了要补上什么" in hint
    hint = str(tensors.check_to_numpy(forgets_return))
    assert hint.startswith("未通过") and "你的函数返回了 None" in hint and "是不是忘了写 `return`" in hint
    hint = str(tensors.check_to_numpy(stub))
    assert hint == (
        "未通过：`to_numpy(t)` 还没有作答：它的函数体仍是 notebook 给的占位内容。"
        "请换成你的代码：以 NumPy 数组的形式返回 t 的数值。"
    )
    hint = str(tensors.check_add_on_device_of(lambda a, b: (a + b.to(a.device)).cpu()))
    assert "它把自己算出的一个张量（是那个和吗？）移出了 a 的设备" in hint and "只移动 b" in hint
    hint = str(tensors.check_add_on_device_of(lambda a, b: b))
    assert hint.startswith("未通过") and "当 a 在 meta 上" in hint
    right = str(tensors.check_to_numpy(lambda t: t.detach().cpu().numpy()))
    assert right.startswith("正确") and "无论张量是否需要梯度" in right
    right = str(tensors.check_add_on_device_of(lambda a, b: a + b.to(a.device)))
    assert right.startswith("正确") and "b 移到 a 所在的设备上" in right
