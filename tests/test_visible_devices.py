"""CUDA_VISIBLE_DEVICES: CUDA's lenient reading, the strict checker, choosing, setting, subprocesses."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from course_utils import visible_devices as vd
from course_utils.gpus import MIB, GpuInfo, Inventory, demo_inventory
from course_utils.visible_devices import (
    choose_by_free_memory,
    cuda_semantics,
    device_order,
    logical_to_physical,
    mapping_lines,
    parse_visible_devices,
    physical_of,
    run_with_visible_devices,
    script_header,
    set_visible_devices,
    visible_devices_value,
)

FLEET = demo_inventory()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, list(range(8))),
        ("", []),
        ("0,4", [0, 4]),
        ("4,0", [4, 0]),
        ("0,1,-1,2", [0, 1]),
        ("-1", []),
        ("2,1gpu", [2, 1]),  # strtoul: an entry counts by the number it starts with
        (" 3", [3]),
        ("garbage", []),
        ("1,garbage,2", [1]),
        ("1,9,2", [1]),  # an index the machine lacks ends the list
        ("0,0", []),  # a repeat empties the list, as torch.cuda._parse_visible_devices reads it
        ("GPU-3,GPU-6", [3, 6]),
        ("GPU-3d3e0a11-7c2f-4b8e-9a61-000000000003", [3]),
        ("GPU-3,2", [3]),
        ("GPU-,GPU-1", []),  # "GPU-" matches every GPU: ambiguous, so the list ends there
        ("MIG-GPU-1/1/0", []),
    ],
)
def test_cuda_semantics(value, expected):
    assert cuda_semantics(value, FLEET) == expected


INDEX_VALUES = ["0,4", "4,0", "0,1,-1,2", "-1", "", "2,1gpu", "1,garbage,2", "0,0", "7,5,3"]


@pytest.mark.parametrize("value", INDEX_VALUES)
def test_cuda_semantics_agrees_with_pytorchs_own_parser_for_indices(monkeypatch, value):
    """torch.cuda._parse_visible_devices is PyTorch's emulation of CUDA's reading (used for NVML counts)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert cuda_semantics(value, FLEET) == torch.cuda._parse_visible_devices()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, list(range(8))), ("", []), ("0,4", [0, 4]), ("6,3", [6, 3]), ("GPU-3,GPU-6d3e", [3, 6])],
)
def test_strict_parse_accepts_good_values(value, expected):
    assert parse_visible_devices(value, FLEET) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("garbage", "entry 1 ('garbage') is not a GPU index or a GPU UUID; valid entries are the indices"),
        ("0,1,-1,2", "entry 3 ('-1') is negative. CUDA stops reading at it"),
        ("-1", "write the empty string '' instead of '-1'"),
        ("0,,1", "entry 2 ('') is empty; remove the extra comma"),
        ("0, 4", "has spaces around it"),
        ("1gpu", "is not a GPU index"),
        ("0,0", "repeats GPU 0; name each GPU once"),
        ("8", "there is no GPU 8 in the inventory; valid entries are the indices 0-7"),
        ("3,12", "entry 2 ('12'): there is no GPU 12"),
        ("GPU-ffff", "matches no GPU UUID of the inventory"),
        ("GPU-", "is a prefix of 8 UUIDs"),
        ("GPU-3,1", "mixes GPU UUIDs and indices"),
        ("1,GPU-3", "mixes GPU UUIDs and indices"),
        ("MIG-GPU-1/1/0", "names a MIG instance"),
    ],
)
def test_strict_parse_rejects_bad_values_and_says_why(value, message):
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES") as err:
        parse_visible_devices(value, FLEET)
    assert message in str(err.value)


def test_strict_parse_on_an_empty_inventory_says_only_empty_is_valid():
    with pytest.raises(ValueError, match="the only valid value is the empty string"):
        parse_visible_devices("0", Inventory(reason="no driver"))
    assert parse_visible_devices("", Inventory()) == []


def test_seed_000_example_maps_logical_to_physical():
    assert logical_to_physical("0,4", FLEET) == {0: 0, 1: 4}
    assert physical_of(1, "0,4", FLEET) == 4
    assert physical_of(1, "5,2,7", FLEET) == 2


def test_physical_of_a_missing_logical_id():
    with pytest.raises(ValueError, match=r"makes 2 GPU\(s\) visible: cuda:0 to cuda:1; there is no cuda:2"):
        physical_of(2, "0,4", FLEET)
    with pytest.raises(ValueError, match="leaves no GPU visible, so there is no cuda:0"):
        physical_of(0, "", FLEET)
    with pytest.raises(ValueError, match="no GPU 9"):
        physical_of(0, "9", FLEET)


def test_mapping_lines():
    lines = mapping_lines("6,3", FLEET)
    assert lines == [
        "cuda:0 -> physical GPU 6 (DEMO A100-SXM4-80GB, bus 00000000:B7:00.0, 81408 MiB free)",
        "cuda:1 -> physical GPU 3 (DEMO A100-SXM4-80GB, bus 00000000:4E:00.0, 81408 MiB free)",
    ]
    assert "PyTorch runs on the CPU" in mapping_lines("", FLEET)[0]


def test_choose_by_free_memory_freest_first_ties_by_index():
    assert choose_by_free_memory(FLEET, 1) == [3]
    assert choose_by_free_memory(FLEET, 3) == [3, 6, 1]
    assert choose_by_free_memory(FLEET, 8)[-1] == 4
    assert visible_devices_value(choose_by_free_memory(FLEET, 2)) == "3,6"


