"""Per-IRQ per-CPU counts from /sys/kernel/irq/N/per_cpu_count: only the IRQs shown.

/proc/interrupts prints every IRQ for every online CPU: 12 MB at 256 CPUs and 4,096
IRQs, ~185 MB at 1,024 CPUs and 16,384 IRQs, formatted by the kernel on each read and
read whole by nettop every tick. Since 4.9 the kernel also gives each IRQ a directory
in /sys/kernel/irq (kernel/irq/irqdesc.c): `per_cpu_count` (the counts of every
*possible* CPU, "%u" joined by ","), `actions` (the handler names joined by ","),
`chip_name`, `hwirq`, `name` (the flow handler: "edge"), `type`, `wakeup`. So a tick
reads one small file per followed IRQ (the NICs' queue IRQs) and nothing else.

Discovery lists the directory and reads each IRQ's actions, chip and hwirq once (and
stats its hwirq file, as `_reread` keeps it), which gives the same chip/hwirq/name as
/proc/interrupts would (an IRQ without an action is left out, as /proc/interrupts
leaves it out). It is done again when the set of IRQs changes (a NIC reset, channels
changed, hotplug): the directory's link count (2 + its subdirectories, one stat) is
checked every tick, and an IRQ whose file vanished forces it, with its names read
afresh (a held file fails with ENODEV once its desc is freed, also when its number
is taken again). A driver that renames its vectors on the same numbers changes no link count: each
tick the followed IRQs whose number is the tick's count modulo `recheck_every` have
their actions, chip and hwirq read again, so each is read again every `recheck_every`
ticks and a tick reads a tenth of them (all of them on one tick would be 2,064 opens at
1,024 CPUs, a ~10 ms spike every tenth tick that medians hide); chip and hwirq only when
`actions` or the `hwirq` file itself changed (`_reread`).

On the live kernel each followed IRQ's file is opened once and read again with
`pread(fd, 0)` (kernfs regenerates a seq_file read from offset 0): one system call per
IRQ per tick instead of open, read and close, ~1.5 us instead of ~9 us here. At most
`max_open` (a quarter of RLIMIT_NOFILE, up to 1,024) are held; the rest are opened each
time. A captured tree is opened afresh: a generated tree that advances replaces its files
by rename, and a held descriptor would keep reading the old one (a tree rewritten in
place, `SysRoot.in_place`, is held as the live kernel is). Files opened
afresh are opened relative to the /sys/kernel/irq directory, held open ("N/per_cpu_count":
two path components to walk, not the root's whole path).

`read` returns None when this source cannot answer and /proc/interrupts must (a kernel
or capture without /sys/kernel/irq, an unreadable `possible` CPU list, a per_cpu_count
cut short at PAGE_SIZE, as the kernel does with large counts on ~1,000 CPUs); the
reason is kept in `fallback_reason`. The named rows of /proc/interrupts (NMI, LOC, ...)
exist only there: a table from sysfs has none.
"""

from __future__ import annotations

import itertools
import operator
import os
from typing import Any, Callable, Iterable, Iterator, KeysView, Mapping, Sequence

from nettop.collectors.cpus import parse_cpu_list
from nettop.collectors.rows import build
from nettop.model.counts import DTYPE, CountMatrix, CountRow, MatrixIrqs, numpy
from nettop.model.snapshot import InterruptTable, Irq
from nettop.kernel.held_files import close_all, fd_budget
from nettop.kernel.sysroot import SysRoot

SOURCE = "/sys/kernel/irq"
DIR = "sys/kernel/irq"
_U32 = 1 << 32
# changed rows from which a tick takes them in bulk (`SysfsIrqReader._bulk`): below, the
# per-row loop's few microseconds a row cost less than the numpy passes' fixed ~0.1 ms
VECTOR_FROM = 32

Want = Callable[[int, str], bool]


