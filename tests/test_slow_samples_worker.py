"""notebooks/workers/slow_samples.py: notebook 09's data set whose samples cost a chosen wait or CPU time.

Nothing here is timed against the clock: the wait is read as the seconds handed to time.sleep, the CPU
time as what time.thread_time says the loop used. One test starts a real DataLoader worker with the
forkserver start method (Linux's default from Python 3.14), which receives the data set pickled and
imports its module, as the notebook's workers do there.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import sys
import time
from pathlib import Path

import pytest
import torch

from course_utils.processes import run_python

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))  # as the notebook's kernel sees it
from workers import slow_samples  # noqa: E402
from workers.slow_samples import SlowSamples  # noqa: E402


def test_a_read_waits_read_s_and_gives_the_image_its_label_and_the_pid(monkeypatch):
    waits, spent = [], []
    monkeypatch.setattr(slow_samples.time, "sleep", waits.append)
    monkeypatch.setattr(slow_samples, "spend_cpu", spent.append)
    data = SlowSamples(3, read_s=0.25, decode_s=0.125, size=8, seed=1)
    image, label, pid = data[2]
    assert waits == [0.25] and spent == [0.125] and len(data) == 3
    assert image.shape == (3, 8, 8) and image.dtype == torch.float32
    assert 0 <= image.min() and image.max() <= 1 and 0 <= label <= 3 and pid == os.getpid()
    assert torch.equal(SlowSamples(3, size=8, seed=1)[2][0], image)  # the seed makes the images
    assert not torch.equal(SlowSamples(3, size=8, seed=2)[2][0], image)


def test_spend_cpu_uses_at_least_that_much_cpu_time_of_this_thread():
    before = time.thread_time()
    slow_samples.spend_cpu(0.02)
    assert time.thread_time() - before >= 0.02


def test_it_is_pickled_by_its_module_which_a_worker_can_import():
    data = SlowSamples(2, read_s=0.001, decode_s=0.002)
    payload = pickle.dumps(data)
    assert b"workers.slow_samples" in payload and b"__main__" not in payload
    copy = pickle.loads(payload)
    assert torch.equal(copy.images, data.images) and (copy.read_s, copy.decode_s) == (0.001, 0.002)


FORKSERVER_WORKER = """
import os, sys
import torch
from torch.utils.data import DataLoader
sys.path.insert(0, sys.argv[1])
from workers.slow_samples import SlowSamples
data = SlowSamples(4, size=4)
batches = list(DataLoader(data, batch_size=2, num_workers=1, multiprocessing_context="forkserver"))
print(torch.equal(torch.cat([images for images, _, _ in batches]), data.images))
print(os.getpid() not in {pid for _, _, pids in batches for pid in pids.tolist()})
"""


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here")
def test_a_worker_started_by_a_fork_server_loads_it():
    """In a Python of its own, whose fork server ends with it (it would outlive the test in this one)."""
    child = run_python(FORKSERVER_WORKER, NOTEBOOKS, timeout=120)
    assert (child.error, child.stdout.split()) == (None, ["True", "True"])


@pytest.mark.parametrize(
    ("arguments", "error", "names"),
    [
        ({"num_images": 0}, ValueError, "num_images"),
        ({"num_images": 2.0}, TypeError, "num_images"),
        ({"num_images": 2, "size": 0}, ValueError, "size"),
        ({"num_images": 2, "seed": -1}, ValueError, "seed"),
        ({"num_images": 2, "read_s": "0.01"}, TypeError, "read_s"),
        ({"num_images": 2, "read_s": True}, TypeError, "read_s"),
        ({"num_images": 2, "read_s": -0.5}, ValueError, "read_s"),
        ({"num_images": 2, "decode_s": 2}, ValueError, "decode_s"),
        ({"num_images": 2, "decode_s": math.nan}, ValueError, "decode_s"),
    ],
)
def test_a_bad_argument_is_named(arguments, error, names):
    with pytest.raises(error, match=names):
        SlowSamples(**arguments)
