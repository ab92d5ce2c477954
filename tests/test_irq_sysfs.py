"""Per-IRQ counts from /sys/kernel/irq/N/per_cpu_count equal those of /proc/interrupts.

On the live host (its virtio_net eth0 has real MSI-X queue IRQs) both are read in one
instant window: /proc/interrupts, sysfs, /proc/interrupts again, and every sysfs count
must lie between the two readings of its CPU. On generated trees the sysfs and the
/proc/interrupts source give the same snapshots, also when IRQs come and go between
ticks, and when a per_cpu_count is cut at PAGE_SIZE (then /proc/interrupts is used).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.collectors import cpus, interrupts, irq_sysfs
from nettop.collectors.host import HostReader
from nettop.collectors.irq_sysfs import SOURCE, VECTOR_FROM, SysfsIrqReader
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.rates import compute_rates
from nettop.model.snapshot import Snapshot
from treegen import generate_tree


def _same(snap: Snapshot) -> Snapshot:
    """What must not depend on the source: all but times (the snapshot's and the tick
    each setting was read at), cost, the source's name and the named rows (NMI, LOC, ...)
    that only /proc/interrupts has."""
    table = dataclasses.replace(snap.interrupts, other={})
    devices = {n: dataclasses.replace(d, queues=tuple(dataclasses.replace(q, read_at=None) for q in d.queues),
                                      bql=tuple(dataclasses.replace(b, read_at=None) for b in d.bql))
               for n, d in snap.devices.items()}
    affinity = {i: dataclasses.replace(a, read_at=None) for i, a in snap.irq_affinity.items()}
    return dataclasses.replace(snap, t_mono=0.0, t_wall=0.0, read_cpu_s=0.0, irq_source=None,
                               interrupts=table, devices=devices, irq_affinity=affinity)


def _without_sysfs(tree: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(tree, dest, symlinks=True)
    shutil.rmtree(dest / "sys/kernel/irq")
    return dest


@pytest.mark.skipif(not os.path.isdir("/sys/kernel/irq") or not os.path.isdir("/sys/class/net/eth0/device"),
                    reason="needs the live host's /sys/kernel/irq and a NIC eth0")
def test_live_sysfs_counts_lie_between_two_reads_of_proc_interrupts():
    with HostReader(LIVE, ifnames=["eth0"]) as r:
        snap = r.read()
    assert snap.irq_source == SOURCE
    qirqs = sorted({i for q in snap.queue_maps["eth0"].queues for i in q.irqs})
    assert qirqs, "eth0 has no queue IRQ to compare"
    want = set(qirqs)
    online, _ = cpus.read_online_cpus(LIVE)
    reader = SysfsIrqReader()

    def follow(irq: int, name: str) -> bool:
        return irq in want

    reader.read(LIVE, online, follow)  # discovery outside the window
    before, p1 = interrupts.read_interrupts(LIVE, lambda i, n: i in want)
    mid = reader.read(LIVE, online, follow)
    after, p2 = interrupts.read_interrupts(LIVE, lambda i, n: i in want)
    assert not p1 and not p2 and mid is not None, reader.fallback_reason
    assert mid.cpus == before.cpus == after.cpus
    fired = 0
    for irq in qirqs:
        a, s, b = before.irqs[irq], mid.irqs[irq], after.irqs[irq]
        assert (s.chip, s.hwirq, s.name) == (a.chip, a.hwirq, a.name)
        assert a.counts is not None and s.counts is not None and b.counts is not None
        for cpu, lo, got, hi in zip(mid.cpus, a.counts, s.counts, b.counts):
            assert lo <= got <= hi, (irq, cpu, lo, got, hi)
        fired += sum(s.counts)
    assert fired > 0  # the comparison saw real interrupts, not only zeros
    # every IRQ /proc/interrupts prints has the same chip, hwirq and name from sysfs
    names = {i: (x.chip, x.hwirq, x.name) for i, x in mid.irqs.items()}
    assert names == {i: (x.chip, x.hwirq, x.name) for i, x in after.irqs.items()}


@pytest.mark.parametrize("kw", [
    dict(cpus=16, irqs=200, queues=8, offline=(3, 9)),
    dict(cpus=32, irqs=300, queues=8, nics=2, nodes=4),
    dict(cpus=1024, irqs=300, queues=64, nics=2, nodes=4, sparse=True),
], ids=["offline", "two-nics", "1024-cpus"])
def test_sysfs_and_proc_interrupts_give_the_same_snapshots(tmp_path, kw):
    trees = [generate_tree(tmp_path / f"s{k}", step=k, **kw) for k in range(2)]
    plain = [_without_sysfs(t, tmp_path / f"p{k}") for k, t in enumerate(trees)]
    got = {}
    for label, pair in (("sysfs", trees), ("proc", plain)):
        with HostReader(SysRoot(str(pair[0]))) as r0, HostReader(SysRoot(str(pair[1]))) as r1:
            a, b = r0.read(), r1.read()
        b = dataclasses.replace(b, t_mono=a.t_mono + 1.0)
        got[label] = (a, b)
    (sa, sb), (pa, pb) = got["sysfs"], got["proc"]
    assert sa.irq_source == "/sys/kernel/irq" and pa.irq_source == "/proc/interrupts"
    assert not sb.problems, sb.problems
    assert _same(sa) == _same(pa) and _same(sb) == _same(pb)
    assert list(sb.interrupts.irqs) == list(pb.interrupts.irqs)  # one order: recordings and digests follow it
    assert compute_rates(sa, sb).irqs == compute_rates(pa, pb).irqs
    followed = [i for i, x in sb.interrupts.irqs.items() if x.counts is not None]
    assert len(followed) >= kw["queues"] * kw.get("nics", 1)


def test_an_irq_added_or_removed_between_ticks_is_found(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=4)
    pci = tree / "sys/devices/pci0000:80/0000:81:00.0"
    with HostReader(SysRoot(str(tree))) as r:
        first = r.read()
        assert first.irq_source == SOURCE
        assert [q.irqs for q in first.queue_maps["eth0"].queues] == [(24,), (25,), (26,), (27,)]
        # channels 4 -> 3: queue 3's IRQ is freed (its sysfs directory and its line go)
        shutil.rmtree(tree / "sys/kernel/irq/27")
        (pci / "msi_irqs/27").unlink()
        for d in ("rx-3", "tx-3"):
            shutil.rmtree(tree / f"sys/class/net/eth0/queues/{d}")
        text = (tree / "proc/interrupts").read_text().splitlines(keepends=True)
        (tree / "proc/interrupts").write_text("".join(x for x in text if not x.startswith(" 27:")))
        fewer = r.read()
        assert 27 not in fewer.interrupts.irqs
        assert [q.irqs for q in fewer.queue_maps["eth0"].queues] == [(24,), (25,), (26,)]
        assert _same(fewer) == _same(_fresh(tree, tmp_path / "p1"))
        # a new vector appears (hotplug, channels raised): IRQ 99 serves combined 3
        d = tree / "sys/kernel/irq/99"
        d.mkdir()
        for f, v in (("actions", "mlx5_comp3@pci:0000:81:00.0"), ("chip_name", "PCI-MSIX-0000:81:00.0"),
                     ("hwirq", "9"), ("name", "edge"), ("type", "edge"), ("wakeup", "disabled"),
                     ("per_cpu_count", "1,2,3,4,5,6,7,8")):
            (d / f).write_text(v + "\n")
        (pci / "msi_irqs/99").write_text("msix\n")
        for q in ("rx-3", "tx-3"):
            (tree / f"sys/class/net/eth0/queues/{q}").mkdir()
        lines = (tree / "proc/interrupts").read_text().splitlines(keepends=True)
        at = next(i for i, x in enumerate(lines) if x.lstrip().startswith("NMI"))
        lines.insert(at, " 99:" + "".join(f"{c:11d}" for c in range(1, 9))
                     + "  PCI-MSIX-0000:81:00.0   9-edge      mlx5_comp3@pci:0000:81:00.0\n")
        (tree / "proc/interrupts").write_text("".join(lines))
        more = r.read()
    assert more.irq_source == SOURCE
    assert more.interrupts.irqs[99].counts == (1, 2, 3, 4, 5, 6, 7, 8)
    assert [q.irqs for q in more.queue_maps["eth0"].queues] == [(24,), (25,), (26,), (99,)]
    assert _same(more) == _same(_fresh(tree, tmp_path / "p2"))


def _fresh(tree: Path, dest: Path) -> Snapshot:
    with HostReader(SysRoot(str(_without_sysfs(tree, dest)))) as r:
        return r.read()


def test_a_per_cpu_count_cut_at_page_size_falls_back_to_proc_interrupts(tmp_path):
    # 1,024 CPUs with a 7-digit count each: 8 KB, more than the kernel's one page
    tree = generate_tree(tmp_path / "t", cpus=1024, irqs=12, queues=4)
    text = (tree / "sys/kernel/irq/24/per_cpu_count").read_text()
    assert len(text) == 4095 and not text.endswith("\n")
    online, _ = cpus.read_online_cpus(SysRoot(str(tree)))
    reader = SysfsIrqReader()
    assert reader.read(SysRoot(str(tree)), online, lambda i, n: "mlx5_comp" in n) is None
    assert "PAGE_SIZE" in (reader.fallback_reason or "")
    with HostReader(SysRoot(str(tree))) as r:
        snap = r.read()
    assert snap.irq_source == "/proc/interrupts" and not snap.problems
    assert snap.interrupts.irqs[24].counts is not None


def _full(text: bytes) -> list[int]:
    return [int(x) for x in text.rstrip(b"\n").split(b",")]


def _seen_at(prev: bytes, a: int, b: int) -> tuple[bytes, bytes, bytes, int, int]:
    """A state `_delta` accepts: `prev` with the fields before field a and after field b
    as its unchanged head and tail (any such split of the last read is a valid one)."""
    fields = prev.rstrip(b"\n").split(b",")
    head = b"".join(f + b"," for f in fields[:a])
    tail = b"".join(b"," + f for f in fields[b + 1:])
    return prev, head, tail, a, len(fields) - b - 1


def _apply(row: list[int], got: tuple[int, list[int], object]) -> list[int]:
    first, vals, _ = got
    return row[:first] + vals + row[first + len(vals):]


_U32_VALUES = st.one_of(st.sampled_from([0, 1, 9, 10, 99, 100, 123, 99999, (1 << 32) - 1]),
                        st.integers(0, (1 << 32) - 1))


@settings(derandomize=True, max_examples=400, deadline=None, database=None)
@given(st.data())
def test_parsing_only_the_changed_fields_gives_the_whole_line(data):
    """Tick after tick, a line whose counts move anywhere (the same CPU again, another,
    several, by any number of digits) reads as its full parse, whatever the last span."""
    from nettop.collectors.irq_sysfs import _delta

    n = data.draw(st.integers(1, 40))
    row = data.draw(st.lists(_U32_VALUES, min_size=n, max_size=n))
    text = ",".join(map(str, row)).encode() + b"\n"
    a = data.draw(st.integers(0, n - 1))
    seen = _seen_at(text, a, data.draw(st.integers(a, n - 1)))
    cpus = st.integers(0, n - 1)
    usual = data.draw(st.lists(cpus, min_size=1, max_size=2))  # where its interrupts go
    for _ in range(data.draw(st.integers(1, 10))):
        new = list(row)
        hot = data.draw(st.lists(st.one_of(st.sampled_from(usual), st.sampled_from(usual), cpus), max_size=3))
        for i in hot:
            new[i] = data.draw(st.one_of(_U32_VALUES, st.just(min(row[i] + 1, (1 << 32) - 1))))
        text = ",".join(map(str, new)).encode() + b"\n"
        if text == seen[0]:
            continue  # the reader skips an unchanged file before it asks
        got = _delta(text, seen, n)
        assert got is not None and _apply(row, got) == new == _full(text), (text, seen)
        row, seen = new, got[2]


def test_a_line_that_is_not_n_counts_is_refused():
    from nettop.collectors.irq_sysfs import _delta

    good = b"1,2,3\n"
    for bad in (b"1,x,3\n", b"1,2\n", b"1,2,3,4\n", b"1,4294967296,3\n", b"1,,3\n", b"1,+2,3\n",
                b"1, 2,3\n", b"1,\xb2,3\n", b"1,22222222222,3\n", b"1,2,3\n\n", b"\n", b"7\n", b"1,7\n",
                b"1,2,3"):
        for a, b in ((0, 2), (1, 1), (0, 0), (2, 2)):  # every last span
            assert _delta(bad, _seen_at(good, a, b), 3) is None, (bad, a, b)


def test_an_irq_that_fires_on_the_same_cpu_again_is_parsed_without_a_search():
    """The common case on a big host: one field of 1,024 moves, where it moved last tick.
    The last span is confirmed as it stands (the same head, no halving) and only that
    field is parsed."""
    from nettop.collectors.irq_sysfs import _delta

    row = [0] * 1024
    row[700] = 5
    first = ",".join(map(str, row)).encode() + b"\n"
    seen = (first, b"", b"", 0, 0)
    for k, count in enumerate((9, 10, 99999, 100000, 4294967295)):
        row[700] = count
        text = ",".join(map(str, row)).encode() + b"\n"
        got = _delta(text, seen, 1024)
        assert got is not None and got[:2] == (700, [count])
        if k:  # from the second move on: the span found by the first
            assert got[2][1] is seen[1] and got[2][2] is seen[2]
        seen = got[2]


@pytest.mark.parametrize("vector_from", [1, VECTOR_FROM])  # the changed rows in bulk, and one by one
@pytest.mark.parametrize("offline", [(), (5,)])
def test_a_tree_that_advances_under_one_reader_matches_proc_interrupts(tmp_path, offline, vector_from):
    kw = dict(cpus=16, irqs=60, queues=8, offline=offline)
    tree = generate_tree(tmp_path / "t", step=0, **kw)
    with HostReader(SysRoot(str(tree))) as r:
        r._irq_sysfs.vector_from = vector_from
        r.read()
        for step in (1, 2, 3):  # the same files rewritten: only changed fields are parsed
            generate_tree(tree, step=step, **kw)
            snap = r.read()
            assert snap.irq_source == SOURCE
            assert _same(snap) == _same(_fresh(tree, tmp_path / f"p{step}"))


@pytest.mark.skipif(not os.path.isdir("/sys/kernel/irq"), reason="needs the live host's /sys/kernel/irq")
def test_live_reads_through_held_descriptors_are_fresh_and_closed_with_the_reader():
    """On the live kernel each followed per_cpu_count is opened once and re-read with
    pread at offset 0: the counts must still be this instant's (kernfs regenerates them),
    bracketed by fresh opens of the same file, and every descriptor goes with close()."""
    online, _ = cpus.read_online_cpus(LIVE)

    def totals() -> dict[int, int]:
        table, _ = interrupts.read_interrupts(LIVE, lambda i, n: True)
        return {i: sum(x.counts) for i, x in table.irqs.items() if x.counts is not None}

    t0 = totals()
    deadline = time.monotonic() + 20
    moving: list[int] = []
    while not moving and time.monotonic() < deadline:
        time.sleep(0.5)
        t1 = totals()
        moving = sorted(i for i in t1 if t1[i] > t0.get(i, t1[i]))
    assert moving, "no IRQ fired on this host in 20 s"
    # every one that fired in that half second: one that fired once may not again for
    # long (a run once saw the busiest four stay quiet for 20 s), and any one will do
    want = set(moving)
    reader = SysfsIrqReader()
    try:
        first = reader.read(LIVE, online, lambda i, n: i in want)
        assert first is not None, reader.fallback_reason
        assert len(reader._fds) == len(want)  # held, one per followed IRQ
        held_fds = list(reader._fds.values())
        seen_change = False
        for _ in range(80):  # up to 20 s: a busy machine delays the interrupts' work too
            fresh_lo = {i: _fresh_total(i) for i in want}
            held = reader.read(LIVE, online, lambda i, n: i in want)
            fresh_hi = {i: _fresh_total(i) for i in want}
            assert held is not None
            for i in want:
                got = held.irqs[i].total
                assert fresh_lo[i] <= got <= fresh_hi[i], (i, fresh_lo[i], got, fresh_hi[i])
                seen_change |= got != first.irqs[i].total
            if seen_change:
                break
            time.sleep(0.25)
        assert seen_change, "the held descriptors never showed a new count"
    finally:
        reader.close()
    assert not reader._fds
    for fd in held_fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def _fresh_total(irq: int) -> int:
    with open(f"/sys/kernel/irq/{irq}/per_cpu_count") as f:
        return sum(int(x) for x in f.read().strip().split(","))


def test_a_captured_tree_is_never_read_through_held_descriptors(tmp_path):
    """A generated tree that advances replaces its files by rename: a held descriptor would
    read the old file forever, so a tree's files are opened each tick."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=4)
    root = SysRoot(str(tree))
    online, _ = cpus.read_online_cpus(root)
    reader = SysfsIrqReader()
    a = reader.read(root, online, lambda i, n: "mlx5" in n)
    assert a is not None and not reader._fds
    generate_tree(tree, cpus=8, irqs=40, queues=4, step=1)
    b = reader.read(root, online, lambda i, n: "mlx5" in n)
    assert b is not None and any(b.irqs[i].total != a.irqs[i].total for i in b.irqs if b.irqs[i].counts)


