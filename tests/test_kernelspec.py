"""The notebooks open unmodified in JupyterLab: their stored kernelspec is the one JupyterLab writes."""

from __future__ import annotations

import json

import pytest
from notebook_hygiene import jupyterlab_kernelspec, kernelspec_problems
from regenerate import jupyterlab_kernelspec as regenerate_kernelspec
from website import CHINESE, course_notebooks

NOTEBOOKS = course_notebooks() + course_notebooks(CHINESE)


def test_regenerate_stores_what_jupyterlab_writes():
    assert regenerate_kernelspec() == jupyterlab_kernelspec()
    assert jupyterlab_kernelspec()["display_name"] == "Python 3 (ipykernel)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(p.parents[1]).as_posix())
def test_every_notebook_stores_jupyterlabs_kernelspec(path):
    assert kernelspec_problems(json.loads(path.read_text(encoding="utf-8"))) == []


def test_another_kernelspec_is_named():
    stored = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (problem,) = kernelspec_problems({"metadata": {"kernelspec": stored}})
    assert "'Python 3'" in problem and "Python 3 (ipykernel)" in problem and "regenerate" in problem
    assert kernelspec_problems({"metadata": {"kernelspec": jupyterlab_kernelspec()}}) == []
