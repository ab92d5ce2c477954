"""/proc/interrupts read a block at a time gives what the whole text gives.

At 1,024 CPUs x 16,384 IRQs the file is ~185 MB, so it is read CHUNK bytes at a time
(collectors/interrupts.py). These tests cut files at every position (tiny chunks, and
reads that return fewer bytes than asked, as procfs may) and compare with
parse_interrupts of the whole text, and the incremental reader tick by tick with the
reader as it was when it held the whole file (`WholeFileReader` below, its code kept
here as the reference). Inputs: every capture in tests/data (the netutils-linux ones are
byte for byte those of /work/shared/reference), the fuzz regressions, and generated
files with torn lines, CRLF, odd whitespace, bad counts and a header that does not fit.
"""

from __future__ import annotations

import io
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from nettop.collectors import interrupts
from nettop.collectors.interrupts import (CHUNK, InterruptReader, Want, _Blocks, _named_run,
                                          parse_file, parse_interrupts)
from nettop.kernel.sysroot import SysRoot
from nettop.model.problems import Problem, from_oserror
from nettop.model.snapshot import InterruptTable
from treegen import generate_tree

DATA = Path(__file__).parent / "data"
CAPTURES = sorted([*(DATA / "interrupts").glob("*.txt"), DATA / "sos-guest/proc/interrupts",
                   *(DATA / "fuzz-regressions/interrupts").glob("*.in")])


