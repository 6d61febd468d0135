"""`CUDA_VISIBLE_DEVICES` done right: how CUDA reads it, a strict checker, choosing, setting.

CUDA reads `CUDA_VISIBLE_DEVICES` once, when it initialises in a process, and from then on
numbers the GPUs it was allowed to see 0, 1, 2... in the order of the list: the *logical*
ids `cuda:0`, `cuda:1`... of PyTorch. The *physical* ids are the ones nvidia-smi and NVML
print. This module

- reproduces CUDA's lenient reading as PyTorch emulates it (`cuda_semantics`: it silently
  stops at the first entry it cannot use), and offers a strict reading
  (`parse_visible_devices`) that the course's tools use: anything CUDA would silently drop is
  an error that says what to write;
- maps logical ids to physical GPUs of an inventory (`logical_to_physical`);
- chooses the N GPUs with most free memory and writes the value to set;
- sets the variable only when it still has an effect (`set_visible_devices`, which also asks
  whether the CUDA driver has started in this process: `course_utils.gpus.cuda_driver_started`).
  To try a value in a child process whose environment carries it, use
  `course_utils.processes.run_python`.

Integer entries are CUDA's own device numbers. CUDA numbers devices "fastest first" unless
`CUDA_DEVICE_ORDER=PCI_BUS_ID`; NVML and nvidia-smi number them in PCI bus order. The
mapping here uses NVML's numbers, so it holds when `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set (the
code this module writes always sets it) or when the ids are UUIDs, which never depend on order.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from course_utils.gpus import MIB, Inventory, cuda_driver_started, whole_number
from course_utils.i18n import N_, _, translated

VAR = "CUDA_VISIBLE_DEVICES"
ORDER_VAR = "CUDA_DEVICE_ORDER"
_LEADING_INT = re.compile(r"[+-]?[0-9]+")
_PLAIN_INDEX = re.compile(r"[0-9]+")
_UUID_BODY_MIN = 8  # hex digits before the first dash of a UUID: enough to tell a UUID from a word
MIG_NOT_MODELLED = N_(
    "MIG instance: not modelled by this course (an inventory lists whole GPUs; "
    "MIG ids come from `nvidia-smi -L`)"
)


def _strtoul(entry: str) -> int:
    """The integer an entry starts with, as C's strtoul reads it; -1 when it starts with none."""
    found = _LEADING_INT.match(entry.strip())
    if not found:
        return -1
    if len(found[0].lstrip("+-0")) > 20:  # beyond any unsigned long: strtoul saturates, Python would refuse
        return -(2**64) if found[0].startswith("-") else 2**64
    return int(found[0])


def _check(value: object, inventory: object = Inventory, *, unset: bool = True) -> None:
    """TypeError unless `value` is what the variable holds (text; None too where `unset` is allowed)
    and `inventory`, when given, is an Inventory (the class itself stands for "not given")."""
    if not (isinstance(value, str) or (unset and value is None)):
        none = _(", None means unset") if unset else ""
        number = isinstance(value, int) and not isinstance(value, bool)
        written = (
            _("write it as {text!r}").format(text=str(value))
            if number
            else _("visible_devices_value([0, 4]) writes one")
        )
        raise TypeError(
            _(
                "CUDA_VISIBLE_DEVICES holds text: pass a str such as '0,4' ('' hides every GPU{none}), "
                "not {value!r} ({type_name}); {written}."
            ).format(none=none, value=value, type_name=type(value).__name__, written=written)
        )
    if inventory is not Inventory and not isinstance(inventory, Inventory):
        raise TypeError(
            _(
                "inventory must be an Inventory (nvml_inventory() or demo_inventory()), not {inventory!r}."
            ).format(inventory=inventory)
        )


def _check_written(value: object) -> None:
    """`_check`, and ValueError for text no GPU id holds (quotes, backslashes, control characters),
    which a value written into a script or a shell line, or set for CUDA, must not hold."""
    _check(value, unset=False)
    if any(c in value for c in "\"'\\") or not value.isprintable():  # type: ignore[union-attr]
        raise ValueError(
            _(
                "CUDA_VISIBLE_DEVICES holds GPU indices or UUIDs separated by commas, such as '0,4'; "
                "{value!r} holds a quote, a backslash or a control character, which no GPU id has"
            ).format(value=value)
        )


