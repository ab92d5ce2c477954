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

The file is read `CHUNK` bytes at a time and parsed a block of whole lines at a time (a
partial last line waits for the next read): at 1,024 CPUs x 16,384 IRQs it is ~185 MB,
and holding it as bytes and as text at once would take ~400 MB, the whole live view's
budget. Memory is a block plus the result (and the longest line, if longer than a block);
a block is parsed by the same code as a whole text, so both give the same table.

Bad input (see docs/bad-input.md) never raises: a header naming a CPU twice, a count that
is not an unsigned 32-bit number (the kernel keeps `unsigned int` per CPU), an IRQ listed
twice, or a file without a single numbered IRQ (another file's content) is a Problem.
"""

from __future__ import annotations

import re
from typing import Callable, Protocol

from nettop.collectors.cpus import MAX_CPUS
from nettop.model.problems import Problem, from_oserror, malformed
from nettop.model.snapshot import InterruptTable, Irq
from nettop.kernel.sysroot import SysRoot

SOURCE = "/proc/interrupts"
CHUNK = 1 << 20  # bytes read at a time: reading and decoding 1-4 MB pieces was fastest here
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


class Readable(Protocol):
    """An open binary file (the reader's is unbuffered: one read() system call each)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


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
    nl = text.find("\n")
    if nl < 0:
        nl = len(text)
    lines = _Lines.start(text[:nl], lambda: text[:60], want)
    if not isinstance(lines, _Lines):
        return InterruptTable(()), [lines]
    lines.feed(text, nl + 1)
    return lines.result(whole)


class _Lines:
    """One parse in progress: the header's CPUs and what the lines read so far gave.

    Fed the whole text at once (parse_interrupts) or a block of whole lines at a time
    (_parse_blocks); line numbers and problems carry over from block to block.
    """

    def __init__(self, cpus: tuple[int, ...], want: Want | None) -> None:
        self.cpus = cpus
        self.want = want
        self.problems: list[Problem] = []
        self.irqs: dict[int, Irq] = {}
        self.other: dict[str, tuple[int, ...]] = {}
        self.cache = _NAMES if len(_NAMES) < _NAMES_MAX else _reset_names()
        self.lineno = 1
        self.width = 0  # of the first numbered line's label, "%*d:" (the reader finds lines by it)

    @classmethod
    def start(cls, header: str, head: Callable[[], str], want: Want | None) -> _Lines | Problem:
        """A parse of the file whose first line is `header`, or the Problem that stops it
        (`head()`: the file's first 60 characters, for the message)."""
        cpus = parse_header(header)
        if cpus is None:
            return malformed(SOURCE, f"no CPU header line (got {head()!r})")
        if len(set(cpus)) != len(cpus):
            return Problem(SOURCE, (
                f"{SOURCE} is inconsistent: its header names a CPU twice ({header[:60]!r}); "
                "per-CPU IRQ counts cannot be attributed and are not shown"))
        return cls(cpus, want)

    def feed(self, text: str, pos: int = 0) -> None:
        """Parse the lines of text[pos:]: whole lines (only the file's last may lack its "\n")."""
        # Lines are walked with find() rather than split(): slicing out every line would copy
        # the whole text, while only the short tails and the wanted counts are needed.
        size = len(text)
        want, problems, irqs, other, cache = self.want, self.problems, self.irqs, self.other, self.cache
        n = len(self.cpus)
        span = _FIELD * n
        lineno = self.lineno
        width = self.width
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
            width = width or c - start
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
        self.lineno = lineno
        self.width = width

    def result(self, whole: bool = True) -> tuple[InterruptTable, list[Problem]]:
        if whole and not self.irqs:
            self.problems.append(Problem(SOURCE, (
                f"{SOURCE} holds no numbered IRQ line (truncated, or another file's content); "
                "IRQ rates are not shown")))
        return InterruptTable(self.cpus, self.irqs, self.other), self.problems


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
        with open(root.join("proc/interrupts"), "rb", buffering=0) as f:
            return parse_file(f, want)
    except OSError as exc:
        return InterruptTable(()), [from_oserror(SOURCE, exc)]


def parse_file(f: Readable, want: Want | None = None, chunk: int = CHUNK) -> tuple[InterruptTable, list[Problem]]:
    """Parse an open /proc/interrupts `chunk` bytes at a time: parse_interrupts of its
    whole text, without holding it. Raises OSError as reading the file does."""
    blocks = _Blocks(f, chunk)
    blocks.next()
    table, problems, _ = _parse_blocks(blocks, want)
    return table, problems


class _Blocks:
    """A file read as blocks of whole lines: after next(), buf[start:end].

    Each read fills the buffer; the block ends at its last newline, and the rest (a
    partial line) is moved to the front for the next read, together with that newline, so
    that every line of a block but the file's first has its "\n" before it (the reader's
    fast path finds lines by "\n%*d:"). A line longer than the buffer grows it. The last
    block ends at the end of the file, with or without a newline, and may be empty.
    """

    def __init__(self, f: Readable, size: int, buf: bytearray | None = None) -> None:
        self.f = f
        self.buf = bytearray(max(size, 1)) if buf is None else buf
        self.have = 0  # bytes of the file in buf
        self.start = 0
        self.end = 0
        self.eof = False

    def next(self) -> bool:
        """Move to the next block; False once the last one has been given."""
        if self.eof:
            return False
        buf = self.buf
        if self.end:
            keep = self.have - self.end + 1
            buf[:keep] = buf[self.end - 1:self.have]
            self.have, self.start = keep, 1
        while True:
            self._fill(len(buf))
            if self.eof:
                self.end = self.have
                return True
            nl = buf.rfind(b"\n", self.start, self.have)
            if nl >= 0:
                self.end = nl + 1
                return True
            buf.extend(bytes(len(buf)))

    def _fill(self, upto: int) -> None:
        with memoryview(self.buf) as mv:
            while self.have < upto:
                n = self.f.readinto(mv[self.have:upto])
                if not n:
                    self.eof = True
                    return
                self.have += n

    def head(self, size: int) -> bytes:
        """The file's first `size` bytes (fewer if it is shorter), during the first block
        only; it may read past the block, so the parse must end after it."""
        if self.have < size and not self.eof:
            if len(self.buf) < size:
                self.buf.extend(bytes(size - len(self.buf)))
            self._fill(size)
        return bytes(self.buf[:min(self.have, size)])

    def text(self) -> str:
        return self.decode(self.start, self.end)

    def decode(self, i: int, j: int) -> str:
        with memoryview(self.buf) as mv:
            return str(mv[i:j], "latin-1")

    def header(self) -> bytes:
        """The first line without its newline, during the first block (the whole file but
        its last byte if it has no newline, as `data[:data.find(b"\n")]` gives)."""
        nl = self.buf.find(b"\n", 0, self.end)
        return bytes(self.buf[:nl if nl >= 0 else max(self.end - 1, 0)])


def _parse_blocks(blocks: _Blocks, want: Want | None) -> tuple[InterruptTable, list[Problem], int]:
    """parse_interrupts over the blocks of a file, the first one already read; and the
    width of the first numbered line's "%*d:" label."""
    text = blocks.text()
    nl = text.find("\n")
    if nl < 0:
        nl = len(text)
    lines = _Lines.start(text[:nl], lambda: blocks.head(60).decode("latin-1"), want)
    if not isinstance(lines, _Lines):
        return InterruptTable(()), [lines], 0
    lines.feed(text, nl + 1)
    del text
    while blocks.next():
        lines.feed(blocks.text())
    return (*lines.result(), lines.width)


class InterruptReader:
    """Reads /proc/interrupts tick after tick, parsing only what changed in kind.

    On a 256-CPU, 4096-IRQ host the file is ~12 MB, and walking every line costs several
    times reading it. Between full parses (every `full_every` ticks, and whenever the
    header or the set of wanted IRQs changes, or a wanted line cannot be found), a tick
    only locates the wanted IRQs' lines by their "%*d:" prefix in the raw bytes, parses
    those and the named rows at the end, and keeps the other IRQs' names from the last
    full parse. IRQs that appear or vanish among the unwanted ones are therefore seen
    within `full_every` ticks. Both read the file `chunk` bytes at a time; when the fast
    path cannot find a wanted line (known only at the end of the file), the file is read
    again from the start for the full parse.
    """

    def __init__(self, full_every: int = 10, chunk: int = CHUNK) -> None:
        self.full_every = full_every
        self.chunk = max(chunk, 1)
        # kept from tick to tick: zeroing a new 1 MiB costs a fifth of a small host's read
        self._buf = bytearray(self.chunk)
        self._ticks = 0
        self._header = b""
        self._base: InterruptTable | None = None
        self._wanted: tuple[int, ...] = ()
        self._keys: tuple[bytes, ...] = ()

    def read(self, root: SysRoot, want: Want | None = None,
             full: bool = False) -> tuple[InterruptTable, list[Problem]]:
        """The table for this tick; `full` forces a whole parse (the caller's `want` grew)."""
        tick = self._ticks + 1
        try:
            with open(root.join("proc/interrupts"), "rb", buffering=0) as f:
                blocks = _Blocks(f, self.chunk, self._buf)
                blocks.next()
                header = blocks.header()
                if not full and self._base is not None and header == self._header and tick % self.full_every:
                    fast = self._fast(blocks, header)
                    if fast is not None:
                        self._ticks = tick
                        return fast, []
                    f.seek(0)
                    blocks = _Blocks(f, self.chunk, self._buf)
                    blocks.next()
                    header = blocks.header()
                table, problems, width = _parse_blocks(blocks, want)
        except OSError as exc:
            self._base = None
            return InterruptTable(()), [from_oserror(SOURCE, exc)]
        finally:
            del self._buf[self.chunk:]  # grown for a line longer than a chunk: not kept
        self._ticks = tick
        self._remember(table, header, problems, width)
        return table, problems

    def _remember(self, table: InterruptTable, header: bytes, problems: list[Problem], width: int) -> None:
        """Keep a good full parse, and how to find its wanted lines: "\n%*d:" with the width
        the lines have (the kernel indents its header by that width + 8, not + 2)."""
        if problems or not table.cpus:
            self._base = None
            return
        self._header = header
        self._base = table
        self._wanted = tuple(sorted(i for i, irq in table.irqs.items() if irq.counts is not None))
        self._keys = tuple(b"\n" + str(i).rjust(max(width, 1)).encode() + b":" for i in self._wanted)

    def _fast(self, blocks: _Blocks, header: bytes) -> InterruptTable | None:
        """The wanted lines, found in order, and the named rows that end the file, parsed
        alone (each as it is found: at 1,024 CPUs a line is 11 kB, and hundreds are
        wanted); None if a wanted line is missing or does not parse."""
        base = self._base
        assert base is not None
        rows = _Lines.start(header.decode("latin-1"), lambda: "", None)
        if not isinstance(rows, _Lines):  # not seen: this header parsed at the last full parse
            return None
        keys = self._keys
        k = 0
        named: list[bytes] = []
        blanks = 0
        while True:
            buf, end = blocks.buf, blocks.end
            # a key at the block's last "\n" is found in the next block, which starts with it
            last = end if blocks.eof else end - 1
            pos = 0
            while k < len(keys):
                i = buf.find(keys[k], pos, last)
                if i < 0:
                    break
                j = buf.find(b"\n", i + 1, end)
                j = end if j < 0 else j
                rows.feed(blocks.decode(i + 1, j))
                pos = j
                k += 1
            named, blanks = _named_run(buf, blocks.start, end, named, blanks)
            if not blocks.next():
                break
        if k < len(keys):
            return None
        for line in named:
            rows.feed(line.decode("latin-1"))
        small, problems = rows.result(whole=False)
        # named rows are looked for at the end only: one printed elsewhere (or gone) would be lost
        if problems or len(small.irqs) != len(self._wanted) or small.other.keys() != base.other.keys():
            return None
        irqs = dict(base.irqs)
        irqs.update(small.irqs)
        return InterruptTable(base.cpus, irqs, small.other)


_BLANK = b" \t\r\x0b\x0c"  # what bytes.strip() removes from a line (besides "\n")


def _named_run(buf: bytearray, start: int, end: int, run: list[bytes],
               blanks: int) -> tuple[list[bytes], int]:
    """The named rows (NMI, LOC, ..., ERR, MIS) that end the file, block by block.

    `run` is the named lines that end what was read before this block, `blanks` the empty
    lines after them: ignored if the file ends there, else they end the run. The lines of
    buf[start:end] are walked from the end, and a line that is blank or starts with a
    digit ends the run (the header does not: in a file without numbered lines it is taken
    too, the rows' parse then fails, and the tick is parsed whole).
    """
    e = end - 1 if end > start and buf[end - 1] == 10 else end
    if e == end == start:  # the last block, empty: the file ended with a newline
        return run, blanks
    empty = 0
    while True:  # empty lines at the block's end
        i = buf.rfind(b"\n", start, e)
        s = start if i < 0 else i + 1
        if s < e:
            break
        empty += 1
        if s == start:
            return run, blanks + empty
        e = s - 1
    got: list[bytes] = []
    while True:
        c = s
        while c < e and buf[c] in _BLANK:
            c += 1
        if c == e or 48 <= buf[c] <= 57:
            got.reverse()
            return got, empty
        got.append(bytes(buf[s:e]))
        if s == start:
            got.reverse()
            return (run if not blanks else []) + got, empty
        e = s - 1
        i = buf.rfind(b"\n", start, e)
        s = start if i < 0 else i + 1
