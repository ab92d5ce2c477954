"""A directory of recordings (`nettop record --dir`) read as one recording.

The files are named `nettop-NNNNNN-YYYYmmddTHHMMSSZ.nettop`: NNNNNN is the file's
sequence number, which orders them (never the wall time in the name, which a stepped
clock can make go back), and the UTC time when the file was opened is for people.
`Recordings` puts their samples in one index, in recorded order, so replay steps and
seeks across files as in one file, and `report`/`export` read a time window of them.
The reader of each file is the single-file `store.Reader`; this only maps positions.
"""

from __future__ import annotations

import bisect
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator, Protocol

from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event
from nettop.record import wallclock
from nettop.record.store import Reader, RecordingError, SampleInfo

OPEN_FILES = 4  # files kept open for reading: the one played, its neighbours
NAME = re.compile(r"^nettop-(\d{6,})-(\d{8}T\d{6}Z)\.nettop$")


def file_name(seq: int, t_wall: float) -> str:
    return f"nettop-{seq:06d}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(t_wall))}.nettop"


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    path: str


def listing(directory: str) -> list[Entry]:
    """The recordings in `directory`, oldest (lowest sequence) first; other files ignored."""
    out = []
    for name in os.listdir(directory):
        m = NAME.match(name)
        if m:
            out.append(Entry(int(m.group(1)), os.path.join(directory, name)))
    return sorted(out, key=lambda e: e.seq)


class Recording(Protocol):
    """What replay, report and export read: one file (`store.Reader`) or a directory."""

    path: str
    meta: dict[str, str]
    index: list[SampleInfo]

    @property
    def warnings(self) -> list[str]: ...

    def __len__(self) -> int: ...

    def snapshot(self, seq: int) -> Snapshot | None: ...

    def snapshots(self, start: int = 0, stop: int | None = None) -> Iterator[Snapshot]: ...

    def events(self) -> list[Event]: ...

    def position(self, t_wall: float) -> int: ...

    def close(self) -> None: ...


