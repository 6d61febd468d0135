"""`course.py grade`: a made-up class graded in sandboxes, and the pieces of the grader on their own.

The class: notebooks 00 and 02 (the cheapest to run) in both editions, with right answers (from
notebooks/solutions/), wrong ones (from the checks' unit tests and tests/exercise_answers.py),
untouched exercises, and students who misbehave: a syntax error, an endless loop, `os._exit(3)`,
a fork bomb, a 2 GB file, a write to a file of the instructor's, a connection to a server on this
machine. Each must get the verdict it deserves, fail only itself, and leave nothing running.
Where this machine cannot give a protection (not root, no namespaces), the report must say so.
"""

from __future__ import annotations

import csv
import inspect
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path

import grade
import grade_notebooks
import grade_report
import grade_runner
import psutil
import pytest
from exercise_answers import AlwaysEqual

ROOT = Path(__file__).resolve().parent.parent
GRADE = ROOT / "scripts" / "grade.py"
SOLUTIONS = ROOT / "notebooks" / "solutions"
IMPORTS = {
    "00_start_here": "from course_utils.exercises.start_here import check_accelerator, check_cpu_threads\n",
    "02_tensors_on_devices": (
        "from course_utils.exercises.tensors_on_devices import check_add_on_device_of, check_to_numpy\n"
    ),
}
CELL_TIMEOUT = 30  # the endless loop's; 00's and 02's slowest cell took 2 s here with both cores busy
MAX_PROCESSES = 64  # the fork bomb's cap


def can(*command: str) -> bool:
    """Whether a command of util-linux succeeds here (a namespace this machine lets this user make)."""
    try:
        return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


ROOT_USER = os.geteuid() == 0  # as root every sandbox has a user of its own (else the grader refuses)
# A network namespace of the sandbox's own: as root, or inside a user namespace where this machine allows one.
NETWORK_POSSIBLE = can("unshare", "--net", "true") if ROOT_USER else can("unshare", "-rn", "true")


def solution_answers(stem: str) -> list[str]:
    """The answers of a notebook's solution file, one per exercise (the code under `# 1.`, `# 2.`, ...)."""
    text = (SOLUTIONS / f"{stem}.py").read_text(encoding="utf-8")
    return [part.strip() + "\n" for part in re.split(r"^# \d+\. .*$", text, flags=re.MULTILINE)[1:]]