class ShortReads(io.RawIOBase):
    """A file whose reads return at most `most` bytes, as a procfs read may."""

    def __init__(self, data: bytes, most: int) -> None:
        self.data, self.most, self.pos = data, most, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def, override]
        n = min(len(b), self.most, len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def even(irq: int, name: str) -> bool:
    return irq % 2 == 0


def nic(irq: int, name: str) -> bool:
    return "eth" in name or "mlx5_comp" in name or "virtio" in name


WANTS: list[Want | None] = [None, even, nic, lambda irq, name: False]


class WholeFileReader:
    """The incremental reader as it was when it held the whole file (the reference), its
    lines found by the label width of the first numbered line (`label_width`), its fast
    path refused when the named rows at the end are not those of the last full parse."""

    def __init__(self, full_every: int = 10) -> None:
        self.full_every = full_every
        self._ticks = 0
        self._header = b""
        self._base: InterruptTable | None = None
        self._wanted: tuple[int, ...] = ()
        self._keys: tuple[bytes, ...] = ()

    def read(self, root: SysRoot, want: Want | None = None,
             full: bool = False) -> tuple[InterruptTable, list[Problem]]:
        try:
            with open(root.join("proc/interrupts"), "rb", buffering=0) as f:
                data = f.readall()
        except OSError as exc:
            self._base = None
            return InterruptTable(()), [from_oserror(interrupts.SOURCE, exc)]
        self._ticks += 1
        header = data[:data.find(b"\n")]
        if not full and self._base is not None and header == self._header and self._ticks % self.full_every:
            fast = self._fast(data, header)
            if fast is not None:
                return fast, []
        table, problems = parse_interrupts(data.decode("latin-1"), want)
        if problems or not table.cpus:
            self._base = None
        else:
            self._header = header
            self._base = table
            self._wanted = tuple(sorted(i for i, irq in table.irqs.items() if irq.counts is not None))
            width = label_width(data.decode("latin-1"))
            self._keys = tuple(b"\n" + str(i).rjust(max(width, 1)).encode() + b":" for i in self._wanted)
        return table, problems

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
        small, problems = parse_interrupts(b"\n".join(lines + named_tail(data)).decode("latin-1"), None, whole=False)
        if problems or len(small.irqs) != len(self._wanted) or small.other.keys() != base.other.keys():
            return None
        irqs = dict(base.irqs)
        irqs.update(small.irqs)
        return InterruptTable(base.cpus, irqs, small.other)


def label_width(text: str) -> int:
    """The width of "%*d:" on the first line after the header with a numeric label."""
    for line in text.split("\n")[1:]:
        label, colon, _ = line.partition(":")
        if colon and label.strip().isascii() and label.strip().isdigit() and len(label.strip()) <= 10:
            return len(label)
    return 0


def named_tail(data: bytes) -> list[bytes]:
    """The named rows that end the file, found from the end of the whole file."""
    out: list[bytes] = []
    end = len(data)
    while end > 0 and data[end - 1] == 10:
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


# --- generated files ---------------------------------------------------------------

TAILS = ["IO-APIC   2-edge      timer", "PCI-MSI-edge      eth0-TxRx-0", "GICv3  27 Level     arch_timer",
         "", "PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0", "PCI-MSIX-0000:81:00.0  3-edge    mlx5_comp2@pci",
         "IR-IO-APIC-edge", "uhci_hcd:usb4, radeon", "x\xe9\xa0y  z"]
BLANKS = [" ", "  ", "\t", " \t", "\x0b", "\x0c", "\xa0", "\r"]
BAD_COUNTS = ["zz", "+5", "-5", "1_0", "4294967296", "\xb2", "00000000001", ""]
NAMED = ["NMI", "LOC", "ERR", "MIS", "IPI0", "Err", "I/O"]


DAMAGED = ["good"] * 6 + ["squeezed", "short", "bad", "dup", "named", "junk"]
SOUND = ["good"] * 6 + ["squeezed", "named"]  # what a kernel prints: a reader's fast path follows it


@st.composite
def layouts(draw: st.DrawFn, kinds: list[str] = DAMAGED) -> dict:
    """A file's shape: its CPUs, the "%*d" width, and one spec per line."""
    cpus = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4, unique=True).map(sorted))
    if kinds is DAMAGED and draw(st.integers(0, 9)) == 0:
        cpus.append(cpus[0])  # a header naming a CPU twice
    irq = 0
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(kinds))
        if kind != "dup":
            irq += draw(st.integers(1, 40))
        lines.append(dict(kind=kind, irq=irq, tail=draw(st.sampled_from(TAILS)),
                          blank=draw(st.sampled_from(BLANKS)), bad=draw(st.sampled_from(BAD_COUNTS)),
                          label=draw(st.sampled_from(NAMED)),
                          junk=draw(st.sampled_from(["", "   ", "\r", "garbage without colon", "two words: 1",
                                                     "  12", "CPU0"]))))
    for label in draw(st.lists(st.sampled_from(NAMED), max_size=3)):  # the named rows that end a file
        lines.append(dict(kind="named", irq=0, tail="", blank=" ", bad="", label=label, junk=""))
    return dict(cpus=cpus, width=draw(st.integers(1, 5)), lines=lines)


@st.composite
def ticks(draw: st.DrawFn) -> dict:
    """How one tick's file differs from the layout: counts, a line gone, the end, a cut."""
    often = st.sampled_from([None] * 3)  # most ticks are whole files
    return dict(seed=draw(st.integers(0, 3)), drop=draw(often | st.integers(0, 15)),
                eol=draw(st.sampled_from(["\n", "\n", "\r\n", "mixed"])),
                end=draw(st.sampled_from(["\n", "\n", "", "\n\n", "\n \n", "\n\r\n"])),
                cut=draw(often | often | st.integers(0, 2000)))


