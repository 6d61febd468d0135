"""Checks that call the reader's function in the kernel: an exit or a hang costs a hint, not the kernel."""

from __future__ import annotations

import os
import sys
import time

import pytest
from exercise_answers import assert_refused
from processes import left_behind

from course_utils.exercises import call_reader, sandbox
from course_utils.exercises.beyond_ddp import check_tensor_parallel
from course_utils.exercises.ddp_in_practice import check_resume
from course_utils.exercises.device_queries import check_device_choice
from course_utils.exercises.dp_vs_ddp_performance import check_median_and_iqr
from course_utils.exercises.memory_and_speed import check_amp_step
from course_utils.exercises.models_on_devices import check_prepare_batch
from course_utils.exercises.tensors_on_devices import check_add_on_device_of, check_to_numpy
from course_utils.exercises.troubleshooting import check_select_gpus

pytestmark = pytest.mark.skipif(not sandbox._FORK_TRIAL, reason="the trial runs in a forked child on Linux")

# Each check, and a function of the right arity that calls `end` (its args are ignored).
CHECKS = {
    "check_to_numpy": (check_to_numpy, 1),
    "check_add_on_device_of": (check_add_on_device_of, 2),
    "check_median_and_iqr": (check_median_and_iqr, 2),
    "check_device_choice": (check_device_choice, 0),
    "check_prepare_batch": (check_prepare_batch, 3),
    "check_select_gpus": (check_select_gpus, 2),
    "check_amp_step": (check_amp_step, 5),
}


def _calling(end, arity):
    """A new function of `arity` arguments that calls `end()` (a new object: no earlier trial counts)."""
    return {0: lambda: end(), 1: lambda a: end(), 2: lambda a, b: end(), 3: lambda a, b, c: end()}.get(
        arity, lambda *args: end()
    )


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_function_that_ends_its_process_is_a_hint_and_the_kernel_lives(name):
    check, arity = CHECKS[name]
    verdict = check(_calling(lambda: os._exit(7), arity))  # were it called here, pytest would end with 7
    assert not verdict.ok and "ended the process it ran in without returning" in verdict.message, verdict


@pytest.mark.parametrize("name", ["check_to_numpy", "check_amp_step"])
def test_a_function_that_never_returns_is_stopped_and_named(name, monkeypatch):
    monkeypatch.setattr(sandbox, "TRIAL_SECONDS", 0.3)
    check, arity = CHECKS[name]
    start = time.monotonic()
    verdict = check(_calling(lambda: time.sleep(600), arity))
    assert not verdict.ok and "did not return within 0.3 s" in verdict.message, verdict
    assert time.monotonic() - start < 30
    assert left_behind(grace=5) == []


def test_a_trial_reports_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert "os._exit" in call_reader(lambda: os._exit(3)).problem
    assert not call_reader(lambda: os._exit(3)).problem.isascii()


def test_a_function_that_returns_or_raises_is_called_in_the_kernel_once_its_trial_passed():
    seen = []

    def record(x):
        seen.append((os.getpid(), x))
        return x * 2

    assert call_reader(record, 4).value == 8 and call_reader(record, 5).value == 10
    assert seen == [(os.getpid(), 4), (os.getpid(), 5)]  # the trial ran elsewhere, and only for the first
    assert call_reader(lambda: sys.exit(2)).problem.startswith("called sys.exit(2)")
    assert call_reader(lambda: 1 / 0).problem.startswith("raised ZeroDivisionError")


@pytest.mark.parametrize("check", [check_resume, check_tensor_parallel])
def test_a_rank_whose_function_calls_sys_exit_0_gets_a_hint_not_a_type_error(check):
    verdict = check(lambda *args: sys.exit(0))
    assert not verdict.ok and "rank 0 ended without a result" in verdict.message, verdict
    assert "sys.exit()" in verdict.message


@pytest.mark.parametrize(
    "timeout", [-1, 0, float("nan"), float("inf"), "5", True, [5], 10**400, 8 * 24 * 3600]
)
def test_a_trial_refuses_a_timeout_that_is_no_number_of_seconds(timeout):
    assert_refused(lambda: sandbox.trial(len, [1], timeout=timeout), "timeout", "seconds")


@pytest.mark.parametrize("seconds", [-1, float("nan"), "10", None])
def test_a_trial_names_a_bad_trial_seconds(monkeypatch, seconds):
    monkeypatch.setattr(sandbox, "TRIAL_SECONDS", seconds)
    assert_refused(lambda: sandbox.trial(len, [1]), "TRIAL_SECONDS", "seconds")


@pytest.mark.parametrize("fn", [None, 3, "len", "len\0", [len]])
def test_a_trial_and_a_readers_call_refuse_what_is_no_function(fn):
    assert_refused(lambda: sandbox.trial(fn), "fn", "must be the reader's function")
    assert_refused(lambda: call_reader(fn), "fn", "must be the reader's function")


def test_a_small_trial_seconds_stops_a_hang_that_soon(monkeypatch):
    monkeypatch.setattr(sandbox, "TRIAL_SECONDS", 0.2)
    assert "did not return within 0.2 s" in sandbox.trial(lambda: time.sleep(600))
    assert "did not return within 0.3 s" in sandbox.trial(lambda: time.sleep(600), timeout=0.3)
