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
import pickle
import types
import zipfile
from pathlib import Path
from typing import Any

import torch

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


def save_with_location(obj: object, path: str | Path, location: str | torch.device = "cuda:0") -> Path:
    """Save `obj` with `torch.save`, recording `location` as the device of every storage.

    The result is what `torch.save` writes on a machine whose tensors live on `location`
    (default `cuda:0`, a GPU machine): loading it without `map_location` where that device is
    missing raises PyTorch's own "Attempting to deserialize object on a CUDA device" error.
    The tensors' values are saved from wherever they are now. Returns the path written.
    """
    try:
        device = torch.device(location)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"location must name a device such as 'cuda:0' or 'cpu', got {location!r}") from err
    if device.type != "cpu" and device.index is None:
        device = torch.device(device.type, 0)  # torch.save always writes an index for devices
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot save to {path}: the folder {path.parent} does not exist; create it first"
        )
    torch.save(obj, path, pickle_module=_retagging_pickle_module(str(device)))
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


def storage_locations(path: str | Path) -> list[str]:
    """The location tag of every storage in a checkpoint file, in the order they were saved.

    Reads the pickle inside the zip archive that `torch.save` writes, with every class and
    function it names replaced by an inert stand-in: nothing in the file is imported or run,
    so this is safe on a checkpoint from anyone. A storage shared by several tensors counts once.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}: check the file name and folder")
    if not path.is_file():
        raise IsADirectoryError(f"{path} is a folder, not a checkpoint file")
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path.name} is not a PyTorch checkpoint: torch.save writes a zip archive and this file "
            "is not one (a checkpoint in the legacy pre-1.6 format can be loaded with torch.load "
            "and saved again)"
        )
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pickles:
            raise ValueError(
                f"{path.name} is a zip archive but not a PyTorch checkpoint: it has no data.pkl record"
            )
        data = archive.read(pickles[0])
    reader = _TagReader(data)
    try:
        reader.load()
    except Exception as err:
        raise ValueError(f"{path.name} looks like a checkpoint but its data.pkl is damaged: {err}") from err
    return list(reader.tags.values())


class PrintOnLoad:
    """An object that, when unpickled, calls `print(message)`: harmless, but it is code running.

    A pickle may name any function to call while loading; this one names `print`. A real attack
    names `os.system` or similar instead. Used to show why `torch.load(weights_only=True)`
    refuses objects it does not know.
    """

    def __init__(self, message: str) -> None:
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
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot save to {path}: the folder {path.parent} does not exist; create it first"
        )
    torch.save({"weight": torch.zeros(2, 2), "extra": PrintOnLoad(message)}, path)
    return path
