"""Which interfaces and IRQs nettop has just changed, learnt from the tuning journal.

The sampler reads queue and IRQ settings off screen only in rotation
(nettop/collectors/settings_rotation.py), so a change nettop makes must tell it "read
this again now". Every change, from this process's live view or from `nettop set`,
`undo`, `restore`, the trial guardian or an experiment in another process, is written to
the journal before and after the write (nettop/actions/journal.py); so the journal is
the one place to learn of them, and the actions layer needs to know nothing of the
sampler. `JournalWatch.poll` costs one stat() per tick while the journal does not grow,
and reads only the lines added since (a begin line names the setting; its end line, the
write done, names it again so a tick that fell between the two re-reads the new value).
"""

from __future__ import annotations

import json
import os
from typing import Any

from nettop.actions.journal import default_path

MAX_READ = 1 << 20  # a journal that grew by more since the last tick: read its last MiB


class JournalWatch:
    """`poll()` -> (interfaces, IRQs) named by journal lines added since the last poll;
    what the journal held when the watch was made is not news."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_path()
        self._pos: int | None = None
        self._ino: int | None = None
        self._targets: dict[int, tuple[str | None, int | None]] = {}  # entry id -> what it changes

    def poll(self) -> tuple[set[str], set[int]]:
        ifnames: set[str] = set()
        irqs: set[int] = set()
        try:
            st = os.stat(self.path)
        except OSError:
            self._pos = self._pos if self._pos is not None else 0  # created later: all of it is news
            return ifnames, irqs
        if self._pos is None or st.st_ino != self._ino:
            first = self._pos is None
            self._ino, self._pos = st.st_ino, (st.st_size if first else 0)
        if st.st_size < self._pos:  # truncated or replaced
            self._pos = 0
        if st.st_size == self._pos:
            return ifnames, irqs
        try:
            with open(self.path, "rb") as f:
                start = max(self._pos, st.st_size - MAX_READ)
                f.seek(start)
                data = f.read(st.st_size - start)
        except OSError:
            return ifnames, irqs
        end = data.rfind(b"\n")
        if end < 0:
            return ifnames, irqs  # a line still being written: next tick
        self._pos = start + end + 1
        for line in data[:end].split(b"\n"):
            self._line(line, ifnames, irqs)
        return ifnames, irqs

    def _line(self, line: bytes, ifnames: set[str], irqs: set[int]) -> None:
        try:
            rec = json.loads(line)
        except ValueError:
            return  # a torn line: the journal's own reader reports it
        if not isinstance(rec, dict):
            return
        op, ident = rec.get("op"), rec.get("id")
        if op == "begin":
            target = _target(rec.get("setting"))
            if isinstance(ident, int):
                if len(self._targets) > 4096:
                    self._targets.clear()
                self._targets[ident] = target
        elif op == "end" and isinstance(ident, int):
            target = self._targets.pop(ident, (None, None))
        else:
            return
        name, irq = target
        if name is not None:
            ifnames.add(name)
        if irq is not None:
            irqs.add(irq)


def _target(setting: Any) -> tuple[str | None, int | None]:
    """(interface, IRQ) a journal record's setting changes: its params' `ifname`/`irq`."""
    params = setting.get("params") if isinstance(setting, dict) else None
    if not isinstance(params, dict):
        return None, None
    name, irq = params.get("ifname"), params.get("irq")
    return (name if isinstance(name, str) else None,
            irq if isinstance(irq, int) and not isinstance(irq, bool) else None)


__all__ = ["JournalWatch"]
