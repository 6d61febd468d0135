"""The results of `course.py grade` and their report, in the instructor's language (English or Chinese).

The report is a CSV file (one row per student and exercise, and one per submission that was not
graded, saying why) and an HTML page: the students against the exercises (each cell's hint on
hover and, for what is not right, in a row under the student), the class's totals per exercise,
the exercises most often wrong first, the submissions not graded, and what the sandbox did and
did not do. Only the standard library is used.
"""

from __future__ import annotations

import csv
import html
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CHINESE = "zh-CN"
VERDICTS = ("right", "wrong", "error", "not_answered", "timed_out", "crashed", "not_run")
# What happened to an exercise that `text` does not say: why it did not run (after a crash, a kernel
# stuck after a timeout, Ctrl-C, a runner that ended early, the notebook's timeout), or a check that
# showed no verdict or returned something else.
WHYS = ("crashed", "stuck", "stopped", "runner", "whole", "no_verdict", "returned")
FAILURES = ("wrong", "error", "timed_out", "crashed")  # what counts against an exercise, "wrong" first
# The protections the report lists, in this order (the core-file limit is kept quiet: it only saves disk).
PROTECTIONS = ("network", "user", "environment", "processes", "memory", "file_size", "cpu", "cleanup")

MESSAGES: dict[str, tuple[str, str]] = {
    "right": ("right", "正确"),
    "wrong": ("wrong", "未通过"),
    "error": ("error", "出错"),
    "not_answered": ("not answered", "未作答"),
    "timed_out": ("timed out", "超时"),
    "crashed": ("crashed", "崩溃"),
    "not_run": ("not run", "未运行"),
    "not_graded": ("not graded", "未评分"),
    "edition:en": ("English", "英文版"),
    "edition:zh-CN": ("Chinese", "中文版"),
    "hint:not_answered": (
        "the exercise's cell still holds the course's placeholder",
        "练习的单元格里还是课程给的占位内容",
    ),
    "hint:cell_timeout": (
        "the cell ran longer than {seconds} s and was interrupted",
        "这个单元格运行超过 {seconds} 秒，被中断了",
    ),
    "hint:whole_timeout": (
        "the whole notebook ran longer than {seconds} s",
        "整个笔记本运行超过 {seconds} 秒",
    ),
    "hint:exit": ("the kernel died (exit status {status})", "内核退出了（退出码 {status}）"),
    "hint:signal": ("the kernel was killed by signal {signal}", "内核被信号 {signal} 杀死了"),
    "hint:died": ("the kernel died", "内核退出了"),
    "hint:why:crashed": ("not reached: the kernel had died", "没有运行到：内核已经退出"),
    "hint:why:stuck": (
        "not reached: the kernel did not stop after a timeout",
        "没有运行到：超时之后内核没有停下来",
    ),
    "hint:why:stopped": (
        "not reached: the grading was stopped (Ctrl-C)",
        "没有运行到：评分被停止了（Ctrl-C）",
    ),
    "hint:why:runner": (
        "not reached: the sandbox's process ended early",
        "没有运行到：沙箱里的评分进程提前结束了",
    ),
    "hint:why:no_verdict": (
        "the check showed no verdict (were the checks redefined?)",
        "检查没有给出结果（检查函数被重新定义了吗？）",
    ),
    "hint:why:returned": ("the check returned a {detail}, not a verdict", "检查返回的是 {detail}，不是结果"),
    "reason:unreadable": ("not a notebook (no JSON with cells)", "不是笔记本（不是带单元格的 JSON）"),
    "reason:no_course_block": (
        "not one of the course's notebooks: its metadata has no course block",
        "不是课程的笔记本：它的元数据里没有 course 块",
    ),
    "reason:unknown": (
        "not one of the course's notebooks: its cells match none of them",
        "不是课程的笔记本：它的单元格和课程的哪个笔记本都对不上",
    ),
    "reason:other_edition": (
        "another edition of a course notebook: it calls {detail}, which the course's checks no longer "
        "have; have the student copy the answers into the current notebook",
        "这是课程笔记本的另一个版本：它调用的 {detail} 在课程现在的检查里已经没有了。"
        "请学生把答案抄进当前版本的笔记本",
    ),
    "reason:too_large": ("larger than {detail} MiB: not read", "超过 {detail} MiB，没有读取"),
    "reason:failed": ("could not be graded: {detail}", "无法评分：{detail}"),
    "reason:stopped": ("not graded: the grading was stopped (Ctrl-C)", "没有评分：评分被停止了（Ctrl-C）"),
    "note:course_cell": (
        "the course's cell {cell} failed: {detail}",
        "课程的第 {cell} 个单元格失败了：{detail}",
    ),
    "protection:network": (
        "No network: each submission ran in a network namespace of its own, with only a loopback.",
        "没有网络：每份作业都在自己的网络命名空间里运行，那里只有回环接口。",
    ),
    "protection:user": (
        "An unprivileged user of its own (a user id of no account, no groups), which cannot write your "
        "files.",
        "以它自己的非特权用户运行（不属于任何账户的用户 ID，没有附加组），不能改写你的文件。",
    ),
    "protection:environment": (
        "An environment of its own, not yours (no tokens or keys), and a folder of its own as HOME and "
        "TMPDIR.",
        "使用它自己的环境变量，而不是你的（没有令牌或密钥），并以它自己的文件夹作为 HOME 和 TMPDIR。",
    ),
    "protection:processes": (
        "At most {processes} processes and threads (RLIMIT_NPROC).",
        "最多 {processes} 个进程和线程（RLIMIT_NPROC）。",
    ),
    "protection:memory": (
        "At most {memory} GiB of memory per process (RLIMIT_DATA).",
        "每个进程最多 {memory} GiB 内存（RLIMIT_DATA）。",
    ),
    "protection:file_size": (
        "Files of at most {file_size} MiB (RLIMIT_FSIZE).",
        "每个文件最多 {file_size} MiB（RLIMIT_FSIZE）。",
    ),
    "protection:cpu": (
        "At most {cpu} s of CPU time per process (RLIMIT_CPU); each cell at most {cell} s, the notebook "
        "{whole} s.",
        "每个进程最多 {cpu} 秒 CPU 时间（RLIMIT_CPU）；每个单元格最多 {cell} 秒，整个笔记本最多 {whole} 秒。",
    ),
    "protection:cleanup": (
        "Everything it started was killed afterwards: its process group, every process below it, and {how}.",
        "它启动的一切事后都被杀掉：它的进程组、它下面的每个进程，以及{how}。",
    ),
    "cleanup:user": ("every process of its user", "它的用户的每个进程"),
    "cleanup:mark": ("every process that carries its mark", "每个带着它的标记的进程"),
    "missing": ("NOT APPLIED: {what} Why: {why}", "没有生效：{what}原因：{why}"),
    "not_a_boundary": (
        "The sandbox keeps a mistake or a prank in one notebook from harming the others or this machine; "
        "it is no security boundary against a determined attacker (a kernel exploit), does not bound "
        "the disk space of many files, and lets a student's code read what every user may read.",
        "沙箱能防止一个笔记本里的错误或恶作剧影响其他作业或这台机器；但它不是防范蓄意攻击者（利用内核漏洞）的"
        "安全边界，不限制许多文件加起来占用的磁盘空间，学生的代码也能读取所有用户都能读取的文件。",
    ),
    "title": ("Grades", "评分结果"),
    "summary": (
        "{graded} of {total} submissions graded, of {students} students, in {seconds} s: {counts}. "
        "Not graded: {not_graded}.",
        "共 {total} 份作业，评了 {graded} 份，来自 {students} 名学生，用时 {seconds} 秒：{counts}。"
        "没有评分：{not_graded} 份。",
    ),
    "heading:grades": ("Students and exercises", "学生与练习"),
    "heading:exercises": ("Exercises, most often wrong first", "各练习的结果（未通过最多的在前）"),
    "heading:not_graded": ("Submissions not graded", "没有评分的作业"),
    "heading:protections": ("The sandbox", "沙箱"),
    "column:student": ("student", "学生"),
    "column:file": ("file", "文件"),
    "column:notebook": ("notebook", "笔记本"),
    "column:edition": ("edition", "版本"),
    "column:exercise": ("exercise", "练习"),
    "column:checks": ("checks", "检查"),
    "column:verdict": ("verdict", "结果"),
    "column:hint": ("hint", "提示"),
    "totals": ("right / graded", "正确 / 已评"),
    "none": ("none", "无"),
    "progress": (
        "[{done}/{total}] {student} ({file}): {what} ({seconds} s so far, {left} left)",
        "[{done}/{total}] {student}（{file}）：{what}（已用 {seconds} 秒，还剩 {left} 份）",
    ),
    "start": (
        "Grading {total} submission(s), {jobs} at a time, each in a sandbox of its own.",
        "开始评分：共 {total} 份作业，同时评 {jobs} 份，每份都在自己的沙箱里运行。",
    ),
    "stopping": (
        "Ctrl-C: stopping; the report will hold what was graded so far.",
        "Ctrl-C：正在停止；报告里会有到目前为止评完的作业。",
    ),
    "written": ("Report: {html} and {csv}", "报告：{html} 和 {csv}"),
}


