"""The plain-text live report: `nettop` with its output not a terminal screen (a pipe,
`watch`, a serial console). The pipeline's sampler owns the clock; this redraws
`output.text_report.render` of the newest sample only, so a slow reader never queues
frames up."""

from __future__ import annotations

import queue
import shutil
import sys

from nettop.kernel.sysroot import SysRoot
from nettop.pipeline.live import LivePipeline


def watch(root: SysRoot, interval: float, ifaces: list[str] | None) -> int:
    """Redraw the text report every interval until Ctrl-C (the pipeline's sampler owns
    the clock; no doctor, no tap: this screen shows neither)."""
    from nettop.model.timeline import Point
    from nettop.output.snapshot_json import build_document
    from nettop.output.text_report import render

    # the newest two samples are all it draws: kept whole, nothing older (120 whole
    # snapshots at -i 0.1 took it from 45 to 80 MB on a host whose interfaces churn)
    pipeline = LivePipeline(root, ifaces, interval, max_points=2, doctor=False)
    latest: queue.Queue = queue.Queue(maxsize=1)

    def on_point(point: Point) -> None:
        if point.rates is None:
            return
        prev = pipeline.timeline.points()[-2].snapshot
        doc = build_document(prev, point.snapshot, point.rates, interval)
        note = pipeline.capture_note
        if note is not None:  # a capture read once: its header says what the figures are
            doc["rates_basis"] = "since_boot" if note.startswith("one capture:") else "between_captures"
        try:
            latest.get_nowait()  # the newest sample wins; never queue up frames
        except queue.Empty:
            pass
        latest.put_nowait(doc)

    pipeline.listeners.append(on_point)
    pipeline.start()
    try:
        while True:
            doc = latest.get()
            cols, rows = shutil.get_terminal_size((100, 40))
            text = render(doc, cols).splitlines()[: rows - 1]
            sys.stdout.write("\x1b[H\x1b[2J" + "\n".join(text) + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        return 0
    finally:
        pipeline.stop()
