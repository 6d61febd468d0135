"""Every check that takes the reader's function survives what the function does to its process.

A function that calls `os._exit`, kills its own process (SIGKILL, SIGTERM) or never returns gets
a "Not yet" hint from every such check, and the caller (the notebook's kernel) lives on: the
sandbox tries the function in a forked child first (`sandbox.trial`), or with probe arguments
before a check starts ranks (`sandbox.probe_verdict`). Each check runs here in a forked child
that stands for the kernel, so that a check that lets the function end or hang its caller fails
this test instead of ending or hanging pytest. The list of checks is written out and compared with
what discovery finds, so that a new check cannot be left out.
"""

from __future__ import annotations

import collections.abc
import importlib
import inspect
import os
import pkgutil
import signal
import time
import types
import typing

import pytest
from exercise_answers import checks_on_the_cpu, skip_without_trials, verdicts_in_a_kernel

import course_utils.exercises
from course_utils.exercises import CheckResult, sandbox

# Every check whose argument is the reader's function, by module.
FUNCTION_CHECKS = {
    "beyond_ddp": ["check_tensor_parallel"],
    "capstone_train_a_transformer": ["check_heads_per_rank"],
    "ddp_in_practice": ["check_accumulation_step", "check_resume"],
    "device_queries": ["check_device_choice"],
    "distributed_data_parallel": ["check_average_gradients"],
    "dp_vs_ddp_performance": ["check_median_and_iqr"],
    "memory_and_speed": ["check_amp_step", "check_checkpointed_forward"],
    "models_on_devices": ["check_load_gpu_checkpoint", "check_model_and_optimizer", "check_prepare_batch"],
    "pipeline_context_and_expert_parallel": ["check_bubble", "check_online_softmax", "check_split_sizes"],
    "tensors_on_devices": ["check_add_on_device_of", "check_to_numpy"],
    "troubleshooting": ["check_select_gpus"],
}
LISTED = [f"{module}.{name}" for module, names in FUNCTION_CHECKS.items() for name in names]


def _takes(annotation: object) -> bool:
    """Whether a parameter annotated so takes a function (Callable, or Callable | None)."""
    if annotation is collections.abc.Callable or typing.get_origin(annotation) is collections.abc.Callable:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_takes(arg) for arg in typing.get_args(annotation))
    return False


def discovered() -> list[str]:
    """The check_* functions of course_utils.exercises.* with a parameter annotated as a function."""
    found = []
    for info in pkgutil.iter_modules(course_utils.exercises.__path__):
        module = importlib.import_module(f"course_utils.exercises.{info.name}")
        for name, check in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and check.__module__ == module.__name__:
                if any(_takes(hint) for hint in typing.get_type_hints(check).values()):
                    found.append(f"{info.name}.{name}")
    return sorted(found)


def _check(listed: str) -> typing.Callable[[typing.Any], CheckResult]:
    module, name = listed.split(".")
    return getattr(importlib.import_module(f"course_utils.exercises.{module}"), name)


def test_the_list_of_checks_that_take_a_function_is_what_discovery_finds():
    assert sorted(LISTED) == discovered()


def _exits(*args: object) -> None:
    os._exit(3)


def _kills_itself(*args: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _terminates_itself(*args: object) -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def _never_returns(*args: object) -> None:
    while True:
        time.sleep(3600)


DEADLY = {
    "os._exit(3)": _exits,
    "SIGKILL": _kills_itself,
    "SIGTERM": _terminates_itself,
    "sleep": _never_returns,
}


@pytest.mark.parametrize("listed", LISTED)
def test_a_function_that_ends_or_hangs_its_process_gets_a_hint_and_the_caller_lives(listed, monkeypatch):
    skip_without_trials()
    checks_on_the_cpu(monkeypatch)
    monkeypatch.setattr(sandbox, "TRIAL_SECONDS", 0.5)  # the child inherits it: a hang costs half a second
    verdicts, status = verdicts_in_a_kernel(_check(listed), DEADLY)
    assert os.waitstatus_to_exitcode(status) == 0, (
        f"{listed} let the function end or hang its caller after {[v['kind'] for v in verdicts]}"
    )
    assert [v["kind"] for v in verdicts] == list(DEADLY)
    for verdict in verdicts:
        assert "raised" not in verdict, f"{listed} with {verdict['kind']} raised {verdict.get('raised')}"
        assert verdict["type"] == "CheckResult" and not verdict["ok"], verdict
        assert verdict["text"].startswith("Not yet: "), verdict


def _placeholder(*args: object) -> None: ...  # your code here


@pytest.mark.parametrize("listed", LISTED)
def test_every_check_says_an_untouched_exercise_is_not_answered_yet(listed):
    assert "is not answered yet" in _check(listed)(_placeholder).message