def say(key: str, language: str, **fields: object) -> str:
    """MESSAGES[key] in `language` ("en" or "zh-CN"), its {fields} filled in."""
    english, chinese = MESSAGES[key]
    return (chinese if language == CHINESE else english).format(**fields)


@dataclass
class ExerciseResult:
    """One exercise of one submission: its verdict (VERDICTS) and what the report says about it."""

    number: int
    checks: tuple[str, ...]
    verdict: str
    text: str = ""  # the check's own words, or the error, as the student saw them
    exit: int | None = None  # a dead kernel's exit status (negative: the signal)
    seconds: float | None = None  # a timeout's length
    why: str | None = None  # what happened, where `text` does not say: one of WHYS
    detail: str = ""  # what the check returned instead of a verdict (why: returned)

    def hint(self, language: str) -> str:
        """The hint the report shows: the student's own line, else the grader's words for what happened."""
        if self.text:
            return self.text
        if self.verdict == "not_answered":
            return say("hint:not_answered", language)
        if self.why == "whole":
            return say("hint:whole_timeout", language, seconds=round(self.seconds or 0))
        if self.verdict == "timed_out":
            return say("hint:cell_timeout", language, seconds=round(self.seconds or 0))
        if self.verdict == "crashed":
            if self.exit is not None and self.exit < 0:
                return say("hint:signal", language, signal=signal_name(-self.exit))
            if self.exit is not None:
                return say("hint:exit", language, status=self.exit)
            return say("hint:died", language)
        if self.why in ("no_verdict", "returned") or (self.verdict == "not_run" and self.why):
            return say(f"hint:why:{self.why}", language, detail=self.detail)
        return ""


