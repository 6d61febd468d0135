"""What `course.py` and the scripts it starts share: run a child as if alone, install with pip, test.

Only the standard library is used: `course.py` imports this before any set-up, with whatever
Python 3.11+ runs it. No script imports `course.py` itself; both import this.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType

# The student's command (course_utils.cli, standard library only) shares its language and JupyterLab's
# command line with course.py, which runs before .venv exists: import it from the clone's src/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from course_utils import cli

ROOT = Path(__file__).resolve().parent.parent
# What pip prints when it cannot reach a package index (connection refused, DNS, proxy, timeout).
NO_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Connection refused|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"ProxyError|ConnectTimeoutError|ReadTimeoutError|Could not fetch URL|"
    r"connection broken by|Max retries exceeded"
)
# Where the kernel tells a signal from a process: si_code > 0 (SI_KERNEL, a terminal's Ctrl-C) or
# <= 0 (SI_USER, SI_QUEUE, SI_TKILL: kill(), killpg(), sigqueue() from some process).
_SENT_BY_A_PROCESS = 0
# Whether this platform can read who sent a signal (Linux; not macOS or Windows).
CAN_TELL_SENDER = hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask")


LANGUAGE_VARIABLE = cli.LANGUAGE_VARIABLE  # the course's language, as the notebooks' set-up cell sets it
CHINESE = cli.CHINESE
chosen_language: str | None = None  # course.py's --language flag, when given
# course.py's own messages in Chinese, by their English: course.py runs before polib is installed.
CHINESE_MESSAGES = {
    "https://pypi.org/simple (pip's default)": "https://pypi.org/simple（pip 的默认源）",
    "Installing with pip from {index}.": "用 pip 从 {index} 安装。",
    "Installing the course failed: pip could not download the packages (no connection to the "
    "package index, see above). Check the network, set a proxy (HTTPS_PROXY=http://host:port) "
    "or point pip at a reachable index (PIP_INDEX_URL=...), then run this again.": "安装课程失败：pip "
    "下载不到软件包（连不上软件包索引，见上方输出）。请检查网络，设置代理（HTTPS_PROXY=http://主机:端口），"
    "或者让 pip 改用一个连得上的镜像源（PIP_INDEX_URL=...，例如 https://pypi.tuna.tsinghua.edu.cn/simple），"
    "然后重新运行。",
    "Installing the course failed (pip exit status {status}); see above.": "安装课程失败（pip 退出码 "
    "{status}），见上方输出。",
    "Creating the virtual environment {name}/ ...": "正在创建虚拟环境 {name}/ ……",
    "The course needs Python 3.11 or newer; this is {version}.": "本课程需要 Python 3.11 或更新的版本，"
    "当前是 {version}。",
    "Creating {name}/ failed ({error}). Python's venv module with pip is needed: on Debian or Ubuntu "
    "install it with `sudo apt install python3-venv`, then run this again.": "创建 {name}/ 失败"
    "（{error}）。需要带 pip 的 Python venv 模块：在 Debian 或 Ubuntu 上用 `sudo apt install python3-venv` "
    "安装，然后重新运行。",
    '"{command}" is not a command of course.py.': "“{command}”不是 course.py 的命令。",
    "No command given.": "没有给出命令。",
    "  [{time}] {count} packages found so far ({name})\n": "  [{time}] 已找到 {count} 个软件包（{name}）\n",
    "  [{time}] downloading {file} ({size} {unit}B)\n": "  [{time}] 正在下载 {file}（{size} {unit}B）\n",
    "  [{time}] installing {count} packages (a minute or two without output) ...\n": "  [{time}] 正在安装 "
    "{count} 个软件包（一两分钟内没有输出）……\n",
    "  [{time}] installed.\n": "  [{time}] 安装完成。\n",
    "The first set-up downloads about 170 packages, PyTorch the largest (hundreds of MB for "
    "the CPU build, a few GB for the CUDA build): 2 to 5 minutes on a fast connection.": "第一次准备要下载"
    "约 170 个软件包，其中 PyTorch 最大（CPU 版几百 MB，CUDA 版几 GB）：网速快时需要 2 到 5 分钟。",
    "The package index {host} does not answer ({why}), so nothing can be installed from it. "
    "Check the network or the proxy (HTTPS_PROXY=http://host:port), or unset the setting that "
    "names it (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL or `pip config list`) or name a mirror "
    "that answers (the README's section on package mirrors), then run this again.": "软件包索引 {host} "
    "没有应答（{why}），所以无法从它安装任何东西。请检查网络或代理（HTTPS_PROXY=http://主机:端口），"
    "或者取消指定它的设置（PIP_INDEX_URL、PIP_EXTRA_INDEX_URL 或 `pip config list` 里的），"
    "或者换一个能应答的镜像（见 README 里关于镜像源的一节），然后重新运行。",
    "{flag} takes a language: {languages}.": "{flag} 后面要给出一种语言：{languages}。",
}


def language(env: dict[str, str] | None = None) -> str:
    """course.py's language, chosen as the student's command chooses it: its --language flag, else
    COURSE_LANGUAGE, else the locale (LC_ALL, LC_MESSAGES, LANG)."""
    return cli.student_language(chosen_language, os.environ if env is None else env)


def say(message: str) -> str:
    """`message` (one of course.py's own, or of the student's command) in course.py's language."""
    lang = language()
    if lang == CHINESE and message in CHINESE_MESSAGES:
        return CHINESE_MESSAGES[message]
    return cli.say(message, lang)


