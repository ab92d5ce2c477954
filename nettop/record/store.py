"""The recording file: SQLite in WAL mode, one transaction per sample.

Tables (docs/recording-format.md has the full description):

* `meta(key, value)`: `schema_version`, `host`, `kernel`, `interval_s`, `cpu_nodes`, ...
* `config(id, skeleton)`: a snapshot's structure and configuration; a new row only when
  it changes, so "what changed here" is a join.
* `sample(seq, t_wall, t_mono, config_id, base_seq, pred, key_seq, ints, floats, crc)`:
  counters as compressed differences from a prediction: `pred` 0 absolute (a key
  sample), 1 the base sample's values, 2 a straight line through the base and the
  base's base (`2*b - bb`: a counter rising at a steady rate costs almost nothing),
  stored moved-first in the order of chain `key_seq` (codec.Order).
* `event(id, seq, t_wall, kind, text)`: timeline events and tuning journal entries.

Every sample row carries a CRC-32 of its blobs, so a flipped byte is caught even where
SQLite does not notice it; the reader then skips to the next key sample.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from nettop.model.counts import numpy
from nettop.record import codec, wallclock
from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event

SCHEMA_VERSION = 4
PAGE_SIZE = 16384
# A key sample (absolute counters) at least this often. A cold seek decodes the chain
# from its key, ~0.2 ms a sample in lanes (codec.residual) on a 64-CPU host, so 120
# keeps a seek there near 25 ms; a key (~9 kB there, plus the part of a page it tends
# to leave empty before it) then costs ~150 B per sample, where every 60 cost ~280.
KEY_EVERY = 120
MAX_CHAIN = 4 * 3600  # a row claiming a key further back than this is damaged

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE config (id INTEGER PRIMARY KEY, sha1 TEXT NOT NULL UNIQUE, skeleton TEXT NOT NULL);
CREATE TABLE sample (
    seq INTEGER PRIMARY KEY, t_wall REAL NOT NULL, t_mono REAL NOT NULL,
    config_id INTEGER NOT NULL REFERENCES config(id), base_seq INTEGER, pred INTEGER NOT NULL,
    key_seq INTEGER NOT NULL, ints BLOB NOT NULL, floats BLOB NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE event (
    id INTEGER PRIMARY KEY, seq INTEGER, t_wall REAL NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX event_t_wall ON event(t_wall);
"""


class RecordingError(Exception):
    """One line a person can act on: the file cannot be written or read."""


# Less room than this left on the file system when SQLite fails to write: the disk is
# full. A commit needs a WAL frame per page it changes (16 kB each) and a checkpoint the
# WAL's ~1 MB, so with less than 1 MB free no writer goes on for long.
FULL_BELOW = 1 << 20


def disk_is_full(path: str) -> bool:
    """Whether the file system `path` is on (or would be made on) has no room left.

    SQLite calls a full disk SQLITE_FULL only where a page write itself fails; the same
    ENOSPC met while it grows the WAL's index, truncates or syncs comes back as a bare
    "disk I/O error" (about one creation in eight on a full tmpfs here), which tells an
    operator nothing. The file system's own free space says which it was. Root may
    write into the blocks reserved for it, so root counts those as free."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        st = os.statvfs(d)
    except OSError:
        return False
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    no_inodes = st.f_files > 0 and (st.f_ffree if os.geteuid() == 0 else st.f_favail) == 0
    return free * st.f_frsize < FULL_BELOW or no_inodes


def _says_full(path: str, text: str) -> bool:
    """Whether an error's text (SQLite's or the OS's) for `path` means a full disk."""
    low = text.lower()
    return "full" in low or "no space" in low or ("i/o error" in low and disk_is_full(path))


def describe_sqlite_error(path: str, exc: BaseException) -> str:
    text = str(exc)
    low = text.lower()
    if _says_full(path, text):
        return f"{path}: the disk is full; recording stopped, the file holds every sample up to now"
    if "readonly" in low or "read-only" in low:
        return f"{path}: the file system is read-only; recording stopped, the file holds every sample up to now"
    if "not a database" in low or "malformed" in low:
        return f"{path}: not a readable nettop recording ({text})"
    return f"{path}: {text}"


