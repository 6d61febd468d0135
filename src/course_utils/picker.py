"""A GPU picker for notebooks: tick GPUs or ask for the N freest, see `CUDA_VISIBLE_DEVICES` live.

The logic is in plain functions (a selection in, text or HTML out) that are unit-tested
without a browser; `GpuPicker` only wires them to ipywidgets. With no GPU the picker shows
the demo fleet, labelled as made up. Widgets carry stable CSS classes (`gpu-picker`,
`gpu-picker-check-<i>`, `gpu-picker-n`, `gpu-picker-pick`, `gpu-picker-value`, ...) so that a
browser test can find them.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import ipywidgets as widgets

from course_utils.gpus import MIB, Inventory, demo_inventory, nvml_inventory, whole_number
from course_utils.i18n import N_, _, translated
from course_utils.visible_devices import (
    choose_by_free_memory,
    mapping_lines,
    script_header,
    shell_command,
    visible_devices_value,
)

DEMO_LABEL = N_("DEMO FLEET (made up, not this machine)")
NOTHING_SELECTED = N_("nothing selected yet: tick GPUs, or pick the N with most free memory")
ORDER_NOTE = N_(
    "physical ids are NVML's, in PCI bus order as nvidia-smi numbers them: they name these GPUs "
    "when CUDA_DEVICE_ORDER=PCI_BUS_ID is set, as the suggested lines do"
)
_HEAD = "padding:2px 10px;text-align:left;vertical-align:bottom"  # headers may wrap, padded apart
_CELL = "padding:2px 10px;text-align:left;white-space:nowrap"


def _check_inventory(inventory: object) -> None:
    """TypeError unless `inventory` is an Inventory, saying where one comes from."""
    if not isinstance(inventory, Inventory):
        raise TypeError(
            f"inventory must be an Inventory (nvml_inventory() or demo_inventory()), not {inventory!r}."
        )


def _listed(selection: object) -> list:
    """`selection` as a list, or a TypeError unless it is a list (an iterable) of GPU numbers; text, a
    set (no order) or a dict is refused, and the entries are checked where they are used."""
    if isinstance(selection, str | bytes | AbstractSet | Mapping) or not isinstance(selection, Iterable):
        raise TypeError(f"the selection is a list of physical GPU numbers such as [3, 6], not {selection!r}.")
    return list(selection)


def check_selection(inventory: Inventory, selection: Sequence[int]) -> list[int]:
    """The selection as a list of physical indices, checked against the inventory (ValueError if not).

    Each entry must be a whole number (any integer type, numpy's too) naming a GPU of the
    inventory, once.
    """
    _check_inventory(inventory)
    selection = _listed(selection)
    count = len(inventory.gpus)
    valid = (
        _("physical GPUs are numbered 0-{last}").format(last=count - 1)
        if count
        else _("the inventory has no GPU")
    )
    chosen: list[int] = []
    for item in selection:
        try:
            index = whole_number(item, "a GPU number")
        except ValueError:
            raise ValueError(
                _("the selection holds physical GPU numbers (ints), not {item!r}; {valid}.").format(
                    item=item, valid=valid
                )
            ) from None
        if not 0 <= index < count:
            raise ValueError(
                _("the selection names GPU {index}, but there is no GPU {index}; {valid}.").format(
                    index=index, valid=valid
                )
            )
        if index in chosen:
            raise ValueError(_("the selection repeats GPU {index}; tick each GPU once.").format(index=index))
        chosen.append(index)
    return chosen


def toggle(selection: Sequence[int], index: int, ticked: bool) -> list[int]:
    """The selection after ticking (appended last) or unticking GPU `index`; order is kept otherwise."""
    index = whole_number(index, "index, the GPU ticked or unticked,")
    if index < 0:
        raise ValueError(
            _("index, the GPU ticked or unticked, is {index}; physical GPUs are numbered from 0.").format(
                index=index
            )
        )
    if not isinstance(ticked, bool):
        raise TypeError(f"ticked is True (tick) or False (untick), not {ticked!r}.")
    kept = [i for i in _listed(selection) if i != index]
    return [*kept, index] if ticked else kept


def source_label(inventory: Inventory) -> str:
    """What the reader is looking at: the demo fleet (said loudly) or this machine's GPUs via NVML."""
    _check_inventory(inventory)
    if inventory.source == "demo":
        return translated(DEMO_LABEL)
    return _("this machine's GPUs (NVML, driver {driver})").format(driver=inventory.driver_version or "?")


def selection_text(inventory: Inventory, selection: Sequence[int]) -> str:
    """Plain-text summary of a selection: the source, the value to set, logical -> physical, the shell line.

    With nothing selected it says so instead of offering `CUDA_VISIBLE_DEVICES=""`, which
    would hide every GPU.
    """
    chosen = check_selection(inventory, selection)
    lines = [f"[{source_label(inventory)}]"]
    if not chosen:
        hint = _('{nothing} (CUDA_VISIBLE_DEVICES="" would hide every GPU)').format(
            nothing=translated(NOTHING_SELECTED)
        )
        return "\n".join([*lines, hint])
    value = visible_devices_value(chosen)
    lines += [
        f'CUDA_VISIBLE_DEVICES="{value}"',
        *mapping_lines(value, inventory),
        f"({translated(ORDER_NOTE)})",
    ]
    lines.append(_("shell: {command}").format(command=shell_command(value)))
    return "\n".join(lines)


def _bar(fraction: float) -> str:
    """An inline HTML memory bar, `fraction` of it filled."""
    pct = max(0.0, min(1.0, fraction)) * 100
    colour = "#d9534f" if pct >= 90 else "#f0ad4e" if pct >= 50 else "#5cb85c"
    return (
        '<div class="gpu-picker-bar" style="width:100px;height:10px;background:#e6e6e6;'
        'display:inline-block;vertical-align:middle">'
        f'<div style="width:{pct:.0f}%;height:100%;background:{colour}"></div></div>'
    )


def inventory_html(inventory: Inventory, selection: Sequence[int] = ()) -> str:
    """The inventory as an HTML table with memory bars; selected rows show their logical id."""
    selection = check_selection(inventory, selection)
    if not inventory.gpus:
        why = html.escape(inventory.reason or _("NVML found no NVIDIA GPU."))
        return f'<div class="gpu-picker-empty">{_("No GPU to list. {why}").format(why=why)}</div>'
    logical = {physical: k for k, physical in enumerate(selection)}
    label = html.escape(source_label(inventory))
    style = "color:#b00;font-weight:bold" if inventory.source == "demo" else "font-weight:bold"
    headers = [
        "GPU",
        _("name"),
        _("bus id"),
        _("memory used"),
        _("free"),
        _("processes"),
        _("in your process"),
    ]
    rows = [
        f'<div class="gpu-picker-source" style="{style}">{label}</div>',
        '<table class="gpu-picker-table" style="border-collapse:collapse">',
        "<tr>" + "".join(f'<th style="{_HEAD}">{name}</th>' for name in headers) + "</tr>",
    ]
    for gpu in inventory.gpus:
        if gpu.memory_total is None or gpu.memory_used is None or gpu.memory_free is None:
            memory, free = _("unknown"), _("unknown")
        else:
            used = gpu.memory_used / gpu.memory_total if gpu.memory_total else 0.0
            memory = f"{_bar(used)} {gpu.memory_used // MIB} / {gpu.memory_total // MIB} MiB"
            free = f"{gpu.memory_free // MIB} MiB"
        processes = _("unknown") if gpu.processes is None else str(len(gpu.processes))
        seen = f"cuda:{logical[gpu.index]}" if gpu.index in logical else _("hidden")
        name, bus = html.escape(gpu.name), html.escape(gpu.pci_bus_id)
        cells = "".join(
            f'<td style="{_CELL}">{c}</td>' for c in (gpu.index, name, bus, memory, free, processes, seen)
        )
        weight = "font-weight:bold;" if gpu.index in logical else ""
        rows.append(f'<tr style="{weight}">{cells}</tr>')
    rows.append("</table>")
    return "\n".join(rows)


def value_html(selection: Sequence[int]) -> str:
    """The value to set, as the picker shows it (the browser test reads this text).

    With nothing selected: a hint, not `CUDA_VISIBLE_DEVICES=""` (which would hide every GPU).
    """
    selection = _listed(selection)
    if not selection:
        return f'<i class="gpu-picker-value-text">{html.escape(translated(NOTHING_SELECTED))}</i>'
    value = visible_devices_value(selection)
    return f'<code class="gpu-picker-value-text">CUDA_VISIBLE_DEVICES="{value}"</code>'


def mapping_html(inventory: Inventory, selection: Sequence[int]) -> str:
    """The logical -> physical lines as HTML, with the numbering they assume; empty for no selection."""
    selection = _listed(selection)
    if not selection:
        return ""
    lines = mapping_lines(visible_devices_value(selection), inventory)
    note = f'<br><small class="gpu-picker-order-note">({html.escape(translated(ORDER_NOTE))})</small>'
    return "<br>".join(html.escape(line) for line in lines) + note


def code_html(selection: Sequence[int]) -> str:
    """The lines for the top of a script and the shell line, as HTML; a hint when nothing is selected."""
    selection = _listed(selection)
    if not selection:
        return f"<i>{_('the lines for the top of your script appear here once GPUs are selected')}</i>"
    value = visible_devices_value(selection)
    return (
        f"<pre>{html.escape(script_header(value))}</pre>"
        f"<div>{_('or in the shell:')}</div><pre>{html.escape(shell_command(value))}</pre>"
    )


class GpuPicker:
    """The widget: a table, one checkbox per GPU, "the N freest" and a live result.

    `GpuPicker(demo_inventory())` always shows the demo fleet; `GpuPicker()` reads this
    machine through NVML and falls back to the demo fleet (labelled) when there is no GPU.
    Show it with `display(picker.widget)`; drive it from code with `select` and `pick_most_free`.
    """

    def __init__(self, inventory: Inventory | None = None) -> None:
        self.note = ""
        if inventory is not None and not isinstance(inventory, Inventory):
            raise TypeError(
                f"GpuPicker shows an Inventory (demo_inventory(), or nothing for this machine's GPUs), "
                f"not {inventory!r}."
            )
        if inventory is None:
            inventory = nvml_inventory()
            if not inventory.gpus:
                self.note = _("No GPU here ({reason}); showing the demo fleet.").format(
                    reason=inventory.reason or _("NVML found none")
                )
                inventory = demo_inventory()
        if not inventory.gpus:
            raise ValueError(_("the inventory has no GPU to pick from; pass demo_inventory() to practise."))
        self.inventory = inventory
        self.selection: list[int] = []
        self._syncing = False
        self.table = widgets.HTML()
        self.table.add_class("gpu-picker-table-box")
        self.checks: list[widgets.Checkbox] = []
        for gpu in inventory.gpus:
            box = widgets.Checkbox(value=False, description=f"GPU {gpu.index}", indent=False)
            box.add_class("gpu-picker-check")
            box.add_class(f"gpu-picker-check-{gpu.index}")
            box.observe(self._on_tick(gpu.index), names="value")
            self.checks.append(box)
        known = sum(gpu.memory_free is not None for gpu in inventory.gpus)
        self.n_input = widgets.BoundedIntText(value=1, min=1, max=max(1, known), description="N:")
        self.n_input.add_class("gpu-picker-n")
        self.pick_button = widgets.Button(
            description=_("Pick the N with most free memory"), layout=widgets.Layout(width="auto")
        )
        self.pick_button.add_class("gpu-picker-pick")
        self.pick_button.on_click(self._on_pick)
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

    def _on_pick(self, _button: widgets.Button) -> None:
        """The button: pick the N freest, or show why that cannot be done (no traceback in a widget log)."""
        try:
            self.pick_most_free(self.n_input.value)
        except ValueError as err:
            self.value.value = f'<span class="gpu-picker-error">{html.escape(str(err))}</span>'

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
        self.select(choose_by_free_memory(self.inventory, n))

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