def _uuid_matches(prefix: str, inventory: Inventory) -> list[int]:
    """Physical indices of the GPUs whose UUID starts with `prefix` (case-sensitive, as in PyTorch)."""
    return [gpu.index for gpu in inventory.gpus if gpu.uuid.startswith(prefix)]


def _read_uuids(value: str, inventory: Inventory) -> list[int]:
    """PyTorch's reading of a list that starts with "GPU-" (see `cuda_semantics`)."""
    candidates: list[str] = []
    for entry in value.split(","):  # entries are compared as written: no stripping
        if entry in candidates:
            return []  # the same text twice, before the first non-UUID entry: nothing visible
        if not entry.startswith("GPU-"):
            break
        candidates.append(entry)
    chosen: list[int] = []
    for candidate in candidates:
        matches = _uuid_matches(candidate, inventory)
        if len(matches) != 1:
            break  # unknown or ambiguous: this entry and everything after it are ignored
        if matches[0] in chosen:
            return []  # two prefixes of one GPU: nothing visible
        chosen.append(matches[0])
    return chosen


def _read_indices(value: str, inventory: Inventory) -> list[int]:
    """PyTorch's reading of a list of numbers (see `cuda_semantics`)."""
    numbers: list[int] = []
    for entry in value.split(","):
        number = _strtoul(entry)
        if number in numbers:
            return []  # a repeat, before the first invalid entry: nothing visible
        if number < 0:
            break  # no number, or a negative one: it and everything after it are ignored
        numbers.append(number)
    count = len(inventory.gpus)
    for position, number in enumerate(numbers):
        if number >= count:
            return numbers[:position]  # the first index the machine lacks ends the list
    return numbers


def cuda_semantics(value: str | None, inventory: Inventory) -> list[int]:
    """The physical GPUs CUDA makes visible for `value`, in logical order, read as PyTorch reads it.

    NVIDIA documents the main rules: unset (None) means every GPU, an empty string none; a
    comma-separated list of indices or of `GPU-` UUIDs (or unique UUID prefixes), visible in
    the order given; the first entry CUDA cannot use ends the list silently. The details
    NVIDIA leaves open follow PyTorch's own emulation, step for step
    (`torch.cuda._parse_visible_devices`, then `_device_count_nvml` and
    `_transform_uuid_to_ordinals`, which `torch.cuda.device_count()` uses to count GPUs
    through NVML); the unit tests compare the two on thousands of values:

    - A list of numbers: each entry, stripped of spaces, is read like C's `strtoul` (its
      leading digits: "1gpu" is 1, "3d3e0a11-..." is 3, "gpu" and "-1" are invalid). Reading
      stops at the first invalid entry. A number that comes twice before that point makes the
      whole list empty ("0,0" and also "0,8,0": repeats are checked while reading, before the
      indices are compared with the GPU count). Then the first index the machine lacks ends
      the list ("2,9,3" gives [2]).
    - A list that starts with "GPU-": entries are taken as written, spaces included, up to the
      first one that does not start with "GPU-" ("GPU-3, GPU-6" stops at " GPU-6"). The same
      text twice before that point makes the list empty ("GPU-6,GPU-x,GPU-6" gives []). Each
      entry is then a prefix of an inventory UUID, compared case-sensitively (NVML prints
      lower-case hex): the first unknown or ambiguous one ends the list, and two entries
      naming the same GPU make it empty.

    Where this function differs from `torch.cuda._parse_visible_devices`: a bare sign ("+",
    "-x") is an invalid entry here, like any entry without digits, while PyTorch's helper
    raises ValueError on it; and only ASCII digits count (C's `strtoul`), while PyTorch's
    helper also reads other Unicode decimal digits. A list that starts with "MIG-" names MIG
    instances, which an inventory of whole GPUs does not describe (PyTorch's NVML count gives
    up on them too): this raises ValueError.
    """
    _check(value, inventory)
    if value is None:
        return [gpu.index for gpu in inventory.gpus]
    if value.startswith("MIG-"):
        raise ValueError(f"CUDA_VISIBLE_DEVICES={value!r}: {translated(MIG_NOT_MODELLED)}.")
    if value.startswith("GPU-"):
        return _read_uuids(value, inventory)
    return _read_indices(value, inventory)


