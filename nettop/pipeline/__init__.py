"""The headless live pipeline, below every front end: reader → sampler → Timeline →
doctor (+ recording tap, eBPF switch), and the `Source` protocol the live view is handed.

No Textual here: `nettop record`, `nettop serve` and the plain text report use the same
pipeline as the full-screen view (tests/test_import_graph.py).
"""

from __future__ import annotations

from nettop.pipeline.live import LivePipeline, off_loop
from nettop.pipeline.source import Mailbox, Source, Wake
from nettop.pipeline.tap import EventCursor, RecordingTap, RecordStatus, recording_meta

__all__ = ["EventCursor", "LivePipeline", "Mailbox", "RecordStatus", "RecordingTap", "Source", "Wake",
           "off_loop", "recording_meta"]
