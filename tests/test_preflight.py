"""workers/preflight.py: the bus-bandwidth formula, the sweep's sizes, and a real 2-rank run on gloo."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from course_utils.processes import run_torchrun

WORKERS = Path(__file__).resolve().parents[1] / "notebooks" / "workers"
sys.path.insert(0, str(WORKERS.parent))
from workers.preflight import bus_bandwidth, sweep_sizes  # noqa: E402


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n() -> None:
    assert bus_bandwidth(10.0, 1) == 0.0  # one rank sends nothing
    assert bus_bandwidth(10.0, 2) == 10.0
    assert bus_bandwidth(10.0, 4) == 15.0
    assert bus_bandwidth(10.0, 8) == 17.5


def test_sweep_sizes_go_from_1_kib_to_64_mib_by_fours() -> None:
    sizes = sweep_sizes()
    assert sizes[0] == 1024 and sizes[-1] == 64 * 2**20 and len(sizes) == 9
    assert all(b == 4 * a for a, b in itertools.pairwise(sizes))
    assert sweep_sizes(1024, 5000) == [1024, 4096]
    with pytest.raises(ValueError, match="min_bytes <= max_bytes"):
        sweep_sizes(1024, 100)


def test_preflight_runs_on_two_ranks() -> None:
    result = run_torchrun(
        WORKERS / "preflight.py",
        ["--cpu", "--max-bytes", "65536", "--iterations", "2"],
        nproc_per_node=2,
        timeout=120,
    )
    lines = result.json_lines()
    ranks = [line for line in lines if "host" in line]
    assert sorted(r["rank"] for r in ranks) == [0, 1] and {r["backend"] for r in ranks} == {"gloo"}
    assert sorted(r["local_rank"] for r in ranks) == [0, 1] and {r["device"] for r in ranks} == {"cpu"}
    checks = {line["check"]: line for line in lines if "check" in line}
    assert checks["all_reduce"]["sum"] == 3.0 and checks["barrier"]["ok"] and checks["ring"]["hops"] == 2
    sweep = [line for line in lines if "bytes" in line]
    assert [line["bytes"] for line in sweep] == [1024, 4096, 16384, 65536]
    for line in sweep:  # two ranks: busbw = algbw x 2(2-1)/2 = algbw
        assert line["time_us"] > 0 and line["busbw_GBps"] == line["algbw_GBps"]