def _describe_valid(inventory: Inventory) -> str:
    """One sentence listing the ids an inventory accepts."""
    if not inventory.gpus:
        return _("this inventory has no GPU, so the only valid value is the empty string (no GPU)")
    last = len(inventory.gpus) - 1
    example = inventory.gpus[0].uuid[:12]
    return _(
        "valid entries are the indices 0-{last} or GPU UUIDs from the inventory "
        "(a unique prefix such as {example!r} is enough)"
    ).format(last=last, example=example)


def _uuid_hint(entry: str, inventory: Inventory) -> str | None:
    """What to write instead when `entry` is an inventory UUID without "GPU-", or not in lower case."""
    body = entry[4:] if entry[:4].upper() == "GPU-" else entry
    if len(body) < _UUID_BODY_MIN or _PLAIN_INDEX.fullmatch(body):
        return None
    fixed = "GPU-" + body.lower()
    matches = _uuid_matches(fixed, inventory)
    if len(matches) != 1 or entry == fixed:
        return None
    if not entry.startswith("GPU-"):
        leading = _strtoul(entry)
        cuda = (
            _("CUDA would read only its leading digits, as GPU {leading}").format(leading=leading)
            if leading >= 0
            else _("CUDA would find no number in it and stop there")
        )
        missing = (
            _("without its 'GPU-' prefix")
            if body == entry
            else _("with {start!r} for 'GPU-'").format(start=entry[:4])
        )
        return _("looks like the UUID of GPU {gpu} {missing} ({cuda}); write it as {fixed!r}.").format(
            gpu=matches[0], missing=missing, cuda=cuda, fixed=fixed
        )
    return _(
        "looks like the UUID of GPU {gpu} in upper case; UUIDs are lower-case hex, as "
        "`nvidia-smi -L` prints them, and PyTorch compares them case-sensitively (NVIDIA does "
        "not document other cases): write it as {fixed!r}."
    ).format(gpu=matches[0], fixed=fixed)


def parse_visible_devices(value: str | None, inventory: Inventory) -> list[int]:
    """The physical GPUs `value` selects, in logical order; ValueError for anything CUDA would drop.

    Stricter than CUDA on purpose: where CUDA silently ignores an entry and everything after
    it, this raises a ValueError that names the entry, says why it is wrong and what is valid.
    Accepted: None (unset: every GPU), "" (no GPU), comma-separated indices of the inventory
    without signs or spaces ("0,4"), or GPU UUIDs / unique UUID prefixes in lower case, as
    `nvidia-smi -L` prints them ("GPU-3d3e"). Not accepted: "-1" (write "" to hide every GPU),
    repeats, mixing indices with UUIDs, `MIG-` instances (not in an inventory of whole GPUs),
    unknown indices or UUIDs. A UUID written without "GPU-" (CUDA would read its leading
    digits as an index) or in upper case gets an error that says how to write it.
    """
    _check(value, inventory)
    if value is None:
        return [gpu.index for gpu in inventory.gpus]
    if value == "":
        return []
    valid = _describe_valid(inventory)
    entries = value.split(",")
    uuids = entries[0].strip().startswith("GPU-")
    chosen: list[int] = []
    for position, raw in enumerate(entries, start=1):
        where = _("CUDA_VISIBLE_DEVICES={value!r}: entry {position} ({raw!r})").format(
            value=value, position=position, raw=raw
        )
        entry = raw.strip()
        if entry != raw:
            raise ValueError(
                _("{where} has spaces around it; write the list without spaces, e.g. '0,4'.").format(
                    where=where
                )
            )
        if entry == "":
            raise ValueError(
                _("{where} is empty; remove the extra comma. To hide every GPU, set ''.").format(where=where)
            )
        if entry == "-1" or (entry.startswith("-") and _PLAIN_INDEX.fullmatch(entry[1:])):
            raise ValueError(
                _(
                    "{where} is negative. CUDA stops reading at it, so every entry from here on is "
                    "ignored; to hide every GPU write the empty string '' instead of '-1'."
                ).format(where=where)
            )
        if entry.startswith("MIG-"):
            raise ValueError(
                _(
                    "{where} names a MIG instance; the inventory lists whole GPUs only. "
                    "List MIG instances with `nvidia-smi -L` (`MIG-<uuid>`, or `MIG-GPU-<uuid>/<gi>/<ci>` "
                    "on drivers before R470) and set their ids outside the course's tools; a CUDA "
                    "process uses only one MIG instance."
                ).format(where=where)
            )
        hint = _uuid_hint(entry, inventory)
        if hint is not None:
            raise ValueError(f"{where} {hint}")
        if uuids != entry.startswith("GPU-"):
            raise ValueError(
                _(
                    "{where} mixes GPU UUIDs and indices; CUDA stops at the first entry of the other "
                    "kind. Use one kind for the whole list; {valid}."
                ).format(where=where, valid=valid)
            )
        if uuids:
            matches = _uuid_matches(entry, inventory)
            if not matches:
                raise ValueError(
                    _("{where} matches no GPU UUID of the inventory; {valid}.").format(
                        where=where, valid=valid
                    )
                )
            if len(matches) > 1:
                raise ValueError(
                    _("{where} is a prefix of {count} UUIDs (GPUs {matches}); write more of it.").format(
                        where=where, count=len(matches), matches=matches
                    )
                )
            index = matches[0]
        else:
            if not _PLAIN_INDEX.fullmatch(entry):
                raise ValueError(
                    _("{where} is not a GPU index or a GPU UUID; {valid}.").format(where=where, valid=valid)
                )
            index = _strtoul(entry)  # digits only here; one too long for int() counts as too big
            if index >= len(inventory.gpus):
                raise ValueError(
                    _("{where}: there is no GPU {index} in the inventory; {valid}.").format(
                        where=where, index=index, valid=valid
                    )
                )
        if index in chosen:
            raise ValueError(
                _("{where} repeats GPU {index}; name each GPU once (CUDA does not accept a repeat).").format(
                    where=where, index=index
                )
            )
        chosen.append(index)
    return chosen


