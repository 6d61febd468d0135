"""`course.py test --torch VERSION` and `--stress`: arguments, environment names, the load; no downloads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import stress
import torch_matrix

import course

ROOT = Path(__file__).resolve().parent.parent


def test_a_release_and_pytest_arguments():
    request = torch_matrix.parse(["--torch", "2.14.1", "notebooks/", "-x"])
    assert request == torch_matrix.Request("2.14.1", None, ("notebooks/", "-x"))
    assert request.env_name == ".venv-torch-2.14.1"


@pytest.mark.parametrize("build", ["cuda", "cpu"])
def test_a_build_gets_its_own_environment(build):
    request = torch_matrix.parse(["--torch", "2.13.0", f"--{build}"])
    assert request.build == build and request.pytest_args == ()
    assert request.env_name == f".venv-torch-2.13.0-{build}"


def test_another_python_gets_its_own_environment():
    request = torch_matrix.parse(["--torch", "2.13.0", "--python", "3.12", "--cuda", "-k", "env"])
    assert request == torch_matrix.Request("2.13.0", "cuda", ("-k", "env"), "3.12")
    assert request.env_name == ".venv-torch-2.13.0-cuda-py3.12"


def test_a_python_that_cannot_make_the_environment_says_so_and_leaves_nothing(tmp_path, monkeypatch):
    broken = tmp_path / "python3.12"  # as a pyenv shim for a version that is not selected
    # It starts the environment's folder ("-m venv PATH": $3), then fails as a missing shim does.
    broken.write_text('#!/bin/sh\nmkdir -p "$3"\necho "pyenv: python3.12: command not found" >&2\nexit 127\n')
    broken.chmod(0o755)
    monkeypatch.setattr(torch_matrix.shutil, "which", lambda name: str(broken))
    request = torch_matrix.parse(["--torch", "2.13.0", "--python", "3.12"])
    with pytest.raises(SystemExit) as info:
        torch_matrix.ensure_env(request, root=tmp_path)
    assert "could not create .venv-torch-2.13.0-py3.12/" in str(info.value.code)
    assert "PYENV_VERSION" in str(info.value.code)
    assert not (tmp_path / request.env_name).exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--torch", "2.13.0", "--python"], "--python: expected one argument"),
        (["--torch", "2.13.0", "--python", "python3.12"], "minor version such as 3.12"),
        (["--torch"], "--torch: expected one argument"),
        (["--cuda", "notebooks/"], "the following arguments are required: --torch"),
        (["--torch", "2.14"], "full release number"),
        (["--torch", "latest"], "full release number"),
        (["--torch", "2.14.1", "--cuda", "--cpu"], "not allowed with argument --cuda"),
    ],
)
def test_bad_arguments_say_what_to_pass(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        torch_matrix.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("usage: python3 course.py test --torch VERSION")


def test_pytest_arguments_that_look_like_ours_reach_pytest():
    request = torch_matrix.parse(["--torch", "2.14.1", "--py", "-k", "cpu", "-n", "0"])
    assert request.pytest_args == ("--py", "-k", "cpu", "-n", "0") and request.build is None


def test_the_script_has_help(capsys):
    with pytest.raises(SystemExit) as info:
        torch_matrix.main(["--help"])
    assert info.value.code == 0
    assert "--cuda" in capsys.readouterr().out


def test_an_install_that_fails_leaves_no_environment(tmp_path, monkeypatch, capsys):
    """The environment this run created goes when pip fails; one that existed before stays."""
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    made = []

    def create(builder, env):
        made.append(env)
        _fake_env(env)

    monkeypatch.setattr(torch_matrix.venv.EnvBuilder, "create", create)

    def failing_pip(python, *args):
        assert (tmp_path / ".venv-torch-2.99.0").is_dir(), "the environment exists while pip runs"
        raise SystemExit("Installing the course failed (pip exit status 1); see above.")

    monkeypatch.setattr(torch_matrix, "install", failing_pip)
    request = torch_matrix.parse(["--torch", "2.99.0"])
    with pytest.raises(SystemExit, match="pip exit status 1"):
        torch_matrix.ensure_env(request, root=tmp_path)
    assert made and not (tmp_path / request.env_name).exists()
    assert "Removed .venv-torch-2.99.0/" in capsys.readouterr().err
    _fake_env(tmp_path / request.env_name)  # made by an earlier run: a failed update keeps it
    with pytest.raises(SystemExit):
        torch_matrix.ensure_env(request, root=tmp_path)
    assert (tmp_path / request.env_name).is_dir() and len(made) == 1


def _fake_env(env: Path) -> None:
    python = torch_matrix.env_python(env)
    python.parent.mkdir(parents=True)
    python.touch()


def test_the_pin_is_replaced_and_everything_else_kept():
    reqs = torch_matrix.requirements(torch_matrix.parse(["--torch", "2.14.1"]), ROOT / "pyproject.toml")
    assert "torch==2.14.1" in reqs
    assert not [r for r in reqs if r.startswith("torch") and r != "torch==2.14.1"]
    assert "psutil>=5.9" in reqs and "pytest>=8.2" in reqs and "nbval>=0.11" in reqs
    # the course's own extras are spelt out: pip cannot install `pytorch-on-gpus-hands-on[site]` from an index
    assert not [r for r in reqs if r.startswith("pytorch-on-gpus-hands-on")]
    assert any(r.startswith("sphinx>") for r in reqs)
    cpu = torch_matrix.requirements(
        torch_matrix.parse(["--torch", "2.14.1", "--cpu"]), ROOT / "pyproject.toml"
    )
    assert cpu[:3] == ["--extra-index-url", torch_matrix.CPU_INDEX, "torch==2.14.1+cpu"]


def test_a_pyproject_without_one_torch_pin_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["numpy"]\n[project.optional-dependencies]\ntest = []\n'
    )
    with pytest.raises(ValueError, match="one torch requirement"):
        torch_matrix.requirements(torch_matrix.parse(["--torch", "2.14.1"]), tmp_path / "pyproject.toml")


def test_course_py_hands_other_releases_to_the_script_before_any_set_up(monkeypatch):
    calls = []
    monkeypatch.setattr(course, "run", lambda cmd: calls.append(cmd) or 0)
    monkeypatch.setattr(course, "ensure_environment", lambda: pytest.fail("--torch must not set up .venv"))
    assert course.main(["test", "--torch", "2.14.1", "--cuda", "notebooks/"]) == 0
    assert calls == [[sys.executable, "scripts/torch_matrix.py", "--torch", "2.14.1", "--cuda", "notebooks/"]]


def test_course_py_runs_the_stress_script_in_the_course_environment(monkeypatch):
    calls = []
    monkeypatch.setattr(course, "run", lambda cmd: calls.append(cmd) or 0)
    monkeypatch.setattr(course, "ensure_environment", lambda: Path("venv-python"))
    assert course.main(["test", "--stress", "--rounds", "2"]) == 0
    assert calls == [[Path("venv-python"), "scripts/stress.py", "--rounds", "2"]]


@pytest.mark.parametrize(
    ("argv", "rounds"),
    [([], 3), (["--rounds", "5"], 5), (["--rounds", "1"], 1)],
)
def test_stress_rounds(argv, rounds):
    assert stress.parser().parse_args(argv).rounds == rounds


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "whole number of at least 1, not '0'"),
        (["--rounds"], "expected one argument"),
        (["-n", "2"], "unrecognized arguments: -n 2"),
    ],
)
def test_bad_stress_arguments_say_what_to_pass(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        stress.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("usage: python3 course.py test --stress")


def _notebook(path: Path, course_block: object) -> None:
    path.write_text(json.dumps({"cells": [], "metadata": {"course": course_block}}))


def test_the_process_notebooks_come_from_their_metadata(tmp_path):
    _notebook(tmp_path / "01_quiet.ipynb", {"starts_processes": False})
    _notebook(tmp_path / "06_spawns.ipynb", {"starts_processes": True})
    _notebook(tmp_path / "03_spawns_too.ipynb", {"starts_processes": True})
    assert stress.process_notebooks(tmp_path) == [
        tmp_path / "03_spawns_too.ipynb",
        tmp_path / "06_spawns.ipynb",
    ]
    _notebook(tmp_path / "07_unsaid.ipynb", {})
    with pytest.raises(ValueError, match=r"07_unsaid\.ipynb has no `course\.starts_processes`"):
        stress.process_notebooks(tmp_path)


def test_the_course_has_process_notebooks():
    names = [path.name for path in stress.process_notebooks(ROOT / "notebooks")]
    assert "06_distributed_data_parallel.ipynb" in names
    assert "00_start_here.ipynb" not in names


def test_the_load_spins_and_is_stopped_on_leaving():
    with stress.cpu_load(2, limit_s=60) as procs:
        assert len(procs) == 2 and all(proc.poll() is None for proc in procs)
    assert all(proc.returncode is not None for proc in procs)


def test_the_load_stops_by_itself_at_its_limit():
    with stress.cpu_load(1, limit_s=0.5) as (proc,):
        assert proc.wait(timeout=30) == 0
