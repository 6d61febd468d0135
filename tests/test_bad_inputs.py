"""Never trust an input: every public function that takes a count, a timeout, a path, a name or an
environment from a student refuses a bad one with a TypeError or ValueError that names the argument.

Each case gives a call with good arguments, the argument to spoil, and bad values for it: the wrong
type, None, NUL characters (which no path, command line or environment can carry), negative, nan,
infinite and huge numbers (10**400 overflows every C integer), booleans where counts are meant. A raw
error from deep inside (`embedded null byte`, OverflowError, a RuntimeError from torch) fails the
test, and so does a bad value taken as a good one. No call here gets as far as starting a process.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torch import nn

from course_utils import (
    _checks,
    checkpoints,
    devices,
    env_report,
    gpus,
    i18n,
    parallel,
    picker,
    plots,
    setup,
    throughput,
    visible_devices,
)
from course_utils.processes import child_python, launcher, supervision, torchrun, watchdog

HUGE = 10**400  # more than any C integer holds: an OverflowError wherever it reaches one
COUNTS = [None, "2", 2.5, True, math.nan, math.inf, HUGE, -1, 0]  # of processes, devices, nodes
TIMEOUTS = [None, "5", True, -1, 0, math.nan, math.inf, -math.inf, HUGE]
PORTS = ["29500", 29500.0, True, -1, 0, 65536, HUGE]
TEXTS = [None, 5, b"x", "", "a\0b"]  # an address, a name, code to run
PATHS = [None, 5, b"x.pt", "", "a\0b.pt"]
ENVS = ["A=1", [("A", "1")], {"A": 1}, {"": "1"}, {1: "1"}, {"A=B": "1"}, {"A\0B": "1"}, {"A": "x\0y"}]
ARGUMENT_LISTS = ["--epochs 2", None, [2], ["a\0b"], (b"x",)]
FLAGS = [None, "yes", 1, 0]
SEEDS = [None, "0", 1.5, True, -1, HUGE]


def worker() -> None:
    """A worker that no bad launch ever starts."""


@dataclass(frozen=True)
class Case:
    """A call that refuses each of `bad` as its argument `argument`; its message names `named`."""

    call: Callable[..., Any]
    good: dict[str, Any]
    argument: str
    bad: list[Any]
    named: str = ""

    def with_bad(self, value: object) -> Any:
        """The call with `value` in place of the good argument."""
        return self.call(**{**self.good, self.argument: value})


def cases(tmp: str) -> list[Case]:
    """Every case, its paths under the folder `tmp` (nothing is written outside it)."""
    script = f"{tmp}/never_run.py"  # does not exist: a bad value taken as good fails on it, not silently
    inventory = gpus.demo_inventory()
    env = {"rank": 0, "world_size": 2, "master_port": 29500}
    command = {"script": "train.py", "master_port": 29500}
    nodes = {"script": script, "timeout": 5.0}
    model = nn.Linear(2, 2)
    return [
        # processes.launcher
        *(Case(launcher.torchrun_env, env, name, [*COUNTS[:6], HUGE]) for name in ("rank", "world_size")),
        Case(launcher.torchrun_env, env, "master_port", PORTS),
        Case(launcher.torchrun_env, env, "master_addr", TEXTS),
        Case(launcher.torchrun_env, env, "error_file", PATHS[1:]),
        Case(launcher.launch, {"fn": worker, "nprocs": 2}, "nprocs", [*COUNTS, 65]),
        Case(launcher.launch, {"fn": worker, "nprocs": 2}, "timeout", TIMEOUTS),
        Case(launcher.launch, {"fn": worker, "nprocs": 2}, "master_port", PORTS),
        Case(launcher.launch, {"fn": worker, "nprocs": 2}, "method", ["", "a\0b", "forkserver", 5]),
        Case(launcher.launch, {"fn": worker, "nprocs": 2}, "args", [None, "abc", 5]),
        Case(launcher.launch, {"nprocs": 2}, "fn", [None, "worker", 5]),
        # processes.supervision
        Case(supervision.free_port, {}, "host", TEXTS),
        Case(supervision.listening_socket, {"port": None}, "host", TEXTS),
        Case(supervision.child_env, {}, "changes", ENVS),
        # processes.torchrun
        Case(torchrun.torchrun_command, command, "script", PATHS),
        Case(torchrun.torchrun_command, command, "script_args", ARGUMENT_LISTS),
        Case(torchrun.torchrun_command, command, "extra_args", [*ARGUMENT_LISTS, ["--nnodes=2"]]),
        Case(torchrun.torchrun_command, command, "nproc_per_node", [*COUNTS, 17]),
        Case(torchrun.torchrun_command, command, "nnodes", COUNTS),
        Case(torchrun.torchrun_command, command, "node_rank", [None, "0", 0.0, True, -1, 1, HUGE]),
        Case(torchrun.torchrun_command, command, "master_port", [*PORTS, None]),
        Case(torchrun.torchrun_command, command, "module", [None, "torch.distributed", ["x"], "a\0b"]),
        Case(torchrun.check_port_free, {"port": 29500}, "port", [*PORTS, None], named="port"),
        Case(torchrun.check_port_free, {"port": 29500}, "host", TEXTS),
        *(
            Case(torchrun.run_nodes, nodes, name, values)
            for name, values in (
                ("script", PATHS),
                ("script_args", ARGUMENT_LISTS),
                ("nnodes", [*COUNTS, 9]),
                ("nproc_per_node", COUNTS),
                ("master_port", PORTS),
                ("timeout", TIMEOUTS),
                ("check", FLAGS),
                ("env", ENVS),
                ("module", [None, ["x"]]),
            )
        ),
        Case(torchrun.run_torchrun, nodes, "env", ENVS),
        Case(torchrun.run_torchrun, nodes, "timeout", TIMEOUTS),
        # processes.child_python
        Case(child_python.run_python, {"code": "pass"}, "code", [None, 5, b"pass", "", " ", "pass\0"]),
        Case(child_python.run_python, {"code": "pass"}, "timeout", TIMEOUTS),
        Case(child_python.run_python, {"code": "pass"}, "check", FLAGS),
        Case(child_python.run_python, {"code": "pass"}, "env", ENVS),
        Case(child_python.run_python, {"code": "pass"}, "stdin", [None, "text", 5]),
        Case(
            lambda arg: child_python.run_python("pass", arg),
            {},
            "arg",
            [None, True, 1.5, b"x", "a\0b"],
            "args",
        ),
        # processes.watchdog
        Case(watchdog.watch_folder, {}, "path", PATHS),
        Case(watchdog.release_folder, {}, "path", PATHS),
        Case(watchdog.watch_group, {}, "pgid", [None, "5", 5.0, True, 0, 1, -5, 2**31, HUGE]),
        Case(watchdog.temporary_folder, {}, "prefix", [None, 5, b"x", "a\0b"]),
        # checkpoints
        Case(checkpoints.save_with_location, {"obj": {}, "path": f"{tmp}/c.pt"}, "path", PATHS),
        Case(
            checkpoints.save_with_location, {"obj": {}, "path": f"{tmp}/c.pt"}, "location", [None, "", HUGE]
        ),
        Case(checkpoints.storage_locations, {}, "path", PATHS),
        Case(checkpoints.save_untrusted_example, {}, "path", PATHS),
        # devices
        Case(devices.use_pin_memory, {}, "device", [None, 5, HUGE, "", "a\0b", "cuda:-1"]),
        Case(devices.aten_ops, {}, "fn", [None, "f", 5]),
        # env_report
        Case(env_report.read_cgroup_limits, {}, "root", PATHS),
        Case(env_report.read_cgroup_limits, {}, "proc_self_cgroup", PATHS),
        Case(env_report.environment_report, {}, "cgroup_root", PATHS),
        Case(env_report.environment_report, {}, "proc_self_cgroup", PATHS),
        # gpus
        Case(gpus.cuda_driver_started, {}, "maps", PATHS),
        Case(gpus.explain_nvml_error, {}, "err", [None, "NVMLError", 5]),
        Case(gpus.explain_nvml_error, {"err": RuntimeError("x")}, "doing", [None, 5, ""]),
        # i18n
        Case(i18n.pad, {"text": "x"}, "width", [None, "3", 2.5, True, -1, HUGE]),
        # parallel
        Case(parallel.replica_sizes, {"batch_size": 8}, "num_devices", [*COUNTS, 1025]),
        Case(parallel.replica_sizes, {"num_devices": 2}, "batch_size", [*COUNTS, 2**63]),
        Case(parallel.simulated_replicate, {"network": model}, "num_replicas", COUNTS),
        Case(parallel.simulated_replicate, {"network": model, "num_replicas": 2}, "detach", FLAGS),
        Case(parallel.simulated_data_parallel, {"module": model}, "num_devices", COUNTS),
        Case(parallel.simulated_data_parallel, {"module": model, "num_devices": 2}, "dim", [None, "0", 0.0]),
        # picker
        Case(picker.check_selection, {"inventory": inventory}, "selection", [None, "0,1", 5, {0}, [HUGE]]),
        Case(picker.toggle, {"selection": [0], "ticked": True}, "index", [None, "1", 1.5, True, -1]),
        Case(picker.toggle, {"index": 1, "ticked": True}, "selection", [None, "01", 5]),
        Case(picker.toggle, {"selection": [0], "index": 1}, "ticked", FLAGS),
        *(Case(f, {}, "selection", [None, "0", 5, 0]) for f in (picker.value_html, picker.code_html)),
        # plots
        Case(
            plots.replica_sizes_chart,
            {},
            "tables",
            [None, {}, {0: [[1]]}, {True: [[1]]}, {2: [[-1]]}, {2: [[2**63]]}],
        ),
        Case(plots.replica_sizes_chart, {"tables": {2: [[1, 1]]}}, "title", [None, 5]),
        # throughput
        Case(throughput.EncodedImages, {}, "num_images", [*COUNTS, 10_001]),
        Case(throughput.EncodedImages, {"num_images": 2}, "size", [*COUNTS, 1025]),
        Case(throughput.EncodedImages, {"num_images": 2}, "seed", SEEDS),
        Case(throughput.make_mlp, {}, "widths", [None, "256,10", [256], [256, 0], [256, 2.5], [HUGE, 10]]),
        # visible_devices
        Case(visible_devices.choose_by_free_memory, {"inventory": inventory}, "n", [*COUNTS, 9]),
        Case(visible_devices.physical_of, {"value": "0,1", "inventory": inventory}, "logical", COUNTS[:6]),
        Case(visible_devices.visible_devices_value, {}, "indices", ["0,1", None]),
        Case(visible_devices.visible_devices_value, {}, "indices", [[1.5], [True], [-1], [0, 0]], "GPU"),
        Case(visible_devices.shell_command, {}, "value", [None, 0, "0'", "0\0"], "CUDA_VISIBLE_DEVICES"),
        Case(visible_devices.shell_command, {"value": "0"}, "script", [None, "", "a\0b.py", 5]),
        # setup (standard library only: it runs before the course's requirements are installed)
        Case(setup.copy_beside, {}, "folder", PATHS),
        Case(setup.copy_beside, {"folder": tmp}, "package", [5, "", "a\0b"]),
        Case(setup.torch_in_range, {"version": "2.13.0"}, "spec", [None, 5, "", "2.9", "a\0b"]),
        Case(setup.torch_in_range, {}, "version", [None, 2.13, "", "x"]),
        Case(setup.course_requirements, {}, "requires", [None, "torch", 5, [None]]),
    ]


# The argument each case names, and the indices of its bad values, are fixed; the paths are not.
ALL = [(n, i) for n, case in enumerate(cases("<tmp>")) for i in range(len(case.bad))]


def _id(n: int, i: int) -> str:
    case = cases("<tmp>")[n]
    name = getattr(case.call, "__name__", "call").replace("<lambda>", "run_python")
    return f"{name}({case.argument}={case.bad[i]!r:.20})"


@pytest.mark.parametrize(("n", "i"), ALL, ids=[_id(n, i) for n, i in ALL])
def test_a_bad_argument_is_refused_by_name_and_never_as_a_raw_error(n, i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a bad path taken as a good one would be written here, not in the course
    case = cases(str(tmp_path))[n]
    value = case.bad[i]
    try:
        case.with_bad(value)
    except (TypeError, ValueError) as err:
        assert (case.named or case.argument) in str(err), f"{type(err).__name__}: {err}"
    except Exception as err:
        pytest.fail(f"a raw {type(err).__name__} escaped instead of a TypeError or ValueError: {err}")
    else:
        pytest.fail(f"{value!r} was taken as a good {case.argument}")


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: _checks.whole_number("n", True),
            TypeError,
            "n must be a whole number (an int such as 2), not True",
        ),
        (lambda: _checks.whole_number("n", 2.0), TypeError, "not 2.0"),
        (
            lambda: _checks.whole_number("n", 0, 1, 8),
            ValueError,
            "n must be a whole number from 1 to 8, not 0",
        ),
        (lambda: _checks.whole_number("n", -1, 0), ValueError, "n must be a whole number at least 0, not -1"),
        (
            lambda: _checks.whole_number("n", 9, None, 8),
            ValueError,
            "n must be a whole number at most 8, not 9",
        ),
        (lambda: _checks.whole_number("n", 10**5000, 1, 8), ValueError, "not an int of about 5001 digits"),
        (lambda: _checks.timeout_seconds("wait", -(10**5000)), ValueError, "not an int of about 5001 digits"),
        (lambda: _checks.timeout_seconds("wait", "60"), TypeError, "wait must be a number of seconds"),
        (lambda: _checks.flag("check", [10**5000]), TypeError, "check is True or False, not a list too long"),
        (lambda: _checks.text("host", "", "'127.0.0.1'"), ValueError, "host is empty; pass text such as"),
        (lambda: _checks.path("path", "x\0"), ValueError, "path holds a NUL character ('\\0')"),
        (lambda: _checks.strings("args", "--x"), TypeError, "args must be a list of strings"),
        (lambda: _checks.environment("env", {"A": 10**5000}), TypeError, "A is int an int of about"),
    ],
)
def test_the_shared_checks_say_what_is_allowed_even_of_numbers_too_long_to_print(call, error, message):
    with pytest.raises(error) as err:
        call()
    assert message in str(err.value)


def test_the_shared_checks_give_back_what_the_caller_uses():
    assert (
        _checks.whole_number("n", np.int64(3), 1, 8) == 3
        and type(_checks.whole_number("n", np.int64(3))) is int
    )
    assert _checks.timeout_seconds("timeout", 5) == 5.0
    assert _checks.path("path", Path("a/b.pt")) == "a/b.pt"
    assert _checks.strings("args", ("a", "")) == ["a", ""]
    assert _checks.environment("env", None) == {}


def test_the_shared_checks_speak_the_notebook_s_language(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(ValueError, match=r"^nnodes 必须是整数，在 1 到 8 之间，而不是 0$"):
        _checks.whole_number("nnodes", 0, 1, 8)
    with pytest.raises(ValueError, match=r"^host 里有 NUL 字符"):
        _checks.text("host", "a\0b", "'127.0.0.1'")
