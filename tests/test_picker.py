"""The GPU picker: its plain functions (no browser) and the widget wiring driven from Python."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pytest

from course_utils import picker as picker_module
from course_utils.gpus import GpuInfo, Inventory, demo_inventory
from course_utils.picker import (
    DEMO_LABEL,
    NOTHING_SELECTED,
    ORDER_NOTE,
    GpuPicker,
    check_selection,
    code_html,
    inventory_html,
    mapping_html,
    selection_text,
    source_label,
    toggle,
    value_html,
)

FLEET = demo_inventory()


def test_toggle_keeps_order_and_appends():
    assert toggle([3, 6], 1, True) == [3, 6, 1]
    assert toggle([3, 6, 1], 6, False) == [3, 1]
    assert toggle([3], 3, True) == [3]


def test_check_selection_rejects_unknown_and_repeated_gpus():
    assert check_selection(FLEET, (0, 4)) == [0, 4]
    with pytest.raises(ValueError, match="no GPU 8"):
        check_selection(FLEET, [8])
    with pytest.raises(ValueError, match="repeats GPU 2"):
        check_selection(FLEET, [2, 2])


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ([-1], "the selection names GPU -1, but there is no GPU -1; physical GPUs are numbered 0-7."),
        ([0, 8], "the selection names GPU 8, but there is no GPU 8; physical GPUs are numbered 0-7."),
        ([2, 2], "the selection repeats GPU 2; tick each GPU once."),
        (["3"], "the selection holds physical GPU numbers (ints), not '3'; physical GPUs are numbered 0-7."),
        ([1.0], "not 1.0"),
        ([True], "not True"),
    ],
)
def test_check_selection_speaks_of_the_selection_not_of_the_variable(selection, message):
    with pytest.raises(ValueError) as err:
        check_selection(FLEET, selection)
    assert str(err.value) == message or message in str(err.value)
    assert "CUDA_VISIBLE_DEVICES" not in str(err.value) and "''" not in str(err.value)


def test_check_selection_accepts_numpy_integers():
    assert check_selection(FLEET, np.array([3, 6])) == [3, 6]
    assert check_selection(Inventory(), []) == []
    with pytest.raises(ValueError, match="the inventory has no GPU"):
        check_selection(Inventory(), [0])


def test_selection_text_for_the_seed_000_example():
    assert selection_text(FLEET, [0, 4]).splitlines() == [
        f"[{DEMO_LABEL}]",
        'CUDA_VISIBLE_DEVICES="0,4"',
        "cuda:0 -> physical GPU 0 (DEMO A100-SXM4-80GB, bus 00000000:07:00.0, 8192 MiB free)",
        "cuda:1 -> physical GPU 4 (DEMO A100-SXM4-80GB, bus 00000000:87:00.0, 920 MiB free)",
        "(physical ids are NVML's, in PCI bus order as nvidia-smi numbers them: they name these GPUs "
        "when CUDA_DEVICE_ORDER=PCI_BUS_ID is set, as the suggested lines do)",
        "shell: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,4 python train.py",
    ]


def test_selection_text_with_nothing_selected_gives_a_hint_not_an_empty_value():
    assert selection_text(FLEET, []).splitlines() == [
        f"[{DEMO_LABEL}]",
        'nothing selected yet: tick GPUs, or pick the N with most free memory (CUDA_VISIBLE_DEVICES="" '
        "would hide every GPU)",
    ]


def test_source_label_for_real_hardware():
    real = Inventory(gpus=FLEET.gpus[:1], source="nvml", driver_version="580.65")
    assert source_label(real) == "this machine's GPUs (NVML, driver 580.65)"
    assert DEMO_LABEL not in inventory_html(real)


def test_inventory_html_labels_the_demo_and_marks_the_selection():
    page = inventory_html(FLEET, [6, 3])
    assert DEMO_LABEL in page
    assert page.count("<tr") == 9  # header and 8 GPUs
    assert page.count("gpu-picker-bar") == 8
    assert ">cuda:0</td>" in page and ">cuda:1</td>" in page and page.count("hidden") == 6
    assert "width:99%" in inventory_html(FLEET)  # GPU 4 is 81000 / 81920 MiB used


def test_inventory_html_pads_its_cells():
    """Headers such as "processes" and "in your process" must not run together."""
    page = inventory_html(FLEET, [3])
    assert page.count("<th ") == 7 and page.count("<th>") == 0
    assert page.count("padding:2px 10px") == 7 + 8 * 7
    assert '<th style="padding:2px 10px;text-align:left;vertical-align:bottom">in your process</th>' in page


def test_inventory_html_shows_unknown_memory_and_processes():
    lost = GpuInfo(1, "unknown", "unknown", "unknown", None, None, None, None, ("everything unknown: x",))
    page = inventory_html(Inventory(gpus=(FLEET.gpus[0], lost), source="nvml"), [1])
    row = page.splitlines()[-2]
    assert row.count(">unknown</td>") == 5 and ">cuda:0</td>" in row and "gpu-picker-bar" not in row


def test_inventory_html_escapes_names_and_explains_an_empty_inventory():
    odd = Inventory(gpus=(GpuInfo(0, "<b>x</b>", "GPU-0", "0:1", 10, 5),), source="nvml")
    assert "&lt;b&gt;x&lt;/b&gt;" in inventory_html(odd)
    assert "No GPU to list. no driver" in inventory_html(Inventory(reason="no driver"))


def test_value_mapping_and_code_html():
    assert value_html([3, 6]) == '<code class="gpu-picker-value-text">CUDA_VISIBLE_DEVICES="3,6"</code>'
    mapping = mapping_html(FLEET, [3, 6])
    assert "cuda:1 -&gt; physical GPU 6" in mapping and "CUDA_DEVICE_ORDER=PCI_BUS_ID is set" in mapping
    code = code_html([3, 6])
    assert code.startswith("<pre>") and "CUDA_VISIBLE_DEVICES&quot;] = &quot;3,6&quot;" in code
    assert "<pre>CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3,6 python train.py</pre>" in code


def test_nothing_selected_shows_hints_never_an_empty_value():
    """CUDA_VISIBLE_DEVICES="" copied from an untouched picker would hide every GPU."""
    assert NOTHING_SELECTED in value_html([]) and "CUDA_VISIBLE_DEVICES" not in value_html([])
    assert mapping_html(FLEET, []) == ""
    assert "CUDA_VISIBLE_DEVICES" not in code_html([]) and "once GPUs are selected" in code_html([])
    assert ORDER_NOTE.startswith("physical ids are NVML's, in PCI bus order")


def test_picker_on_the_demo_fleet_is_labelled_and_classed():
    picker = GpuPicker(FLEET)
    assert picker.widget._dom_classes == ("gpu-picker", "gpu-picker-demo")
    assert [c._dom_classes[1] for c in picker.checks] == [f"gpu-picker-check-{i}" for i in range(8)]
    assert "gpu-picker-n" in picker.n_input._dom_classes and picker.n_input.max == 8
    assert "gpu-picker-pick" in picker.pick_button._dom_classes
    assert "gpu-picker-value" in picker.value._dom_classes
    assert DEMO_LABEL in picker.table.value
    assert NOTHING_SELECTED in picker.value.value and "CUDA_VISIBLE_DEVICES" not in picker.value.value
    assert "CUDA_VISIBLE_DEVICES" not in picker.code.value


def test_ticking_checkboxes_updates_everything():
    picker = GpuPicker(FLEET)
    picker.checks[4].value = True
    picker.checks[0].value = True
    assert picker.selection == [4, 0] and picker.value_string == "4,0"
    assert 'CUDA_VISIBLE_DEVICES="4,0"' in picker.value.value
    assert "cuda:1 -&gt; physical GPU 0" in picker.mapping.value
    assert "&quot;4,0&quot;" in picker.code.value
    picker.checks[4].value = False
    assert picker.value_string == "0"
    picker.checks[0].value = False
    assert NOTHING_SELECTED in picker.value.value and picker.mapping.value == ""


def test_pick_most_free_through_the_button_ticks_the_boxes():
    picker = GpuPicker(FLEET)
    picker.n_input.value = 3
    picker.pick_button.click()
    assert picker.value_string == "3,6,1"
    assert [c.value for c in picker.checks] == [False, True, False, True, False, False, True, False]
    assert picker.summary_text() == selection_text(FLEET, [3, 6, 1])


def test_picker_rejects_bad_requests():
    picker = GpuPicker(FLEET)
    with pytest.raises(ValueError, match=r"cannot choose 9 GPU\(s\): the inventory has 8"):
        picker.pick_most_free(9)
    with pytest.raises(ValueError, match="no GPU 8"):
        picker.select([8])
    assert picker.selection == []
    with pytest.raises(ValueError, match="no GPU to pick from"):
        GpuPicker(Inventory(source="demo"))


def test_picker_falls_back_to_the_demo_fleet_and_says_why(monkeypatch):
    monkeypatch.setattr(picker_module, "nvml_inventory", lambda: Inventory(reason="no driver here"))
    picker = GpuPicker()
    assert picker.inventory.source == "demo"
    assert picker.note == "No GPU here (no driver here); showing the demo fleet."
    first = picker.widget.children[0]
    assert isinstance(first, widgets.HTML) and "showing the demo fleet" in first.value


def test_picker_uses_real_gpus_when_there_are_some(monkeypatch):
    real = Inventory(gpus=FLEET.gpus[:2], source="nvml", driver_version="580.65")
    monkeypatch.setattr(picker_module, "nvml_inventory", lambda: real)
    picker = GpuPicker()
    assert picker.inventory is real and picker.note == ""
    assert "gpu-picker-nvml" in picker.widget._dom_classes and len(picker.checks) == 2


@pytest.mark.parametrize("n", [True, 2.9, "2", None, float("inf")])
def test_pick_most_free_follows_the_rule_of_choose_by_free_memory(n):
    picker = GpuPicker(FLEET)
    with pytest.raises(ValueError, match="n, the number of GPUs to choose, must be a whole number"):
        picker.pick_most_free(n)
    assert picker.selection == []


def test_pick_most_free_accepts_numpy_integers():
    picker = GpuPicker(FLEET)
    picker.pick_most_free(np.int64(2))
    assert picker.value_string == "3,6"


@pytest.mark.parametrize(
    ("selection", "error", "message"),
    [
        ("12", TypeError, r"the selection is a list of physical GPU numbers such as \[3, 6\], not '12'"),
        (3, TypeError, "the selection is a list of physical GPU numbers"),
        ([1.7], ValueError, r"the selection holds physical GPU numbers \(ints\), not 1.7; .* 0-7"),
        ([True], ValueError, r"the selection holds physical GPU numbers \(ints\), not True"),
        ([-1], ValueError, "there is no GPU -1"),
    ],
)
def test_select_and_the_html_refuse_what_is_not_a_selection(selection, error, message):
    picker = GpuPicker(FLEET)
    with pytest.raises(error, match=message):
        picker.select(selection)
    with pytest.raises(error, match=message):
        inventory_html(FLEET, selection)


def test_functions_that_take_an_inventory_refuse_anything_else():
    with pytest.raises(TypeError, match=r"GpuPicker shows an Inventory \(demo_inventory\(\)"):
        GpuPicker("demo")
    with pytest.raises(TypeError, match="inventory must be an Inventory"):
        check_selection([0, 1], [0])
    with pytest.raises(TypeError, match="inventory must be an Inventory"):
        source_label("demo")


def test_toggle_refuses_what_it_cannot_use():
    with pytest.raises(ValueError, match="index, the GPU ticked or unticked, must be a whole number"):
        toggle([3], "1", True)
    with pytest.raises(ValueError, match="is -1; physical GPUs are numbered from 0"):
        toggle([3], -1, True)
    with pytest.raises(TypeError, match=r"ticked is True \(tick\) or False \(untick\), not 'yes'"):
        toggle([3], 1, "yes")


def test_a_chinese_notebook_gets_the_picker_in_chinese(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    assert selection_text(FLEET, []).splitlines() == [
        "[演示服务器（虚构的，不是本机）]",
        '还没有选择：勾选 GPU，或者选出空闲显存最多的 N 个（CUDA_VISIBLE_DEVICES="" 会隐藏所有 GPU）',
    ]
    text = selection_text(FLEET, [3, 6])
    assert 'CUDA_VISIBLE_DEVICES="3,6"' in text and "(物理编号是 NVML 的编号" in text
    assert text.splitlines()[-1].startswith("shell 命令：CUDA_DEVICE_ORDER=PCI_BUS_ID")
    assert "<th" in inventory_html(FLEET) and ">已用显存</th>" in inventory_html(FLEET)
    assert "或者在 shell 中：" in code_html([3])
    with pytest.raises(ValueError, match="选择中重复出现了 GPU 3；每个 GPU 只勾选一次。"):
        check_selection(FLEET, [3, 3])
    picker = GpuPicker(FLEET)
    assert picker.pick_button.description == "选出空闲显存最多的 N 个"