def _in_place_reader(tmp_path: Path, irqs: int):
    """A generated 8-CPU tree read as the live kernel is (rewritten in place), its online
    CPUs, a reader, and the filter that follows its mlx5 queue IRQs."""
    root = SysRoot(str(generate_tree(tmp_path / "t", cpus=8, irqs=irqs, queues=4)), in_place=True)
    online, _ = cpus.read_online_cpus(root)
    return root, online, SysfsIrqReader(), (lambda i, n: "mlx5" in n)


def test_a_tree_rewritten_in_place_is_held_open_and_read_fresh_as_the_live_kernel_is(tmp_path):
    """`SysRoot.in_place` (benchmarks/record_cost.py's tree): the followed IRQs' files are
    held open, and each tick's counts are those the files hold after an in-place rewrite
    (same inode, one write, as sysfs regenerates its own), not the first tick's."""
    from treegen import FiringIrqs

    root, online, reader, want = _in_place_reader(tmp_path, irqs=40)
    try:
        first = reader.read(root, online, want)
        assert first is not None and reader._fds and len(reader._fds) == len(reader._paths)
        firing = FiringIrqs(list(reader._paths.values()), in_place=True)
        for k in (1, 2):
            firing.step(k)
            later = reader.read(root, online, want)
            assert later is not None
            for irq, path in reader._paths.items():
                want_counts = [int(x) for x in Path(path).read_text().strip().split(",")]
                assert list(later.irqs[irq].counts) == want_counts
                assert later.irqs[irq].counts != first.irqs[irq].counts  # moved (32-bit wrap aside)
    finally:
        reader.close()
    assert not reader._fds


