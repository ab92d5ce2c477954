"""Snapshot codec, file mode, sizes and the headless recorder's imports."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.collectors.host import HostReader
from nettop.ebpf.sample import DropCounts, EbpfSample, NapiCounts, ProbeCost
from nettop.ping.stats import summarize
from nettop.model.counts import CountMatrix, CountRow, numpy
from nettop.model.problems import Problem
from nettop.model.snapshot import CpuTimes, Irq, InterruptTable, SoftnetRow
from nettop.record import codec
from nettop.record.recorder import parse_duration, parse_size
from nettop.record.store import Reader, RecordingError, Writer

NETTOP = [sys.executable, "-m", "nettop.cli"]


@pytest.fixture(scope="module")
def two_reads():
    with HostReader() as r:
        a = r.read()
        time.sleep(0.2)
        b = r.read()
    return a, b


def _roundtrip(snap, base=None):
    sk, ints, floats = codec.split(snap)
    blob = codec.pack_ints(ints, base)
    return codec.join(json.loads(sk), codec.unpack_ints(blob, base), codec.unpack_floats(codec.pack_floats(floats)))


def test_real_snapshot_round_trips_exactly(two_reads):
    a, b = two_reads
    assert _roundtrip(b) == b
    _, ia, _ = codec.split(a)
    _, ib, _ = codec.split(b)
    if len(ia) == len(ib):
        assert _roundtrip(b, ia) == b


def test_latency_ebpf_problems_and_odd_ints_round_trip(two_reads):
    _, b = two_reads
    ebpf = EbpfSample(
        elapsed_s=1.0, window_s=0.5, duty=2, probes=("napi",),
        napi=(NapiCounts("eth0", 2, 4026531840, 8193, None, 1, 10, 640, 3, 0, 64),),
        drops=(DropCounts("NO_SOCKET", 3, "", 0, 0, "udp_queue_rcv_one_skb+0x1a4", 7),),
        cost=(ProbeCost("napi:napi_poll", 12345, 10),), errors=("one line",))
    snap = dataclasses.replace(
        b, ebpf=ebpf, problems=(Problem("/proc/x", "cannot read /proc/x"),),
        latency={"10.0.0.1": summarize([0.1, 0.25, 3.5], 4, "10.0.0.1", "10.0.0.1"),
                 "tcp://h:443": summarize([], 2, "tcp://h:443", None, "no route")},
        read_cpu_s=2 ** 70 * 1.0)
    assert _roundtrip(snap) == snap
    big = dataclasses.replace(b, online_cpus=(0, 2 ** 64 - 1, -5))
    assert _roundtrip(big, codec.split(big)[1][:]) == big


def test_the_encoders_fast_paths_keep_types_exact(two_reads):
    """Tuples of plain ints and dataclasses of plain ints are copied in one step; a bool,
    a float or None among them must still come back as itself, not as an int."""
    _, b = two_reads
    odd = dataclasses.replace(b, online_cpus=(0, True, 2), problems=(Problem("/proc/y", "one"),))
    back = _roundtrip(odd)
    assert back == odd and type(back.online_cpus[1]) is bool and type(back.online_cpus[0]) is int
    mixed = dataclasses.replace(b, online_cpus=(1, 2.5, None))  # not a run of counters
    assert _roundtrip(mixed).online_cpus == (1, 2.5, None)
    long = tuple(range(20))  # a long tuple is checked in one pass (set of types), not value by value
    for odd_one in (True, 2.5, None, "x"):
        t = long[:13] + (odd_one,) + long[14:]
        back = _roundtrip(dataclasses.replace(b, online_cpus=t))
        assert back.online_cpus == t and type(back.online_cpus[13]) is type(odd_one)
    sk, ints, floats = codec.split(odd)
    assert '"online_cpus"' not in sk and [0, True, 0] == json.loads(sk)["f"][
        [f.name for f in dataclasses.fields(odd)].index("online_cpus")]


def test_a_hostile_skeleton_only_fails_to_decode(two_reads):
    _, b = two_reads
    sk, ints, floats = codec.split(b)
    for evil in ({"c": "os.system", "f": ["true"]}, {"c": "Snapshot", "f": [0]},
                 {"e": "Snapshot", "v": 1}, {"c": "ebpf.NapiMode", "f": []}, "x", 5):
        with pytest.raises(codec.CodecError):
            codec.join(evil, ints, floats)
    with pytest.raises(codec.CodecError):
        codec.join(json.loads(sk), ints[:-1], floats)
    with pytest.raises(codec.CodecError):
        codec.join(json.loads(sk), ints + [1], floats)
    with pytest.raises(codec.CodecError):
        codec.unpack_ints(b"not zlib", None)


def test_files_are_0600_and_never_overwritten(two_reads, tmp_path):
    path = str(tmp_path / "m.nettop")
    os.umask(0o022)
    w = Writer(path)
    w.add_sample(two_reads[0])
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
    with pytest.raises(RecordingError, match="already exists"):
        Writer(path)
    w.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["m.nettop"] or set(os.listdir(tmp_path)) <= {"m.nettop", "m.nettop-wal", "m.nettop-shm"}


def test_events_are_stored_and_read_back(two_reads, tmp_path):
    from nettop.model.timeline import Event
    path = str(tmp_path / "e.nettop")
    w = Writer(path)
    w.add_sample(two_reads[0], [Event(1.0, "appeared", "interface x appeared")])
    w.add_event(Event(2.0, "tuning", "#1 set: rps_cpus eth0 rx-0 0 → 3"))
    w.close()
    assert Reader(path).events() == [Event(1.0, "appeared", "interface x appeared"),
                                     Event(2.0, "tuning", "#1 set: rps_cpus eth0 rx-0 0 → 3")]


@pytest.mark.parametrize("text,value", [("100", 100), ("4k", 4096), ("500M", 500 << 20), ("2GiB", 2 << 30), ("1.5m", 3 << 19)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text,value", [("90", 90), ("90s", 90), ("15m", 900), ("24h", 86400), ("2d", 172800)])
def test_parse_duration(text, value):
    assert parse_duration(text) == value


def test_bad_size_is_one_line_on_the_command_line(tmp_path):
    p = subprocess.run([*NETTOP, "--record", str(tmp_path / "x"), "--max-size", "lots"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "is not a size" in p.stderr


def test_headless_recorder_never_imports_textual(tmp_path):
    path = str(tmp_path / "h.nettop")
    code = (
        "import sys, runpy; sys.argv = ['nettop', 'record', '-o', %r, '-i', '0.2', '--duration', '2'];\n"
        "from nettop.cli import main; rc = main();\n"
        "print('TEXTUAL' if any(m == 'textual' or m.startswith('textual.') for m in sys.modules) else 'CLEAN', rc)"
    ) % path
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "CLEAN 0", p.stdout + p.stderr
    assert len(Reader(path)) >= 2  # it recorded (a busy machine takes fewer than 10 samples in 2 s)


def test_max_size_stops_and_says_so(tmp_path):
    path = str(tmp_path / "s.nettop")
    p = subprocess.run([*NETTOP, "--record", path, "-i", "0.1", "--max-size", "80k"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "--max-size 81920 bytes reached" in p.stdout.splitlines()[-1]
    assert len(Reader(path)) >= 1


def test_second_order_prediction_in_moved_first_order_round_trips():
    a = [10, 5, 7, 2 ** 63, 0, 100]
    b = [20, 5, 7, 2 ** 63 + 3, 0, 90]
    c = [31, 5, 8, 2 ** 63 + 6, -4, 80]
    order = codec.Order.between(a, b)
    blob = codec.pack_ints(c, b, a, order)
    assert codec.unpack_ints(blob, b, a, order) == c
    assert codec.unpack_ints(codec.pack_ints(c, b), b) == c
    with pytest.raises(codec.CodecError):
        codec.unpack_ints(blob, b[:-1], a, order)


def test_live_recording_from_the_screen_writes_samples_and_events(tmp_path, two_reads):
    from nettop.record.recorder import LiveRecording
    from nettop.model.timeline import Event

    path = str(tmp_path / "screen.nettop")
    rec = LiveRecording(path, {"host": "h"})
    a, b = two_reads
    rec.add(a)
    rec.add(b, [Event(b.t_wall, "mark", "marked by the operator")])
    assert rec.stop() == 2
    r = Reader(path)
    assert list(r.snapshots()) == [a, b]
    assert [e.kind for e in r.events()] == ["mark"]


def test_irq_total_is_stored_as_its_difference_from_the_counts(two_reads):
    from nettop.model.snapshot import InterruptTable, Irq

    _, b = two_reads
    irqs = {40: Irq(40, "PCI-MSIX", "1-edge", "eth0-rx-0", (5, 7), 12),
            41: Irq(41, "PCI-MSIX", "2-edge", "eth0-rx-1", (5, 7), 99),  # a parser's odd total
            42: Irq(42, "IO-APIC", "", "timer", None, None), 43: Irq(43, "x", "", "y", (1,), None)}
    snap = dataclasses.replace(b, interrupts=InterruptTable((0, 1), irqs, {"LOC": (3, 4)}))
    assert _roundtrip(snap) == snap
    ints: list[int] = []  # the table's own ints (the live snapshot around it may hold a 12)
    codec._enc(snap.interrupts, ints, [])
    assert 12 not in ints and 99 not in ints and 0 in ints and 87 in ints


SMALL = codec.SMALL - 1
small_ints = st.lists(st.one_of(st.integers(-SMALL, SMALL),
                                st.sampled_from([0, 1, -1, SMALL, -SMALL - 1, 2 ** 32])), min_size=0, max_size=200)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-(2 ** 63), 2 ** 63 - 1),
                          st.sampled_from([2 ** 61 - 1, 2 ** 61, -(2 ** 61), -(2 ** 61) - 1, 0, -1])), max_size=50))
def test_small_vector_says_whether_every_value_is_in_the_safe_range(values):
    np = numpy()
    assert codec.small_vector(np.array(values, dtype=np.int64)) == all(-(2 ** 61) <= x < 2 ** 61 for x in values)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_pack_diffs_gives_pack_ints_bytes_for_every_prediction(data):
    """The Writer packs small vectors with numpy (codec.pack_diffs); a reader only knows
    pack_ints' layout, so both must give the very same bytes, and the array order is
    the list order."""
    np = numpy()
    c = data.draw(small_ints)
    n = len(c)
    b = data.draw(st.lists(st.integers(-SMALL, SMALL), min_size=n, max_size=n))
    a = data.draw(st.lists(st.integers(-SMALL, SMALL), min_size=n, max_size=n))
    vc, vb, va = (np.array(x, dtype=np.int64) for x in (c, b, a))
    assert codec.pack_diffs(vc) == codec.pack_ints(c)
    assert codec.pack_diffs(vc - vb) == codec.pack_ints(c, b)
    order = codec.Order.between(a, b, by_size=True)
    assert codec.Order.between_arrays(va, vb)._moved == order._moved
    d = vc - 2 * vb + va
    blob = codec.pack_diffs(d[order.perm()] if order.fwd is not None else d)
    assert blob == codec.pack_ints(c, b, a, order)
    assert codec.unpack_ints(blob, b, a, order) == c
    if order.fwd is not None:
        assert d[order.perm()].tolist() == list(order.fwd(d.tolist()))


def test_the_writer_packs_arrays_and_lists_alike_across_big_values(two_reads, tmp_path, monkeypatch):
    """A run of samples whose values leave the lanes' safe range (2**62: fits 64 bits but
    not `SMALL`; 2**64: does not fit, a key) and come back: every sample reads back
    exactly, and the blobs equal those of a Writer that never uses numpy."""
    _, b = two_reads
    xs = [5, 9, 2 ** 62, 15, 20, 26, 2 ** 64, 30, 31, 33, -2 ** 62, 40, 41, 42, 43, 44, 45]
    snaps = [dataclasses.replace(b, online_cpus=(0, x, k, 3 * k * k), t_mono=b.t_mono + k)
             for k, x in enumerate(xs)]

    def write(path):
        w = Writer(str(path), {"host": "h"})
        for s in snaps:
            w.add_sample(s)
        w.close()
        with sqlite3.connect(path) as db:
            return db.execute("SELECT seq, pred, ints FROM sample ORDER BY seq").fetchall()

    used = []
    pack_diffs = codec.pack_diffs
    monkeypatch.setattr(codec, "pack_diffs", lambda d, *work: used.append(len(d)) or pack_diffs(d, *work))
    arrays = write(tmp_path / "arrays.nettop")
    assert 0 < len(used) < len(xs)  # keys, pred 1, pred 2; lists where big
    assert list(Reader(str(tmp_path / "arrays.nettop")).snapshots()) == snaps
    assert {pred for _, pred, _ in arrays} == {0, 1, 2}
    used.clear()
    monkeypatch.setattr(codec, "small_vector", lambda v: False)  # every sample takes pack_ints
    assert write(tmp_path / "lists.nettop") == arrays
    assert not used


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2 ** 32 - 1), min_size=0, max_size=6), min_size=0, max_size=5),
       st.integers(0, 2 ** 64))
def test_split_parts_keeps_the_count_rows_in_their_place(rows, big):
    """The Writer's vector (count rows left as arrays) is `split`'s, in the same order,
    for any number of IRQs, rows of 0 or 1 CPU, and a value beyond 64 bits elsewhere
    (then there is no array, and the lists are still right)."""
    np = numpy()
    width = len(rows[0]) if rows else 0
    rows = [r[:width] + [7] * (width - len(r)) for r in rows]
    m = CountMatrix(tuple(range(40, 40 + len(rows))), np.array(rows, dtype=np.uint32).reshape(len(rows), width))
    irqs = {40 + i: Irq(40 + i, "PCI-MSIX", str(i), f"q{i}", CountRow(m, i), sum(r) + i) for i, r in enumerate(rows)}
    table = InterruptTable(tuple(range(width)), irqs, {"LOC": (big, 3)})
    sk, ints, floats = codec.split(table)
    parts = codec.IntParts()
    assert codec.skeleton_text(codec._enc(table, parts, [])) == sk
    assert parts.ints() == ints and len(parts.rows) == len(rows)
    again = codec.IntParts(parts.kept)  # the next sample: each IRQ's head is looked up
    assert codec.skeleton_text(codec._enc(table, again, [])) == sk and again.ints() == ints
    # the IRQs in another order than the matrix's rows, the last one's tail shorter than a gap
    moved = InterruptTable(tuple(range(width)), {k: dataclasses.replace(v, total=v.total + 5, hwirq=k)
                                                 for k, v in reversed(irqs.items())}, {})
    third = codec.IntParts(again.kept)
    assert codec.skeleton_text(codec._enc(moved, third, [])) == codec.split(moved)[0]
    assert third.ints() == codec.split(moved)[1]
    vec = parts.array()
    if big < 2 ** 63:
        short = codec.IntParts()
        codec._enc(InterruptTable(tuple(range(width)), {k: dataclasses.replace(v, hwirq=k) for k, v in irqs.items()}, {}),
                   short, [])
        assert short.array().tolist() == short.ints()  # the last IRQ's tail (its total) shorter than a gap
        assert vec is not None and vec.dtype == np.int64 and vec.tolist() == ints
    else:
        assert vec is None


def test_an_irq_table_whose_heads_did_not_change_takes_last_samples_skeleton(monkeypatch):
    """IntParts.irq_table: a sample whose IRQs have the heads of the last one reuses its
    skeletons and copies numbers, rows and totals in bulk; whatever changes a head (a
    rename, a new IRQ, a row width, a number that is a bool) is walked again, and every
    sample's skeleton and values are still exactly `split`'s."""
    np = numpy()

    def table(step: int, names: dict[int, str] | None = None, n: int = 12, width: int = 6,
              order: list[int] | None = None, total: object = None) -> InterruptTable:
        rows = np.arange(n * width, dtype=np.uint32).reshape(n, width) * (step + 1)
        m = CountMatrix(tuple(range(100, 100 + n)), rows)
        keys = order if order is not None else list(range(n))
        irqs = {100 + i: Irq(100 + i, "PCI-MSIX", f"{i}-edge", (names or {}).get(i, f"eth0-TxRx-{i}"),
                             CountRow(m, i), int(rows[i].sum()) + step * i if total is None else total)
                for i in keys}
        return InterruptTable(tuple(range(width)), irqs, {})

    samples = [table(0), table(1), table(2), table(3, names={4: "eth0-rx-4"}), table(4, names={4: "eth0-rx-4"}),
               table(5, n=13), table(6, n=13), table(7, n=13, width=5), table(8, n=13, width=5),
               table(9, n=13, width=5, order=list(reversed(range(13)))), table(10, n=13, width=5, total=True),
               table(11, n=13, width=5)]
    calls: list[Irq] = []
    irq = codec.IntParts.irq
    monkeypatch.setattr(codec.IntParts, "irq", lambda self, obj, floats: calls.append(obj) or irq(self, obj, floats))
    seen: dict = {}
    walked = []
    for t in samples:
        parts = codec.IntParts(seen)
        calls.clear()
        sk, ints, _ = codec.split(t)
        assert codec.skeleton_text(codec._enc(t, parts, [])) == sk
        assert parts.ints() == ints and parts.array().tolist() == ints
        walked.append(len(calls))
        seen = parts.kept
    # walked one by one: the first, a rename, a new IRQ, a new width, another order; not
    # after a total that is a bool (the whole table takes the generic path), nor when
    # nothing changed
    assert walked == [12, 0, 0, 12, 0, 13, 0, 13, 0, 13, 13, 13]


def test_split_parts_walks_a_kept_setting_once_and_gives_splits_skeleton(two_reads):
    """The Writer's walk reuses the encoding of a setting object the last sample held too
    (IntParts.remembered) and takes per-CPU tables in one pass (_int_table): the
    skeleton and the values are still exactly `split`'s, sample after sample, and an
    object that only looks like last sample's (equal, not the same) is walked again."""
    a, b = two_reads
    seen: dict = {}
    for snap in (a, b, b, dataclasses.replace(b, t_mono=b.t_mono + 1)):
        sk, ints, floats = codec.split(snap)
        tree, parts, parts_floats = codec.split_parts(snap, seen)
        assert (codec.skeleton_text(tree), parts.ints(), parts_floats) == (sk, ints, floats)
        seen = parts.kept
    kept = {type(hit[0]).__name__ for key, hit in seen.items() if type(key) is int}
    assert seen and kept <= {"QueueConfig", "BqlState", "IrqAffinity", "QueueIrqs", "QueueMap", "tuple"}
    # a table with a None field, or of two classes, is walked value by value
    softnet = dict(b.softnet)
    first = next(iter(softnet))
    odd = dataclasses.replace(b, softnet={**softnet, first: dataclasses.replace(softnet[first], backlog=None)},
                              cpu_times={**b.cpu_times, 10 ** 6: b.softnet[first]} if len(b.cpu_times) > 8 else b.cpu_times)
    sk, ints, floats = codec.split(odd)
    tree, parts, parts_floats = codec.split_parts(odd, seen)
    assert (codec.skeleton_text(tree), parts.ints(), parts_floats) == (sk, ints, floats)
    assert codec.join(json.loads(sk), ints, floats) == odd


