"""`pytorch-on-gpus` (course_utils.cli): `get` copies the course into a folder of the student's and never
over a file the student changed; `lab` opens the student's edition; both answer --help without torch.
The installed wheel end to end: tests/test_wheel_install.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_hygiene import ROOT

from course_utils import cli, folders


def packaged(tmp_path: Path, **texts: str) -> dict[str, Path]:
    """A stand-in for the installed course: place -> a file holding `texts[place]` (`__` for `/`)."""
    files = {}
    for key, text in texts.items():
        place = key.replace("__", "/")
        source = tmp_path / "package" / place
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text, encoding="utf-8")
        files[place] = source
    return files


def contents(folder: Path) -> dict[str, str]:
    """Every file of a copy but the manifest and the marker, by place."""
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in (cli.MANIFEST, folders.MARKER)
    }


def test_get_copies_the_course_records_it_and_a_second_get_changes_nothing(tmp_path):
    files = packaged(tmp_path, nb="notebook 00", zh_CN__nb="笔记本 00", workers__w="worker")
    done = cli.get(tmp_path / "course", files)
    assert sorted(done.copied) == sorted(files) and not done.updated and not done.kept
    assert contents(tmp_path / "course") == {
        "nb": "notebook 00",
        "zh_CN/nb": "笔记本 00",
        "workers/w": "worker",
    }
    manifest = json.loads((tmp_path / "course" / cli.MANIFEST).read_text())
    assert manifest["files"] == {place: cli.digest(path.read_bytes()) for place, path in files.items()}
    again = cli.get(tmp_path / "course", files)
    assert (again.copied, again.updated, again.kept) == ([], [], [])
    assert again.report() == f"The course in {tmp_path / 'course'} is up to date ({cli.__version__})."


def test_an_update_replaces_what_the_student_left_alone_and_keeps_what_they_changed(tmp_path):
    files = packaged(tmp_path, a="course a v1", b="course b v1")
    copy = tmp_path / "course"
    cli.get(copy, files)
    (copy / "b").write_text("my answer", encoding="utf-8")  # the student ran or edited notebook b
    newer = packaged(tmp_path / "v2", a="course a v2", b="course b v2", c="course c v2")
    done = cli.get(copy, newer)
    assert (done.copied, done.updated, done.kept) == (["c"], ["a"], ["b"])
    assert contents(copy) == {"a": "course a v2", "b": "my answer", "c": "course c v2"}
    report = done.report()
    assert "Kept 1 file you changed" in report and "\n  b" in report and "Updated 1 file " in report
    # Still the student's next time: the hash recorded is the one copied, not the student's.
    assert cli.get(copy, newer).kept == ["b"]
    (copy / "b").write_text("course b v2", encoding="utf-8")  # back to the course's: followed again
    assert cli.get(copy, newer).kept == []


def test_a_file_that_was_there_before_any_copy_is_kept(tmp_path):
    """An empty-but-marked folder (an interrupted first copy) holding a file the course also has."""
    copy = folders.claim(tmp_path / "course", "get")
    (copy / "a").write_text("mine", encoding="utf-8")
    done = cli.get(copy, packaged(tmp_path, a="course a", b="course b"))
    assert (done.copied, done.kept) == (["b"], ["a"])
    assert (copy / "a").read_text(encoding="utf-8") == "mine"


def test_a_folder_of_the_students_own_is_refused_and_left_as_it_was(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(folders.NotOurFolder, match=r"pytorch-on-gpus get .*not empty and was not made"):
        cli.get(mine, packaged(tmp_path, a="course a"))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_link_in_the_copy_is_never_written_through(tmp_path):
    files = packaged(tmp_path, workers__w="course worker", a="course a")
    copy = tmp_path / "course"
    cli.get(copy, files)
    outside = tmp_path / "outside"
    outside.mkdir()
    (copy / "workers" / "w").rename(outside / "w")  # as copied: an update would replace it
    (copy / "workers").rmdir()
    (copy / "workers").symlink_to(outside)
    done = cli.get(copy, packaged(tmp_path / "v2", workers__w="new worker", a="course a"))
    assert done.kept == ["workers/w"] and (outside / "w").read_text(encoding="utf-8") == "course worker"
    (copy / "a").unlink()
    (copy / "a").symlink_to(outside / "w")  # a link at the file itself
    assert cli.get(copy, packaged(tmp_path / "v3", workers__w="course worker", a="new a")).kept == [
        "workers/w",
        "a",
    ]
    assert (outside / "w").read_text(encoding="utf-8") == "course worker"


def test_an_unreadable_manifest_keeps_every_file_that_differs_and_says_so(tmp_path):
    copy = tmp_path / "course"
    cli.get(copy, packaged(tmp_path, a="course a v1", b="course b v1"))
    (copy / cli.MANIFEST).write_text("{not json", encoding="utf-8")
    done = cli.get(copy, packaged(tmp_path / "v2", a="course a v2", b="course b v1"))
    assert done.kept == ["a"] and "could not be read" in done.report()
    assert json.loads((copy / cli.MANIFEST).read_text())["files"].keys() == {"b"}


def test_the_course_of_a_clone_has_both_editions_notebooks_solutions_and_workers():
    files = cli.course_files(*cli.course_locations())
    for prefix, folder in (("", ROOT / "notebooks"), ("zh-CN/", ROOT / "notebooks" / "zh-CN")):
        assert {f"{prefix}{p.name}" for p in folder.glob("[0-9][0-9]_*.ipynb")} <= files.keys()
        assert {f"{prefix}solutions/{p.name}" for p in (folder / "solutions").glob("*.py")} <= files.keys()
        assert {f"{prefix}workers/{p.name}" for p in (folder / "workers").iterdir()} <= files.keys()
    assert len([p for p in files if p.endswith(".ipynb")]) == 2 * len(
        list((ROOT / "notebooks").glob("*.ipynb"))
    )
    chinese = files["zh-CN/workers/who_am_i.py"].read_bytes()
    assert chinese == (ROOT / "translations" / "zh-CN" / "workers" / "who_am_i.py").read_bytes()


def test_an_installed_package_without_the_course_says_to_install_again(tmp_path):
    with pytest.raises(cli.Unavailable, match="pip install --force-reinstall"):
        cli.course_locations(tmp_path / "site-packages" / "course_utils")


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        ("zh-CN", {"COURSE_LANGUAGE": "en"}, "zh-CN"),
        (None, {"COURSE_LANGUAGE": "zh-CN", "LANG": "en_US.UTF-8"}, "zh-CN"),
        (None, {"COURSE_LANGUAGE": "en", "LANG": "zh_CN.UTF-8"}, "en"),
        (None, {"LANG": "zh_CN.UTF-8"}, "zh-CN"),
        (None, {"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
        (None, {"LC_ALL": " ", "LANG": "zh_TW"}, "zh-CN"),
        (None, {}, "en"),
    ],
)
def test_the_edition_comes_from_the_flag_then_course_language_then_the_locale(flag, env, expected):
    assert cli.student_language(flag, env) == expected


@pytest.mark.parametrize(("euid", "root"), [(0, True), (1000, False), (None, False)])
def test_lab_opens_the_editions_notebook_00_and_allows_root_only_for_root(euid, root):
    command = cli.lab_command("zh-CN", ["--no-browser"], euid)
    assert command[:4] == [sys.executable, "-m", "jupyterlab", "--no-browser"]
    assert command[4] == "zh-CN/00_start_here.ipynb" and (command[-1] == "--allow-root") is root
    assert cli.lab_command("en", ["--allow-root"], 0).count("--allow-root") == 1


def test_lab_copies_the_course_then_execs_jupyterlab_in_the_copy(tmp_path, monkeypatch, capsys):
    ran = []
    monkeypatch.chdir(tmp_path)  # lab changes the working folder: restored after the test
    monkeypatch.setattr(cli.os, "execv", lambda path, args: ran.append((Path.cwd(), path, args)))
    monkeypatch.setattr(
        cli, "course_files", lambda *where, **kw: packaged(tmp_path, **{"00_start_here.ipynb": "nb"})
    )
    monkeypatch.setenv("COURSE_LANGUAGE", "en")
    assert cli.main(["lab", "here", "--no-browser", "--port=8899"]) == 0
    (cwd, path, args) = ran[0]
    assert cwd == (tmp_path / "here").resolve() and path == sys.executable
    assert args[3:5] == ["--no-browser", "--port=8899"] and "00_start_here.ipynb" in args
    assert "Copied 1 file of the course" in capsys.readouterr().out


def test_a_chinese_student_reads_the_command_in_chinese(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        cli,
        "course_files",
        lambda *where, **kw: packaged(tmp_path, **{"00_start_here.ipynb": "nb", "a.py": "a"}),
    )
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    for name in ("COURSE_LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["get", str(tmp_path / "course")]) == 0
    out = capsys.readouterr().out
    assert "的 2 个文件复制到" in out and "在 JupyterLab 里打开它：pytorch-on-gpus lab" in out
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    assert cli.main(["get", str(tmp_path / "mine")]) == 1
    assert capsys.readouterr().err.startswith("pytorch-on-gpus：错误：")


def test_every_message_has_its_chinese_with_the_same_fields():
    field = re.compile(r"\{(\w*)\}")
    for english, chinese in cli.CHINESE_MESSAGES.items():
        assert re.search("[\u4e00-\u9fff]", chinese), english
        assert sorted(field.findall(english)) == sorted(field.findall(chinese)), english


def test_both_routes_build_jupyterlab_s_command_with_the_same_code(monkeypatch):
    import course

    built = []
    monkeypatch.setattr(cli, "jupyterlab_command", lambda *args: built.append(args) or ["x"])
    course.lab_command(Path("python"), ["--no-browser"], euid=1000)
    cli.lab_command("zh-CN", ["--no-browser"], 1000)
    assert [args[2] for args in built] == [course.FIRST_NOTEBOOK, "zh-CN/00_start_here.ipynb"]


def test_lab_without_jupyterlab_names_the_extra_and_copies_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    assert cli.main(["lab", str(tmp_path / "course")]) == 1
    assert 'pip install "pytorch-on-gpus-hands-on[lab]"' in capsys.readouterr().err
    assert not (tmp_path / "course").exists()


def test_bad_arguments_get_one_line_and_no_traceback(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert cli.main(["get", str(tmp_path / "file")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pytorch-on-gpus: error: pytorch-on-gpus get ") and "a file, not a folder" in err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["get", "a", "b"])
    assert exit_.value.code == 2 and "unrecognized arguments: b" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["lab", "--language", "fr"])
    assert "invalid choice: 'fr'" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--help"], ["get", "--help"], ["lab", "--help"]])
def test_help_answers_without_importing_torch(args):
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['pytorch-on-gpus', *{args!r}]\n"
        "try:\n    runpy.run_module('course_utils.cli', run_name='__main__')\n"
        "except SystemExit as done:\n    print('exit', done.code, 'torch' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.stdout.startswith("usage: pytorch-on-gpus") and result.stdout.endswith("exit 0 False\n")