def signal_name(number: int) -> str:
    """SIGKILL for 9: a signal's name, or its number where it has none."""
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


@dataclass
class Result:
    """What became of one submission: graded (with its exercises), or not, and why (`reason`)."""

    path: Path
    student: str
    shown: str  # the file as the report names it
    notebook: str | None = None
    edition: str | None = None
    exercises: list[ExerciseResult] = field(default_factory=list)
    reason: str | None = None  # not graded: unreadable, no_course_block, unknown, other_edition, ...
    detail: str = ""
    notes: list[tuple[int, str]] = field(default_factory=list)  # course cells that raised: number, error
    missing: dict[str, str] = field(default_factory=dict)  # protections not applied: why
    seconds: float = 0.0

    @property
    def graded(self) -> bool:
        """Whether the submission was recognised and run."""
        return self.reason is None and self.notebook is not None

    def why_not(self, language: str) -> str:
        """Why the submission was not graded, in words."""
        return say(f"reason:{self.reason}", language, detail=self.detail)

    def outcome(self, language: str) -> str:
        """One line on the submission: its counts of verdicts, or why it was not graded."""
        if not self.graded:
            return self.why_not(language)
        counts = Counter(exercise.verdict for exercise in self.exercises)
        return ", ".join(f"{counts[v]} {say(v, language)}" for v in VERDICTS if counts[v]) or say(
            "none", language
        )


@dataclass
class Settings:
    """The limits a run used, as the report states them."""

    processes: int
    memory_gib: float
    file_mib: int
    cpu_seconds: int
    cell_timeout: int
    timeout: int
    by_user: bool  # whether cleanup found the processes by their user (else by their mark)


def column(notebook: str, number: int) -> str:
    """An exercise's short name in the report: `02 · 1` for notebook 02's first exercise."""
    return f"{notebook[:2]} · {number}"


def exercise_columns(results: list[Result]) -> list[tuple[str, int, tuple[str, ...]]]:
    """The exercises of the notebooks graded, in course order: (notebook, number, checks)."""
    found = {
        (result.notebook, exercise.number): exercise.checks
        for result in results
        if result.graded
        for exercise in result.exercises
    }
    return [(notebook, number, checks) for (notebook, number), checks in sorted(found.items())]


def verdict_counts(results: list[Result]) -> dict[tuple[str, int], Counter[str]]:
    """For each exercise, how many submissions got each verdict."""
    counts: dict[tuple[str, int], Counter[str]] = {}
    for result in results:
        for exercise in result.exercises if result.graded else []:
            counts.setdefault((result.notebook, exercise.number), Counter())[exercise.verdict] += 1
    return counts


