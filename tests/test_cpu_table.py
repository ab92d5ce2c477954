"""A big host's per-CPU files as columns (nettop/model/cpu_table.py): a `CpuTable` reads as
the dict of rows the parser made before, and every consumer gets the same answers from it
(rates, the doctor's window, the recording, the JSON, Prometheus); odd files keep the
dict and its problems."""

from __future__ import annotations

import dataclasses
import json
import pickle
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from nettop.collectors.cpustat import parse_stat
from nettop.collectors.host import HostReader
from nettop.collectors.softirqs import parse_softirqs
from nettop.collectors.softnet import parse_softnet
from nettop.collectors.unchanged import LastAnswer
from nettop.doctor.window import Window
from nettop.kernel.sysroot import SysRoot
from nettop.model import cpu_table
from nettop.model.cpu_columns import ARRAYS_FROM, SOFTIRQS, SOFTNET, TIMES, _gather, columns
from nettop.model.cpu_table import CpuTable
from nettop.model.rates import compute_rates
from nettop.model.snapshot import CpuTimes, SoftirqCounts, SoftnetRow, Snapshot
from nettop.model.timeline import Point
from nettop.output.snapshot_json import build_document
from nettop.record import codec
from nettop.record.store import Reader, Writer
from nettop.serve.exposition import render
from nettop.serve.metrics import snapshot_families

sys.path.insert(0, str(Path(__file__).parent))
from treegen import generate_tree  # noqa: E402

N = ARRAYS_FROM + 44  # CPUs: enough for the columns
OFFLINE = {3, 77}  # the kernel prints no line for these
CPUS = [c for c in range(N + len(OFFLINE)) if c not in OFFLINE]


def _stat_text(big: int | None = None) -> tuple[str, dict[int, CpuTimes]]:
    rows = {c: CpuTimes(c, 1000 + c, c % 3, 500 + 2 * c, 10 ** 9 + c, 7, 100 + c, 300 + c, 0, c % 2, 0)
            for c in CPUS}
    if big is not None:
        rows[CPUS[5]] = dataclasses.replace(rows[CPUS[5]], idle=big)
    head = "cpu  " + " ".join("0" for _ in range(10))
    lines = [f"cpu{c} " + " ".join(str(v) for v in dataclasses.astuple(r)[1:]) for c, r in rows.items()]
    return "\n".join([head, *lines, "intr 123 4 5", "ctxt 9", ""]), rows


def _softirqs_text() -> tuple[str, dict[int, SoftirqCounts]]:
    rows = {c: SoftirqCounts(c, 40_000 + 7 * c, 300 + c) for c in CPUS}
    header = " " * 10 + "".join(f"CPU{c:<8d}" for c in CPUS)
    body = [f"{name:>8}:" + "".join(f" {v:10d}" for v in vals) for name, vals in (
        ("HI", [0] * len(CPUS)), ("TIMER", [5] * len(CPUS)),
        ("NET_TX", [r.net_tx for r in rows.values()]), ("NET_RX", [r.net_rx for r in rows.values()]))]
    return "\n".join([header, *body, ""]), rows


def _softnet_text(columns: int = 13) -> tuple[str, dict[int, SoftnetRow]]:
    rows = {c: SoftnetRow(c, 0xfffff000 + c, c % 5, 3 * c, 900 + c, c % 7, c % 4, True) for c in CPUS}
    lines = []
    for r in rows.values():
        f = [r.processed, r.dropped, r.time_squeeze, 0, 0, 0, 0, 0, 0, r.received_rps, r.flow_limit_count,
             r.backlog, r.cpu, 1, 2][:columns]
        lines.append(" ".join(f"{v:08x}" for v in f))
    return "\n".join(lines) + "\n", rows


def _one_count_moved(text: str) -> str:
    """`text` with one digit of the last CPU's counts changed (1 -> 2, else -> 1)."""
    if text.startswith("cpu"):
        k = text.index(f"cpu{CPUS[-1]} ") + len(f"cpu{CPUS[-1]} ")  # its user time
    elif "NET_RX" in text:
        k = len(text.rstrip("\n")) - 1  # NET_RX, the last CPU's
    else:
        k = text.rindex("\n", 0, len(text) - 1) + 1  # processed, on the last line
    return text[:k] + ("2" if text[k] == "1" else "1") + text[k + 1:]


def test_each_big_file_is_a_table_equal_to_the_dict_of_its_rows():
    for (text, want), parse in ((_stat_text(), parse_stat), (_softirqs_text(), parse_softirqs),
                                (_softnet_text(), parse_softnet), (_softnet_text(15), parse_softnet)):
        got, problems = parse(text)
        assert type(got) is CpuTable and not problems
        assert got == want and want == got and not (got != want)
        assert list(got) == CPUS and len(got) == len(want) and set(got.keys()) == set(want)
        assert dict(got.items()) == want and list(got.values()) == list(want.values())
        assert got[CPUS[9]] == want[CPUS[9]] and got.get(3) is None and 3 not in got and "x" not in got
        with pytest.raises(KeyError):
            got[3]
        assert pickle.loads(pickle.dumps(got)) == want and type(pickle.loads(pickle.dumps(got))) is dict
        assert got == parse(text)[0]  # table against table
        moved = parse(_one_count_moved(text))[0]
        assert type(moved) is CpuTable and moved != got and got != moved