def _read_bytes(path: str) -> bytes:
    """One small sysfs file (one page at most) with the fewest system calls."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _read(path: str) -> str:
    return _read_bytes(path).decode("latin-1")


def _meta(base: str, irq: int) -> Irq | None:
    """The IRQ's chip, hwirq column and action names as /proc/interrupts prints them;
    None for an IRQ without an action (not printed there) or a directory gone."""
    d = f"{base}/{irq}/"
    try:
        actions = _read(d + "actions").strip()
        if not actions:
            return None
        chip = _read(d + "chip_name").strip()
        hwirq = _read(d + "hwirq").strip()
        flow = _read(d + "name").strip()
    except OSError:
        return None
    hw = f"{hwirq}-{flow}" if flow else hwirq
    return Irq(irq, chip, hw, ", ".join(actions.split(",")))


def _ident(path: str) -> tuple[int, int] | None:
    """(inode, ctime) of an IRQ's `hwirq` file: new when its desc is (see `_reread`)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


class SysfsIrqReader:
    """Reads the followed IRQs' per_cpu_count tick after tick (not thread-safe)."""

    def __init__(self, recheck_every: int = 10, max_open: int | None = None) -> None:
        self.recheck_every = recheck_every
        self.max_open = _fd_budget() if max_open is None else max_open
        self._fds: dict[str, int] = {}  # per_cpu_count path -> a descriptor held open (live only)
        # those of `_fd_rows` (the followed IRQs) in their order, while all are held; None
        # once any of `_fds` is closed (a descriptor number can be another file's next)
        self._fd_row: list[int] | None = None
        self._fd_rows: tuple[int, ...] = ()
        self._hold = False  # whether this tick's root is the live kernel
        self.fallback_reason: str | None = None
        # of the last table read: the followed IRQs alone, in the table's order (the table
        # also names every other IRQ, for the queue map; a snapshot holds only these)
        self.counted: dict[int, Irq] = {}
        self._matrix: CountMatrix | None = None  # theirs: row i is the i-th of `counted`
        self._ticks = 0
        self._base = ""
        self._nlink = -1
        self._bare: dict[int, Irq] = {}  # every IRQ with an action, counts None
        self._possible: tuple[int, ...] = ()
        self._want: Want | None = None
        self._refused: tuple[str, int] | None = None  # (directory, link count) that failed
        # IRQ -> (inode, ctime) of its hwirq file at its last full re-read (`_reread`)
        self._dirs: dict[int, tuple[int, int]] = {}
        self._paths: dict[int, str] = {}  # followed IRQ -> its per_cpu_count path
        # (`_paths`, recheck_every, the followed IRQs by their number modulo it): `_recheck`'s
        self._phases: tuple[dict[int, str], int, dict[int, list[int]]] | None = None
        # the same files relative to the directory, opened at `_dirfd` (the directory held
        # open: two path components to walk instead of the whole path, ~10 % of a tick's
        # opens on a captured tree; -1: not held, the whole path is opened)
        self._names: tuple[str, ...] = ()
        self._dirfd = -1
        self._dir_id: tuple[int, int] | None = None  # (device, inode) of the held directory
        # followed IRQ -> its last read and where it changed (`_Seen`, see `_delta`); its
        # values are its row of `_m`
        self._last: dict[int, _Seen] = {}
        self._rows: tuple[int, ...] = ()  # the followed IRQs, in `_m`'s rows
        self._m: Any = None  # their counts on every possible CPU (numpy, made on the first tick)
        # (the rows, the texts they gave) of the last tick that took in every row
        self._texts_last: tuple[tuple[int, ...], list[bytes]] | None = None
        # each row's sum (uint64), kept with `_m`: a changed field moves it by its own
        # difference, not a sum of the whole 516 x 1,024 matrix a tick (~0.4 ms)
        self._sums: Any = None
        self._cols: list[int] | None = None  # the online CPUs' columns of the last table
        self._counted_bare: dict[int, Irq] | None = None  # the names the last table's Irqs took
        self._gone: int | None = None  # the IRQ whose per_cpu_count failed in the last `_counts`
        # each row's `_Seen` span as arrays (`_set_hint`), for the changed rows taken in bulk
        self._hint: Any = None
        # (a tick's texts, the rows `_bulk` joined, their texts joined): the next tick's
        # `ref` is those texts, so the same rows' join is not made again (~0.2 ms)
        self._joined: tuple[list[bytes], list[int], bytes] | None = None
        self.vector_from = VECTOR_FROM

    def read(self, root: SysRoot, online: Sequence[int], want: Want,
             full: bool = False) -> InterruptTable | None:
        """The table for this tick, or None (see `fallback_reason`): then the caller reads
        /proc/interrupts. `full`: the caller's `want` grew, evaluate it again."""
        base = root.join(DIR)
        self._hold = (root.live or root.in_place) and self.max_open > 0
        try:
            st = os.stat(base)
        except OSError:
            self._forget("the kernel or capture has no /sys/kernel/irq")
            return None
        nlink = st.st_nlink
        if not online:
            self.fallback_reason = "no online CPU list to align per_cpu_count with"
            return None
        if (base, nlink) == self._refused:
            return None  # a line was cut short or malformed: not again until IRQs change
        self._ticks += 1
        if base != self._base or nlink != self._nlink or not self._bare \
                or self._dir_id is not None and self._dir_id != (st.st_dev, st.st_ino):
            if not self._discover(root, base, nlink):
                return None
            full = True
        else:
            full = self._recheck(base, self._ticks % self.recheck_every) or full
        if full or want != self._want:  # bound methods are new objects, equal ones
            self._follow(want)
        table = self._counts(online)
        if table is None and self.fallback_reason is None:  # an IRQ went away: look again
            if self._gone in self._bare:
                # and its names with it: its number may be a new desc's now (a held file
                # fails with ENODEV once its desc is freed, also when the number is taken
                # again before this tick, with the link count as it was)
                self._bare = {k: v for k, v in self._bare.items() if k != self._gone}
            try:
                nlink = os.stat(base).st_nlink
            except OSError:
                nlink = -1
            if self._discover(root, base, nlink):
                self._follow(want)
                table = self._counts(online)
            if table is None and self.fallback_reason is None:
                self.fallback_reason = "IRQs come and go faster than /sys/kernel/irq can be read"
        if table is None and self._paths:
            self._refused = (base, nlink)
        return table

    # --- discovery ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every descriptor held open."""
        if self._dirfd >= 0:
            dirfd, self._dirfd, self._dir_id = self._dirfd, -1, None
            os.close(dirfd)
        fds, self._fds, self._fd_row = self._fds, {}, None
        close_all(fds.values())

    def _fd(self, path: str) -> int | None:
        """The descriptor held for `path`, opened now if the budget (`max_open`) has room;
        None when it has not. OSError when the file cannot be opened."""
        fd = self._fds.get(path)
        if fd is None and len(self._fds) < self.max_open:
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return fd

    def _held(self, path: str) -> bytes:
        """The file's bytes through a held descriptor (the live kernel), else opened."""
        fd = self._fd(path)
        if fd is None:
            return _read_bytes(path)
        try:
            return os.pread(fd, 65536, 0)
        except OSError:
            del self._fds[path]  # the IRQ went away (ENODEV): the caller looks again
            self._fd_row = None
            os.close(fd)
            raise

    def _forget(self, reason: str) -> None:
        self.fallback_reason = reason
        self._base, self._nlink, self._bare, self._dirs = "", -1, {}, {}
        self._paths, self._last, self._names = {}, {}, ()
        self.close()

    def _discover(self, root: SysRoot, base: str, nlink: int) -> bool:
        try:
            possible = tuple(parse_cpu_list(root.read_line("sys/devices/system/cpu/possible")))
            names = os.listdir(base)
        except (OSError, ValueError):
            self._forget("cannot read the possible CPUs or list /sys/kernel/irq")
            return False
        if not possible:
            self._forget("no possible CPU list to align per_cpu_count with")
            return False
        numbers = sorted(int(n) for n in names if n.isascii() and n.isdigit() and len(n) <= 10)
        old = self._bare if base == self._base else {}
        dirs = self._dirs if base == self._base else {}
        bare: dict[int, Irq] = {}
        for irq in numbers:
            got = old.get(irq)
            if got is None:
                # its hwirq file as of before its names are read (as `_reread` keeps it): the
                # first re-check of each followed IRQ is then the cheap one, not all twelve
                # system calls again in each of the first `recheck_every` ticks
                ident = _ident(f"{base}/{irq}/hwirq")
                got = _meta(base, irq)
                if got is not None and ident is not None:
                    dirs[irq] = ident
            if got is not None:
                bare[irq] = got
        if not bare:
            self._forget("/sys/kernel/irq holds no IRQ with an action")
            return False
        self._dirs = {irq: dirs[irq] for irq in bare if irq in dirs}
        self._base, self._nlink, self._bare, self._possible = base, nlink, bare, possible
        # held anew at each discovery; a directory put in its place since (a capture
        # replaced) is another (device, inode) at the path, which each tick's stat of it
        # sees: a discovery, never a read of the old one's files
        if self._dirfd >= 0:
            os.close(self._dirfd)
        self._dirfd, self._dir_id = -1, None
        try:
            self._dirfd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            held = os.fstat(self._dirfd)
            self._dir_id = (held.st_dev, held.st_ino)
        except OSError:
            if self._dirfd >= 0:
                os.close(self._dirfd)
            self._dirfd = -1
        self.fallback_reason = None
        return True

    def _recheck(self, base: str, phase: int) -> bool:
        """Read again the actions, chip and hwirq of the followed IRQs whose number is
        `phase` modulo `recheck_every` (by number, not by place in the list: a set that
        changes leaves no IRQ unread for longer); True when one changed."""
        every = self.recheck_every
        bare = self._bare
        dirs = self._dirs
        groups = self._phases
        if groups is None or groups[0] is not self._paths or groups[1] != every:
            by_phase: dict[int, list[int]] = {}
            for irq in self._paths:  # once per followed set, not a walk of all every tick
                by_phase.setdefault(irq % every, []).append(irq)
            groups = self._phases = (self._paths, every, by_phase)
        changed: dict[int, Irq | None] = {}
        for irq in groups[2].get(phase, ()):
            got = self._reread(base, irq, bare.get(irq), dirs)
            if got != bare.get(irq):
                changed[irq] = got
        if not changed:
            return False
        bare = dict(bare)  # a new dict: the last table's Irqs took the old names
        for irq, got in changed.items():
            if got is None:
                bare.pop(irq, None)
            else:
                bare[irq] = got
        self._bare = bare
        return True

    @staticmethod
    def _reread(base: str, irq: int, was: Irq | None, dirs: dict[int, tuple[int, int]]) -> Irq | None:
        """The IRQ's names as `_meta` reads them, with four system calls instead of twelve
        while its `hwirq` file is the one read last time: its chip, hwirq and flow belong
        to the kernel's irq_desc and change only with its actions (request_irq, free_irq)
        or with a new desc, whose files are new (new kernfs nodes: a new inode number and
        ctime; an inode made again for the same node is only a needless full read; a
        tree's file written again has a new ctime). The file, not the directory: a tree
        that advances renames per_cpu_count into the directory, which changes its ctime.
        So its `actions` first, then a stat of `hwirq` (after: files made again before
        the read are then seen by the stat)."""
        d = f"{base}/{irq}"
        try:
            actions = _read(d + "/actions").strip()
        except OSError:
            return None
        ident = _ident(d + "/hwirq")
        if ident is None:
            return None
        if was is not None and dirs.get(irq) == ident and actions \
                and ", ".join(actions.split(",")) == was.name:
            return was
        got = _meta(base, irq)
        dirs[irq] = ident
        return got

    def _follow(self, want: Want) -> None:
        self._want = want
        self._paths = {irq: f"{self._base}/{irq}/per_cpu_count"
                       for irq, info in self._bare.items() if want(irq, info.name)}
        self._names = tuple(f"{irq}/per_cpu_count" for irq in self._paths)
        self._last = {k: v for k, v in self._last.items() if k in self._paths}
        followed = set(self._paths.values())
        for path in [p for p in self._fds if p not in followed]:
            os.close(self._fds.pop(path))
            self._fd_row = None

    # --- one tick ------------------------------------------------------------------------

    def _texts(self, rows: tuple[int, ...], paths: dict[int, str]) -> list[bytes] | None:
        """Each followed IRQ's per_cpu_count, in `rows` order; None when one failed (an IRQ
        gone: `_gone`). Held descriptors (the live kernel, a tree rewritten in place) are
        read again in one C-level pass of pread while every one of them is held: a Python
        loop of 516 reads was ~1 ms a tick at 1,024 CPUs beyond the system calls."""
        if self._hold:
            fds = self._fd_row
            if fds is None or self._fd_rows != rows:
                fds = self._fd_row = self._hold_all(rows, paths)
                self._fd_rows = rows
            if fds is not None:
                try:
                    return list(map(os.pread, fds, itertools.repeat(65536), itertools.repeat(0)))
                except OSError:
                    self._fd_row = None  # one by one below: which one failed, and drop it
        dirfd = self._dirfd if self._dirfd >= 0 else None
        names = self._names if dirfd is not None else tuple(paths.values())
        out: list[bytes] = []
        for irq, path, name in zip(rows, paths.values(), names):
            try:
                if self._hold:
                    out.append(self._held(path))
                else:  # inline: 500 files a tick on a big host
                    fd = os.open(name, os.O_RDONLY, dir_fd=dirfd)
                    try:
                        out.append(os.read(fd, 65536))
                    finally:
                        os.close(fd)
            except OSError:
                self._gone = irq
                return None
        return out

    def _hold_all(self, rows: tuple[int, ...], paths: dict[int, str]) -> list[int] | None:
        """A held descriptor for each of `rows`, in order; None when the budget (`max_open`)
        cannot hold them all or one cannot be opened (then they are read one by one)."""
        if len(paths) > self.max_open:
            return None
        out = []
        for irq in rows:
            try:
                fd = self._fd(paths[irq])
            except OSError:
                return None
            if fd is None:
                return None
            out.append(fd)
        return out

    def _bulk(self, todo: list[int], texts: list[bytes], ref: list[bytes]) -> tuple[list[int], list[int]]:
        """Take in, with a few numpy passes, the changed rows whose one changed field is
        where it was when their span (`_hint`) was set: (the other rows, in order, for the
        per-row loop; the rows taken). At 1,024 CPUs a busy host's 516 queue IRQs all
        fire every second, and the per-row loop's ~5 us a row was ~2.6 ms of a tick.

        A row is taken when its text is as long as last tick's and every byte that
        differs is an ASCII digit inside its span, which holds one field: then the bytes
        around it are last tick's (so the head and tail of its span still are, and the
        commas have not moved), and the span is that field's new value. Its `last` text
        is left as it was; the rows' texts of record are `_texts_last` (`ref`)."""
        np = numpy()
        lens = list(map(len, map(texts.__getitem__, todo)))
        same = list(map(operator.eq, lens, map(len, map(ref.__getitem__, todo))))
        slow: list[int] = []
        if not all(same):  # a count gained or lost a digit: the per-row loop finds where
            slow = list(itertools.compress(todo, map(operator.not_, same)))
            todo, lens = list(itertools.compress(todo, same)), list(itertools.compress(lens, same))
            if not todo:
                return slow, []
        joined = b"".join(map(texts.__getitem__, todo))
        kept = self._joined  # last tick's, when it joined the same rows: this tick's `ref` at them
        before = kept[2] if kept is not None and kept[0] is ref and kept[1] == todo else \
            b"".join(map(ref.__getitem__, todo))
        self._joined = (texts, todo, joined)
        a = np.frombuffer(joined, np.uint8)
        b = np.frombuffer(before, np.uint8)
        length = np.array(lens, np.int64)
        ends = np.cumsum(length)
        starts = ends - length
        diff = _changed_bytes(a, b)
        at = np.searchsorted(ends, diff, side="right")  # the row (of `todo`) of each changed byte
        rows = np.array(todo, np.int64)
        head, tail1, col, one = self._hint
        g = rows[at]
        pos = diff - starts[at]
        changed = a[diff]
        inside = (one[g] == 1) & (pos >= head[g]) & (pos < length[at] - tail1[g]) & (changed >= 48) & (changed <= 57)
        ok = np.ones(len(rows), bool)
        ok[at[~inside]] = False
        k = np.flatnonzero(ok)
        gk = rows[k]
        start = starts[k] + head[gk]
        width = length[k] - tail1[gk] - head[gk]  # 1 to 10 digits, as when the span was set
        vals = np.zeros(len(k), np.int64)
        if len(k):
            w = int(width.max())
            cols = np.arange(w)
            pad = w - width
            digits = a[np.maximum((start - pad)[:, None] + cols, 0)].astype(np.int64) - 48
            digits[cols < pad[:, None]] = 0  # bytes before a shorter field
            vals = digits @ (10 ** np.arange(w - 1, -1, -1, dtype=np.int64))
        fits = (vals < _U32) & (width >= 1) & (width <= 10)
        if not fits.all():  # a value past 32 bits: the loop refuses it with its message
            ok[k[~fits]] = False
            k, gk, vals = k[fits], gk[fits], vals[fits]
        if len(k):
            m, sums = self._m, self._sums
            c = col[gk]
            step = vals - m[gk, c].astype(np.int64)
            m[gk, c] = vals
            sums[gk] = (sums[gk].astype(np.int64) + step).astype(np.uint64)
        if not ok.all():
            slow = sorted(slow + rows[~ok].tolist())
        return slow, gk.tolist()

    def _counts(self, online: Sequence[int]) -> InterruptTable | None:
        possible = self._possible
        n = len(possible)
        cols: list[int] | None = None
        if tuple(online) != possible:
            index = {c: i for i, c in enumerate(possible)}
            if any(c not in index for c in online):
                self.fallback_reason = "an online CPU is not among the possible ones"
                return None
            cols = [index[c] for c in online]
        paths = self._paths
        rows = tuple(paths)
        np = numpy()
        if self._m is None or self._rows != rows or self._m.shape != (len(rows), n):  # new IRQs: parse all
            self._rows, self._m, self._last = rows, np.zeros((len(rows), n), DTYPE), {}
            self._sums = np.zeros(len(rows), np.uint64)
            self._hint = np.zeros((4, len(rows)), np.int64)  # see `_set_hint`
        rows = self._rows  # the same object tick after tick while the IRQs are
        m = self._m
        sums = self._sums
        last = self._last
        texts = self._texts(rows, paths)
        if texts is None:
            return None  # gone since discovery (`_gone`)
        # the rows whose one changed field is where it was last tick (`_delta`'s first
        # test, inline: 516 calls a tick at 1,024 CPUs), set in one numpy assignment
        at_rows: list[int] = []
        at_cols: list[int] = []
        values: list[int] = []
        moved = False
        # the rows whose text differs from last tick's, found at C level: a quiet queue's
        # IRQ (most of them, most ticks) costs no Python step. Last tick's texts count
        # only when every row of them was taken in (`last` then holds each one's text)
        last_texts, self._texts_last = self._texts_last, None
        # `ref`: the text each row's counts in `m` were taken from (last tick's, every row)
        ref = last_texts[1] if last_texts is not None and last_texts[0] is rows else None
        done: list[int] = []  # rows taken in this tick, while one may still refuse it
        todo: Iterable[int]
        if ref is not None:
            changed = list(itertools.compress(range(len(rows)), map(operator.ne, texts, ref)))
            todo = changed
            if len(changed) >= self.vector_from:  # a busy host: most queue IRQs fired
                todo, done = self._bulk(changed, texts, ref)
                moved = moved or bool(done)
        else:
            todo = range(len(rows))
        hint = self._hint
        complete = False
        try:
            for i in todo:
                irq, text = rows[i], texts[i]
                seen = last.get(irq)
                if seen is not None and ref is not None:
                    seen = (ref[i], *seen[1:])  # its text may be older: a bulk tick keeps only `ref`
                if seen is not None:
                    if seen[0] == text:
                        continue
                    _, head, tail, before, after = seen
                    end = len(text) - 1
                    if before + 1 + after == n and len(head) + len(tail) < end and text.endswith(b"\n") \
                            and text.startswith(head) and text.endswith(tail, 0, end):
                        field = text[len(head):end - len(tail)]
                        if field.isdigit() and len(field) <= 10:
                            value = int(field)
                            if value < _U32:
                                at_rows.append(i)
                                at_cols.append(before)
                                values.append(value)
                                last[irq] = (text, head, tail, before, after)
                                done.append(i)
                                moved = True
                                continue
                self._counted_bare = None  # a row moves: the table is made anew, even after a refusal
                if not text.endswith(b"\n"):
                    self.fallback_reason = (f"/sys/kernel/irq/{irq}/per_cpu_count is cut short at "
                                            "PAGE_SIZE (too many CPUs for one page)")
                    return None
                if seen is not None:
                    got = _delta(text, seen, n)
                    if got is None:
                        self.fallback_reason = f"/sys/kernel/irq/{irq}/per_cpu_count is not {n} 32-bit counts"
                        return None
                    first, vals, last[irq] = got
                    _set_hint(hint, i, last[irq], n)
                    m[i, first:first + len(vals)] = vals
                    sums[i] = m[i].sum(dtype=np.uint64)
                    done.append(i)
                    continue
                parts = text[:-1].split(b",")
                if len(parts) != n:
                    self.fallback_reason = (f"/sys/kernel/irq/{irq}/per_cpu_count has {len(parts)} "
                                            f"counts for {n} possible CPUs")
                    return None
                full = _parse_all(parts)
                if full is None:
                    self.fallback_reason = f"/sys/kernel/irq/{irq}/per_cpu_count is not {n} 32-bit counts"
                    return None
                m[i] = full
                sums[i] = m[i].sum(dtype=np.uint64)
                last[irq] = (text, b"", b"", 0, 0)
                _set_hint(hint, i, last[irq], n)
                done.append(i)
            complete = True
        finally:  # also when a row below refused the table: `last` already holds these
            if values:
                new = np.array(values, np.int64)
                step = new - m[at_rows, at_cols]  # each row once: a fancy += adds each
                m[at_rows, at_cols] = new
                sums[at_rows] = (sums[at_rows].astype(np.int64) + step).astype(np.uint64)
            if not complete and ref is not None:  # the rows taken in, and the rest as they were
                kept = list(ref)
                for i in done:
                    kept[i] = texts[i]
                self._texts_last = (rows, kept)
        self._texts_last = (rows, texts)
        if moved:
            self._counted_bare = None  # as for a row that took the slow path
        if self._counted_bare is not self._bare or cols != self._cols:
            # this tick's counts: a copy (the reader's matrix moves on), of the online CPUs
            now_counts = m.copy() if cols is None else m[:, cols]
            totals = (sums if cols is None else now_counts.sum(axis=1, dtype=np.uint64)).tolist()
            matrix = CountMatrix(rows, now_counts, totals)
            infos = list(map(self._bare.__getitem__, rows))
            # Irq(irq, chip, hwirq, name, CountRow(matrix, i), totals[i]) for each row
            made = build(Irq, rows, [x.chip for x in infos], [x.hwirq for x in infos], [x.name for x in infos],
                         list(map(CountRow, itertools.repeat(matrix), range(len(rows)))), totals)
            counted: dict[int, Irq] = MatrixIrqs(zip(rows, made), matrix)
            self._cols, self._counted_bare, self._matrix = cols, self._bare, matrix
        else:  # no count moved: the last tick's matrix and Irqs, as a quiet host has
            counted = self.counted
        self.fallback_reason = None
        self.counted = counted
        return InterruptTable(tuple(online), Named(self._bare, counted, self._matrix))


