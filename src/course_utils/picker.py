"""A GPU picker for notebooks: tick GPUs or ask for the N freest, see `CUDA_VISIBLE_DEVICES` live.

The logic is in plain functions (a selection in, text or HTML out) that are unit-tested
without a browser; `GpuPicker` only wires them to ipywidgets. With no GPU the picker shows
the demo fleet, labelled as made up. Widgets carry stable CSS classes (`gpu-picker`,
`gpu-picker-check-<i>`, `gpu-picker-n`, `gpu-picker-pick`, `gpu-picker-value`, ...) so that a
browser test can find them.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import ipywidgets as widgets

from course_utils.gpus import MIB, Inventory, demo_inventory, nvml_inventory
from course_utils.visible_devices import (
    choose_by_free_memory,
    mapping_lines,
    parse_visible_devices,
    script_header,
    visible_devices_value,
)

DEMO_LABEL = "DEMO FLEET (made up, not this machine)"


def check_selection(inventory: Inventory, selection: Sequence[int]) -> list[int]:
    """The selection as a list of physical indices, checked against the inventory (ValueError if not)."""
    chosen = [int(i) for i in selection]
    parse_visible_devices(visible_devices_value(chosen), inventory)
    return chosen


def toggle(selection: Sequence[int], index: int, ticked: bool) -> list[int]:
    """The selection after ticking (appended last) or unticking GPU `index`; order is kept otherwise."""
    kept = [i for i in selection if i != index]
    return [*kept, index] if ticked else kept


def source_label(inventory: Inventory) -> str:
    """What the reader is looking at: the demo fleet (said loudly) or this machine's GPUs via NVML."""
    if inventory.source == "demo":
        return DEMO_LABEL
    return f"this machine's GPUs (NVML, driver {inventory.driver_version or '?'})"


def selection_text(inventory: Inventory, selection: Sequence[int]) -> str:
    """Plain-text summary of a selection: the source, the value to set, and logical -> physical."""
    chosen = check_selection(inventory, selection)
    value = visible_devices_value(chosen)
    lines = [f"[{source_label(inventory)}]", f'CUDA_VISIBLE_DEVICES="{value}"']
    lines += mapping_lines(value, inventory)
    return "\n".join(lines)


def _bar(fraction: float) -> str:
    """An inline HTML memory bar, `fraction` of it filled."""
    pct = max(0.0, min(1.0, fraction)) * 100
    colour = "#d9534f" if pct >= 90 else "#f0ad4e" if pct >= 50 else "#5cb85c"
    return (
        '<div class="gpu-picker-bar" style="width:140px;height:10px;background:#e6e6e6;'
        'display:inline-block;vertical-align:middle">'
        f'<div style="width:{pct:.0f}%;height:100%;background:{colour}"></div></div>'
    )


