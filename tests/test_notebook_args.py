"""regenerate and bench find notebooks by path or by bare name, and name the arguments that match none."""

from __future__ import annotations

from notebook_args import NOTEBOOKS, ROOT, notebooks_from_args


def test_no_argument_means_every_numbered_notebook_of_both_editions_in_order():
    found, missing = notebooks_from_args([])
    english = [p for p in found if p.parent == NOTEBOOKS]
    chinese = [p for p in found if p.parent == NOTEBOOKS / "zh-CN"]
    assert missing == [] and found == english + chinese and english == sorted(english)
    assert [p.name[:3] for p in english] == [f"{n:02d}_" for n in range(len(english))]
    assert [p.name for p in chinese] == [p.name for p in english]


def test_a_path_and_a_bare_name_find_the_same_notebook(tmp_path, monkeypatch):
    name = "05_data_parallel.ipynb"
    monkeypatch.chdir(tmp_path)  # neither relies on the current directory
    for arg in (f"notebooks/{name}", name, str(NOTEBOOKS / name)):
        assert notebooks_from_args([arg]) == ([NOTEBOOKS / name], []), arg


def test_arguments_that_name_no_notebook_are_returned():
    args = ["99_nothing.ipynb", "notebooks", "README.md", "00_start_here.ipynb"]
    found, missing = notebooks_from_args(args)
    assert found == [NOTEBOOKS / "00_start_here.ipynb"]
    assert missing == ["99_nothing.ipynb", "notebooks", "README.md"]
    assert ROOT / "notebooks" == NOTEBOOKS
