"""The per-CPU parsers' fast paths accept exactly what their strict paths accept.

/proc/stat, /proc/net/softnet_stat and /proc/softirqs have one line (or field) per CPU:
on 1,024 CPUs a field-by-field check in Python was most of their cost, so a line that is
plainly valid is now checked with a few C-level calls and converted at once. These
tests feed both valid and damaged fields and compare with the strict helpers
(collectors/numbers.py), which stay the definition of a valid field.
"""

from __future__ import annotations

from hypothesis import example, given, settings, strategies as st

from nettop.collectors.cpustat import parse_stat
from nettop.collectors.numbers import decimal, hexadecimal
from nettop.collectors.softirqs import parse_softirqs
from nettop.collectors.softnet import parse_softnet

# fields a kernel prints, and the near misses int() would wrongly take
_DEC = st.one_of(
    st.integers(0, (1 << 64) - 1).map(str),
    st.sampled_from(["0", "00000000000000000001", "18446744073709551615", "18446744073709551616",
                     "99999999999999999999", "+5", "-5", "1_0", "٣", "²", "0x10", "1e3", "１"]),
)
_HEX = st.one_of(
    st.integers(0, (1 << 32) - 1).map(lambda n: f"{n:08x}"),
    st.sampled_from(["ffffffff", "FFFFFFFF", "100000000", "0000000001", "-0000001", "0x000001",
                     "g0000000", "0000_001", "ｆ", "1"]),
)


def _strict_dec(v: str, bits: int) -> int | None:
    try:
        return decimal(v, bits)
    except ValueError:
        return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_DEC, min_size=4, max_size=10), min_size=1, max_size=6))
def test_proc_stat_fast_path_matches_the_strict_fields(rows):
    text = "cpu  1 2 3 4 5 6 7 8 9 10\n" + "".join(f"cpu{i} " + " ".join(r) + "\n" for i, r in enumerate(rows)) + "intr 1 2\n"
    got, problems = parse_stat(text)
    for i, r in enumerate(rows):
        strict = [_strict_dec(v, 64) for v in r]
        if any(v is None for v in strict):
            assert i not in got
        else:
            t = got[i]
            want = strict + [0] * (10 - len(strict))
            assert [t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal,
                     t.guest, t.guest_nice] == want
    bad = sum(any(_strict_dec(v, 64) is None for v in r) for r in rows)
    assert len([p for p in problems if "malformed" in p.message]) == bad
    assert len(got) == len(rows) - bad


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_HEX, min_size=13, max_size=13), min_size=1, max_size=6))
def test_softnet_fast_path_matches_the_strict_fields(rows):
    rows = [r[:12] + [f"{i:08x}"] for i, r in enumerate(rows)]  # the CPU column
    got, problems = parse_softnet("".join(" ".join(r) + "\n" for r in rows))
    for i, r in enumerate(rows):
        strict = []
        for v in r:
            try:
                strict.append(hexadecimal(v, 32))
            except ValueError:
                strict.append(None)
        if any(strict[j] is None for j in (0, 1, 2, 9, 10, 11, 12)):
            assert i not in got
        else:
            row = got[i]
            assert (row.processed, row.dropped, row.time_squeeze, row.received_rps,
                    row.flow_limit_count, row.backlog) == (strict[0], strict[1], strict[2],
                                                            strict[9], strict[10], strict[11])


@settings(max_examples=300, deadline=None)
@given(st.lists(_DEC, min_size=1, max_size=5), st.lists(_DEC, min_size=1, max_size=5))
def test_softirqs_fast_path_matches_the_strict_fields(rx, tx):
    n = max(len(rx), len(tx))
    rx, tx = (r + ["1"] * (n - len(r)) for r in (rx, tx))
    text = ("   " + "".join(f"CPU{i:<8d}" for i in range(n)) + "\n"
            + "      NET_TX: " + " ".join(tx) + "\n" + "      NET_RX: " + " ".join(rx) + "\n")
    got, problems = parse_softirqs(text)
    # the kernel prints "%10u": at most 10 digits (a zero-padded 20-digit field is corrupt)
    good = all(_strict_dec(v, 32) is not None and len(v) <= 10 for v in rx + tx)
    if good:
        assert [got[i].net_rx for i in range(n)] == [int(v) for v in rx]
        assert [got[i].net_tx for i in range(n)] == [int(v) for v in tx]
        assert not problems
    else:
        assert got == {} and problems


def test_an_empty_softirqs_row_is_a_count_mismatch_not_a_number_error():
    got, problems = parse_softirqs("    CPU0  CPU1\nNET_TX:\nNET_RX: 1 2\n")
    assert got == {} and any("0 counts for 2 CPUs" in p.message for p in problems)