class Named(Mapping[int, Irq]):
    """Every IRQ with an action, the counted ones with their counts: the `counted` Irq
    where there is one, else the name-only one, in the order of `bare`.

    A view of the reader's two dicts, which it never changes (it makes new ones), instead
    of a merged copy: at 16,384 IRQs the copy was a 16,384-entry dict a tick, made only to
    look up the NICs' few hundred vectors, and young for the garbage collector to walk."""

    __slots__ = ("_bare", "_counted", "matrix")

    def __init__(self, bare: dict[int, Irq], counted: dict[int, Irq], matrix: CountMatrix | None = None) -> None:
        self._bare = bare
        self._counted = counted
        # the count matrix whose rows are the counted IRQs, in their order (each one's
        # counts a CountRow of it): model/counts.table_matrix takes it as it is, where it
        # would otherwise walk all 16,384 IRQs of a big host to find that out
        self.matrix = matrix

    @property
    def bare(self) -> dict[int, Irq]:
        """Every IRQ with an action, name-only (the same names and chips as the counted
        ones): a plain dict, whose C-level lookups a caller after names only can use."""
        return self._bare

    def __getitem__(self, irq: int) -> Irq:
        got = self._counted.get(irq)
        return self._bare[irq] if got is None else got

    def get(self, irq: int, default: Any = None) -> Any:
        got = self._counted.get(irq)
        return self._bare.get(irq, default) if got is None else got

    def __contains__(self, irq: object) -> bool:
        return irq in self._bare

    def __iter__(self) -> Iterator[int]:
        return iter(self._bare)

    def __len__(self) -> int:
        return len(self._bare)

    def keys(self) -> KeysView[int]:
        return self._bare.keys()

    def __repr__(self) -> str:
        return f"Named({dict(self.items())!r})"