def test_a_small_host_keeps_dicts_and_numpy_unloaded():
    text = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8 9 10\nintr 0\n"
    got, _ = parse_stat(text)
    assert type(got) is dict and got[1] == CpuTimes(1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)


@pytest.mark.parametrize("make, parse, expect_problem", [
    # a value beyond int64 (2**63 is a valid /proc/stat u64): the exact int, in a dict
    (lambda: _stat_text(big=1 << 63), parse_stat, False),
    (lambda: _stat_text(big=10 ** 18 + 5), parse_stat, False),  # 19 digits: the dict, exact
    # an old kernel's 8 columns (no guest, guest_nice): 0 for them, in a dict
    (lambda: (_stat_text()[0].replace(" 0 1 0\n", " 0\n").replace(" 0 0 0\n", " 0\n"), None), parse_stat, False),
    # a malformed field: that line is a Problem, the others a dict
    (lambda: (_stat_text()[0].replace("cpu10 1010", "cpu10 10x0"), None), parse_stat, True),
    # softnet_stat of a kernel without the CPU column: lines are positional, a dict
    (lambda: _softnet_text(11), parse_softnet, False),
    # a CPU id printed twice: a Problem, a dict
    (lambda: (_softnet_text()[0].replace(f" {CPUS[7]:08x}\n", f" {CPUS[6]:08x}\n"), None),
     parse_softnet, True),
])
def test_odd_big_files_keep_the_dict_and_its_problems(make, parse, expect_problem):
    text, want = make()
    got, problems = parse(text)
    assert type(got) is dict
    assert bool(problems) == expect_problem
    if want is not None:
        if parse is parse_softnet:  # positional: line i is CPU i without online_cpus
            want = {i: dataclasses.replace(r, cpu=i, backlog=None, flow_limit_count=r.flow_limit_count,
                                           cpu_from_column=False) for i, r in enumerate(want.values())}
        assert got == want


def test_a_table_cannot_be_changed():
    table, _ = parse_stat(_stat_text()[0])
    with pytest.raises(ValueError):
        table.array[0, 1] = 5
    with pytest.raises(TypeError):
        table[0] = CpuTimes(0, 0, 0, 0, 0, 0, 0, 0, 0)  # type: ignore[index]
    with pytest.raises(AttributeError):
        table.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        hash(table)
    cols = columns(table, TIMES)
    assert cols is not None
    with pytest.raises(ValueError):
        cols.values[0, 0] = 1


def test_a_table_is_built_from_its_own_copy_of_the_array():
    np = pytest.importorskip("numpy")
    raw = np.zeros((300, 11), np.int64)
    raw[:, 0] = np.arange(300)
    view = raw[:, :]
    table = CpuTable(CpuTimes, view)
    raw[5, 4] = 99  # the reader's own array, changed after: the table keeps what it was given
    assert table[5].idle == 0
    with pytest.raises(ValueError):
        CpuTable(CpuTimes, np.zeros((3, 11), np.int64))  # CPU 0 three times
    with pytest.raises(ValueError):
        CpuTable(SoftnetRow, raw[:, :7], (5,))  # a constant must be None or a bool


def test_rows_are_made_when_asked_and_stay_the_same_objects():
    table, _ = parse_softnet(_softnet_text()[0])
    first = table[CPUS[0]]
    assert table[CPUS[0]] is first and table._all is None  # one row made, kept
    for c in CPUS[1:cpu_table._ONE_BY_ONE + 2]:
        table[c]
    assert table._all is not None  # then all at once, the ones handed out among them
    assert table[CPUS[0]] is first and next(iter(table.values())) is first


def test_threads_asking_at_once_get_equal_rows():
    text, want = _stat_text()
    for _ in range(5):
        table, _ = parse_stat(text)
        got: list[dict] = []
        go = threading.Barrier(4)

        def ask() -> None:
            go.wait()
            got.append({c: table[c] for c in reversed(CPUS)})
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(g == want for g in got) and table == want


def test_the_columns_are_the_tables_array_and_those_a_dict_gives():
    for (text, want), parse, fields in ((_stat_text(), parse_stat, TIMES), (_softirqs_text(), parse_softirqs, SOFTIRQS),
                                        (_softnet_text(), parse_softnet, SOFTNET)):
        table, _ = parse(text)
        got, slow = columns(table, fields), _gather(want, fields)
        assert got is not None and slow is not None
        assert got.cpus == slow.cpus and got.values.tolist() == slow.values.tolist()
        assert got.values.base is table.array  # a view: no copy, no rows
        assert table._all is None and not table._some


