"""`nettop record --dir DIR`: a recorder that runs for weeks, one file per period.

Each file is a complete recording (store.Writer: its own schema, meta and key
samples), named by series.file_name with a sequence number that orders the files.
A file ends when its period ends (aligned to the UTC clock: hourly files start on the
hour), when the monotonic clock says a period has passed (so a wall clock stepped
back cannot make a file twice as long), or on SIGHUP (logrotate's `postrotate`).
After each rotation, and every minute, the oldest files beyond `--keep` (age, by
modification time) or `--keep-size` (all files together) are deleted; the file being
written never is.

What a service meets, it survives with one line on stderr instead of stopping:
a full disk or read-only file system (the file in progress is closed, intact; samples
are dropped, and a new file is tried every RETRY_S until one can be written), and the
directory or file deleted under it (the directory is made again, and the open
database, the only copy left of the file in progress, is saved under its old name).
Only a directory that cannot be used at start (not a directory, no permission) stops it.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Sequence, TextIO

from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event
from nettop.record.series import file_name, listing
from nettop.record.store import RecordingError, Writer
from nettop.record.wallclock import Clock, SystemClock

NEW = re.compile(r"^nettop-\d{6,}-\d{8}T\d{6}Z\.nettop\.\d+\.new(-wal|-shm|-journal)?$")
LOCK = ".nettop-record.lock"  # held by the recorder writing into the directory
RETRY_S = 10.0  # a full disk is tried again this often
RETAIN_EVERY_S = 60.0
MIN_PERIOD_S = 1.0


@dataclass(frozen=True, slots=True)
class Rotation:
    """Where and how: `period` s per file, files older than `keep_age` s or beyond
    `keep_size` bytes (all files together) deleted, oldest first."""

    directory: str
    period: float = 3600.0
    keep_age: float | None = None
    keep_size: int | None = None


def prepare(directory: str) -> None:
    """Make `directory` (0750, with its parents) or check it is one we can write in."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise RecordingError(f"{directory} is not a directory; give --dir a directory")
    try:
        os.makedirs(directory, mode=0o750, exist_ok=True)
    except OSError as exc:
        raise RecordingError(f"cannot create directory {directory}: {exc.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise RecordingError(f"no permission to write in {directory}; run as its owner or choose another --dir")


def _boot_id() -> dict[str, str]:
    """This boot's id: files of different boots have monotonic clocks that cannot be compared."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return {"boot_id": f.read().strip()}
    except OSError:
        return {}


def _size(path: str) -> int:
    total = 0
    for p in (path, path + "-wal"):
        try:
            total += os.stat(p).st_size
        except OSError:
            pass
    return total


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError:
        return False
    for extra in (path + "-wal", path + "-shm"):
        try:
            os.unlink(extra)
        except OSError:
            pass
    return True


class DirWriter:
    """store.Writer's interface (add_sample, size, samples, path, close) over a series of files."""

    def __init__(self, rotation: Rotation, meta: dict[str, Any] | None = None, clock: Clock | None = None,
                 hup: threading.Event | None = None, out: TextIO | None = None, err: TextIO | None = None) -> None:
        if not rotation.period >= MIN_PERIOD_S:
            raise RecordingError(f"--period must be at least {MIN_PERIOD_S:g} s")
        self.rotation = rotation
        self.meta = {**_boot_id(), **(meta or {})}
        self.clock = clock or SystemClock()
        self.hup = hup or threading.Event()
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.samples = 0  # written, all files
        self.lost = 0  # dropped while nothing could be written
        self.files = 0  # opened
        self.removed: list[str] = []
        self._writer: Writer | None = None
        self._down: str | None = None  # why nothing is being written, said once
        self._retry_at = 0.0
        self._retain_at = 0.0
        self._opened_mono = 0.0
        self._boundary = 0.0
        self._lock: int | None = None
        prepare(rotation.directory)
        self._take_lock()
        self._sweep()
        self._open()  # a directory that cannot take a file fails here, before any sampling
        self._retain()

    @property
    def path(self) -> str:
        return self._writer.path if self._writer is not None else self.rotation.directory

    def size(self) -> int:
        return self._writer.size() if self._writer is not None else 0

    def _say(self, line: str) -> None:
        self.err.write(f"nettop: {line}\n")
        self.err.flush()

    def _take_lock(self) -> None:
        """One recorder per directory: a second one would number files the same and
        delete the first one's files by its own retention."""
        path = os.path.join(self.rotation.directory, LOCK)
        if self._lock is not None:
            try:
                if os.stat(path).st_ino == os.fstat(self._lock).st_ino:
                    return  # still ours (only a recording was deleted, not the directory)
            except OSError:
                pass
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise RecordingError(f"cannot create {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RecordingError(f"another nettop (pid {other}) is recording into {self.rotation.directory}; "
                                 "stop it or choose another --dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        if self._lock is not None:
            os.close(self._lock)
        self._lock = fd

    def _sweep(self) -> None:
        """Remove what a recorder killed while creating a file left (its half-made
        `….nettop.PID.new`); with the lock held, no other recorder is making one."""
        try:
            names = os.listdir(self.rotation.directory)
        except OSError:
            return
        for name in names:
            if NEW.match(name):
                try:
                    os.unlink(os.path.join(self.rotation.directory, name))
                except OSError:
                    pass

    def _open(self) -> None:
        directory = self.rotation.directory
        try:
            entries = listing(directory)
        except OSError as exc:
            raise RecordingError(f"{directory}: {exc.strerror}") from None
        seq = entries[-1].seq + 1 if entries else 1
        now = self.clock.wall()
        path = os.path.join(directory, file_name(seq, now))
        self._writer = Writer(path, {**self.meta, "started": now, "file_seq": seq})
        self.files += 1
        self.out.write(("\r\x1b[K" if self.out.isatty() else "") + f"nettop: recording into {path}\n")
        self.out.flush()
        self._opened_mono = self.clock.mono()
        period = self.rotation.period
        self._boundary = (math.floor(now / period) + 1) * period

    def _due(self) -> bool:
        if self.hup.is_set():
            self.hup.clear()
            return True
        return self.clock.wall() >= self._boundary or self.clock.mono() - self._opened_mono >= self.rotation.period

    def rotate(self) -> None:
        """Close the current file and open the next (SIGHUP, or the period's end)."""
        self._close_current()
        self._try_open()
        self._retain()

    def _close_current(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _try_open(self) -> bool:
        try:
            if not os.path.isdir(self.rotation.directory):
                prepare(self.rotation.directory)
                self._take_lock()
            self._open()
        except RecordingError as exc:
            self._fail(str(exc))
            return False
        if self._down is not None:
            self._say(f"recording again into {self.path} ({self.lost} samples lost while it could not write)")
            self._down = None
        return True

    def _fail(self, why: str) -> None:
        """Nothing can be written now: say so once, keep what is written, try again later."""
        self._close_current()
        self._retry_at = self.clock.mono() + RETRY_S
        if self._down is None:
            self._down = why
            self._say(f"{why}; samples are dropped until it can write again (tried every {RETRY_S:g} s)")

    def _rescue(self) -> None:
        """The file in progress was deleted (or its directory): make the directory again
        and save the open database, the only copy left, under its old name."""
        assert self._writer is not None
        path = self._writer.path
        self._say(f"{path} was deleted while recording; making {self.rotation.directory} again and saving the file")
        try:
            prepare(self.rotation.directory)
            self._take_lock()
            self._writer.copy_to(path)
        except RecordingError as exc:
            self._say(f"could not save {path} again: {exc}")
        self._close_current()
        self._try_open()

    def add_sample(self, snap: Snapshot, events: Sequence[Event] = ()) -> int:
        if self._writer is not None and not os.path.exists(self._writer.path):
            self._rescue()
        elif self._writer is not None and self._due():
            self.rotate()
        if self._writer is None and (self.clock.mono() < self._retry_at or not self._try_open()):
            self.lost += 1
            return 0
        assert self._writer is not None
        try:
            seq = self._writer.add_sample(snap, events)
        except RecordingError as exc:
            self._fail(str(exc))
            self.lost += 1
            return 0
        self.samples += 1
        if self.clock.mono() >= self._retain_at:
            self._retain()
        return seq

    def _retain(self) -> None:
        """Delete the oldest files beyond --keep and --keep-size, never the current one."""
        self._retain_at = self.clock.mono() + RETAIN_EVERY_S
        keep_age, keep_size = self.rotation.keep_age, self.rotation.keep_size
        if keep_age is None and keep_size is None:
            return
        try:
            entries = listing(self.rotation.directory)
        except OSError:
            return
        current = self._writer.path if self._writer is not None else None
        old = [e.path for e in entries if e.path != current]
        doomed: list[tuple[str, str]] = []
        if keep_age is not None:
            limit = self.clock.wall() - keep_age
            for p in old:
                try:
                    if os.stat(p).st_mtime < limit:
                        doomed.append((p, "older than --keep"))
                except OSError:
                    pass
        if keep_size is not None:
            gone = {p for p, _ in doomed}
            total = sum(_size(e.path) for e in entries if e.path not in gone)
            for p in old:
                if total <= keep_size:
                    break
                if p not in gone:
                    total -= _size(p)
                    doomed.append((p, "beyond --keep-size"))
        for p, why in sorted(doomed, key=lambda d: old.index(d[0])):
            if _remove(p):
                self.removed.append(p)
                self.out.write(f"nettop: removed {p} ({why})\n")
                self.out.flush()

    def close(self) -> None:
        self._close_current()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
