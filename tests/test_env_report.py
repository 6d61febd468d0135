"""The environment report collects what the course needs to know and never raises."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from course_utils import env_report
from course_utils.env_report import CgroupLimits, environment_report, read_cgroup_limits
from course_utils.gpus import Inventory, demo_inventory
from course_utils.i18n import display_width


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


# --- NVML row -------------------------------------------------------------------------------------


def test_nvml_row_without_a_driver_gives_the_reason(monkeypatch):
    reason = "NVML library not found: this machine has no NVIDIA driver"
    monkeypatch.setattr(env_report, "nvml_inventory", lambda: Inventory(reason=reason))
    report = environment_report()
    rows = dict(report.rows())
    assert rows["NVML"] == f"unavailable: {reason}"
    assert any(line.startswith("NVML ") and line.endswith(reason) for line in str(report).splitlines())


def test_nvml_row_with_gpus_gives_driver_and_count(monkeypatch):
    fleet = demo_inventory()
    fleet = Inventory(gpus=fleet.gpus[:3], driver_version="550.54.15")
    monkeypatch.setattr(env_report, "nvml_inventory", lambda: fleet)
    report = environment_report()
    assert report.nvml is fleet
    assert dict(report.rows())["NVML"] == "driver 550.54.15, 3 GPU(s)"


# --- device names on an accelerator ------------------------------------------------------------


def fake_cuda_machine(monkeypatch, count: int) -> None:
    """Make torch.accelerator and torch.cuda answer as on a machine with `count` NVIDIA GPUs."""
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda")
    )
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"Fake GPU {i}")


def test_device_names_asks_the_accelerators_backend(monkeypatch):
    fake_cuda_machine(monkeypatch, 2)
    assert env_report._device_names("cuda", 2) == ("Fake GPU 0", "Fake GPU 1")


def test_report_on_a_gpu_machine_names_its_gpus(monkeypatch):
    fake_cuda_machine(monkeypatch, 2)
    rows = dict(environment_report().rows())
    assert rows["Accelerator (torch.accelerator)"] == "cuda"
    assert rows["Accelerator devices"] == "2"
    assert rows["Device names"] == "Fake GPU 0, Fake GPU 1"


# --- container limits (cgroups) ---------------------------------------------------------------


def fake_v2(tmp_path: Path, memory_max: str | None, cpu_max: str | None, own: str = "/") -> tuple[Path, Path]:
    """A cgroup v2 tree as a container sees it (its own cgroup at the root), and a /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    group = root.joinpath(*[p for p in own.split("/") if p])
    group.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    if memory_max is not None:
        (group / "memory.max").write_text(memory_max + "\n")
    if cpu_max is not None:
        (group / "cpu.max").write_text(cpu_max + "\n")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text(f"0::{own}\n")
    return root, proc