def test_kernel_shaped_files_take_the_fast_paths(tmp_path):
    """The whole-file paths are the ones a real file takes (else they would be dead code
    that the equivalence tests above only seem to cover)."""
    from nettop.collectors import cpustat, softnet
    from treegen import generate_tree

    tree = generate_tree(tmp_path / "t", cpus=16, irqs=40, queues=4)
    stat = (tree / "proc/stat").read_text()
    assert cpustat._plainly_valid(stat[:stat.find("\nintr")]) is not None
    assert softnet._plainly_valid((tree / "proc/net/softnet_stat").read_text()) is not None
    with open("/proc/stat") as f:  # this kernel's own
        live = f.read()
    assert cpustat._plainly_valid(live[:live.find("\nintr")]) is not None
    with open("/proc/net/softnet_stat") as f:
        assert softnet._plainly_valid(f.read()) is not None


def test_a_cpu_twice_in_proc_stat_is_still_a_problem_on_the_fast_path_shape():
    text = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu0 2 2 3 4 5 6 7 8 9 10\nintr 0\n"
    got, problems = parse_stat(text)
    assert got[0].user == 1 and any("two lines" in p.message for p in problems)


@settings(max_examples=300, deadline=None)
@given(st.integers(13, 15), st.lists(st.tuples(st.lists(st.integers(0, (1 << 32) - 1), min_size=15, max_size=15),
                                               st.one_of(st.integers(0, 8), st.integers(8190, 8200))),
                                     min_size=1, max_size=8))
def test_softnet_lines_of_a_current_kernel_give_what_the_row_by_row_path_gives(width, lines):
    """Kernel-shaped lines with the CPU column are made into rows in one pass (no row
    tuples, no `_row` per CPU); with ids repeated or beyond MAX_CPUS that pass steps aside,
    and the result equals `_by_column` over the converted lines either way."""
    from nettop.collectors import softnet

    text = "".join(" ".join(f"{v:08x}" for v in fields[:12] + [cpu] + fields[13:width]) + "\n"
                   for fields, cpu in lines)
    columns = softnet._plainly_valid(text)
    assert columns is not None  # the shape the kernel prints
    problems: list = []
    want = softnet._by_column(list(zip(*columns)), problems)
    assert parse_softnet(text) == (want, problems)
    assert parse_softnet(text, tuple(range(len(lines)))) == (want, problems)


_STAT_NAME = st.one_of(st.integers(0, 99999).map(lambda i: f"cpu{i}"),
                       st.sampled_from(["cpu", "5", "cpucpu5", "cpu000001", "cpu123456", "1cpu", "cpu٣", "cp5", "cpu1"]))
_STAT_VALUE = st.one_of(st.integers(0, 10 ** 20).map(str),
                        st.sampled_from(["cpu", "c", "1u", "p", "00000000000000000007", "7"]))

@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_STAT_NAME, st.lists(_STAT_VALUE, min_size=9, max_size=11)), min_size=1, max_size=6),
       st.lists(_STAT_VALUE, min_size=10, max_size=10))
@example([("5", ["cpu", *"234567891"])], list("123456789") + ["1"])  # a name without cpu, cpu a counter
@example([("cpu0", ["c", *"234567891"])], list("123456789") + ["1"])  # a lone letter of it
@example([("cpu000001", list("123456789") + ["1"])], list("123456789") + ["1"])  # a 6-digit id
@example([("cpu0", list("123456789") + ["1"]), ("cpu0", list("123456789") + ["1"])], list("123456789") + ["1"])
def test_proc_stat_fast_path_takes_only_what_the_line_by_line_path_reads_the_same(lines, total):
    """Names that are not cpuN, the word cpu or its letters among the counters, ids too
    long or twice: the whole-block check either gives exactly the line-by-line parse or
    steps aside."""
    from nettop.collectors import cpustat

    head = "cpu  " + " ".join(total) + "\n" + "".join(f"{n} {' '.join(v)}\n" for n, v in lines)
    fast = cpustat._plainly_valid(head.rstrip("\n"))
    slow = cpustat._plainly_valid
    try:
        cpustat._plainly_valid = lambda head: None  # type: ignore[assignment]
        want = parse_stat(head + "intr 1 2\n")
    finally:
        cpustat._plainly_valid = slow  # type: ignore[assignment]
    assert fast is None or (fast, []) == want
    if all(n.startswith("cpu") and n[3:].isascii() and n[3:].isdigit() and len(n) <= 8 and len(v) == 10
           and all(x.isdigit() and len(x) <= 19 for x in v) for n, v in lines) \
            and all(x.isdigit() and len(x) <= 19 for x in total) and len({n for n, _ in lines}) == len(lines) \
            and max(int(n[3:]) for n, _ in lines) < 8192:
        assert fast is not None  # a kernel-shaped block takes the fast path


def _as_the_strict_path(module, fast: str, parse, text: str):
    """`parse(text)`, asserted equal, rows and problems, to what it gives with the fast
    helper `module.<fast>` answering None (the strict path alone); returns the rows."""
    got, problems = parse(text)
    real = getattr(module, fast)
    setattr(module, fast, lambda *args: None)
    try:
        want, want_problems = parse(text)
    finally:
        setattr(module, fast, real)
    assert dict(got) == dict(want)
    assert [p.message for p in problems] == [p.message for p in want_problems]
    return got