def test_int_table_is_the_walk_of_each_value():
    """Per-CPU tables in one pass: the same skeleton and ints as `_enc` value by value,
    or None (nothing taken) when a column is not all ints or all one literal."""
    times = {cpu: CpuTimes(cpu, cpu * 3, 1, 2, 3, 4, 5, 6, 7) for cpu in range(12)}
    softnet = {cpu: SoftnetRow(cpu, cpu * 3, 1, 2, 0, 0, 5 if cpu % 2 else 9) for cpu in range(12)}
    mixed_none = {**softnet, 4: SoftnetRow(4, 1, 1, 2, 0, 0, None)}
    mixed_bool = {**softnet, 4: SoftnetRow(4, 1, 1, 2, 0, 0, 5, True)}
    two_classes = {**times, 3: softnet[3]}
    all_none = {cpu: SoftnetRow(cpu, 1, 1, 2, 0, 0, None, True) for cpu in range(12)}
    for table, fast_path in ((times, True), (softnet, True), (all_none, True), (mixed_none, False),
                             (mixed_bool, False), (two_classes, False)):
        ints, one = [], []
        fast = codec._int_table(list(table.values()), ints)
        slow = [codec._enc(v, one, []) for v in table.values()]
        if fast_path:
            assert fast == slow and ints == one
            assert json.dumps(fast) == json.dumps(slow)
        else:
            assert fast is None and ints == []


