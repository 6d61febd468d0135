"""course.py, the README's entry point: it behaves like the program it starts, and says what went wrong.

The signal tests start course.py's `run` on a tiny stand-in child in a session of its own whose
controlling terminal is a pseudo-terminal, and signal it as a terminal does (Ctrl-C: the byte
^C written to the terminal, which the kernel turns into SIGINT to the whole foreground process
group), as an IDE's stop button or `kill -INT PID` does (SIGINT to course.py alone), or as
`kill` does (SIGTERM to course.py alone). Each one sets its course.py's SIGINT to the default,
as a shell starts a foreground job, so the tests hold whether or not the test run itself
ignores SIGINT (a background job does); `test_..._when_started_ignoring_sigint` covers the
background case of course.py itself. No preexec_fn: a pytest-xdist worker runs threads.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import course_shell
import psutil
import pytest

import course

WAIT = 60  # seconds: generous bound for a loaded machine; no test waits for it unless broken
CTRL_C = b"\x03"  # what the Ctrl-C key sends to a terminal (VINTR)
watchdogs: dict[int, threading.Timer] = {}  # per course.py started: kills its session after WAIT s

# Stands in for JupyterLab: on Ctrl-C it asks its question and carries on; it ends when a line
# with an exit status arrives on stdin, or with SIGTERM's default action.
ASKS_ON_CTRL_C = """
import signal, sys
signal.signal(signal.SIGINT, lambda s, f: print("Shut down (y/[n])?", flush=True))
print("ready", flush=True)
sys.exit(int(sys.stdin.readline()))
"""
# A child that Ctrl-C ends (SIGINT's default action), like most programs; nothing else ends it.
DIES_ON_CTRL_C = """
import signal, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
print("ready", flush=True)
time.sleep(600)
"""


# A child that only waits: nothing but a signal ends it (stdin closing does not).
WAITS = """
import time
print("ready", flush=True)
time.sleep(600)
"""


# A child that keeps the SIGINT disposition it inherits (Python ignores it if started ignoring it).
INHERITS = """
import sys
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.fixture(autouse=True)
def english(monkeypatch):
    """course.py's messages in English whatever the machine's locale; a test may choose another."""
    monkeypatch.setattr(course_shell, "chosen_language", "en")


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal: (master fd, where Ctrl-C is typed; slave fd, the stand-in's terminal)."""
    master, slave = os.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


# What a terminal's shell gives a program it starts: no signal blocked. A signal mask survives fork
# and exec, so without this the driver (and the child it starts) would inherit whatever this pytest
# process has blocked at the moment, and a blocked SIGINT makes Ctrl-C reach nobody.
UNBLOCKED = "import signal; signal.pthread_sigmask(signal.SIG_SETMASK, set())\n"


def start_driver(driver: str, tty: int, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`python -c driver` in a session of its own that may take `tty` as its terminal, with no signal
    blocked; the session is killed after WAIT seconds unless `finish` (or the test) cancels its
    watchdog first."""
    proc = subprocess.Popen(
        [sys.executable, "-c", UNBLOCKED + driver],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        pass_fds=(tty,),
        env=env,
    )
    watchdogs[proc.pid] = threading.Timer(WAIT, os.killpg, (proc.pid, signal.SIGKILL))
    watchdogs[proc.pid].start()
    return proc


def start_course_run(child: str, tty: int, *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    """course.run on `python -c child` in a new session whose terminal is `tty`; returned at "ready".

    The driver takes `tty` as its controlling terminal (so its process group is the terminal's
    foreground group) and sets SIGINT to the default, or to ignored, before course.run starts. It
    writes "passed on SIGNAME" to stderr whenever course.py signals its child (two signals that
    arrive together may reach the child as one, so the child alone cannot tell). The session is
    killed after WAIT seconds if the test has not finished it by then: no read waits for ever.
    """
    driver = (
        "import fcntl, signal, subprocess, sys, termios\n"
        f"fcntl.ioctl({tty}, termios.TIOCSCTTY, 0)\n"
        "send = subprocess.Popen.send_signal\n"
        "def spy(child, signum):\n"
        "    print('passed on', signal.Signals(signum).name, file=sys.stderr, flush=True)\n"
        "    send(child, signum)\n"
        "subprocess.Popen.send_signal = spy\n"
        f"signal.signal(signal.SIGINT, signal.{'SIG_IGN' if ignore_sigint else 'SIG_DFL'})\n"
        f"sys.path.insert(0, {str(course.ROOT)!r}); import course\n"
        f"sys.exit(course.run([sys.executable, '-c', {child!r}]))\n"
    )
    proc = start_driver(driver, tty)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("+ "), "course.run echoes the command first"
    for line in proc.stdout:  # the rest of the echoed command, then the child's first line
        if line == "ready\n":
            return proc
    finish(proc)
    raise AssertionError(f"the stand-in child never got ready: {proc.stderr.read()}")


def finish(proc: subprocess.Popen[str], stdin: str = "") -> tuple[int, str, str]:
    """Send `stdin`, wait for course.py to end; its status, the rest of its stdout, and its stderr."""
    try:
        out, err = proc.communicate(stdin, timeout=WAIT)
    finally:
        watchdogs.pop(proc.pid).cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


def signal_state(pid: int) -> str:
    """A process's blocked, ignored and caught signals and its process group, for a failure's report."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return f"pid {pid} group {os.getpgid(pid)}: " + ", ".join(
            line for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn", "SigCgt"))
        )
    except OSError as err:
        return f"pid {pid}: {err}"


def answer_within(proc: subprocess.Popen[str], master: int, seconds: float = 20.0) -> str:
    """The next line course.py's stdout gives within `seconds`; if none, a failure that shows where a
    Ctrl-C could have been lost (the terminal's foreground group, each process's signal state)."""
    assert proc.stdout is not None
    if select.select([proc.stdout], [], [], seconds)[0]:
        return proc.stdout.readline()
    family = [proc.pid, *(p.pid for p in psutil.Process(proc.pid).children(recursive=True))]
    report = [f"terminal's foreground group {os.tcgetpgrp(master)}", *map(signal_state, family)]
    finish(proc)
    raise AssertionError(f"no answer to Ctrl-C within {seconds:g} s; " + "; ".join(report))


def test_ctrl_c_goes_to_the_child_once_and_course_py_outlives_its_question(terminal):
    master, slave = terminal
    proc = start_course_run(ASKS_ON_CTRL_C, slave)
    os.write(master, CTRL_C)  # the terminal sends SIGINT to course.py and the child, from the kernel
    assert answer_within(proc, master) == "Shut down (y/[n])?\n"
    assert proc.poll() is None, "course.py must wait while the child carries on"
    status, out, err = finish(proc, "3\n")  # the child's answer, then its exit status
    assert (status, out, err) == (3, "", ""), "the question came once: course.py did not pass Ctrl-C on"


def test_a_child_that_ctrl_c_ends_gives_130_and_no_traceback(terminal):
    master, slave = terminal
    proc = start_course_run(DIES_ON_CTRL_C, slave)
    os.write(master, CTRL_C)
    assert finish(proc) == (128 + signal.SIGINT, "", "")


@pytest.mark.skipif(not course_shell.CAN_TELL_SENDER, reason="the platform does not say who sent a signal")
def test_sigint_to_course_py_alone_is_passed_on_to_the_child_as_an_ide_stop_button_sends_it(terminal):
    proc = start_course_run(ASKS_ON_CTRL_C, terminal[1])
    os.kill(proc.pid, signal.SIGINT)  # course.py only: the child gets it only if course.py passes it on
    assert proc.stdout.readline() == "Shut down (y/[n])?\n"
    assert finish(proc, "5\n") == (5, "", "passed on SIGINT\n")
    proc = start_course_run(DIES_ON_CTRL_C, terminal[1])
    os.kill(proc.pid, signal.SIGINT)
    assert finish(proc) == (128 + signal.SIGINT, "", "passed on SIGINT\n")


def test_sigterm_to_course_py_alone_is_passed_on_to_the_child(terminal):
    proc = start_course_run(WAITS, terminal[1])
    os.kill(proc.pid, signal.SIGTERM)  # course.py only, as `kill PID` sends it
    assert finish(proc) == (128 + signal.SIGTERM, "", "passed on SIGTERM\n")


def test_started_ignoring_sigint_the_child_ignores_it_too_as_a_background_job_does(terminal):
    master, slave = terminal
    proc = start_course_run(INHERITS, slave, ignore_sigint=True)
    os.write(master, CTRL_C)  # ignored by both
    os.kill(proc.pid, signal.SIGINT)  # and not passed on: course.py was told to ignore it
    assert finish(proc, "\n") == (0, "", "")


def test_run_restores_this_process_signal_handlers(capsys):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert course.run([sys.executable, "-c", "raise SystemExit(4)"]) == 4
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_unknown_command_is_named_and_the_commands_listed(capsys):
    assert course.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert '"frobnicate" is not a command' in err
    assert all(f"  {name} " in err for name in course.COMMANDS)


def test_no_command_lists_the_commands_and_help_succeeds(capsys):
    assert course.main([]) == 2
    assert "No command given" in capsys.readouterr().err
    assert course.main(["--help"]) == 0
    assert "  regenerate  Re-execute every notebook" in capsys.readouterr().out


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


@pytest.fixture
def unreachable_index(monkeypatch):
    """pip with no configuration but an index nobody listens on (the discard port), one retry."""
    for name in [n for n in os.environ if n.startswith("PIP_") or n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/a-mirror/simple")
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip names the connection error only when it retries
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "5")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")


def test_without_network_the_install_says_so_in_one_line_and_keeps_pips_output(
    unreachable_index, tmp_path, capsys, monkeypatch
):
    """An index that stops answering once pip runs (the check before it passed): pip's own report."""
    monkeypatch.setattr(course_shell, "check_indexes", lambda python: None)
    target = tmp_path / "target"
    with pytest.raises(SystemExit) as failed:
        course.install(Path(sys.executable), "--no-deps", "--target", str(target), "course-demo-package")
    message = str(failed.value.code)
    assert message.startswith("Installing the course failed: pip could not download the packages")
    assert "PIP_INDEX_URL" in message and "\n" not in message
    out = capsys.readouterr().out
    named = "Installing with pip from http://127.0.0.1:9/a-mirror/simple.\n"
    assert out.startswith(named), "it names the index"
    assert "Retrying" in out, "pip's own report is shown as it came"
    assert "/a-mirror/simple/course-demo-package/" in out, "pip got PIP_INDEX_URL from course.py"
    assert not any(target.glob("*")), "nothing was installed"


def test_an_install_that_fails_for_another_reason_does_not_blame_the_network(
    unreachable_index, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(course_shell, "check_indexes", lambda python: None)
    with pytest.raises(SystemExit) as failed:
        course.install(Path(sys.executable), "--no-deps", "--target", str(tmp_path), str(tmp_path / "none"))
    assert str(failed.value.code).startswith("Installing the course failed (pip exit status 1)")
    assert "ERROR" in capsys.readouterr().out, "pip's own report is shown"


def test_without_pip_index_url_the_index_in_pips_settings_is_named(tmp_path):
    settings = tmp_path / "pip.conf"
    settings.write_text("[global]\nindex-url = https://mirrors.example.cn/pypi/simple\n")
    env = {"PIP_CONFIG_FILE": str(settings), "PIP_EXTRA_INDEX_URL": "https://download.example/whl/cpu"}
    named = course_shell.package_index(Path(sys.executable), env)
    assert named == "https://mirrors.example.cn/pypi/simple, https://download.example/whl/cpu"
    with_variable = course_shell.package_index(
        Path(sys.executable), {"PIP_INDEX_URL": "http://127.0.0.1:9/s", "PIP_CONFIG_FILE": os.devnull}
    )
    assert with_variable == "http://127.0.0.1:9/s"


@pytest.mark.parametrize(
    ("flag", "env", "said"),
    [
        (["--language", "zh-CN"], {}, "“frobnicate”不是 course.py 的命令。"),
        (["--language=zh-CN"], {"COURSE_LANGUAGE": "en"}, "“frobnicate”不是 course.py 的命令。"),
        ([], {"COURSE_LANGUAGE": "zh-CN", "LANG": "en_US.UTF-8"}, "“frobnicate”不是 course.py 的命令。"),
        ([], {"LANG": "zh_CN.UTF-8"}, "“frobnicate”不是 course.py 的命令。"),
        ([], {"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}, '"frobnicate" is not a command of course.py.'),
        (["--language", "en"], {"COURSE_LANGUAGE": "zh-CN"}, '"frobnicate" is not a command of course.py.'),
    ],
)
def test_course_py_speaks_the_flags_language_else_course_language_else_the_locale(
    monkeypatch, capsys, flag, env, said
):
    monkeypatch.setattr(course_shell, "chosen_language", None)
    for name in ("COURSE_LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert course.main([*flag, "frobnicate"]) == 2
    assert capsys.readouterr().err.startswith(said + "\n")


def test_a_language_flag_without_a_known_language_names_the_choices(capsys):
    assert course.main(["--language", "fr", "lab"]) == 2
    assert capsys.readouterr().err == "--language takes a language: en, zh-CN.\n"
    assert course.main(["--language"]) == 2


def test_every_chinese_message_of_course_py_keeps_the_fields_of_its_english():
    for english, chinese in course_shell.CHINESE_MESSAGES.items():
        assert re.findall(r"{\w*}", english) == re.findall(r"{\w*}", chinese), english


def test_test_help_says_how_to_run_serially_and_what_goes_to_pytest(capsys):
    assert course.main(["test", "--help"]) == 0
    out = capsys.readouterr().out
    assert "-n 0" in out and "serially" in out and "goes to pytest" in out and "--here" in out


@pytest.mark.parametrize(
    ("args", "parallel"),
    [
        (
            ["tests/"],
            ["-n", str(course_shell.pytest_workers()), "--dist", "loadscope", "--no-loadscope-reorder"],
        ),
        (["-n", "0", "-x"], ["--dist", "loadscope", "--no-loadscope-reorder"]),
        (["-n3"], ["--dist", "loadscope", "--no-loadscope-reorder"]),
        (["--dist=loadfile", "-k", "x"], ["-n", str(course_shell.pytest_workers())]),
        (["-p", "no:xdist"], []),
    ],
)
def test_pytest_runs_in_parallel_unless_the_arguments_choose(args, parallel):
    command = course_shell.pytest_command("python", args)
    assert command == ["python", "-m", "pytest", *parallel, *args]


@pytest.mark.parametrize(
    ("cpus", "gib", "workers"),
    [(2, 24, 3), (16, 128, 17), (1, 2, 1), (8, 6, 4), (4, None, 5)],  # None: no sysconf (Windows)
)
def test_one_worker_more_than_the_cpus_as_many_as_the_memory_holds(monkeypatch, cpus, gib, workers):
    monkeypatch.setattr(course_shell, "worker_count", lambda: cpus)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (gib or 0) * 2**30 // 4096}

    def sysconf(name: str) -> int:
        if gib is None:
            raise ValueError(f"unrecognized configuration name {name!r}")
        return pages[name]

    monkeypatch.setattr(course_shell.os, "sysconf", sysconf)
    assert course_shell.pytest_workers() == workers


def test_here_in_a_python_without_the_test_tools_names_the_pip_lines_and_makes_no_venv(tmp_path):
    """A fresh venv without pip, pytest, nbval or torch: --here says what is missing, and stops."""
    course_root = tmp_path / "course"
    (course_root / "scripts").mkdir(parents=True)
    (course_root / "src/course_utils").mkdir(parents=True)
    needed = ("course.py", "pyproject.toml", "scripts/course_shell.py")  # and what course_shell imports:
    needed += tuple(f"src/course_utils/{name}.py" for name in ("__init__", "cli", "folders"))
    for name in needed:
        (course_root / name).write_bytes((course.ROOT / name).read_bytes())
    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)
    result = subprocess.run(
        [str(course_shell.env_python(bare)), "course.py", "test", "--here", "tests/"],
        cwd=course_root,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert result.returncode == 1, result.stderr
    assert "PyTorch: not installed" in result.stdout
    assert "This Python lacks what the tests need" in result.stderr
    lines = result.stderr.splitlines()
    pip_line = next(line for line in lines if "'nbval>=0.11'" in line)
    assert pip_line.strip().startswith(f"{course_shell.env_python(bare)} -m pip install ")
    assert "'pytest>=8.2'" in pip_line and "'pytest-xdist>=3.6'" in pip_line and "ruff" not in pip_line
    assert any(line.strip().endswith(f"-m pip install --no-deps -e {course_root}") for line in lines)
    assert not (course_root / ".venv").exists() and "+ " not in result.stdout, "nothing was run"


def test_here_asks_only_for_what_is_missing():
    requirements = course.here_requirements(course.ROOT / "pyproject.toml")
    assert "pytest-xdist>=3.6" in requirements and not any(
        r.startswith(("torch", "ruff")) for r in requirements
    )
    own = str(course.ROOT / "src" / "course_utils" / "__init__.py")
    found = {"torch": "2.11.0", "missing": ["nbval"], "course_utils": own}
    assert course.missing_here(found, requirements, "py") == ["py -m pip install 'nbval>=0.11'"]
    assert course.missing_here(found | {"missing": []}, requirements, "py") == []
    elsewhere = found | {"missing": [], "course_utils": "/opt/site-packages/course_utils/__init__.py"}
    assert course.missing_here(elsewhere, requirements, "py") == [
        f"py -m pip install --no-deps -e {course.ROOT}"
    ]


def test_here_describes_torch_its_build_and_the_gpus():
    found = {"python": "3.12.1", "torch": "2.11.0+cu128", "build": "CUDA 12.8", "devices": ["NVIDIA H100"]}
    assert course.describe_here(found)[1:] == [
        "PyTorch 2.11.0+cu128, CUDA 12.8 build",
        "CUDA devices: 1: 0: NVIDIA H100",
    ]


def test_here_runs_the_tests_in_the_python_that_runs_it():
    """In .venv's own Python (it has everything): the report, then pytest in that Python, serially here."""
    result = subprocess.run(
        [
            sys.executable,
            "course.py",
            "test",
            "--here",
            "-n",
            "0",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_course_command.py",
            "-k",
            "unknown_command",
        ],
        cwd=course.ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Python {sys.version.split()[0]} ({sys.executable})" in result.stdout
    assert f"+ {sys.executable} -m pytest -n 0" not in result.stdout  # `-n 0` chosen: none added
    assert f"+ {sys.executable} -m pytest --dist loadscope --no-loadscope-reorder -n 0 -q" in result.stdout
    assert "1 passed" in result.stdout


@pytest.mark.parametrize(
    "script", ["benchmark", "kernel_memory", "regenerate", "stress", "torch_matrix", "website"]
)
def test_every_script_has_help_and_none_imports_course_py(script):
    path = course.ROOT / "scripts" / f"{script}.py"
    result = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=WAIT
    )
    assert result.returncode == 0 and result.stdout.startswith("usage: "), result.stdout + result.stderr
    assert "import course\n" not in path.read_text() and "from course import" not in path.read_text()


# --- Ctrl-C during `course.py test` stops it, whatever moment it lands --------------------------
# A stand-in "python" that runs as ruff or pytest: it says which it is, then waits for its exit
# status on stdin. On Ctrl-C it dies (as ruff does), or says so and carries on, to finish with
# status 0 (a run that ended just as the key was pressed).
STAND_IN = """#!{python} -S
import os, signal, sys
if os.environ["ON_CTRL_C"] == "dies":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
else:
    signal.signal(signal.SIGINT, lambda s, f: print("child got Ctrl-C", flush=True))
print("child", sys.argv[2], sys.argv[3], flush=True)
sys.exit(int(sys.stdin.readline()))
"""
# course.py's entry (`exit_status`) on `lint_and_test` with the stand-in; before each child starts
# it says "between" and waits for one byte, a moment at which Ctrl-C can land outside any child.
TEST_DRIVER = """
import fcntl, os, signal, sys, termios
fcntl.ioctl({tty}, termios.TIOCSCTTY, 0)
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {scripts!r})
import course_shell
real_run = course_shell.run
def run(*args, **kwargs):
    print("between", flush=True)
    os.read(0, 1)
    return real_run(*args, **kwargs)
course_shell.run = run
sys.exit(course_shell.exit_status(lambda argv: course_shell.lint_and_test({python!r}, ["-n", "2"]), []))
"""
# Where Ctrl-C lands: before or while the Nth child (0: ruff check, 1: ruff format, 2: pytest), and
# what the child then does. Each case ends with 130, one line naming what stopped, and nothing after.
MOMENTS = [
    (0, "between", "dies", "Interrupted: stopped."),
    (0, "in child", "dies", "Interrupted while `ruff check` ran: stopped."),
    (0, "in child", "finishes", "Interrupted while `ruff check` ran: stopped."),
    (1, "between", "finishes", "Interrupted: stopped."),
    (1, "in child", "finishes", "Interrupted while `ruff format` ran: stopped."),
    (2, "in child", "dies", "Interrupted while `pytest` ran: stopped."),
    (2, "in child", "finishes", "Interrupted while `pytest` ran: stopped."),
]


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="a pseudo-terminal types the Ctrl-C")
@pytest.mark.parametrize(("child", "moment", "on_ctrl_c", "said"), MOMENTS)
def test_ctrl_c_stops_the_test_command_at_every_moment(terminal, tmp_path, child, moment, on_ctrl_c, said):
    master, slave = terminal
    python = tmp_path / "python"
    python.write_text(STAND_IN.format(python=sys.executable))
    python.chmod(0o755)
    driver = TEST_DRIVER.format(tty=slave, scripts=str(course.ROOT / "scripts"), python=str(python))
    proc = start_driver(driver, slave, env=os.environ | {"ON_CTRL_C": on_ctrl_c})
    started = 0
    for line in proc.stdout:
        if line == "between\n":
            if started == child and moment == "between":
                break
            proc.stdin.write("g")  # let the child start
            proc.stdin.flush()
            started += 1
        elif line.startswith("child ") and line != "child got Ctrl-C\n":
            if started - 1 == child:
                break
            proc.stdin.write("0\n")  # this child succeeds
            proc.stdin.flush()
    os.write(master, CTRL_C)
    if moment == "between":  # it ends by itself: input now could let the next child start first
        proc.wait(WAIT)
    elif on_ctrl_c == "finishes":
        # Rarely, on a loaded machine, the child has not reported the first Ctrl-C seconds later:
        # type it again (course.py must stop all the same), so the test never waits for WAIT.
        heard = threading.Event()

        def type_again() -> None:
            while not heard.wait(2):
                os.write(master, CTRL_C)

        threading.Thread(target=type_again, daemon=True).start()
        line = proc.stdout.readline()
        heard.set()
        assert line == "child got Ctrl-C\n"
    status, out, err = finish(proc, "0\n")  # a child still waiting finishes with status 0
    assert (status, err) == (128 + signal.SIGINT, said + "\n"), (out, err)
    assert "between" not in out and "child" not in out.replace("child got Ctrl-C", "")  # nothing after
    assert "ruff found problems" not in out


# --- every command's --help answers at once, before any set-up --------------------------------


@pytest.fixture(scope="module")
def bare_course(tmp_path_factory):
    """A copy of the course's command and scripts with no .venv, and a Python outside any venv."""
    copy = tmp_path_factory.mktemp("bare-course")
    for name in ("course.py", "pyproject.toml"):
        shutil.copy2(course.ROOT / name, copy / name)
    for folder in ("scripts", "docs", "src"):
        shutil.copytree(course.ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    base = Path(sys.base_prefix) / "bin" / "python3"
    return copy, str(base if base.exists() else sys.executable)


@pytest.mark.parametrize("command", sorted(course.COMMANDS))
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_help_answers_without_setting_anything_up(bare_course, command, flag):
    copy, python = bare_course
    args = [command, "prepare", flag] if command == "gpu" else [command, flag]
    started = time.monotonic()
    result = subprocess.run(
        [python, str(copy / "course.py"), *args], cwd=copy, capture_output=True, text=True, timeout=WAIT
    )
    seconds = time.monotonic() - started
    print(f"course.py {' '.join(args)}: {seconds:.2f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "usage:" in result.stdout and f"course.py {command}" in result.stdout, result.stdout
    assert not (copy / ".venv").exists(), "answering --help set up .venv"
    assert "Creating the virtual environment" not in result.stdout + result.stderr


def test_lab_help_names_the_courses_options_first(capsys, monkeypatch):
    monkeypatch.setattr(course, "ensure_environment", lambda: pytest.fail("--help set up .venv"))
    assert course.main(["lab", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python3 course.py lab") and "--no-browser" in out


@pytest.mark.parametrize(
    ("args", "opens"),
    [
        ([], True),
        (["--no-browser"], True),
        (["--port", "9999", "--no-browser"], True),
        (["notebooks/05_data_parallel.ipynb"], False),
        (["--no-browser", "notebooks/zh-CN/00_start_here.ipynb"], False),
    ],
)
def test_lab_opens_notebook_00_unless_a_notebook_is_named(args, opens, capsys):
    command = course.lab_command(Path("python"), args, euid=1000)
    assert command[3 : -1 if opens else None] == args
    assert (command[-1] == course.FIRST_NOTEBOOK) is opens


@pytest.mark.parametrize("form", [["--out", "x"], ["--out=x"], ["--docs=x"], ["report", "x"]])
def test_folder_options_are_made_absolute_against_the_working_folder(form, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    resolved = course.folder_paths(form)
    assert str(tmp_path / "x") in resolved[-1] and resolved[-1].endswith(str(tmp_path / "x"))


def test_a_venv_folder_of_the_users_is_not_removed_when_creation_fails(tmp_path, monkeypatch):
    target = tmp_path / ".venv"
    target.mkdir()
    (target / "notes.txt").write_text("the user's")
    monkeypatch.setattr(course, "VENV", target)

    def fails(self, env_dir):
        raise subprocess.CalledProcessError(1, ["python", "-m", "ensurepip"])

    monkeypatch.setattr(venv.EnvBuilder, "create", fails)
    with pytest.raises(SystemExit, match="python3-venv"):
        course.ensure_environment()
    assert (target / "notes.txt").read_text() == "the user's"


# --- every package index is asked before pip starts ---------------------------------------------


@pytest.fixture
def silent_index():
    """The address of a package index that accepts connections and never answers (a listening socket
    nobody reads), as a firewall that drops the replies looks to pip."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/simple"
    finally:
        listener.close()


def test_an_index_that_refuses_is_named_before_pip_starts(unreachable_index, capsys):
    with pytest.raises(SystemExit) as failed:
        course.install(Path(sys.executable), "--no-deps", "course-demo-package")
    message = str(failed.value.code)
    assert message.startswith("The package index 127.0.0.1:9 does not answer"), message
    assert "PIP_INDEX_URL" in message and "\n" not in message
    assert "Retrying" not in capsys.readouterr().out, "pip never started"


def test_every_configured_index_is_checked_and_the_silent_one_named(silent_index, monkeypatch):
    monkeypatch.setattr(course_shell, "INDEX_CHECK_SECONDS", 1)
    answering = socket.create_server(("127.0.0.1", 0))  # answers: an HTTP error still counts
    server = threading.Thread(target=lambda: answer_once(answering), daemon=True)
    server.start()
    env = {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": f"http://127.0.0.1:{answering.getsockname()[1]}/simple",
        "PIP_EXTRA_INDEX_URL": f"file:///nowhere {silent_index}",
    }
    urls, default = course_shell.index_urls(Path(sys.executable), env)
    assert urls == [env["PIP_INDEX_URL"], "file:///nowhere", silent_index] and not default
    with pytest.raises(SystemExit) as failed:
        course_shell.check_indexes(Path(sys.executable), env)
    assert f"The package index {silent_index.split('/')[2]} does not answer" in str(failed.value.code)
    server.join(timeout=WAIT)
    answering.close()
    course_shell.check_indexes(Path(sys.executable), {**env, "PIP_NO_INDEX": "1"})  # offline: not asked


def answer_once(listener: socket.socket) -> None:
    """Answer one HTTP request with 404, as an index does for a page it lacks."""
    connection, _ = listener.accept()
    with connection:
        connection.recv(4096)
        connection.sendall(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")


def test_course_py_lab_with_a_silent_index_stops_and_names_the_host(bare_course, silent_index):
    copy, python = bare_course
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=silent_index, PIP_NO_CACHE_DIR="1")
    started = time.monotonic()
    result = subprocess.run(
        [python, str(copy / "course.py"), "lab", "--no-browser"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=env,
    )
    print(f"course.py lab stopped after {time.monotonic() - started:.1f} s")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"The package index {silent_index.split('/')[2]} does not answer" in result.stderr
    assert "Traceback" not in result.stderr
    shutil.rmtree(copy / ".venv")  # made by this test; the --help tests check that none is made


def test_pips_output_becomes_a_few_lines_of_progress_with_the_time_so_far():
    now = [0.0]
    progress = course_shell.PipProgress(every_s=5, clock=lambda: now[0])
    shown = []
    recorded = [
        (0, "Collecting torch==2.13.*\n"),
        (1, "  Downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (190.2 MB)\n"),
        (2, "Collecting numpy\n"),  # within 5 s of the last: counted, not shown
        (3, "  Downloading numpy-2.3.0-cp311-cp311-manylinux_2_28_x86_64.whl (16.6 MB)\n"),
        (8, "Collecting jupyterlab\n"),
        (9, "Requirement already satisfied: pip in ./.venv/lib/python3.11/site-packages\n"),
        (10, "WARNING: Retrying (Retry(total=0)) after connection broken by 'ReadTimeoutError'\n"),
        (75, "Installing collected packages: numpy, torch, jupyterlab\n"),
        (130, "Successfully installed jupyterlab-4.5 numpy-2.3.0 torch-2.13.0\n"),
    ]
    for seconds, line in recorded:
        now[0] = seconds
        shown.append(progress(line))
    assert [s for s in shown if s is not None] == [
        "  [0:00] 1 packages found so far (torch==2.13.*)\n",
        "  [0:01] downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (190.2 MB)\n",
        "  [0:08] 3 packages found so far (jupyterlab)\n",
        recorded[6][1],
        "  [1:15] installing 3 packages (a minute or two without output) ...\n",
        "  [2:10] installed.\n",
    ]