def submission(stem: str, edition: str, answers: list[str | None], path: Path) -> Path:
    """A student's copy of a course notebook, its exercise cells' answers replaced (None: untouched)."""
    folder = ROOT / "notebooks" / ("zh-CN" if edition == "zh-CN" else "")
    notebook = json.loads((folder / f"{stem}.ipynb").read_text(encoding="utf-8"))
    ids = [exercise.cell_id for exercise in next(n for n in COURSE if n.stem == stem).exercises]
    for cell in notebook["cells"]:
        if cell.get("id") in ids and answers[ids.index(cell["id"])] is not None:
            cell["source"] = answers[ids.index(cell["id"])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


COURSE = grade_notebooks.course_notebooks()


class Server:
    """A TCP server on 127.0.0.1 (port 0) that records every connection, for a student to try to reach."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)  # accept() wakes up to see `closing`: closing the socket would not wake it
        self.port = self.sock.getsockname()[1]
        self.connections: list[object] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                connection, address = self.sock.accept()
            except TimeoutError:
                continue
            self.connections.append(address)
            connection.close()

    def close(self) -> None:
        self.closing.set()
        self.thread.join()
        self.sock.close()


class Page(HTMLParser):
    """A report page read with html.parser: its tables (id -> rows of (tag, attributes, text)) and lists."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, dict[str, str], str]]]] = {}
        self.lists: dict[str, list[tuple[dict[str, str], str]]] = {}
        self.table = self.list = None
        self.cell: list | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "table":
            self.table = self.tables.setdefault(attributes.get("id", ""), [])
        elif tag == "ul" and "id" in attributes:
            self.list = self.lists.setdefault(attributes["id"], [])
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = [tag, attributes, ""]
        elif tag == "li" and self.list is not None:
            self.cell = ["li", attributes, ""]

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell[2] += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.table is not None:
            self.table[-1].append(tuple(self.cell))
            self.cell = None
        elif tag == "li" and self.cell is not None and self.list is not None:
            self.list.append((self.cell[1], self.cell[2]))
            self.cell = None
        elif tag == "table":
            self.table = None
        elif tag == "ul":
            self.list = None


def sandbox_processes() -> list[psutil.Process]:
    """Live processes of a sandbox: run by a sandbox user, or carrying a submission's mark."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if any(grade.UID_BASE <= uid < grade.UID_BASE + grade.UID_SPAN for uid in process.uids()):
                found.append(process)
            elif grade.SUBMISSION_MARK in process.environ():
                found.append(process)
        except psutil.Error:
            continue
    return found


def skip_where_no_user_can_run_the_course(printed: str) -> None:
    """Skip where the grader, as root, refused because no other user can read this clone (one in a
    folder only root may enter): test_as_root_it_never_runs_students_code_as_root checks that refusal."""
    if ROOT_USER and "It will not run students' code as root" in printed:
        pytest.skip(printed.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once with `scripts/grade.py` (2 at a time), as the tests below read it."""
    base = tmp_path_factory.mktemp("grade")
    server = Server()
    secret = base / "instructor" / "grades.txt"
    secret.parent.mkdir()
    secret.write_text("the instructor's grades\n")
    secret.chmod(0o644)
    secret.parent.chmod(0o755)
    base.chmod(0o755)
    right00, right02 = solution_answers("00_start_here"), solution_answers("02_tensors_on_devices")
    imports00, imports02 = IMPORTS["00_start_here"], IMPORTS["02_tensors_on_devices"]
    always_equal = inspect.getsource(AlwaysEqual)
    loop = "import time\nwhile True:\n    time.sleep(0.1)\n"
    fork_bomb = (
        "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(600)\n        os._exit(0)\n"
    )
    big_file = "with open('big', 'wb') as f:\n    for _ in range(2048):\n        f.write(bytes(2**20))\n"
    connect = f"import socket\nsocket.create_connection(('127.0.0.1', {server.port}), timeout=10)\n"
    klass = base / "class"
    n00, n02 = "00_start_here", "02_tensors_on_devices"
    wrong_threads = "my_threads = torch.get_num_threads() + 1\ncheck_cpu_threads(my_threads)\n"
    submission(n00, "en", [right00[0], wrong_threads], klass / "alice.ipynb")
    submission(
        n00,
        "zh-CN",
        [imports00 + always_equal + "my_accelerator = AlwaysEqual()\n", None],
        klass / "bob" / "00.ipynb",
    )
    submission(n00, "en", [imports00 + "my_accelerator = (\n", loop], klass / "carol.ipynb")
    submission(
        n00,
        "en",
        [imports00 + big_file, f"open({str(secret)!r}, 'w').write('hacked')\n"],
        klass / "dave.ipynb",
    )
    submission(n00, "zh-CN", [imports00 + connect, fork_bomb], klass / "erin.ipynb")
    submission(n00, "en", [imports00 + "import os\nos._exit(3)\n", None], klass / "frank.ipynb")
    wrong_add = (
        "def add_on_device_of(a, b):\n    return a + b\n\n\ncheck_add_on_device_of(add_on_device_of)\n"
    )
    submission(n02, "zh-CN", [right02[0], wrong_add], klass / "gina.ipynb")
    wrong_numpy = imports02 + "def to_numpy(t):\n    return t.numpy()\n\n\ncheck_to_numpy(to_numpy)\n"
    submission(n02, "en", [wrong_numpy, right02[1]], klass / "hal" / "lesson.ipynb")
    stranger = json.loads((ROOT / "notebooks" / f"{n00}.ipynb").read_text(encoding="utf-8"))
    del stranger["metadata"]["course"]
    (klass / "ivan.ipynb").write_text(json.dumps(stranger), encoding="utf-8")
    submission(n02, "en", ["check_to_numpy_v1(lambda t: t)\n", None], klass / "judy.ipynb")
    (klass / "kim.ipynb").write_text("{not json", encoding="utf-8")
    out = base / "report"
    command = [sys.executable, GRADE, klass, "--out", out, "--jobs", "2", "--cell-timeout", str(CELL_TIMEOUT)]
    done = subprocess.run(
        [*map(str, command), "--max-processes", str(MAX_PROCESSES)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    server.close()
    skip_where_no_user_can_run_the_course(done.stderr)
    with (out / "grades.csv").open(encoding="utf-8-sig") as file:
        rows = list(csv.DictReader(file))
    return {
        "done": done,
        "rows": {(row["student"], row["exercise"]): row for row in rows},
        "page": Page((out / "grades.html").read_text(encoding="utf-8")),
        "secret": secret,
        "server": server,
        "left": sandbox_processes(),
    }


def verdict(graded, student: str, exercise: int) -> tuple[str, str]:
    """The verdict and hint of a student's exercise in the CSV."""
    row = graded["rows"][(student, str(exercise))]
    return row["verdict"], row["hint"]


def test_the_grader_finishes_and_names_every_submission(graded):
    done = graded["done"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[11/11]" in done.stdout and "8 of 11 submissions graded" in done.stdout, done.stdout
    students = {student for student, _ in graded["rows"]}
    assert students == set("alice bob carol dave erin frank gina hal ivan judy kim".split())


def test_right_wrong_and_untouched_answers_get_their_verdicts(graded):
    assert verdict(graded, "alice", 1)[0] == "right"
    assert verdict(graded, "alice", 2)[0] == "wrong" and "num_threads" in verdict(graded, "alice", 2)[1]
    assert verdict(graded, "bob", 1)[0] == "wrong"
    assert verdict(graded, "bob", 1)[1].startswith("未通过") and "AlwaysEqual" in verdict(graded, "bob", 1)[1]
    assert verdict(graded, "bob", 2)[0] == "not answered"
    assert verdict(graded, "gina", 1)[0] == "right" and verdict(graded, "gina", 1)[1].startswith("正确")
    assert verdict(graded, "gina", 2)[0] == "wrong" and "RuntimeError" in verdict(graded, "gina", 2)[1]
    assert verdict(graded, "hal", 1)[0] == "wrong" and "requires grad" in verdict(graded, "hal", 1)[1]
    assert verdict(graded, "hal", 2)[0] == "right"
    assert graded["rows"][("bob", "1")]["edition"] == "Chinese" and graded["rows"][("hal", "1")]["file"] == (
        "class/hal/lesson.ipynb"
    )


def test_misbehaving_students_fail_only_themselves(graded):
    assert verdict(graded, "carol", 1)[0] == "error" and "SyntaxError" in verdict(graded, "carol", 1)[1]
    assert verdict(graded, "carol", 2) == (
        "timed out",
        f"the cell ran longer than {CELL_TIMEOUT} s and was interrupted",
    )
    assert verdict(graded, "dave", 1)[0] == "error" and "File too large" in verdict(graded, "dave", 1)[1]
    assert verdict(graded, "erin", 2)[0] == "error" and "BlockingIOError" in verdict(graded, "erin", 2)[1]
    assert verdict(graded, "frank", 1) == ("crashed", "the kernel died (exit status 3)")
    assert verdict(graded, "frank", 2) == ("not run", "not reached: the kernel had died")
    assert graded["left"] == [], "a sandbox left processes running"


def protections(graded) -> dict[str, tuple[bool, str]]:
    """Each protection in the report (grade_report.PROTECTIONS): whether it applied, and its line."""
    items = graded["page"].lists["protections"]
    assert len(items) == len(grade_report.PROTECTIONS)
    return {
        name: ("missing" not in attributes.get("class", ""), text)
        for name, (attributes, text) in zip(grade_report.PROTECTIONS, items, strict=True)
    }


def test_the_instructors_file_is_safe_where_the_sandbox_has_a_user_of_its_own(graded):
    applied, line = protections(graded)["user"]
    if ROOT_USER:
        assert applied, line
        assert graded["secret"].read_text() == "the instructor's grades\n"
        assert verdict(graded, "dave", 2)[0] == "error" and "PermissionError" in verdict(graded, "dave", 2)[1]
    else:
        assert not applied and line.startswith("NOT APPLIED: An unprivileged user"), line


def test_no_connection_leaves_the_sandbox_where_the_machine_allows_a_network_namespace(graded):
    applied, line = protections(graded)["network"]
    if NETWORK_POSSIBLE:
        assert applied, line
        assert graded["server"].connections == []
        assert (
            verdict(graded, "erin", 1)[0] == "error"
            and "ConnectionRefusedError" in verdict(graded, "erin", 1)[1]
        )
    else:
        assert not applied and line.startswith("NOT APPLIED: No network"), line


def test_submissions_that_are_not_the_courses_are_named_not_guessed(graded):
    assert verdict(graded, "ivan", "") == ("not graded", grade_report.say("reason:no_course_block", "en"))
    assert (
        verdict(graded, "judy", "")[0] == "not graded"
        and "check_to_numpy_v1" in verdict(graded, "judy", "")[1]
    )
    assert verdict(graded, "kim", "") == ("not graded", "not a notebook (no JSON with cells)")


def test_the_html_report_has_the_table_the_hints_the_totals_and_the_order(graded):
    page = graded["page"]
    table = page.tables["grades"]
    header = [text for _, _, text in table[0]]
    assert header == ["student", "00 · 1", "00 · 2", "02 · 1", "02 · 2"]
    alice = next(row for row in table if row[0][2] == "alice")
    assert [text for _, _, text in alice[1:3]] == ["right", "wrong"]
    assert "num_threads" in alice[2][1]["title"]  # the hint on hover
    hints = table[table.index(alice) + 1]
    assert "num_threads" in hints[0][2]  # and in the row under the student
    totals = [text for _, _, text in table[-1]]
    assert totals == ["right / graded", "1 / 6", "0 / 6", "1 / 2", "1 / 2"]
    order = [row[0][2] for row in page.tables["exercises"][1:]]
    assert order == ["00 · 1", "00 · 2", "02 · 1", "02 · 2"]  # each wrong once; 00 · 1 most often not right
    assert {item for _, item in page.lists["not-graded"]} >= {
        f"class/kim.ipynb: {grade_report.say('reason:unreadable', 'en')}"
    }


def test_ctrl_c_stops_cleanly_with_the_report_of_what_was_graded(tmp_path):
    first = submission("00_start_here", "en", [None, None], tmp_path / "class" / "a_first.ipynb")
    submission(
        "00_start_here",
        "en",
        [IMPORTS["00_start_here"] + "while True:\n    pass\n", None],
        tmp_path / "class" / "b_loops.ipynb",
    )
    out = tmp_path / "report"
    command = [sys.executable, GRADE, first.parent, "--out", out, "--jobs", "1", "--cell-timeout", "600"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as grader:
        try:
            lines = []
            for line in grader.stdout:
                lines.append(line)
                if "[1/2] " in line:  # the first graded, the second running: Ctrl-C
                    grader.send_signal(signal.SIGINT)
                    break
            output = "".join(lines) + grader.stdout.read()
            if grader.wait(timeout=120) == 1:
                skip_where_no_user_can_run_the_course(output)
            assert grader.returncode == 130, output
        finally:
            if grader.poll() is None:  # a failed test leaves no grader running (its watchdog ends the rest)
                grader.kill()
    assert "Ctrl-C: stopping" in output and "1 of 2 submissions graded" in output, output
    with (out / "grades.csv").open(encoding="utf-8-sig") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert rows["a_first"]["verdict"] == "not answered"
    assert rows["b_loops"]["verdict"] in ("not graded", "not run"), rows
    assert "stopped" in rows["b_loops"]["hint"]
    assert sandbox_processes() == []


# The pieces, without a kernel.


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_that_lands_in_a_finalizer_still_stops_the_grading(signum):
    """Python's own Ctrl-C, a KeyboardInterrupt raised inside a __del__, is printed as ignored and lost;
    the grader's handler only sets events, which nothing drops. A Ctrl-C after it raises at once."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a Python started in a terminal
    try:
        stop = threading.Event()
        asked = grade.stop_on_signals(stop)

        class Finalized:
            def __del__(self) -> None:
                os.kill(os.getpid(), signum)

        Finalized()  # the handler runs inside __del__
        assert asked.is_set() and stop.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # a Ctrl-C now stops at once
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(10)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def test_a_submission_is_recognised_by_its_cells_not_its_name():
    english = json.loads((ROOT / "notebooks" / "02_tensors_on_devices.ipynb").read_text(encoding="utf-8"))
    chinese = json.loads(
        (ROOT / "notebooks" / "zh-CN" / "02_tensors_on_devices.ipynb").read_text(encoding="utf-8")
    )
    for notebook, edition in ((english, "en"), (chinese, "zh-CN")):
        found = grade_notebooks.identify(notebook, COURSE)
        assert (found.notebook.stem, found.edition) == ("02_tensors_on_devices", edition)
    for cell in chinese["cells"]:  # the ids lost (an old Jupyter): the title still names it
        cell.pop("id", None)
    chinese["cells"] = [
        cell for cell in chinese["cells"] if "COURSE_LANGUAGE" not in grade_notebooks.source_of(cell)
    ]
    found = grade_notebooks.identify(chinese, COURSE)
    assert (found.notebook.stem, found.edition) == ("02_tensors_on_devices", "zh-CN")
    assert grade_notebooks.identify({"cells": [], "metadata": {"course": {}}}, COURSE).reason == "unknown"
    assert grade_notebooks.identify([], COURSE).reason == "unreadable"


def test_the_answer_is_the_students_and_the_check_the_courses():
    answer, _ = grade_notebooks.answer_of(
        "from course_utils.exercises.x import check_a\na = 1; check_a(a)\n%time b = 2\n"
    )
    assert "check_a" not in answer and "a = 1" in answer and "run_line_magic('time', 'b = 2')" in answer
    course = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text(encoding="utf-8"))
    notebook = next(n for n in COURSE if n.stem == "00_start_here")
    theirs = json.loads(json.dumps(course))
    first = next(cell for cell in theirs["cells"] if cell.get("id") == notebook.exercises[0].cell_id)
    first["source"] = (
        "my_accelerator = None\nprint('Correct: I say so')\ndef check_accelerator(x):\n    return True\n"
    )
    cells = grade_notebooks.cells_to_run(course, notebook, theirs)
    roles = [(cell.role, cell.exercise, cell.answered) for cell in cells if cell.exercise]
    assert roles == [
        ("imports", 1, True),
        ("answer", 1, True),
        ("check", 1, True),
        ("answer", 2, False),
        ("check", 2, True),
    ]
    check = next(cell for cell in cells if cell.role == "check").source
    assert check.endswith("_course_grade_verdict_(check_accelerator(my_accelerator))")
    assert cells[0].source == grade_notebooks.source_of(
        next(c for c in course["cells"] if c["cell_type"] == "code")
    )


def test_a_check_cells_outputs_make_the_verdict():
    def shown(**verdict):
        return {"output_type": "display_data", "data": {grade_notebooks.VERDICT_MIME: verdict}}

    right, wrong = shown(ok=True, text="Correct: a"), shown(ok=False, text="Not yet: b")
    assert grade_runner.check_verdict([right, right]) == {
        "verdict": "right",
        "text": "Correct: a\nCorrect: a",
    }
    assert grade_runner.check_verdict([right, wrong]) == {"verdict": "wrong", "text": "Not yet: b"}
    error = {"output_type": "error", "ename": "NameError", "evalue": "name 'f' is not defined"}
    assert grade_runner.check_verdict([right, error]) == {
        "verdict": "error",
        "text": "NameError: name 'f' is not defined",
    }
    assert grade_runner.check_verdict([{"output_type": "stream", "text": "Correct: forged"}]) == {
        "verdict": "error",
        "why": "no_verdict",
    }
    odd = grade_runner.check_verdict([shown(ok=False, text="", returned="bool")])
    assert odd == {"verdict": "error", "why": "returned", "detail": "bool"}
    hint = grade_report.ExerciseResult(1, ("check_a",), **odd).hint("en")
    assert hint == "the check returned a bool, not a verdict"


def test_students_are_named_by_their_folder_or_file(tmp_path):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    for name in ("alice/02.ipynb", "bob.ipynb", ".ipynb_checkpoints/bob-checkpoint.ipynb", "notes.txt"):
        (tmp_path / "class" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "class" / name).write_text("{}")
    found = grade.submissions([str(tmp_path / "class"), str(tmp_path / "class" / "bob.ipynb")])
    assert [(s.student, s.shown) for s in found] == [
        ("alice", "class/alice/02.ipynb"),
        ("bob", "class/bob.ipynb"),
    ]
    with pytest.raises(SystemExit, match=r"SUBMISSION 'missing\.ipynb': no such file"):
        grade.submissions(["missing.ipynb"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match=r"no \.ipynb file"):
        grade.submissions([str(tmp_path / "empty")])


def test_as_root_it_never_runs_students_code_as_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(grade, "free_uids", lambda count: list(range(grade.UID_BASE, grade.UID_BASE + count)))
    monkeypatch.setattr(grade, "user_can_run", lambda uid, settings: "PermissionError: /root/.pyenv")
    with pytest.raises(
        SystemExit, match=r"cannot run this Python or the course here \(PermissionError: /root"
    ):
        grade.plan_sandbox(grade.parser().parse_args(["x"]), 2)


def test_bad_options_are_named(capsys):
    for bad, named in ((["x", "--jobs", "0"], "--jobs"), (["x", "--cell-timeout", "soon"], "--cell-timeout")):
        with pytest.raises(SystemExit):
            grade.parser().parse_args(bad)
        assert named in capsys.readouterr().err


def made_up_results() -> list[grade_report.Result]:
    """A small class's results, of every kind, for the report's own tests."""
    exercise = grade_report.ExerciseResult
    return [
        grade_report.Result(
            Path("a.ipynb"),
            "ann",
            "a.ipynb",
            "02_x",
            "en",
            [
                exercise(1, ("check_p",), "right", "Correct: yes"),
                exercise(2, ("check_q",), "wrong", "Not yet: <look at q>"),
            ],
        ),
        grade_report.Result(
            Path("b.ipynb"),
            "ben",
            "b.ipynb",
            "02_x",
            "zh-CN",
            [
                exercise(1, ("check_p",), "timed_out", seconds=60),
                exercise(2, ("check_q",), "crashed", exit=-9),
            ],
        ),
        grade_report.Result(
            Path("c.ipynb"), "cy", "c.ipynb", "00_y", "en", [exercise(1, ("check_r",), "wrong", "Not yet: r")]
        ),
        grade_report.Result(
            Path("d.ipynb"), "di", "d.ipynb", reason="unknown", missing={"network": "unshare: EPERM"}
        ),
    ]


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_report_in_both_languages(tmp_path, language):
    settings = grade_report.Settings(64, 2.0, 256, 1800, 60, 900, by_user=True)
    csv_path, html_path = grade_report.write_report(made_up_results(), settings, 12.3, tmp_path, language)
    say = lambda key, **fields: grade_report.say(key, language, **fields)  # noqa: E731
    with csv_path.open(encoding="utf-8-sig") as file:
        rows = list(csv.reader(file))
    assert rows[0][0] == say("column:student") and len(rows) == 1 + 5 + 1
    assert rows[-1][6:] == [say("not_graded"), say("reason:unknown")]
    assert rows[4][6:] == [say("crashed"), say("hint:signal", signal="SIGKILL")]
    page = Page(html_path.read_text(encoding="utf-8"))
    table = page.tables["grades"]
    assert [text for _, _, text in table[0]] == [say("column:student"), "00 · 1", "02 · 1", "02 · 2"]
    ann = next(row for row in table if row[0][2] == "ann")
    assert ann[3][1] == {"class": "wrong", "title": "Not yet: <look at q>"} and ann[3][2] == say("wrong")
    assert [text for _, _, text in table[-1]] == [say("totals"), "0 / 1", "1 / 2", "0 / 2"]
    assert [row[0][2] for row in page.tables["exercises"][1:]] == ["02 · 2", "00 · 1", "02 · 1"]
    missing = [text for attributes, text in page.lists["protections"] if attributes.get("class") == "missing"]
    assert missing == [say("missing", what=say("protection:network"), why="unshare: EPERM")]
    assert f'<html lang="{language}">' in html_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_report_in_a_real_browser_shows_the_table_a_hint_and_the_totals(tmp_path, language):
    """The page as an instructor sees it in Chromium: the students' table, a hint on hover and in the
    detail row, the totals row and the exercises most often wrong first."""
    from browser import artifact_dir, chromium_page

    settings = grade_report.Settings(64, 2.0, 256, 1800, 60, 900, by_user=True)
    _, html_path = grade_report.write_report(made_up_results(), settings, 12.3, tmp_path, language)
    say = lambda key, **fields: grade_report.say(key, language, **fields)  # noqa: E731
    with chromium_page(1280, 900) as page:
        page.goto(html_path.as_uri())
        grades = page.locator("table#grades")
        heads = grades.locator("thead th").all_inner_texts()
        assert heads == [say("column:student"), "00 · 1", "02 · 1", "02 · 2"]
        wrong = grades.locator("td.wrong").first
        assert wrong.get_attribute("title") == "Not yet: <look at q>" and wrong.is_visible()
        assert "Not yet: <look at q>" in grades.locator("tr.hints").first.inner_text()
        totals = grades.locator("tr").last.locator("th, td").all_inner_texts()
        assert totals == [say("totals"), "0 / 1", "1 / 2", "0 / 2"]
        order = page.locator("table#exercises tbody tr th").all_inner_texts()
        assert order == ["02 · 2", "00 · 1", "02 · 1"]
        assert page.locator("html").get_attribute("lang") == language
        page.screenshot(path=str(artifact_dir(tmp_path) / f"grades_{language}.png"), full_page=True)