def _crc(seq: int, cid: int, base: int | None, pred: int, key: int, sha1: str,
         ints: bytes, floats: bytes, times: tuple[float, float] | None = None) -> int:
    """CRC-32 over everything a sample's decoding depends on, its configuration's hash
    too, and from format 2 its (t_mono, t_wall) columns, which are part of the snapshot."""
    head = f"{seq}/{cid}/{base}/{pred}/{key}/{sha1}/".encode()
    crc = zlib.crc32(floats, zlib.crc32(ints, zlib.crc32(head)))
    if times is not None:
        crc = zlib.crc32(struct.pack("<2d", *times), crc)
    return crc


class Writer:
    """Appends samples and events; every call is one committed transaction."""

    def __init__(self, path: str, meta: dict[str, Any] | None = None) -> None:
        self.path = path
        if os.path.lexists(path):
            raise RecordingError(f"{path} already exists; give a new file name or remove it")
        _create(path, meta or {})
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA wal_autocheckpoint=64")  # keep the WAL near 1 MB
        except sqlite3.Error as exc:
            raise RecordingError(describe_sqlite_error(path, exc)) from None
        self._configs: dict[str, int] = {}
        # the last two samples' values in walk order as int64 arrays (codec.split_parts),
        # None for one that does not fit 64 bits (it is a key, and so is its successor,
        # so such a vector is never predicted from). At 1,024 CPUs each is ~4.5 MB.
        self._prev: Any = None
        self._prev2: Any = None  # the one before, when prev was no key
        self._prev_small = self._prev2_small = False  # codec.small_vector of each
        self._prev_n: int | None = None  # how many values the last sample had
        self._has_prev2 = False  # the last sample was no key: a pred-2 successor has both
        self._prev_fits = True
        self._key_seq = 0
        self._order: codec.Order | None = None  # of the current chain, from its first interval
        self._seen: dict[int, tuple] = {}  # the last sample's settings objects (codec.IntParts.kept)
        self._tree: Any = None  # the last sample's skeleton tree (split_parts)
        self._vectors: list[Any] = []  # int64 arrays the samples' values are built in (_buffer)
        self._scratch: tuple[Any, tuple[Any, Any]] | None = None  # (_work)
        # the last sample's values less its base's (prev - prev2), one of _work's steps:
        # the next sample's straight-line prediction starts from it (codec.pack_steps)
        self._step: Any = None
        self._skeleton = ("", "")  # its JSON and SHA-1
        self._prev_config = -1
        self._seq = 0
        self._since_key = 0
        self.samples = 0
        self.bytes_written = 0

    def _tx(self) -> Any:
        db = self._db

        class Tx:
            def __enter__(self) -> None:
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, typ: Any, *rest: Any) -> None:
                db.execute("COMMIT" if typ is None else "ROLLBACK")
        return Tx()

    def add_sample(self, snap: Snapshot, events: Sequence[Event] = ()) -> int:
        """Store one snapshot (and the events that came with it); returns its seq."""
        if type(snap.t_mono) is not float or type(snap.t_wall) is not float:
            # the row's REAL columns stand in for the first two floats (see _floats)
            snap = dataclasses.replace(snap, t_mono=float(snap.t_mono), t_wall=float(snap.t_wall))
        tree, parts, floats = codec.split_parts(snap, self._seen)
        self._seen = parts.kept
        # the skeleton rarely changes: its JSON and hash (~7 ms at 1,024 CPUs) only when
        # the tree is not the last one's (codec.same_tree, ~0.1 ms)
        if self._tree is None or not codec.same_tree(tree, self._tree):
            skeleton = codec.skeleton_text(tree)
            self._skeleton = skeleton, hashlib.sha1(skeleton.encode()).hexdigest()
        self._tree = tree
        skeleton, sha = self._skeleton
        seq = self._seq + 1
        vec, small = parts.vector(self._buffer)  # None: a value does not fit 64 bits; it is stored as lists
        fits = vec is not None
        ints = None if fits else parts.ints()
        n = len(vec) if vec is not None else len(ints or ())
        try:
            with self._tx():
                cid = self._configs.get(sha)
                if cid is None:
                    cur = self._db.execute("INSERT OR IGNORE INTO config(sha1, skeleton) VALUES (?, ?)", (sha, skeleton))
                    cid = int(cur.lastrowid if cur.rowcount and cur.lastrowid else self._db.execute(
                        "SELECT id FROM config WHERE sha1 = ?", (sha,)).fetchone()[0])
                # a vector that does not fit 64 bits, and the one after it, stand alone:
                # readers never predict from or into such values (codec.lanes)
                key = (cid != self._prev_config or self._prev_n is None or not fits or not self._prev_fits
                       or self._since_key >= KEY_EVERY - 1 or n != self._prev_n)
                pred = 0 if key else (2 if self._has_prev2 else 1)
                key_seq = seq if key else self._key_seq
                if pred == 2 and self._order is None:
                    a, b = self._prev2, self._prev
                    self._order = (codec.Order.between_arrays(a, b) if self._prev_small and self._prev2_small
                                   else codec.Order.between(a.tolist(), b.tolist(), by_size=True))
                iblob, step = self._pack(vec, ints, small, pred)
                fblob = codec.pack_floats_tagged(floats[2:])
                base = None if key else self._seq
                self._db.execute(
                    "INSERT INTO sample VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, snap.t_wall, snap.t_mono, cid, base, pred, key_seq,
                     iblob, fblob, _crc(seq, cid, base, pred, key_seq, sha, iblob, fblob, (snap.t_mono, snap.t_wall))))
                for e in events:
                    self._db.execute("INSERT INTO event(seq, t_wall, kind, text) VALUES (?, ?, ?, ?)",
                                     (seq, e.t_wall, e.kind, e.text))
        except sqlite3.Error as exc:
            raise RecordingError(describe_sqlite_error(self.path, exc)) from None
        self._configs[sha] = cid
        self._prev2, self._prev2_small = (None, False) if key else (self._prev, self._prev_small)
        self._prev, self._prev_small, self._step = vec, small, step
        self._prev_n, self._has_prev2 = n, not key
        if key:
            self._key_seq, self._order = seq, None
        self._prev_config, self._prev_fits, self._seq = cid, fits, seq
        self._since_key = 0 if key else self._since_key + 1
        self.samples += 1
        self.bytes_written += len(iblob) + len(fblob) + 40
        return seq

    def _pack(self, vec: Any, ints: list[int] | None, small: bool, pred: int) -> tuple[bytes, Any]:
        """The sample's int blob, and its step from its base (vec - prev, an int64 array)
        when it made one (else None): the next sample predicts from it. `vec`: its values
        as an int64 array (None when one does not fit 64 bits: then `ints`, and it is a key).

        With numpy (codec.pack_diffs, pack_steps) when this sample's values and those it is
        predicted from are `codec.small_vector`, so no difference can overflow; with Python
        lists (codec.pack_ints) otherwise. Both give the same bytes (tests/test_record_codec.py)."""
        if vec is None:
            assert ints is not None and pred == 0
            return codec.pack_ints(ints), None
        prev, prev2, order = self._prev, self._prev2, self._order
        if codec.LZMA_FILTERS is not None and small and (pred < 1 or self._prev_small) \
                and (pred < 2 or self._prev2_small):
            np = numpy()
            a, steps = self._work(len(vec))
            last = self._step if pred == 2 else None
            self._step = None  # its array is written over below, also if this sample is not stored
            if pred == 0:
                return codec.pack_diffs(vec, (a, steps[0])), None
            step, free = (steps[1], steps[0]) if last is steps[0] else steps  # `free` holds `last` if any
            np.subtract(vec, prev, out=step)
            if pred == 1:
                return codec.pack_diffs(step, (a, free)), step
            if last is None:  # the last sample made none (it failed to be stored): p - q
                last = np.subtract(prev, prev2, out=free)
            if order is None or order.fwd is None:  # a single value
                return codec.pack_diffs(np.subtract(step, last, out=a), (free, a)), step
            return codec.pack_steps(step, last, order, (a, free)), step  # overwrites `last`
        values = vec.tolist()
        if pred == 0:
            return codec.pack_ints(values), None
        if pred == 1:
            return codec.pack_ints(values, prev.tolist()), None
        return codec.pack_ints(values, prev.tolist(), prev2.tolist(), order), None

    def _buffer(self, n: int) -> Any:
        """An int64 array of n for this sample's values: one of three kept, the one that
        holds neither of the last two samples (so a sample allocates no big array)."""
        for buf in self._vectors:
            if len(buf) == n and buf is not self._prev and buf is not self._prev2:
                return buf
        np = numpy()
        buf = np.empty(n, dtype=np.int64)
        self._vectors = [v for v in self._vectors if len(v) == n and (v is self._prev or v is self._prev2)] + [buf]
        return buf

    def _work(self, n: int) -> tuple[Any, tuple[Any, Any]]:
        """Int64 arrays of n to pack in, kept from sample to sample: a scratch array and two
        that a sample's step (vec - prev) is made in, turn about (one holds the last one's)."""
        if self._scratch is None or len(self._scratch[0]) != n:
            np = numpy()
            self._scratch = np.empty(n, dtype=np.int64), (np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))
            self._step = None
        return self._scratch

    def add_event(self, event: Event) -> None:
        try:
            with self._tx():
                self._db.execute("INSERT INTO event(seq, t_wall, kind, text) VALUES (?, ?, ?, ?)",
                                 (self._seq or None, event.t_wall, event.kind, event.text))
        except sqlite3.Error as exc:
            raise RecordingError(describe_sqlite_error(self.path, exc)) from None

    def size(self) -> int:
        """Bytes on disk: the database and its write-ahead log."""
        total = 0
        for p in (self.path, self.path + "-wal"):
            try:
                total += os.stat(p).st_size
            except OSError:
                pass
        return total

    def copy_to(self, path: str) -> None:
        """Write every committed sample to a new file `path` (0600, linked into place whole):
        the open database is the only copy left when its file was deleted under the writer."""
        tmp = f"{path}.{os.getpid()}.new"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            dst = sqlite3.connect(tmp)
            try:
                self._db.backup(dst)
            finally:
                dst.close()
            os.link(tmp, path)
        except (OSError, sqlite3.Error) as exc:
            raise RecordingError(f"cannot save {path}: {getattr(exc, 'strerror', None) or exc}") from None
        finally:
            _remove_temp(tmp)

    def close(self) -> None:
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # the WAL stays; readers still see every committed sample
        self._db.close()


