"""The incremental /proc/interrupts reader gives what a full parse gives."""

from __future__ import annotations

import shutil

from nettop.collectors.interrupts import InterruptReader, parse_interrupts
from nettop.kernel.sysroot import SysRoot
from treegen import generate_tree


def want_nic(irq: int, name: str) -> bool:
    return name.startswith("mlx5_comp")


def test_fast_ticks_equal_full_parses_and_layout_changes_force_a_full_parse(tmp_path):
    trees = [generate_tree(tmp_path / f"t{k}", cpus=32, irqs=300, queues=8, step=k) for k in range(3)]
    live = tmp_path / "live"
    reader = InterruptReader(full_every=100)
    for k, tree in enumerate(trees):
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(tree, live, symlinks=True)
        got, problems = reader.read(SysRoot(str(live)), want_nic)
        full, _ = parse_interrupts((tree / "proc/interrupts").read_text(), want_nic)
        assert not problems
        assert got.cpus == full.cpus and got.other == full.other
        assert got.irqs == full.irqs, f"tick {k}"
    # a CPU goes offline: the header changes, and the reader re-parses in full
    offline = generate_tree(tmp_path / "off", cpus=32, irqs=300, queues=8, step=3, offline=[5])
    shutil.rmtree(live)
    shutil.copytree(offline, live, symlinks=True)
    got, _ = reader.read(SysRoot(str(live)), want_nic)
    assert 5 not in got.cpus and len(got.cpus) == 31
    full, _ = parse_interrupts((offline / "proc/interrupts").read_text(), want_nic)
    assert got.irqs == full.irqs


def test_a_wanted_irq_that_vanishes_falls_back_to_a_full_parse(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=4, irqs=40, queues=4)
    reader = InterruptReader(full_every=100)
    reader.read(SysRoot(str(tree)), want_nic)
    path = tree / "proc/interrupts"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(l for l in lines if "mlx5_comp2@" not in l))
    got, problems = reader.read(SysRoot(str(tree)), want_nic)
    assert not problems
    assert 26 not in got.irqs and got.irqs[27].counts is not None


def test_unreadable_file_is_one_problem(tmp_path):
    got, problems = InterruptReader().read(SysRoot(str(tmp_path)))
    assert got.cpus == () and len(problems) == 1 and "interrupts" in problems[0].message
