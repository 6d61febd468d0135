"""CUDA_VISIBLE_DEVICES: CUDA's lenient reading, the strict checker, choosing, setting, subprocesses."""

from __future__ import annotations

import itertools
import os
import shlex
import sys

import numpy as np
import pytest
import torch
from fake_libcuda import FakeLibcuda, fake_maps

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
    script_header,
    set_visible_devices,
    shell_command,
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
        ("2,9,3", [2]),
        ("0,0", []),  # a repeat empties the list, as torch.cuda._parse_visible_devices reads it
        ("0,8,0", []),  # repeats are checked before indices are compared with the GPU count
        ("0,8,8", []),
        ("0,1,-1,0", [0, 1]),  # a repeat after the first invalid entry is never read
        ("3d3e0a11-7c2f-4b8e-9a61-000000000003", [3]),  # no "GPU-": strtoul reads the leading 3
        ("GPU-3,GPU-6", [3, 6]),
        ("GPU-3, GPU-6", [3]),  # UUID entries are not stripped: " GPU-6" is not a UUID entry
        ("GPU-6,GPU-x,GPU-6", []),  # the same text twice, before the first non-UUID entry
        ("GPU-6,1,GPU-6", [6]),  # ... but not after it
        ("GPU-3,GPU-3d3e", []),  # two prefixes of one GPU
        ("GPU-3d3e0a11-7c2f-4b8e-9a61-000000000003", [3]),
        ("GPU-3D3E0A11", []),  # case-sensitive
        ("GPU-3,2", [3]),
        ("GPU-,GPU-1", []),  # "GPU-" matches every GPU: ambiguous, so the list ends there
    ],
)
def test_cuda_semantics(value, expected):
    assert cuda_semantics(value, FLEET) == expected


@pytest.mark.parametrize("value", ["MIG-GPU-1/1/0", "MIG-8932f937-d72c-4106-c12f-20bd9faed9f6,MIG-x"])
def test_cuda_semantics_does_not_model_mig(value):
    with pytest.raises(ValueError, match="MIG instance: not modelled by this course"):
        cuda_semantics(value, FLEET)


def pytorch_reading(monkeypatch, value: str | None, uuids: list[str]) -> list[int]:
    """PyTorch's own emulation, with its two NVML queries answered by `uuids`, as PyTorch's tests patch them.

    `_parse_visible_devices` reads the variable; `_device_count_nvml` cuts an index list at the
    first index NVML lacks (its length is the count); `_transform_uuid_to_ordinals` resolves UUIDs.
    """
    if value is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    monkeypatch.setattr(torch.cuda, "_raw_device_count_nvml", lambda: len(uuids))
    monkeypatch.setattr(torch.cuda, "_raw_device_uuid_nvml", lambda: list(uuids))
    listed = torch.cuda._parse_visible_devices()
    count = torch.cuda._device_count_nvml()
    if listed and isinstance(listed[0], str):
        listed = torch.cuda._transform_uuid_to_ordinals(listed, list(uuids))
        assert len(listed) == count
    return list(listed[:count])


INDEX_TOKENS = ["0", "1", "3", "7", "8", "9", "12", "-1", "+2", "07", "1gpu", "garbage", "", " 3", "3 "]
UUID_TOKENS = [
    "GPU-3",
    "GPU-6",
    "GPU-3d3e",
    "GPU-6d3e0a11-7c2f-4b8e-9a61-000000000006",
    "GPU-x",
    "GPU-",
    " GPU-6",
    "GPU-6 ",
    "GPU-3D3E",
    "3",
    "3d3e0a11",
    "garbage",
]


def generated_values(tokens: list[str], longest: int) -> list[str]:
    """Every comma-separated list of 1..longest tokens (repeats included)."""
    return [
        ",".join(combo) for size in range(1, longest + 1) for combo in itertools.product(tokens, repeat=size)
    ]


