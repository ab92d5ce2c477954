"""Small kernel value files read every tick through descriptors held open.

A tick reads ~20 one-value files whatever the host's size (the curated sysctls, the
conntrack fill, /proc/uptime, cpu/online and cpu/offline), and opening a /proc/sys file
walks four or five path components each time: the open and close are most of the read.
The kernel regenerates these files on a read at offset 0 (a sysctl's proc handler runs
for every read, `proc_sys_call_handler`; a seq_file, /proc/uptime's, starts over at
position 0, `seq_read_iter`; a sysfs attribute's `show` runs again, kernfs), so each is
opened once and read again with `pread(fd, n, 0)`: one system call instead of three, as
irq_sysfs.py does for /sys/kernel/irq/N/per_cpu_count (tests/test_sampler_reads.py checks
it on this kernel with a sysctl changed in a namespace the test makes).

A file that goes away behind a held descriptor (a sysctl unregistered with its module
fails with ENOENT, a sysfs attribute of a removed device with ENODEV, a process's /proc
file with ESRCH) is dropped and opened afresh at once, so the answer is what a fresh open
gives: the value, or the error a plain read would report. At most `max_open`
descriptors are held (a sixteenth of RLIMIT_NOFILE, up to 64: the IRQ reader holds up to
a quarter); past that a file is opened each time. Only a root whose files are the
kernel's, or rewritten in place (`SysRoot.live`, `SysRoot.in_place`), is held: a captured
tree's files are opened afresh each time, a tree advanced by rename would otherwise
be read stale. Not thread-safe; `close` when done.
"""

from __future__ import annotations

import errno
import itertools
import os
from typing import Iterable, Sequence

from nettop.kernel.sysroot import SysRoot

_FLAGS = os.O_RDONLY | os.O_CLOEXEC
# A sysctl's read allocates and zeroes a kernel buffer of the size asked for
# (proc_sys_call_handler), so a 64 KiB read costs ~7 us where a 4 KiB one costs ~2 (this
# machine, kernel 6.18); every value read here fits a page. A read that fills it is made
# again whole at 64 KiB, so a longer value is never cut (a sysctl read past offset 0
# gives nothing more for most handlers).
_SMALL, _LARGE = 4096, 65536


def _pread(fd: int) -> bytes:
    data = os.pread(fd, _SMALL, 0)
    return data if len(data) < _SMALL else os.pread(fd, _LARGE, 0)


