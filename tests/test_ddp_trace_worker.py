"""notebooks/workers/ddp_trace.py: notebook 12's profiled DDP step, on gloo here, NCCL on GPUs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from course_utils.processes import run_torchrun

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))  # as the notebook's kernel sees it
from workers.ddp_trace import intervals, overlap_us  # noqa: E402


def event(name: str, start: float, duration: float, category: str = "cpu_op") -> dict:
    """One complete event of a Chrome trace, as torch.profiler writes it."""
    return {"ph": "X", "cat": category, "name": name, "ts": start, "dur": duration}


def test_gpu_intervals_are_the_kernels_nccl_ones_the_communication():
    trace = {
        "traceEvents": [
            event("aten::mm", 90, 5),  # a CPU operator: not a kernel
            event("nccl:all_reduce", 95, 1),  # the CPU side of an all-reduce: not a kernel either
            event("ampere_sgemm_128x64_nn", 100, 50, "kernel"),
            event("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)", 120, 60, "kernel"),
            event("ampere_sgemm_128x64_tn", 150, 20, "kernel"),
            {"ph": "i", "cat": "kernel", "name": "ncclKernel", "ts": 1},  # an instant: no interval
        ]
    }
    assert intervals(trace, on_gpu=True) == {"compute": [(0, 50), (50, 70)], "communication": [(20, 80)]}


def test_cpu_intervals_are_the_backward_functions_and_gloos_all_reduces():
    trace = {
        "traceEvents": [
            event("autograd::engine::evaluate_function: AddmmBackward0", 10, 4),
            event("gloo:all_reduce", 12, 30),
            event("c10d::allreduce_", 11, 1),
            event("ncclDevKernel_AllReduce", 0, 5, "kernel"),  # no kernel counts on the CPU
        ]
    }
    assert intervals(trace, on_gpu=False) == {"compute": [(0, 4)], "communication": [(2, 32)]}


def test_overlap_counts_each_moment_once():
    compute = [(0, 10), (5, 15), (30, 40)]
    assert overlap_us([(8, 35)], compute) == 7 + 5  # 8..15 under two kernels counts once, then 30..35
    assert overlap_us([(15, 30)], compute) == 0
    assert overlap_us([], compute) == 0 and overlap_us([(0, 5)], []) == 0


def test_two_cpu_ranks_report_a_trace_and_both_kinds_of_interval(tmp_path):
    run = run_torchrun(
        NOTEBOOKS / "workers" / "ddp_trace.py",
        ["--cpu", "--out", str(tmp_path), "--width", "64", "--layers", "4", "--batch", "32"],
        nproc_per_node=2,
        extra_args=["--run-path", "--start-method=fork"],
        timeout=120,
    )
    (report,) = run.json_lines()  # rank 0 alone prints
    assert report["device"] == "CPU" and report["trace"] == str(tmp_path / "rank0_trace.json")
    assert len(report["compute"]) >= 4 and len(report["communication"]) >= 1
    assert 0 <= report["overlap_us"] <= sum(e - s for s, e in report["communication"])
    assert json.loads(Path(report["trace"]).read_text())["traceEvents"]
