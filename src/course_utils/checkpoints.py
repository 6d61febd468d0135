"""Checkpoints as the course needs them: tagged for a GPU you lack, read safely, and a harmless trap.

`torch.save` records, for every storage it writes, a *location tag*: the device the storage
lived on (`"cpu"`, `"cuda:0"`, ...). `torch.load` uses that tag to put the storage back on
the same device, which is why a checkpoint written on a GPU machine fails to load on a
CPU-only one unless `map_location` says where to put it instead.

Notebook 03 needs such a GPU-written checkpoint on any machine. `save_with_location` writes it
with `torch.save` itself, through torch.save's own `pickle_module` argument: the only change
is the location tag torch.save records; the file format, the tensor bytes and the error
`torch.load` raises are PyTorch's own. `storage_locations` lists the tags of any checkpoint
without unpickling anything, so it is safe on files from strangers.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from course_utils._checks import path as checked_path
from course_utils.i18n import _

__all__ = ["PrintOnLoad", "save_untrusted_example", "save_with_location", "storage_locations"]


def _retagging_pickle_module(location: str) -> types.ModuleType:
    """A pickle module for torch.save whose Pickler records `location` as every storage's tag.

    torch.save subclasses `pickle_module.Pickler` and defines `persistent_id` on the subclass,
    returning `("storage", storage_type, key, location, numel)` for each storage; the base
    class below wraps that method and replaces only the `location` field.
    """

    class RetaggingPickler(pickle.Pickler):
        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            torch_persistent_id = cls.__dict__.get("persistent_id")
            if torch_persistent_id is None:
                return

            def persistent_id(self: pickle.Pickler, obj: object) -> object:
                pid = torch_persistent_id(self, obj)
                if isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage":
                    return (*pid[:3], location, pid[4])
                return pid

            cls.persistent_id = persistent_id

    module = types.ModuleType("course_utils_retagging_pickle")
    module.Pickler = RetaggingPickler  # type: ignore[attr-defined]
    return module


def _torch_location_tag(device: torch.device) -> str:
    """The location tag `torch.save` records for a storage on `device`, from torch's own taggers.

    torch.save asks `torch.serialization.location_tag(storage)`, whose registered taggers read
    only `storage.device`; a stand-in with that attribute gets exactly torch's answer: bare
    names for the CPU, MPS and meta (`"cpu"`, `"mps"`, `"meta"`), `"type:index"` for CUDA,
    XPU, HPU, MTIA and the like. Storages on such devices always carry an index, so a device
    given without one is taken as index 0.
    """
    if device.index is None and device.type not in ("cpu", "mps", "meta"):
        device = torch.device(device.type, 0)
    try:
        return torch.serialization.location_tag(types.SimpleNamespace(device=device))  # type: ignore[arg-type]
    except (RuntimeError, AttributeError, TypeError) as err:
        raise ValueError(
            _(
                "torch.save cannot record a location for {device_type} devices in this PyTorch; pass a "
                "device it can tag, such as 'cuda:0', 'cuda:1', 'cpu', 'mps' or 'meta'"
            ).format(device_type=device.type)
        ) from err


def _save_target(path: object) -> Path:
    """`path` as a Path to a file that can be written: a str or Path, not a folder, in an existing folder."""
    path = Path(checked_path("path", path, "'model.pt'"))
    if path.is_dir():
        raise IsADirectoryError(
            _("cannot save to {path}: it is a folder; name a file in it, such as {example}").format(
                path=path, example=path / "model.pt"
            )
        )
    if not path.parent.is_dir():
        raise FileNotFoundError(
            _("cannot save to {path}: the folder {folder} does not exist; create it first").format(
                path=path, folder=path.parent
            )
        )
    return path


_PARTIAL = re.compile(r"^\..+\.(?P<pid>[0-9]+)\.partial$")  # .NAME.PID.partial, as _write_whole names them


def _alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_partials(folder: Path) -> None:
    """Remove the temporary files that saves killed outright (SIGKILL, out of memory) left in
    `folder`: those whose writing process no longer exists on this machine (the course's saves
    run on one machine; a folder that other machines write into at the same time is not for this)."""
    for entry in folder.iterdir():
        match = _PARTIAL.match(entry.name)
        if match and not _alive(int(match["pid"])):
            entry.unlink(missing_ok=True)


def _write_whole(path: Path, write: Callable[[Path], None]) -> None:
    """Run `write` on a temporary file beside `path`, then move it into place: never a partial file.

    If `write` raises (an object that cannot be pickled, a full disk), the temporary file is
    removed and whatever `path` held before stays as it was. A save killed outright cannot remove
    its own: the next save into the folder removes those of processes that no longer exist.
    """
    _remove_stale_partials(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")  # created as any new file is
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def save_with_location(obj: object, path: str | Path, location: str | torch.device = "cuda:0") -> Path:
    """Save `obj` with `torch.save`, recording `location` as the device of every storage.

    The result is what `torch.save` writes on a machine whose tensors live on `location`
    (default `cuda:0`, a GPU machine): loading it without `map_location` where that device is
    missing raises PyTorch's own "Attempting to deserialize object on a CUDA device" error.
    The tag written is the one torch.save itself would write for that device: `"cuda"` means
    `"cuda:0"`, while the CPU, MPS and meta are tagged without an index (`"cpu:0"` gives
    `"cpu"`), as torch.save tags them. The tags are read back from the file to check them.
    The tensors' values are saved from wherever they are now. Returns the path written.
    """
    try:
        device = torch.device(location)
    except (RuntimeError, TypeError, ValueError) as err:  # ValueError: an index too big for a C long
        raise ValueError(
            _("location must name a device such as 'cuda:0' or 'cpu', got {location!r}").format(
                location=location
            )
        ) from err
    tag = _torch_location_tag(device)
    path = _save_target(path)

    def write(temporary: Path) -> None:
        try:
            torch.save(obj, temporary, pickle_module=_retagging_pickle_module(tag))
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise TypeError(
                _(
                    "obj cannot be saved: torch.save pickles it, and pickle says: {err}. Save tensors, "
                    "state_dict()s and plain containers of them, not lambdas, functions defined inside "
                    "other functions, open files or locks; nothing was written to {path}"
                ).format(err=err, path=path)
            ) from err
        written = set(storage_locations(temporary))
        if written - {tag}:
            raise RuntimeError(
                f"torch.save recorded {sorted(written)} instead of {tag!r}: this PyTorch's torch.save "
                f"no longer lets course_utils change the tag; nothing was written to {path}"
            )

    _write_whole(path, write)
    return path


class _Anything:
    """Stands in for every class and function a checkpoint's pickle names; absorbs all it is given."""

    def __new__(cls, *args: object, **kwargs: object) -> _Anything:
        return object.__new__(cls)

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __setstate__(self, state: object) -> None:
        pass

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def append(self, item: object) -> None:
        """Absorb a list append."""

    def extend(self, items: object) -> None:
        """Absorb a list extend."""


