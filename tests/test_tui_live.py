"""The live source's threading, end to end through the app: the sampler thread keeps
its clock while the UI is stuck, and what piled up meanwhile becomes one frame.

The reader here returns the synthetic host stamped with the real clock, because the
point is the sampler/UI hand-off, not the kernel (the tmux test covers the kernel)."""

from __future__ import annotations

import dataclasses
import threading
import time

from nettop.kernel.sysroot import LIVE
from nettop.tui.app import NettopApp
from nettop.tui.scripted import synthetic
from nettop.tui.source import LiveSource


class ClockedReader:
    """The synthetic host, one tick per read, timestamped now."""

    def __init__(self) -> None:
        self.reads = 0
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def read(self):  # type: ignore[no-untyped-def]
        with self.lock:
            i = self.reads
            self.reads += 1
        self.threads.add(threading.current_thread().name)
        return dataclasses.replace(synthetic(i, cpus=2), t_mono=time.monotonic(), t_wall=time.time())


def wait_until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


async def test_a_stuck_ui_never_delays_sampling_and_the_backlog_is_one_frame():
    reader = ClockedReader()
    src = LiveSource(LIVE, None, interval=0.1, reader=reader)
    app = NettopApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.frames >= 2:
                break
            await pilot.pause(0.05)
        assert app.frames >= 2
        frames, reads = app.frames, reader.reads
        wait_until(lambda: reader.reads >= reads + 10)  # the UI loop is blocked all this time
        src.paused = True  # stop producing, so what follows counts only the backlog
        assert app.frames == frames  # nothing was drawn while the UI was stuck
        assert src._mailbox.superseded >= 8  # ...and the samples did not queue up
        await pilot.pause()
        await pilot.pause()
        # ten samples became one frame (two if a read was in flight when we paused)
        assert app.frames in (frames + 1, frames + 2)
        assert app.latest is src.timeline.latest()
        assert reader.threads == {"nettop-sampler"}
        paused_at = reader.reads
        await pilot.pause(0.35)
        assert reader.reads <= paused_at + 1
        await pilot.press("space")
        assert not src._sampler.paused
        await pilot.press("plus")
        assert src._sampler.interval == 0.2
    assert src._sampler is None  # stopped with the app