def render(layout: dict, tick: dict) -> bytes:
    cpus, w = layout["cpus"], layout["width"]
    out = [" " * (w + 2) + "".join(f"CPU{c:<8d}" for c in cpus)]
    for k, spec in enumerate(layout["lines"]):
        if k == tick["drop"]:
            continue
        counts = [(spec["irq"] * 7919 + c * 104729 + tick["seed"] * 65537) % 3_000_000 for c in range(len(cpus))]
        label = f"{spec['irq']:>{w}}:"
        fields = [f" {v:10d}" for v in counts]
        kind = spec["kind"]
        if kind == "squeezed":
            fields = [spec["blank"] + str(v) for v in counts]
        elif kind == "short":
            fields = fields[:-1]
        elif kind == "bad":
            fields[0] = " " + spec["bad"].rjust(10)
        elif kind == "named":
            label = f"{spec['label']:>{w}}:"
            fields = fields[:1] if spec["label"] in ("ERR", "MIS", "Err") else fields
        elif kind == "junk":
            out.append(spec["junk"])
            continue
        out.append(label + "".join(fields) + ("  " + spec["tail"] if spec["tail"] else ""))
    eol = tick["eol"]
    text = "".join(line + ("\r\n" if eol == "\r\n" or (eol == "mixed" and k % 2) else "\n")
                   for k, line in enumerate(out))
    text = text + tick["end"][1:] if tick["end"] else text[:-1]  # "": no newline at the end
    data = text.encode("latin-1")
    return data if tick["cut"] is None else data[:tick["cut"]]


# --- the parse ---------------------------------------------------------------------


@pytest.mark.parametrize("path", CAPTURES, ids=[f"{p.parent.name}/{p.name}" for p in CAPTURES])
def test_every_capture_parses_the_same_a_block_at_a_time(path):
    data = path.read_bytes()
    for want in WANTS:
        whole = parse_interrupts(data.decode("latin-1"), want)
        for chunk in (1, 2, 3, 7, 64, 1000, CHUNK):
            assert parse_file(io.BytesIO(data), want, chunk) == whole, chunk
        assert parse_file(ShortReads(data, 5), want, 100) == whole


def test_a_block_boundary_at_every_byte_of_a_file():
    data = (DATA / "interrupts/nettop-vm-6.18-virtio.txt").read_bytes()
    cut = data[:data.find(b"\n", 1500) + 1] + b"NMI:  1  2  Non-maskable\r\nERR:  0\n\n"
    for want in (None, even):
        whole = parse_interrupts(cut.decode("latin-1"), want)
        assert whole[0].irqs and whole[0].other
        for chunk in range(1, len(cut) + 2):
            assert parse_file(io.BytesIO(cut), want, chunk) == whole, chunk


@settings(max_examples=400, deadline=None)
@given(layouts(), ticks(), st.integers(1, 48), st.integers(1, 48), st.sampled_from(WANTS))
def test_generated_files_parse_the_same_a_block_at_a_time(layout, tick, chunk, most, want):
    data = render(layout, tick)
    assert parse_file(ShortReads(data, most), want, chunk) == parse_interrupts(data.decode("latin-1"), want)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([b"", b" ", b"\r", b"\t", b"\x0b", b"\x0c", b"NMI: 1", b"  LOC: 2 3  x", b"CPU0 CPU1",
                                 b" 12: 3", b"\t0: 1", b"7", b"\xa0NMI", b"\x0c ERR:"]), max_size=10),
       st.booleans(), st.integers(1, 12), st.integers(1, 12))
def test_named_rows_at_the_end_are_found_a_block_at_a_time(lines, newline, chunk, most):
    data = b"\n".join(lines) + (b"\n" if newline else b"")
    blocks = _Blocks(ShortReads(data, most), chunk)
    run: list[bytes] = []
    blanks = 0
    while blocks.next():
        run, blanks = _named_run(blocks.buf, blocks.start, blocks.end, run, blanks)
    assert run == named_tail(data)


def test_a_header_longer_than_a_block_and_a_file_without_a_newline():
    long = b"   " + b"".join(b"CPU%-8d" % c for c in range(300))
    line = b"  1:" + b"".join(b" %10d" % c for c in range(300)) + b"  IO-APIC   2-edge      timer"
    for data in (long + b"\n" + line, long, b"no header at all, and more than sixty characters on its first line"):
        whole = parse_interrupts(data.decode("latin-1"))
        assert parse_file(io.BytesIO(data), None, 16) == whole


# --- the incremental reader ----------------------------------------------------------


