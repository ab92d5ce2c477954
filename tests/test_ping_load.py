"""Latency under load: the prober sees a bloated queue fill, and the fix drain it.

GIVEN a 50 Mbit/s token bucket with a 4 MB queue on the host end of the lab pair
WHEN iperf3 fills it from the root namespace towards the peer
THEN the RTT the prober measures to the peer rises far above idle (the probes wait
     behind the bulk data), replies that come back after the timeout are counted as
     lost and never as samples,
AND when the queue limit shrinks to 30 KB the RTT falls back by more than 3x.
Measured on this VM: idle p50 ~0.03 ms, loaded ~80 ms, small queue ~4 ms.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from nettop.ping import Prober


def tbf(dev: str, limit: str) -> None:
    subprocess.run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "50mbit",
                    "burst", "32kb", "limit", limit], check=True, capture_output=True)


@pytest.mark.skipif(not shutil.which("iperf3"), reason="needs iperf3")
def test_bufferbloat_raises_rtt_and_a_small_queue_brings_it_back(veth_lab):
    peer = veth_lab.peer_ip
    with Prober([peer], interval_s=0.02, timeout_s=3.0) as p, \
            Prober([peer], interval_s=0.02, timeout_s=0.03) as impatient:
        time.sleep(0.3)
        p.take()
        time.sleep(1.5)
        idle = p.take()[peer]

        tbf(veth_lab.host_if, "4mb")
        veth_lab.iperf3_server()
        client = veth_lab.iperf3_client(10, extra=["-C", "cubic", "-P", "4"])
        time.sleep(2.0)
        p.take(), impatient.take()
        time.sleep(2.0)
        loaded = p.take()[peer]
        loaded_impatient = impatient.take()[peer]
        late = impatient.trackers()[peer].late

        tbf(veth_lab.host_if, "30kb")
        time.sleep(1.0)
        p.take()
        time.sleep(2.0)
        fixed = p.take()[peer]
        assert client.poll() is None, "iperf3 ended before the measurement did"

    assert idle.received == idle.sent > 50
    assert loaded.received > 50 and fixed.received > 50
    assert loaded.rtt_p50_ms > 5 * idle.rtt_p50_ms and loaded.rtt_p50_ms > 10, (idle, loaded)
    assert fixed.rtt_p50_ms < loaded.rtt_p50_ms / 3, (loaded, fixed)
    # Replies slower than the 30 ms timeout: lost, counted as late, never as samples.
    assert loaded_impatient.loss_pct is not None and loaded_impatient.loss_pct > 50
    assert late > 0
    assert loaded_impatient.rtt_max_ms is None or loaded_impatient.rtt_max_ms <= 30
