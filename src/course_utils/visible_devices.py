"""`CUDA_VISIBLE_DEVICES` done right: how CUDA reads it, a strict checker, choosing, setting.

CUDA reads `CUDA_VISIBLE_DEVICES` once, when it initialises in a process, and from then on
numbers the GPUs it was allowed to see 0, 1, 2... in the order of the list: the *logical*
ids `cuda:0`, `cuda:1`... of PyTorch. The *physical* ids are the ones nvidia-smi and NVML
print. This module

- reproduces CUDA's lenient reading (`cuda_semantics`: it silently stops at the first
  entry it cannot use), and offers a strict reading (`parse_visible_devices`) that the
  course's tools use: anything CUDA would silently drop is an error that says what to write;
- maps logical ids to physical GPUs of an inventory (`logical_to_physical`);
- chooses the N GPUs with most free memory and writes the value to set;
- sets the variable only when it still has an effect (`set_visible_devices`), and runs code
  in a child process whose environment carries the variable (`run_with_visible_devices`).

Integer entries are CUDA's own device numbers. CUDA numbers devices "fastest first" unless
`CUDA_DEVICE_ORDER=PCI_BUS_ID`; NVML and nvidia-smi number them in PCI bus order. The
mapping here uses NVML's numbers, so it holds when `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set (the
code this module writes always sets it) or when the ids are UUIDs, which never depend on order.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from course_utils.gpus import MIB, Inventory

VAR = "CUDA_VISIBLE_DEVICES"
ORDER_VAR = "CUDA_DEVICE_ORDER"
_LEADING_INT = re.compile(r"[+-]?\d+")
_PLAIN_INDEX = re.compile(r"\d+")


def _strtoul(entry: str) -> int:
    """The integer an entry starts with, as C's strtoul reads it; -1 when it starts with none."""
    found = _LEADING_INT.match(entry.strip())
    return int(found[0]) if found else -1


def _uuid_matches(prefix: str, inventory: Inventory) -> list[int]:
    """Physical indices of the GPUs whose UUID starts with `prefix`."""
    return [gpu.index for gpu in inventory.gpus if gpu.uuid.startswith(prefix)]


def cuda_semantics(value: str | None, inventory: Inventory) -> list[int]:
    """The physical GPUs CUDA would make visible for `value`, in logical order, read as CUDA reads it.

    Unset (None) means every GPU; an empty string means none. CUDA walks the comma-separated
    list and silently stops at the first entry it cannot use (`-1`, a word, an index the
    machine does not have, an unknown or ambiguous UUID prefix): "0,1,-1,2" gives [0, 1] and
    "-1" gives []. An integer entry is read like C's `strtoul`, so "1gpu" counts as 1. A
    list that starts with `GPU-` is a list of UUIDs (or unique UUID prefixes); a list that
    starts with a number is a list of numbers. A device named twice makes the list empty:
    that is how PyTorch's own emulation of this parsing (`torch.cuda._parse_visible_devices`,
    used for its NVML-based device count) treats repeats; NVIDIA does not document the case,
    and `parse_visible_devices` refuses it outright. `MIG-` entries name MIG instances, which
    an inventory of whole GPUs does not list: this function returns [] for them.
    """
    if value is None:
        return [gpu.index for gpu in inventory.gpus]
    count = len(inventory.gpus)
    uuids = value.startswith("GPU-")
    chosen: list[int] = []
    for entry in value.split(","):
        entry = entry.strip()
        if uuids:
            matches = _uuid_matches(entry, inventory) if entry.startswith("GPU-") else []
            index = matches[0] if len(matches) == 1 else -1
        else:
            index = _strtoul(entry)
        if index < 0 or index >= count:
            break  # the first invalid entry ends the list; it and everything after are ignored
        if index in chosen:
            return []
        chosen.append(index)
    return chosen


def _describe_valid(inventory: Inventory) -> str:
    """One sentence listing the ids an inventory accepts."""
    if not inventory.gpus:
        return "this inventory has no GPU, so the only valid value is the empty string (no GPU)"
    last = len(inventory.gpus) - 1
    example = inventory.gpus[0].uuid[:12]
    return (
        f"valid entries are the indices 0-{last} or GPU UUIDs from the inventory "
        f"(a unique prefix such as {example!r} is enough)"
    )


