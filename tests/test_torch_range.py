"""The supported PyTorch range: one place (pyproject.toml), the install routes that use it, the report."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import torch

from course_utils import env_report
from course_utils.env_report import environment_report, supported_torch, torch_in_range, torch_support

ROOT = Path(__file__).resolve().parent.parent
RANGE = supported_torch()


def pinned_torch() -> str:
    """pyproject.toml's torch requirement, e.g. 'torch==2.13.*'."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [dep for dep in deps if re.match(r"torch\W", dep)]
    return pin


def test_the_range_is_read_from_pyproject():
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
    assert RANGE == table["supported-torch"]
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


def test_a_missing_range_says_how_to_install(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(ValueError, match="pip install -e"):
        supported_torch(tmp_path / "pyproject.toml")
    with pytest.raises(ValueError, match="pip install -e"):
        supported_torch(tmp_path / "absent.toml")


@pytest.mark.parametrize(
    ("version", "inside"),
    [
        ("2.13.0+cpu", True),
        ("2.13", True),
        ("2.14.1+cu130", True),
        ("2.15.0", True),
        ("2.12.1", False),
        ("2.16.0.dev20260101", False),
        ("2.16.0", False),
        ("3.0.0", False),
        ("1.13.1", False),
    ],
)
def test_versions_against_a_range(version, inside):
    assert torch_in_range(version, ">=2.13,<2.16") is inside


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
    monkeypatch.setattr(torch, "__version__", "2.9.1+cu126")
    rows = dict(environment_report().rows())
    assert rows["PyTorch"].startswith("2.9.1+cu126: NOT in the course's supported range")


def test_the_report_without_pyproject_still_answers(monkeypatch, tmp_path):
    monkeypatch.setattr(env_report, "PYPROJECT", tmp_path / "pyproject.toml")
    report = environment_report()
    assert report.supported_torch is None
    assert "supported range unknown" in dict(report.rows())["PyTorch"]
