"""The notebooks that read device variables still pass nbval with odd device variables set.

Which notebooks: those whose `metadata.course.reads_device_variables` is true (00, 01, 04).

What this checks, on any machine: with `CUDA_VISIBLE_DEVICES` set to garbage, and on a CUDA build
also to the empty string (and `CUDA_DEVICE_ORDER=PCI_BUS_ID`), no cell of these notebooks
crashes, writes to stderr, or prints anything different in a compared cell. It guards the
notebooks' own handling of the variables: the cells that read them, show them, or pass them on
to child processes.

What it cannot check on a CPU-only build of PyTorch (such as the machine that regenerates the
committed outputs): that the variables change what PyTorch sees. A CPU-only build has no CUDA
runtime and sees zero GPUs whatever the variables say, so there this test cannot fail because
of the variables' values; it would pass even if they were ignored. Only with a CUDA build on a
machine with NVIDIA GPUs does it exercise "the GPUs are hidden or the list is invalid": there
`torch.cuda.device_count()` drops to 0 and every compared cell must still print what it printed
on the CPU-only machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from notebook_hygiene import ROOT, notebooks_where

NOTEBOOKS = notebooks_where("reads_device_variables")


# The empty list hides every GPU as the garbage one does; on a CPU-only build, where neither can
# change what PyTorch sees, it adds nothing but a second run of the notebooks (about 20 s).
CUDA_BUILD = torch.version.cuda is not None


@pytest.mark.parametrize(
    "visible",
    [
        "GPU-does-not-exist,7",
        pytest.param(
            "",
            marks=pytest.mark.skipif(not CUDA_BUILD, reason="a CPU-only build: the garbage list covers it"),
        ),
    ],
    ids=["garbage", "empty"],
)
def test_notebooks_pass_with_odd_device_variables(visible):
    """Nothing crashes or prints differently; on a CPU-only build the GPUs were never there (see above)."""
    assert NOTEBOOKS, "no notebook's metadata.course says reads_device_variables: true"
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