def logical_to_physical(value: str | None, inventory: Inventory) -> dict[int, int]:
    """`{logical id: physical index}` for `value`, checked strictly: `cuda:k` is physical GPU `[k]`."""
    return dict(enumerate(parse_visible_devices(value, inventory)))


def physical_of(logical: int, value: str | None, inventory: Inventory) -> int:
    """The physical index behind `cuda:<logical>` for `value`; ValueError when there is no such device.

    `logical` is the number k of `cuda:k` (an int), `value` the variable's text.
    """
    if isinstance(logical, str):
        raise ValueError(
            _(
                "logical is the number k of cuda:k, an int: physical_of(0, ...) for cuda:0, not {logical!r}; "
                "the second argument is the CUDA_VISIBLE_DEVICES text."
            ).format(logical=logical)
        )
    logical = whole_number(logical, _("logical (the k of cuda:k)"))
    mapping = logical_to_physical(value, inventory)
    if logical not in mapping:
        if not mapping:
            raise ValueError(
                _(
                    "CUDA_VISIBLE_DEVICES={value!r} leaves no GPU visible, so there is no cuda:{logical}."
                ).format(value=value, logical=logical)
            )
        raise ValueError(
            _(
                "CUDA_VISIBLE_DEVICES={value!r} makes {count} GPU(s) visible: "
                "cuda:0 to cuda:{last}; there is no cuda:{logical}."
            ).format(value=value, count=len(mapping), last=len(mapping) - 1, logical=logical)
        )
    return mapping[logical]


