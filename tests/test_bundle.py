"""`course.py bundle` (scripts/bundle.py) without the network: the arguments it refuses, the file it never
replaces, the platform tags it hands pip, the archive's layout. A real bundle, built and installed
offline: tests/test_wheel_install.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import bundle
import pytest


def test_a_file_the_command_did_not_write_is_never_replaced(tmp_path, capsys):
    mine = tmp_path / "mine.zip"
    with zipfile.ZipFile(mine, "w") as archive:  # a zip of the user's, even one with a README
        archive.writestr("notes/README.txt", "mine")
    before = mine.read_bytes()
    assert bundle.main(["--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"--out {mine}: that file exists and is not a bundle" in err and "Traceback" not in err
    assert mine.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--out", "x.tar.gz"], "--out x.tar.gz: the bundle is a .zip archive"),
        (["--platform", "Linux x86"], "--platform 'Linux x86' is not a platform tag"),
        (["--python", "3.10"], "--python '3.10': give a Python of the course, 3.11 or newer"),
        (["--python", "three"], "--python 'three'"),
    ],
)
def test_bad_arguments_are_named_before_anything_is_built(args, said, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bundle, "build_course_wheel", lambda *a: pytest.fail("built on bad input"))
    assert bundle.main(args) == 2
    assert said in capsys.readouterr().err


def test_the_archive_holds_the_wheels_a_readme_and_its_mark_and_may_be_rewritten(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for name in ("pytorch_on_gpus_hands_on-0.1.0-py3-none-any.whl", "torch-2.13.0+cpu-cp311-x.whl"):
        (wheelhouse / name).write_bytes(b"wheel")
    out = tmp_path / "out" / "course.zip"
    bundle.write_archive(out, wheelhouse, "manylinux_2_28_x86_64", "3.12")
    meta = bundle.project()
    top = f"{meta['name']}-{meta['version']}"
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        readme = archive.read(f"{top}/README.txt").decode()
        record = json.loads(archive.read(f"{top}/{bundle.BUNDLE_FILE}"))
    assert {f"{top}/wheelhouse/{p.name}" for p in wheelhouse.iterdir()} <= names
    assert f'PIP_NO_INDEX=1 PIP_FIND_LINKS=wheelhouse pip install "{meta["name"]}[lab]"' in readme
    assert "PyTorch 2.13.0+cpu" in readme and "Python 3.12 on manylinux_2_28_x86_64" in readme
    assert record == {
        "course": meta["name"],
        "version": meta["version"],
        "platform": "manylinux_2_28_x86_64",
        "python": "3.12",
    }
    assert bundle.is_bundle(out) and list(out.parent.iterdir()) == [out]  # no partial file left
    bundle.check_arguments(out, "manylinux_2_28_x86_64", "3.11")  # its own bundle: replaced, not refused


def test_a_manylinux_tag_brings_every_older_glibcs_and_other_tags_stay_as_given():
    tags = bundle.platform_tags("manylinux_2_28_aarch64")
    assert tags[0] == "manylinux_2_28_aarch64" and tags[-1] == "manylinux1_aarch64"
    assert {"manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux2010_aarch64"} <= set(tags)
    assert "manylinux_2_29_aarch64" not in tags and len(tags) == len(set(tags))
    assert bundle.platform_tags("win_amd64") == ["win_amd64"]


def test_the_wheel_is_built_from_a_clean_copy_with_the_chinese_workers_as_files(tmp_path):
    copy = bundle.copy_build_inputs(tmp_path / "copy")
    worker = copy / "notebooks" / "zh-CN" / "workers" / "who_am_i.py"
    assert (
        not worker.is_symlink()
        and worker.read_bytes()
        == (Path(bundle.ROOT) / "translations" / "zh-CN" / "workers" / "who_am_i.py").read_bytes()
    )
    assert not list(copy.rglob("__pycache__")) and not list(copy.rglob("*.egg-info"))