@pytest.mark.parametrize("size", [8, 2], ids=["8-gpus", "2-gpus"])
def test_cuda_semantics_agrees_with_pytorch_on_generated_index_lists(monkeypatch, size):
    """Thousands of lists with out-of-range, repeated, negative, signed and wordy entries."""
    inventory = Inventory(gpus=FLEET.gpus[:size], source="demo")
    uuids = [gpu.uuid for gpu in inventory.gpus]
    values = [None, *generated_values(INDEX_TOKENS, 3)]
    assert len(values) > 3000
    for value in values:
        assert cuda_semantics(value, inventory) == pytorch_reading(monkeypatch, value, uuids), value


@pytest.mark.parametrize("size", [8, 4], ids=["8-gpus", "4-gpus"])
def test_cuda_semantics_agrees_with_pytorch_on_generated_uuid_lists(monkeypatch, size):
    """UUID lists: prefixes, unknown and ambiguous ones, spaces, upper case, repeats, mixed with indices."""
    inventory = Inventory(gpus=FLEET.gpus[:size], source="demo")
    uuids = [gpu.uuid for gpu in inventory.gpus]
    values = [v for v in generated_values(UUID_TOKENS, 3) if v.startswith("GPU-")]
    assert len(values) > 1000
    for value in values:
        assert cuda_semantics(value, inventory) == pytorch_reading(monkeypatch, value, uuids), value


def test_the_documented_differences_from_pytorchs_helper(monkeypatch):
    """A bare sign: PyTorch's helper raises ValueError, CUDA's strtoul finds no number (invalid entry)."""
    for value in ["+", "1,-", "2,+x"]:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
        with pytest.raises(ValueError):
            torch.cuda._parse_visible_devices()
    assert cuda_semantics("+", FLEET) == [] and cuda_semantics("1,-", FLEET) == [1]
    assert cuda_semantics("2,+x", FLEET) == [2]
    assert cuda_semantics("\u0663", FLEET) == []  # ARABIC-INDIC DIGIT THREE: not a digit for strtoul


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
        ("MIG-8932f937-d72c-4106-c12f-20bd9faed9f6", "`MIG-<uuid>`, or `MIG-GPU-<uuid>/<gi>/<ci>`"),
        (
            "3d3e0a11-7c2f-4b8e-9a61-000000000003",
            "looks like the UUID of GPU 3 without its 'GPU-' prefix (CUDA would read only its leading "
            "digits, as GPU 3); write it as 'GPU-3d3e0a11-7c2f-4b8e-9a61-000000000003'.",
        ),
        ("6d3e0a11", "write it as 'GPU-6d3e0a11'"),
        ("1,6d3e0a11", "entry 2 ('6d3e0a11') looks like the UUID of GPU 6 without"),
        ("GPU-3,6d3e0a11", "entry 2 ('6d3e0a11') looks like the UUID of GPU 6 without"),
        ("gpu-3d3e0a11", "with 'gpu-' for 'GPU-' (CUDA would find no number in it and stop there)"),
        (
            "GPU-3D3E0A11",
            "looks like the UUID of GPU 3 in upper case; UUIDs are lower-case hex, as `nvidia-smi -L` "
            "prints them",
        ),
        ("GPU-3,GPU-6D3E0A11", "entry 2 ('GPU-6D3E0A11') looks like the UUID of GPU 6 in upper case"),
        ("GPU-3, GPU-6", "has spaces around it"),
    ],
)
def test_strict_parse_rejects_bad_values_and_says_why(value, message):
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES") as err:
        parse_visible_devices(value, FLEET)
    assert message in str(err.value)


@pytest.mark.parametrize("value", ["3d3e", "beefcafe", "12345678", "GPU-ffffffff"])
def test_strict_parse_gives_no_uuid_hint_for_what_is_not_a_uuid_of_the_inventory(value):
    with pytest.raises(ValueError) as err:
        parse_visible_devices(value, FLEET)
    assert "looks like the UUID" not in str(err.value)