class Recordings:
    """The files of a directory (or one file) as one recording; `index[i].seq` is the position `i`.

    `since`/`until` (wall times) keep only the samples taken between them. Each file is
    opened once to index it and then closed; at most OPEN_FILES stay open for reading
    (a month of hourly files would otherwise hold thousands of descriptors), and a file
    deleted since (retention of a running recorder) costs its samples with one warning."""

    def __init__(self, directory: str, since: float | None = None, until: float | None = None) -> None:
        self.path = directory
        single = os.path.isfile(directory)
        if single:  # one file, read the same way: a window, its clock steps
            entries = [Entry(0, directory)]
        elif not os.path.isdir(directory):
            raise RecordingError(f"{directory}: no such file or directory")
        else:
            try:
                entries = listing(directory)
            except OSError as exc:
                raise RecordingError(f"{directory}: {exc.strerror}") from None
        if not entries:
            raise RecordingError(f"{directory} holds no nettop recordings (nettop-NNNNNN-*.nettop)")
        self._paths: list[str] = []
        self._local: list[list[int]] = []  # per file: the seqs of its samples kept, in order
        self._starts: list[int] = []  # per file: global position of its first kept sample
        self._events: list[list[tuple[int, Event]]] = []  # per file: (its seq, event)
        reboots: set[int] = set()  # first positions of files recorded in another boot than the one before
        boot: str | None = None
        self._open: OrderedDict[int, Reader] = OrderedDict()
        self._warnings: list[str] = []
        self.index: list[SampleInfo] = []
        self.meta: dict[str, str] = {}
        for entry in entries:
            try:
                reader = Reader(entry.path)
            except RecordingError as exc:
                if single:
                    raise
                self._warnings.append(str(exc))
                continue
            try:
                self.meta = self.meta or dict(reader.meta)
                kept = [s for s in reader.index if since is None and until is None or _within(s, since, until)]
                if not kept and (since is not None or until is not None):
                    continue
                start = len(self.index)
                if boot and reader.meta.get("boot_id") and reader.meta["boot_id"] != boot:
                    reboots.add(start)
                boot = reader.meta.get("boot_id") or boot
                self._starts.append(start)
                self._paths.append(entry.path)
                self._local.append([s.seq for s in kept])
                self._events.append(reader.positioned_events())
                self.index.extend(_indexed(start, kept, self.index[-1] if self.index else None))
            finally:
                self._keep_warnings(reader)
                reader.close()
        if not self.meta:
            raise RecordingError(f"{directory}: no readable recording ({'; '.join(self._warnings)})")
        self._runs = wallclock.runs(self.index)
        self._steps = wallclock.steps(self.index, reboots=frozenset(reboots))

    def _keep_warnings(self, reader: Reader) -> None:
        self._warnings += [w for w in reader.warnings if w not in self._warnings]

    @property
    def warnings(self) -> list[str]:
        for r in self._open.values():
            self._keep_warnings(r)
        return list(self._warnings)

    @property
    def files(self) -> list[str]:
        """The files whose samples are in the index, in order."""
        return list(self._paths)

    def __len__(self) -> int:
        return len(self.index)

    def _file(self, pos: int) -> int:
        return bisect.bisect_right(self._starts, pos) - 1

    def _reader(self, f: int) -> Reader | None:
        reader = self._open.get(f)
        if reader is not None:
            self._open.move_to_end(f)
            return reader
        try:
            reader = Reader(self._paths[f])
        except RecordingError as exc:
            line = f"{exc} (deleted since it was indexed?)"
            if line not in self._warnings:
                self._warnings.append(line)
            return None
        self._open[f] = reader
        while len(self._open) > OPEN_FILES:
            _, old = self._open.popitem(last=False)
            self._keep_warnings(old)
            old.close()
        return reader

    def file_of(self, pos: int) -> str:
        return self._paths[self._file(pos)]

    def snapshot(self, seq: int) -> Snapshot | None:
        if not 0 <= seq < len(self.index):
            return None
        f = self._file(seq)
        reader = self._reader(f)
        return None if reader is None else reader.snapshot(self._local[f][seq - self._starts[f]])

    def snapshots(self, start: int = 0, stop: int | None = None) -> Iterator[Snapshot]:
        for info in self.index[start:stop]:
            snap = self.snapshot(info.seq)
            if snap is not None:
                yield snap

    def events(self) -> list[Event]:
        """Every file's events in recorded order, with a `problem` where the wall clock
        was stepped; events of samples outside since/until are left out."""
        return [e for _, e in self.placed_events()]

    def placed_events(self) -> list[tuple[int, Event]]:
        """events() with the index position of the sample each belongs to, so that a
        report can find "the minute before" on the monotonic clock: a wall time from
        before a step back may name two moments, or none that was recorded."""
        placed: list[tuple[int, int, Event]] = []
        for f, local in enumerate(self._local):
            if not local:
                continue
            for seq, e in self._events[f]:
                i = bisect.bisect_left(local, seq)
                if seq and (i == len(local) or local[i] != seq):
                    continue  # its sample is outside the window
                placed.append((self._starts[f] + min(i, len(local) - 1), 0, e))
        for step in self._steps:
            placed.append((step.pos, -1, Event(self.index[step.pos].t_wall, "problem", step.text())))
        placed.sort(key=lambda p: (p[0], p[1]))  # stable: a file's own order stays
        return [(pos, e) for pos, _, e in placed]

    @property
    def clock_steps(self) -> list[wallclock.Step]:
        return list(self._steps)

    def position(self, t_wall: float) -> int:
        return wallclock.position(self.index, t_wall, self._runs)

    def close(self) -> None:
        while self._open:
            _, r = self._open.popitem()
            self._keep_warnings(r)
            r.close()


def _within(s: SampleInfo, since: float | None, until: float | None) -> bool:
    t = s.t_wall
    return isinstance(t, (int, float)) and (since is None or t >= since) and (until is None or t <= until)


def _indexed(start: int, kept: list[SampleInfo], before: SampleInfo | None) -> list[SampleInfo]:
    """Index entries numbered from `start`. A damaged row's time that is no number takes
    the time before it, so ordering and seeking work; decoding then judges the row."""
    out = []
    wall, mono = (before.t_wall, before.t_mono) if before else (0.0, 0.0)
    for i, s in enumerate(kept):
        wall = s.t_wall if isinstance(s.t_wall, (int, float)) and s.t_wall == s.t_wall else wall
        mono = s.t_mono if isinstance(s.t_mono, (int, float)) and s.t_mono == s.t_mono else mono
        out.append(SampleInfo(start + i, wall, mono))
    return out


def open_recording(path: str, since: float | None = None, until: float | None = None) -> Recordings:
    """A recording file, or a directory of `record --dir` files, as one recording."""
    return Recordings(path, since, until)