def env_python(env: Path) -> Path:
    """The interpreter inside the virtual environment `env`."""
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def worker_count() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


WORKER_MEMORY_BYTES = 3 * 2**29  # 1.5 GiB: a notebook's kernel and children at most (the bench's target)


def pytest_workers() -> int:
    """How many pytest workers `course.py test` starts: one more than the CPUs, as many as the memory
    holds at 1.5 GiB each. Part of the time a test waits rather than computes (for a rank's timeout,
    a grader's endless loop, pip writing to disk), and the extra worker runs another file meanwhile."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the CPUs alone decide
        return worker_count() + 1
    return max(1, min(worker_count() + 1, memory // WORKER_MEMORY_BYTES))


def pytest_command(python: Path | str, args: list[str]) -> list[str | Path]:
    """pytest on `args`, in parallel over `pytest_workers()` workers unless `args` choose (`-n 0`: serially).

    `--dist loadscope` keeps each notebook's cells in order in one worker, as nbval needs, and
    spreads the unit tests module by module. (`loadgroup`, which could spread them one by one,
    does not group anything under pytest 9.2: it rewrites a node id that pytest now derives.)
    `--no-loadscope-reorder` hands the files out in the collection's order, longest first
    (tests/longest_first.py), instead of by their number of tests.
    """
    if "no:xdist" in args:  # `-p no:xdist`: pytest without the plugin, serially
        return [python, "-m", "pytest", *args]
    chosen = any(arg in ("-n", "--numprocesses") or arg.startswith(("-n", "--numprocesses=")) for arg in args)
    parallel = [] if chosen else ["-n", str(pytest_workers())]
    if not any(arg == "--dist" or arg.startswith("--dist=") for arg in args):
        parallel += ["--dist", "loadscope", "--no-loadscope-reorder"]
    return [python, "-m", "pytest", *parallel, *args]


class Interrupted(KeyboardInterrupt):
    """A SIGINT (Ctrl-C) reached a command `run` ran with `stop_on_interrupt`: stop, run nothing after it."""


def run(
    cmd: list[str | Path],
    output: list[str] | None = None,
    env: dict[str, str] | None = None,
    *,
    stop_on_interrupt: bool = False,
    echo: Callable[[str], str | None] | None = None,
) -> int:
    """Run a command from the course root as if it ran alone; return its exit status as a shell shows it.

    Ctrl-C from the terminal reaches the child directly (same process group) and is not passed
    on, so the child's own handling applies once. A SIGINT sent to this process alone (an IDE's
    stop button, a supervisor: `kill -INT PID`) is passed on, where the platform says who sent
    it (Linux); SIGTERM is always passed on. When `output` is a list, the child's stdout and
    stderr are echoed as they come and also collected there, line by line. `env`, when given,
    is the child's whole environment. With `stop_on_interrupt`, a SIGINT that reached this
    process at any moment of the run (the child may have finished, even successfully, as it
    arrived) raises `Interrupted` once the child has ended, instead of returning its status;
    one that arrives before the child starts means it never starts. `echo`, with `output`, turns
    each line into what is shown (None: nothing) while the whole line is still collected.
    """
    print("+", " ".join(str(c) for c in cmd), flush=True)
    child: subprocess.Popen[str] | None = None
    early: list[int] = []  # a SIGTERM that arrived before the child existed
    interrupts: list[int] = []  # the SIGINTs that reached this process during the run

    def pass_on(signum: int, frame: FrameType | None) -> None:
        if child is None:
            early.append(signum)
        else:
            child.send_signal(signum)

    # A Python-level handler (unlike SIG_IGN) is reset to the default in the child at exec.
    # A SIGINT this process was started ignoring (a background job) stays ignored, for both.
    ignoring_sigint = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    previous_int = signal.signal(
        signal.SIGINT, signal.SIG_IGN if ignoring_sigint else lambda s, f: interrupts.append(s)
    )
    previous_term = signal.signal(signal.SIGTERM, pass_on)
    try:
        if stop_on_interrupt and interrupts:
            raise Interrupted(_interrupted(cmd, started=False))
        capture = subprocess.PIPE if output is not None else None
        with subprocess.Popen(
            [str(c) for c in cmd],
            cwd=ROOT,
            env=env,
            stdout=capture,
            stderr=subprocess.STDOUT if capture else None,
            text=True,
        ) as child:
            for signum in early:
                child.send_signal(signum)
            with _passing_on_sigint(child, interrupts, enabled=not ignoring_sigint):
                if child.stdout is not None and output is not None:
                    for line in child.stdout:
                        shown = line if echo is None else echo(line)
                        if shown is not None:
                            print(shown, end="", flush=True)
                        output.append(line)
                child.wait()
        status = child.returncode
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
    if stop_on_interrupt and interrupts:
        raise Interrupted(_interrupted(cmd, started=True))
    return 128 - status if status < 0 else status


def _interrupted(cmd: list[str | Path], *, started: bool) -> str:
    """The one line that says what a Ctrl-C stopped: `cmd` by its program (and sub-command: `ruff
    check`, `pytest`), while it ran or before it started."""
    words = [str(c) for c in cmd]
    words = words[2:] if words[1:2] == ["-m"] else [Path(words[0]).name, *words[1:]]
    shown = " ".join(words[:2]) if len(words) > 1 and not words[1].startswith("-") else words[0]
    return f"Interrupted {'while' if started else 'before'} `{shown}` ran: stopped."


def exit_status(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """`main(argv)`'s exit status; after a Ctrl-C, 130 with one line on stderr and no traceback."""
    try:
        return main(argv)
    except KeyboardInterrupt as err:
        print(
            str(err) if isinstance(err, Interrupted) else "Interrupted: stopped.", file=sys.stderr, flush=True
        )
        return 128 + signal.SIGINT