def fake_v1(tmp_path: Path, limit: str, quota: str, period: str = "100000") -> tuple[Path, Path]:
    """A cgroup v1 tree with a process in /docker/abc, as a host sees it."""
    root = tmp_path / "cgroup"
    memory = root / "memory" / "docker" / "abc"
    cpu = root / "cpu,cpuacct" / "docker" / "abc"
    memory.mkdir(parents=True)
    cpu.mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (memory / "memory.limit_in_bytes").write_text(limit + "\n")
    (root / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_quota_us").write_text(quota + "\n")
    (cpu / "cpu.cfs_period_us").write_text(period + "\n")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    return root, proc


def test_cgroup_v2_limits_are_read(tmp_path):
    root, proc = fake_v2(tmp_path, str(2 * 2**30), "150000 100000")
    assert read_cgroup_limits(root, proc) == CgroupLimits(memory_bytes=2 * 2**30, cpus=1.5)


def test_cgroup_v2_max_means_no_limit(tmp_path):
    root, proc = fake_v2(tmp_path, "max", "max 100000")
    assert read_cgroup_limits(root, proc) == CgroupLimits()


def test_cgroup_v2_parent_limit_applies_to_the_process(tmp_path):
    root, proc = fake_v2(tmp_path, str(8 * 2**30), None, own="/kubepods/pod1/ctr")
    (root / "kubepods" / "pod1" / "memory.max").write_text(str(3 * 2**30))
    (root / "kubepods" / "cpu.max").write_text("50000 100000")
    assert read_cgroup_limits(root, proc) == CgroupLimits(memory_bytes=3 * 2**30, cpus=0.5)


def test_cgroup_v1_limits_are_read_from_the_process_cgroup(tmp_path):
    root, proc = fake_v1(tmp_path, str(2**30), "200000")
    assert read_cgroup_limits(root, proc) == CgroupLimits(memory_bytes=2**30, cpus=2.0)


def test_cgroup_v1_huge_limit_and_minus_one_quota_mean_none(tmp_path):
    root, proc = fake_v1(tmp_path, "9223372036854771712", "-1")
    assert read_cgroup_limits(root, proc) == CgroupLimits()


def test_missing_or_garbled_cgroup_files_mean_no_limits(tmp_path):
    assert read_cgroup_limits(tmp_path / "nowhere", tmp_path / "nothing") == CgroupLimits()
    root, proc = fake_v2(tmp_path, "lots", "fast please")
    assert read_cgroup_limits(root, proc) == CgroupLimits()


def test_report_shows_the_container_limits_not_the_host(tmp_path, monkeypatch):
    root, proc = fake_v2(tmp_path, str(2 * 2**30), "100000 100000")
    monkeypatch.setattr(env_report.psutil, "virtual_memory", lambda: SimpleNamespace(total=64 * 2**30))
    monkeypatch.setattr(env_report.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(env_report.os, "cpu_count", lambda: 32)
    report = environment_report(cgroup_root=root, proc_self_cgroup=proc)
    rows = dict(report.rows())
    assert rows["RAM"] == "2.0 GiB (container limit; host has 64.0 GiB)"
    assert rows["CPU cores (usable / total)"] == "1 / 32 (container CPU quota; the affinity mask allows 16)"
    assert report.usable_ram_bytes == 2 * 2**30


def test_report_ignores_limits_above_what_the_host_has(tmp_path, monkeypatch):
    root, proc = fake_v2(tmp_path, str(128 * 2**30), "800000 100000")
    monkeypatch.setattr(env_report.psutil, "virtual_memory", lambda: SimpleNamespace(total=64 * 2**30))
    monkeypatch.setattr(env_report.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(env_report.os, "cpu_count", lambda: 2)
    rows = dict(environment_report(cgroup_root=root, proc_self_cgroup=proc).rows())
    assert rows["RAM"] == "64.0 GiB"
    assert rows["CPU cores (usable / total)"] == "2 / 2"


def test_cgroup_paths_may_be_text_and_anything_else_is_refused(tmp_path):
    assert read_cgroup_limits(str(tmp_path), str(tmp_path / "cgroup")) == CgroupLimits()
    with pytest.raises(
        TypeError, match=r"root must be the path of a file or folder \(a str or a Path\).*not 3"
    ):
        read_cgroup_limits(3)
    with pytest.raises(TypeError, match="proc_self_cgroup must be the path of a file or folder"):
        environment_report(tmp_path, None)
    with pytest.raises(ValueError, match="cgroup_root holds a NUL character"):
        environment_report("/sys\0")  # named as environment_report calls it, not as it passes it on
    with pytest.raises(ValueError, match="root is empty"):
        read_cgroup_limits("")


def test_the_chinese_notebook_gets_the_report_in_chinese_with_its_values_kept(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")  # the Chinese punctuation is left out of the literals
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    report = environment_report()
    rows = report.rows()
    labels = [label for label, _ in rows]
    assert labels[:2] == ["Python", "PyTorch"] and "NVML" in labels and "CUDA_VISIBLE_DEVICES" in labels
    values = dict(rows)
    accelerator = next(label for label in labels if label.startswith("加速器"))
    assert "torch.accelerator" in accelerator and values[accelerator].startswith("无")
    assert "未设置" in values["CUDA_VISIBLE_DEVICES"]
    assert values["PyTorch"].startswith(torch.__version__) and "在课程支持的范围" in values["PyTorch"]
    assert values["Python"] == report.python_version
    # A Chinese character takes two columns: the values still start in one column.
    lines = str(report).splitlines()
    assert len(lines) == len(rows)
    starts = {display_width(line[: line.index(value)]) for line, (_, value) in zip(lines, rows, strict=True)}
    assert len(starts) == 1
    container = dataclasses.replace(report, ram_bytes=64 * 2**30, ram_limit_bytes=2 * 2**30)
    ram = dict(container.rows())["内存"]
    assert ram.startswith("2.0 GiB") and "容器上限" in ram and "宿主机有 64.0 GiB" in ram