def inventory_html(inventory: Inventory, selection: Sequence[int] = ()) -> str:
    """The inventory as an HTML table with memory bars; selected rows show their logical id."""
    if not inventory.gpus:
        why = html.escape(inventory.reason or "NVML found no NVIDIA GPU.")
        return f'<div class="gpu-picker-empty">No GPU to list. {why}</div>'
    logical = {physical: k for k, physical in enumerate(selection)}
    label = html.escape(source_label(inventory))
    style = "color:#b00;font-weight:bold" if inventory.source == "demo" else "font-weight:bold"
    rows = [
        f'<div class="gpu-picker-source" style="{style}">{label}</div>',
        '<table class="gpu-picker-table" style="border-collapse:collapse">',
        "<tr><th>GPU</th><th>name</th><th>bus id</th><th>memory used</th><th>free</th>"
        "<th>processes</th><th>in your process</th></tr>",
    ]
    for gpu in inventory.gpus:
        used = gpu.memory_used / gpu.memory_total if gpu.memory_total else 0.0
        seen = f"cuda:{logical[gpu.index]}" if gpu.index in logical else "hidden"
        weight = "font-weight:bold;" if gpu.index in logical else ""
        rows.append(
            f'<tr style="{weight}"><td>{gpu.index}</td><td>{html.escape(gpu.name)}</td>'
            f"<td>{html.escape(gpu.pci_bus_id)}</td>"
            f"<td>{_bar(used)} {gpu.memory_used // MIB} / {gpu.memory_total // MIB} MiB</td>"
            f"<td>{gpu.memory_free // MIB} MiB</td><td>{len(gpu.processes)}</td><td>{seen}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def value_html(selection: Sequence[int]) -> str:
    """The value to set, as the picker shows it (the browser test reads this text)."""
    value = visible_devices_value(selection)
    return f'<code class="gpu-picker-value-text">CUDA_VISIBLE_DEVICES="{value}"</code>'


def mapping_html(inventory: Inventory, selection: Sequence[int]) -> str:
    """The logical -> physical lines as HTML."""
    lines = mapping_lines(visible_devices_value(selection), inventory)
    return "<br>".join(html.escape(line) for line in lines)


def code_html(selection: Sequence[int]) -> str:
    """The code to put at the top of a script, as an HTML <pre> block."""
    return f"<pre>{html.escape(script_header(visible_devices_value(selection)))}</pre>"


class GpuPicker:
    """The widget: a table, one checkbox per GPU, "the N freest" and a live result.

    `GpuPicker(demo_inventory())` always shows the demo fleet; `GpuPicker()` reads this
    machine through NVML and falls back to the demo fleet (labelled) when there is no GPU.
    Show it with `display(picker.widget)`; drive it from code with `select` and `pick_most_free`.
    """

    def __init__(self, inventory: Inventory | None = None) -> None:
        self.note = ""
        if inventory is None:
            inventory = nvml_inventory()
            if not inventory.gpus:
                self.note = f"No GPU here ({inventory.reason or 'NVML found none'}); showing the demo fleet."
                inventory = demo_inventory()
        if not inventory.gpus:
            raise ValueError("the inventory has no GPU to pick from; pass demo_inventory() to practise.")
        self.inventory = inventory
        self.selection: list[int] = []
        self._syncing = False
        count = len(inventory.gpus)
        self.table = widgets.HTML()
        self.table.add_class("gpu-picker-table-box")
        self.checks: list[widgets.Checkbox] = []
        for gpu in inventory.gpus:
            box = widgets.Checkbox(value=False, description=f"GPU {gpu.index}", indent=False)
            box.add_class("gpu-picker-check")
            box.add_class(f"gpu-picker-check-{gpu.index}")
            box.observe(self._on_tick(gpu.index), names="value")
            self.checks.append(box)
        self.n_input = widgets.BoundedIntText(value=1, min=1, max=count, description="N:")
        self.n_input.add_class("gpu-picker-n")
        self.pick_button = widgets.Button(
            description="Pick the N with most free memory", layout=widgets.Layout(width="auto")
        )
        self.pick_button.add_class("gpu-picker-pick")
        self.pick_button.on_click(lambda _button: self.pick_most_free(self.n_input.value))
        self.value = widgets.HTML()
        self.value.add_class("gpu-picker-value")
        self.mapping = widgets.HTML()
        self.mapping.add_class("gpu-picker-mapping")
        self.code = widgets.HTML()
        self.code.add_class("gpu-picker-code")
        parts: list[widgets.Widget] = []
        if self.note:
            parts.append(widgets.HTML(f"<i>{html.escape(self.note)}</i>"))
        parts += [
            self.table,
            widgets.HBox(self.checks),
            widgets.HBox([self.n_input, self.pick_button]),
            self.value,
            self.mapping,
            self.code,
        ]
        self.widget = widgets.VBox(parts)
        self.widget.add_class("gpu-picker")
        self.widget.add_class(f"gpu-picker-{inventory.source}")
        self._refresh()

    def _on_tick(self, index: int) -> Callable[[dict], None]:
        """A checkbox observer for GPU `index`."""

        def handler(change: dict) -> None:
            if not self._syncing:
                self.select(toggle(self.selection, index, bool(change["new"])))

        return handler

    def select(self, indices: Sequence[int]) -> None:
        """Make `indices` (physical, in logical order) the selection; ValueError for unknown GPUs."""
        self.selection = check_selection(self.inventory, indices)
        self._refresh()

    def pick_most_free(self, n: int) -> None:
        """Select the `n` GPUs with most free memory, freest first (ValueError when n is out of range)."""
        self.select(choose_by_free_memory(self.inventory, int(n)))

    @property
    def value_string(self) -> str:
        """The `CUDA_VISIBLE_DEVICES` value for the current selection."""
        return visible_devices_value(self.selection)

    def summary_text(self) -> str:
        """The same information as the widget, as plain text (stable, so notebooks can compare it)."""
        return selection_text(self.inventory, self.selection)

    def _refresh(self) -> None:
        """Bring every widget in line with the selection."""
        self._syncing = True
        try:
            for gpu, box in zip(self.inventory.gpus, self.checks, strict=True):
                box.value = gpu.index in self.selection
        finally:
            self._syncing = False
        self.table.value = inventory_html(self.inventory, self.selection)
        self.value.value = value_html(self.selection)
        self.mapping.value = mapping_html(self.inventory, self.selection)
        self.code.value = code_html(self.selection)