def test_strict_parse_accepts_every_full_uuid_of_the_fleet():
    value = ",".join(gpu.uuid for gpu in reversed(FLEET.gpus))
    assert parse_visible_devices(value, FLEET) == list(range(7, -1, -1)) == cuda_semantics(value, FLEET)


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
        (10**12, r"cannot choose 1000000000000 GPU\(s\)"),
        (2.5, "n, the number of GPUs to choose, must be a whole number"),
        (2.9, "n, the number of GPUs to choose, must be a whole number"),
        (True, "n, the number of GPUs to choose, must be a whole number"),
        ("2", "n, the number of GPUs to choose, must be a whole number"),
        (float("inf"), "must be a whole number"),
        (np.float64(2), "must be a whole number"),
    ],
)
def test_choose_rejects_bad_n(n, message):
    with pytest.raises(ValueError, match=message):
        choose_by_free_memory(FLEET, n)


def test_choose_accepts_numpy_integers():
    assert choose_by_free_memory(FLEET, np.int64(2)) == [3, 6]
    assert choose_by_free_memory(FLEET, np.array([3])[0]) == [3, 6, 1]


def test_choose_from_an_empty_inventory():
    with pytest.raises(ValueError, match="no GPU to choose from"):
        choose_by_free_memory(Inventory(reason="no driver"), 1)


def test_visible_devices_value():
    assert visible_devices_value([3, 6]) == "3,6"
    assert visible_devices_value((np.int64(1), 0)) == "1,0"
    assert visible_devices_value(range(2)) == "0,1"
    assert visible_devices_value([]) == ""


@pytest.mark.parametrize(
    ("indices", "error", "message"),
    [
        ("12", TypeError, r"a list of physical GPU numbers such as \[3, 6\], not '12'"),
        (b"12", TypeError, "a list of physical GPU numbers"),
        (3, TypeError, "a list of physical GPU numbers"),
        ({3, 6}, TypeError, "a list of physical GPU numbers"),
        ([-1, 2], ValueError, r"GPU index -1 in \[-1, 2\] is negative; .*pass \[\]"),
        ([1.7], ValueError, "each GPU index must be a whole number .*not 1.7"),
        ([True], ValueError, "each GPU index must be a whole number .*not True"),
        (["1"], ValueError, "each GPU index must be a whole number .*not '1'"),
        ([2, 2], ValueError, "GPU 2 comes twice"),
    ],
)
def test_visible_devices_value_refuses_what_is_not_a_list_of_gpu_numbers(indices, error, message):
    with pytest.raises(error, match=message):
        visible_devices_value(indices)


READERS = [parse_visible_devices, cuda_semantics, logical_to_physical, mapping_lines]


@pytest.mark.parametrize("function", READERS)
@pytest.mark.parametrize("value", [0, 0.0, b"0", ["0"], ("0", "1")])
def test_a_value_that_is_not_text_is_refused_by_every_reader(function, value):
    with pytest.raises(TypeError, match=r"CUDA_VISIBLE_DEVICES holds text: pass a str such as '0,4'"):
        function(value, FLEET)


@pytest.mark.parametrize("function", [parse_visible_devices, cuda_semantics, mapping_lines])
def test_an_inventory_that_is_not_one_is_refused(function):
    with pytest.raises(TypeError, match=r"an Inventory \(nvml_inventory\(\) or demo_inventory\(\)\)"):
        function("0", [0, 1])
    with pytest.raises(TypeError, match="inventory must be an Inventory"):
        choose_by_free_memory(None, 1)


@pytest.mark.parametrize(
    ("logical", "message"),
    [
        ("0", r"logical is the number k of cuda:k, an int: physical_of\(0, ...\) for cuda:0, not '0'"),
        (0.0, r"logical \(the k of cuda:k\) must be a whole number"),
        (True, r"logical \(the k of cuda:k\) must be a whole number"),
        (-1, "there is no cuda:-1"),
        (10**9, "there is no cuda:1000000000"),
    ],
)
def test_physical_of_says_that_the_first_argument_is_the_logical_index(logical, message):
    with pytest.raises(ValueError, match=message):
        physical_of(logical, "0,1", FLEET)


