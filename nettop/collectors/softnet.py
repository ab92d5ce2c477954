"""Per-CPU receive backlog counters from /proc/net/softnet_stat.

`dropped` (the CPU's backlog was full: raise net.core.netdev_max_backlog or spread the
load) and `time_squeeze` (a softirq run ended with work left: budget or time ran out,
see net.core.netdev_budget*) are the per-CPU signs of receive overload; `received_rps`
shows RPS/RFS steering work arriving from other CPUs.

One line per online CPU, every field `%08x` of a 32-bit counter (so they wrap). The
columns grew over kernel versions (net/core/net-procfs.c, earlier net/core/dev.c):

     9  processed dropped time_squeeze 0 0 0 0 0 cpu_collision          2.6.x
    10  ... + received_rps                                                2.6.35
    11  ... + flow_limit_count (cpu_collision printed as 0 since 4.x)     3.11
    13  ... + backlog (input + process queue length), cpu id              5.10
    15  ... + input queue length, process queue length                   6.x

The kernel skips offline CPUs. Where it prints the CPU id (13+ columns) that id is used;
otherwise line i belongs to the i-th online CPU, which the caller passes in.

A field that is not 1-8 hex digits is corrupt (the kernel prints `%08x` of a 32-bit
counter); a line without the CPU column in a file whose other lines have it, and a CPU id
printed twice, are Problems (docs/bad-input.md).
"""

from __future__ import annotations

import itertools
from typing import Mapping, Sequence

from nettop.collectors.cpus import MAX_CPUS
from nettop.collectors.numbers import hexadecimal
from nettop.collectors.unchanged import LastAnswer
from nettop.model.counts import numpy
from nettop.model.cpu_columns import ARRAYS_FROM
from nettop.model.cpu_table import CpuTable
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.rows import build
from nettop.model.snapshot import SoftnetRow
from nettop.kernel.sysroot import SysRoot

SOFTNET = "proc/net/softnet_stat"
_SRC = "/proc/net/softnet_stat"
_MIN_COLUMNS = 9
# The columns nettop uses (see the table above); only these are converted from hex:
# processed, dropped, time_squeeze, received_rps, flow_limit_count, backlog, cpu id.
_WANTED = (0, 1, 2, 9, 10, 11, 12)
_RPS, _FLOW_LIMIT, _BACKLOG, _CPU = 3, 4, 5, 6  # positions in the converted list
_HEX = frozenset("0123456789abcdefABCDEF")


def parse_softnet(
    text: str, online_cpus: tuple[int, ...] | None = None
) -> tuple[Mapping[int, SoftnetRow], list[Problem]]:
    """Softnet counters per CPU id from /proc/net/softnet_stat text.

    `online_cpus` (ascending, as read at the same tick) maps lines of kernels that do
    not print the CPU id; without it line i is taken to be CPU i. A malformed line is
    skipped, but still occupies its CPU's position. From ARRAYS_FROM CPUs, a file as a
    current kernel prints it is its columns as they are (`CpuTable`: the rows are made
    if someone asks); anything else is a dict.
    """
    problems: list[Problem] = []
    rows: list[Sequence[int] | None] = []
    table = _as_table(text)
    if table is not None:
        return table, problems
    fast = _plainly_valid(text)
    if fast is not None and len(fast) > _CPU:
        ids = fast[_CPU]
        if len(set(ids)) == len(ids) and max(ids) < MAX_CPUS:  # else _by_column says what is wrong
            # what _by_column and _row make of these lines, made column by column
            return dict(zip(ids, build(SoftnetRow, ids, fast[0], fast[1], fast[2], fast[_RPS], fast[_FLOW_LIMIT],
                                       fast[_BACKLOG], [True] * len(ids)))), problems
    for line in text.splitlines() if fast is None else ():
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) < _MIN_COLUMNS:
                raise ValueError(f"{len(parts)} columns, expected at least {_MIN_COLUMNS}")
            n = len(parts)
            if _HEX.issuperset("".join(parts)) and max(map(len, parts)) <= 8:
                rows.append([int(parts[i], 16) for i in _WANTED if i < n])  # plainly valid
            else:  # the strict, field-by-field path names what is wrong
                rows.append([hexadecimal(parts[i], 32, "field") for i in _WANTED if i < n])
        except ValueError as exc:
            problems.append(malformed(_SRC, f"{line[:60]!r} ({exc})"))
            rows.append(None)  # still holds its CPU's place when lines are positional
    if fast is not None:
        rows = list(zip(*fast))
    # Every line of one file has the same layout: a CPU column in any line means all.
    if any(v is not None and len(v) > _CPU for v in rows):
        return _by_column(rows, problems), problems
    out: dict[int, SoftnetRow] = {}
    if online_cpus is None:
        cpus: tuple[int, ...] | range = range(len(rows))
    else:
        cpus = online_cpus
        if len(rows) != len(online_cpus):
            problems.append(Problem(_SRC, (
                f"{_SRC} has {len(rows)} lines but {len(online_cpus)} CPUs are online (a CPU "
                "went on- or offline between the reads); softnet rows may be attributed to "
                "the wrong CPU this tick"
            )))
    for cpu, v in zip(cpus, rows):
        if v is not None:
            out[cpu] = _row(cpu, v, False)
    return out, problems




