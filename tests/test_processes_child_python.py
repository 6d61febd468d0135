"""run_python runs a snippet in a fresh Python and reads its final error without machine paths."""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
from pathlib import Path

import pytest
from processes import wait_until_gone

from course_utils.devices import HIDE_GPUS
from course_utils.processes import (
    ChildPythonError,
    ChildRun,
    last_error_line,
    mask_machine_paths,
    run_python,
    shorten_builtin_modules,
)


def notebook_function() -> None:
    """Stands in for a function defined in a notebook; pickled under a __main__ reference below."""


def test_a_child_that_succeeds_gives_its_stdout_and_no_error():
    child = run_python("print('hello from the child')")
    assert child == ChildRun(returncode=0, stdout="hello from the child\n", error=None)
    assert child.ok


def test_a_child_that_raises_gives_the_last_traceback_line():
    child = run_python("def f():\n    raise ValueError('bad value')\nf()")
    assert not child.ok
    assert child.returncode == 1
    assert child.error == "ValueError: bad value"


def test_env_sets_and_removes_variables_for_the_child_only(monkeypatch):
    monkeypatch.setenv("COURSE_TEST_VAR", "parent")
    code = "import os; print(os.environ.get('COURSE_TEST_VAR'), os.environ.get('COURSE_OTHER_VAR'))"
    assert run_python(code).stdout == "parent None\n"
    assert run_python(code, env={"COURSE_TEST_VAR": None, "COURSE_OTHER_VAR": "x"}).stdout == "None x\n"
    assert os.environ["COURSE_TEST_VAR"] == "parent"
    assert "COURSE_OTHER_VAR" not in os.environ


def test_setdefault_keeps_a_preset_value_as_seed_002_shows():
    code = (
        "import os; os.environ.setdefault('CUDA_VISIBLE_DEVICES', '3,6'); "
        "print(os.environ['CUDA_VISIBLE_DEVICES'])"
    )
    assert run_python(code, env={"CUDA_VISIBLE_DEVICES": None}).stdout == "3,6\n"
    assert run_python(code, env={"CUDA_VISIBLE_DEVICES": "7"}).stdout == "7\n"


def test_stdin_carries_a_pickle_and_a_main_function_cannot_be_found():
    payload = b"c__main__\nnotebook_function\n."  # the GLOBAL a notebook function pickles to
    assert pickle.loads(payload.replace(b"__main__", __name__.encode())) is notebook_function
    child = run_python("import pickle, sys; pickle.loads(sys.stdin.buffer.read())", stdin=payload)
    # Python 3.11 ends the line with "(built-in)>", 3.12+ with "(<class '...BuiltinImporter'>)>":
    # run_python writes both as <module '__main__'>.
    assert child.error == "AttributeError: Can't get attribute 'notebook_function' on <module '__main__'>"


@pytest.mark.parametrize(
    "loader",
    ["(built-in)", "(<class '_frozen_importlib.BuiltinImporter'>)"],  # Python 3.11; 3.12 and later
)
def test_builtin_modules_read_the_same_on_every_python(loader):
    prefix = "AttributeError: Can't get attribute 'work' on "
    assert shorten_builtin_modules(f"{prefix}<module '__main__' {loader}>") == f"{prefix}<module '__main__'>"
    kept = "<module 'os' from 'os.py'> and <module 'x' (namespace)>"  # not built-in: unchanged
    assert shorten_builtin_modules(kept) == kept
    with pytest.raises(TypeError, match="expects a str"):
        shorten_builtin_modules(None)


def test_error_lines_have_no_machine_paths():
    folder = tempfile.mkdtemp()
    try:
        path = Path(folder) / "missing.pt"
        child = run_python(f"open({str(path)!r})")
        assert child.error.startswith("FileNotFoundError: [Errno 2] No such file or directory: ")
        assert folder not in child.error
        assert "<tmp>" in child.error
    finally:
        os.rmdir(folder)


def test_mask_machine_paths_replaces_the_longest_known_path_first():
    import sysconfig

    purelib = sysconfig.get_paths()["purelib"]
    assert mask_machine_paths(f"File {purelib}/torch/x.py") == "File <packages>/torch/x.py"
    assert mask_machine_paths(f"run {sys.executable} -c") == "run <python> -c"
    assert mask_machine_paths("nothing to hide") == "nothing to hide"
    with pytest.raises(TypeError, match="expects a str"):
        mask_machine_paths(b"bytes")


def test_last_error_line_reads_tracebacks_chains_and_plain_text():
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        "    f()\n"
        "    ^^^\n"
        "KeyError: 'a'\n"
        "\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "<string>", line 3, in <module>\n'
        "ValueError: second\n"
        "with a second line\n"
    )
    assert last_error_line(traceback) == "ValueError: second"
    syntax = "  File \"<string>\", line 1\n    x = (\n        ^\nSyntaxError: '(' was never closed\n"
    assert last_error_line(syntax) == "SyntaxError: '(' was never closed"
    assert last_error_line("") is None
    assert last_error_line("Traceback (most recent call last):\n") is None


