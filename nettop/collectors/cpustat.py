"""Per-CPU time from /proc/stat: how much of each CPU goes to softirq, hardirq and the rest.

Only the `cpuN` lines are read. They come first in the file, so the parser cuts the text
at the `intr` line and stops at the first line not starting with "cpu": `intr` holds one
number per IRQ (thousands on a big host) and is never split. The kernel prints
`cpuN` lines for online CPUs only, so ids can have gaps.

Columns were added over the years: user nice system idle iowait irq softirq (2.6.0),
steal (2.6.11), guest (2.6.24), guest_nice (2.6.33). Missing trailing columns are 0.
Every field is an unsigned 64-bit count of USER_HZ ticks: a sign, a non-ASCII digit or a
wider number is corrupt, and a CPU with two lines is inconsistent; each is a Problem.
"""

from __future__ import annotations

from typing import Mapping

from nettop.collectors.cpus import MAX_CPUS
from nettop.collectors.numbers import decimal, is_decimal
from nettop.collectors.unchanged import LastAnswer
from nettop.model.counts import numpy
from nettop.model.cpu_columns import ARRAYS_FROM
from nettop.model.cpu_table import CpuTable
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.rows import build
from nettop.model.snapshot import CpuTimes
from nettop.kernel.sysroot import SysRoot

STAT = "proc/stat"
_MIN_COLUMNS = 4  # user nice system idle: every kernel nettop can meet has these
_NCOLUMNS = 10

_U64 = 1 << 64
_SAFE_DIGITS = 19  # any run of at most 19 ASCII digits is below 2**64
_INT64_DIGITS = 18  # ... and of at most 18 below 2**63: an int64 column holds it
PERCENT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_stat(text: str) -> tuple[Mapping[int, CpuTimes], list[Problem]]:
    """Per-CPU times from /proc/stat text, keyed by CPU id (the aggregate line is skipped):
    a `CpuTable` from ARRAYS_FROM CPUs when every line is plainly valid, else a dict."""
    end = text.find("\nintr")
    head = text if end < 0 else text[:end]
    fast = _plainly_valid(head)
    if fast is not None:
        return fast, []
    out: dict[int, CpuTimes] = {}
    problems: list[Problem] = []
    pos = 0  # where `line` starts in `head`
    for line in head.split("\n"):
        if not line.startswith("cpu"):
            if head.find("\ncpu", pos) >= 0:
                problems.append(Problem("/proc/stat", (
                    f"/proc/stat is inconsistent: a line that is not a CPU's ({line[:40]!r}) "
                    "comes between the cpuN lines; the CPUs after it are not shown")))
            break
        pos += len(line) + 1
        if line.startswith("cpu "):
            continue  # the sum over all CPUs
        parts = line.split()
        try:
            num = parts[0][3:]
            if not is_decimal(num) or len(num) > 5 or int(num) >= MAX_CPUS:
                raise ValueError("no CPU number")
            cpu = int(num)
            fields = parts[1:_NCOLUMNS + 1]
            joined = "".join(fields)
            if joined.isascii() and joined.isdigit() and max(map(len, fields), default=0) <= _SAFE_DIGITS:
                vals = list(map(int, fields))  # plainly valid: C-level checks, one int() each
            else:  # the strict, field-by-field path names what is wrong
                vals = [decimal(v, 64, "field") for v in fields]
            if len(vals) < _NCOLUMNS:
                if len(vals) < _MIN_COLUMNS:
                    raise ValueError(f"{len(vals)} columns, expected at least {_MIN_COLUMNS}")
                vals.extend([0] * (_NCOLUMNS - len(vals)))
        except ValueError as exc:
            problems.append(malformed("/proc/stat", f"{line[:80]!r} ({exc})"))
            continue
        if cpu in out:
            problems.append(Problem("/proc/stat", f"/proc/stat is inconsistent: cpu{cpu} has "
                                                  "two lines; the first is used"))
            continue
        out[cpu] = CpuTimes(cpu, *vals)
    if not out:
        problems.append(Problem("/proc/stat", "no per-CPU lines in /proc/stat: per-CPU "
                                              "softirq and irq time cannot be shown"))
    return out, problems


_STAT_CHARS = b"cpu0123456789 \n"
_MARKED_CHARS = b"0123456789 \n-"
_CPU_WIDTH = _NCOLUMNS + 1  # "cpuN" and its counters


def _plainly_valid(head: str) -> Mapping[int, CpuTimes] | None:
    """The cpuN lines of a /proc/stat head as a current kernel prints them (the sum line,
    then one line of 10 counters per CPU, each at most 19 digits, no CPU twice), checked
    and converted with C-level calls over the whole block: 1,024 lines cost what 30 did
    line by line. From ARRAYS_FROM CPUs, with every number within 18 digits (int64),
    they are one array (`CpuTable`, `_table`); the rows are made if someone asks for one.
    None for anything else, which the line-by-line parser judges."""
    if head.encode("latin-1", "replace").translate(None, _STAT_CHARS):
        return None
    if head.count("\n") >= ARRAYS_FROM:  # (the sum line's end is one of them)
        table = _table(head)
        if table is not None:
            return table
    tokens = head.split()
    width = _CPU_WIDTH
    lines = head.count("\n") + (not head.endswith("\n"))
    if lines < 2 or len(tokens) != width * lines or tokens[0] != "cpu":
        return None
    # "c", "p" and "u" only in the word "cpu" that heads each line (the sum's, and each
    # cpuN name, which must start with it): every other token, every counter, is then
    # all digits, and the ids are what the names hold after it
    names = " " + " ".join(tokens[width::width])
    if not (head.count("cpu") == head.count("c") == head.count("p") == head.count("u") == lines
            and names.count(" cpu") == lines - 1 and head.count("\ncpu") == lines - 1):  # each at a line's start
        return None
    ids = names.replace(" cpu", " ").split()
    if len(ids) != lines - 1 or not "".join(ids).isdigit() or max(map(len, ids)) > 5 \
            or max(map(len, tokens)) > _SAFE_DIGITS:
        return None
    cpus = list(map(int, ids))
    if len(set(cpus)) != len(cpus) or max(cpus) >= MAX_CPUS:
        return None
    cols = [list(map(int, tokens[width + k::width])) for k in range(1, width)]
    return dict(zip(cpus, build(CpuTimes, cpus, *cols)))  # CpuTimes(c, *row) for each line


