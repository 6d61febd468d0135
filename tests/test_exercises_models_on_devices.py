"""The checks of notebook 03: right answers pass, typical wrong ones get a hint."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises import models_on_devices as models


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


def test_placeholders_get_a_return_hint():
    assert "forget `return`" in models.check_prepare_batch(lambda x, y, d: None).message
    assert "forget `return`" in models.check_model_and_optimizer(lambda d: None).message
    assert "returned a Tensor" in models.check_prepare_batch(lambda x, y, d: x).message


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
