"""Notebook 09's DDP workers (notebooks/workers/): the same work in every configuration, buckets sent early.

Nothing here asserts on speed: only counts, equalities and the order of events.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from course_utils.processes import WorkerError, launch
from course_utils.throughput import make_mlp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))  # as the notebook's kernel sees it
from workers.bucket_events import bucket_events_worker
from workers.ddp_timing import ddp_throughput_worker


def test_worker_counts_and_weights_are_equal_for_one_and_two_processes():
    args = (8, 3, 2, (6, 5, 3), 1)
    one = launch(ddp_throughput_worker, 1, args=args)
    two = launch(ddp_throughput_worker, 2, args=args)
    for results in (one, two):
        assert all(r["steps_run"] == 5 and len(r["step_times"]) == 3 for r in results)
        assert sum(r["samples_timed"] for r in results) == 24
        assert all(r["threads"] == 1 and r["params"] == 6 * 5 + 5 + 5 * 3 + 3 for r in results)
    for name, weight in one[0]["weights"].items():
        assert torch.equal(two[0]["weights"][name], two[1]["weights"][name])
        assert torch.allclose(two[0]["weights"][name], weight, atol=1e-6)
    assert not torch.equal(one[0]["weights"]["0.weight"], make_mlp((6, 5, 3)).state_dict()["0.weight"])


def test_worker_rejects_a_batch_that_does_not_split_and_bad_counts():
    with pytest.raises(WorkerError, match="does not split evenly"):
        launch(ddp_throughput_worker, 2, args=(7, 1, 0, (4, 2)))
    with pytest.raises(ValueError, match="steps"):
        ddp_throughput_worker(8, 0, 0)
    with pytest.raises(ValueError, match="device_type"):
        ddp_throughput_worker(8, 1, 0, device_type="tpu")


def test_bucket_events_show_allreduce_before_backward_ends_after_the_first_step():
    first, second = launch(bucket_events_worker, 2, args=(2, 0.01))[0]
    assert first[-1] == ("bucket", 0, (4, 2, 0))  # one bucket, at the end
    assert second == [
        ("backward", 4),
        ("backward", 2),
        ("bucket", 0, (4, 2)),  # before backward reaches layer 0
        ("backward", 0),
        ("bucket", 1, (0,)),
    ]
