"""The notebooks about devices (00, 01, 04) pass even when the device variables say odd things."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from notebook_hygiene import ROOT

NOTEBOOKS = [
    "notebooks/00_start_here.ipynb",
    "notebooks/01_device_queries.ipynb",
    "notebooks/04_choosing_gpus.ipynb",
]


@pytest.mark.parametrize(
    "visible",
    ["GPU-does-not-exist,7", ""],
    ids=["garbage", "empty"],
)
def test_notebooks_pass_with_odd_device_variables(visible):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NOTEBOOKS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:]
