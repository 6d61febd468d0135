"""The supported PyTorch range: pyproject.toml, the package's copy, the install routes, the report."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import torch

from course_utils.env_report import environment_report, torch_support
from course_utils.setup import SUPPORTED_TORCH, torch_in_range

ROOT = Path(__file__).resolve().parent.parent
RANGE = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]["supported-torch"]


def pinned_torch() -> str:
    """pyproject.toml's torch requirement, e.g. 'torch==2.13.*'."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [dep for dep in deps if re.match(r"torch\W", dep)]
    return pin


def test_the_package_carries_the_range_that_pyproject_declares():
    assert SUPPORTED_TORCH == RANGE, "change course_utils.setup.SUPPORTED_TORCH with [tool.course]"
    assert re.fullmatch(r">=\d+\.\d+,<\d+\.\d+", RANGE), "write the range as '>=FLOOR,<CEILING'"


def test_the_pinned_release_lies_in_the_range_and_binder_installs_it():
    pin = pinned_torch()
    assert re.fullmatch(r"torch==\d+\.\d+\.\*", pin)
    assert torch_in_range(pin.removeprefix("torch==").removesuffix(".*"), RANGE)
    binder = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    assert [line for line in binder if line.startswith("torch")] == [pin]


def test_conda_installs_a_release_of_the_range():
    lines = (ROOT / "environment.yml").read_text().splitlines()
    assert [line.strip() for line in lines if line.strip().startswith("- pytorch")] == [f"- pytorch{RANGE}"]


@pytest.mark.parametrize(
    ("version", "inside"),
    [
        ("2.13.0+cpu", True),
        ("2.13", True),
        ("2.14.1+cu130", True),
        ("2.15.0", True),
        ("2.12.1", True),
        ("2.9.1+cu128", True),
        ("2.9", True),
        ("2.8.0", False),
        ("2.16.0.dev20260101", False),
        ("2.16.0", False),
        ("3.0.0", False),
        ("1.13.1", False),
    ],
)
def test_versions_against_a_range(version, inside):
    assert torch_in_range(version, ">=2.9,<2.16") is inside


def test_more_operators_and_bad_input():
    assert torch_in_range("2.14.0", "==2.14")
    assert not torch_in_range("2.14.1", "==2.14")
    assert torch_in_range("2.14.1", ">2.14,<=2.14.1")
    with pytest.raises(ValueError, match="write it like"):
        torch_in_range("2.14.0", "~=2.14")
    with pytest.raises(ValueError, match=r"torch\.__version__"):
        torch_in_range("nightly", ">=2.13")


def test_one_line_for_a_supported_and_an_unsupported_release():
    assert torch_support("2.14.1", ">=2.13,<2.16") == "2.14.1 (in the course's supported range >=2.13,<2.16)"
    line = torch_support("2.11.0", ">=2.13,<2.16")
    assert "\n" not in line
    assert "NOT in the course's supported range >=2.13,<2.16" in line
    assert 'pip install "torch>=2.13,<2.16"' in line and "python3 course.py lab" in line


def test_the_report_shows_the_range(monkeypatch):
    rows = dict(environment_report().rows())
    assert rows["PyTorch"] == torch_support(torch.__version__, RANGE)
    monkeypatch.setattr(torch, "__version__", "2.8.0+cu126")
    rows = dict(environment_report().rows())
    assert rows["PyTorch"].startswith("2.8.0+cu126: NOT in the course's supported range")
