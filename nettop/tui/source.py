"""The live view's source: the headless `LivePipeline` with the keys only a screen has.

The pipeline itself (sampler thread, Mailbox, doctor, tap) and the `Source` protocol the
app is handed (this, a recording's `nettop.record.replay.ReplaySource`, or a test's
`ScriptedSource`) live in `nettop.pipeline`, below the TUI; this adds the record key's
tap and the eBPF key's switch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from nettop.model.timeline import LIVE_WHOLE_POINTS
from nettop.output.before_after import FiguresRing, figures
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.sampler import Reader
from nettop.pipeline import LivePipeline, Mailbox, Source, Wake
from nettop.record.recorder import open_live_recording

if TYPE_CHECKING:
    from nettop.ping.prober import Prober


class LiveSource(LivePipeline):
    """The pipeline the live view samples: with a recording tap and the eBPF switch."""

    def __init__(self, root: SysRoot = LIVE, ifnames: Iterable[str] | None = None,
                 interval: float = 1.0, max_points: int = 3600, reader: Reader | None = None,
                 prober: Prober | None = None, latency_target_ms: float | None = None) -> None:
        super().__init__(root, ifnames, interval, max_points, reader, prober, latency_target_ms,
                         recording=open_live_recording, probes=True,
                         whole_points=LIVE_WHOLE_POINTS, digest=figures, digest_store=FiguresRing)  # memory bounded by what is drawn


__all__ = ["LiveSource", "Mailbox", "Source", "Wake"]
