"""`nettop capture --twice 10` on the veth lab under iperf3: the rates between the two
captures match what the live sampler measured over the same window (issue 27)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from nettop.collectors.host import HostReader
from nettop.model.rates import compute_rates

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="lab tests need root")
ROOT = Path(__file__).resolve().parent.parent
NETTOP = [sys.executable, "-m", "nettop.cli"]


@pytest.fixture
def lab():
    import lab as _lab

    reason = _lab.can_build_lab()
    if reason:
        pytest.skip(reason)
    with _lab.veth_lab(mtu=9000) as lab:
        yield lab


def test_two_captures_ten_seconds_apart_give_the_live_rates_within_2_percent(lab, tmp_path):
    out = tmp_path / "c.tar.gz"
    lab.iperf3_server()
    client = lab.iperf3_client(16, extra=["-b", "800M"])  # steady, below what 2 busy cores give
    time.sleep(1.5)
    cap = subprocess.Popen([*NETTOP, "capture", str(out), "--twice", "10"], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live = []
    with HostReader(ifnames=[lab.host_if]) as reader:
        while cap.poll() is None:
            live.append(reader.read())
            time.sleep(0.1)
        live.append(reader.read())
    _, err = cap.communicate()
    assert cap.returncode == 0, err
    client.communicate(timeout=30)

    with tarfile.open(out) as tar:
        meta = json.load(tar.extractfile("nettop-capture/capture.json"))  # type: ignore[arg-type]
        names = tar.getnames()
    assert len(meta["captures"]) == 2
    assert not any(n.endswith(("/address", "/broadcast", "/perm_addr")) for n in names)
    ups = [c["uptime_s"] for c in meta["captures"]]

    p = subprocess.run([*NETTOP, "snapshot", "--json", "--root", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["rates_basis"] == "between_captures"
    assert doc["interval_s"] == pytest.approx(ups[1] - ups[0], abs=0.02)
    got = doc["interfaces"][lab.host_if]

    # the live samples nearest to each capture's own uptime
    a = min(live, key=lambda s: abs(s.uptime_s - ups[0]))
    b = min(live, key=lambda s: abs(s.uptime_s - ups[1]))
    assert abs(a.uptime_s - ups[0]) < 0.3 and abs(b.uptime_s - ups[1]) < 0.3
    want = compute_rates(a, b).links[lab.host_if]
    assert want.tx_bytes_per_s > 20e6, "iperf3 did not load the veth"
    for f in ("tx_bytes_per_s", "tx_packets_per_s", "rx_bytes_per_s", "rx_packets_per_s"):
        assert got[f] == pytest.approx(getattr(want, f), rel=0.02), f
