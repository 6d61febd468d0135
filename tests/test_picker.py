"""The GPU picker: its plain functions (no browser) and the widget wiring driven from Python."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from course_utils import picker as picker_module
from course_utils.gpus import GpuInfo, Inventory, demo_inventory
from course_utils.picker import (
    DEMO_LABEL,
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


def test_selection_text_for_the_seed_000_example():
    assert selection_text(FLEET, [0, 4]).splitlines() == [
        f"[{DEMO_LABEL}]",
        'CUDA_VISIBLE_DEVICES="0,4"',
        "cuda:0 -> physical GPU 0 (DEMO A100-SXM4-80GB, bus 00000000:07:00.0, 8192 MiB free)",
        "cuda:1 -> physical GPU 4 (DEMO A100-SXM4-80GB, bus 00000000:87:00.0, 920 MiB free)",
    ]


def test_selection_text_with_nothing_selected():
    text = selection_text(FLEET, [])
    assert 'CUDA_VISIBLE_DEVICES=""' in text and "PyTorch runs on the CPU" in text


def test_source_label_for_real_hardware():
    real = Inventory(gpus=FLEET.gpus[:1], source="nvml", driver_version="580.65")
    assert source_label(real) == "this machine's GPUs (NVML, driver 580.65)"
    assert DEMO_LABEL not in inventory_html(real)


def test_inventory_html_labels_the_demo_and_marks_the_selection():
    page = inventory_html(FLEET, [6, 3])
    assert DEMO_LABEL in page
    assert page.count("<tr") == 9  # header and 8 GPUs
    assert page.count("gpu-picker-bar") == 8
    assert "<td>cuda:0</td>" in page and "<td>cuda:1</td>" in page and page.count("hidden") == 6
    assert "width:99%" in inventory_html(FLEET)  # GPU 4 is 81000 / 81920 MiB used


def test_inventory_html_escapes_names_and_explains_an_empty_inventory():
    odd = Inventory(gpus=(GpuInfo(0, "<b>x</b>", "GPU-0", "0:1", 10, 5),), source="nvml")
    assert "&lt;b&gt;x&lt;/b&gt;" in inventory_html(odd)
    assert "No GPU to list. no driver" in inventory_html(Inventory(reason="no driver"))


def test_value_mapping_and_code_html():
    assert value_html([3, 6]) == '<code class="gpu-picker-value-text">CUDA_VISIBLE_DEVICES="3,6"</code>'
    assert "cuda:1 -&gt; physical GPU 6" in mapping_html(FLEET, [3, 6])
    code = code_html([3, 6])
    assert code.startswith("<pre>") and "CUDA_VISIBLE_DEVICES&quot;] = &quot;3,6&quot;" in code


def test_picker_on_the_demo_fleet_is_labelled_and_classed():
    picker = GpuPicker(FLEET)
    assert picker.widget._dom_classes == ("gpu-picker", "gpu-picker-demo")
    assert [c._dom_classes[1] for c in picker.checks] == [f"gpu-picker-check-{i}" for i in range(8)]
    assert "gpu-picker-n" in picker.n_input._dom_classes and picker.n_input.max == 8
    assert "gpu-picker-pick" in picker.pick_button._dom_classes
    assert "gpu-picker-value" in picker.value._dom_classes
    assert DEMO_LABEL in picker.table.value
    assert 'CUDA_VISIBLE_DEVICES=""' in picker.value.value


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
