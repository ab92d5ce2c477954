"""Format 2 of the recording: counters as 64-bit lanes of one int, chains stored largest
step first in trimmed byte planes, timestamps under the CRC; and format-1 files (written
by nettop before format 2) still replay exactly."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

from nettop.collectors.host import HostReader
from nettop.record import codec
from nettop.record.store import KEY_EVERY, SCHEMA_VERSION, Reader, Writer

DATA = Path(__file__).parent / "data" / "recording"
EDGES = [0, 1, -1, 2 ** 63 - 1, -(2 ** 63), 2 ** 32, -(2 ** 40) + 7, 255, 256]


def test_lanes_hold_every_signed_64_bit_value():
    assert codec.unlanes(codec.lanes(EDGES), len(EDGES)) == EDGES
    assert codec.fits(EDGES)
    for bad in (2 ** 63, -(2 ** 63) - 1, 2 ** 64 - 1):
        assert not codec.fits([1, bad])
        with pytest.raises(OverflowError):
            codec.lanes([1, bad])
    with pytest.raises(codec.CodecError):
        codec.unlanes(-1, 3)  # not a lanes value: damaged input is an error, not numbers


@pytest.mark.parametrize("seed", range(6))
def test_straight_line_prediction_in_lanes_equals_it_in_lists(seed):
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 9, 300])
    a = [rnd.choice(EDGES[:3] + [rnd.randrange(-10 ** 12, 10 ** 12)]) for _ in range(n)]
    b = [v + rnd.randrange(-1000, 10 ** 6) for v in a]
    c = [2 * y - x + rnd.randrange(-(2 ** 40), 2 ** 40) for x, y in zip(a, b)]
    order = codec.Order.between(a, b, by_size=True)
    blob = codec.pack_ints(c, b, a, order)
    assert blob[0] == codec.LZMA_PLANES_2
    assert codec.unpack_ints(blob, b, a, order) == c
    d, count = codec.residual(blob)
    assert count == n
    fwd = order.fwd or (lambda v: v)
    lanes_c = codec.predict_lanes(2, d, n, codec.lanes(fwd(b)), codec.lanes(fwd(a)))
    stored = codec.unlanes(lanes_c, n)
    assert (list(order.inv(stored)) if order.inv else stored) == c
    key = codec.pack_ints(c)
    dk, _ = codec.residual(key)
    assert codec.unlanes(codec.predict_lanes(0, dk, n), n) == c


def test_a_varint_residual_of_more_than_64_bits_is_exact():
    """Huge differences fall back to zlib varints; lanes arithmetic still gets them."""
    base = [2 ** 62, -(2 ** 62), 5]
    values = [-(2 ** 62), 2 ** 62, 6]  # differences of 2**63 in both directions
    blob = codec.pack_ints(values, base)
    d, n = codec.residual(blob)
    assert codec.unlanes(codec.predict_lanes(1, d, n, codec.lanes(base)), n) == values
    wide = [2 ** 63 - 1, -(2 ** 63), 0]
    d, n = codec.residual(codec.pack_ints(wide, [-(2 ** 63), 2 ** 63 - 1, 0]))
    assert codec.unlanes(codec.predict_lanes(1, d, n, codec.lanes([-(2 ** 63), 2 ** 63 - 1, 0])), n) == wide


def test_chain_order_puts_the_biggest_steps_first_and_trims_planes():
    a = [0, 0, 0, 0, 0]
    b = [1, 0, 70000, 300, 0]
    assert codec.Order.between(a, b, by_size=True).fwd(["p0", "p1", "p2", "p3", "p4"]) == ("p2", "p3", "p0", "p1", "p4")
    assert codec.Order.between(a, b).fwd(["p0", "p1", "p2", "p3", "p4"]) == ("p0", "p2", "p3", "p1", "p4")
    big_first = [140000, 600, 2, 0, 0] + [0] * 1000
    raw = codec._planes([2 * v for v in big_first])
    width = raw[0]
    assert width == 3
    lengths = raw[5:5 + 4 * width]
    assert [int.from_bytes(lengths[i:i + 4], "little") for i in range(0, 12, 4)] == [3, 2, 1]
    assert len(raw) == 5 + 12 + 6  # 1005 values, 6 bytes of planes


@pytest.fixture(scope="module")
def reads():
    """Real reads of this host, more than two chains' worth."""
    out = []
    with HostReader() as r:
        for _ in range(2 * KEY_EVERY + 30):
            out.append(r.read())
    return out


def recorded(path: str, snaps) -> str:
    """A format-2 file of `snaps`, written by the recorder's Writer."""
    w = Writer(path, {"host": "h"})
    for snap in snaps:
        w.add_sample(snap)
    w.close()
    return path


def tamper(path: str, sql: str) -> None:
    """Change the file behind the Writer's back, as damage or another tool would."""
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()


