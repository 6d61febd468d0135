"""Every link to the course's repository is made from pyproject.toml's [project.urls]; retarget moves all."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import links
import pytest
from notebook_hygiene import ROOT

import course
import translations

REPO = links.read_repository((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FORK = "https://github.com/an-instructor/my-gpu-course"


@pytest.fixture
def course_copy(tmp_path):
    """The course's linked files, its notebooks as they were before any sync: no badge, no set-up cell."""
    for name in links.TEXT_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        nb = json.loads(path.read_text(encoding="utf-8"))
        nb["cells"] = [c for c in nb["cells"] if c.get("id") != links.SETUP_CELL_ID]
        title = nb["cells"][0]
        title["source"] = links.BADGE_LINE.sub("", "".join(title["source"])).splitlines(keepends=True)
        (tmp_path / "notebooks" / path.name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return tmp_path


def all_text(root) -> str:
    files = [root / name for name in links.TEXT_FILES] + sorted((root / "notebooks").glob("*.ipynb"))
    return "\n".join(path.read_text(encoding="utf-8") for path in files)


def test_the_committed_files_link_to_no_other_repository():
    text = all_text(ROOT)
    assert links.foreign_links(text, REPO) == []
    assert REPO.url in text


def test_the_committed_notebooks_carry_badge_and_set_up_cell():
    assert links.update(ROOT, check=True) == []


def test_a_foreign_course_link_is_caught():
    text = "[Binder](https://mybinder.org/v2/gh/someone/else/HEAD) and `pip install git+https://github.com/a/b.git`"
    assert links.foreign_links(text, REPO) == [
        "mybinder.org/v2/gh/someone/else",
        "git+https://github.com/a/b.git",
    ]
    ok = f"{REPO.binder('00_start_here.ipynb')} {REPO.colab('00_start_here.ipynb')} git clone {REPO.url}"
    assert links.foreign_links(ok, REPO) == []


def test_sync_puts_badge_and_set_up_cell_into_every_notebook_and_is_idempotent(course_copy):
    report = links.update(course_copy)
    notebooks = sorted((course_copy / "notebooks").glob("*.ipynb"))
    assert len(report) == len(notebooks)
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        title = "".join(cells[0]["source"]).splitlines()
        assert title[1:4] == ["", REPO.badge(path.name), ""]
        first_code = next(c for c in cells if c["cell_type"] == "code")
        assert "".join(first_code["source"]) == links.setup_cell_source(f"git+{REPO.url}")
        assert first_code["id"] == links.SETUP_CELL_ID
        assert len(first_code["source"]) <= 6, f"{path.name}: the set-up cell has more than 6 lines"
    before = all_text(course_copy)
    assert links.update(course_copy) == []
    assert all_text(course_copy) == before
    assert links.update(course_copy, check=True) == []


def test_retarget_moves_every_link_and_check_changes_nothing(course_copy):
    links.update(course_copy)
    before = all_text(course_copy)
    assert links.update(course_copy, FORK, check=True) != []
    assert all_text(course_copy) == before
    links.update(course_copy, FORK)
    text = all_text(course_copy)
    assert f"{REPO.owner}/{REPO.name}" not in text
    fork = links.parse_repository(FORK)
    assert links.read_repository((course_copy / "pyproject.toml").read_text(encoding="utf-8")) == fork
    assert fork.badge("05_data_parallel.ipynb") in text
    assert f"git+{FORK}" in text
    assert links.foreign_links(text, fork) == []
    assert links.update(course_copy, check=True) == []


def test_retarget_leaves_links_to_other_repositories_alone():
    text = "https://github.com/pytorch/pytorch/issues/1 and https://github.com/a/b-longer"
    assert links.retarget_text(text, links.Repository("a", "b"), links.Repository("c", "d")) == text


@pytest.mark.parametrize(
    "bad", ["github.com/me/course", "https://gitlab.com/me/course", "https://github.com/me"]
)
def test_a_bad_url_says_what_to_give(bad):
    with pytest.raises(ValueError, match=r"https://github\.com/OWNER/NAME"):
        links.parse_repository(bad)


def test_every_notebook_has_colab_and_studio_lab_and_from_05_on_kaggle():
    owner_name = f"{REPO.owner}/{REPO.name}"
    github = f"https://github.com/{owner_name}/blob/main/notebooks/"
    for name in (
        "00_start_here.ipynb",
        "04_choosing_gpus.ipynb",
        "05_data_parallel.ipynb",
        "12_new_lesson.ipynb",
    ):
        badge = REPO.badge(name)
        assert f"(https://colab.research.google.com/github/{owner_name}/blob/main/notebooks/{name})" in badge
        assert (
            f"(https://studiolab.sagemaker.aws/import/github/{owner_name}/blob/main/notebooks/{name})"
            in badge
        )
        kaggle = f"(https://kaggle.com/kernels/welcome?src={github}{name})"
        assert (kaggle in badge) is (int(name[:2]) >= 5), name  # by number: a new notebook 12 gets it too
    committed = all_text(ROOT)
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert REPO.badge(path.name) in committed
        assert (f"{github}{path.name}" in committed) is (int(path.name[:2]) >= 5)


def test_the_kaggle_and_studio_lab_links_of_another_repository_are_caught():
    fork = links.parse_repository(FORK)
    text = fork.badge("07_launching_and_multi_node.ipynb")
    found = links.foreign_links(text, REPO)
    assert "kernels/welcome?src=https://github.com/an-instructor/my-gpu-course" in found
    assert "studiolab.sagemaker.aws/import/github/an-instructor/my-gpu-course" in found
    assert links.foreign_links(text, fork) == []


def test_the_command_line_check_exits_1_on_a_stale_copy(course_copy):
    script = ROOT / "scripts" / "links.py"
    shutil.copytree(ROOT / "scripts", course_copy / "scripts")
    result = subprocess.run(
        [sys.executable, str(course_copy / "scripts" / "links.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 1 and "set-up cell inserted" in result.stdout
    result = subprocess.run([sys.executable, str(script), "not-a-url"], capture_output=True, text=True)
    assert result.returncode == 2 and "https://github.com/OWNER/NAME" in result.stderr
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--check" in result.stdout and "URL" in result.stdout.upper()
    result = subprocess.run([sys.executable, str(script), "--chek"], capture_output=True, text=True)
    assert result.returncode == 2 and "unrecognized arguments: --chek" in result.stderr


def test_course_retarget_runs_the_links_script_without_setting_up_the_course(monkeypatch):
    started = []
    monkeypatch.setattr(course, "ensure_environment", lambda: pytest.fail("retarget needs no .venv"))
    monkeypatch.setattr(course, "run", lambda cmd, **kw: started.append(cmd) or 0)
    assert course.main(["retarget", FORK, "--check"]) == 0
    assert started == [[Path(sys.executable), "scripts/links.py", FORK, "--check"]]


def test_each_edition_s_set_up_cell_is_the_same_code_in_its_own_language():
    english = links.setup_cell_source("git+https://github.com/o/n")
    chinese = links.setup_cell_source("git+https://github.com/o/n", "zh-CN")
    # the same code but for the language it names, which the parity check rightly sees as code
    assert translations.code_difference(english, chinese.replace('"zh-CN"', '"en"')) is None
    assert 'os.environ["COURSE_LANGUAGE"] = "en"' in english
    assert 'os.environ["COURSE_LANGUAGE"] = "zh-CN"' in chinese
    with pytest.raises(ValueError, match="SETUP_WORDS"):
        links.setup_cell_source("git+https://github.com/o/n", "fr")