def test_vectors_renamed_on_the_same_numbers_show_within_recheck_every_ticks_a_share_a_tick(
        tmp_path, monkeypatch):
    """GIVEN a driver that renames its queue vectors without freeing them (no IRQ directory
    comes or goes, so no link count changes) WHEN the reader goes on ticking THEN each
    renamed IRQ shows its new name within `recheck_every` ticks, and no tick reads more
    than its share of the followed IRQs' names again (all of them on one tick was a
    spike of 2,064 opens at 1,024 CPUs)."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=60, queues=16)
    root = SysRoot(str(tree))
    online, _ = cpus.read_online_cpus(root)
    reader = SysfsIrqReader(recheck_every=4)
    want = lambda i, n: "mlx5" in n or "renamed" in n  # noqa: E731
    first = reader.read(root, online, want)
    assert first is not None
    followed = sorted(reader._paths)
    assert len(followed) >= 16
    for irq in followed:
        (tree / f"sys/kernel/irq/{irq}/actions").write_text(f"renamed{irq}\n")
    metas: list[int] = []
    real_meta = irq_sysfs._meta
    monkeypatch.setattr(irq_sysfs, "_meta", lambda base, irq: metas.append(irq) or real_meta(base, irq))
    shown: dict[int, int] = {}
    per_tick = []
    for tick in range(1, 5):
        before = len(metas)
        table = reader.read(root, online, want)
        assert table is not None
        per_tick.append(len(metas) - before)
        for irq in followed:
            if table.irqs[irq].name == f"renamed{irq}":
                shown.setdefault(irq, tick)
                assert table.irqs[irq].counts is not None  # still followed under its new name
    assert sorted(shown) == followed  # every one within recheck_every ticks
    assert max(per_tick) <= -(-len(followed) // 4) + 1, per_tick  # a quarter a tick, not all at once
    assert sum(per_tick) == len(followed)  # each once in the period


def test_a_vector_freed_and_allocated_again_under_the_same_name_shows_its_new_hwirq(tmp_path):
    """GIVEN a followed IRQ WHEN its descriptor is freed and allocated again on the same
    number between two ticks, with the same action name but another hwirq (a new
    directory, no link count changed) THEN the new hwirq shows within `recheck_every`
    ticks: an unchanged `actions` alone is not taken for an unchanged IRQ."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=4)
    root = SysRoot(str(tree))
    online, _ = cpus.read_online_cpus(root)
    reader = SysfsIrqReader(recheck_every=2)
    want = lambda i, n: "mlx5" in n  # noqa: E731
    for _ in range(3):  # every IRQ fully re-read once: its directory is known
        assert reader.read(root, online, want) is not None
    d = tree / "sys/kernel/irq/25"
    files = {f.name: f.read_text() for f in d.iterdir()}
    old_hwirq = files["hwirq"].strip()
    shutil.rmtree(d)
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text("77\n" if name == "hwirq" else text)
    assert (tree / "sys/kernel/irq").stat().st_nlink == len(os.listdir(tree / "sys/kernel/irq")) + 2
    seen = [reader.read(root, online, want).irqs[25].hwirq for _ in range(2)]  # type: ignore[union-attr]
    assert seen[-1].startswith("77") and not seen[-1].startswith(old_hwirq)