def test_any_access_order_gives_the_recorded_snapshots(reads, tmp_path):
    path = recorded(str(tmp_path / "r.nettop"), reads)
    r = Reader(path)
    assert r.version == SCHEMA_VERSION == 4 and r.meta["schema_version"] == "4"
    assert list(r.snapshots()) == reads
    rnd = random.Random(3)
    for pos in [len(reads) - 1, 0, KEY_EVERY + 5, KEY_EVERY + 4, 3, KEY_EVERY * 2 + 1] + \
            [rnd.randrange(len(reads)) for _ in range(30)]:
        if rnd.random() < 0.5:
            r.drop_cache()
        assert r.snapshot(r.index[pos].seq) == reads[pos]
    assert r.warnings == []


def test_values_beyond_64_bits_make_key_samples_and_come_back_exact(reads, tmp_path):
    """A u64 counter read as 2**64 - 1 (a driver's "unknown") cannot live in lanes: that
    sample and the next are stored whole, the chain goes on around them."""
    name = next(iter(reads[0].links))
    # one real read advanced by hand: the host's own interfaces coming and going between
    # reads (another test's namespace being torn down) would start new chains of their own
    base = reads[0]
    snaps = [dataclasses.replace(base, t_mono=base.t_mono + i, t_wall=base.t_wall + i, links={
        **base.links, name: dataclasses.replace(base.links[name], rx_bytes=base.links[name].rx_bytes + 1000 * i)})
        for i in range(12)]
    for i in (5,):
        link = dataclasses.replace(snaps[i].links[name], rx_dropped=2 ** 64 - 1)
        snaps[i] = dataclasses.replace(snaps[i], links={**snaps[i].links, name: link})
    path = recorded(str(tmp_path / "wide.nettop"), snaps)
    r = Reader(path)
    assert list(r.snapshots()) == snaps
    preds = [p for (p,) in r._db.execute("SELECT pred FROM sample ORDER BY seq")]
    assert preds[5] == 0 and preds[6] == 0 and preds[7] == 1
    for pos in (7, 5, 11, 6):
        r.drop_cache()
        assert r.snapshot(r.index[pos].seq) == snaps[pos]


def test_a_changed_timestamp_is_caught_by_the_crc(reads, tmp_path):
    path = recorded(str(tmp_path / "t.nettop"), reads[:20])
    key = next_key_after(path, 10)
    tamper(path, "UPDATE sample SET t_mono = t_mono + 0.5 WHERE seq = 10")
    r = Reader(path)
    got = list(r.snapshots())
    # the changed row and the rest of its chain are skipped, never wrong
    assert got == reads[:9] + (reads[key - 1:20] if key is not None else [])
    assert r.warnings and "sample 10" in r.warnings[0]


def next_key_after(path: str, seq: int) -> int | None:
    """The first sample after `seq` stored whole (a chain's start): every KEY_EVERY
    samples, and also where the host's layout changed (an interface came or went while
    the fixture read the live host, which other tests on a busy machine cause)."""
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT MIN(seq) FROM sample WHERE pred = 0 AND seq > ?", (seq,)).fetchone()
    finally:
        db.close()
    return row[0] if row and row[0] is not None else None


def test_a_damaged_row_costs_its_chain_from_there_on_not_more(reads, tmp_path):
    path = recorded(str(tmp_path / "d.nettop"), reads)
    key = next_key_after(path, 30) or len(reads) + 1
    # flip the first byte: a zeroblob is no damage when the row's interrupt delta was zeros already
    # (in Python: SQL's || would turn the blob into text)
    db = sqlite3.connect(path)
    before = bytes(db.execute("SELECT ints FROM sample WHERE seq = 30").fetchone()[0])
    assert before
    db.execute("UPDATE sample SET ints = ? WHERE seq = 30", (bytes([before[0] ^ 0xFF]) + before[1:],))
    db.commit()
    db.close()
    assert bytes(sqlite3.connect(path).execute("SELECT ints FROM sample WHERE seq = 30").fetchone()[0]) != before
    r = Reader(path)
    got = list(r.snapshots())
    assert key <= KEY_EVERY + 1  # a chain is never longer than KEY_EVERY
    assert got == reads[:29] + reads[key - 1:]
    assert len(r.warnings) == 1
    t = time.perf_counter()
    assert all(r.snapshot(s) is None for s in range(31, key))
    assert time.perf_counter() - t < 5  # known-broken chain: no re-decoding per sample (loose bound)


def _digest(snap) -> str:
    """The snapshot itself, not how a codec splits it (format 3 splits differently)."""
    return hashlib.sha1(repr(snap).encode()).hexdigest()


