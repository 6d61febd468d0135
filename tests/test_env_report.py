"""The environment report collects what the course needs to know and never raises."""

from __future__ import annotations

import sys

import torch

from course_utils import env_report
from course_utils.env_report import environment_report


def test_report_matches_this_machine(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3")
    report = environment_report()
    assert report.torch_version == torch.__version__
    assert report.python_version == ".".join(map(str, sys.version_info[:3]))
    assert report.accelerator_count == torch.accelerator.device_count()
    assert len(report.device_names) == report.accelerator_count
    assert report.cuda_visible_devices == "0,3"
    assert 1 <= report.usable_cpu_cores <= report.cpu_cores
    assert report.ram_bytes > 2**28
    assert report.ipywidgets_version is not None


def test_cpu_only_machine_is_described_plainly(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    report = environment_report()
    rows = dict(report.rows())
    assert report.accelerator is None and report.device_names == ()
    assert rows["Accelerator (torch.accelerator)"] == "none: running on the CPU"
    assert rows["CUDA_VISIBLE_DEVICES"] == "(not set)"
    if torch.version.cuda is None:
        assert rows["PyTorch built with CUDA"] == "no (CPU-only build)"


def test_report_text_has_one_line_per_row():
    report = environment_report()
    text = str(report)
    assert len(text.splitlines()) == len(report.rows())
    assert text.splitlines()[1].startswith("PyTorch ")


def test_missing_ipywidgets_is_reported(monkeypatch):
    monkeypatch.setattr(env_report, "_version_of", lambda name: None)
    rows = dict(environment_report().rows())
    assert rows["ipywidgets"].startswith("missing")


def test_device_names_for_accelerators_without_a_name_query():
    assert env_report._device_names(None, 0) == ()
    assert env_report._device_names("meta", 2) == ("meta:0", "meta:1")
