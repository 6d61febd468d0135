"""The demo fleet: a made-up 8-GPU server, labelled as such, with the shape the lessons rely on."""

from __future__ import annotations

from course_utils.gpus import MIB, demo_inventory, smi_table


def test_demo_fleet_is_eight_labelled_gpus_with_unique_ids():
    inv = demo_inventory()
    assert inv.source == "demo" and len(inv) == 8
    assert [g.index for g in inv.gpus] == list(range(8))
    assert len({g.uuid for g in inv.gpus}) == 8 and len({g.pci_bus_id for g in inv.gpus}) == 8
    assert all(g.uuid.startswith("GPU-") and len(g.uuid) == 40 for g in inv.gpus)
    assert all("DEMO" in g.name for g in inv.gpus)
    # each GPU's UUID differs in its first hex digit, so "GPU-<i>" is a unique prefix
    assert all(g.uuid.startswith(f"GPU-{g.index}") for g in inv.gpus)
    # lower-case hex, as nvidia-smi -L prints UUIDs (the strict parser's upper-case hint relies on it)
    assert all(g.uuid[4:] == g.uuid[4:].lower() for g in inv.gpus)


def test_demo_fleet_knows_everything_about_its_gpus():
    """Nothing in the demo fleet is unknown: no notes, memory and processes all known."""
    for gpu in demo_inventory().gpus:
        assert gpu.notes == () and gpu.memory_free is not None and gpu.processes is not None
        assert gpu.utilization is not None
    assert "Notes:" not in smi_table(demo_inventory()) and "unknown" not in smi_table(demo_inventory())


def test_demo_fleet_has_uneven_use_a_tie_and_processes():
    inv = demo_inventory()
    free = [g.memory_free // MIB for g in inv.gpus]
    assert len(set(free)) == 7  # one tie: GPUs 3 and 6
    assert free[3] == free[6] == max(free)
    assert min(free) == free[4] and free[4] < 1024  # one GPU is almost full
    assert sum(len(g.processes) for g in inv.gpus) >= 5
    for gpu in inv.gpus:  # processes never hold more than the GPU uses
        assert sum(p.used_memory or 0 for p in gpu.processes) <= gpu.memory_used


def test_demo_table_says_it_is_made_up():
    table = smi_table(demo_inventory())
    assert table.startswith("DEMO FLEET (made up, not this machine)")
    assert "GPU 4  pid   31340  python eval.py" in table
