"""The checks of notebook 03: right answers pass, typical wrong ones get a hint."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time

import pytest
import torch
from exercise_answers import assert_not_yet, checks_on_the_cpu, skip_without_trials, verdicts_in_a_kernel
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises import models_on_devices as models
from course_utils.exercises import sandbox


def test_prepare_batch():
    assert models.check_prepare_batch(lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).view(-1)))
    result = models.check_prepare_batch(lambda x, y, d: (x.float().to(d), y.long().to(d)))
    assert not result and "cross_entropy wants" in result.message
    result = models.check_prepare_batch(lambda x, y, d: (x.to(d), y.to(d).view(-1)))
    assert not result and "torch.float32" in result.message
    result = models.check_prepare_batch(lambda x, y, d: (x.float(), y.long().view(-1)))
    assert not result and "not on the device given" in result.message
    result = models.check_prepare_batch(lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).view(4)))
    assert not result and "batch of 3" in result.message
    assert not models.check_prepare_batch(
        lambda x, y, d: (x.to(d, torch.float32) / 255, y.to(d, torch.long).view(-1))
    )


def test_a_written_function_that_returns_nothing_gets_a_return_hint():
    def prepare_batch(images, labels, device):
        images.to(device, torch.float32), labels.to(device, torch.long).view(-1)

    def make_model_and_optimizer(device):
        model = nn.Linear(4, 2).to(device)
        torch.optim.SGD(model.parameters(), lr=0.1)

    assert "forget `return`" in models.check_prepare_batch(prepare_batch).message
    assert "forget `return`" in models.check_model_and_optimizer(make_model_and_optimizer).message
    assert "returned a Tensor" in models.check_prepare_batch(lambda x, y, d: x).message


def placeholder(*args): ...  # your code here


def placeholder_that_raises(*args):
    """The exercise, not written yet."""
    raise NotImplementedError


@pytest.mark.parametrize("stub", [placeholder, placeholder_that_raises])
@pytest.mark.parametrize(
    ("check", "call", "goal"),
    [
        (models.check_prepare_batch, "prepare_batch(images, labels, device)", "int64 of shape (N,)"),
        (models.check_model_and_optimizer, "make_model_and_optimizer(device)", "an optimizer"),
        (models.check_load_gpu_checkpoint, "load_weights(model, path)", "load the checkpoint"),
    ],
)
def test_an_untouched_exercise_is_not_answered_yet_and_says_what_to_write(stub, check, call, goal):
    hint = check(stub).message
    assert hint.startswith(f"`{call}` is not answered yet") and goal in hint, hint
    assert "forget `return`" not in hint


@pytest.fixture
def own_temp(tmp_path, monkeypatch):
    """A temporary folder of this test's own, where the check writes its checkpoint folder."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _removes_the_folder(model: nn.Module, path) -> None:
    shutil.rmtree(path.parent)


def _loads_with_the_prefix(model: nn.Module, path) -> None:
    model.load_state_dict(torch.load(path, map_location="cpu"))


def _never_returns(model: nn.Module, path) -> None:
    time.sleep(3600)


# What a reader's load_weights may do, and the hint it gets for it.
LOADS = {
    "os._exit": (lambda model, path: os._exit(3), "ended the process it ran in without returning"),
    "SIGTERM": (lambda model, path: os.kill(os.getpid(), signal.SIGTERM), "ended the process it ran in"),
    "sleep": (_never_returns, "did not return within 0.5 s"),
    "raises": (lambda model, path: 1 / 0, "ZeroDivisionError"),
    "removes the folder": (_removes_the_folder, "FileNotFoundError"),
    "keeps the prefix": (_loads_with_the_prefix, "`module.` prefix"),
}


def test_the_checkpoint_folder_is_removed_whatever_the_function_does(own_temp, monkeypatch):
    skip_without_trials()
    checks_on_the_cpu(monkeypatch)
    monkeypatch.setattr(sandbox, "TRIAL_SECONDS", 0.5)
    functions = {kind: fn for kind, (fn, _) in LOADS.items()}
    verdicts, status = verdicts_in_a_kernel(models.check_load_gpu_checkpoint, functions)
    assert os.waitstatus_to_exitcode(status) == 0, f"the kernel ended after {[v['kind'] for v in verdicts]}"
    for verdict, (kind, (_, hint)) in zip(verdicts, LOADS.items(), strict=True):
        assert verdict["kind"] == kind and not verdict["ok"] and hint in verdict["text"], verdict
    assert list(own_temp.iterdir()) == []


def test_model_and_optimizer():
    def right(device):
        model = nn.Linear(4, 2).to(device)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def optimizer_first(device):
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return model.to(device), optimizer

    def not_moved(device):
        model = nn.Linear(4, 2)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    assert models.check_model_and_optimizer(right)
    result = models.check_model_and_optimizer(optimizer_first)
    assert not result and "when it is created" in result.message
    result = models.check_model_and_optimizer(not_moved)
    assert not result and "not all on the device given" in result.message
    assert not models.check_model_and_optimizer(lambda d: (nn.ReLU(), torch.optim.SGD([torch.ones(1)], lr=1)))


def test_load_gpu_checkpoint():
    def right(model, path):
        state = torch.load(path, map_location="cpu")
        consume_prefix_in_state_dict_if_present(state, "module.")
        model.load_state_dict(state)

    def no_map_location(model, path):
        state = torch.load(path)
        consume_prefix_in_state_dict_if_present(state, "module.")
        model.load_state_dict(state)

    def keeps_prefix(model, path):
        model.load_state_dict(torch.load(path, map_location="cpu"))

    def loads_nothing(model, path):
        torch.load(path, map_location="cpu")

    assert models.check_load_gpu_checkpoint(right)
    if not torch.cuda.is_available():
        result = models.check_load_gpu_checkpoint(no_map_location)
        assert not result and "Attempting to deserialize" in result.message
    result = models.check_load_gpu_checkpoint(keeps_prefix)
    assert not result and "Unexpected key(s)" in result.message
    result = models.check_load_gpu_checkpoint(loads_nothing)
    assert not result and "does not hold the saved weights" in result.message