def _table(head: str) -> CpuTable | None:
    """`_plainly_valid`'s answer as one array, for a head of at least ARRAYS_FROM cpuN
    lines whose characters are all of _STAT_CHARS; None when any line is not plainly
    valid or a number has more than 18 digits (then the token checks judge it).

    Done on the text whole, without a Python string per number (at 1,024 CPUs the split
    and the token checks were 2 of this parser's 2.5 ms): each line's "cpu" becomes a
    marker number, -1, which no counter can be (the text has no "-"), so one `fromstring`
    gives rows of marker, id and 10 counters, and a line with a token too many or too few
    shifts the marker out of its column."""
    first, nl, body = head.partition("\n")
    sums = first.split()
    if not nl or len(sums) != _CPU_WIDTH or sums[0] != "cpu" or not "".join(sums[1:]).isdigit() \
            or max(map(len, sums)) > _SAFE_DIGITS or "\ncpu " in body or body.startswith("cpu "):
        return None
    marked = ("\n" + body).replace("\ncpu", "\n-1 ")
    data = marked.encode("latin-1") + b"\n"  # every token, the last too, ends in a separator
    lines = data.count(b"\n") - 1 - body.endswith("\n")
    if data.translate(None, _MARKED_CHARS) or lines < ARRAYS_FROM:
        return None  # a "cpu" that does not start its line, or a line that does not start with it
    np = numpy()
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw <= 32)  # a space or a newline: what ends each token
    if int(np.diff(ends).max()) > _INT64_DIGITS + 1:
        return None  # a number too long for int64, which the token checks take as u64
    values = np.fromstring(data, dtype=np.int64, sep=" ")
    width = _CPU_WIDTH + 1
    if values.size != lines * width:
        return None
    values.shape = (lines, width)
    if not (values[:, 0] == -1).all():
        return None  # (a row per line, each starting with a marker: no marker is left for any other column)
    starts = ends[raw[ends] == 10][:lines] + 4  # where each id begins (every line has one now), after "\n-1 "
    if int((ends[np.searchsorted(ends, starts)] - starts).max()) > 5:
        return None  # an id of more than five digits ("cpu000007"), which the token checks refuse
    cpus = values[:, 1]
    if int(cpus.max()) >= MAX_CPUS or not ((cpus[1:] > cpus[:-1]).all() or len(np.unique(cpus)) == lines):
        return None  # (ids in ascending order, as the kernel prints them, are distinct)
    return CpuTable(CpuTimes, values[:, 1:].copy())


def read_stat(root: SysRoot, last: LastAnswer[CpuTimes] | None = None
              ) -> tuple[Mapping[int, CpuTimes], list[Problem]]:
    """Read and parse /proc/stat under `root`; with `last` (the caller's, kept across
    ticks), CPU lines equal to the last tick's give its rows again (`unchanged.py`)."""
    try:
        data = root.read_bytes(STAT)
    except OSError as exc:
        return {}, [from_oserror("/proc/stat", exc)]
    end = data.find(b"\nintr")  # parse_stat reads no further (the intr line: a number per IRQ)
    head = data if end < 0 else data[:end]
    if last is None:
        return parse_stat(head.decode("latin-1"))
    # the bytes are the key: an unchanged file is not even decoded
    return last.get(head, lambda: parse_stat(head.decode("latin-1")))


def cpu_percentages(prev: CpuTimes, cur: CpuTimes) -> dict[str, float]:
    """Share of the ticks elapsed between two samples of one CPU spent in each state, in %.

    Keys: user, nice, system, idle, iowait, irq, softirq, steal; they add up to 100, or
    are all 0.0 when no tick elapsed. No value is ever negative. A field that went
    backwards is either a restart from zero (the CPU was offlined and came back: the old
    nohz idle/iowait accounting starts again, so the new value is the time since then)
    or the kernel's known small step back of nohz iowait/idle (counted as 0). A drop to
    at most half the old value is taken as the restart.
    """
    deltas = []
    for name in PERCENT_FIELDS:
        a, b = getattr(prev, name), getattr(cur, name)
        if not (0 <= a < _U64 and 0 <= b < _U64):  # a corrupt recording: no figure
            return dict.fromkeys(PERCENT_FIELDS, 0.0)
        if b >= a:
            deltas.append(b - a)
        elif b <= a // 2:
            deltas.append(b)
        else:
            deltas.append(0)
    total = sum(deltas)
    if total <= 0:
        return dict.fromkeys(PERCENT_FIELDS, 0.0)
    scale = 100.0 / total
    return {name: d * scale for name, d in zip(PERCENT_FIELDS, deltas)}