@pytest.mark.parametrize("a, b", [(0, 0.0), (0, False), (1, True), (1.0, True), ("0", 0), (None, []), (0.0, -0.0),
                                  ({"n": 2, "c": "X"}, {"c": "X", "n": 2})])
def test_same_tree_tells_apart_what_equality_does_not(a, b):
    """The Writer reuses a skeleton's JSON while the tree is the same as the last one, so
    two trees that compare equal but dump differently (0 and 0.0 and False, -0.0, a
    mapping's key order) must not be the same."""
    ta, tb = {"k": [1, 2], "v": [{"c": "X", "f": [a, "s"]}]}, {"k": [1, 2], "v": [{"c": "X", "f": [b, "s"]}]}
    assert codec.skeleton_text(ta) != codec.skeleton_text(tb)
    assert not codec.same_tree(ta, tb) and not codec.same_tree(tb, ta)
    assert codec.same_tree(ta, json.loads(json.dumps(ta)))  # equal, and no object shared


def test_same_tree_of_equal_trees_does_not_depend_on_what_they_share():
    """The Writer walks each sample into a fresh tree that shares sub-trees with the last
    one's (codec.IntParts.remembered, per-CPU rows); equal trees are the same however
    their values are shared or referenced."""
    def tree(name: str, row: list) -> dict:
        return {"irqs": [[name, row], [name, row]], "names": [name, "eth0"]}

    one = tree("".join(["mlx5_comp", "0@pci:0000:3b:00.0"]), ["#", 4, 1.0])
    two = tree("".join(["mlx5_comp", "0@pci:0000:3b:00.0"]), ["#", 4, 1.0])
    three = {"irqs": [[n, list(r)] for n, r in two["irqs"]], "names": [str(x) for x in two["names"]]}
    assert codec.skeleton_text(one) == codec.skeleton_text(two) == codec.skeleton_text(three)
    assert codec.same_tree(one, two) and codec.same_tree(two, three) and codec.same_tree(one, one)
    row = {"c": "CpuTimes", "f": {"n": 9}}
    assert codec.same_tree([row] * 5, [dict(row)] * 5) and not codec.same_tree([row] * 5, [row] * 4 + [{"c": "CpuTimes"}])