def fd_budget(share: int, cap: int) -> int:
    """Descriptors a reader may hold: 1/`share` of the soft RLIMIT_NOFILE, at most `cap`
    (the per-IRQ counts' reader takes a quarter, these one-value files a sixteenth, so
    together they leave most of the limit to the rest of the process)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(0, min(cap, soft // share))


def _budget() -> int:
    return fd_budget(16, 64)


def close_all(fds: Iterable[int]) -> None:
    """Close each descriptor; one already gone (a fork's child closed it) is no error."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


ABSENT_S = 5.0  # a file found absent is asked for again after this many seconds of ticks


class HeldFiles:
    """`read_line`/`read_text` as `SysRoot` has them, through held descriptors where it may.

    A file that is not there (ENOENT: nf_conntrack's sysctls before the module is loaded,
    `flow_limit_cpu_bitmap` outside the initial namespace, counters a driver lacks) is
    not opened again for `ABSENT_S` seconds of the reader's ticks (`now`, which the
    reader sets each tick; None: asked every time): it fails as it did, from memory.
    Such files were a third of the failed opens, and most of the exceptions, of a tick on
    a host without conntrack. One that appears (the module loaded) shows within `ABSENT_S`.
    """

    __slots__ = ("root", "hold", "max_open", "_fds", "now", "_absent")

    def __init__(self, root: SysRoot, max_open: int | None = None) -> None:
        self.root = root
        self.hold = root.in_place or root.live
        self.max_open = _budget() if max_open is None else max_open
        self._fds: dict[str, int] = {}  # root-relative path -> a descriptor held open
        self.now: float | None = None  # the tick's monotonic time (the reader's clock)
        # root-relative path -> (when it was found absent, strerror, the path it named)
        self._absent: dict[str, tuple[float, str, str]] = {}

    def _read(self, rel: str) -> bytes:
        """The held file's bytes (up to 64 KiB); raises OSError as a fresh open and read
        would."""
        fd = self._fds.get(rel)
        if fd is not None:
            try:
                return _pread(fd)
            except OSError:  # gone behind the descriptor: what does a fresh open say?
                del self._fds[rel]
                os.close(fd)
        fd = os.open(self.root.join(rel), _FLAGS)
        if len(self._fds) >= self.max_open:
            try:
                return _pread(fd)
            finally:
                os.close(fd)
        try:
            data = _pread(fd)
        except OSError:
            os.close(fd)
            raise
        self._fds[rel] = fd
        return data

    def read_line(self, rel: str) -> str:
        """A one-value file, stripped (as `SysRoot.read_line`, which a captured tree's
        read is: its sosreport stand-ins included)."""
        if self._absent and rel in self._absent:
            self._still_absent(rel)
        try:
            if not self.hold:
                return self.root.read_line(rel)
            return self._read(rel).decode("latin-1").strip()
        except FileNotFoundError as exc:
            self._found_absent(rel, exc)
            raise

    def _found_absent(self, rel: str, exc: FileNotFoundError) -> None:
        if self.now is None:
            return
        if len(self._absent) >= 256:  # bounded: the names asked are a few per interface
            self._absent.clear()
        self._absent[rel] = (self.now, exc.strerror or "No such file or directory",
                             exc.filename if isinstance(exc.filename, str) else self.root.join(rel))

    def _still_absent(self, rel: str) -> None:
        """Raise FileNotFoundError, as the open did, while `rel` was found absent less than
        `ABSENT_S` ago; else forget that (the caller opens it again)."""
        when, why, path = self._absent[rel]
        now = self.now
        if now is not None and 0 <= now - when < ABSENT_S:
            raise FileNotFoundError(errno.ENOENT, why, path)
        del self._absent[rel]

    def read_lines(self, rels: Sequence[str]) -> list[str | OSError]:
        """`read_line` of each of `rels`, in order, each the value or the OSError its read
        raised. The held ones are read again in one C-level pass of pread (as irq_sysfs.py
        reads per_cpu_count): the sampler's fifteen sysctls a tick were four Python calls
        a file around one system call. The others (not held yet, or absent: a sysctl of
        the initial namespace only) file by file, as `read_line` reads them."""
        out: list[str | OSError | None] = [None] * len(rels)
        if self.hold:
            fds = self._fds
            at = [i for i, rel in enumerate(rels) if rel in fds]
            if at:
                try:
                    got = list(map(os.pread, [fds[rels[i]] for i in at], itertools.repeat(_SMALL),
                                   itertools.repeat(0)))
                except OSError:
                    pass  # one went: file by file below, which drops it and says why
                else:
                    for i, data in zip(at, got):
                        if len(data) < _SMALL:  # else read again whole below
                            out[i] = data.decode("latin-1").strip()
        absent = self._absent
        for i, rel in enumerate(rels):
            if out[i] is None:
                if absent and rel in absent:  # found absent a moment ago: no open, no raise
                    when, why, path = absent[rel]
                    if self.now is not None and 0 <= self.now - when < ABSENT_S:
                        out[i] = FileNotFoundError(errno.ENOENT, why, path)
                        continue
                try:
                    out[i] = self.read_line(rel)
                except OSError as exc:
                    out[i] = exc
        return out  # type: ignore[return-value]

    def read_text(self, rel: str) -> str:
        """A whole small file as text (as `SysRoot.read_text`; files under 64 KiB)."""
        if self._absent and rel in self._absent:
            self._still_absent(rel)
        try:
            if not self.hold:
                return self.root.read_text(rel)
            return self._read(rel).decode("latin-1")
        except FileNotFoundError as exc:
            self._found_absent(rel, exc)
            raise

    @property
    def held(self) -> int:
        """Descriptors held open now (a test's and the cost report's figure)."""
        return len(self._fds)

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        close_all(fds.values())

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit `os` may be gone: the fds go with the process
            pass


__all__ = ["HeldFiles"]