@pytest.mark.parametrize("vector_from", [1, VECTOR_FROM])
def test_fields_taken_before_a_tick_stops_part_way_are_in_the_next_table(tmp_path, vector_from):
    """A tick that stops part way (a damaged file further on) has already remembered the
    texts of the rows before it, so it must have written their moved fields into the
    matrix too: once the damage is gone and the IRQs are read again, those rows are not
    taken again, and every count must be the file's."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=4)
    root = SysRoot(str(tree))
    online = tuple(range(8))
    reader = SysfsIrqReader()
    reader.vector_from = vector_from
    assert reader.read(root, online, lambda irq, name: True) is not None
    followed = sorted(reader._paths)
    irqdir = tree / "sys/kernel/irq"

    def counts(irq: int) -> list[int]:
        return [int(x) for x in (irqdir / str(irq) / "per_cpu_count").read_text().strip().split(",")]

    def write(irq: int, text: str) -> None:
        (irqdir / str(irq) / "per_cpu_count").write_text(text)

    for step in (1, 2):  # the second step moves the field the first one did: the fast path
        for irq in followed:
            row = counts(irq)
            row[irq % 8] = (row[irq % 8] + 1000 * step) % (1 << 32)
            write(irq, ",".join(map(str, row)) + "\n")
        damaged = followed[-1]
        good = (irqdir / str(damaged) / "per_cpu_count").read_text()
        write(damaged, good.replace(",", ",x", 1))
        assert reader.read(root, online, lambda irq, name: True) is None
        write(damaged, good)
        (irqdir / f"{9000 + step}").mkdir()  # a new IRQ (no action yet): the set is read again
        (irqdir / f"{9000 + step}" / "actions").write_text("\n")
        table = reader.read(root, online, lambda irq, name: True)
        assert table is not None
        assert {i: list(table.irqs[i].counts) for i in followed} == {i: counts(i) for i in followed}


_ALL = lambda irq, name: True  # noqa: E731  # a reader's `want`: every IRQ


def _read_in_place(tree: Path) -> tuple[SysRoot, SysfsIrqReader, dict[int, list[int]]]:
    """A reader that has read `tree` (8 CPUs) once as a tree rewritten in place, and each
    followed IRQ's counts as its file holds them. Close the reader when done."""
    root = SysRoot(str(tree), in_place=True)
    reader = SysfsIrqReader()
    assert reader.read(root, tuple(range(8)), _ALL) is not None
    irqdir = tree / "sys/kernel/irq"
    rows = {i: [int(x) for x in (irqdir / str(i) / "per_cpu_count").read_text().strip().split(",")]
            for i in sorted(reader._paths)}
    return root, reader, rows