_leaves = st.one_of(st.integers(-3, 3), st.sampled_from([0.0, -0.0, 1.5, True, False, None, "a", "b", ""]))
_trees = st.recursive(_leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.sampled_from(["c", "f", "k", "v", "n"]), kids, max_size=3)),
    max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(_trees, _trees, st.booleans())
def test_same_tree_means_the_same_json(a, b, share):
    """Whatever two trees hold, same_tree says so only when their JSON is the same, and it
    says so for a tree and a copy of it (shared parts or none)."""
    if share:  # b shares a's sub-trees where it can, as the Writer's trees do
        b = [a, b, a] if isinstance(b, list) else {"v": a, "k": b}
        a = [a, json.loads(json.dumps(b))[1] if isinstance(b, list) else b, a] if isinstance(b, list) else {"v": a, "k": b["k"]}
    if codec.same_tree(a, b):
        assert codec.skeleton_text(a) == codec.skeleton_text(b)
    assert codec.same_tree(a, json.loads(json.dumps(a)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_pack_ordered_is_pack_diffs_of_the_permuted_differences(data):
    """The Writer packs a chain's differences from walk order (codec.pack_ordered, only
    the non-zero ones placed): the very bytes of permuting them all first, and
    `Order.place` is the inverse of `perm`."""
    np = numpy()
    n = data.draw(st.integers(2, 120))
    a = data.draw(st.lists(st.integers(-9, 9), min_size=n, max_size=n))
    b = [x + data.draw(st.sampled_from([0, 0, 1, -4, 70])) for x in a]
    order = codec.Order.between(a, b, by_size=True)
    d = np.array(data.draw(st.lists(st.one_of(st.just(0), st.integers(-(2 ** 63) + 1, 2 ** 63 - 1)),
                                    min_size=n, max_size=n)), dtype=np.int64)
    want = codec.pack_diffs(d[order.perm()])
    assert codec.pack_ordered(d.copy(), order) == want
    assert codec.pack_ordered(d.copy(), order, np.empty(n, dtype=np.int64)) == want
    inverse = np.empty(n, dtype=np.intp)
    inverse[order.perm()] = np.arange(n)
    assert order.place(np.arange(n)).tolist() == inverse.tolist()


_small_values = st.one_of(st.integers(-3, 3), st.integers(-(2 ** 61), 2 ** 61 - 1))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_pack_steps_is_pack_ordered_of_the_straight_line_differences(data):
    """The Writer packs a straight-line prediction's differences from two steps, this
    sample's from its base and its base's from its own (codec.pack_steps), without making
    v - 2p + q: the very bytes of making them, also where the steps are alike, equal but
    for one value, or far apart (values up to the safe range, where v - 2p + q wraps)."""
    np = numpy()
    n = data.draw(st.integers(1, 80))
    q = data.draw(st.lists(_small_values, min_size=n, max_size=n))
    p = [x + data.draw(st.sampled_from([0, 0, 1, -4, 70])) for x in q]
    kind = data.draw(st.sampled_from(["same", "one", "any"]))
    if kind == "any":
        v = data.draw(st.lists(_small_values, min_size=n, max_size=n))
    else:  # on the line through q and p, but for one value
        v = [2 * y - x for x, y in zip(q, p)]
        if kind == "one":
            v[data.draw(st.integers(0, n - 1))] += data.draw(st.sampled_from([1, -1, 2 ** 40]))
        v = [min(max(x, -(2 ** 61)), 2 ** 61 - 1) for x in v]
    order = codec.Order.between(q, p, by_size=True)
    v64, p64, q64 = (np.array(x, dtype=np.int64) for x in (v, p, q))
    want = codec.pack_ints(v, p, q, order)
    assert codec.pack_ordered(v64 - 2 * p64 + q64, order) == want
    step, last = v64 - p64, p64 - q64
    work = (np.empty(n, dtype=np.int64), last)  # the second may be `last`: written over
    assert codec.pack_steps(step, last, order, work) == want
    assert step.tolist() == (v64 - p64).tolist()  # this sample's step stays: the next one's `last`


class _FailingSample:
    """A Writer's connection whose next sample row fails to be stored (a full disk)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db, self.fail = db, False

    def execute(self, sql: str, *args: object) -> object:
        if self.fail and sql.startswith("INSERT INTO sample"):
            self.fail = False
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def close(self) -> None:
        self.db.close()


def test_the_writer_predicts_from_the_step_it_kept_or_makes_it_again(two_reads, tmp_path):
    """A Writer keeps each sample's step from its base for the next one's straight-line
    prediction; one that failed to store a sample (whose packing wrote over the kept
    step) makes it again when that sample is added again. Either way every blob is that
    of a Writer that only packs Python lists (codec.pack_ints)."""
    _, b = two_reads
    snaps = [dataclasses.replace(b, online_cpus=tuple(range(k, k + 40)) + (k * k, 7, 3 * k), t_mono=b.t_mono + k)
             for k in range(9)]

    def write(path, failing=(), lists=False):
        w = Writer(str(path), {"host": "h"})
        w._db = db = _FailingSample(w._db)
        for k, s in enumerate(snaps):
            if lists:
                w._prev_small = False  # every sample after the key takes pack_ints
            if k in failing:
                db.fail = True
                with pytest.raises(RecordingError, match="full"):
                    w.add_sample(s)
            w.add_sample(s)
        w.close()
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT seq, pred, ints FROM sample ORDER BY seq").fetchall()

    want = write(tmp_path / "lists.nettop", lists=True)
    assert [pred for _, pred, _ in want] == [0, 1] + [2] * 7
    assert write(tmp_path / "kept.nettop") == want
    assert write(tmp_path / "failed.nettop", failing=(1, 3, 4, 7)) == want


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 12), st.integers(2, 5), st.sampled_from([0, 2 ** 61 - 1, 2 ** 61, -(2 ** 61) - 1, 2 ** 63 - 1]),
       st.sampled_from([0, 2 ** 61, 2 ** 63, -(2 ** 63) - 1]), st.booleans())
def test_the_writers_vector_holds_tables_and_irq_grids_as_split_does(nirqs, width, cpu_big, total_big, shuffled):
    """IntParts keeps a CpuTable's array and a table's IRQs taken in bulk (IrqGrid) as
    blocks: the vector is `split`'s ints in the same order, None when one does not fit 64
    bits, and it says whether it is a small_vector as small_vector does."""
    from nettop.model.cpu_table import CpuTable

    np = numpy()
    rows = np.arange(12 * 11, dtype=np.int64).reshape(12, 11)
    rows[:, 0] = np.arange(100, 112)
    rows[3, 4] = cpu_big
    cpu = CpuTable(CpuTimes, rows)
    counts = (np.arange(nirqs * width, dtype=np.int64).reshape(nirqs, width) * 3 + 2 ** 32 - 40).astype(np.uint32)
    m = CountMatrix(tuple(range(40, 40 + nirqs)), counts)
    keys = list(reversed(range(nirqs))) if shuffled else list(range(nirqs))
    irqs = {40 + i: Irq(40 + i, "PCI-MSIX", f"{i}-edge", f"q{i}", CountRow(m, i), int(counts[i].sum()) + i
                        + (total_big if i == 1 else 0)) for i in keys}
    table = InterruptTable(tuple(range(width)), irqs, {"LOC": (1, 2)})
    seen: dict = {}
    for _ in range(2):  # the second walk takes the IRQs in bulk (heads as last time)
        obj = (cpu, table, (7, 8))
        want = codec.split(obj)
        parts = codec.IntParts(seen)
        tree = codec._enc(obj, parts, [])
        assert codec.skeleton_text(tree) == want[0] and parts.ints() == want[1]
        vec, small = parts.vector()
        if any(not -(2 ** 63) <= x < 2 ** 63 for x in want[1]):
            assert vec is None and not small
        else:
            assert vec.tolist() == want[1] and small == codec.small_vector(vec)
        seen = parts.kept
    bulk = [type(x).__name__ for x in parts if not isinstance(x, int)]
    assert ("IrqGrid" in bulk) == (nirqs > 8 and not shuffled) and "ndarray" in bulk  # (a table of 9 or more)


def _written_and_read(path: os.PathLike, snaps: list) -> list:
    """`snaps` through a Writer into `path`, and what a Reader gives back."""
    w = Writer(str(path), {"host": "h"})
    for s in snaps:
        w.add_sample(s)
    w.close()
    return list(Reader(str(path)).snapshots())


def test_the_writer_stores_a_changed_skeleton_even_when_it_compares_equal(two_reads, tmp_path):
    """A counter that turns from an int into a float (or a bool) with the rest unchanged
    gives a tree equal by `==`; the Writer must still store the new skeleton."""
    _, b = two_reads
    snaps = [dataclasses.replace(b, t_mono=b.t_mono + k, uptime_s=v) for k, v in enumerate((5.0, 6.0, 7, 8, 9.5))]
    back = _written_and_read(tmp_path / "r.nettop", snaps)
    assert back == snaps and [type(s.uptime_s) for s in back] == [float, float, int, int, float]


def test_a_big_vector_is_packed_fast_and_read_back_with_the_same_filters():
    """Vectors of BIG_VECTOR values or more are compressed with the fast encoder search;
    the stream reads back with the one decoder setting (and from a Writer)."""
    np = numpy()
    n = codec.BIG_VECTOR + 3
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2 ** 40, n)
    b = a + rng.integers(0, 50, n) * (rng.random(n) < 0.02)
    c = b + (b - a) + rng.integers(-3, 4, n) * (rng.random(n) < 0.02)
    al, bl, cl = a.tolist(), b.tolist(), c.tolist()
    order = codec.Order.between(al, bl, by_size=True)
    blob = codec.pack_ints(cl, bl, al, order)
    assert blob == codec.pack_diffs((c - 2 * b + a)[order.perm()])
    assert codec.unpack_ints(blob, bl, al, order) == cl
    fast = codec.lzma.compress(codec._planes([1] * n), format=codec.lzma.FORMAT_RAW, filters=codec.LZMA_FAST_FILTERS)
    assert codec.pack_ints([-1] * n)[1:] == fast  # the fast search was used (zigzag of -1 is 1)
    small = codec.pack_ints([-1] * (codec.BIG_VECTOR - 1))
    assert small[1:] == codec.lzma.compress(codec._planes([1] * (codec.BIG_VECTOR - 1)),
                                            format=codec.lzma.FORMAT_RAW, filters=codec.LZMA_FILTERS)


def test_a_run_of_kept_settings_is_taken_whole_and_gives_the_walks_values(monkeypatch):
    """A mapping of settings (IRQ affinities) or a tuple of them (a device's queues) whose
    objects are all last sample's is taken in C-level passes (IntParts.settings), with no
    `remembered` call per object; with a few re-read (the settings rotation) only those
    are walked. Either way the skeleton, ints and floats are exactly `split`'s."""
    from nettop.model.snapshot import IrqAffinity, QueueConfig

    affs = {i: IrqAffinity(i, (i % 4,), (i % 4,), None, i % 2, None, 1.5 + i) for i in range(40, 52)}
    queues = tuple(QueueConfig("rx" if i % 2 else "tx", i // 2, "f", i, "0", None, 2.5) for i in range(12))
    value = {"affs": affs, "queues": queues}
    calls: list = []
    remembered = codec.IntParts.remembered
    monkeypatch.setattr(codec.IntParts, "remembered",
                        lambda self, obj, floats: calls.append(obj) or remembered(self, obj, floats))
    seen: dict = {}
    walked = []
    reread = dict(affs)
    reread[44] = dataclasses.replace(affs[44], read_at=9.0)
    renewed = (*queues[:3], dataclasses.replace(queues[3], rps_cpus="3"), *queues[4:])
    again = (*renewed[:5], dataclasses.replace(renewed[5], read_at=7.0), *renewed[6:])
    for v in (value, {"affs": affs, "queues": renewed}, {"affs": reread, "queues": again},
              {"affs": reread, "queues": again}):
        calls.clear()
        ints, floats = [], []
        want = codec._enc(v, ints, floats)
        parts = codec.IntParts(seen)
        got_floats: list = []
        got = codec._enc(v, parts, got_floats)
        assert codec.skeleton_text(got) == codec.skeleton_text(want)
        assert (list(parts), got_floats) == (ints, floats)
        walked.append(sum(type(o) is not tuple for o in calls))
        seen = parts.kept
    # all walked first; then only the re-read queue; the re-read affinity and queue; none
    assert walked == [24, 1, 2, 0]


def _queue_settings(n: int, tag: float) -> tuple:
    from nettop.model.snapshot import BqlState, QueueConfig

    return tuple(QueueConfig("rx" if i % 3 else "tx", i, "f" if i % 2 else None, i, "0", None, tag + i) if i % 4
                 else BqlState(i, 10 * i, 20, 0, i, tag) for i in range(n))


@pytest.mark.parametrize("new_at", [(), (0,), (11,), (5, 6), (0, 1, 2), (10, 11), (0, 11), (2, 5, 9),
                                    (0, 2, 4, 6, 8, 10), (1, 3, 5, 7, 9, 11), tuple(range(12))])
def test_settings_walk_only_the_new_objects_and_take_the_runs_between_whole(new_at, monkeypatch):
    """A tuple of settings of which the rotation re-read some (new objects, at the start,
    the end, side by side, every other one, all, none) and kept the rest (last sample's
    objects): IntParts.settings takes the runs of kept ones whole and walks only the new
    ones, and its skeleton, ints and floats are exactly the plain walk's."""
    first = _queue_settings(12, 1.5)
    second = tuple(dataclasses.replace(q, read_at=9.25 + i) if i in new_at else q for i, q in enumerate(first))
    walked: list = []
    remembered = codec.IntParts.remembered
    monkeypatch.setattr(codec.IntParts, "remembered",
                        lambda self, obj, floats: walked.append(obj) or remembered(self, obj, floats))
    seen: dict = {}
    for value, want_walked in ((first, list(first)), (second, [second[i] for i in new_at]), (list(second), [])):
        walked.clear()  # a tuple (a device's queues), then a list (a mapping's values) of last sample's
        ints: list = []
        floats: list = []
        want = [codec._enc(v, ints, floats) for v in value]
        parts = codec.IntParts(seen)
        got_floats: list = []
        got = parts.settings(value, got_floats)
        assert codec.skeleton_text(got) == codec.skeleton_text(want)
        assert (list(parts), got_floats) == (ints, floats)
        assert walked == want_walked
        assert all(parts.kept[id(v)][0] is v for v in value)  # each one kept for the next sample
        seen = parts.kept


def test_a_setting_read_again_alike_has_the_same_skeleton_object():
    """A setting the rotation read again (a new object) whose skeleton is last time's gets
    last time's skeleton object, so the Writer's same_tree passes it by identity; one
    whose strings or field types differ gets its own, and every skeleton is the walk's."""
    from nettop.model.snapshot import BqlState, IrqAffinity, QueueConfig

    q = QueueConfig("rx", 3, "ff", 5, None, "0", 1.5)
    same = dataclasses.replace(q, index=4, rps_flow_cnt=9, read_at=2.5)  # other counters, same skeleton
    others = [dataclasses.replace(q, rps_cpus="f"), dataclasses.replace(q, xps_cpus=""),
              dataclasses.replace(q, read_at=None), dataclasses.replace(q, index=True),
              dataclasses.replace(q, rps_flow_cnt=5.0), dataclasses.replace(q, kind="tx")]

    def skeleton(obj: object) -> object:
        parts = codec.IntParts({})
        got = parts.remembered(obj, [])
        assert codec.skeleton_text(got) == codec.split(obj)[0]
        return got

    base = skeleton(q)
    assert skeleton(same) is base
    for other in others:
        got = skeleton(other)
        assert got is not base and codec.skeleton_text(got) != codec.skeleton_text(base)
        assert not codec.same_tree(got, base)
    bql = [BqlState(0, 1, 2, 3, 4, None), BqlState(5, 6, 7, 8, 9, None), BqlState(0, 1, 2, 3, 4, 1.0)]
    runs = [skeleton(b) for b in bql]  # all counters ({"n": 5}), then counters and a float
    assert runs[0] is runs[1] and runs[2] is not runs[0] and skeleton(dataclasses.replace(bql[2], read_at=7.0)) is runs[2]
    aff = IrqAffinity(40, (1, 2), (1,), None, 0, None, 1.0)  # tuples in its fields: its own skeleton each time
    assert codec.same_tree(skeleton(aff), skeleton(dataclasses.replace(aff, read_at=2.0)))


_ODD = st.sampled_from([1, True, 0, False, None, 1.0, -0.0, 0.0, 2 ** 70, "", "f"])
_CPUS = st.one_of(st.none(), st.lists(st.sampled_from([1, True, 2]), max_size=10).map(tuple))
_FIELDS = st.tuples(st.integers(0, 2), _ODD, _ODD, _CPUS)


def _setting(kind: int, a: object, b: object, cpus: object, read_at: object) -> object:
    from nettop.model.snapshot import BqlState, IrqAffinity, QueueConfig

    if kind == 0:
        return QueueConfig("rx", a, b, 7, None, "0", read_at)
    if kind == 1:
        return BqlState(a, b, 20, 0, 3, read_at)
    return IrqAffinity(40, cpus, (1,), None, a, b, read_at)


def _read_again_alike(seen: dict, value: tuple) -> dict:
    """Encode `value` through IntParts (with `seen`) and plainly: the same skeleton, ints
    (of the same types) and floats. The next sample's `seen`."""
    ints: list = []
    floats: list = []
    want = [codec._enc(v, ints, floats) for v in value]
    parts = codec.IntParts(seen)
    got_floats: list = []
    got = [codec._enc(v, parts, got_floats) for v in value]
    assert codec.skeleton_text(got) == codec.skeleton_text(want)
    assert (list(parts), got_floats) == (ints, floats)
    assert list(map(type, parts)) == list(map(type, ints))  # 1 stays 1, True stays True
    assert list(map(str, got_floats)) == list(map(str, floats))  # -0.0 stays -0.0
    return parts.kept


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(_FIELDS, min_size=1, max_size=5), st.data())
def test_a_setting_read_again_as_it_was_encodes_as_the_walk_gives_it(first, data):
    """The rotation's settings read again, tick after tick: new objects whose fields are
    last time's, or last time's with one field of another type or sign (1 and True, 0.0
    and -0.0, a float in an int field, True among a tuple's CPUs), or new ones, with a
    read_at a float or not. Those found by their fields (IntParts.again) give exactly
    the walk's skeleton, ints and floats."""
    fields = list(first)
    seen: dict = {}
    for tick in range(data.draw(st.integers(2, 6))):
        read_at = data.draw(st.sampled_from([float(tick), None, tick, -0.0]))
        seen = _read_again_alike(seen, tuple(_setting(*f, read_at) for f in fields))
        for k in range(len(fields)):
            how = data.draw(st.sampled_from(["same", "same", "a", "b", "cpus", "new"]))
            kind, a, b, cpus = fields[k]
            if how == "new":
                fields[k] = data.draw(_FIELDS)
            elif how != "same":
                odd = data.draw(_CPUS if how == "cpus" else _ODD)
                fields[k] = (kind, odd if how == "a" else a, odd if how == "b" else b, odd if how == "cpus" else cpus)


@pytest.mark.parametrize("pair", [(1, True), (True, 1), (0, False), (0, 0.0), (0.0, -0.0), (1, 1.0)])
def test_a_setting_read_again_with_an_equal_field_of_another_type_is_walked(pair):
    """Equal is not alike: 1 and True, 0.0 and -0.0 compare equal but are stored apart."""
    from nettop.model.snapshot import BqlState, IrqAffinity, QueueConfig

    x, y = pair
    for make in (lambda v, t: QueueConfig("rx", v, "f", 7, None, "0", t),
                 lambda v, t: BqlState(3, v, 20, 0, 3, t),
                 lambda v, t: IrqAffinity(40, (2, v), (1,), None, 0, None, t),
                 lambda v, t: IrqAffinity(40, (2,), (1,), None, v, None, t)):
        seen: dict = {}
        for t, v in ((1.0, x), (2.0, x), (3.0, y), (4.0, x)):
            seen = _read_again_alike(seen, (make(v, t),))


def test_a_setting_read_again_unchanged_is_not_walked_again(monkeypatch):
    """Read again with the same fields (a new object, a new read_at), a setting takes the
    skeleton and ints of the last one found by those fields; one whose fields changed,
    or whose read_at is not a float, is walked."""
    from nettop.model.snapshot import IrqAffinity, QueueConfig

    walked: list = []
    walk = codec._enc_items
    monkeypatch.setattr(codec, "_enc_items", lambda values, ints, floats: walked.append(values) or walk(values, ints, floats))
    seen: dict = {}
    q = QueueConfig("rx", 3, "ff", 5, None, "0", 1.0)
    a = IrqAffinity(40, tuple(range(16)), (3,), None, 0, False, 1.0)
    for value, want in (((q, a), 2), ((dataclasses.replace(q, read_at=2.0), dataclasses.replace(a, read_at=2.0)), 0),
                        ((dataclasses.replace(q, rps_cpus="f", read_at=3.0), dataclasses.replace(a, read_at=None)), 2),
                        ((dataclasses.replace(q, rps_cpus="f", read_at=4.0), dataclasses.replace(a, read_at=4.0)), 0)):
        ints: list = []
        floats: list = []
        plain = [codec._enc(v, ints, floats) for v in value]
        walked.clear()
        parts = codec.IntParts(seen)
        got_floats: list = []
        got = [parts.remembered(v, got_floats) for v in value]
        assert codec.skeleton_text(got) == codec.skeleton_text(plain)
        assert (list(parts), got_floats) == (ints, floats)
        assert sum(type(v) is tuple and len(v) in (6, 7) for v in walked) == want  # the settings' own field walks
        seen = parts.kept


@pytest.mark.parametrize("odd", [None, True, 2.0, "x", 2 ** 70, -(2 ** 64)])
def test_a_mapping_of_plain_ints_is_taken_in_one_step_as_the_walk_gives_it(odd):
    """A mapping whose values are all plain ints (the CPUs' NUMA nodes) is taken in one
    step with a [0] * n skeleton shared from sample to sample; one with any other value
    (a bool, a float, a string) is walked. Either way the skeleton, ints and floats are
    those of walking each value, for `split` and for the Writer's IntParts."""
    nodes = {cpu: cpu // 4 for cpu in range(12)}
    if odd is not None:
        nodes[5] = odd
    for ints in ([], codec.IntParts({})):
        floats: list = []
        got = codec._enc(nodes, ints, floats)
        want_ints: list = []
        want_floats: list = []
        want = {"k": list(nodes), "v": [codec._enc(v, want_ints, want_floats) for v in nodes.values()]}
        assert codec.skeleton_text(got) == codec.skeleton_text(want)
        assert (list(ints), floats) == (want_ints, want_floats)
        again = codec._enc(dict(nodes), [], [])
        assert (again["v"] is got["v"]) == (odd is None or type(odd) is int)


def test_per_cpu_tables_keep_their_own_skeletons_as_cpus_and_constants_change(two_reads, tmp_path):
    """The writer hands a per-CPU table the same skeleton object while its class, CPUs
    and constant fields are those of last time (codec._table_skeleton); a table whose
    CPUs change (hotplug) or whose constant flips must still store its own, and every
    sample read back must be the one written."""
    from nettop.model.cpu_table import CpuTable
    from nettop.model.snapshot import SoftnetRow

    _, b = two_reads
    np = numpy()

    def table(cpus: list[int], consts: tuple, k: int) -> CpuTable:
        width = 8 - len(consts)  # SoftnetRow's int fields, the rest constant
        values = np.arange(len(cpus) * width, dtype=np.int64).reshape(len(cpus), width) + k
        values[:, 0] = cpus
        return CpuTable(SoftnetRow, values, consts)

    many, fewer = list(range(12)), [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]
    kinds = [(many, (True,)), (many, (True,)), (many, (False,)), (fewer, (False,)), (fewer, (True,)),
             (many, (None, True)), (many, (None, False)), (many, (True,))]
    snaps = [dataclasses.replace(b, t_mono=b.t_mono + k, softnet=table(cpus, consts, k))
             for k, (cpus, consts) in enumerate(kinds)]
    back = _written_and_read(tmp_path / "r.nettop", snaps)
    assert [dict(s.softnet) for s in back] == [dict(s.softnet) for s in snaps]
    assert [sorted(s.softnet) for s in back] == [cpus for cpus, _ in kinds]
    assert [(s.softnet[0].backlog is None, s.softnet[0].cpu_from_column) for s in back] == \
        [(len(c) == 2, c[-1]) for _, c in kinds]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(0), st.integers(0, 255), st.integers(0, (1 << 64) - 1)), max_size=300),
       st.integers(0, 4))
def test_byte_planes_of_an_array_are_those_of_its_bytes(values, extra):
    """codec._planes_of_words (the Writer's array path) cuts the same planes, byte for
    byte, as _planes_of does from the values' little-endian bytes (the list path)."""
    from nettop.model.counts import numpy

    np = numpy()
    z = np.array(values, dtype=np.uint64)
    n = len(values) + extra  # the rest of the vector: zeros after the head
    assert codec._planes_of_words(z, n) == codec._planes_of(z.astype("<u8").tobytes(), n)
