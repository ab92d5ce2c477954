"""The incremental /proc/interrupts reader gives what a full parse gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nettop.collectors import interrupts
from nettop.collectors.interrupts import InterruptReader, parse_interrupts, read_interrupts
from nettop.kernel.sysroot import LIVE, SysRoot
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


DATA = Path(__file__).parent / "data" / "interrupts"


def count_full_parses(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = interrupts._parse_blocks

    def spy(*args):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(interrupts, "_parse_blocks", spy)
    return calls


@pytest.mark.parametrize("series", ["singlequeue_8cpu", "multinic_multiqueue_4cpu"])
def test_a_real_kernel_file_takes_the_fast_path(tmp_path, monkeypatch, series):
    """The kernel indents its header by the "%*d" width + 8: the wanted lines are found
    by the width of the lines themselves, so five consecutive samples of a real host
    need one full parse, and each tick equals a full parse of its sample."""
    full = count_full_parses(monkeypatch)
    path = tmp_path / "proc/interrupts"
    path.parent.mkdir()
    reader = InterruptReader(full_every=100)
    for k in range(1, 6):
        text = (DATA / f"{series}__interrupts{k}.txt").read_text()
        path.write_text(text)
        got, problems = reader.read(SysRoot(str(tmp_path)), lambda irq, name: name.startswith("eth"))
        assert not problems
        assert got == parse_interrupts(text, lambda irq, name: name.startswith("eth"))[0], k
    assert any(irq.counts is not None for irq in got.irqs.values())
    assert len(full) == 1


def test_the_live_kernel_file_takes_the_fast_path(monkeypatch):
    full = count_full_parses(monkeypatch)
    reader = InterruptReader(full_every=100)
    first, _ = reader.read(LIVE, nic_like)
    fast, problems = reader.read(LIVE, nic_like)
    assert not problems and len(full) == 1
    after, _ = read_interrupts(LIVE, nic_like)
    assert {i: q.name for i, q in fast.irqs.items()} == {i: q.name for i, q in after.irqs.items()}
    for irq, q in fast.irqs.items():
        if q.counts is not None:  # counters only grow between the two reads
            assert all(a <= b <= c for a, b, c in zip(first.irqs[irq].counts, q.counts, after.irqs[irq].counts))


def nic_like(irq: int, name: str) -> bool:
    return "virtio" in name or "eth" in name or "mlx5" in name or "ACPI" in name


def test_a_named_row_printed_before_the_numbered_lines_is_not_lost(tmp_path, monkeypatch):
    """The fast path looks for named rows at the end of the file; a row printed elsewhere
    would vanish from its table, so it gives way to a full parse."""
    full = count_full_parses(monkeypatch)
    path = tmp_path / "proc/interrupts"
    path.parent.mkdir()
    text = (DATA / "multinic_multiqueue_4cpu__interrupts1.txt").read_text()
    head, _, rest = text.partition("\n")
    moved = head + "\nAIO:          1          2          3          4   Adapter I/O\n" + rest
    reader = InterruptReader(full_every=100)
    for k in range(3):
        path.write_text(moved)
        got, problems = reader.read(SysRoot(str(tmp_path)), lambda irq, name: name.startswith("eth"))
        assert not problems and got.other["AIO"] == (1, 2, 3, 4)
        assert got == parse_interrupts(moved, lambda irq, name: name.startswith("eth"))[0]
    assert len(full) == 3
