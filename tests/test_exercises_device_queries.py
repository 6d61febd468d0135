"""The checks of notebook 01: right answers pass, typical wrong ones get a hint, never the answer."""

from __future__ import annotations

import pytest
import torch

from course_utils.exercises import device_queries


def _expected() -> torch.device:
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return torch.device(accelerator.type if accelerator is not None else "cpu")


def test_device_choice_right_answer_passes():
    result = device_queries.check_device_choice(_expected())
    assert result and str(result).startswith("Correct: ")


def test_device_choice_that_ignores_the_accelerator_is_caught(monkeypatch):
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda")
    )
    assert device_queries.check_device_choice(torch.device("cuda"))
    result = device_queries.check_device_choice(torch.device("cpu"))
    assert not result and "ignored it" in result.message


def test_device_choice_of_a_device_this_machine_lacks_is_caught():
    missing = "meta" if _expected().type != "meta" else "cpu"
    result = device_queries.check_device_choice(torch.device(missing))
    assert not result and "availability at run time" in result.message


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        ("cpu", "wrap it in torch.device"),
        (0, "expected a torch.device, got a int"),
        (None, "expected a torch.device, got a NoneType"),
        (..., "replace ... with one line"),
    ],
)
def test_device_choice_wrong_kinds_get_a_hint(answer, hint):
    result = device_queries.check_device_choice(answer)
    assert not result and hint in result.message


def test_hidden_gpu_count_right_answer_passes():
    assert device_queries.check_hidden_gpu_count(0)


@pytest.mark.parametrize("wrong", [1, 8, -1, False, "0", None])
def test_hidden_gpu_count_wrong_answers_point_at_the_probe(wrong):
    result = device_queries.check_hidden_gpu_count(wrong)
    assert not result and "rerun the probe cell" in result.message


def test_hidden_gpu_count_placeholder():
    assert str(device_queries.check_hidden_gpu_count(...)).startswith("Not yet: replace ...")