def test_choose_breaks_ties_by_index_not_by_list_position():
    gpus = tuple(GpuInfo(i, "g", f"GPU-{i}", f"0:{i}", 16 * MIB, 0) for i in (0, 1, 2))
    assert choose_by_free_memory(Inventory(gpus=gpus[::-1]), 2) == [0, 1]


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (9, r"cannot choose 9 GPU\(s\): the inventory has 8; choose between 1 and 8"),
        (0, r"cannot choose 0 GPU\(s\)"),
        (-2, r"cannot choose -2 GPU\(s\)"),
        (2.5, "n must be a whole number of GPUs"),
        (True, "n must be a whole number of GPUs"),
    ],
)
def test_choose_rejects_bad_n(n, message):
    with pytest.raises(ValueError, match=message):
        choose_by_free_memory(FLEET, n)


def test_choose_from_an_empty_inventory():
    with pytest.raises(ValueError, match="no GPU to choose from"):
        choose_by_free_memory(Inventory(reason="no driver"), 1)


def test_visible_devices_value():
    assert visible_devices_value([3, 6]) == "3,6"
    assert visible_devices_value([]) == ""


@pytest.mark.parametrize(
    ("env", "order", "agrees"),
    [
        ({}, "FASTEST_FIRST", False),
        ({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, "FASTEST_FIRST", False),
        ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "PCI_BUS_ID", True),
        ({"CUDA_DEVICE_ORDER": "pci"}, "FASTEST_FIRST", False),
    ],
)
def test_device_order(env, order, agrees):
    found = device_order(env)
    assert found.order == order and found.matches_nvidia_smi is agrees
    text = found.explain()
    assert "nvidia-smi" in text and (order in text or "fastest first" in text)
    if env.get("CUDA_DEVICE_ORDER") == "pci":
        assert "an unknown value counts as the default" in found.explain()


def test_device_order_reads_this_process_by_default(monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert device_order().order == "PCI_BUS_ID"


def test_script_header_assigns_before_importing_torch():
    header = script_header("3,6")
    assert 'os.environ["CUDA_VISIBLE_DEVICES"] = "3,6"' in header
    assert 'os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"' in header
    assert "setdefault(" not in header
    assert header.index("CUDA_VISIBLE_DEVICES") < header.index("import torch")
    env: dict[str, str] = {"CUDA_VISIBLE_DEVICES": "old"}
    exec(header.replace("import torch", "").replace("os.environ", "env"), {"os": os, "env": env})
    assert env == {"CUDA_VISIBLE_DEVICES": "3,6", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_set_visible_devices_overwrites_and_returns_the_old_value():
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    assert set_visible_devices("3,6", FLEET, environ=env) == "0"
    assert env == {"CUDA_VISIBLE_DEVICES": "3,6", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    env = {}
    assert set_visible_devices("", environ=env, pci_bus_order=False) is None
    assert env == {"CUDA_VISIBLE_DEVICES": ""}


def test_setdefault_is_the_bug_set_visible_devices_fixes():
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    env.setdefault("CUDA_VISIBLE_DEVICES", "3,6")
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    set_visible_devices("3,6", environ=env)
    assert env["CUDA_VISIBLE_DEVICES"] == "3,6"


def test_set_visible_devices_refuses_once_cuda_is_initialised(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(RuntimeError, match="CUDA is already initialised in this process") as err:
        set_visible_devices("3,6", environ=env)
    assert "would silently change nothing" in str(err.value)
    assert "run_with_visible_devices" in str(err.value)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}  # nothing was changed


def test_set_visible_devices_with_cuda_not_initialised(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    env: dict[str, str] = {}
    set_visible_devices("1", environ=env)
    assert env["CUDA_VISIBLE_DEVICES"] == "1"


def test_set_visible_devices_checks_the_value_against_the_inventory():
    env: dict[str, str] = {}
    with pytest.raises(ValueError, match="no GPU 8"):
        set_visible_devices("8", FLEET, environ=env)
    assert env == {}


def test_set_visible_devices_explicit_initialised_flag():
    with pytest.raises(RuntimeError, match="already initialised"):
        set_visible_devices("1", environ={}, cuda_initialized=True)


def test_set_visible_devices_without_torch_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch")
    env: dict[str, str] = {}
    set_visible_devices("2", environ=env)
    assert env["CUDA_VISIBLE_DEVICES"] == "2"


def test_set_visible_devices_uses_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "garbage")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert set_visible_devices("1,0") == "garbage"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1,0"


def test_child_process_sees_the_variable(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "garbage")
    code = "import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
    assert run_with_visible_devices(code, "0,4") == "'0,4'\n"
    assert run_with_visible_devices(code, None) == "None\n"
    assert run_with_visible_devices(code, "") == "''\n"
    extra = "import os; print(os.environ['CUDA_DEVICE_ORDER'])"
    order = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert run_with_visible_devices(extra, "1", extra_env=order) == "PCI_BUS_ID\n"


def test_child_process_failure_is_reported():
    with pytest.raises(RuntimeError, match=r"exit status 3\):\nboom"):
        run_with_visible_devices("import sys; sys.stderr.write('boom'); sys.exit(3)", "0")


def test_child_process_timeout_is_reported():
    with pytest.raises(RuntimeError, match=r"did not finish within 0\.5 s"):
        run_with_visible_devices("import time; time.sleep(5)", "0", timeout=0.5)


def test_module_constants():
    assert vd.VAR == "CUDA_VISIBLE_DEVICES" and vd.ORDER_VAR == "CUDA_DEVICE_ORDER"