def _fd_budget() -> int:
    """Descriptors this reader may hold: a quarter of the soft RLIMIT_NOFILE, at most 1,024."""
    return fd_budget(4, 1024)


def _changed_bytes(a: Any, b: Any) -> Any:
    """Positions where two uint8 arrays of one length differ, in order: compared eight
    bytes at a time (a megabyte of 516 rows at 1,024 CPUs: ~0.09 ms, where a byte-wise
    compare and its nonzero were ~0.6 ms), then byte-wise within the words that differ."""
    np = numpy()
    whole = len(a) // 8 * 8
    words = np.flatnonzero(a[:whole].view(np.uint64) != b[:whole].view(np.uint64))
    at = (words * 8)[:, None] + np.arange(8)
    at = at[a[at] != b[at]]
    rest = np.flatnonzero(a[whole:] != b[whole:]) + whole
    return np.concatenate((at, rest)) if len(rest) else at


def _set_hint(hint: Any, i: int, seen: _Seen, n: int) -> None:
    """Row i's `_Seen` span in `_bulk`'s arrays: where its field starts, the bytes after
    it (the newline too), its index, and whether the span is one field of n."""
    text, head, tail, before, after = seen
    hint[0, i] = len(head)
    hint[1, i] = len(tail) + 1
    hint[2, i] = before
    hint[3, i] = before + 1 + after == n and len(head) + len(tail) < len(text) - 1