def most_often_wrong(results: list[Result]) -> list[tuple[str, int, tuple[str, ...]]]:
    """The exercises, those most often wrong first (then those most often not right), else in course order."""
    counts = verdict_counts(results)
    columns = exercise_columns(results)

    def key(item: tuple[str, int, tuple[str, ...]]) -> tuple[int, int, int]:
        count = counts[item[:2]]
        return -count["wrong"], -sum(count[v] for v in FAILURES), columns.index(item)

    return sorted(columns, key=key)


def summary(results: list[Result], seconds: float, language: str) -> str:
    """The line that ends a run: how many submissions were graded, the verdicts, how many were not."""
    graded = [result for result in results if result.graded]
    counts = Counter(exercise.verdict for result in graded for exercise in result.exercises)
    words = ", ".join(f"{counts[v]} {say(v, language)}" for v in VERDICTS if counts[v]) or say(
        "none", language
    )
    return say(
        "summary",
        language,
        graded=len(graded),
        total=len(results),
        students=len({result.student for result in results}),
        seconds=round(seconds),
        counts=words,
        not_graded=len(results) - len(graded),
    )


def protection_lines(
    missing: dict[str, set[str]], settings: Settings, language: str
) -> list[tuple[bool, str]]:
    """Each protection as a line, and whether it applied (else the line says why not: `missing`)."""
    fields = {
        "processes": settings.processes,
        "memory": f"{settings.memory_gib:g}",
        "file_size": settings.file_mib,
        "cpu": settings.cpu_seconds,
        "cell": settings.cell_timeout,
        "whole": settings.timeout,
        "how": say("cleanup:user" if settings.by_user else "cleanup:mark", language),
    }
    lines = []
    for name in PROTECTIONS:
        what = say(f"protection:{name}", language, **fields)
        if missing.get(name):
            lines.append((False, say("missing", language, what=what, why="; ".join(sorted(missing[name])))))
        else:
            lines.append((True, what))
    return lines


def missing_protections(results: list[Result]) -> dict[str, set[str]]:
    """The protections that some submission lacked, and why."""
    missing: dict[str, set[str]] = {}
    for result in results:
        for name, why in result.missing.items():
            missing.setdefault(name, set()).add(why)
    return missing