class _TagReader(pickle.Unpickler):
    """Reads a checkpoint's data.pkl without importing or calling anything from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.tags: dict[str, str] = {}

    def find_class(self, module: str, name: str) -> type:
        return _Anything

    def persistent_load(self, pid: object) -> object:
        if isinstance(pid, tuple) and len(pid) >= 4 and pid[0] == "storage":
            key, location = pid[2], pid[3]
            location = location.decode("ascii") if isinstance(location, bytes) else str(location)
            self.tags.setdefault(str(key), location)
        return _Anything()


class _NoGlobals(pickle.Unpickler):
    """Unpickles plain data only: any class or function the pickle names is refused."""

    def find_class(self, module: str, name: str) -> type:
        raise pickle.UnpicklingError(f"refusing to import {module}.{name}")


def _is_legacy_checkpoint(path: Path) -> bool:
    """Whether `path` starts as torch.save's legacy (pre-1.6) format does: with its magic number."""
    with path.open("rb") as file:
        try:
            first = _NoGlobals(file).load()
        except Exception:  # anything unreadable is simply not a legacy checkpoint
            return False
    return isinstance(first, int) and first == torch.serialization.MAGIC_NUMBER


def storage_locations(path: str | Path) -> list[str]:
    """The location tag of every storage in a checkpoint file, in the order they were saved.

    Reads the pickle inside the zip archive that `torch.save` writes (since PyTorch 1.6), with
    every class and function it names replaced by an inert stand-in: nothing in the file is
    imported or run, so this is safe on a checkpoint from anyone. A storage shared by several
    tensors counts once. A legacy (pre-1.6) checkpoint is refused with a ValueError that says
    how to convert it.
    """
    path = Path(checked_path("path", path, "'model.pt'"))
    if not path.exists():
        raise FileNotFoundError(
            _("no checkpoint at {path}: check the file name and folder").format(path=path)
        )
    if not path.is_file():
        raise IsADirectoryError(_("{path} is a folder, not a checkpoint file").format(path=path))
    if not zipfile.is_zipfile(path):
        if _is_legacy_checkpoint(path):
            raise ValueError(
                _(
                    "{name} is a legacy PyTorch checkpoint (the format torch.save wrote before "
                    "PyTorch 1.6), not the zip format that storage_locations reads: load it with "
                    "torch.load (with map_location if it was saved on a device you lack) and torch.save "
                    "it again to convert it"
                ).format(name=path.name)
            )
        raise ValueError(
            _(
                "{name} is not a zip-format PyTorch checkpoint (what torch.save writes since "
                "PyTorch 1.6), nor a legacy one: check that this is the file you meant"
            ).format(name=path.name)
        )
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pickles:
            raise ValueError(
                _("{name} is a zip archive but not a PyTorch checkpoint: it has no data.pkl record").format(
                    name=path.name
                )
            )
        data = archive.read(pickles[0])
    reader = _TagReader(data)
    try:
        reader.load()
    except Exception as err:
        raise ValueError(
            _("{name} looks like a checkpoint but its data.pkl is damaged: {err}").format(
                name=path.name, err=err
            )
        ) from err
    return list(reader.tags.values())


class PrintOnLoad:
    """An object that, when unpickled, calls `print(message)`: harmless, but it is code running.

    A pickle may name any function to call while loading; this one names `print`. A real attack
    names `os.system` or similar instead. Used to show why `torch.load(weights_only=True)`
    refuses objects it does not know.
    """

    def __init__(self, message: str) -> None:
        if not isinstance(message, str):
            raise TypeError(
                _("message is the text to print when loaded, a str, not {message!r}").format(message=message)
            )
        self.message = message

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, (self.message,))


def save_untrusted_example(
    path: str | Path, message: str = "This line was printed by the checkpoint."
) -> Path:
    """Save a checkpoint with weights and a `PrintOnLoad`: a stand-in for a stranger's file.

    Loading it with `weights_only=False` runs `print(message)`; with `weights_only=True`
    (the default since PyTorch 2.6) torch.load refuses it. Returns the path written.
    """
    path = _save_target(path)
    checkpoint = {"weight": torch.zeros(2, 2), "extra": PrintOnLoad(message)}
    _write_whole(path, lambda temporary: torch.save(checkpoint, temporary))
    return path
