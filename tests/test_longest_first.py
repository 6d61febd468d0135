from dataclasses import dataclass

import longest_first
import pytest


@dataclass
class Item:
    nodeid: str


def ids(items):
    return [item.nodeid for item in items]


def test_the_longest_file_goes_first_and_each_file_keeps_its_order():
    items = [Item(n) for n in ("a.py::t1", "a.py::t2", "nb.ipynb::Cell 0", "nb.ipynb::Cell 1", "b.py::t[x]")]
    ordered = longest_first.longest_first(items, {"a.py": 1.0, "nb.ipynb": 9.0, "b.py": 3.0})
    assert ids(ordered) == ["nb.ipynb::Cell 0", "nb.ipynb::Cell 1", "b.py::t[x]", "a.py::t1", "a.py::t2"]


def test_a_file_never_measured_goes_before_every_measured_one():
    items = [Item("old.py::t"), Item("new.py::t"), Item("older.py::t")]
    ordered = longest_first.longest_first(items, {"old.py": 5.0, "older.py": 50.0})
    assert ids(ordered) == ["new.py::t", "older.py::t", "old.py::t"]


def test_without_figures_the_collection_order_stays():
    items = [Item("b.py::t"), Item("a.py::t")]
    assert ids(longest_first.longest_first(items, {})) == ["b.py::t", "a.py::t"]


def test_stored_durations_add_up_a_files_phases_and_keep_files_that_did_not_run(tmp_path):
    reports = [("a.py::t1", 0.25), ("a.py::t1", 1.0), ("a.py::t2[x::y]", 0.5), ("nb.ipynb::Cell 0", 2.0)]
    merged = longest_first.add_durations({"gone.py": 4.0, "a.py": 99.0}, reports)
    assert merged == {"a.py": 1.8, "gone.py": 4.0, "nb.ipynb": 2.0}
    path = tmp_path / "seconds.json"
    longest_first.write_seconds(merged, path)
    assert longest_first.read_seconds(path) == merged
    assert longest_first.read_seconds(tmp_path / "missing.json") == {}


def test_the_stored_figures_are_seconds_of_files_that_exist():
    seconds = longest_first.read_seconds()
    assert seconds, "tests/scope_seconds.json is missing: run `python3 course.py test --store-durations`"
    root = longest_first.SCOPE_SECONDS.parent.parent
    assert all((root / name).is_file() and value >= 0 for name, value in seconds.items())


@pytest.mark.parametrize("nodeid", ["tests/test_x.py::test_y[a::b]", "tests/test_x.py::Class::test_y"])
def test_a_tests_file_is_what_comes_before_the_first_double_colon(nodeid):
    assert longest_first.scope(nodeid) == "tests/test_x.py"
