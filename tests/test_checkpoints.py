"""Checkpoints tagged for a GPU, the safe tag reader, and the harmless untrusted file."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import zipfile

import pytest
import torch
from torch import nn

from course_utils import checkpoints
from course_utils.checkpoints import save_untrusted_example, save_with_location, storage_locations


@pytest.fixture
def state():
    torch.manual_seed(0)
    return nn.Linear(3, 2).state_dict()


def test_plain_torch_save_is_tagged_cpu(tmp_path, state):
    torch.save(state, tmp_path / "plain.pt")
    assert storage_locations(tmp_path / "plain.pt") == ["cpu", "cpu"]


def test_save_with_location_tags_every_storage(tmp_path, state):
    path = save_with_location(state, tmp_path / "gpu.pt")
    assert path == tmp_path / "gpu.pt"
    assert storage_locations(path) == ["cuda:0", "cuda:0"]
    save_with_location(state, tmp_path / "gpu1.pt", torch.device("cuda", 1))
    assert storage_locations(tmp_path / "gpu1.pt") == ["cuda:1", "cuda:1"]


def test_a_device_without_index_is_tagged_with_index_zero(tmp_path, state):
    save_with_location(state, tmp_path / "gpu.pt", "cuda")
    assert storage_locations(tmp_path / "gpu.pt") == ["cuda:0", "cuda:0"]


@pytest.mark.parametrize(
    ("location", "tag"),
    [
        ("cpu", "cpu"),
        ("cpu:0", "cpu"),
        ("mps", "mps"),
        ("mps:0", "mps"),
        ("meta", "meta"),
        ("meta:0", "meta"),
    ],
)
def test_cpu_mps_and_meta_are_tagged_without_an_index_as_torch_save_does(tmp_path, state, location, tag):
    """torch.save's own taggers (`_cpu_tag`, `_mps_tag`, `_meta_tag`) write bare device names."""
    path = save_with_location(state, tmp_path / "x.pt", location)
    assert storage_locations(path) == [tag, tag]


def test_tags_are_torch_saves_own_tags_for_real_storages(tmp_path):
    """torch.save tags each storage with `torch.serialization.location_tag(storage)`."""
    for location in ("cpu", "cpu:0", "meta", "meta:0"):
        real = torch.ones(2, device=location).untyped_storage()
        save_with_location({"w": torch.ones(2)}, tmp_path / "retagged.pt", location)
        assert storage_locations(tmp_path / "retagged.pt") == [torch.serialization.location_tag(real)]


def test_files_tagged_cpu_and_meta_load_where_torch_puts_them(tmp_path, state):
    """A tag torch.save never writes ('cpu:0') would make torch.load fail to restore the storage."""
    loaded = torch.load(save_with_location(state, tmp_path / "cpu.pt", "cpu:0"))
    assert all(torch.equal(loaded[k], state[k]) for k in state)
    loaded = torch.load(save_with_location(state, tmp_path / "meta.pt", "meta:0"))
    assert {str(v.device) for v in loaded.values()} == {"meta"}


def test_save_with_location_rejects_devices_torch_save_cannot_tag(tmp_path, state):
    with pytest.raises(ValueError, match=r"cannot record a location for xla devices.*such as 'cuda:0'"):
        save_with_location(state, tmp_path / "x.pt", "xla:0")
    assert not (tmp_path / "x.pt").exists()


def test_save_with_location_checks_the_tags_it_wrote(tmp_path, state, monkeypatch):
    monkeypatch.setattr(checkpoints, "_retagging_pickle_module", lambda location: pickle)
    with pytest.raises(RuntimeError, match=r"recorded \['cpu'\] instead of 'cuda:0'"):
        save_with_location(state, tmp_path / "x.pt")
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error is what a machine without CUDA raises")
def test_torch_load_raises_its_own_cuda_error_and_map_location_fixes_it(tmp_path, state):
    path = save_with_location(state, tmp_path / "gpu.pt")
    with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
        torch.load(path)
    loaded = torch.load(path, map_location="cpu")
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_shared_storage_is_listed_once(tmp_path):
    base = torch.arange(6.0)
    torch.save({"a": base, "view": base[2:], "other": torch.ones(1)}, tmp_path / "shared.pt")
    assert storage_locations(tmp_path / "shared.pt") == ["cpu", "cpu"]


def test_save_with_location_rejects_bad_input(tmp_path, state):
    with pytest.raises(ValueError, match="location must name a device"):
        save_with_location(state, tmp_path / "x.pt", "gpu zero")
    with pytest.raises(FileNotFoundError, match="does not exist; create it first"):
        save_with_location(state, tmp_path / "missing" / "x.pt")


