"""Notebook 01's checks: the device line is run on pretended machines, and wrong lines are named."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from exercise_answers import assert_not_yet, odd_answers

from course_utils.exercises.device_queries import check_device_choice, check_hidden_gpu_count


def accelerator_or_cpu() -> torch.device:
    return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


def accelerator_if_available() -> torch.device:
    return torch.device(
        torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
    )


def hard_coded_cpu() -> torch.device:
    return torch.device("cpu")


def cuda_only() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def hard_coded_cuda() -> torch.device:
    return torch.device("cuda")


@pytest.mark.parametrize("line", [accelerator_or_cpu, accelerator_if_available])
def test_device_agnostic_lines_pass(line):
    result = check_device_choice(line)
    assert result.ok, result


def test_a_hard_coded_cpu_fails_on_every_accelerator():
    result = check_device_choice(hard_coded_cpu)
    assert not result.ok
    for kind in ("cuda", "mps", "xpu"):
        assert f"({kind}) it picks 'cpu', not '{kind}'" in str(result)
    assert "no accelerator" not in str(result)


def test_the_cuda_only_idiom_fails_on_mps_and_xpu_only():
    result = check_device_choice(cuda_only)
    assert not result.ok
    assert "(mps) it picks 'cpu'" in str(result) and "(xpu) it picks 'cpu'" in str(result)
    assert "(cuda) it picks" not in str(result)


def test_a_hard_coded_cuda_fails_where_there_is_no_cuda():
    result = check_device_choice(hard_coded_cuda)
    assert not result.ok and "with no accelerator it picks 'cuda', not 'cpu'" in str(result)


def test_the_patches_are_restored_after_the_check():
    before = (
        torch.accelerator.is_available(),
        torch.cuda.is_available(),
        torch.accelerator.current_accelerator(),
    )
    check_device_choice(hard_coded_cpu)
    raising = check_device_choice(lambda: 1 / 0)  # an error inside a pretended machine still restores
    assert not raising.ok and "on this machine it raised ZeroDivisionError" in str(raising)
    after = (
        torch.accelerator.is_available(),
        torch.cuda.is_available(),
        torch.accelerator.current_accelerator(),
    )
    assert before == after


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (..., "define pick_device()"),
        (torch.device("cpu"), "pass the function pick_device itself"),
        ("cpu", "pass the function pick_device itself"),
        (3, "got a int"),
        (lambda: ..., "`pick_device()` is not answered yet"),
        (lambda: torch.device("cuda") if torch.cuda.is_available() else ..., "replace ... in pick_device"),
        (lambda: "cpu", "wrap it in torch.device"),
        (lambda: 0, "returns a int"),
        (sys.exit, "called sys.exit()"),
        (lambda: torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"), "picks 'cpu'"),
    ],
)
def test_wrong_kinds_of_answer_get_a_hint(answer, says):
    result = check_device_choice(answer)
    assert not result.ok and says in str(result)


def test_hidden_gpu_count_right():
    for right in [0, np.int64(0), torch.tensor(0)]:
        assert check_hidden_gpu_count(right).ok


def test_hidden_gpu_count_wrong():
    for wrong in [8, 1, False, 0.0, "0", ..., *odd_answers(), np.zeros(2)]:
        assert_not_yet(check_hidden_gpu_count(wrong))


def test_the_chinese_notebook_gets_hints_and_verdicts_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")  # the Chinese punctuation is left out of the literals

    def cuda_only() -> torch.device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")

    hint = str(check_device_choice(cuda_only))
    assert hint.startswith("未通过") and "在搭载 Apple 芯片的 Mac" in hint and "它选了 'cpu'" in hint
    assert "请在运行时询问这个 PyTorch 能用哪个加速器" in hint

    def raises() -> torch.device:
        raise KeyError("device")

    hint = str(check_device_choice(raises))
    assert hint.startswith("未通过") and "在本机上" in hint and "它抛出了 KeyError" in hint
    hint = str(check_hidden_gpu_count("0"))
    assert hint.startswith("未通过") and "设备数应当是整数" in hint and "不要加引号" in hint
    assert str(check_hidden_gpu_count(0)).startswith("正确")
    right = str(
        check_device_choice(
            lambda: torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
        )
    )
    assert right.startswith("正确") and "你的这一行在 CUDA" in right
