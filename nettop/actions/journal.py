"""The tuning journal: an append-only, fsynced JSON-lines file of every write nettop makes.

A change is recorded in two lines. `begin` is written and fsynced *before* the kernel
value is touched, with the Setting's record and the value it had; `end` follows with the
value read back (or the error). So whatever kills nettop, the file names every value it
may have changed and what that value was originally: `nettop restore` needs nothing else.
A torn last line (killed mid-write) is ignored.

Undo and redo are not stored as stacks; they are replayed from the lines, so every
process that opens the journal agrees on them: a `set` group pushes onto the undo stack
and clears redo, an `undo` group moves its `ref` to redo, a `redo` group moves it back.
A `clean` line (after revert-all or restore) says every original is back and starts a new
epoch. Processes serialize on an flock of the file.

Default location: $NETTOP_STATE_DIR/journal.jsonl, else /var/lib/nettop/journal.jsonl.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from nettop.actions.base import ActionError

FILENAME = "journal.jsonl"


def default_path() -> str:
    base = os.environ.get("NETTOP_STATE_DIR") or "/var/lib/nettop"
    return os.path.join(base, FILENAME)


@dataclass(slots=True)
class Entry:
    """One write: the begin line, completed by its end line when there is one."""

    id: int
    group: int
    action: str  # "set", "undo", "redo", "rollback", "restore"
    ref: int | None  # the group an undo/redo acts on
    t: float
    setting: dict[str, Any]
    key: str
    before: Any
    value: Any
    text: str
    ended: bool = False
    after: Any = None
    verified: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.ended and self.error is None


@dataclass(slots=True)
class State:
    """The journal replayed: entries of this epoch, undo/redo stacks of group ids."""

    entries: list[Entry] = field(default_factory=list)
    groups: dict[int, list[Entry]] = field(default_factory=dict)
    undo: list[int] = field(default_factory=list)
    redo: list[int] = field(default_factory=list)
    next_id: int = 1
    next_group: int = 1
    torn: int = 0  # lines that could not be parsed

    def originals(self) -> dict[str, Entry]:
        """For each key changed this epoch, the first entry: its `before` is the original."""
        out: dict[str, Entry] = {}
        for e in self.entries:
            out.setdefault(e.key, e)
        return out

    def pending(self) -> list[Entry]:
        """Writes begun but never ended: nettop died between journal and read-back."""
        return [e for e in self.entries if not e.ended]

    def last_ok(self) -> dict[str, Entry]:
        """For each key, the last successful write this epoch (for drift)."""
        out: dict[str, Entry] = {}
        for e in self.entries:
            if e.ok:
                out[e.key] = e
        return out


def replay(lines: list[str]) -> State:
    """Pure: the State of a journal's lines."""
    st = State()
    by_id: dict[int, Entry] = {}
    for line in lines:
        try:
            rec = json.loads(line)
            op = rec["op"]
        except (ValueError, KeyError, TypeError):
            st.torn += 1
            continue
        if op == "begin":
            e = Entry(rec["id"], rec["group"], rec["action"], rec.get("ref"), rec["t"],
                      rec["setting"], rec["key"], rec.get("before"), rec.get("value"),
                      rec.get("text", ""))
            by_id[e.id] = e
            st.entries.append(e)
            st.groups.setdefault(e.group, []).append(e)
            st.next_id = max(st.next_id, e.id + 1)
            st.next_group = max(st.next_group, e.group + 1)
        elif op == "end":
            e2 = by_id.get(rec.get("id", -1))
            if e2 is not None:
                e2.ended, e2.after = True, rec.get("after")
                e2.verified, e2.error = bool(rec.get("verified")), rec.get("error")
        elif op == "group":  # a group is complete: move it between the stacks
            _finish_group(st, rec)
        elif op == "clean":
            st.entries.clear()
            st.groups.clear()
            st.undo.clear()
            st.redo.clear()
            by_id.clear()
    return st


def _finish_group(st: State, rec: dict[str, Any]) -> None:
    gid, action, ref = rec.get("group"), rec.get("action"), rec.get("ref")
    if action == "set" and isinstance(gid, int):
        st.undo.append(gid)
        st.redo.clear()
    elif action == "undo" and ref in st.undo:
        st.undo.remove(ref)
        st.redo.append(ref)
    elif action == "redo" and ref in st.redo:
        st.redo.remove(ref)
        st.undo.append(ref)


class Journal:
    """The journal file. Use `with journal.locked() as state:` around every change."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_path()
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            d = os.path.dirname(self.path) or "."
            try:
                os.makedirs(d, mode=0o700, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise ActionError(f"cannot open the tuning journal {self.path}: {exc.strerror}; "
                                  "set NETTOP_STATE_DIR to a writable directory", exc.errno) from None
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)  # the file's directory entry survives a crash too
            finally:
                os.close(dfd)
            self._fd = fd
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def read_state(self) -> State:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                return replay(f.read().splitlines())
        except FileNotFoundError:
            return State()

    @contextlib.contextmanager
    def locked(self) -> Iterator[State]:
        """Hold the journal's lock and yield its current state (re-read under the lock)."""
        fd = self._open()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield self.read_state()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def append(self, record: dict[str, Any]) -> None:
        """One line, written with one write() and fsynced before returning."""
        fd = self._open()
        data = (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()
        os.write(fd, data)
        os.fsync(fd)

    def begin(self, st: State, *, group: int, action: str, ref: int | None, setting: dict[str, Any],
              key: str, before: Any, value: Any, text: str) -> Entry:
        e = Entry(st.next_id, group, action, ref, time.time(), setting, key, before, value, text)
        self.append({"op": "begin", "id": e.id, "group": group, "action": action, "ref": ref,
                     "t": e.t, "setting": setting, "key": key, "before": before, "value": value,
                     "text": text})
        st.next_id += 1
        st.entries.append(e)
        st.groups.setdefault(group, []).append(e)
        return e

    def end(self, e: Entry, *, after: Any, verified: bool, error: str | None = None) -> None:
        self.append({"op": "end", "id": e.id, "t": time.time(), "after": after,
                     "verified": verified, "error": error})
        e.ended, e.after, e.verified, e.error = True, after, verified, error

    def finish_group(self, st: State, group: int, action: str, ref: int | None) -> None:
        rec = {"op": "group", "group": group, "action": action, "ref": ref, "t": time.time()}
        self.append(rec)
        _finish_group(st, rec)

    def clean(self, st: State, reason: str) -> None:
        self.append({"op": "clean", "t": time.time(), "reason": reason})
        st.entries.clear()
        st.groups.clear()
        st.undo.clear()
        st.redo.clear()