def test_storage_locations_says_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        storage_locations(tmp_path / "nope.pt")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        storage_locations(tmp_path)
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match=r"notes\.txt is not a zip-format PyTorch checkpoint.*nor a legacy"):
        storage_locations(tmp_path / "notes.txt")
    torch.save({"w": torch.ones(2)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match=r"old\.pt is a legacy PyTorch checkpoint.*load it with torch\.load"):
        storage_locations(tmp_path / "old.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="nor a legacy one"):
        storage_locations(tmp_path / "empty.pt")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as archive:
        archive.writestr("other/readme.txt", "hello")
    with pytest.raises(ValueError, match="zip archive but not a PyTorch checkpoint"):
        storage_locations(tmp_path / "other.zip")
    with zipfile.ZipFile(tmp_path / "broken.pt", "w") as archive:
        archive.writestr("broken/data.pkl", b"\x80\x02garbage")
    with pytest.raises(ValueError, match=r"data\.pkl is damaged"):
        storage_locations(tmp_path / "broken.pt")


def test_storage_locations_runs_nothing_from_the_file(tmp_path, capsys):
    path = save_untrusted_example(tmp_path / "stranger.pt", "code ran")
    assert storage_locations(path) == ["cpu"]
    assert capsys.readouterr().out == ""


def test_untrusted_example_is_refused_by_default_and_runs_code_otherwise(tmp_path, capsys):
    path = save_untrusted_example(tmp_path / "stranger.pt", "code ran")
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL print was not an allowed global"):
        torch.load(path)
    assert capsys.readouterr().out == ""
    loaded = torch.load(path, weights_only=False)
    assert capsys.readouterr().out == "code ran\n"
    assert torch.equal(loaded["weight"], torch.zeros(2, 2))
    with pytest.raises(FileNotFoundError, match="create it first"):
        save_untrusted_example(tmp_path / "missing" / "x.pt")


def test_save_with_location_to_a_folder_says_to_name_a_file(tmp_path, state):
    with pytest.raises(IsADirectoryError, match=r"it is a folder; name a file in it, such as .*model\.pt"):
        save_with_location(state, tmp_path)
    with pytest.raises(IsADirectoryError, match="it is a folder"):
        save_untrusted_example(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("path", "error", "match"),
    [
        (
            None,
            TypeError,
            r"path must be the path of a file or folder \(a str or a Path\) such as 'model\.pt'",
        ),
        (3, TypeError, "path must be the path of a file or folder"),
        ("", ValueError, "path is empty; pass text such as 'model.pt'"),
        ("x\0.pt", ValueError, r"path holds a NUL character \('\\0'\)"),
    ],
)
def test_a_path_that_is_not_a_file_name_is_refused(path, error, match, state):
    with pytest.raises(error, match=match):
        save_with_location(state, path)
    with pytest.raises(error, match=match):
        storage_locations(path)


def test_an_object_that_cannot_be_pickled_leaves_no_file_and_keeps_the_old_one(tmp_path, state):
    path = save_with_location(state, tmp_path / "x.pt")
    before = path.read_bytes()
    cannot = r"obj cannot be saved: torch\.save pickles it, and pickle says: .*nothing was written to"
    with pytest.raises(TypeError, match=cannot):
        save_with_location({"weight": torch.zeros(2), "fn": lambda: 0}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"], "no partial file is left behind"
    with pytest.raises(TypeError, match=cannot):
        save_with_location({"lock": threading.Lock()}, tmp_path / "new.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]


def test_a_path_with_a_nul_character_is_refused_before_anything_is_written(tmp_path, state):
    with pytest.raises(ValueError, match="holds a NUL character"):
        save_with_location(state, f"{tmp_path}/x\0.pt")
    assert list(tmp_path.iterdir()) == []


def test_untrusted_example_needs_text_to_print(tmp_path):
    with pytest.raises(TypeError, match="message is the text to print when loaded, a str"):
        save_untrusted_example(tmp_path / "x.pt", message=3)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_explained_in_chinese_where_the_notebook_asks(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match=r"文件夹 .* 不存在；请先创建它$"):
        save_with_location({}, missing / "x.pt")
    with pytest.raises(FileNotFoundError, match=r"处没有检查点：请检查文件名和文件夹$"):
        storage_locations(missing / "x.pt")


def test_the_next_save_removes_what_a_killed_save_left_and_only_that(tmp_path, state):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # a process that no longer exists, as a save killed outright would be
    left = tmp_path / f".model.pt.{ended.pid}.partial"
    living = [tmp_path / f".other.pt.{os.getpid()}.partial", tmp_path / ".x.pt.1.partial"]
    unrelated = [tmp_path / f"notes.{ended.pid}.partial", tmp_path / f".notes.{ended.pid}.txt"]
    for path in [left, *living, *unrelated]:
        path.write_bytes(b"half a checkpoint")
    save_with_location(state, tmp_path / "x.pt", "cpu")
    assert not left.exists() and all(p.exists() for p in [*living, *unrelated])
