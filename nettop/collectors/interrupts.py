"""/proc/interrupts: every IRQ's chip, hwirq and name; per-CPU counts only where wanted.

A 256-CPU, 4096-IRQ host prints about 11 MB here, and nettop reads it every tick. Most
of it is per-CPU counts of IRQs nobody looks at, so the parser finds each line's name
without touching its counts: the kernel prints `%*d:` and then one 11-character field per
online CPU (`%10u ` on old kernels, ` %10u` on new ones; same columns either way), so the
chip/hwirq/name tail starts at a known offset. The slice is verified (the column before
it must end a number, the one at it must be a blank) and a line that does not fit is
parsed token by token instead. Counts are turned into integers only for the IRQs that
`want(irq, name)` accepts.

CPU ids come from the header, never from column positions: offline CPUs are missing from
it (`CPU0 CPU2 CPU3`), and the counts line up with the ids that are printed.

Bad input (see docs/bad-input.md) never raises: a header naming a CPU twice, a count that
is not an unsigned 32-bit number (the kernel keeps `unsigned int` per CPU), an IRQ listed
twice, or a file without a single numbered IRQ (another file's content) is a Problem.
"""

from __future__ import annotations

import re
from typing import Callable

from nettop.collectors.cpus import MAX_CPUS
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import InterruptTable, Irq
from nettop.kernel.sysroot import SysRoot

SOURCE = "/proc/interrupts"
_FIELD = 11  # one per-CPU count: a blank and a number right-aligned in 10 columns

# The tail after the counts. New kernels: "PCI-MSIX-0000:00:03.0   2-edge      eth0-rx-0";
# old kernels: "PCI-MSI-edge      eth0-TxRx-0"; ARM: "GICv3  27 Level     arch_timer".
# The hwirq column is a number (maybe empty) joined to the flow name ("2-edge", "-edge"),
# or a bare number, optionally followed by the Level/Edge column of GENERIC_IRQ_SHOW_LEVEL.
# The tail is stripped first and the name taken greedily: a lazy name followed by
# `\s*$` retried the blank run at every position, quadratic in a long run of blanks.
_TAIL = re.compile(
    r"(?P<chip>\S+)"
    r"(?:\s+(?P<hwirq>\d*-[\w-]+|\d+(?:\s+(?:Level|Edge))?(?:\s*-[\w-]+)?)(?=\s|$))?"
    r"\s*(?P<name>.*)",
    re.DOTALL,
)
# What a run of per-CPU counts may hold: ASCII blanks and digits (int() alone would also
# take "+5", "-5", "1_0" and Unicode digits).
_COUNT_TEXT = re.compile(r"[\s0-9]*", re.ASCII)
_U32 = 1 << 32
_COUNTS_RE: dict[int, re.Pattern[str]] = {}

Want = Callable[[int, str], bool]


def _counts_re(n: int) -> re.Pattern[str]:
    pat = _COUNTS_RE.get(n)
    if pat is None:
        pat = _COUNTS_RE[n] = re.compile(r"((?:\s+\d+){%d})(?=\s|$)(.*)" % n if n else r"()(.*)")
    return pat


def parse_header(line: str) -> tuple[int, ...] | None:
    """CPU ids from the header line ("CPU0 CPU2 CPU3"), or None if it is not one."""
    ids = []
    for tok in line.split():
        num = tok[3:]
        if not tok.startswith("CPU") or not (num.isascii() and num.isdigit()) or len(num) > 5:
            return None
        cpu = int(num)
        if cpu >= MAX_CPUS:
            return None
        ids.append(cpu)
    return tuple(ids) if ids else None


def _split_tail(tail: str) -> tuple[str, str, str]:
    m = _TAIL.match(tail.strip())
    if m is None:  # only whitespace after the counts
        return "", "", ""
    return m.group("chip") or "", m.group("hwirq") or "", m.group("name")


