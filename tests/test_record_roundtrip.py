"""Record the real veth lab under iperf3, replay it, and get the live figures back."""

from __future__ import annotations

import threading

from nettop.collectors.host import HostReader
from nettop.model.rates import compute_rates
from nettop.record.recorder import Recorder
from nettop.record.replay import ReplaySource
from nettop.record.store import Reader


def test_replayed_rates_equal_live_rates_of_the_recorded_snapshots(veth_lab, tmp_path):
    path = str(tmp_path / "lab.nettop")
    veth_lab.iperf3_server()
    client = veth_lab.iperf3_client(6)
    seen = []
    with HostReader(ifnames=[veth_lab.host_if]) as reader:
        rec = Recorder(reader, path, interval=0.5, duration=4.0, meta={"host": reader.host},
                       out=open("/dev/null", "w"), on_snapshot=seen.append)
        result = rec.run()
    client.kill()
    assert result.ok, result.reason
    assert len(seen) >= 6

    live = [compute_rates(a, b) for a, b in zip(seen, seen[1:])]
    # the lab really moved data: the comparison below is not one of zeros
    assert max(r.links[veth_lab.host_if].tx_bytes_per_s or 0 for r in live) > 1e6

    woke = threading.Event()
    src = ReplaySource(path, speed=60)
    src.paused = True
    src.start(woke.set)
    points = [src.timeline.latest()]
    while not src.at_end:
        points.append(src.step(1))
    src.stop()
    assert [p.snapshot for p in points] == seen
    assert points[0].rates is None
    assert [p.rates for p in points[1:]] == live
    assert src.mode == "replay" and src.is_root is False


def test_reader_gives_back_every_snapshot_unchanged(veth_lab, tmp_path):
    path = str(tmp_path / "lab.nettop")
    seen = []
    with HostReader(ifnames=[veth_lab.host_if]) as reader:
        Recorder(reader, path, interval=0.2, duration=1.5, out=open("/dev/null", "w"),
                 on_snapshot=seen.append).run()
    r = Reader(path)
    assert list(r.snapshots()) == seen
    assert r.warnings == []
