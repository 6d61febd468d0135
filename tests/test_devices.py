"""The device helpers: best device, devices of a module, where operations run."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils import devices
from course_utils.devices import (
    aten_ops,
    best_device,
    module_devices,
    use_pin_memory,
)


def test_best_device_follows_torch_accelerator():
    if torch.accelerator.is_available():
        assert best_device().type == torch.accelerator.current_accelerator().type
        assert best_device().index is not None
    else:
        assert best_device() == torch.device("cpu")


def test_best_device_carries_the_current_index(monkeypatch):
    monkeypatch.setattr(
        devices.torch.accelerator, "current_accelerator", lambda check_available: torch.device("cuda")
    )
    monkeypatch.setattr(devices.torch.accelerator, "current_device_index", lambda: 1)
    assert best_device() == torch.device("cuda", 1)


def test_best_device_is_the_cpu_without_an_accelerator(monkeypatch):
    monkeypatch.setattr(devices.torch.accelerator, "current_accelerator", lambda check_available: None)
    assert best_device() == torch.device("cpu")
    assert best_device().index is None


def test_module_devices_finds_every_device_a_module_uses():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    assert module_devices(model) == {torch.device("cpu")}
    model[1].to("meta")  # half moved: the bug module_devices exists to show
    assert module_devices(model) == {torch.device("cpu"), torch.device("meta")}
    assert module_devices(nn.ReLU()) == set()


def test_module_devices_rejects_what_is_not_a_module():
    with pytest.raises(TypeError, match=r"expects an nn\.Module, got Tensor"):
        module_devices(torch.ones(1))


def test_pin_memory_only_for_accelerators_that_support_it(monkeypatch):
    for device in ("cpu", "meta", "mps", torch.device("mps", 0)):
        assert use_pin_memory(device) is False
    assert use_pin_memory("cuda:0") is torch.accelerator.is_available()
    monkeypatch.setattr(devices.torch.accelerator, "is_available", lambda: True)
    assert use_pin_memory("cuda:0") is True
    assert use_pin_memory(torch.device("xpu", 0)) is True
    monkeypatch.setattr(devices.torch.accelerator, "is_available", lambda: False)
    assert use_pin_memory("cuda") is False


def test_aten_ops_shows_a_copy_and_its_absence():
    assert aten_ops(lambda: torch.zeros(2, device="meta")) == ["aten.zeros"]
    assert aten_ops(lambda: torch.zeros(2).to("meta")) == ["aten.zeros", "aten._to_copy"]
    t = torch.ones(2)
    assert aten_ops(lambda: t.to("cpu")) == []  # already there: nothing runs
    pixels = torch.zeros(2, dtype=torch.uint8)
    assert aten_ops(lambda: pixels.float().to("meta")) == ["aten._to_copy", "aten._to_copy"]
    assert aten_ops(lambda: pixels.to("meta", torch.float32)) == ["aten._to_copy"]


def test_aten_ops_returns_what_ran_and_needs_a_function():
    assert aten_ops(lambda: torch.ones(3) * 2) == ["aten.ones", "aten.mul"]
    with pytest.raises(TypeError, match="needs a function to call"):
        aten_ops(torch.zeros(2))


@pytest.mark.parametrize("device", [None, 0.5, ["cuda"]])
def test_pin_memory_needs_a_device(device):
    with pytest.raises(TypeError, match=r"device must be a torch\.device or a string"):
        use_pin_memory(device)


@pytest.mark.parametrize("device", ["", "x", "cuda:-1x"])
def test_use_pin_memory_refuses_a_device_string_that_names_no_device(device):
    with pytest.raises(ValueError, match="device must name a device such as 'cuda:0'"):
        devices.use_pin_memory(device)


def test_a_bad_device_is_explained_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(TypeError, match=r"^module_devices 需要一个 nn.Module，得到的是 str$"):
        module_devices("model")
