"""scripts/kernel_memory.py: what a notebook's kernel peaks at and holds, and the course's two totals."""

from __future__ import annotations

import nbformat
from kernel_memory import MIB, course_peaks, measure


def test_a_kernel_s_peak_and_what_it_still_holds(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("kept = b'k' * (200 * 2**20)"),  # written, so really resident
        nbformat.v4.new_code_cell("freed = b'f' * (300 * 2**20)"),
        nbformat.v4.new_code_cell("del freed"),
    ]
    path = tmp_path / "99_memory.ipynb"
    nbformat.write(nb, path)
    peak, held = measure(path)
    assert held >= 200 * MIB
    assert peak >= held + 250 * MIB


def test_the_totals_with_and_without_shutting_kernels_down():
    measured = [(300 * MIB, 250 * MIB), (1000 * MIB, 300 * MIB), (400 * MIB, 350 * MIB)]
    assert course_peaks(measured) == (1000 * MIB, 1250 * MIB)
    assert course_peaks([]) == (0, 0)
