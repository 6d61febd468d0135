"""Every link to the course's repository is made from pyproject.toml's [project.urls]; retarget moves all."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import links
import pytest
from IPython.core.inputtransformer2 import TransformerManager
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


def test_sync_puts_badge_and_set_up_cell_under_every_title_and_is_idempotent(course_copy):
    report = links.update(course_copy)
    notebooks = sorted((course_copy / "notebooks").glob("*.ipynb"))
    assert len(report) == len(notebooks)
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        title = "".join(cells[0]["source"]).splitlines()
        assert title[1:4] == ["", REPO.badge(path.name), ""]
        setup = cells[1]  # right under the title, before the lesson's first words
        assert "".join(setup["source"]) == links.setup_cell_source("en")
        assert setup["id"] == links.SETUP_CELL_ID and setup["cell_type"] == "code"
        assert len(setup["source"]) <= 5, f"{path.name}: the set-up cell has more than 5 lines"
        assert [c for c in cells if links.is_setup_cell(c)] == [setup]
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
    # The set-up cell installs the course by its name, not from a repository: a fork's is the same.
    nb = json.loads((course_copy / "notebooks" / "05_data_parallel.ipynb").read_text(encoding="utf-8"))
    assert "".join(nb["cells"][1]["source"]) == links.setup_cell_source("en")
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


# A URL GitHub could not serve, and the part of it that each error names.
NOT_A_REPOSITORY = [
    ("https://github.com/o/..", "the repository's name '..' is a folder's name"),
    ("https://github.com/o/.", "the repository's name '.' is a folder's name"),
    ("https://github.com/../n", "the repository's owner '..' is a folder's name"),
    ("https://github.com/-/-", "the repository's owner '-' starts with '-'"),
    ("https://github.com/-me/course", "the repository's owner '-me' starts with '-'"),
    ("https://github.com/a/b.git.git", "the repository's name 'b.git' ends in .git"),
    ("https://github.com/o/.git", "the repository's name '' is empty"),
    ("https://github.com//course", "the repository's owner '' is empty"),
    ("https://github.com/o/n?x", "the repository's name 'n?x' holds '?'"),
    ("https://github.com/m\u00e9/course", "the repository's owner 'm\u00e9' holds '\u00e9'"),
    ("https://github.com/o/" + "n" * 101, "has 101 characters; GitHub allows at most 100"),
    ("", "'' is not a GitHub repository address"),
]


@pytest.mark.parametrize(("url", "names"), NOT_A_REPOSITORY, ids=[u or "empty" for u, _ in NOT_A_REPOSITORY])
def test_a_url_that_names_no_possible_repository_is_refused_in_one_line_naming_the_part(url, names):
    with pytest.raises(ValueError, match=re.escape(names)):
        links.parse_repository(url)
    # The command line, with --check so that nothing could be written: exit 2, one line, no traceback.
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "links.py"), url, "--check"], capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert names in result.stderr and "https://github.com/OWNER/NAME" in result.stderr


def test_an_empty_url_is_an_error_not_the_course_s_own_repository(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with pytest.raises(ValueError, match="'' is not a GitHub repository address"):
        links.update(tmp_path, "", check=True)


@pytest.mark.parametrize(
    "url",
    [FORK, FORK + ".git", FORK + "/", FORK + ".git/", "https://github.com/A_b.c/x-y_z.1"],
)
def test_a_fork_s_url_is_taken_with_one_git_suffix_removed(url):
    repository = links.parse_repository(url)
    assert repository.url == url.removesuffix("/").removesuffix(".git")


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
    python = TransformerManager().transform_cell  # the cell's %pip and %run as the kernel runs them
    english, chinese = python(links.setup_cell_source("en")), python(links.setup_cell_source("zh-CN"))
    # the same code but for the language it names, which the parity check rightly sees as code
    assert translations.code_difference(english, chinese.replace('"zh-CN"', '"en"')) is None
    assert translations.code_difference(english, chinese) is not None
    assert 'os.environ["COURSE_LANGUAGE"] = "en"' in english and "Studio Lab" in english
    assert 'os.environ["COURSE_LANGUAGE"] = "zh-CN"' in chinese and "准备" in chinese
    with pytest.raises(ValueError, match="SETUP_WORDS"):
        links.setup_cell_source("fr")


def cell(kind: str, text: str, cell_id: str, **stored) -> dict:
    """A notebook cell as nbformat 4.5 stores it."""
    made = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": text.splitlines(keepends=True)}
    return made | ({"execution_count": None, "outputs": []} | stored if kind == "code" else {})


def test_a_set_up_cell_below_the_first_words_moves_under_the_title_with_its_outputs():
    # 00, 01 and 05 had it between a sentence ending "...:" and the code that sentence introduces.
    setup = cell("code", links.setup_cell_source(), links.SETUP_CELL_ID, execution_count=1)
    cells = [
        cell("markdown", "# 05 · Title\n\n" + REPO.badge("05_x.ipynb") + "\n\nWords.", "title"),
        cell("markdown", "The code below shows it:", "intro"),
        setup,
        cell("code", "print(1)", "shown", execution_count=2),
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    assert links.sync_notebook(nb, "05_x.ipynb", REPO) == ["set-up cell moved under the title"]
    assert [c["id"] for c in nb["cells"]] == ["title", links.SETUP_CELL_ID, "intro", "shown"]
    assert nb["cells"][1] is setup and setup["execution_count"] == 1  # moved as it was: nothing to rerun
    assert links.sync_notebook(nb, "05_x.ipynb", REPO) == []


def test_an_old_set_up_cell_anywhere_is_replaced_under_the_title_and_a_second_one_removed():
    old = "# Set-up for Colab, Kaggle and Studio Lab: ...\nimport os\n"
    cells = [
        cell("markdown", "# 02 · Title\n\n" + REPO.badge("zh-CN/02_x.ipynb") + "\n", "title"),
        cell("markdown", "Words.", "words"),
        cell("code", old, "older-id", outputs=[{"output_type": "stream", "name": "stdout", "text": "x"}]),
        cell("code", "x = 1", "lesson"),
        cell("code", links.setup_cell_source("zh-CN"), links.SETUP_CELL_ID),
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    changes = links.sync_notebook(nb, "zh-CN/02_x.ipynb", REPO, "zh-CN")
    assert changes == [
        "set-up cell moved under the title",
        "1 more set-up cell(s) removed",
        "set-up cell updated",
    ]
    assert [c["id"] for c in nb["cells"]] == ["title", "older-id", "words", "lesson"]
    assert "".join(nb["cells"][1]["source"]) == links.setup_cell_source("zh-CN")
    assert nb["cells"][1]["outputs"] == []


def test_check_names_a_notebook_whose_set_up_cell_is_not_under_its_title(course_copy):
    links.update(course_copy)
    path = course_copy / "notebooks" / "00_start_here.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"].insert(3, nb["cells"].pop(1))
    path.write_text(links.notebook_text(nb), encoding="utf-8")
    assert links.update(course_copy, check=True) == [
        "notebooks/00_start_here.ipynb: set-up cell moved under the title"
    ]