@pytest.mark.parametrize("version, writer", [(1, "3b2ce55"), (2, "b191cfe"), (3, "83cb218")])
def test_a_recording_of_an_older_format_replays_exactly(version, writer):
    """formatN.nettop: 130 samples of a generated 4-CPU host written by nettop `writer`,
    its host renamed at sample 100 (a new configuration); beside it the digests of the
    snapshots it recorded. Format 1: keys every 60 samples, chains in moved-first order,
    full byte planes. Format 2: trimmed planes, runs of counters still written as zeros.
    Format 3 (made by tests/data/recording/generate.py): floats as plain doubles."""
    r = Reader(str(DATA / f"format{version}.nettop"))
    want = json.loads((DATA / f"format{version}.sha1.json").read_text())
    assert r.version == version and r.warnings == []
    assert [_digest(s) for s in r.snapshots()] == want
    for pos in (89, 0, 101, 100, 129, 61, 62, 63):
        r.drop_cache()
        assert _digest(r.snapshot(r.index[pos].seq)) == want[pos]
    assert {s.host for s in r.snapshots(99, 103)} == {"gen4", "gen4-renamed"}


def test_format_3_writes_runs_of_counters_as_their_length(reads):
    """Format 3: a tuple of counters (a CPU's times, an IRQ's per-CPU counts) is {"n": k}
    in the skeleton, not k zeros; it decodes to the same snapshot, and a damaged run
    marker is a CodecError, not a crash or a huge allocation."""
    skeleton, ints, floats = codec.split(reads[0])
    assert '"c":"CpuTimes","f":{"n":11}' in skeleton  # a dataclass of only counters
    assert '"c":"InterruptTable","f":[{"n":' in skeleton  # a tuple of ints (the CPU ids)
    parsed = json.loads(skeleton)
    assert codec.join(parsed, ints, floats) == reads[0]
    for bad in ('{"n":-1}', '{"n":1e9}', '{"n":"3"}', '{"n":99999999999}', '{"n":2,"x":1}'):
        damaged = json.loads(skeleton.replace('{"n":2}', bad, 1).replace('{"n":10}', bad, 1))
        with pytest.raises(codec.CodecError):
            codec.join(damaged, ints, floats)


def test_format_4_packs_the_floats_and_a_format_3_reader_cannot_misread_them(reads):
    """Format 4: a sample's floats (mostly settings' `read_at`, a few distinct values) are
    zlib'd behind a tag byte when that is smaller. A format-3 reader takes the blob as
    plain doubles: it must fail ("partial value") or get another count, which its
    decoder refuses, never a vector of the right length with wrong numbers."""
    rnd = random.Random(4)
    vectors = [codec.split(s)[2][2:] for s in reads[:3]]
    vectors += [[rnd.random() for _ in range(n)] for n in (0, 1, 7, 300)]  # not compressible
    vectors += [[1e9 + 0.5] * 2000, [float("inf"), float("nan"), -0.0] * 10]
    for floats in vectors:
        blob = codec.pack_floats_tagged(floats)
        back = codec.unpack_floats_tagged(blob)
        assert len(back) == len(floats) and all(a == b or (a != a and b != b) for a, b in zip(back, floats))
        assert len(blob) <= 8 * len(floats) + 1
        try:
            assert len(codec.unpack_floats(blob)) != len(floats)
        except codec.CodecError:
            pass
    assert len(codec.pack_floats_tagged([1e9 + 0.5] * 2000)) < 100
    good = codec.pack_floats_tagged([2.5] * 100)
    for bad in (good[:-3], good + b"x", b"\x07" + good[1:], b"\x01not zlib", b"", b"\x00" + b"\x00" * 7):
        with pytest.raises(codec.CodecError):
            codec.unpack_floats_tagged(bad)


def test_a_sample_that_failed_to_commit_leaves_the_next_ones_exact(reads, tmp_path):
    """A sample whose transaction fails (a full disk, an I/O error) is not in the file,
    and nothing the Writer worked out for it is used to predict the next ones (they are
    predicted from the last committed samples): those come back exactly."""
    import sqlite3 as sq

    from nettop.record.store import RecordingError

    class Failing:
        def __init__(self, db):
            self.db, self.fail = db, False

        def execute(self, sql, *args):
            if self.fail and sql.startswith("INSERT INTO sample VALUES"):
                self.fail = False
                raise sq.OperationalError("disk I/O error")
            return self.db.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.db, name)

    path = str(tmp_path / "r.nettop")
    w = Writer(path, {"host": "h"})
    w._db = db = Failing(w._db)
    lost = {5, 6, 40}  # before a chain's third sample, before the next, one in the middle
    for i, snap in enumerate(reads[:60]):
        if i in lost:  # the one before again, so it moved nowhere: were it kept as the last
            db.fail = True  # sample, the next would miss the errors where that one moved
            with pytest.raises(RecordingError):
                w.add_sample(reads[i - 1])
        w.add_sample(snap)
    w.close()
    r = Reader(path)
    assert list(r.snapshots()) == reads[:60]
    assert r.warnings == []
