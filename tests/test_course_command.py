"""course.py, the README's entry point: a failed first set-up leaves nothing half-made behind."""

from __future__ import annotations

import subprocess
import venv

import pytest

import course


def test_a_venv_that_cannot_be_created_is_removed_and_the_fix_named(tmp_path, monkeypatch):
    target = tmp_path / ".venv"
    monkeypatch.setattr(course, "VENV", target)

    def half_made(self, env_dir):
        (target / "bin").mkdir(parents=True)
        (target / "bin" / "python").touch()  # what a failed ensurepip leaves behind
        raise subprocess.CalledProcessError(1, ["python", "-m", "ensurepip"])

    monkeypatch.setattr(venv.EnvBuilder, "create", half_made)
    with pytest.raises(SystemExit, match="sudo apt install python3-venv"):
        course.ensure_environment()
    assert not target.exists()


def test_an_unknown_command_prints_the_usage():
    assert course.main(["frobnicate"]) == 2