def _parse_all(parts: list[bytes]) -> list[int] | None:
    """Every field as an unsigned 32-bit count, or None (checked with C-level calls: a
    1,024-CPU line is 1,024 fields; `bytes.isdigit` is ASCII digits only)."""
    if not b"".join(parts).isdigit() or max(map(len, parts)) > 10 or min(map(len, parts)) == 0:
        return None
    vals = list(map(int, parts))
    return vals if max(vals) < _U32 else None


def _common(a: bytes, b: bytes, suffix: bool) -> int:
    """Length of the common prefix (or suffix) of a and b, by halving: each step is one
    C-level comparison of two slices, ~12 for a page."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        same = a[len(a) - mid:] == b[len(b) - mid:] if suffix else a[:mid] == b[:mid]
        if same:
            lo = mid
        else:
            hi = mid - 1
    return lo


# A per_cpu_count as last read: (its bytes, newline included; the fields before the span
# that last changed, each with its comma; the fields after it, each comma first; how many
# fields each of those holds)
_Seen = tuple[bytes, bytes, bytes, int, int]


def _delta(text: bytes, seen: _Seen, n: int) -> tuple[int, list[int], _Seen] | None:
    """The fields of `text` (a per_cpu_count with its newline, n counts) that may differ
    from the last read `seen`: (index of the first, their values, what to pass next
    tick), or None when the text is not n 32-bit counts. Only the span between the
    first and the last changed character is parsed: a queue IRQ fires on a few CPUs, and
    the other ~1,000 fields of its line repeat tick after tick. It fires on the same CPU
    tick after tick too, so the last tick's span is tried first: when the text still
    starts with the fields before it and ends with those after it, that one field is
    all there is to parse (two C-level comparisons, no search and no counting of commas:
    the fields outside are the same bytes, so they are as many as last time)."""
    prev, head, tail, before, after = seen
    end = len(text) - 1  # the newline
    if len(head) + len(tail) < end and before + 1 + after == n and text.startswith(head) \
            and text.endswith(tail, 0, end):
        field = text[len(head):end - len(tail)]
        if field.isdigit() and len(field) <= 10:  # one field, an ASCII decimal (no comma)
            value = int(field)
            if value < _U32:
                return before, [value], (text, head, tail, before, after)
    # where it changed this time, found by halving (bytes without the newlines)
    body, last = text[:end], prev[:-1]
    short = min(end, len(last))
    pre = _common(body, last, False)
    suf = min(_common(body, last, True), short - pre)
    start = body.rfind(b",", 0, pre) + 1  # the first changed field starts here
    stop = body.find(b",", end - suf)  # and the last one ends here
    if stop < 0:
        stop = end
    before = body.count(b",", 0, start)
    after = body.count(b",", stop)
    mid = body[start:stop].split(b",")
    if before + len(mid) + after != n:
        parts = body.split(b",")
        got = _parse_all(parts) if len(parts) == n else None
        return None if got is None else (0, got, (text, b"", b"", 0, 0))
    got = _parse_all(mid)
    if got is None:
        return None
    return before, got, (text, body[:start], body[stop:], before, after)
