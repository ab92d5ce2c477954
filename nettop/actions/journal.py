"""The tuning journal: an append-only, fsynced JSON-lines file of every write nettop makes.

A change is recorded in two lines. `begin` is written and fsynced *before* the kernel
value is touched, with the Setting's record and the value it had; `end` follows with the
value read back (or the error). So whatever kills nettop, the file names every value it
may have changed and what that value was originally: `nettop restore` needs nothing else.
A line that cannot be trusted (torn by a kill mid-write, NUL bytes after a power loss,
a record edited by hand or written by a newer nettop) is skipped and reported in one line;
the records after it still count. Every append starts on a fresh line, so a torn line
never swallows the record after it.

Undo and redo are not stored as stacks; they are replayed from the lines, so every
process that opens the journal agrees on them: a `set` group pushes onto the undo stack
and clears redo, an `undo` group moves its `ref` to redo, a `redo` group moves it back.
A `clean` line (after revert-all or restore) says every original is back and starts a new
epoch. Processes serialize on an flock of the file.

Default location: $NETTOP_STATE_DIR/journal.jsonl, else /var/lib/nettop/journal.jsonl.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from nettop.actions.base import REGISTRY, ActionError, from_record
from nettop.actions.typed import clip

FILENAME = "journal.jsonl"


def default_path() -> str:
    base = os.environ.get("NETTOP_STATE_DIR") or "/var/lib/nettop"
    return os.path.join(base, FILENAME)


@dataclass(slots=True)
class Entry:
    """One write: the begin line, completed by its end line when there is one."""

    id: int
    group: int
    action: str  # one of ACTIONS: "set", "undo", "redo", "rollback", "revert", "restore", "exit"
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
class Trial:
    """A group applied on trial: it is reverted at `deadline` unless confirmed first.

    `deadline_mono` is CLOCK_MONOTONIC, which every process of one boot shares, so the
    guardian process and a later nettop agree on it whatever NTP does to the wall clock;
    `deadline` (wall time) is for people."""

    group: int
    t: float
    deadline: float
    deadline_mono: float
    why: str
    guardian: int | None = None  # pid of the process that reverts it if nettop dies
    outcome: str | None = None  # None while pending, "confirmed" or "reverted"
    reason: str = ""  # why it was reverted ("not confirmed within 30 s", "SIGHUP")
    t_end: float | None = None

    @property
    def pending(self) -> bool:
        return self.outcome is None

    def status(self) -> str:
        """"trial, reverts at 14:02:31" / "confirmed" / "reverted: not confirmed"."""
        if self.outcome is None:
            return "trial, reverts at " + time.strftime("%H:%M:%S", time.localtime(self.deadline))
        if self.outcome == "confirmed":
            return "confirmed"
        return f"reverted: {self.reason}" if self.reason else "reverted"


@dataclass(slots=True)
class State:
    """The journal replayed: entries of this epoch, undo/redo stacks of group ids."""

    entries: list[Entry] = field(default_factory=list)
    groups: dict[int, list[Entry]] = field(default_factory=dict)
    undo: list[int] = field(default_factory=list)
    redo: list[int] = field(default_factory=list)
    next_id: int = 1
    next_group: int = 1
    torn: int = 0  # lines that are not JSON (a write cut short)
    problems: list[str] = field(default_factory=list)  # every skipped line, "line N: why"
    trials: dict[int, Trial] = field(default_factory=dict)  # group -> its trial, this epoch

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


ACTIONS = ("set", "undo", "redo", "rollback", "revert", "restore", "exit")
GROUP_ACTIONS = ("set", "undo", "redo")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _id(v: Any) -> bool:
    return _int(v) and 0 < v < 2**53  # what every JSON reader keeps exact


def _begin_problem(rec: dict[str, Any], by_id: dict[int, Entry]) -> str | None:
    """Why a begin record cannot be trusted, or None. The setting must rebuild into the
    Setting it names (so undo and restore can write it back) and its key must match."""
    if not _id(rec.get("id")):
        return "a begin record without a whole-number id"
    if rec["id"] in by_id:
        return f"a second begin record with id {rec['id']}"
    if not _id(rec.get("group")):
        return "a begin record without a whole-number group"
    if rec.get("action") not in ACTIONS:
        return f"a begin record with an unknown action {clip(rec.get('action'))}"
    if rec.get("ref") is not None and not _id(rec.get("ref")):
        return "a begin record whose ref is not a group number"
    if not isinstance(rec.get("t"), (int, float)) or isinstance(rec.get("t"), bool) or not math.isfinite(rec["t"]):
        return "a begin record without a time"
    if not isinstance(rec.get("key"), str) or not isinstance(rec.get("text", ""), str):
        return "a begin record without a key"
    try:
        setting = from_record(rec.get("setting"))
    except (ActionError, TypeError, ValueError) as exc:
        why = str(exc)
        return why if len(why) <= 150 else why[:149] + "…"
    if setting.key != rec["key"]:
        return f"a begin record whose key {clip(rec['key'])} is not its setting's ({setting.key})"
    for name in ("before", "value"):
        if not isinstance(rec.get(name), setting.value_types) or isinstance(rec.get(name), bool):
            return f"a begin record of {setting.key} whose {name} {clip(rec.get(name))} is not a value it can hold"
    return None


def replay(lines: list[str]) -> State:
    """Pure: the State of a journal's lines.

    A line that is not a complete, well-formed record (torn by a crash, NUL bytes after a
    power loss, edited by hand, written by a newer nettop) is skipped and named in
    `State.problems`; the records after it still count. Ids and groups seen anywhere,
    skipped lines included, are never handed out again.
    """
    st = State()
    by_id: dict[int, Entry] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            st.torn += 1
            st.problems.append(f"line {n}: not a complete JSON record (torn by a crash?)")
            continue
        op = rec.get("op") if isinstance(rec, dict) else None
        if isinstance(rec, dict):
            for k, attr in (("id", "next_id"), ("group", "next_group")):
                if _id(rec.get(k)):
                    setattr(st, attr, max(getattr(st, attr), rec[k] + 1))
        why: str | None = None
        if op == "begin":
            why = _begin_problem(rec, by_id)
            if why is None:
                e = Entry(rec["id"], rec["group"], rec["action"], rec.get("ref"), rec["t"],
                          rec["setting"], rec["key"], rec.get("before"), rec.get("value"),
                          rec.get("text", ""))
                by_id[e.id] = e
                st.entries.append(e)
                st.groups.setdefault(e.group, []).append(e)
        elif op == "end":
            e2 = by_id.get(rec["id"]) if _id(rec.get("id")) else None
            if e2 is None:
                why = "an end record of no begin record"
            elif e2.ended:
                why = f"a second end record for id {e2.id}"
            elif not isinstance(rec.get("error"), (str, type(None))) or not isinstance(rec.get("verified"), (bool, type(None))):
                why = f"an end record for id {e2.id} with a malformed error or verified field"
            elif rec.get("after") is not None and (isinstance(rec["after"], bool) or not isinstance(
                    rec["after"], REGISTRY[e2.setting["kind"]].value_types)):
                why = f"an end record for id {e2.id} whose after {clip(rec['after'])} is not a value {e2.key} can hold"
            else:
                e2.ended, e2.after = True, rec.get("after")
                e2.verified, e2.error = bool(rec.get("verified")), rec.get("error")
        elif op == "group":  # a group is complete: move it between the stacks
            if not _id(rec.get("group")) or rec.get("action") not in GROUP_ACTIONS or \
                    (rec.get("ref") is not None and not _id(rec.get("ref"))):
                why = "a malformed group record"
            elif rec["action"] == "set" and rec["group"] not in st.groups:
                why = f"a group record of group {rec['group']}, which has no begin record"
            else:
                _finish_group(st, rec)
        elif op in ("trial", "trial_end"):
            why = _trial_record(st, rec)
        elif op == "clean":
            st.trials.clear()
            st.entries.clear()
            st.groups.clear()
            st.undo.clear()
            st.redo.clear()
            by_id.clear()
        else:
            why = f"an unknown record {clip(op if op is not None else rec, 30)}"
        if why is not None:
            st.problems.append(f"line {n}: {why}")
    return st


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _trial_record(st: State, rec: dict[str, Any]) -> str | None:
    """Apply a trial or trial_end record to the state; why it is not trusted, or None."""
    if not _id(rec.get("group")):
        return f"a {rec.get('op')} record without a whole-number group"
    gid: int = rec["group"]
    if rec["op"] == "trial":
        if not all(_num(rec.get(k)) for k in ("t", "deadline", "deadline_mono")) or \
                not isinstance(rec.get("why", ""), str) or \
                (rec.get("guardian") is not None and not _id(rec.get("guardian"))):
            return f"a malformed trial record of group {gid}"
        old = st.trials.get(gid)
        if old is not None and old.guardian is None and rec.get("guardian") is not None and old.pending:
            old.guardian = rec["guardian"]  # the guardian's pid, known once it was started
            return None
        st.trials[gid] = Trial(gid, rec["t"], rec["deadline"], rec["deadline_mono"], rec.get("why", ""),
                               rec.get("guardian"))
        return None
    trial = st.trials.get(gid)
    if trial is None:
        return f"a trial_end record of group {gid}, which is not on trial"
    if rec.get("outcome") not in ("confirmed", "reverted") or not isinstance(rec.get("reason", ""), str):
        return f"a malformed trial_end record of group {gid}"
    if trial.outcome is None:
        trial.outcome, trial.reason = rec["outcome"], rec.get("reason", "")
        trial.t_end = rec.get("t") if _num(rec.get("t")) else None
    return None


def problem_line(path: str, problems: list[str]) -> str:
    """The one warning line for a journal's skipped lines."""
    shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
    return (f"journal {path}: skipped {len(problems)} unreadable line(s), the rest counts ({shown}); "
            "`nettop journal` shows what it holds")


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
        self.problems: list[str] = []  # the skipped lines of the last read, "line N: why"

    def _open(self) -> int:
        if self._fd is None:
            d = os.path.dirname(self.path) or "."
            try:
                os.makedirs(d, mode=0o700, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise ActionError(self._cannot("open", exc), exc.errno) from None
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

    def _read_lines(self, fd: int) -> list[str]:
        chunks = []
        offset = 0
        while True:
            b = os.pread(fd, 1 << 20, offset)
            if not b:
                break
            chunks.append(b)
            offset += len(b)
        return b"".join(chunks).decode("utf-8", "replace").split("\n")

    def _replay(self, fd: int) -> State:
        st = replay(self._read_lines(fd))
        self.problems = st.problems
        return st

    def read_state(self) -> State:
        """The journal replayed, read under a shared lock (a writer's lines are whole)."""
        with self.reading() as st:
            return st

    @contextlib.contextmanager
    def reading(self) -> Iterator[State]:
        """The current state under a shared lock; works without write access to the file
        (`nettop journal`, dry-runs). An unreadable journal is one ActionError line.

        Its own file descriptor, never the writer's: flock belongs to an open file, so a
        reader thread sharing the writer's descriptor would unlock it mid-write."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.problems = []
            yield State()
            return
        except OSError as exc:
            raise ActionError(self._cannot("read", exc), exc.errno) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                st = self._replay(fd)
            except OSError as exc:
                raise ActionError(self._cannot("read", exc), exc.errno) from None
            yield st
        finally:
            os.close(fd)

    def _cannot(self, what: str, exc: OSError) -> str:
        fix = ("run nettop as root (the journal belongs to root)" if exc.errno in (errno.EACCES, errno.EPERM)
               else "set NETTOP_STATE_DIR to a directory nettop can write")
        return f"cannot {what} the tuning journal {self.path}: {exc.strerror or exc}; {fix}"

    @contextlib.contextmanager
    def locked(self) -> Iterator[State]:
        """Hold the journal's lock and yield its current state (re-read under the lock)."""
        fd = self._open()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            try:
                st = self._replay(fd)
            except OSError as exc:
                raise ActionError(self._cannot("read", exc), exc.errno) from None
            yield st
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def append(self, record: dict[str, Any]) -> None:
        """One line, written with one write() and fsynced before returning. When the file
        does not end in a newline (a write torn by a crash), the line starts with one, so
        the torn line stays alone and this record stays readable."""
        fd = self._open()
        data = (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
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

    def trial(self, st: State, group: int, seconds: float, why: str, guardian: int | None = None) -> Trial:
        """Mark a group as applied on trial, reverted in `seconds` unless confirmed."""
        now, mono = time.time(), time.monotonic()
        rec = {"op": "trial", "group": group, "t": now, "deadline": now + seconds,
               "deadline_mono": mono + seconds, "why": why, "guardian": guardian}
        self.append(rec)
        _trial_record(st, rec)
        return st.trials[group]

    def trial_guardian(self, st: State, trial: Trial, pid: int) -> None:
        rec = {"op": "trial", "group": trial.group, "t": trial.t, "deadline": trial.deadline,
               "deadline_mono": trial.deadline_mono, "why": trial.why, "guardian": pid}
        self.append(rec)
        trial.guardian = pid

    def trial_end(self, st: State, group: int, outcome: str, reason: str = "") -> None:
        rec = {"op": "trial_end", "group": group, "t": time.time(), "outcome": outcome, "reason": reason}
        self.append(rec)
        _trial_record(st, rec)

    def clean(self, st: State, reason: str) -> None:
        self.append({"op": "clean", "t": time.time(), "reason": reason})
        st.trials.clear()
        st.entries.clear()
        st.groups.clear()
        st.undo.clear()
        st.redo.clear()