def _write_in_place(root: SysRoot, irq: int, text: str) -> None:
    """Rewrite an IRQ's per_cpu_count in place (truncated, not replaced): a held
    descriptor then reads the new text, as from the live kernel."""
    fd = os.open(root.join(f"sys/kernel/irq/{irq}/per_cpu_count"), os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def test_a_row_taken_in_bulk_and_then_back_to_its_older_text_is_read_as_the_file(tmp_path):
    """A bulk tick (`_bulk`) leaves its rows' `last` texts one tick behind (`ref` has the
    new ones): a count that then goes back to what it was before that tick (a reset, a
    counter put back) must be read, not taken for the older text's unchanged copy."""
    root, reader, rows = _read_in_place(generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=4))
    online, want, followed = tuple(range(8)), _ALL, sorted(rows)
    try:
        def tick(add: int, vector_from: int) -> None:
            for irq, row in rows.items():
                row[irq % 8] = 100_000 + add  # the same field, the same width
                _write_in_place(root, irq, ",".join(map(str, row)) + "\n")
            reader.vector_from = vector_from
            table = reader.read(root, online, want)
            assert table is not None
            assert {i: list(table.irqs[i].counts) for i in followed} == rows
            assert {i: table.irqs[i].total for i in followed} == {i: sum(r) for i, r in rows.items()}

        tick(0, 10 ** 9)  # one by one: each row's span is this field
        tick(1, 10 ** 9)
        tick(2, 1)  # in bulk
        tick(1, 10 ** 9)  # back to the text two ticks ago, one by one
        tick(2, 1)
        tick(1, 1)
    finally:
        reader.close()


