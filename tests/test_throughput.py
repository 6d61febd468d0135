"""The benchmark scaffolding of notebook 09: the MLP, medians and IQRs, the table and the chart.

Nothing here asserts on speed: only counts, equalities and the arithmetic on fixed numbers.
"""

from __future__ import annotations

import io
import os

import matplotlib.pyplot as plt
import pytest
import torch
from PIL import Image, ImageFilter

from course_utils.throughput import (
    EncodedImages,
    format_table,
    make_mlp,
    median_and_iqr,
    throughput_chart,
    throughput_row,
)


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


@pytest.mark.parametrize("speed", [0, -1.0, float("inf"), float("nan"), "fast", None])
def test_format_table_refuses_a_throughput_that_is_no_positive_number(speed):
    row = {"config": "a", "processes": 1, "threads": 1, "global_batch": 8, "median_step_s": 0.1}
    with pytest.raises(ValueError, match="samples_per_s must be a positive number"):
        format_table([row | {"iqr_step_s": 0.0, "samples_per_s": speed}])


def test_too_few_times_are_explained_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(ValueError, match=r"^计算中位数和 IQR 至少需要 2 个时间，得到的是 1 个$"):
        median_and_iqr([0.5])


def test_encoded_images_decode_to_the_same_samples_in_a_worker() -> None:
    images = EncodedImages(6, size=16)
    assert len(images) == 6
    assert all(isinstance(blob, bytes) and blob[:4] == b"\x89PNG" for blob in images.encoded)
    image, label, pid = images[2]
    assert image.shape == (3, 16, 16) and image.dtype == torch.float32
    assert 0.0 <= image.min() and image.max() <= 1.0 and 0 <= int(label) < 4 and pid == os.getpid()
    again = EncodedImages(6, size=16)  # the same seed gives the same images
    assert torch.equal(again[2][0], image)
    decoded = Image.open(io.BytesIO(images.encoded[2])).filter(ImageFilter.GaussianBlur(radius=2))
    blurred = torch.tensor(bytearray(decoded.tobytes()), dtype=torch.float32).view(16, 16, 3).permute(2, 0, 1)
    blurred /= 255
    assert torch.equal(image, blurred)  # decoded and blurred, not the raw pixels
    batches = list(torch.utils.data.DataLoader(images, batch_size=3, num_workers=1))
    assert torch.equal(batches[0][0][2], image) and set(batches[0][2].tolist()) != {os.getpid()}


@pytest.mark.parametrize(
    "bad", [{"num_images": 0}, {"num_images": 2.5}, {"num_images": 32, "size": True}, {"num_images": 10**6}]
)
def test_encoded_images_reject_bad_sizes(bad: dict) -> None:
    with pytest.raises(ValueError, match="must be an int from 1 to"):
        EncodedImages(**bad)