def mapping_lines(value: str | None, inventory: Inventory) -> list[str]:
    """Readable lines `cuda:k -> physical GPU i (name, bus id, free memory)` for `value`."""
    mapping = logical_to_physical(value, inventory)
    if not mapping:
        return [_("no GPU is visible: torch.cuda.device_count() == 0, PyTorch runs on the CPU")]
    lines = []
    for logical, physical in mapping.items():
        gpu = inventory.gpus[physical]
        free = (
            _("free memory unknown")
            if gpu.memory_free is None
            else _("{mib} MiB free").format(mib=gpu.memory_free // MIB)
        )
        lines.append(
            _("cuda:{logical} -> physical GPU {physical} ({name}, bus {bus}, {free})").format(
                logical=logical, physical=physical, name=gpu.name, bus=gpu.pci_bus_id, free=free
            )
        )
    return lines


def choose_by_free_memory(inventory: Inventory, n: int) -> list[int]:
    """The `n` physical GPUs with most free memory, freest first; ties go to the lower index.

    Freest first means `cuda:0`, where PyTorch puts things by default, is the emptiest GPU.
    `n` may be any integer type (`numpy.int64` too). GPUs whose memory NVML could not read
    (a lost GPU, no permission) are never chosen.
    """
    _check(None, inventory)
    n = whole_number(n, _("n, the number of GPUs to choose,"))
    count = len(inventory.gpus)
    if count == 0:
        raise ValueError(
            _("the inventory has no GPU to choose from; run on the CPU or use demo_inventory().")
        )
    known = [gpu for gpu in inventory.gpus if gpu.memory_free is not None]
    unknown = [gpu.index for gpu in inventory.gpus if gpu.memory_free is None]
    if not 1 <= n <= len(known):
        skipped = (
            _(", {known} of them with known free memory (not GPUs {unknown})").format(
                known=len(known), unknown=unknown
            )
            if unknown
            else ""
        )
        raise ValueError(
            _(
                "cannot choose {n} GPU(s): the inventory has {count}{skipped}; choose between 1 and {known}."
            ).format(n=n, count=count, skipped=skipped, known=len(known))
            if known
            else _(
                "cannot choose {n} GPU(s): NVML could not read the memory of any of the {count} GPUs "
                "(see smi_table for why)."
            ).format(n=n, count=count)
        )
    ranked = sorted(known, key=lambda gpu: (-(gpu.memory_free or 0), gpu.index))
    return [gpu.index for gpu in ranked[:n]]


def visible_devices_value(indices: Sequence[int]) -> str:
    """The `CUDA_VISIBLE_DEVICES` value for physical `indices` in logical order: [3, 6] -> "3,6".

    Each index is a whole number, at least 0, named once; [] gives "" (no GPU visible).
    """
    if isinstance(indices, str | bytes | AbstractSet | Mapping) or not isinstance(indices, Iterable):
        raise TypeError(
            _(
                "indices is a list of physical GPU numbers such as [3, 6], not {indices!r}; "
                "a value that is already text needs no conversion."
            ).format(indices=indices)
        )
    indices = list(indices)  # an iterator is read once, and named whole in the errors below
    numbers: list[int] = []
    for item in indices:
        index = whole_number(item, _("each GPU index"))
        if index < 0:
            raise ValueError(
                _(
                    "GPU index {index} in {indices!r} is negative; physical GPUs are numbered from 0 "
                    "(for no GPU at all, pass [])."
                ).format(index=index, indices=list(indices))
            )
        if index in numbers:
            raise ValueError(
                _("GPU {index} comes twice in {indices!r}; name each GPU once.").format(
                    index=index, indices=list(indices)
                )
            )
        numbers.append(index)
    return ",".join(map(str, numbers))


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
        shown = _("unset") if self.raw is None else f"{self.raw!r}"
        if self.matches_nvidia_smi:
            return _(
                "CUDA_DEVICE_ORDER is {shown}: CUDA numbers GPUs by PCI bus id, like nvidia-smi and "
                "NVML, so CUDA_VISIBLE_DEVICES=2 is the GPU nvidia-smi calls 2."
            ).format(shown=shown)
        note = "" if self.raw in (None, "FASTEST_FIRST") else _(" (an unknown value counts as the default)")
        return _(
            "CUDA_DEVICE_ORDER is {shown}{note}: CUDA numbers GPUs fastest first, so on a machine "
            "with different GPU models CUDA_VISIBLE_DEVICES=0 may be another GPU than nvidia-smi's 0. "
            "Set CUDA_DEVICE_ORDER=PCI_BUS_ID (or use UUIDs) to make the numbers agree."
        ).format(shown=shown, note=note)


def device_order(environ: Mapping[str, str] | None = None) -> DeviceOrder:
    """The device order in force for CUDA started with `environ` (default: this process's environment)."""
    if environ is not None and not isinstance(environ, Mapping):
        raise TypeError(
            _(
                "environ is a dict-like environment such as os.environ (None: this one), not {environ!r}"
            ).format(environ=environ)
        )
    env = os.environ if environ is None else environ
    raw = env.get(ORDER_VAR)
    order = "PCI_BUS_ID" if raw == "PCI_BUS_ID" else "FASTEST_FIRST"
    return DeviceOrder(order=order, raw=raw)


def script_header(value: str) -> str:
    """The lines to put at the very top of a script, before `import torch`, to select GPUs `value`."""
    _check_written(value)
    return "\n".join(
        [
            "import os",
            "",
            "# " + _("Before anything touches CUDA (best: before importing torch)."),
            'os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # ' + _("number GPUs as nvidia-smi does"),
            f'os.environ["CUDA_VISIBLE_DEVICES"] = "{value}"  # '
            + _("assign: setdefault would keep an old value"),
            "",
            "import torch",
        ]
    )


def _cuda_initialized() -> bool:
    """Whether PyTorch has initialised CUDA in this process (False when torch was never imported)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def shell_command(value: str, script: str = "train.py") -> str:
    """The shell line that runs `script` with GPUs `value`, numbered as nvidia-smi numbers them.

    Every part is quoted by the shell's rules, so a file name such as `x.py; rm -rf ~` stays one argument.
    """
    _check_written(value)
    if not isinstance(script, str) or not script or not script.isprintable():
        raise TypeError(
            _("script must be the script's file name, such as 'train.py', not {script!r}").format(
                script=script
            )
        )
    variable = f"CUDA_VISIBLE_DEVICES={shlex.quote(value)}"  # '' written out: the empty value hides every GPU
    return f"CUDA_DEVICE_ORDER=PCI_BUS_ID {variable} python {shlex.quote(script)}"


TOO_LATE = N_(
    "CUDA is already initialised in this process, so it has read CUDA_VISIBLE_DEVICES and will "
    "never read it again: setting it now to {value!r} would silently change nothing. Set it before "
    "the first CUDA call (at the top of the script, or in the shell: {command}), or run the work in "
    "a new process with run_python(code, env={{'CUDA_VISIBLE_DEVICES': {value!r}}})."
)
DRIVER_STARTED = N_(
    "the CUDA driver has already started in this process (cuInit ran, e.g. in "
    "torch.cuda.is_available(), although torch.cuda.is_initialized() is still False), so it has read "
    "CUDA_VISIBLE_DEVICES and will never read it again: setting it now to {value!r} would silently "
    "change nothing. Set it before the first CUDA call (at the top of the script, or in the shell: "
    "{command}), or run the work in a new process with "
    "run_python(code, env={{'CUDA_VISIBLE_DEVICES': {value!r}}})."
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

    Raises RuntimeError when it is too late: CUDA reads the variable once, when it starts.
    By default it looks at this process: `torch.cuda.is_initialized()`, and on Linux also
    whether the CUDA driver itself has started (`cuda_driver_started`), which catches
    `torch.cuda.is_available()`: it starts the driver without making PyTorch "initialised".
    Elsewhere only the first check runs, so the safe rule stays "before any torch.cuda call".
    `cuda_initialized=True/False` replaces both checks with the caller's word. Assigns rather
    than `os.environ.setdefault`, which does nothing when the variable is already set (seed
    002's bug). With an inventory the value is checked strictly first (ValueError). Returns
    the previous value (None when it was unset) so that the caller can see what it replaced.
    Text that no GPU id holds (a quote, a backslash, a control character) is a ValueError.
    """
    _check_written(value)
    if environ is not None and not isinstance(environ, MutableMapping):
        raise TypeError(
            _(
                "environ is a dict-like environment to set the variable in (None: os.environ), "
                "not {environ!r}"
            ).format(environ=environ)
        )
    if not (cuda_initialized is None or isinstance(cuda_initialized, bool)):
        raise TypeError(
            _(
                "cuda_initialized is None (look at this process), True or False, not {cuda_initialized!r}"
            ).format(cuda_initialized=cuda_initialized)
        )
    if not isinstance(pci_bus_order, bool):
        raise TypeError(
            _("pci_bus_order is True or False, not {pci_bus_order!r}").format(pci_bus_order=pci_bus_order)
        )
    env = os.environ if environ is None else environ
    if inventory is not None:
        parse_visible_devices(value, inventory)
    command = shell_command(value)
    if cuda_initialized is None:
        if _cuda_initialized():
            raise RuntimeError(translated(TOO_LATE).format(value=value, command=command))
        if cuda_driver_started():
            raise RuntimeError(translated(DRIVER_STARTED).format(value=value, command=command))
    elif cuda_initialized:
        raise RuntimeError(translated(TOO_LATE).format(value=value, command=command))
    previous = env.get(VAR)
    env[VAR] = value
    if pci_bus_order:
        env[ORDER_VAR] = "PCI_BUS_ID"
    return previous
