"""The live full-screen UI (Textual). Nothing below the UI imports this package."""

from __future__ import annotations

from nettop.tui.app import NettopApp, run
from nettop.tui.source import LiveSource, Mailbox, Source

__all__ = ["LiveSource", "Mailbox", "NettopApp", "Source", "run"]