def test_the_table_names_every_irq_as_proc_interrupts_does_and_counts_the_followed(tmp_path):
    """The sysfs table is a view of the reader's names and counted rows (not a merged copy
    of 16,384 entries a tick): it must still read as the dict /proc/interrupts gives, key
    for key and in its order, with counts only on the followed IRQs, and keep reading so
    after later ticks have replaced the reader's rows."""
    kw = dict(cpus=8, irqs=60, queues=4)
    tree = generate_tree(tmp_path / "t", **kw)
    root = SysRoot(str(tree))
    plain = SysRoot(str(_without_sysfs(tree, tmp_path / "p")))
    online, _ = cpus.read_online_cpus(root)
    want = lambda i, n: "mlx5" in n  # noqa: E731
    reader = SysfsIrqReader()
    table = reader.read(root, online, want)
    assert table is not None
    proc, problems = interrupts.read_interrupts(plain, want)
    assert not problems
    irqs = table.irqs
    assert list(irqs) == list(irqs.keys()) == list(proc.irqs) and len(irqs) == len(proc.irqs)
    assert dict(irqs) == dict(proc.irqs) and irqs == proc.irqs
    assert {i for i, x in irqs.items() if x.counts is not None} == set(reader.counted) == {24, 25, 26, 27, 28}
    assert 24 in irqs and 9999 not in irqs and irqs.get(9999) is None and irqs.get(9999, 0) == 0
    assert irqs.get(24) is irqs[24] is reader.counted[24] and irqs[max(irqs)].counts is None
    with pytest.raises(KeyError):
        irqs[9999]
    before = dict(irqs)
    generate_tree(tree, step=1, **kw)
    later = reader.read(root, online, want)
    assert later is not None and later.irqs[24].total != before[24].total
    assert dict(irqs) == before  # the earlier table is unchanged