def parse_visible_devices(value: str | None, inventory: Inventory) -> list[int]:
    """The physical GPUs `value` selects, in logical order; ValueError for anything CUDA would drop.

    Stricter than CUDA on purpose: where CUDA silently ignores an entry and everything after
    it, this raises a ValueError that names the entry, says why it is wrong and what is valid.
    Accepted: None (unset: every GPU), "" (no GPU), comma-separated indices of the inventory
    without signs or spaces ("0,4"), or GPU UUIDs / unique UUID prefixes ("GPU-3d3e"). Not
    accepted: "-1" (write "" to hide every GPU), repeats, mixing indices with UUIDs, `MIG-`
    instances (not in an inventory of whole GPUs), unknown indices or UUIDs.
    """
    if value is None:
        return [gpu.index for gpu in inventory.gpus]
    if value == "":
        return []
    valid = _describe_valid(inventory)
    entries = value.split(",")
    uuids = entries[0].strip().startswith("GPU-")
    chosen: list[int] = []
    for position, raw in enumerate(entries, start=1):
        where = f"CUDA_VISIBLE_DEVICES={value!r}: entry {position} ({raw!r})"
        entry = raw.strip()
        if entry != raw:
            raise ValueError(f"{where} has spaces around it; write the list without spaces, e.g. '0,4'.")
        if entry == "":
            raise ValueError(f"{where} is empty; remove the extra comma. To hide every GPU, set ''.")
        if entry == "-1" or (entry.startswith("-") and _PLAIN_INDEX.fullmatch(entry[1:])):
            raise ValueError(
                f"{where} is negative. CUDA stops reading at it, so every entry from here on is "
                "ignored; to hide every GPU write the empty string '' instead of '-1'."
            )
        if entry.startswith("MIG-"):
            raise ValueError(
                f"{where} names a MIG instance; the inventory lists whole GPUs only. "
                "List MIG instances with `nvidia-smi -L` and set their ids outside the course's tools."
            )
        if uuids != entry.startswith("GPU-"):
            raise ValueError(
                f"{where} mixes GPU UUIDs and indices; CUDA stops at the first entry of the other "
                f"kind. Use one kind for the whole list; {valid}."
            )
        if uuids:
            matches = _uuid_matches(entry, inventory)
            if not matches:
                raise ValueError(f"{where} matches no GPU UUID of the inventory; {valid}.")
            if len(matches) > 1:
                raise ValueError(
                    f"{where} is a prefix of {len(matches)} UUIDs (GPUs {matches}); write more of it."
                )
            index = matches[0]
        else:
            if not _PLAIN_INDEX.fullmatch(entry):
                raise ValueError(f"{where} is not a GPU index or a GPU UUID; {valid}.")
            index = int(entry)
            if index >= len(inventory.gpus):
                raise ValueError(f"{where}: there is no GPU {index} in the inventory; {valid}.")
        if index in chosen:
            raise ValueError(
                f"{where} repeats GPU {index}; name each GPU once (CUDA does not accept a repeat)."
            )
        chosen.append(index)
    return chosen


def logical_to_physical(value: str | None, inventory: Inventory) -> dict[int, int]:
    """`{logical id: physical index}` for `value`, checked strictly: `cuda:k` is physical GPU `[k]`."""
    return dict(enumerate(parse_visible_devices(value, inventory)))


def physical_of(logical: int, value: str | None, inventory: Inventory) -> int:
    """The physical index behind `cuda:<logical>` for `value`; ValueError when there is no such device."""
    mapping = logical_to_physical(value, inventory)
    if logical not in mapping:
        if not mapping:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={value!r} leaves no GPU visible, so there is no cuda:{logical}."
            )
        raise ValueError(
            f"CUDA_VISIBLE_DEVICES={value!r} makes {len(mapping)} GPU(s) visible: "
            f"cuda:0 to cuda:{len(mapping) - 1}; there is no cuda:{logical}."
        )
    return mapping[logical]


def mapping_lines(value: str | None, inventory: Inventory) -> list[str]:
    """Readable lines `cuda:k -> physical GPU i (name, bus id, free memory)` for `value`."""
    mapping = logical_to_physical(value, inventory)
    if not mapping:
        return ["no GPU is visible: torch.cuda.device_count() == 0, PyTorch runs on the CPU"]
    lines = []
    for logical, physical in mapping.items():
        gpu = inventory.gpus[physical]
        lines.append(
            f"cuda:{logical} -> physical GPU {physical} "
            f"({gpu.name}, bus {gpu.pci_bus_id}, {gpu.memory_free // MIB} MiB free)"
        )
    return lines


def choose_by_free_memory(inventory: Inventory, n: int) -> list[int]:
    """The `n` physical GPUs with most free memory, freest first; ties go to the lower index.

    Freest first means `cuda:0`, where PyTorch puts things by default, is the emptiest GPU.
    """
    count = len(inventory.gpus)
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"n must be a whole number of GPUs, not {n!r}.")
    if count == 0:
        raise ValueError("the inventory has no GPU to choose from; run on the CPU or use demo_inventory().")
    if not 1 <= n <= count:
        raise ValueError(
            f"cannot choose {n} GPU(s): the inventory has {count}; choose between 1 and {count}."
        )
    ranked = sorted(inventory.gpus, key=lambda gpu: (-gpu.memory_free, gpu.index))
    return [gpu.index for gpu in ranked[:n]]


def visible_devices_value(indices: Sequence[int]) -> str:
    """The `CUDA_VISIBLE_DEVICES` value for physical `indices` in logical order: [3, 6] -> "3,6"."""
    return ",".join(str(int(i)) for i in indices)


