"""The whole sampler on generated big hosts read through --root: every figure is known."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from nettop.collectors.host import HostReader
from nettop.model.rates import compute_rates
from nettop.output.snapshot_json import build_document
from nettop.kernel.sysroot import SysRoot
from treegen import LINK_RX_BYTES_RATE, NET_RX_RATE, NIC_IRQ_RATE, generate_tree


def two_samples(tmp_path, **kw):
    t0 = generate_tree(tmp_path / "t0", step=0, **kw)
    t1 = generate_tree(tmp_path / "t1", step=1, **kw)
    with HostReader(SysRoot(str(t0))) as r0, HostReader(SysRoot(str(t1))) as r1:
        a = r0.read()
        b = r1.read()
    b = dataclasses.replace(b, t_mono=a.t_mono + 1.0)  # the tree's second is exactly one
    return a, b, compute_rates(a, b)


@pytest.mark.parametrize("cpus,irqs,queues,offline", [
    (256, 4096, 64, ()),
    (16, 200, 8, (3, 9)),
])
def test_generated_host_gives_the_rates_it_was_built_with(tmp_path, cpus, irqs, queues, offline):
    a, b, rates = two_samples(tmp_path, cpus=cpus, irqs=irqs, queues=queues, offline=offline)
    online = [c for c in range(cpus) if c not in offline]
    assert b.online_cpus == tuple(online)
    assert not b.problems, b.problems
    doc = build_document(a, b, rates)
    # CPUs: 100 ticks a second, 15 softirq and 5 irq; offline ones are not invented
    assert [c["cpu"] for c in doc["cpus"]] == online
    for c in doc["cpus"]:
        assert c["softirq_pct"] == 15.0 and c["irq_pct"] == 5.0
        assert c["net_rx_per_s"] == NET_RX_RATE
        assert c["softnet_processed_per_s"] == NET_RX_RATE * 30
        assert c["time_squeeze_per_s"] == 3
    eth0 = doc["interfaces"]["eth0"]
    assert eth0["driver"] == "mlx5_core" and eth0["numa_node"] == 1 and eth0["bus_info"] == "0000:81:00.0"
    assert eth0["rx_bytes_per_s"] == LINK_RX_BYTES_RATE
    assert eth0["queue_map_source"] == "driver-naming"
    qs = eth0["queues"]
    assert [(q["kind"], q["index"]) for q in qs] == [("combined", i) for i in range(queues)]
    for i, q in enumerate(qs):
        assert q["irqs"] == [24 + i]
        # every queue IRQ fires NIC_IRQ_RATE/s on its CPU, including the ones that wrapped
        assert q["irq_per_s"] == NIC_IRQ_RATE
        assert q["effective_affinity"] == [online[i % len(online)]]
        assert q["bql"]["limit"] == 30280 + i
        assert q["rps_cpus"].replace(",", "").strip("0") == ""
    assert eth0["other_irqs"] == [24 + queues]


def test_snapshot_json_on_a_captured_tree_from_the_cli(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=8, irqs=64, queues=4)
    p = subprocess.run([sys.executable, "-m", "nettop.cli", "snapshot", "--json", "--interval", "0.1",
                        "--root", str(tree)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["host"] == "gen8" and doc["kernel"] == "6.1.0-generated-amd64"
    # one capture: since-boot averages (total / uptime), not the zeros of one tree read twice
    assert doc["rates_basis"] == "since_boot" and doc["interval_s"] == 86400.0
    assert doc["interfaces"]["eth0"]["rx_bytes_per_s"] == round(10**12 / 86400, 3)
    assert len(doc["interfaces"]["eth0"]["queues"]) == 4


def test_unreadable_and_missing_files_are_one_line_problems_and_the_rest_is_read(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=4, irqs=32, queues=2)
    (tree / "proc/net/softnet_stat").unlink()
    (tree / "proc/softirqs").write_text("garbage\n")
    with HostReader(SysRoot(str(tree))) as r:
        snap = r.read()
    msgs = [p.message for p in snap.problems]
    assert any("softnet_stat" in m for m in msgs), msgs
    assert any("softirqs" in m for m in msgs), msgs
    assert all("\n" not in m for m in msgs)
    assert snap.links["eth0"].rx_bytes > 0 and snap.cpu_times  # the rest still read
