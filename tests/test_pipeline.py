"""The one headless live pipeline: every consumer gets every sample, on the sampler thread.

The live view, `nettop record`, `nettop serve` and the text report share `LivePipeline`;
these check what each relies on with the real host's reader (loopback only): listeners
see every point even when the mailbox coalesces them, the headless recorder writes each
tuning-journal entry and finding once with the sample it arrived with, and a pipeline
handed a reader leaves that reader open.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Callable

import pytest

from nettop.collectors.host import HostReader
from nettop.model.timeline import Point
from nettop.pipeline import LivePipeline
from nettop.record.recorder import Recorder
from nettop.record.store import Reader

pytestmark = pytest.mark.live


def _until(cond: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_listeners_get_every_point_while_the_mailbox_keeps_the_newest():
    with HostReader(ifnames=["lo"]) as reader:
        pipe = LivePipeline(reader=reader, interval=0.1, doctor=False)
        seen: list[Point] = []
        threads: set[str] = set()

        def listen(point: Point) -> None:
            threads.add(threading.current_thread().name)
            seen.append(point)

        pipe.listeners.append(listen)
        woken = threading.Event()
        pipe.start(woken.set)
        try:
            assert woken.wait(10)
            assert _until(lambda: len(seen) >= 5)  # the consumer never took one meanwhile
        finally:
            pipe.stop()
        assert pipe.doctor is None and pipe.tap is None and pipe.probe_switch is None
        assert threads == {"nettop-sampler"}
        assert [p.snapshot for p in seen] == [p.snapshot for p in pipe.timeline.points()][-len(seen):]
        assert pipe.superseded >= len(seen) - 2  # the mailbox kept only the newest of them
        assert pipe.take() is seen[-1]
        reader.read()  # the caller's reader is still open after stop


def test_the_headless_recorder_writes_each_journal_entry_once_with_its_sample(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_text(json.dumps({"op": "begin", "id": 1, "t": time.time(), "action": "set",
                                   "text": "before the recording"}) + "\n")
    path = str(tmp_path / "rec.nettop")
    with HostReader(ifnames=["lo"]) as reader:
        rec = Recorder(reader, path, interval=0.2, duration=30, journal=str(journal), out=open("/dev/null", "w"))
        done: list = []
        t = threading.Thread(target=lambda: done.append(rec.run()))
        t.start()
        try:
            assert _until(lambda: rec.timeline.latest() is not None)
            with journal.open("a") as f:
                f.write(json.dumps({"op": "begin", "id": 2, "t": time.time(), "action": "set",
                                    "text": "rps_cpus lo 0 -> 1"}) + "\n")
                f.write(json.dumps({"op": "end", "id": 2, "t": time.time(), "verified": True,
                                    "after": "1"}) + "\n")
            assert _until(lambda: any(e.kind == "tuning" for e in rec.timeline.events()))
            time.sleep(0.6)  # a few more samples after it
        finally:
            rec.request_stop()
            t.join(10)
    assert done and done[0].ok, done
    r = Reader(path)
    tuning = [e.text for e in r.events() if e.kind == "tuning"]
    assert tuning == ["#2 set: rps_cpus lo 0 -> 1", "#2 done (verified), now '1'"]  # once each, not the old one
    first = r.index[0].t_wall
    assert all(e.t_wall >= first for e in r.events() if e.kind == "tuning")
    assert len(r) == done[0].samples >= 3