def test_a_child_that_exits_without_a_traceback_says_so():
    child = run_python("import sys; sys.exit(3)")
    assert child.returncode == 3
    assert child.error == "the child exited with status 3, printing no error"


def test_a_child_that_runs_too_long_is_killed():
    with pytest.raises(RuntimeError, match=r"did not finish within 0\.5 s"):
        run_python("import time; time.sleep(30)", timeout=0.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"code": ""}, ValueError, "non-empty string"),
        ({"code": "print(1)", "stdin": "text"}, TypeError, "stdin must be bytes"),
        ({"code": "print(1)", "env": {"CUDA_VISIBLE_DEVICES": 0}}, TypeError, "write it as a string"),
    ],
)
def test_bad_arguments_say_what_to_pass(kwargs, error, match):
    code = kwargs.pop("code")
    with pytest.raises(error, match=match):
        run_python(code, **kwargs)


def test_a_child_without_gpus_sees_none_and_gets_its_arguments():
    code = (
        "import os, sys, torch; "
        "print(repr(os.environ['CUDA_VISIBLE_DEVICES']), torch.cuda.is_available(), sys.argv[1:])"
    )
    assert run_python(code, "a", 2, Path("f"), env=HIDE_GPUS).stdout == "'' False ['a', '2', 'f']\n"


def test_env_sets_replaces_and_removes_the_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "garbage")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)  # whatever this process was given
    code = (
        "import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')), os.environ.get('CUDA_DEVICE_ORDER'))"
    )
    assert run_python(code, env={"CUDA_VISIBLE_DEVICES": "0,4"}).stdout == "'0,4' None\n"
    assert run_python(code, env={"CUDA_VISIBLE_DEVICES": None}).stdout == "None None\n"
    both = {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert run_python(code, env=both).stdout == "'' PCI_BUS_ID\n"


def test_check_raises_with_the_childs_stderr():
    failing = "import sys; sys.stderr.write('boom'); sys.exit(3)"
    with pytest.raises(ChildPythonError, match=r"(?s)status 3.*boom"):
        run_python(failing, check=True)
    assert run_python(failing).error == "boom"  # without check, the failure is data
    assert run_python("print(1)", check=True).stdout == "1\n"


def test_a_timeout_kills_everything_the_child_started(tmp_path):
    """A child that started `sleep` and then hangs: on timeout the whole group goes, sleep included."""
    pid_file = tmp_path / "sleep.pid"
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen(['sleep', '304']); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid)); "
        "time.sleep(300)"
    )
    with pytest.raises(ChildPythonError, match=r"did not finish within 2 s and was killed") as err:
        run_python(code, timeout=2)
    assert "sleep" not in str(err.value) and "TimeoutExpired" not in str(err.value)  # short, not the code
    assert wait_until_gone([int(pid_file.read_text())], timeout=5) == []


@pytest.mark.parametrize(
    ("timeout", "error", "match"),
    [
        (0, ValueError, r"timeout must be a positive number of seconds, at most 604800 \(a week\), not 0"),
        (-1, ValueError, "not -1; pass e.g. timeout=60"),
        (float("inf"), ValueError, "not inf"),
        (float("nan"), ValueError, "not nan"),
        (1e15, ValueError, "at most 604800"),
        ("5", TypeError, "timeout must be a number of seconds, such as 60, not '5'"),
        (None, TypeError, "number of seconds"),
        (True, TypeError, "number of seconds"),
    ],
)
def test_bad_timeouts_say_what_to_pass(timeout, error, match):
    with pytest.raises(error, match=match):
        run_python("print(1)", timeout=timeout)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"env": [("X", "1")]}, TypeError, "env must be a mapping"),
        ({"env": {1: "x"}}, TypeError, "variable names"),
        ({"env": {"": "x"}}, TypeError, "variable names"),
    ],
)
def test_bad_environments_say_what_to_pass(kwargs, error, match):
    with pytest.raises(error, match=match):
        run_python("print(1)", **kwargs)


@pytest.mark.parametrize("arg", [None, 1.5, True, b"x", ["a"]])
def test_bad_arguments_for_the_child_say_what_to_pass(arg):
    with pytest.raises(TypeError, match="args must be strings, paths or whole numbers"):
        run_python("print(1)", arg)


def test_last_error_line_needs_text():
    with pytest.raises(TypeError, match="stderr as a str"):
        last_error_line(b"Traceback")


def test_an_env_name_with_a_nul_or_equals_sign_is_refused_before_anything_starts():
    for env in ({"A\0B": "1"}, {"A=B": "1"}):
        with pytest.raises(ValueError, match="env: a variable name holds neither"):
            run_python("pass", env=env)


def test_a_childs_silent_failure_is_described_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    run = run_python("import os; os._exit(3)")
    assert run.error == "子进程以状态 3 退出，没有打印任何错误"
    with pytest.raises(ValueError, match=r"^run_python 需要一段要运行的 Python 代码"):
        run_python(" ")