def test_an_unchanged_irq_is_rechecked_with_its_actions_and_a_stat_from_the_first_time(tmp_path, monkeypatch):
    """Discovery keeps each IRQ's hwirq file identity with its names, so in the first
    `recheck_every` ticks an IRQ that did not change costs its `actions` and one stat, not
    all its names again (at 1,024 CPUs: ~260 more opens in each of the first ten ticks)."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=60, queues=16)
    root = SysRoot(str(tree))
    online, _ = cpus.read_online_cpus(root)
    reader = SysfsIrqReader(recheck_every=4)
    want = lambda i, n: "mlx5" in n  # noqa: E731
    assert reader.read(root, online, want) is not None
    metas: list[int] = []
    real_meta = irq_sysfs._meta
    monkeypatch.setattr(irq_sysfs, "_meta", lambda base, irq: metas.append(irq) or real_meta(base, irq))
    rereads: list[int] = []
    real_reread = SysfsIrqReader._reread

    def reread(base, irq, was, dirs):  # type: ignore[no-untyped-def]
        rereads.append(irq)
        return real_reread(base, irq, was, dirs)
    monkeypatch.setattr(SysfsIrqReader, "_reread", staticmethod(reread))
    for _ in range(4):
        assert reader.read(root, online, want) is not None
    assert sorted(rereads) == sorted(reader._paths)  # each followed IRQ re-checked once
    assert metas == []


class _HeldTree(SysRoot):
    """A generated tree read as the live kernel is: its per_cpu_count files held open."""

    @property
    def live(self) -> bool:
        return True


def _kernfs_pread(real):
    """os.pread as kernfs answers it: a file whose node was removed (its desc freed) fails
    with ENODEV, where a tree's unlinked file would go on reading its old bytes."""
    import errno

    def pread(fd: int, n: int, offset: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(" (deleted)"):
            raise OSError(errno.ENODEV, "No such device")
        return real(fd, n, offset)
    return pread


def test_a_held_irq_freed_and_allocated_again_on_its_number_is_read_afresh(tmp_path, monkeypatch):
    """GIVEN a followed IRQ read through a held descriptor WHEN its desc is freed and the
    number allocated again between two ticks (a NIC reset: the same number, another
    hwirq, counts from zero; no link count changes) THEN the next table has the new file's
    counts and the new desc's hwirq at once, and the dead descriptor is closed."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=4)
    root = _HeldTree(str(tree))
    online, _ = cpus.read_online_cpus(root)
    monkeypatch.setattr(os, "pread", _kernfs_pread(os.pread))
    reader = SysfsIrqReader()
    want = lambda i, n: "mlx5" in n  # noqa: E731
    try:
        first = reader.read(root, online, want)
        assert first is not None and 25 in first.irqs and first.irqs[25].counts is not None
        assert len(reader._fds) == len(reader._paths) >= 4
        d = tree / "sys/kernel/irq/25"
        files = {f.name: f.read_text() for f in d.iterdir()}
        shutil.rmtree(d)
        d.mkdir()
        for name, text in files.items():
            (d / name).write_text({"hwirq": "77\n", "per_cpu_count": "1,2,3,4,5,6,7,8\n"}.get(name, text))
        table = reader.read(root, online, want)
        assert table is not None and reader.fallback_reason is None
        assert table.irqs[25].counts == (1, 2, 3, 4, 5, 6, 7, 8) and table.irqs[25].total == 36
        assert table.irqs[25].hwirq.startswith("77")
        assert not any(os.readlink(f"/proc/self/fd/{fd}").endswith(" (deleted)") for fd in reader._fds.values())
        for irq in reader._paths:  # every other count is its file's
            if irq != 25:
                text = (tree / f"sys/kernel/irq/{irq}/per_cpu_count").read_text()
                assert list(table.irqs[irq].counts) == [int(x) for x in text.strip().split(",")]
    finally:
        reader.close()
    assert not reader._fds


def test_no_more_descriptors_are_held_than_max_open_and_the_rest_are_read_afresh(tmp_path):
    """With more followed IRQs than `max_open`, only that many are held; the others are
    opened each tick, so their counts move with their files."""
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=40, queues=8)
    root = _HeldTree(str(tree))
    online, _ = cpus.read_online_cpus(root)
    reader = SysfsIrqReader(max_open=3)
    want = lambda i, n: "mlx5" in n  # noqa: E731
    try:
        first = reader.read(root, online, want)
        assert first is not None and len(reader._paths) >= 8 and len(reader._fds) == 3
        generate_tree(tree, cpus=8, irqs=40, queues=8, step=1)
        later = reader.read(root, online, want)
        assert later is not None and len(reader._fds) == 3
        held = {int(p.split("/")[-2]) for p in reader._fds}
        for irq in reader._paths:
            if irq not in held:  # read afresh: the advanced file's counts
                text = (tree / f"sys/kernel/irq/{irq}/per_cpu_count").read_text()
                assert list(later.irqs[irq].counts) == [int(x) for x in text.strip().split(",")]
    finally:
        reader.close()


def test_the_descriptor_budget_is_a_quarter_of_the_soft_open_file_limit(monkeypatch):
    import resource

    for soft, budget in ((1024, 256), (100, 25), (65536, 1024), (resource.RLIM_INFINITY, 1024), (3, 0)):
        monkeypatch.setattr(resource, "getrlimit", lambda which, soft=soft: (soft, resource.RLIM_INFINITY))
        assert irq_sysfs._fd_budget() == budget, soft
    assert SysfsIrqReader(max_open=0).max_open == 0


@pytest.mark.skipif(not os.path.isdir("/sys/kernel/irq"), reason="needs the live host's /sys/kernel/irq")
def test_live_reader_over_its_descriptor_budget_holds_only_that_many_and_reads_every_irq():
    online, _ = cpus.read_online_cpus(LIVE)
    reader = SysfsIrqReader(max_open=2)
    try:
        table = reader.read(LIVE, online, lambda i, n: True)
        assert table is not None, reader.fallback_reason
        assert len(reader._paths) > 2 and len(reader._fds) == 2
        again = reader.read(LIVE, online, lambda i, n: True)
        assert again is not None and len(reader._fds) == 2
        for irq in list(reader._paths)[:8]:  # each count lies between two fresh reads
            assert again.irqs[irq].total <= _fresh_total(irq)
            assert table.irqs[irq].total <= again.irqs[irq].total
    finally:
        reader.close()


def test_a_capture_whose_irq_directory_is_replaced_is_read_from_the_new_one(tmp_path):
    """The per_cpu_count files are opened relative to the /sys/kernel/irq directory held
    open: GIVEN that directory moved aside and another put in its place (the same IRQs,
    so the same link count, other counts) WHEN the next tick reads THEN its counts are the
    new directory's, not the old one's that the held descriptor still names."""
    kw = dict(cpus=8, irqs=40, queues=4)
    tree = generate_tree(tmp_path / "t", **kw)
    other = generate_tree(tmp_path / "o", step=3, **kw)
    root = SysRoot(str(tree))
    online, _ = cpus.read_online_cpus(root)
    reader = SysfsIrqReader()
    want = lambda i, n: "mlx5" in n  # noqa: E731
    try:
        first = reader.read(root, online, want)
        assert first is not None and reader._dirfd >= 0
        irqdir = tree / "sys/kernel/irq"
        irqdir.rename(tmp_path / "old-irq")
        (other / "sys/kernel/irq").rename(irqdir)
        later = reader.read(root, online, want)
        assert later is not None
        for irq in reader._paths:
            text = (irqdir / str(irq) / "per_cpu_count").read_text()
            assert list(later.irqs[irq].counts) == [int(x) for x in text.strip().split(",")]
        assert any(later.irqs[i].total != first.irqs[i].total for i in reader._paths)
    finally:
        reader.close()
    assert reader._dirfd < 0


@settings(derandomize=True, max_examples=60, deadline=None, database=None)
@given(st.data())
def test_held_files_rewritten_in_place_give_each_tick_the_files_counts_and_sums(tmp_path_factory, data):
    """Through held descriptors (a tree rewritten in place, as the live kernel is read),
    tick after tick of moves of every kind (the same CPU again, another, several, more or
    fewer digits, a 32-bit wrap, a count that goes back) and now and then a damaged row
    that refuses the tick part way: each table's counts are the files' and each IRQ's
    `total` is their sum. The moved fields are set in one pass after the rows are read
    and the sums follow them by difference (irq_sysfs._counts), so a row taken before a
    refusal, or a field moved where it was last tick, must not leave either stale."""
    tree = generate_tree(tmp_path_factory.mktemp("t") / "t", cpus=8, irqs=24, queues=4)
    root, reader, rows = _read_in_place(tree)
    online, want, followed = tuple(range(8)), _ALL, sorted(rows)
    irqdir = tree / "sys/kernel/irq"
    try:
        def write(irq: int, text: str) -> None:
            _write_in_place(root, irq, text)

        extra = 0
        for _ in range(data.draw(st.integers(1, 8))):
            for irq in data.draw(st.lists(st.sampled_from(followed), max_size=len(followed), unique=True)):
                row = rows[irq]
                for cpu in data.draw(st.lists(st.sampled_from([irq % 8, irq % 8, (irq + 3) % 8, 0, 7]),
                                              min_size=1, max_size=3)):
                    row[cpu] = data.draw(st.one_of(_U32_VALUES, st.just(min(row[cpu] + 1, (1 << 32) - 1)),
                                                   st.just(max(row[cpu] - 1, 0)),
                                                   st.just((row[cpu] + 10 ** 9) % (1 << 32))))
                write(irq, ",".join(map(str, row)) + "\n")
            if data.draw(st.booleans()) and data.draw(st.booleans()):
                damaged = data.draw(st.sampled_from(followed))
                good = ",".join(map(str, rows[damaged])) + "\n"
                write(damaged, good.replace(",", ",x", 1))
                assert reader.read(root, online, want) is None
                write(damaged, good)
                extra += 1  # a refused set is read again once IRQs change: one comes (no action)
                (irqdir / f"{9000 + extra}").mkdir()
                (irqdir / f"{9000 + extra}" / "actions").write_text("\n")
            # the changed rows taken in bulk (`_bulk`) or one by one, and a tick of each
            # after the other (a bulk tick leaves its rows' `last` texts behind `ref`)
            reader.vector_from = data.draw(st.sampled_from([0, 1, 4, VECTOR_FROM]))
            table = reader.read(root, online, want)
            assert table is not None
            assert {i: list(table.irqs[i].counts) for i in followed} == rows
            assert {i: table.irqs[i].total for i in followed} == {i: sum(r) for i, r in rows.items()}
            # the matrix's row sums, which the recorder takes as they are, are the same sums
            m = table.irqs.matrix
            assert m.sums == m.values.sum(axis=1, dtype="u8").tolist() == [table.irqs[i].total for i in m.irqs]
    finally:
        reader.close()


def test_the_readers_tables_name_their_matrix_as_a_walk_of_their_irqs_finds_it(tmp_path):
    """The sysfs reader's table carries its count matrix (Named.matrix), which
    model/counts takes instead of walking every IRQ: on a tree that advances and one
    that stands still, it is the very matrix the walk over a plain copy finds."""
    from treegen import FiringIrqs

    from nettop.model import counts
    from nettop.model.snapshot import InterruptTable

    root, online, reader, want = _in_place_reader(tmp_path, irqs=60)
    try:
        firing = None
        for k in range(4):
            table = reader.read(root, online, want)
            assert table is not None and table.irqs.matrix is not None
            walked = counts._table_matrix(InterruptTable(table.cpus, dict(table.irqs)))
            assert walked is not None and counts._table_matrix(table) is walked
            if k == 0:
                firing = FiringIrqs(list(reader._paths.values()), in_place=True)
            if k < 2:  # the last two ticks read a tree that stood still
                firing.step(k + 1)
    finally:
        reader.close()


@pytest.mark.parametrize("offline", [(), (5,)])
def test_a_snapshots_counted_irqs_carry_the_matrix_a_walk_of_them_finds(tmp_path, offline):
    """The snapshot holds only the counted IRQs (a new mapping, not the reader's Named
    view): it still names their matrix, with its row sums, so the rates, the doctor and
    the recorder do not walk ~520 IRQs a tick to find it; a copy of it is a plain dict."""
    import copy
    import pickle

    from nettop.model import counts
    from nettop.model.snapshot import InterruptTable

    kw = dict(cpus=16, irqs=60, queues=8, offline=offline)
    tree = generate_tree(tmp_path / "t", step=0, **kw)
    with HostReader(SysRoot(str(tree))) as r:
        for step in (1, 2):
            generate_tree(tree, step=step, **kw)
            snap = r.read()
            irqs = snap.interrupts.irqs
            assert snap.irq_source == SOURCE and isinstance(irqs, counts.MatrixIrqs)
            walked = counts._table_matrix(InterruptTable(snap.interrupts.cpus, dict(irqs)))
            assert walked is not None and counts._table_matrix(snap.interrupts) is walked is irqs.matrix
            assert walked.values.shape == (len(irqs), len(snap.interrupts.cpus))
            assert walked.sums == [x.total for x in irqs.values()] == \
                walked.values.sum(axis=1, dtype="u8").tolist()
            for other in (irqs.copy(), copy.copy(irqs), pickle.loads(pickle.dumps(irqs))):
                assert type(other) is dict and other == irqs
