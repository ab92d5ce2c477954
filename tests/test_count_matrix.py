"""The followed IRQs' counts as one matrix (nettop/model/counts.py) give exactly what the
per-IRQ tuples gave: to every reader of a tuple, to the rates, the doctor and the codec."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nettop.doctor import window as W
from nettop.doctor.window import Window
from nettop.model.counters import U32
from nettop.model.counts import CountMatrix, CountRow, table_matrix
from nettop.model.rates import compute_rates, rate_columns
from nettop.model.snapshot import InterruptTable, Irq, Snapshot
from nettop.model.timeline import Point
from nettop.record import codec

NAMES = ("eth0-TxRx-0", "eth0-TxRx-1", "eth0-TxRx-2", "eth1-rx-0")


def _tables(cpus, rows):
    """The same counts as a matrix table (the sysfs reader's) and as tuples."""
    irqs = tuple(range(40, 40 + len(rows)))
    m = CountMatrix(irqs, np.array(rows, dtype=np.uint32).reshape(len(rows), len(cpus)))
    as_matrix = {irq: Irq(irq, "PCI-MSIX", f"{i}-edge", NAMES[i % 4], CountRow(m, i), sum(rows[i]))
                 for i, irq in enumerate(irqs)}
    as_tuples = {irq: Irq(irq, "PCI-MSIX", f"{i}-edge", NAMES[i % 4], tuple(rows[i]), sum(rows[i]))
                 for i, irq in enumerate(irqs)}
    return InterruptTable(cpus, as_matrix), InterruptTable(cpus, as_tuples)


def _snap(t, table):
    return Snapshot(t_mono=t, t_wall=1_700_000_000 + t, host="h", kernel="k",
                    online_cpus=table.cpus, interrupts=table)


def test_a_row_reads_as_the_tuple_of_its_counts():
    m = CountMatrix((40, 41), np.array([[1, 2, 3], [4, 0, U32 - 1]], dtype=np.uint32))
    row = CountRow(m, 1)
    t = (4, 0, U32 - 1)
    assert row == t and t == row and hash(row) == hash(t) and row != (4, 0)
    assert list(row) == list(t) and len(row) == 3 and row[2] == U32 - 1 and row[-1] == U32 - 1
    assert row[1:] == (0, U32 - 1) and sum(row) == sum(t) and max(row) == U32 - 1
    assert all(type(v) is int for v in row) and type(row[0]) is int  # JSON and the codec take them
    assert pickle.loads(pickle.dumps(row)) == t and repr(row) == f"CountRow({t!r})"
    assert CountRow(m, 0) != row and CountRow(m, 1) == row
    assert table_matrix(InterruptTable((0, 1, 2), {40: Irq(40, "c", "", "x", CountRow(m, 0)),
                                                  41: Irq(41, "c", "", "y", row)})) is m
    # a row in another place than its IRQ's number, or a table that mixes tuples: no matrix
    assert table_matrix(InterruptTable((0, 1, 2), {41: Irq(41, "c", "", "x", CountRow(m, 0)),
                                                  40: Irq(40, "c", "", "y", row)})) is None
    assert table_matrix(InterruptTable((0, 1, 2), {40: Irq(40, "c", "", "x", CountRow(m, 0)),
                                                  41: Irq(41, "c", "", "y", t)})) is None
    try:
        m.values[0, 0] = 9
    except ValueError:
        pass
    else:
        raise AssertionError("a snapshot's counts must be read-only")


_COUNT = st.one_of(st.integers(0, U32 - 1), st.sampled_from([0, 1, 7, U32 - 1, U32 - 5, 3 << 30, 5]))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.integers(1, 6), st.data(), st.floats(0.05, 50.0))
def test_rates_and_the_doctors_window_are_those_of_the_tuples(ncpu, nirq, data, elapsed):
    """Counts that stay, move, wrap near 2**32 or go back (a reset): the matrix path and
    the per-IRQ path give the same rates, problems, and window figures, to the bit."""
    cpus = tuple(range(0, 2 * ncpu, 2))  # CPU ids are not positions
    a_rows = [data.draw(st.lists(_COUNT, min_size=ncpu, max_size=ncpu)) for _ in range(nirq)]
    b_rows = [[x if data.draw(st.booleans()) else data.draw(_COUNT) for x in row] for row in a_rows]
    am, at = _tables(cpus, a_rows)
    bm, bt = _tables(cpus, b_rows)
    assert table_matrix(am) is not None and table_matrix(at) is None
    rm = compute_rates(_snap(0.0, am), _snap(elapsed, bm))
    rt = compute_rates(_snap(0.0, at), _snap(elapsed, bt))
    # the IRQs' columns, read before the dict is made (RatesTable.columns), are the dict's
    names = ("irq", "presence", "per_s")
    got_cols = rate_columns(rm.irqs, *names)
    want_cols = (list(rt.irqs), [[getattr(v, n) for v in rt.irqs.values()] for n in names])
    assert got_cols == want_cols and list(map(repr, got_cols[1][2])) == list(map(repr, want_cols[1][2]))
    assert rm.problems == rt.problems
    assert list(rm.irqs) == list(rt.irqs)  # the same IRQs in the same order
    for irq, x in rm.irqs.items():
        y = rt.irqs[irq]
        assert (x.per_s, x.presence, x.reset) == (y.per_s, y.presence, y.reset), irq
        assert dict(x.per_cpu_per_s.items()) == dict(y.per_cpu_per_s.items())
    some = list(am.irqs)[::2] + [999]  # and an IRQ neither has
    twice = list(am.irqs)[:1] * 2  # an IRQ named twice counts twice
    wt = Window([Point(_snap(0.0, at), None), Point(_snap(elapsed, bt), None)], window_s=100.0)
    assert wt._irq_matrix() is None
    want = ([wt.irq_counts(irq) for irq in am.irqs], [wt.irq_peak(irq) for irq in am.irqs],
            wt.irq_peaks(list(am.irqs)), wt.irq_sum(some), wt.irq_sum(twice), wt.irq_peaks(some))
    for sparse in (1 << 30, 0):  # the counts that moved, and the whole matrix
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(W, "SPARSE_PER_ROW", sparse)
            wm = Window([Point(_snap(0.0, am), None), Point(_snap(elapsed, bm), None)], window_s=100.0)
            m = wm._irq_matrix()
            assert m is not None and (type(m[1]) is W._SparseSteps) == (sparse > 0 or a_rows == b_rows)
            peaks = [wm.irq_peak(irq) for irq in am.irqs]  # before irq_peaks: each way first once
            got = ([wm.irq_counts(irq) for irq in am.irqs], peaks, wm.irq_peaks(list(am.irqs)),
                   wm.irq_sum(some), wm.irq_sum(twice), wm.irq_peaks(iter(some)))  # one IRQ not in it
        assert got == want
        assert all(type(v) is int for v in got[3] or []) and wm.irq_sum([999]) is None