def test_physical_of_accepts_numpy_integers():
    assert physical_of(np.int64(1), "0,4", FLEET) == 4


@pytest.mark.parametrize("environ", [None, {}])
@pytest.mark.parametrize("value", [0, None, 1.5, ["0"], b"0"])
def test_set_visible_devices_takes_text_only_and_stores_nothing_else(value, environ, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(TypeError, match=r"pass a str such as '0,4'"):
        set_visible_devices(value, environ=environ, cuda_initialized=False)
    assert "CUDA_VISIBLE_DEVICES" not in (os.environ if environ is None else environ)


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


@pytest.mark.parametrize("value", ["0\n1", '0"; echo x', "0'", "0\\1", "0\x00", "\t0"])
def test_text_no_gpu_id_holds_is_refused_by_every_writer_and_the_setter(value):
    for write in (
        shell_command,
        script_header,
        lambda v: set_visible_devices(v, environ={}, cuda_initialized=False),
    ):
        with pytest.raises(ValueError, match="no GPU id has"):
            write(value)


def test_shell_command_quotes_every_part():
    """Read back by the shell's rules, the line is the variables, `python` and the script: one argument."""
    for script in ["x.py; rm -rf ~", "my script.py", "$(id).py", "a'b.py"]:
        words = shlex.split(shell_command("0, 1", script))
        assert words == ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0, 1", "python", script]
    with pytest.raises(TypeError, match="script must be"):
        shell_command("0", "x.py\nrm -rf ~")


def test_shell_command_sets_the_order_too():
    assert shell_command("3,6") == "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3,6 python train.py"
    assert shell_command("") == "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES='' python train.py"
    assert shell_command("GPU-3d3e", "eval.py").endswith("CUDA_VISIBLE_DEVICES=GPU-3d3e python eval.py")


@pytest.fixture
def no_cuda_driver(monkeypatch):
    """This process as if no CUDA driver library were loaded, whatever the machine."""
    monkeypatch.setattr(vd, "cuda_driver_started", lambda: False)


def test_set_visible_devices_overwrites_and_returns_the_old_value(no_cuda_driver):
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    assert set_visible_devices("3,6", FLEET, environ=env) == "0"
    assert env == {"CUDA_VISIBLE_DEVICES": "3,6", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    env = {}
    assert set_visible_devices("", environ=env, pci_bus_order=False) is None
    assert env == {"CUDA_VISIBLE_DEVICES": ""}


def test_setdefault_is_the_bug_set_visible_devices_fixes(no_cuda_driver):
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
    assert "run_python(code, env={'CUDA_VISIBLE_DEVICES': '3,6'})" in str(err.value)
    shell = "in the shell: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3,6 python train.py"
    assert shell in str(err.value)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}  # nothing was changed


def test_set_visible_devices_with_cuda_not_initialised(monkeypatch, no_cuda_driver):
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


def test_set_visible_devices_without_torch_imported(monkeypatch, no_cuda_driver):
    monkeypatch.delitem(sys.modules, "torch")
    env: dict[str, str] = {}
    set_visible_devices("2", environ=env)
    assert env["CUDA_VISIBLE_DEVICES"] == "2"


def test_set_visible_devices_uses_os_environ_by_default(monkeypatch, no_cuda_driver):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "garbage")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "unset below")  # recorded, so that monkeypatch removes
    monkeypatch.delenv("CUDA_DEVICE_ORDER")  # the value set_visible_devices writes after the test
    assert set_visible_devices("1,0") == "garbage"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1,0"


