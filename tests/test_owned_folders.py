"""The course deletes only what it made: scripts/owned_folders.py, and the commands that write into a
folder the user names (`course.py site --out`, `course.py gpu prepare --wheels`) given a folder of the
user's, where each refuses and the user's files survive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import owned_folders
import pytest

ROOT = Path(__file__).resolve().parent.parent


def users_folder(tmp_path: Path) -> Path:
    """A folder of the user's where a build would write: src/keep.txt, html/ and notes.txt."""
    folder = tmp_path / "mine"
    (folder / "src").mkdir(parents=True)
    (folder / "html").mkdir()
    (folder / "src" / "keep.txt").write_text("the user's\n")
    (folder / "notes.txt").write_text("the user's notes\n")
    return folder


def test_a_missing_or_empty_folder_is_claimed_with_the_marker(tmp_path: Path) -> None:
    for folder in (tmp_path / "new" / "deep", tmp_path / "empty"):
        if folder.name == "empty":
            folder.mkdir()
        assert owned_folders.claim(folder, "--out") == folder.resolve()
        assert owned_folders.is_ours(folder)
    again = owned_folders.claim(tmp_path / "empty", "--out")  # marked now: accepted again
    assert again == (tmp_path / "empty").resolve()


def test_a_folder_of_the_users_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    folder = users_folder(tmp_path)
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    with pytest.raises(owned_folders.NotOurFolder, match=r"not empty and was not made by the course.*--out"):
        owned_folders.claim(folder, "--out")
    with pytest.raises(owned_folders.NotOurFolder, match="marker"):
        owned_folders.remove(folder, "src")
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    file = folder / "notes.txt"
    with pytest.raises(owned_folders.NotOurFolder, match="a file, not a folder"):
        owned_folders.claim(file, "--wheels")


def test_dot_dot_and_links_are_resolved_before_the_check(tmp_path: Path) -> None:
    folder = users_folder(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(folder)
    (tmp_path / "made").mkdir()
    for name in (link, tmp_path / "made" / ".." / "mine"):
        with pytest.raises(owned_folders.NotOurFolder):
            owned_folders.claim(name, "--out")
    assert (folder / "src" / "keep.txt").read_text() == "the user's\n"


def test_remove_takes_named_entries_only_and_never_follows_a_link(tmp_path: Path) -> None:
    ours = owned_folders.claim(tmp_path / "ours", "--out")
    outside = users_folder(tmp_path)
    (ours / "html").mkdir()
    (ours / "html" / "index.html").write_text("built")
    (ours / "src").symlink_to(outside / "src")  # a link out of the folder: only the link goes
    (ours / "kept.txt").write_text("not named")
    owned_folders.remove(ours, "html", "src", "missing")
    assert not (ours / "html").exists() and not (ours / "src").exists()
    assert (ours / "kept.txt").exists() and owned_folders.is_ours(ours)
    assert (outside / "src" / "keep.txt").read_text() == "the user's\n"
    for bad in ("..", "", ".", "a/b", "../mine", owned_folders.MARKER):
        with pytest.raises(ValueError, match="not an entry"):
            owned_folders.remove(ours, bad)


def test_a_link_to_a_marked_folder_is_not_ours_to_empty(tmp_path: Path) -> None:
    ours = owned_folders.claim(tmp_path / "ours", "--out")
    (tmp_path / "alias").symlink_to(ours)
    with pytest.raises(owned_folders.NotOurFolder):
        owned_folders.remove(tmp_path / "alias", "html")


def test_adopt_marks_only_an_existing_real_folder(tmp_path: Path) -> None:
    owned_folders.adopt(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
    (tmp_path / "old").mkdir()
    owned_folders.adopt(tmp_path / "old")
    assert owned_folders.is_ours(tmp_path / "old")


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a script of scripts/ as course.py runs it, from `cwd`."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("script", "option"), [("website.py", "--out"), ("gpu_lane.py", "--wheels")], ids=["site", "gpu-prepare"]
)
def test_a_command_given_a_folder_of_the_users_refuses_and_deletes_nothing(
    tmp_path: Path, script: str, option: str
) -> None:
    folder = users_folder(tmp_path)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    command = [str(ROOT / "scripts" / script)]
    command += ["prepare", option, str(folder)] if script == "gpu_lane.py" else [option, str(folder)]
    result = run_script(*command, cwd=ROOT)
    assert result.returncode != 0, result.stdout
    assert "not empty and was not made by the course" in result.stderr
    assert option in result.stderr and "Traceback" not in result.stderr
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert sorted(folder.rglob("*")) == sorted([*before, folder / "src", folder / "html"])


@pytest.mark.parametrize("form", ["separate", "equals"])
def test_course_py_site_writes_where_the_user_stands(tmp_path, monkeypatch, form: str) -> None:
    """`course.py site --out mine` run from tmp_path means tmp_path/mine, not a folder of the checkout:
    the script, run from the course root as course.py runs it, refuses that folder of the user's."""
    import course

    users_folder(tmp_path)
    started: list[list[str]] = []
    monkeypatch.setattr(course, "ensure_environment", lambda: Path(sys.executable))
    monkeypatch.setattr(course, "run", lambda command, **kw: started.append([str(c) for c in command]) or 0)
    monkeypatch.chdir(tmp_path)
    out = ["--out", "mine"] if form == "separate" else ["--out=mine"]
    assert course.main(["site", *out]) == 0
    result = run_script(*started[0][1:], cwd=ROOT)
    assert result.returncode != 0
    assert str((tmp_path / "mine").resolve()) in result.stderr
    assert (tmp_path / "mine" / "src" / "keep.txt").exists()