def read_both(path: Path, data: bytes, new: InterruptReader, old: WholeFileReader, want: Want | None,
              full: bool = False) -> tuple[InterruptTable, list[Problem]]:
    path.write_bytes(data)
    root = SysRoot(str(path.parent.parent))
    got = new.read(root, want, full)
    assert got == old.read(root, want, full)
    return got


@settings(max_examples=150, deadline=None)
@given(layouts(SOUND) | layouts(), st.lists(ticks(), min_size=1, max_size=6), st.integers(1, 64), st.integers(2, 8),
       st.sampled_from(WANTS))
def test_reader_ticks_equal_the_whole_file_reader(layout, seq, chunk, full_every, want):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "proc/interrupts"
        path.parent.mkdir()
        new, old = InterruptReader(full_every, chunk), WholeFileReader(full_every)
        # a first tick as the kernel prints it, so that the next ones may take the fast path
        read_both(path, render(layout, dict(seed=0, drop=None, eol="\n", end="\n", cut=None)), new, old, want)
        for tick in seq:
            read_both(path, render(layout, tick), new, old, want)


def test_fast_ticks_keep_the_last_full_parse_names_and_equal_the_whole_file_reader(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=60, queues=4)
    path = tree / "proc/interrupts"
    data = path.read_bytes()
    renamed = data.replace(b"nvme", b"NVME")  # not wanted: only a full parse sees it
    assert renamed != data
    for chunk in (7, 100, 4096, CHUNK):
        new, old = InterruptReader(100, chunk), WholeFileReader(100)
        first, _ = read_both(path, data, new, old, nic)
        fast, problems = read_both(path, renamed, new, old, nic)
        assert not problems and fast.irqs == first.irqs  # the fast path ran: the names are the last ones
        gone = b"".join(l for l in data.splitlines(keepends=True) if b"mlx5_comp1@" not in l)
        full, _ = read_both(path, gone, new, old, nic)  # a wanted line is missing: read again, whole
        assert full == parse_interrupts(gone.decode("latin-1"), nic)[0]
        assert b"NVME" not in gone and full.irqs != first.irqs
        assert len(new._buf) == chunk  # grown for lines longer than a chunk, and not kept so


def test_each_block_of_the_kernel_file_is_found_at_every_chunk_size(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=4, irqs=30, queues=4)
    path = tree / "proc/interrupts"
    data = path.read_bytes()
    later = generate_tree(tmp_path / "l", cpus=4, irqs=30, queues=4, step=1) / "proc/interrupts"
    for chunk in range(1, len(data) + 2, 3):
        new, old = InterruptReader(100, chunk), WholeFileReader(100)
        read_both(path, data, new, old, nic)
        fast, _ = read_both(path, later.read_bytes(), new, old, nic)
        assert fast.irqs[24].counts != parse_interrupts(data.decode("latin-1"), nic)[0].irqs[24].counts


def test_memory_is_a_block_and_the_result_not_the_file(tmp_path):
    """GIVEN a 3 MB file WHEN the reader parses it whole and then on its fast path
    THEN neither holds the file: the peak is well under its size (it was twice it)."""
    tree = generate_tree(tmp_path / "t", cpus=128, irqs=2048, queues=8, sparse=True, sysfs_irq=False)
    size = (tree / "proc/interrupts").stat().st_size
    assert size > 2_500_000
    reader = InterruptReader(100, chunk=64 << 10)
    root = SysRoot(str(tree))
    interrupts._reset_names()
    tracemalloc.start()
    try:
        table, problems = reader.read(root, nic)
        full_peak = tracemalloc.get_traced_memory()[1]
        held = tracemalloc.get_traced_memory()[0]  # the table, the names cache
        tracemalloc.reset_peak()
        again, _ = reader.read(root, nic)
        fast_peak = tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()
    assert not problems and again == table and sum(i.counts is not None for i in table.irqs.values()) == 8
    assert full_peak < size / 2 and fast_peak < size / 8, (full_peak, fast_peak, size)