def csv_rows(results: list[Result], language: str) -> list[list[str]]:
    """The CSV's rows, its header first: one per student and exercise, one per submission not graded."""
    header = ["student", "file", "notebook", "edition", "exercise", "checks", "verdict", "hint"]
    rows = [[say(f"column:{name}", language) for name in header]]
    for result in results:
        edition = say(f"edition:{result.edition}", language) if result.edition else ""
        if not result.graded:
            rows.append(
                [
                    result.student,
                    result.shown,
                    "",
                    "",
                    "",
                    "",
                    say("not_graded", language),
                    result.why_not(language),
                ]
            )
            continue
        for exercise in result.exercises:
            rows.append(
                [
                    result.student,
                    result.shown,
                    result.notebook or "",
                    edition,
                    str(exercise.number),
                    " ".join(exercise.checks),
                    say(exercise.verdict, language),
                    exercise.hint(language),
                ]
            )
    return rows


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: center; }
tbody th { text-align: left; }
td.right { background: #d8f5d0; } td.wrong { background: #ffe2b8; }
td.error, td.crashed { background: #ffc9c9; }
td.timed_out { background: #f2d0f5; } td.not_answered, td.not_run { background: #eee; }
tr.hints td { text-align: left; font-size: 0.9em; color: #444; }
li.missing { color: #b00; font-weight: bold; }
"""


def _cell(tag: str, text: object, **attributes: object) -> str:
    """An HTML element with escaped text and attributes (class_ for class)."""
    attrs = "".join(
        f' {name.rstrip("_")}="{html.escape(str(value))}"' for name, value in attributes.items() if value
    )
    return f"<{tag}{attrs}>{html.escape(str(text))}</{tag}>"


def grades_table(results: list[Result], language: str) -> list[str]:
    """The students against the exercises, a row of hints under each student, the totals at the foot."""
    columns = exercise_columns(results)
    counts = verdict_counts(results)
    parts = ['<table id="grades">', "<thead><tr>", _cell("th", say("column:student", language))]
    parts += [_cell("th", column(n, k), title=f"{n}: {' '.join(checks)}") for n, k, checks in columns]
    parts.append("</tr></thead><tbody>")
    rows: dict[str, dict[tuple[str, int], ExerciseResult]] = {}
    for result in results:
        if not result.graded:
            continue
        key = result.student
        if any((result.notebook, exercise.number) in rows.get(key, {}) for exercise in result.exercises):
            key = (
                f"{result.student} ({result.shown})"  # a second submission of one notebook: a row of its own
            )
        rows.setdefault(key, {}).update({(result.notebook, e.number): e for e in result.exercises})
    for student, row in rows.items():
        parts.append("<tr>" + _cell("th", student))
        hints = []
        for notebook, number, _ in columns:
            exercise = row.get((notebook, number))
            if exercise is None:
                parts.append("<td></td>")
                continue
            hint = exercise.hint(language)
            parts.append(_cell("td", say(exercise.verdict, language), class_=exercise.verdict, title=hint))
            if exercise.verdict != "right" and hint:
                hints.append(f"{column(notebook, number)} {say(exercise.verdict, language)}: {hint}")
        parts.append("</tr>")
        if hints:
            items = "".join(_cell("li", hint) for hint in hints)
            parts.append(f'<tr class="hints"><td colspan="{len(columns) + 1}"><ul>{items}</ul></td></tr>')
    parts.append("</tbody><tfoot><tr>" + _cell("th", say("totals", language)))
    for notebook, number, _ in columns:
        count = counts[(notebook, number)]
        parts.append(_cell("td", f"{count['right']} / {sum(count.values())}"))
    parts.append("</tr></tfoot></table>")
    return parts


def exercises_table(results: list[Result], language: str) -> list[str]:
    """Each exercise's count of every verdict, the most often wrong first."""
    counts = verdict_counts(results)
    parts = ['<table id="exercises">', "<thead><tr>", _cell("th", say("column:exercise", language))]
    parts += [_cell("th", say("column:checks", language))] + [_cell("th", say(v, language)) for v in VERDICTS]
    parts.append("</tr></thead><tbody>")
    for notebook, number, checks in most_often_wrong(results):
        count = counts[(notebook, number)]
        parts.append(
            "<tr>" + _cell("th", column(notebook, number), title=notebook) + _cell("td", " ".join(checks))
        )
        parts += [_cell("td", count[v]) for v in VERDICTS]
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return parts


def html_page(results: list[Result], settings: Settings, seconds: float, language: str) -> str:
    """The report as one self-contained HTML page in `language`."""
    title = say("title", language)
    parts = [
        f'<!DOCTYPE html>\n<html lang="{language}"><head><meta charset="utf-8">',
        _cell("title", title),
        f"<style>{STYLE}</style></head><body>",
        _cell("h1", title),
        _cell("p", summary(results, seconds, language), class_="summary"),
        _cell("h2", say("heading:grades", language)),
        *grades_table(results, language),
        _cell("h2", say("heading:exercises", language)),
        *exercises_table(results, language),
        _cell("h2", say("heading:not_graded", language)),
        '<ul id="not-graded">',
    ]
    not_graded = [result for result in results if not result.graded]
    parts += [_cell("li", f"{result.shown}: {result.why_not(language)}") for result in not_graded]
    if not not_graded:
        parts.append(_cell("li", say("none", language)))
    parts.append("</ul>")
    notes = [
        f"{result.shown}: {say('note:course_cell', language, cell=cell, detail=text)}"
        for result in results
        for cell, text in result.notes
    ]
    if notes:
        parts += ['<ul id="notes">', *(_cell("li", note) for note in notes), "</ul>"]
    parts += [_cell("h2", say("heading:protections", language)), '<ul id="protections">']
    lines = protection_lines(missing_protections(results), settings, language)
    parts += [_cell("li", line, class_="" if applied else "missing") for applied, line in lines]
    parts += ["</ul>", _cell("p", say("not_a_boundary", language)), "</body></html>\n"]
    return "\n".join(parts)


def write_report(
    results: list[Result], settings: Settings, seconds: float, out: Path, language: str
) -> tuple[Path, Path]:
    """Write grades.csv and grades.html into `out` (made if missing); their paths."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / "grades.csv", out / "grades.html"
    with csv_path.open("w", encoding="utf-8-sig", newline="") as file:  # with a BOM: spreadsheets read UTF-8
        csv.writer(file).writerows(csv_rows(results, language))
    html_path.write_text(html_page(results, settings, seconds, language), encoding="utf-8")
    return csv_path, html_path
