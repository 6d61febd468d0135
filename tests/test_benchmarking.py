"""The DDP benchmark workers do the same work in every configuration; the table and chart summarise it.

Nothing here asserts on speed: only counts, equalities and the arithmetic on fixed numbers.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch

from course_utils.benchmarking import (
    bucket_events_worker,
    ddp_throughput_worker,
    format_table,
    make_mlp,
    median_and_iqr,
    throughput_chart,
    throughput_row,
)
from course_utils.launcher import WorkerError, launch


def fake_result(rank: int, world: int, times: list[float], batch: int = 8) -> dict:
    return {
        "rank": rank,
        "world_size": world,
        "threads": 1,
        "step_times": times,
        "samples_timed": batch * len(times),
    }


def test_make_mlp_layers_and_errors():
    model = make_mlp((4, 8, 2))
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear"]
    assert sum(p.numel() for p in model.parameters()) == 4 * 8 + 8 + 8 * 2 + 2
    for bad in ((4,), (4, 0), (4, True), (4, 2.0)):
        with pytest.raises(ValueError, match="widths"):
            make_mlp(bad)


def test_median_and_iqr_match_torch_quantile():
    times = [10.2, 10.4, 10.1, 10.3, 35.0, 10.2]
    median, iqr = median_and_iqr(times)
    q = torch.tensor(times, dtype=torch.float64).quantile(
        torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    )
    assert median == pytest.approx(q[1].item()) and iqr == pytest.approx((q[2] - q[0]).item())
    with pytest.raises(ValueError, match="at least 2"):
        median_and_iqr([1.0])


def test_throughput_row_uses_the_slowest_ranks_median():
    results = [fake_result(0, 2, [0.1, 0.1, 0.1]), fake_result(1, 2, [0.2, 0.2, 0.9])]
    row = throughput_row("two", results)
    assert row["processes"] == 2 and row["global_batch"] == 16
    assert row["median_step_s"] == pytest.approx(0.2)
    assert row["samples_per_s"] == pytest.approx(80.0)
    table = format_table([row, row])
    assert "two" in table and "1.00x" in table and len(table.splitlines()) == 3


def test_throughput_row_refuses_inconsistent_results():
    with pytest.raises(ValueError, match="empty"):
        throughput_row("x", [])
    with pytest.raises(ValueError, match="one result per rank"):
        throughput_row("x", [fake_result(0, 2, [0.1, 0.2])])
    with pytest.raises(ValueError, match="different numbers of steps"):
        throughput_row("x", [fake_result(0, 2, [0.1, 0.2]), fake_result(1, 2, [0.1, 0.2, 0.3])])
    with pytest.raises(ValueError, match="empty"):
        format_table([])


def test_chart_has_one_bar_per_configuration():
    rows = [throughput_row(f"c{n}", [fake_result(0, 1, [0.1 * n, 0.1 * n])]) for n in (1, 2, 3)]
    fig = throughput_chart(rows, title="t")
    try:
        (ax,) = fig.axes
        assert len(ax.patches) == 3 and ax.get_title() == "t"
        assert [round(p.get_width()) for p in ax.patches] == [80, 40, 27]
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="empty"):
        throughput_chart([])


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
    assert first[-1].strip().startswith("all-reduce") and "layers 4, 2, 0" in first[-1]
    assert [e.strip().split()[0] for e in second] == [
        "backward",
        "backward",
        "all-reduce",
        "backward",
        "all-reduce",
    ]


@pytest.mark.parametrize(
    ("widths", "message"),
    [
        ("256,10", "widths must be a list of two or more positive ints, such as"),
        (256, "widths must be a list"),
        ((10**6, 10**6), r"a model of 1e\+12 parameters \(3725 GiB of float32 weights\)"),
    ],
)
def test_make_mlp_refuses_text_numbers_and_huge_models(widths, message):
    with pytest.raises(ValueError, match=message):
        make_mlp(widths)


@pytest.mark.parametrize(
    ("times", "message"),
    [
        ([1.0, float("inf")], "finite numbers of seconds"),
        ([1.0, float("nan")], "finite numbers of seconds"),
        ([1.0, -0.5], "at least 0"),
        ([1.0, "2"], "finite numbers of seconds"),
        ([True, 1.0], "finite numbers of seconds"),
        ("12", "times must be a list of step times in seconds"),
        (0.1, "times must be a list"),
    ],
)
def test_median_and_iqr_refuse_what_is_not_a_list_of_times(times, message):
    with pytest.raises(ValueError, match=message):
        median_and_iqr(times)


def test_the_summaries_refuse_anything_but_what_the_workers_and_rows_give():
    with pytest.raises(ValueError, match="label names the configuration"):
        throughput_row(2, [fake_result(0, 1, [0.1, 0.1])])
    with pytest.raises(ValueError, match=r"each result is the dict one ddp_throughput_worker rank returned"):
        throughput_row("x", [{"rank": 0}])
    with pytest.raises(ValueError, match="results must be the non-empty list"):
        throughput_row("x", fake_result(0, 1, [0.1, 0.1]))
    with pytest.raises(ValueError, match="each row is a dict that throughput_row returned"):
        format_table([{"config": "x"}])
    with pytest.raises(ValueError, match="rows must be the non-empty list"):
        throughput_chart("rows")
    row = throughput_row("x", [fake_result(0, 1, [0.1, 0.1])])
    with pytest.raises(ValueError, match="title is the chart's title"):
        throughput_chart([row], title=None)
    assert plt.get_fignums() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"widths": (4, 0)}, "widths must be two or more positive ints"),
        ({"seed": -1}, "seed must be an int of at least 0"),
        ({"seed": 1.5}, "seed must be an int"),
        ({"global_batch": 2**20, "steps": 10**4}, r"GiB to prepare .*use fewer steps"),
        ({"threads": 0}, "threads must be a positive int"),
    ],
)
def test_worker_refuses_bad_arguments_before_joining_a_process_group(kwargs, message):
    arguments = {"global_batch": 8, "steps": 1, "warmup": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        ddp_throughput_worker(**arguments)  # no LOCAL_RANK, no group: it must fail before both


@pytest.mark.parametrize("cap", [0, -1, float("inf"), float("nan"), "25", True])
def test_bucket_events_worker_refuses_a_bucket_size_it_cannot_use(cap):
    with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number of megabytes"):
        bucket_events_worker(2, cap)


def test_worker_called_outside_a_launch_says_how_to_start_it(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(RuntimeError, match=r"start it with launch\(ddp_throughput_worker, nprocs"):
        ddp_throughput_worker(8, 1, 0)