def test_irq_rates_of_a_matrix_are_built_when_first_read(monkeypatch):
    """GIVEN two count matrices WHEN every count moved forwards THEN no IrqRates is built
    until the rates are read (`nettop record` never reads them), and they then read,
    compare and pickle as the per-IRQ path's dict; WHEN a count went backwards THEN its
    problem is told at once, as by the per-IRQ path."""
    from nettop.model import rates as R

    built: list[int] = []
    build = R._build_irq_rates

    def counting(*parts):
        built.append(1)
        return build(*parts)

    monkeypatch.setattr(R, "_build_irq_rates", counting)
    cpus = (0, 1, 2)
    am, at = _tables(cpus, [[1, 2, 3], [5, 0, 0], [9, 9, 9]])
    bm, bt = _tables(cpus, [[4, 2, 3], [5, 0, 7], [9, 9, 9]])
    rm = compute_rates(_snap(0.0, am), _snap(2.0, bm))
    assert built == []
    want = compute_rates(_snap(0.0, at), _snap(2.0, bt)).irqs
    assert type(want) is dict and built == []
    assert rm.irqs[40].per_s == 1.5 and built == [1]
    assert rm.irqs == want and list(rm.irqs.items()) == list(want.items()) and 42 in rm.irqs
    copy = pickle.loads(pickle.dumps(rm.irqs))
    assert type(copy) is dict and copy == want and built == [1]
    cm, ct = _tables(cpus, [[4, 1, 3], [5, 0, 7], [9, 9, 9]])
    back = compute_rates(_snap(2.0, bm), _snap(3.0, cm))
    assert back.problems and back.problems == compute_rates(_snap(2.0, bt), _snap(3.0, ct)).problems
    assert back.irqs[40].reset and built == [1]


def test_the_codec_stores_a_row_as_the_tuple_and_reads_back_equal():
    cpus = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    rows = [[i * 10 + c for c in range(10)] for i in range(3)]
    m, t = _tables(cpus, rows)
    sm, st_ = codec.split(_snap(1.0, m)), codec.split(_snap(1.0, t))
    assert sm == st_
    back = codec.join(json.loads(sm[0]), sm[1], sm[2])
    assert back == _snap(1.0, m) == _snap(1.0, t)