def test_errors_come_with_a_hint_not_only_the_message():
    def raises_value_error(*args):
        raise ValueError("boom")

    result = models.check_prepare_batch(lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).view(4)))
    assert not result and "any batch size" in result.message
    result = models.check_model_and_optimizer(raises_value_error)
    assert not result and "ValueError: boom" in result.message and "no values" in result.message
    result = models.check_load_gpu_checkpoint(raises_value_error)
    assert not result and "ValueError: boom" in result.message and "which step failed" in result.message


def test_load_hints_point_at_the_cause_without_the_fix():
    def keeps_prefix(model, path):
        model.load_state_dict(torch.load(path, map_location="cpu"))

    result = models.check_load_gpu_checkpoint(keeps_prefix)
    assert not result and "Unexpected key(s)" in result.message and "`module.` prefix" in result.message
    assert "consume_prefix" not in result.message
    if not torch.cuda.is_available():
        result = models.check_load_gpu_checkpoint(lambda model, path: model.load_state_dict(torch.load(path)))
        assert not result and "saved on a GPU" in result.message
        assert "map_location=" not in result.message.split("Attempting")[0]


@pytest.mark.parametrize(
    "right",
    [
        lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).view(-1)),
        lambda x, y, d: (x.float().to(d), y.long().to(d).squeeze(1)),
        lambda x, y, d: [x.to(device=d, dtype=torch.float32), y[:, 0].to(d, torch.int64)],
        lambda x, y, d: (x.to(d).float(), y.to(d).flatten().long()),
    ],
)
def test_prepare_batch_equivalent_right_answers_pass(right):
    assert models.check_prepare_batch(right)


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).squeeze()), "a batch of 1"),
        (lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).view(4)), "batch size"),
        (lambda x, y, d: (x.to(d, torch.float32) / 255, y.to(d, torch.long).view(-1)), "do not rescale"),
        (
            lambda x, y, d: (
                x.to(d, torch.float32),
                torch.zeros_like(y, dtype=torch.long, device=d).view(-1),
            ),
            "label",
        ),
        (lambda x, y, d: sys.exit(2), "called sys.exit(2)"),
    ],
)
def test_prepare_batch_wrong_answers(wrong, hint):
    assert_not_yet(models.check_prepare_batch(wrong), hint)


def _meta_written_in(device: torch.device):
    model = nn.Linear(2, 2).to("meta")
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _half_the_model(device: torch.device):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)).to(device)
    return model, torch.optim.SGD(model[0].parameters(), lr=0.1)


def _right_with_adam(device: torch.device):
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    model.to(device)
    return model, torch.optim.Adam(model.parameters())


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (_meta_written_in, "not all on the device given"),
        (_half_the_model, "current parameters"),
        (lambda d: sys.exit(), "called sys.exit()"),
    ],
)
def test_model_and_optimizer_wrong_answers(wrong, hint):
    assert_not_yet(models.check_model_and_optimizer(wrong), hint)


def test_model_and_optimizer_equivalent_right_answer():
    assert models.check_model_and_optimizer(_right_with_adam)


def _rebuilds_the_checks_weights(model: nn.Module, path) -> None:
    torch.manual_seed(1)  # the seed the check once used: the weights must come from the file
    model.load_state_dict(models.exercise_model().state_dict())


def _removes_a_parameter(model: nn.Module, path) -> None:
    model.hidden.weight = None


def _returns_a_new_model(model: nn.Module, path):
    fresh = models.exercise_model()
    state = torch.load(path, map_location="cpu")
    fresh.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    return fresh


def _right_by_hand(model: nn.Module, path) -> None:
    state = torch.load(path, map_location=lambda storage, location: storage, weights_only=True)
    model.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (_rebuilds_the_checks_weights, "does not hold the saved weights"),
        (_removes_a_parameter, "other parameters"),
        (_returns_a_new_model, "returns another model"),
        (lambda model, path: sys.exit(1), "called sys.exit(1)"),
    ],
)
def test_load_gpu_checkpoint_wrong_answers(wrong, hint):
    assert_not_yet(models.check_load_gpu_checkpoint(wrong), hint)


def test_load_gpu_checkpoint_equivalent_right_answer():
    assert models.check_load_gpu_checkpoint(_right_by_hand)


def test_a_chinese_notebook_gets_the_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    wrong = models.check_prepare_batch(lambda x, y, d: (x.float().to(d), y.long().to(d)))
    assert str(wrong).startswith("未通过：对于发送到 meta 的 4 个样本的批量，标签的形状是 (4, 1)")
    assert "cross_entropy 要的是 (4,)" in str(wrong)
    right = models.check_prepare_batch(lambda x, y, d: (x.to(d, torch.float32), y.to(d, torch.long).view(-1)))
    assert str(right).startswith("正确：每个张量调用一次")

    def too_early(device):
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return model.to(device), optimizer

    hint = str(models.check_model_and_optimizer(too_early))
    assert hint.startswith("未通过：优化器持有的不是模型当前的参数")

    def keys_kept(model, path):
        model.load_state_dict(torch.load(path, map_location="cpu"))

    hint = str(models.check_load_gpu_checkpoint(keys_kept))
    assert hint.startswith("未通过：你的函数 load_weights ") and "`module.` 前缀" in hint