def parse_interrupts(text: str, want: Want | None = None,
                     whole: bool = True) -> tuple[InterruptTable, list[Problem]]:
    """Parse /proc/interrupts text into an InterruptTable (pure; never raises).

    `want(irq, name)` decides which numbered lines get their per-CPU counts parsed (None:
    all of them); every line's chip, hwirq and name are always found. Named rows (NMI,
    LOC, ERR, MIS, ...) go to `other` with the counts they print (ERR/MIS have one).
    `whole` is False for a text that holds only some lines of the file (the reader's
    fast path), which then may lack numbered IRQs.
    """
    # Lines are walked with find() rather than split(): slicing out every line would copy
    # the whole file, while only the short tails and the wanted counts are needed.
    size = len(text)
    nl = text.find("\n")
    if nl < 0:
        nl = size
    cpus = parse_header(text[:nl])
    if cpus is None:
        return InterruptTable(()), [malformed(SOURCE, f"no CPU header line (got {text[:60]!r})")]
    if len(set(cpus)) != len(cpus):
        return InterruptTable(()), [Problem(SOURCE, (
            f"{SOURCE} is inconsistent: its header names a CPU twice ({text[:min(nl, 60)]!r}); "
            "per-CPU IRQ counts cannot be attributed and are not shown"))]
    problems: list[Problem] = []
    n = len(cpus)
    span = _FIELD * n
    irqs: dict[int, Irq] = {}
    other: dict[str, tuple[int, ...]] = {}
    cache = _NAMES if len(_NAMES) < _NAMES_MAX else _reset_names()
    lineno = 1
    pos = nl + 1
    while pos < size:
        nl = text.find("\n", pos)
        if nl < 0:
            nl = size
        lineno += 1
        start, pos = pos, nl + 1
        c = text.find(":", start, nl)
        if c < 0:
            if text[start:nl].strip():
                problems.append(malformed(SOURCE, f"line {lineno} has no ':' ({text[start:nl][:60]!r})"))
            continue
        label = text[start:c].strip()
        if not (label.isascii() and label.isdigit() and len(label) <= 10):
            if label and len(label.split()) == 1:  # NMI, LOC, IPI0, Err, s390's I/O
                other[label] = _named_row(text[c + 1:nl], n)
            else:
                problems.append(malformed(SOURCE, f"line {lineno} has no IRQ label ({label[:20]!r})"))
            continue
        irq = int(label)
        if irq in irqs:
            problems.append(Problem(SOURCE, (
                f"{SOURCE} is inconsistent: IRQ {irq} is listed twice (line {lineno}); "
                "the first line is used")))
            continue
        end = c + 1 + span
        # Fast path: the tail starts right after the last fixed-width count field.
        if end <= nl and (end == nl or text[end] == " ") and text[end - 1].isdigit():
            counts_at: tuple[int, int] | str = (c + 1, end)
            tail = text[end:nl]
        else:
            m = _counts_re(n).match(text, c + 1, nl)
            if m is None:
                problems.append(malformed(
                    SOURCE, f"IRQ {irq} (line {lineno}) does not have {n} per-CPU counts"))
                continue
            counts_at, tail = m.group(1), m.group(2)
        key = (irq, tail)
        bare = cache.get(key)
        if bare is None:
            bare = cache[key] = Irq(irq, *_split_tail(tail))
        if want is not None and not want(irq, bare.name):
            irqs[irq] = bare
            continue
        seg = text[counts_at[0]:counts_at[1]] if isinstance(counts_at, tuple) else counts_at
        vals = seg.split()
        counts: tuple[int, ...] = ()
        if _COUNT_TEXT.fullmatch(seg) and all(len(v) <= 10 for v in vals):
            counts = tuple(map(int, vals))
        if len(counts) != n:
            problems.append(malformed(
                SOURCE, f"IRQ {irq} (line {lineno}) does not have {n} per-CPU counts"))
            continue
        if counts and max(counts) >= _U32:
            problems.append(Problem(SOURCE, (
                f"{SOURCE} is corrupt: IRQ {irq} (line {lineno}) has a per-CPU count wider "
                "than 32 bits; its rates are not shown")))
            continue
        irqs[irq] = Irq(irq, bare.chip, bare.hwirq, bare.name, counts, sum(counts))
    if whole and not irqs:
        problems.append(Problem(SOURCE, (
            f"{SOURCE} holds no numbered IRQ line (truncated, or another file's content); "
            "IRQ rates are not shown")))
    return InterruptTable(cpus, irqs, other), problems


def _named_row(rest: str, n: int) -> tuple[int, ...]:
    """Counts of a named row ("NMI", "LOC", "ERR"): up to n numbers before the description."""
    vals = []
    for tok in rest.split(None, n)[:n]:
        if not (tok.isascii() and tok.isdigit() and len(tok) <= 10) or int(tok) >= _U32:
            break
        vals.append(int(tok))
    return tuple(vals)