def test_a_tables_matrix_is_found_once_while_the_table_is_kept(monkeypatch):
    """The tick's rates and the doctor's window ask for the same tables' matrices: each
    table is walked once while it is among the few kept, and a new table (a new read) is
    walked again, never answered with another table's matrix."""
    from nettop.model import counts

    walked: list[int] = []
    walk = counts._table_matrix

    def counting(table):
        walked.append(id(table))
        return walk(table)

    monkeypatch.setattr(counts, "_table_matrix", counting)
    am, _ = _tables((0, 1), [[1, 2], [3, 4]])
    bm, _ = _tables((0, 1), [[1, 2], [3, 4]])
    assert table_matrix(am) is table_matrix(am) is not None and len(walked) == 1
    got = table_matrix(bm)
    assert got is not None and got is not table_matrix(am) and len(walked) == 2
    assert table_matrix(InterruptTable((0, 1), {})) is None and len(walked) == 3
    for _ in range(counts._KEEP):
        table_matrix(_tables((0, 1), [[1, 2]])[0])
    walked.clear()
    assert table_matrix(am) is not None and walked == [id(am)]  # gone from the kept few: walked again


def _threads_after_numpy(env: dict[str, str]) -> int:
    script = "import os\nfrom nettop.model.counts import numpy\nnumpy()\nprint(len(os.listdir('/proc/self/task')))"
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_numpy_starts_no_threads_of_its_own_unless_the_user_asks():
    """OpenBLAS would start one per extra CPU: threads that do nothing for nettop but take
    the hang-up signals its main thread holds (nettop.actions.hangups)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    assert _threads_after_numpy(env) == 1
    if (os.cpu_count() or 1) >= 2:  # the user's own setting is kept
        assert _threads_after_numpy({**env, "OPENBLAS_NUM_THREADS": "2"}) == 2


def test_irq_columns_of_a_matrix_name_the_uncounted_and_gone_as_the_dict_does(monkeypatch):
    """An IRQ without counts (not followed) has no rate, one gone since the last tick has
    presence GONE and no per_s: the columns read without making the dict say the same,
    in its order; a field they do not hold makes the dict."""
    import dataclasses

    from nettop.model import rates as R

    built: list[int] = []
    build = R._build_irq_rates
    monkeypatch.setattr(R, "_build_irq_rates", lambda *parts: built.append(1) or build(*parts))
    cpus = (0, 1, 2)
    am, _ = _tables(cpus, [[1, 2, 3], [5, 0, 0], [9, 9, 9]])
    bm, _ = _tables(cpus, [[4, 2, 3], [5, 0, 7], [9, 9, 9]])
    bare = Irq(77, "PCI-MSIX", "1-edge", "nvme0q1", None, None)
    am = dataclasses.replace(am, irqs={**am.irqs, 90: dataclasses.replace(bare, irq=90), 77: bare})
    bm = dataclasses.replace(bm, irqs={77: bare, **bm.irqs})
    rates = compute_rates(_snap(0.0, am), _snap(2.0, bm))
    names = ("irq", "per_s", "presence")
    got = rate_columns(rates.irqs, *names)
    assert built == [] and got[0] == [40, 41, 42, 90]
    assert got == (list(rates.irqs), [[getattr(v, n) for v in rates.irqs.values()] for n in names]) and built == [1]
    again = compute_rates(_snap(0.0, am), _snap(2.0, bm))
    assert rate_columns(again.irqs, "irq", "reset")[1][1] == [False] * 4 and built == [1, 1]


def test_irq_columns_add_a_rows_rates_in_the_dicts_order():
    """Four CPUs' rates whose float sum depends on its order: the column's per_s is the
    dict's to the bit (added CPU by CPU, as `_matrix_rates` adds them)."""
    cpus = (0, 1, 2, 3)
    steps = [2266151101, 952158462, 1880712865, 2129497365]
    am, _ = _tables(cpus, [[0, 0, 0, 0], [1, 1, 1, 1]])
    bm, _ = _tables(cpus, [steps, [1, 1, 1, 1]])
    per_s = [d / 0.7 for d in steps]
    assert sum(per_s) != sum(reversed(per_s))  # the order shows in the last bit
    got = rate_columns(compute_rates(_snap(0.0, am), _snap(0.7, bm)).irqs, "per_s")[1][0]
    assert got == [sum(per_s), 0.0] == [compute_rates(_snap(0.0, am), _snap(0.7, bm)).irqs[i].per_s for i in (40, 41)]
