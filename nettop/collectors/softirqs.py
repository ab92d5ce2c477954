"""NET_RX / NET_TX softirq counts per CPU from /proc/softirqs.

A NET_RX count is one run of the receive softirq on that CPU (NAPI polls, backlog and
RPS processing), so its rate shows which CPUs do the network receive work, whatever
IRQ or RPS setting put it there. The header names the CPU of each column ("CPU0 CPU1
..."), and columns are mapped by that id, never by position, because a kernel may leave
CPUs out of the header. Only the NET_RX and NET_TX rows are split into numbers; on a
256-CPU host the other rows are skipped untouched. Counts are 32-bit and wrap: a count
that is not an unsigned 32-bit number is corrupt, and so is a header naming a CPU twice;
either is a Problem and the rows are not shown (see docs/bad-input.md).
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from nettop.collectors.cpus import MAX_CPUS
from nettop.collectors.numbers import is_decimal
from nettop.collectors.unchanged import LastAnswer
from nettop.model.counts import numpy
from nettop.model.cpu_columns import ARRAYS_FROM
from nettop.model.cpu_table import CpuTable
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.rows import build
from nettop.model.snapshot import SoftirqCounts
from nettop.kernel.sysroot import SysRoot

SOFTIRQS = "proc/softirqs"
_SRC = "/proc/softirqs"
_U32 = 0xFFFFFFFF


def parse_softirqs(text: str) -> tuple[Mapping[int, SoftirqCounts], list[Problem]]:
    """NET_RX and NET_TX counts per CPU id from /proc/softirqs text: from ARRAYS_FROM
    CPUs the columns as they are (`CpuTable`: the rows are made if someone asks), below
    that a dict."""
    problems: list[Problem] = []
    lines = text.split("\n")
    cpus: tuple[int, ...] = ()
    first = 0
    for first, line in enumerate(lines):
        if ":" not in line and "CPU" in line:
            # The header; vendor kernels may put a word before it or a line above it.
            cpus = _header_cpus(line)
            break
    if not cpus:
        return {}, [Problem(_SRC, f"{_SRC} has no CPU header line; NET_RX/NET_TX per CPU "
                                  f"are not shown (first line: {lines[0][:60]!r})")]
    if len(set(cpus)) != len(cpus) or max(cpus) >= MAX_CPUS:
        return {}, [Problem(_SRC, f"{_SRC} is inconsistent: its header names a CPU twice or a "
                                  f"CPU beyond {MAX_CPUS - 1} ({lines[first][:60]!r}); NET_RX/NET_TX "
                                  "per CPU are not shown")]
    if any(ln.partition(":")[0].strip() in ("NET_RX", "NET_TX") for ln in lines[:first]):
        problems.append(Problem(_SRC, f"{_SRC} is inconsistent: a NET_RX/NET_TX row comes before "
                                      "the CPU header line; it is ignored"))
    rows: dict[str, Any] = {}
    bad: set[str] = set()
    big = len(cpus) >= ARRAYS_FROM
    for line in lines[first + 1:]:
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name not in ("NET_RX", "NET_TX"):
            continue
        vals: Any = _row_array(rest) if big else None
        if vals is None:
            toks = rest.split()
            joined = "".join(toks)  # C-level checks: a 1,024-CPU row is 1,024 fields
            if toks and not (joined.isascii() and joined.isdigit() and max(map(len, toks)) <= 10):
                problems.append(malformed(_SRC, f"{name} row has a non-number"))
                bad.add(name)
                continue
            vals = list(map(int, toks))
        if len(vals) and (max(vals) if isinstance(vals, list) else int(vals.max())) > _U32:
            problems.append(Problem(_SRC, f"{_SRC} is corrupt: a {name} count is wider than 32 "
                                          "bits; network softirqs per CPU are not shown"))
            bad.add(name)
            continue
        if len(vals) != len(cpus):
            problems.append(malformed(
                _SRC, f"{name} row has {len(vals)} counts for {len(cpus)} CPUs in the header"))
            bad.add(name)
            continue
        if name not in rows:  # a vendor's second table below may repeat names
            rows[name] = vals
    missing = [name for name in ("NET_RX", "NET_TX") if name not in rows]
    if missing:
        absent = [name for name in missing if name not in bad]
        if absent:
            problems.append(Problem(_SRC, f"{_SRC} has no {' or '.join(absent)} row; "
                                          "network softirqs per CPU are not shown"))
        return {}, problems
    rx, tx = rows["NET_RX"], rows["NET_TX"]
    if big:  # every count is checked within 32 bits above
        np = numpy()
        table = np.empty((len(cpus), 3), np.int64)
        table[:, 0], table[:, 1], table[:, 2] = cpus, rx, tx
        return CpuTable(SoftirqCounts, table), problems
    out = dict(zip(cpus, build(SoftirqCounts, cpus, rx, tx)))
    return out, problems


_ROW_CHARS = b"0123456789 "


def _row_array(rest: str) -> Any:
    """A NET_RX/NET_TX row's counts (what follows its colon) as one int64 array, when
    it is plainly what a kernel prints: decimal numbers of at most 10 digits, separated by
    spaces. None for anything else (a tab, a sign, a longer number, no number), which
    the token checks judge and explain. At 1,024 CPUs a Python int and str per count
    were most of this parser's cost."""
    data = rest.encode("latin-1", "replace")
    if data.translate(None, _ROW_CHARS) or not data.strip():
        return None
    np = numpy()
    raw = np.frombuffer(b" " + data + b" ", dtype=np.uint8)
    blanks = np.flatnonzero(raw == 32)
    if int(np.diff(blanks).max()) > 11:
        return None  # a number of more than 10 digits
    return np.fromstring(data, dtype=np.int64, sep=" ")


@functools.lru_cache(maxsize=8)
def _header_cpus(line: str) -> tuple[int, ...]:
    """The CPU ids of a header line, parsed once: the header is the same tick after tick
    (1,024 names on a big host)."""
    return tuple(int(t[3:]) for t in line.split() if t.startswith("CPU") and is_decimal(t[3:]) and len(t) <= 8)


def read_softirqs(root: SysRoot, last: LastAnswer[SoftirqCounts] | None = None
                  ) -> tuple[Mapping[int, SoftirqCounts], list[Problem]]:
    """Read and parse /proc/softirqs under `root`; with `last` (the caller's, kept across
    ticks), a text equal to the last tick's gives its rows again (`unchanged.py`)."""
    try:
        data = root.read_bytes(SOFTIRQS)
    except OSError as exc:
        return {}, [from_oserror(_SRC, exc)]
    if last is None:
        return parse_softirqs(data.decode("latin-1"))
    # the bytes are the key: an unchanged file is not even decoded
    return last.get(data, lambda: parse_softirqs(data.decode("latin-1")))
