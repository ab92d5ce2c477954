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
from typing import Mapping

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
    rows: dict[str, list[int]] = {}
    bad: set[str] = set()
    for line in lines[first + 1:]:
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name not in ("NET_RX", "NET_TX"):
            continue
        toks = rest.split()
        joined = "".join(toks)  # C-level checks: a 1,024-CPU row is 1,024 fields
        if toks and not (joined.isascii() and joined.isdigit() and max(map(len, toks)) <= 10):
            problems.append(malformed(_SRC, f"{name} row has a non-number"))
            bad.add(name)
            continue
        vals = list(map(int, toks))
        if vals and max(vals) > _U32:
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
    if len(cpus) >= ARRAYS_FROM:  # every count is checked within 32 bits above
        np = numpy()
        return CpuTable(SoftirqCounts, np.array((cpus, rx, tx), np.int64).T.copy()), problems
    out = dict(zip(cpus, build(SoftirqCounts, cpus, rx, tx)))
    return out, problems


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
        text = root.read_text(SOFTIRQS)
    except OSError as exc:
        return {}, [from_oserror(_SRC, exc)]
    if last is None:
        return parse_softirqs(text)
    return last.get(text, lambda: parse_softirqs(text))