class _passing_on_sigint:
    """While the child runs, pass on each SIGINT that a process sent to this one (not a terminal's).

    SIGINT is blocked in this thread (the child, started before, keeps its own mask) and taken by
    a thread with `sigtimedwait`, which says who sent it. The child already has a terminal's
    Ctrl-C, which goes to the whole foreground process group.
    """

    def __init__(self, child: subprocess.Popen[str], interrupts: list[int], *, enabled: bool) -> None:
        self.child, self.enabled = child, enabled and CAN_TELL_SENDER
        self.interrupts = interrupts  # every SIGINT taken here is noted, passed on or not
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._forward, daemon=True)

    def __enter__(self) -> None:
        if self.enabled:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            self.thread.start()

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        self.done.set()
        self.thread.join()
        while signal.sigtimedwait({signal.SIGINT}, 0) is not None:  # one that came at the very end
            self.interrupts.append(signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def _forward(self) -> None:
        while not self.done.is_set():
            info = signal.sigtimedwait({signal.SIGINT}, 0.1)
            if info is not None:
                self.interrupts.append(signal.SIGINT)
            if info is not None and info.si_code <= _SENT_BY_A_PROCESS and self.child.poll() is None:
                self.child.send_signal(signal.SIGINT)


def requirements_for_tests(project: dict) -> list[str]:
    """The test extra's requirements (from pyproject's `project` table), the course's own extras spelt out.

    `pytorch-on-gpus-hands-on[site]` in the test extra becomes the requirements of the `site` extra.
    """
    extras, wanted = project["optional-dependencies"], []
    for requirement in extras["test"]:
        own = re.fullmatch(rf"{re.escape(project['name'])}\[([\w,\s-]+)\]", requirement)
        wanted += [r for extra in own[1].split(",") for r in extras[extra.strip()]] if own else [requirement]
    return wanted


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names: `nbval` for `nbval>=0.11`, `torch` for `torch==2.13.*`."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return match[0]


PYPI = "https://pypi.org/simple"
# How long each package index may take to answer a first request before pip starts, and pip's own
# bounds: without them pip retries an index that stopped answering for tens of minutes (a default
# of 5 retries of 15 s for each of the ~170 packages), with them an install ends within a minute.
INDEX_CHECK_SECONDS = 8
PIP_BOUNDS = ["--retries", "1", "--timeout", "20"]


def pip_settings(python: Path, env: dict[str, str]) -> str:
    """What `pip config list` prints in `python`'s environment (empty if pip cannot say)."""
    try:
        return subprocess.run(
            [str(python), "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, env=env
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def index_urls(python: Path, env: dict[str, str] | None = None) -> tuple[list[str], bool]:
    """The package indexes pip in `python`'s environment uses (PIP_INDEX_URL or its settings, else
    PyPI; then the extra indexes), and whether the first is pip's default, named by nothing."""
    env = os.environ if env is None else env
    listed = "" if env.get("PIP_INDEX_URL") and env.get("PIP_EXTRA_INDEX_URL") else pip_settings(python, env)

    def setting(name: str) -> list[str]:
        found = re.findall(rf"^(?:global|install)\.{name}='([^']*)'", listed, re.MULTILINE)
        return found[0].split() if found else []

    main = env.get("PIP_INDEX_URL", "").split() or setting("index-url")
    extra = env.get("PIP_EXTRA_INDEX_URL", "").split() or setting("extra-index-url")
    return [*(main[:1] or [PYPI]), *extra], not main


def package_index(python: Path, env: dict[str, str] | None = None) -> str:
    """Where pip in `python`'s environment downloads from: PIP_INDEX_URL, else its settings, else PyPI."""
    env = os.environ if env is None else env
    urls, default = index_urls(python, env)
    named = [say("https://pypi.org/simple (pip's default)") if default else urls[0], *urls[1:]]
    if env.get("PIP_FIND_LINKS"):
        named.append(env["PIP_FIND_LINKS"])
    return ", ".join(named)


def index_silence(url: str, seconds: float = INDEX_CHECK_SECONDS) -> str | None:
    """Why the package index at `url` does not answer a small request within `seconds` (None: it
    answers; any HTTP status counts). Indexes that are not on the network (file:) are pip's to read."""
    if not url.lower().startswith(("http://", "https://")):
        return None
    probe = urllib.request.Request(url.rstrip("/") + "/pip/", method="HEAD")
    try:
        with urllib.request.urlopen(probe, timeout=seconds):
            return None
    except urllib.error.HTTPError:
        return None  # it answered, if only to refuse this page
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return str(reason) or type(reason).__name__


def check_indexes(python: Path, env: dict[str, str] | None = None) -> None:
    """Ask each package index pip would use for a page, all at once, before pip starts; exit with a
    message naming the host that does not answer and what to do, instead of pip's silent retries."""
    env = os.environ if env is None else env
    if env.get("PIP_NO_INDEX", "").lower() in {"1", "true", "yes", "on"}:
        return
    urls, _ = index_urls(python, env)
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(urls)) as pool:
        silent = [(url, why) for url, why in zip(urls, pool.map(index_silence, urls), strict=True) if why]
    if silent:
        url, why = silent[0]
        sys.exit(
            say(
                "The package index {host} does not answer ({why}), so nothing can be installed from it. "
                "Check the network or the proxy (HTTPS_PROXY=http://host:port), or unset the setting that "
                "names it (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL or `pip config list`) or name a mirror "
                "that answers (the README's section on package mirrors), then run this again."
            ).format(host=urllib.parse.urlsplit(url).netloc or url, why=why)
        )


class PipProgress:
    """pip's output as a few lines of progress: each package it collects (at most one line every
    few seconds), each large download, the install step and its end, with the time so far; its
    warnings, errors and retries as they come. Everything else of pip's is kept, not shown."""

    SHOWN = re.compile(r"^\s*(ERROR|WARNING|Retrying|Looking in)|No matching distribution|[Ee]rror:")
    LARGE = re.compile(r"^\s*Downloading (\S+) \((\d+(?:\.\d+)?) ([MG])B\)")

    def __init__(self, every_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.every_s = clock, every_s
        self.started = clock()
        self.collected, self.last_shown = 0, -every_s

    def elapsed(self) -> str:
        """The time since the install began, as m:ss."""
        seconds = int(self.clock() - self.started)
        return f"{seconds // 60}:{seconds % 60:02d}"

    def __call__(self, line: str) -> str | None:
        """What to show for one line of pip's output (None: nothing)."""
        if self.SHOWN.search(line):
            return line
        if line.startswith("Collecting "):
            self.collected += 1
            if self.clock() - self.last_shown < self.every_s:
                return None
            self.last_shown = self.clock()
            name = line.split()[1]
            return say("  [{time}] {count} packages found so far ({name})\n").format(
                time=self.elapsed(), count=self.collected, name=name
            )
        if match := self.LARGE.match(line):
            if match[3] == "M" and float(match[2]) < 20:
                return None
            return say("  [{time}] downloading {file} ({size} {unit}B)\n").format(
                time=self.elapsed(), file=Path(match[1]).name, size=match[2], unit=match[3]
            )
        if line.startswith("Installing collected packages:"):
            count = len(line.split(":", 1)[1].split(","))
            return say(
                "  [{time}] installing {count} packages (a minute or two without output) ...\n"
            ).format(time=self.elapsed(), count=count)
        if line.startswith("Successfully installed"):
            return say("  [{time}] installed.\n").format(time=self.elapsed())
        return None


def install(python: Path, *pip_args: str) -> None:
    """`pip install` into the environment of `python`, with a line of progress every few seconds;
    exit with one line saying why if that fails."""
    print(say("Installing with pip from {index}.").format(index=package_index(python)), flush=True)
    check_indexes(python)
    print(
        say(
            "The first set-up downloads about 170 packages, PyTorch the largest (hundreds of MB for "
            "the CPU build, a few GB for the CUDA build): 2 to 5 minutes on a fast connection."
        ),
        flush=True,
    )
    output: list[str] = []
    command = [python, "-m", "pip", "install", "--progress-bar", "off", *PIP_BOUNDS, *pip_args]
    status = run(command, output=output, echo=PipProgress())
    if status == 0:
        return
    if any(NO_NETWORK.search(line) for line in output):
        sys.exit(
            say(
                "Installing the course failed: pip could not download the packages (no connection to the "
                "package index, see above). Check the network, set a proxy (HTTPS_PROXY=http://host:port) "
                "or point pip at a reachable index (PIP_INDEX_URL=...), then run this again."
            )
        )
    sys.exit(say("Installing the course failed (pip exit status {status}); see above.").format(status=status))


def lint_and_test(
    python: Path | str, args: list[str], *, lint: bool = True, env: dict[str, str] | None = None
) -> int:
    """What `course.py test` runs: ruff (unless not `lint`), then pytest on `args` (`pytest_command`)."""
    for check in (["check"], ["format", "--check"]) if lint else ():
        status = run([python, "-m", "ruff", *check, "."], env=env, stop_on_interrupt=True)
        if status != 0:
            print("ruff found problems (above); `ruff check --fix . && ruff format .` fixes most.")
            return status
    return run(pytest_command(python, args), env=env, stop_on_interrupt=True)