def _create(path: str, meta: dict[str, Any]) -> None:
    """Write the schema and meta into a 0600 file beside `path`, then link it into place,
    so `path` never exists half-made (a kill -9 during creation leaves no file)."""
    tmp = f"{path}.{os.getpid()}.new"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.close(fd)
    except OSError as exc:
        raise RecordingError(_cannot_create(path, exc.strerror or str(exc))) from None
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            # rows of 1-2 kB fill 16 kB pages to ~95% where 4 kB pages hold two and waste a third
            db.execute(f"PRAGMA page_size={PAGE_SIZE}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            rows = {"schema_version": str(SCHEMA_VERSION), **{k: _text(v) for k, v in meta.items()}}
            db.executemany("INSERT INTO meta VALUES (?, ?)", rows.items())
            db.execute("COMMIT")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()
        os.link(tmp, path)  # fails if path appeared meanwhile: never overwrite
    except FileExistsError:
        raise RecordingError(f"{path} already exists; give a new file name or remove it") from None
    except OSError as exc:
        raise RecordingError(_cannot_create(path, exc.strerror or str(exc))) from None
    except sqlite3.Error as exc:
        raise RecordingError(_cannot_create(path, str(exc))) from None
    finally:
        _remove_temp(tmp)


def _cannot_create(path: str, why: str) -> str:
    """The line for a recording file that could not be made: it holds nothing yet."""
    if _says_full(path, why):
        why = "the disk is full; free some space or record onto another file system"
    return f"cannot create {path}: {why}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class _Chain:
    """Decoding state of one chain (a key sample and the samples predicted from it).

    Format 2 keeps each sample as lanes (codec.lanes: one int for the whole vector),
    from the third sample on in the chain's storage order, so the next sample is a few
    big-int operations; plain lists only come out for the sample asked for. Format 1
    (and a format-2 key whose values do not fit lanes) keeps walk-order lists, as
    format 1's reader did.
    """

    __slots__ = ("key", "lanes", "seq", "cid", "n", "cur", "prev", "order", "key_list", "walk", "row")

    def __init__(self, key: int, lanes: bool) -> None:
        self.key, self.lanes = key, lanes
        self.seq = 0  # last decoded; 0 before the key
        self.cid = -1
        self.n = 0
        self.cur: Any = None  # lanes int or list of the last sample
        self.prev: Any = None  # and of the one before it
        self.order: codec.Order | None = None
        self.key_list: list[int] | None = None  # the key's walk-order values
        self.walk: list[int] | None = None  # walk-order values of `cur`, once made
        self.row: tuple[Any, ...] = ()

    def advance(self, seq: int, cid: int, pred: int, blob: bytes, version: int) -> None:
        if not self.lanes or (pred == 0 and blob[:1] not in codec.PLANE_TAGS):
            self._advance_lists(pred, blob, version)
        else:
            d, n = codec.residual(blob)
            if pred != 0 and n != self.n:
                raise codec.CodecError(f"sample {seq} has another number of counters than its base")
            p, q = self.cur, self.prev
            if pred == 2 and self.order is None:
                # the chain's storage order starts here: re-lay its first two samples
                self.key_list = self.key_list if self.key_list is not None else codec.unlanes(q, n)
                second = codec.unlanes(p, n)
                self.order = codec.Order.between(self.key_list, second, by_size=version >= 2)
                if self.order.fwd is not None:
                    p, q = codec.lanes(self.order.fwd(second)), codec.lanes(self.order.fwd(self.key_list))
            if pred != 0 and not isinstance(p, int):
                raise codec.CodecError(f"sample {seq} has no usable base")
            self.prev, self.cur = (None if pred == 0 else p), codec.predict_lanes(pred, d, n, p, q)
            self.n, self.walk = n, None
            if pred == 0:
                self.key_list = None
        self.seq, self.cid = seq, cid

    def _advance_lists(self, pred: int, blob: bytes, version: int) -> None:
        if pred == 0:
            values = codec.unpack_ints(blob)
            self.key_list = values
            self.order = None
        elif pred == 1:
            values = codec.unpack_ints(blob, self._list(self.cur))
        else:
            prev2 = self._list(self.prev)
            prev = self._list(self.cur)
            if self.order is None:
                self.order = codec.Order.between(prev2, prev, by_size=version >= 2)
            values = codec.unpack_ints(blob, prev, prev2, self.order)
        self.prev = None if pred == 0 else self.cur
        self.cur, self.walk, self.n = values, values, len(values)
        if self.lanes and codec.fits(values):
            self.cur = codec.lanes(values)  # a key read as a list; its successors use lanes

    def _list(self, v: Any) -> list[int]:
        if isinstance(v, list):
            return v
        if v is None:
            raise codec.CodecError("sample has no usable base")
        return codec.unlanes(v, self.n)  # format 2 only reaches here for an odd key

    def values(self) -> list[int]:
        """Walk-order values of the last decoded sample."""
        if self.walk is None:
            vals = codec.unlanes(self.cur, self.n)
            if self.order is not None and self.order.inv is not None:
                vals = list(self.order.inv(vals))
            self.walk = vals
        return self.walk


@dataclass(frozen=True, slots=True)
class SampleInfo:
    seq: int
    t_wall: float
    t_mono: float


class Reader:
    """Reads a recording, tolerating damage: bad rows are skipped, never raised."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        if not os.path.exists(path):
            raise RecordingError(f"{path}: no such file")
        try:
            self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            # SQLite calls a file shorter than its header says corrupt unless the schema is
            # "writable"; the connection is read-only, so this only lets a cut file be read.
            self._db.execute("PRAGMA writable_schema=ON")
            rows = self._db.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.Error as exc:
            raise RecordingError(describe_sqlite_error(path, exc)) from None
        self.meta = dict(rows)
        try:
            version = int(self.meta.get("schema_version", "0"))
        except (ValueError, TypeError):
            version = 0
        if version < 1:
            raise RecordingError(f"{path}: not a nettop recording (no schema version)")
        if version > SCHEMA_VERSION:
            self.warnings.append(
                f"{path} was written by a newer nettop (format {version}, this one reads {SCHEMA_VERSION}); "
                "showing what this version understands")
        self.index: list[SampleInfo] = []
        try:
            for seq, tw, tm in self._db.execute("SELECT seq, t_wall, t_mono FROM sample ORDER BY seq"):
                self.index.append(SampleInfo(seq, tw, tm))
        except sqlite3.Error as exc:
            self._warn(f"{path} is damaged after sample {len(self.index)}: {exc}; showing what is intact")
        self.version = min(version, SCHEMA_VERSION)  # a newer file is read as the newest known
        self._skeletons: dict[int, tuple[codec.Decoder, str]] = {}
        self._chain: _Chain | None = None  # the chain decoded last, positioned at its last sample
        self._broken: dict[int, tuple[int, str]] = {}  # key seq -> (first seq that fails, why)
        self._bad: set[int] = set()
        self._runs: list[tuple[int, int]] | None = None  # wall-time runs, for position()

    def __len__(self) -> int:
        return len(self.index)

    def _warn(self, text: str) -> None:
        # one line whatever the cause carried: sqlite's and zlib's messages, and a damaged
        # file's own bytes quoted in them, are not ours to trust
        text = " ".join(text.split())
        if text not in self.warnings:
            self.warnings.append(text)

    def _skeleton(self, cid: int) -> tuple[codec.Decoder, str]:
        """(decoder, SHA-1 of the skeleton) of configuration `cid`, checked against its hash."""
        sk = self._skeletons.get(cid)
        if sk is None:
            row = self._db.execute("SELECT skeleton, sha1 FROM config WHERE id = ?", (cid,)).fetchone()
            if row is None:
                raise codec.CodecError(f"configuration {cid} is missing")
            if not isinstance(row[0], str) or hashlib.sha1(row[0].encode()).hexdigest() != row[1]:
                raise codec.CodecError(f"configuration {cid} fails its checksum")
            try:
                parsed = json.loads(row[0])
            except (ValueError, RecursionError):  # RecursionError: nested beyond any snapshot
                raise codec.CodecError(f"configuration {cid} is damaged") from None
            sk = (codec.Decoder(parsed), row[1])
            self._skeletons[cid] = sk
        return sk

    def drop_cache(self) -> None:
        """Forget the decoded chain (the next read is a cold seek; benchmarks use it)."""
        self._chain = None

    def _rows(self, first: int, last: int) -> list[tuple[Any, ...]]:
        return self._db.execute(
            "SELECT seq, config_id, base_seq, pred, key_seq, ints, floats, crc, t_wall, t_mono "
            "FROM sample WHERE seq BETWEEN ? AND ? ORDER BY seq", (first, last)).fetchall()

    def _decode(self, seq: int) -> tuple[int, list[int], list[float]]:
        """(config id, ints, floats) of sample `seq`, decoding its chain from the key
        sample, or onwards from the last sample decoded when it is on the way."""
        head = self._db.execute("SELECT key_seq FROM sample WHERE seq = ?", (seq,)).fetchone()
        if head is None:
            raise codec.CodecError(f"sample {seq} is missing")
        key = head[0]
        if not isinstance(key, int) or not 0 <= seq - key <= MAX_CHAIN:
            raise codec.CodecError(f"sample {seq} names no usable key sample")
        broken = self._broken.get(key)
        if broken is not None and seq >= broken[0]:
            raise codec.CodecError(broken[1])  # the same words: one warning per damage
        c = self._chain
        if c is None or c.key != key or c.seq > seq:
            c = _Chain(key, lanes=self.version >= 2)
        if c.seq < seq:
            rows = self._rows(c.seq + 1 if c.seq else key, seq)
            self._chain = None
            try:
                for row in rows:
                    self._step(c, row)
                if c.seq != seq:
                    raise codec.CodecError(f"sample {(c.seq or key - 1) + 1} is missing")
            except codec.CodecError as exc:
                # every later sample of this chain depends on the one that failed
                self._broken[key] = ((c.seq or key - 1) + 1, str(exc))
                raise
            self._chain = c
        return c.cid, c.values(), self._floats(c.row)

    def _step(self, c: _Chain, row: tuple[Any, ...]) -> None:
        """Decode `row`, the sample after the chain's last one, into the chain."""
        seq, cid, base, pred, key, iblob, fblob, crc, t_wall, t_mono = row
        times = None
        if self.version >= 2:
            if not (isinstance(t_mono, float) and isinstance(t_wall, float)):
                raise codec.CodecError(f"sample {seq} has no timestamps")
            times = (t_mono, t_wall)
        if not (isinstance(iblob, bytes) and isinstance(fblob, bytes)) or \
                _crc(seq, cid, base, pred, key, self._skeleton(cid)[1], iblob, fblob, times) != crc:
            raise codec.CodecError(f"sample {seq} fails its checksum")
        if key != c.key or (seq == c.key) != (pred == 0) or (pred != 0 and (base != c.seq or cid != c.cid)):
            raise codec.CodecError(f"sample {seq} does not follow its base")
        if pred not in (0, 1, 2) or (pred == 2 and c.prev is None):
            raise codec.CodecError(f"sample {seq} has no usable base")
        c.advance(seq, cid, pred, iblob, self.version)
        c.row = row

    def _floats(self, row: tuple[Any, ...]) -> list[float]:
        floats = codec.unpack_floats_tagged(row[6]) if self.version >= 4 else codec.unpack_floats(row[6])
        if self.version >= 2:  # the row's columns are the snapshot's first two floats
            return [row[9], row[8], *floats]
        return floats

    def snapshot(self, seq: int) -> Snapshot | None:
        """Sample `seq`, or None (with a warning) when it or its base is damaged."""
        if seq in self._bad:
            return None
        try:
            cid, ints, floats = self._decode(seq)
            snap = self._skeleton(cid)[0].build(ints, floats)
        except (codec.CodecError, sqlite3.Error) as exc:
            self._bad.add(seq)
            self._warn(f"{self.path}: skipped damaged samples ({exc})")
            return None
        return snap

    def snapshots(self, start: int = 0, stop: int | None = None) -> Iterator[Snapshot]:
        """Intact snapshots of index positions start..stop, in order."""
        for info in self.index[start:stop]:
            snap = self.snapshot(info.seq)
            if snap is not None:
                yield snap

    def events(self) -> list[Event]:
        """Recorded events in the order they were written (not sorted by wall time, which
        a stepped clock would scramble; see wallclock.py)."""
        return [e for _, e in self.positioned_events()]

    def positioned_events(self) -> list[tuple[int, Event]]:
        """(seq of the sample written with it, 0 for none; event) in recorded order."""
        try:
            rows = self._db.execute("SELECT seq, t_wall, kind, text FROM event ORDER BY id").fetchall()
        except sqlite3.Error as exc:
            self._warn(f"{self.path}: events are damaged ({exc})")
            return []
        out = []
        for seq, t, k, x in rows:
            try:
                out.append((seq if isinstance(seq, int) else 0, Event(float(t), str(k), str(x))))
            except (TypeError, ValueError):
                self._warn(f"{self.path}: an event has no usable time; skipped")
        return out

    def position(self, t_wall: float) -> int:
        """Index position of the last sample at or before t_wall (0 if none); the first
        such time in recorded order where the wall clock was stepped back."""
        if self._runs is None:
            self._runs = wallclock.runs(self.index)
        return wallclock.position(self.index, t_wall, self._runs)

    def close(self) -> None:
        self._db.close()


def _remove_temp(tmp: str) -> None:
    """A temporary database and its WAL files, whatever became of them."""
    for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
        try:
            os.unlink(leftover)
        except OSError:
            pass