def _stat_lines(n: int) -> list[str]:
    return [f"cpu{i} {1000 + i} 0 {7 * i} 99999999 10 20 {30 + i} 0 0 0" for i in range(n)]


_STAT_DAMAGE = st.sampled_from([" ", "  ", "\n", "\n\n", "cpu", "cpu ", "-", "1", "0", "00000", "9" * 19,
                                "9" * 21, "c", "u", "\t", "x", "\ncpu5 1 2 3 4 5 6 7 8 9 10",
                                "\n0 1 2 3 4 5 6 7 8 9 10 11"])


@settings(max_examples=400, deadline=None)
@given(st.integers(256, 300), st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 3), _STAT_DAMAGE),
                                        max_size=3), st.booleans())
@example(256, [], True)
@example(256, [(0, 0, "0 4000 2 3 4 5 6 7 8 9 10 11\n")], True)  # a line without its "cpu"
@example(256, [(0, 0, "cpu0000300 1 2 3 4 5 6 7 8 9 10\n")], False)  # an id of 7 digits
@example(256, [(0, 3, " "), (0, 2, " "), (0, 0, " ")], False)  # cut to the first line, then damaged again
def test_proc_stat_table_of_many_cpus_matches_the_line_by_line_parser(n, damage, tail):
    """From ARRAYS_FROM CPUs /proc/stat is parsed whole into one array (cpustat._table).
    Whatever is damaged (a token inserted, cut or replaced anywhere), it must give what
    the line-by-line parser gives: the same CPUs with the same counters, or the same
    problems when it falls back."""
    import nettop.collectors.cpustat as cpustat
    text = "cpu  1 2 3 4 5 6 7 8 9 10\n" + "\n".join(_stat_lines(n)) + ("\nintr 1 2\n" if tail else "\n")
    first = text.index("\n") + 1
    for pos, how, what in damage:
        # in the cpuN lines, or in the intr line after them; at their start when an earlier
        # cut left nothing after the first line
        span = len(text) - first
        at = first + (pos % span if span else 0)
        text = (text[:at] + what + text[at:] if how == 0 else text[:at] + what + text[at + len(what):] if how == 1
                else text[:at] + text[at + 1 + pos % 3:] if how == 2 else text[:at] + what)
    got = _as_the_strict_path(cpustat, "_plainly_valid", cpustat.parse_stat, text)  # the line-by-line parser
    if not damage:
        assert type(got).__name__ == "CpuTable"  # the whole-text path was taken


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([20, 256, 300]), st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 2),
                                                           st.sampled_from([" ", "\n", "0", "f", "G", "-", "  ", "\t",
                                                                            "0000000", "000000000"])), max_size=3))
@example(256, [])
def test_softnet_whole_file_checks_match_the_line_by_line_parser(n, damage):
    """softnet._fields_a_line checks a file whole (one translate, two compares); whatever
    is damaged, softnet_stat must give what the line-by-line parser gives."""
    import nettop.collectors.softnet as softnet
    text = "".join(" ".join([f"{1000 + i:08x}", "00000000", f"{i % 7:08x}"] + ["00000000"] * 6
                            + [f"{i:08x}", "00000000", "00000000", f"{i:08x}"]) + "\n" for i in range(n))
    for pos, how, what in damage:
        at = pos % len(text)
        text = text[:at] + what + text[at:] if how == 0 else text[:at] + what + text[at + len(what):] \
            if how == 1 else text[:at] + text[at + 1:]
    got = _as_the_strict_path(softnet, "_fields_a_line", softnet.parse_softnet, text)  # the line-by-line parser
    if not damage and n >= 256:
        assert type(got).__name__ == "CpuTable"


@settings(max_examples=300, deadline=None)
@given(st.lists(_DEC, min_size=1, max_size=4), st.integers(0, 299), st.sampled_from([256, 300]),
       st.sampled_from(["", "\t", "  ", " 7", "-1"]))
@example(["00000000001"], 5, 256, "")
def test_softirqs_rows_of_many_cpus_give_what_the_token_checks_give(fields, at, n, extra):
    """From ARRAYS_FROM CPUs a NET_RX/NET_TX row is checked and parsed whole
    (softirqs._row_array); with a kernel's or a damaged field anywhere in it, the answer
    (counts, or which problem) is that of the token checks."""
    import nettop.collectors.softirqs as softirqs
    rx = [str(1000 + i) for i in range(n)]
    rx[at % n: at % n + len(fields)] = fields
    text = ("   " + "".join(f"CPU{i:<8d}" for i in range(n)) + "\n"
            + "      NET_TX: " + " ".join(f"{i:10d}" for i in range(n)) + "\n"
            + "      NET_RX: " + " ".join(rx) + extra + "\n")
    _as_the_strict_path(softirqs, "_row_array", softirqs.parse_softirqs, text)  # the token checks
