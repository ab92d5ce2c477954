"""The messages the app's threads post to it: the source's thread, the eBPF switch's
thread and the replay worker never touch widgets; they post one of these and the app's
handler does the drawing on the UI thread."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class ProbesChanged(Message):
    """The eBPF switch finished starting or stopping (posted from its thread)."""


class NewPoint(Message):
    """The source has a point waiting in its mailbox."""


class Moved(Message):
    """A replay move (step, seek, event jump) finished on its worker thread."""

    def __init__(self, what: str, result: Any, error: str | None = None) -> None:
        super().__init__()
        self.what = what
        self.result = result
        self.error = error