@dataclass(frozen=True)
class DeviceOrder:
    """Which numbering CUDA uses in a process: CUDA's default FASTEST_FIRST, or PCI_BUS_ID."""

    order: str  # "FASTEST_FIRST" or "PCI_BUS_ID"
    raw: str | None  # the variable as set (None when unset)

    @property
    def matches_nvidia_smi(self) -> bool:
        """True when CUDA's integer ids are guaranteed to mean the same GPUs as nvidia-smi's."""
        return self.order == "PCI_BUS_ID"

    def explain(self) -> str:
        """One paragraph on what the order in force means for integer ids."""
        shown = "unset" if self.raw is None else f"{self.raw!r}"
        if self.matches_nvidia_smi:
            return (
                f"CUDA_DEVICE_ORDER is {shown}: CUDA numbers GPUs by PCI bus id, like nvidia-smi and "
                "NVML, so CUDA_VISIBLE_DEVICES=2 is the GPU nvidia-smi calls 2."
            )
        note = "" if self.raw in (None, "FASTEST_FIRST") else " (an unknown value counts as the default)"
        return (
            f"CUDA_DEVICE_ORDER is {shown}{note}: CUDA numbers GPUs fastest first, so on a machine "
            "with different GPU models CUDA_VISIBLE_DEVICES=0 may be another GPU than nvidia-smi's 0. "
            "Set CUDA_DEVICE_ORDER=PCI_BUS_ID (or use UUIDs) to make the numbers agree."
        )


def device_order(environ: Mapping[str, str] | None = None) -> DeviceOrder:
    """The device order in force for CUDA started with `environ` (default: this process's environment)."""
    env = os.environ if environ is None else environ
    raw = env.get(ORDER_VAR)
    order = "PCI_BUS_ID" if raw == "PCI_BUS_ID" else "FASTEST_FIRST"
    return DeviceOrder(order=order, raw=raw)


def script_header(value: str) -> str:
    """The lines to put at the very top of a script, before `import torch`, to select GPUs `value`."""
    return "\n".join(
        [
            "import os",
            "",
            "# Before anything touches CUDA (best: before importing torch).",
            'os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # number GPUs as nvidia-smi does',
            f'os.environ["CUDA_VISIBLE_DEVICES"] = "{value}"  # assign: setdefault would keep an old value',
            "",
            "import torch",
        ]
    )


def _cuda_initialized() -> bool:
    """Whether PyTorch has initialised CUDA in this process (False when torch was never imported)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


TOO_LATE = (
    "CUDA is already initialised in this process, so it has read CUDA_VISIBLE_DEVICES and will "
    "never read it again: setting it now to {value!r} would silently change nothing. Set it before "
    "the first CUDA call (at the top of the script, or in the shell: CUDA_VISIBLE_DEVICES={value} "
    "python train.py), or run the work in a new process with run_with_visible_devices()."
)


def set_visible_devices(
    value: str,
    inventory: Inventory | None = None,
    *,
    environ: MutableMapping[str, str] | None = None,
    cuda_initialized: bool | None = None,
    pci_bus_order: bool = True,
) -> str | None:
    """Assign `CUDA_VISIBLE_DEVICES=value` (and `CUDA_DEVICE_ORDER=PCI_BUS_ID`) while it still matters.

    Raises RuntimeError when CUDA is already initialised here (`torch.cuda.is_initialized()`,
    or `cuda_initialized=True` when the caller says so): CUDA reads the variable once, at
    initialisation. The check cannot see a CUDA driver started by `torch.cuda.is_available()`
    or `device_count()` alone (PyTorch is then not "initialised" but the driver has read the
    variable): the safe rule stays "before any torch.cuda call". Assigns rather than
    `os.environ.setdefault`, which does nothing when the variable is already set (seed 002's
    bug). With an inventory the value is checked strictly first (ValueError). Returns the
    previous value (None when it was unset) so that the caller can see what it replaced.
    """
    env = os.environ if environ is None else environ
    if inventory is not None:
        parse_visible_devices(value, inventory)
    initialized = _cuda_initialized() if cuda_initialized is None else cuda_initialized
    if initialized:
        raise RuntimeError(TOO_LATE.format(value=value))
    previous = env.get(VAR)
    env[VAR] = value
    if pci_bus_order:
        env[ORDER_VAR] = "PCI_BUS_ID"
    return previous


def run_with_visible_devices(
    code: str,
    value: str | None,
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> str:
    """Run Python `code` in a new process whose environment has `CUDA_VISIBLE_DEVICES=value`; return stdout.

    `value=None` removes the variable from the child's environment (CUDA then sees every GPU).
    The child is a fresh interpreter (this very Python), so CUDA initialises there after the
    variable is in place: the reliable way to try a setting from a notebook whose own CUDA may
    already be running. A child that fails raises RuntimeError carrying its stderr.
    """
    env = dict(os.environ)
    env.pop(VAR, None)
    if value is not None:
        env[VAR] = value
    env.update(extra_env or {})
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise RuntimeError(f"the child process did not finish within {timeout} s") from err
    if done.returncode != 0:
        raise RuntimeError(
            f"the child process failed (exit status {done.returncode}):\n{done.stderr.strip()}"
        )
    return done.stdout
