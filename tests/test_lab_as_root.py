"""`course.py lab` as root (Docker, WSL, cloud shells) passes --allow-root to JupyterLab and says so once."""

from __future__ import annotations

from pathlib import Path

import course


def test_root_gets_allow_root_and_is_told_once(capsys):
    command = course.lab_command(Path("python"), [], euid=0)
    assert command[-2:] == ["notebooks/00_start_here.ipynb", "--allow-root"]
    assert capsys.readouterr().out == "Running as root: starting JupyterLab with --allow-root.\n"


def test_other_users_and_windows_start_jupyterlab_unchanged(capsys):
    for euid in (1000, None):
        command = course.lab_command(Path("python"), ["notebooks/05_data_parallel.ipynb"], euid=euid)
        assert command == ["python", "-m", "jupyterlab", "notebooks/05_data_parallel.ipynb"]
    assert capsys.readouterr().out == ""


def test_allow_root_given_by_the_user_is_not_doubled(capsys):
    command = course.lab_command(Path("python"), ["--allow-root"], euid=0)
    assert command.count("--allow-root") == 1
    assert capsys.readouterr().out == ""


def test_main_passes_the_real_user_id(monkeypatch):
    started = []
    monkeypatch.setattr(course, "ensure_environment", lambda: Path("python"))
    monkeypatch.setattr(course, "run", lambda cmd, **kw: started.append(cmd) or 0)
    monkeypatch.setattr(course.os, "geteuid", lambda: 0, raising=False)
    assert course.main(["lab"]) == 0
    assert started[0][-1] == "--allow-root"


def test_chinese_students_are_told_in_chinese(capsys, monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    course.lab_command(Path("python"), [], euid=0)
    assert capsys.readouterr().out == "以 root 身份运行：启动 JupyterLab 时加上 --allow-root。\n"