# Lines whose counts are not wanted repeat tick after tick with the same tail, so their
# count-less Irq values are kept and reused (bounded; cleared when it grows past the max).
_NAMES: dict[tuple[int, str], Irq] = {}
_NAMES_MAX = 1 << 16


def _reset_names() -> dict[tuple[int, str], Irq]:
    _NAMES.clear()
    return _NAMES


def read_interrupts(root: SysRoot, want: Want | None = None) -> tuple[InterruptTable, list[Problem]]:
    """Read and parse `proc/interrupts` under `root`; an unreadable file is a Problem."""
    try:
        text = root.read_text("proc/interrupts")
    except OSError as exc:
        return InterruptTable(()), [from_oserror(SOURCE, exc)]
    return parse_interrupts(text, want)


class InterruptReader:
    """Reads /proc/interrupts tick after tick, parsing only what changed in kind.

    On a 256-CPU, 4096-IRQ host the file is ~12 MB, and walking every line costs several
    times reading it. Between full parses (every `full_every` ticks, and whenever the
    header or the set of wanted IRQs changes, or a wanted line cannot be found), a tick
    only locates the wanted IRQs' lines by their "%*d:" prefix in the raw bytes, parses
    those and the named rows at the end, and keeps the other IRQs' names from the last
    full parse. IRQs that appear or vanish among the unwanted ones are therefore seen
    within `full_every` ticks.
    """

    def __init__(self, full_every: int = 10) -> None:
        self.full_every = full_every
        self._ticks = 0
        self._header = b""
        self._base: InterruptTable | None = None
        self._wanted: tuple[int, ...] = ()
        self._keys: tuple[bytes, ...] = ()

    def read(self, root: SysRoot, want: Want | None = None,
             full: bool = False) -> tuple[InterruptTable, list[Problem]]:
        """The table for this tick; `full` forces a whole parse (the caller's `want` grew)."""
        try:
            with open(root.join("proc/interrupts"), "rb", buffering=0) as f:
                data = f.readall()
        except OSError as exc:
            self._base = None
            return InterruptTable(()), [from_oserror(SOURCE, exc)]
        self._ticks += 1
        header = data[:data.find(b"\n")]
        if not full and self._base is not None and header == self._header and self._ticks % self.full_every:
            fast = self._fast(data, header)
            if fast is not None:
                return fast, []
        table, problems = parse_interrupts(data.decode("latin-1"), want)
        self._remember(table, header, problems)
        return table, problems

    def _remember(self, table: InterruptTable, header: bytes, problems: list[Problem]) -> None:
        if problems or not table.cpus:
            self._base = None
            return
        self._header = header
        self._base = table
        self._wanted = tuple(sorted(i for i, irq in table.irqs.items() if irq.counts is not None))
        width = len(header) - len(header.lstrip(b" ")) - 2  # the "%*d: " prefix width
        self._keys = tuple(b"\n" + str(i).rjust(max(width, 1)).encode() + b":" for i in self._wanted)

    def _fast(self, data: bytes, header: bytes) -> InterruptTable | None:
        base = self._base
        assert base is not None
        lines = [header]
        pos = 0
        for key in self._keys:
            i = data.find(key, pos)
            if i < 0:
                return None
            j = data.find(b"\n", i + 1)
            j = len(data) if j < 0 else j
            lines.append(data[i + 1:j])
            pos = j
        tail = _named_tail(data)
        small, problems = parse_interrupts(b"\n".join(lines + tail).decode("latin-1"), None, whole=False)
        if problems or len(small.irqs) != len(self._wanted):
            return None
        irqs = dict(base.irqs)
        irqs.update(small.irqs)
        return InterruptTable(base.cpus, irqs, small.other)


def _named_tail(data: bytes) -> list[bytes]:
    """The named rows (NMI, LOC, ..., ERR, MIS) that end the file, found from the end."""
    out: list[bytes] = []
    end = len(data)
    while end > 0 and data[end - 1] == 10:  # without copying the 12 MB that rstrip would
        end -= 1
    while end > 0:
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end]
        if line.lstrip()[:1].isdigit() or not line.strip():
            break
        out.append(line)
        end = start - 1
    out.reverse()
    return out