_HEX_DIGITS = b"0123456789abcdefABCDEF"


def _fields_a_line(text: str) -> int | None:
    """The fields a line of a file as the kernel prints it (every field "%08x", one space
    between, every line alike), checked with whole-file C-level calls; None for anything
    else, which the line-by-line parser then judges and explains."""
    data = text.encode("latin-1", "replace")
    # with the hex digits deleted, what is left must be exactly the separators of n
    # fields a line: n - 1 spaces and a newline, each line alike (so no other character,
    # and no blank inside a field); and in a file of n * 9 characters a line they must be
    # every 9th, so each field has exactly 8 digits. One translate and two compares of
    # bytes: at 1,024 CPUs the counts and strided slices of the str were 0.8 ms.
    seps = data.translate(None, _HEX_DIGITS)
    n = seps.find(b"\n") + 1
    lines = len(seps) // n if n else 0
    if n < _MIN_COLUMNS or len(data) != 9 * n * lines:
        return None
    expected = (b" " * (n - 1) + b"\n") * lines
    if seps != expected or data[8::9] != expected:
        return None
    return n


def _plainly_valid(text: str) -> list[list[int]] | None:
    """The wanted columns (`_WANTED`, those a line has) of a file as the kernel prints it
    (`_fields_a_line`), converted with whole-file C-level calls: 1,024 lines cost what 30
    did line by line. None for anything else."""
    n = _fields_a_line(text)
    if n is None:
        return None
    tokens = text.split()
    return [list(map(int, tokens[i::n], itertools.repeat(16))) for i in _WANTED if i < n]


# SoftnetRow's fields from a line: cpu (printed), then processed ... backlog (_WANTED)
_TABLE_COLUMNS = [_WANTED[_CPU], *_WANTED[:_CPU]]


def _as_table(text: str) -> CpuTable[SoftnetRow] | None:
    """`_plainly_valid`'s rows of a file of ARRAYS_FROM lines or more that prints the CPU
    ids, as one array: the fixed-width hex is 4 big-endian bytes a field, so
    `bytes.fromhex` (which skips the separators) and one numpy view convert it whole.
    None for anything else (a smaller file, no id column, an id twice or too big)."""
    lines = text.count("\n")
    if lines < ARRAYS_FROM:
        return None
    n = _fields_a_line(text)
    if n is None or n <= _WANTED[_CPU]:
        return None
    np = numpy()
    values = np.frombuffer(bytes.fromhex(text), ">u4").reshape(lines, n)[:, _TABLE_COLUMNS].astype(np.int64)
    ids = values[:, 0]
    if int(ids.max()) >= MAX_CPUS or not ((ids[1:] > ids[:-1]).all() or len(np.unique(ids)) == lines):
        return None  # _by_column names what is wrong
    return CpuTable(SoftnetRow, values, (True,))


def _by_column(rows: list[Sequence[int] | None], problems: list[Problem]) -> dict[int, SoftnetRow]:
    """Rows keyed by the CPU id the kernel printed; short lines and repeated ids are Problems."""
    out: dict[int, SoftnetRow] = {}
    for v in rows:
        if v is None:
            continue
        if len(v) <= _CPU:
            problems.append(Problem(_SRC, (
                f"{_SRC} is inconsistent: a line has {len(v)} of the CPU-numbered layout's "
                "columns (truncated?); that CPU's softnet counters are not shown")))
            continue
        cpu = v[_CPU]
        if cpu >= MAX_CPUS:
            problems.append(malformed(_SRC, f"CPU id {cpu} is beyond {MAX_CPUS - 1}"))
            continue
        if cpu in out:
            problems.append(Problem(_SRC, (
                f"{_SRC} is inconsistent: CPU {cpu} has two lines; the first is used")))
            continue
        out[cpu] = _row(cpu, v, True)
    return out


def _row(cpu: int, v: Sequence[int], from_column: bool) -> SoftnetRow:
    n = len(v)
    return SoftnetRow(
        cpu=cpu,
        processed=v[0],
        dropped=v[1],
        time_squeeze=v[2],
        received_rps=v[_RPS] if n > _RPS else 0,
        flow_limit_count=v[_FLOW_LIMIT] if n > _FLOW_LIMIT else 0,
        backlog=v[_BACKLOG] if n > _BACKLOG else None,
        cpu_from_column=from_column,
    )


def read_softnet(
    root: SysRoot, online_cpus: tuple[int, ...] | None = None, last: LastAnswer[SoftnetRow] | None = None,
) -> tuple[Mapping[int, SoftnetRow], list[Problem]]:
    """Read and parse /proc/net/softnet_stat under `root` (see `parse_softnet`); with
    `last` (the caller's, kept across ticks), a text and online CPUs equal to the last
    tick's give its rows again (`unchanged.py`)."""
    try:
        data = root.read_bytes(SOFTNET)
    except OSError as exc:
        return {}, [from_oserror(_SRC, exc)]
    if last is None:
        return parse_softnet(data.decode("latin-1"), online_cpus)
    # the bytes are the key: an unchanged file is not even decoded
    return last.get((data, online_cpus), lambda: parse_softnet(data.decode("latin-1"), online_cpus))