def test_last_answer_hands_out_the_table_itself_and_copies_of_a_dict():
    text = _stat_text()[0]
    last: LastAnswer[CpuTimes] = LastAnswer()
    a, _ = last.get(text, lambda: parse_stat(text))
    b, _ = last.get(text, lambda: parse_stat(text))
    assert a is b and last.hits == 1
    small = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 0\n"
    c, _ = last.get(small, lambda: parse_stat(small))
    d, _ = last.get(small, lambda: parse_stat(small))
    assert c == d and c is not d


# --- a whole snapshot: tables and dicts give the same everything --------------------


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("cputable")
    return [generate_tree(base / f"t{step}", cpus=N, irqs=64, queues=4, offline=(5,), step=step) for step in (0, 1)]


def _read(trees) -> tuple[Snapshot, Snapshot]:
    out = []
    for tree in trees:
        with HostReader(SysRoot(str(tree))) as r:
            out.append(r.read())
    a, b = out
    return a, dataclasses.replace(b, t_mono=a.t_mono + 1.0)


@pytest.fixture
def snaps(trees):
    """Two reads of a generated 300-CPU tree a second apart (tables, no row made yet), and
    the same as dicts (from reads of their own)."""
    a, b = _read(trees)
    assert all(type(getattr(s, f)) is CpuTable for s in (a, b) for f in ("cpu_times", "softirqs", "softnet"))
    return (a, b), tuple(_as_dicts(s, other) for s, other in zip((a, b), _read(trees)))


def _as_dicts(s: Snapshot, rows: Snapshot | None = None) -> Snapshot:
    """`s` with dicts of rows for tables (those of `rows`, a read of the same files, so
    that no row of `s`'s tables is made)."""
    rows = rows or s
    return dataclasses.replace(s, cpu_times=dict(rows.cpu_times.items()), softirqs=dict(rows.softirqs.items()),
                               softnet=dict(rows.softnet.items()))


def test_a_snapshot_of_tables_equals_that_of_dicts(snaps):
    (a, b), (da, db) = snaps
    assert a == da and db == b and a != db
    assert all(type(getattr(s, f)) is dict for s in (da, db) for f in ("cpu_times", "softirqs", "softnet"))


def test_rates_doctor_json_and_prometheus_are_those_of_dicts(snaps):
    (a, b), (da, db) = snaps
    r, dr = compute_rates(a, b), compute_rates(da, db)
    assert dict(r.cpus.items()) == dict(dr.cpus.items()) and r.problems == dr.problems
    w, dw = Window([Point(a, None), Point(b, r)]), Window([Point(da, None), Point(db, dr)])
    assert w.cpu_pct() == dw.cpu_pct() and w.softnet() == dw.softnet() and w.net_rx() == dw.net_rx()
    made = [t for s in (a, b) for t in (s.cpu_times, s.softirqs, s.softnet) if t._all is not None or t._some]
    assert not made  # the rates (CpuRates' backlog included) and the doctor made no row
    assert json.dumps(build_document(a, b, r), sort_keys=True) == json.dumps(build_document(da, db, dr), sort_keys=True)
    assert render(snapshot_families(b)) == render(snapshot_families(db))


def test_the_walk_of_a_table_is_that_of_its_rows(snaps):
    (a, b), (da, db) = snaps
    for s, ds in ((a, da), (b, db)):
        got, parts_of = codec.split(s), codec.split_parts(s)
        assert not [t for t in (s.cpu_times, s.softirqs, s.softnet) if t._all is not None or t._some]  # no row made
        assert got == codec.split(ds)
        tree, parts, floats = parts_of
        assert (codec.skeleton_text(tree), parts.ints(), floats) == got
        assert parts.array().tolist() == got[1]
        assert codec.join(json.loads(got[0]), got[1], got[2]) == s


def _samples(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT seq, config_id, base_seq, pred, key_seq, ints, floats, crc FROM sample "
                          "ORDER BY seq").fetchall() + db.execute("SELECT * FROM config ORDER BY id").fetchall()


def test_a_recording_of_tables_is_byte_for_byte_that_of_dicts_and_reads_back(snaps, tmp_path):
    """The dicts' recording is what the recorder wrote before tables existed (the walk of a
    dict is unchanged): the file format is the same, and it reads back as the snapshots."""
    (a, b), (da, db) = snaps
    c = dataclasses.replace(a, t_mono=b.t_mono + 1.0)  # the counters of `a` again: differences back
    dc = _as_dicts(c)
    for name, seq in (("tables", (a, b, c, b)), ("dicts", (da, db, dc, db))):
        w = Writer(str(tmp_path / f"{name}.nettop"), {"host": "h"})
        for s in seq:
            w.add_sample(s, [])
        w.close()
    assert _samples(tmp_path / "tables.nettop") == _samples(tmp_path / "dicts.nettop")
    r = Reader(str(tmp_path / "tables.nettop"))
    back = list(r.snapshots())
    r.close()
    assert back == [a, b, c, b] and type(back[0].cpu_times) is dict