def test_set_visible_devices_refuses_once_the_cuda_driver_started(monkeypatch, tmp_path):
    """is_available() runs cuInit without making is_initialized() True: the driver itself says so."""
    _, with_cuda = fake_maps(tmp_path)
    lib = FakeLibcuda(0)
    real = vd.cuda_driver_started
    monkeypatch.setattr(vd, "cuda_driver_started", lambda: real(with_cuda, load=lib))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(RuntimeError, match=r"the CUDA driver has already started in this process") as err:
        set_visible_devices("3,6", environ=env)
    assert "torch.cuda.is_available()" in str(err.value) and "would silently change nothing" in str(err.value)
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3,6 python train.py" in str(err.value)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert set_visible_devices("3,6", environ=env, cuda_initialized=False) == "0"  # the caller's word wins
    lib.status = 3  # only loaded (import torch), not started: setting still works
    assert set_visible_devices("1", environ=env) == "3,6"


def test_module_constants():
    assert vd.VAR == "CUDA_VISIBLE_DEVICES" and vd.ORDER_VAR == "CUDA_DEVICE_ORDER"


def test_set_visible_devices_refuses_an_environment_or_flags_it_cannot_use():
    with pytest.raises(TypeError, match="environ is a dict-like environment"):
        set_visible_devices("0", environ=[("CUDA_VISIBLE_DEVICES", "1")], cuda_initialized=False)
    with pytest.raises(TypeError, match="cuda_initialized is None"):
        set_visible_devices("0", environ={}, cuda_initialized="no")
    with pytest.raises(TypeError, match="pci_bus_order is True or False"):
        set_visible_devices("0", environ={}, cuda_initialized=False, pci_bus_order=None)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: cuda_semantics(["0"], FLEET), TypeError, "str such as '0,4'"),
        (lambda: parse_visible_devices("0", None), TypeError, "inventory must be an Inventory"),
        (lambda: cuda_semantics("0", "fleet"), TypeError, "inventory must be an Inventory"),
        (lambda: physical_of(-1, "0,1", FLEET), ValueError, "there is no cuda:-1"),
        (lambda: script_header(3), TypeError, "write it as '3'"),
        (lambda: shell_command(None), TypeError, "str such as"),
        (lambda: shell_command("0", ""), TypeError, "script must be"),
        (lambda: mapping_lines(b"0", FLEET), TypeError, "str such as"),
    ],
)
def test_wrong_input_is_refused_with_what_to_write(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_set_visible_devices_stores_nothing_it_refuses():
    env: dict[str, str] = {}
    with pytest.raises(TypeError):
        set_visible_devices(0, environ=env, cuda_initialized=False)
    assert env == {}
    assert visible_devices_value([]) == "" and visible_devices_value((3, 6)) == "3,6"


def test_entries_too_long_for_int_and_iterators_and_quotes_get_clear_errors():
    fleet = demo_inventory()
    with pytest.raises(ValueError, match="there is no GPU"):
        parse_visible_devices("1" * 5000, fleet)
    assert cuda_semantics("1" * 5000, fleet) == []  # CUDA's strtoul saturates: no such device
    with pytest.raises(ValueError, match=r"GPU 0 comes twice in \[0, 0\]"):
        visible_devices_value(i for i in [0, 0])
    assert visible_devices_value(i for i in [3, 6]) == "3,6"
    for value in ('0"; import os #', "0\\n", "0\n1"):
        with pytest.raises(ValueError, match="a quote, a backslash or a control character"):
            script_header(value)


@pytest.mark.parametrize("environ", ["PCI_BUS_ID", 0, ["CUDA_DEVICE_ORDER"]])
def test_device_order_refuses_what_is_no_environment(environ):
    with pytest.raises(TypeError, match="environ is a dict-like environment"):
        device_order(environ)


def test_a_bad_value_is_explained_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    with pytest.raises(
        ValueError, match=r"^CUDA_VISIBLE_DEVICES='0,-1': 第 2 项（'-1'）是负数。CUDA 读到它就停下"
    ):
        vd.parse_visible_devices("0,-1", demo_inventory())
    assert vd.mapping_lines("3", demo_inventory()) == [
        "cuda:0 -> 物理 GPU 3（DEMO A100-SXM4-80GB，总线 00000000:4E:00.0，空闲 81408 MiB）"
    ]
