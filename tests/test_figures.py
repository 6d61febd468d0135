"""A plot that changes is noticed: tests/figures.py against the charts the notebooks draw."""

from __future__ import annotations

import base64

import matplotlib.pyplot as plt
import pytest
from figures import figure_differences
from IPython.core.pylabtools import print_figure

from course_utils.plots import replica_sizes_chart

SEED_003 = {2: [[15, 15], [15, 15], [15, 15], [5, 5]], 3: [[10, 10, 10], [10, 10, 10], [4, 4, 2]]}


def shown(tables: dict, title: str = "Rows per replica") -> list[dict]:
    """The display output a notebook stores for the chart (IPython's inline PNG)."""
    fig = replica_sizes_chart(tables, title=title)
    try:
        png = base64.b64encode(print_figure(fig, "png", bbox_inches="tight")).decode()
    finally:
        plt.close(fig)
    return [{"output_type": "display_data", "data": {"image/png": png, "text/plain": "<Figure>"}}]


@pytest.fixture(scope="module")
def stored() -> list[dict]:
    return shown(SEED_003)


def test_the_same_chart_drawn_again_passes(stored):
    assert figure_differences(stored, shown(SEED_003)) == []


@pytest.mark.parametrize(
    "changed",
    [
        {**SEED_003, 3: [[10, 10, 10], [10, 10, 10], [4, 4, 4]]},  # one replica's rows
        {**SEED_003, 2: [[15, 15], [15, 15], [15, 15], [5]]},  # a replica missing
        {2: SEED_003[2]},  # a panel missing (another size)
    ],
)
def test_a_chart_whose_data_changed_fails(stored, changed):
    (problem,) = figure_differences(stored, shown(changed))
    assert "figure 1" in problem


def test_a_lost_or_added_figure_fails(stored):
    assert figure_differences(stored, []) == ["the cell shows 0 figures, the notebook stores 1"]
    assert figure_differences([], stored) == ["the cell shows 1 figures, the notebook stores 0"]
