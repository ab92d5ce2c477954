"""Each rule's threshold edges, on hosts built from rates (pure: no kernel, no clock).

GIVEN a host just below a rule's threshold THEN no finding; AT the threshold THEN the
finding, with the figures and the fix it should carry.
"""

from __future__ import annotations

import pytest

from doctor_host import FakeHost, with_
from nettop.doctor import DoctorConfig, Severity, evaluate
from nettop.doctor import thresholds as T
from nettop.doctor.engine import worst


def rules(host: FakeHost, config: DoctorConfig = DoctorConfig()) -> dict[str, object]:
    return {f.id: f for f in evaluate(host.points(), config)}


def test_a_tidy_host_has_no_finding():
    assert rules(FakeHost()) == {}


# 1 irq-concentration ------------------------------------------------------------------

def _concentrated(share: float, load: float = 60.0, idle_peer: float = 90.0) -> FakeHost:
    total = 10_000.0
    return FakeHost(
        irqs={30: {0: total * share, 1: total * (1 - share)}, 31: {}},
        queue_irqs={"eth0": {0: 30, 1: 31}},
        load={0: (load - 10, 10.0, 100 - load), 1: (0, 0, idle_peer), 2: (0, 0, idle_peer), 3: (0, 0, idle_peer)})


def test_irq_concentration_edges():
    assert "irq-concentration:eth0" not in rules(_concentrated(T.IRQ_SHARE - 0.01))
    f = rules(_concentrated(T.IRQ_SHARE))["irq-concentration:eth0"]
    assert f.figures["cpu"] == 0 and f.fix == ("nettop set irq eth0 spread 0-3",)
    assert "irq-concentration:eth0" not in rules(_concentrated(0.9, load=T.CPU_LOADED_PCT - 1))
    assert "irq-concentration:eth0" not in rules(_concentrated(0.9, idle_peer=T.CPU_IDLE_PCT - 1))


def test_irq_concentration_keeps_to_the_cpus_node():
    host = with_(_concentrated(0.9), cpu_nodes={0: 0, 1: 0, 2: 1, 3: 1})
    assert rules(host)["irq-concentration:eth0"].fix == ("nettop set irq eth0 spread 0-1",)


# 2 numa-locality ----------------------------------------------------------------------

def test_numa_locality_names_remote_irqs_and_rps():
    base = FakeHost(queue_irqs={"eth0": {0: 30, 1: 31}}, local_cpus={"eth0": (2, 3)},
                    cpu_nodes={0: 0, 1: 0, 2: 1, 3: 1}, affinity={30: (2,), 31: (3,)}, rps={"eth0": ["c", "0"]})
    assert rules(base) == {}
    f = rules(with_(base, affinity={30: (2,), 31: (1,)}))["numa-locality:eth0"]
    assert f.figures["far_irqs"] == 1 and f.fix == ("nettop set irq eth0 numa",)
    f = rules(with_(base, rps={"eth0": ["3", "0"]}))["numa-locality:eth0"]
    assert f.fix == ("nettop set rps eth0 all 2-3",)
    # one node only: nothing to say
    assert rules(with_(base, affinity={30: (0,), 31: (1,)}, local_cpus={}, cpu_nodes={})) == {}


def test_numa_locality_walks_a_nics_queues_again_only_when_its_settings_change(monkeypatch):
    """GIVEN a NIC whose XPS masks leave its node, WHEN the same queue settings are judged
    tick after tick THEN they are walked once and the fixes are the same; WHEN one mask
    moves to the node (a new QueueConfig tuple, as the reader makes) THEN the finding follows."""
    import dataclasses

    from nettop.doctor.rules import cpu_irq

    host = FakeHost(queue_irqs={"eth0": {0: 30, 1: 31}}, local_cpus={"eth0": (2, 3)},
                    cpu_nodes={0: 0, 1: 0, 2: 1, 3: 1}, affinity={30: (2,), 31: (3,)},
                    tx_queues={"eth0": ["1", "2"]})
    points = host.points()
    walked: list[str | None] = []
    mask_cpus = cpu_irq.mask_cpus

    def counting(mask):
        walked.append(mask)
        return mask_cpus(mask)

    monkeypatch.setattr(cpu_irq, "mask_cpus", counting)
    first = {f.id: f for f in evaluate(points)}["numa-locality:eth0"]
    assert first.fix == ("nettop set xps eth0 0 2", "nettop set xps eth0 1 3") and walked
    walked.clear()
    again = {f.id: f for f in evaluate(points)}["numa-locality:eth0"]
    assert again == first and walked == []
    snap = points[-1].snapshot
    dev = snap.devices["eth0"]
    moved = dataclasses.replace(dev, queues=tuple(
        dataclasses.replace(q, xps_cpus="4") if q.kind == "tx" and q.index == 0 else q for q in dev.queues))
    later = dataclasses.replace(points[-1], snapshot=dataclasses.replace(snap, devices={"eth0": moved}))
    f = {f.id: f for f in evaluate([*points[:-1], later])}["numa-locality:eth0"]
    assert f.figures["far_xps"] == 1 and f.fix == ("nettop set xps eth0 1 3",) and walked


def test_a_nics_queue_irqs_are_kept_per_queue_map_and_handed_out_as_a_new_list():
    """The rules ask for each NIC's queue IRQs several times a tick: the answer is kept for
    its QueueMap (the same object until its queues change), each caller gets its own
    list, and a new QueueMap is asked afresh."""
    import dataclasses

    from nettop.doctor.rules import common
    from nettop.model.snapshot import QueueIrqs, QueueMap

    snap = FakeHost(queue_irqs={"eth0": {0: 31, 1: 30}}).points()[-1].snapshot
    first = common.queue_irqs(snap, "eth0")
    assert first == [30, 31]
    first.append(99)  # a caller's own list
    assert common.queue_irqs(snap, "eth0") == [30, 31] and common.queue_irqs(snap, "eth0", ("tx",)) == []
    qm = snap.queue_maps["eth0"]
    assert [k for k, v in common._QUEUE_IRQS.items() if v[0] is qm] == [(id(qm), ("rx", "tx", "combined")),
                                                                        (id(qm), ("tx",))]
    moved = dataclasses.replace(snap, queue_maps={"eth0": QueueMap("eth0", (QueueIrqs("rx", 0, (40, 30)),), "none")})
    assert common.queue_irqs(moved, "eth0") == [30, 40] and common.queue_irqs(snap, "eth0") == [30, 31]


# 3 irqbalance -------------------------------------------------------------------------

def test_irqbalance_over_a_manual_spread_and_no_irqbalance_with_all_on_cpu0():
    spread = FakeHost(queue_irqs={"eth0": {0: 30, 1: 31}}, affinity={30: (1,), 31: (2,)})
    assert rules(spread) == {}
    f = rules(with_(spread, irqbalance=True))["irqbalance:eth0"]
    assert "irqbalance" in (f.command or "")
    # irqbalance over IRQs that share CPUs: its own placement, not a manual one
    assert rules(with_(spread, irqbalance=True, affinity={30: (1, 2), 31: (1, 2)})) == {}
    f = rules(with_(spread, affinity={30: (0,), 31: (0,)}))["irqbalance:eth0"]
    assert f.fix == ("nettop set irq eth0 spread 0-3",)
    assert rules(with_(spread, affinity={30: (0,), 31: (1,)})) == {}


# 4 softnet-drops, 5 time-squeeze --------------------------------------------------------

def test_softnet_drops_edges_and_fix_doubles_the_backlog():
    host = FakeHost(sysctls={"net.core.netdev_max_backlog": "1000"})
    assert rules(with_(host, dropped={1: T.DROPS_PER_S - 0.5})) == {}
    f = rules(with_(host, dropped={1: T.DROPS_PER_S}))["softnet-drops:host"]
    assert f.severity is Severity.CRIT and f.figures["cpu"] == 1
    assert f.fix == ("nettop set sysctl net.core.netdev_max_backlog 2048",)
    f = rules(with_(host, sysctls={"net.core.netdev_max_backlog": "5000"}, dropped={1: 50}))["softnet-drops:host"]
    assert f.fix == ("nettop set sysctl net.core.netdev_max_backlog 10000",)


def test_softnet_drops_says_rps_imbalance_when_one_cpu_takes_the_rps_packets():
    host = FakeHost(dropped={2: 100}, received_rps={2: 9000, 3: 1000})
    assert "RPS" in rules(host)["softnet-drops:host"].title
    host = with_(host, received_rps={2: 5000, 3: 5000})
    assert "RPS" not in rules(host)["softnet-drops:host"].title


def test_time_squeeze_edges_and_fix_raises_both_budgets():
    host = FakeHost(sysctls={"net.core.netdev_budget": "300", "net.core.netdev_budget_usecs": "2000"})
    assert rules(with_(host, squeeze={0: T.SQUEEZE_PER_S - 0.5})) == {}
    f = rules(with_(host, squeeze={0: T.SQUEEZE_PER_S}))["time-squeeze:host"]
    assert f.fix == ("nettop set sysctl net.core.netdev_budget 600",
                     "nettop set sysctl net.core.netdev_budget_usecs 4000")


# 6 rx-ring ----------------------------------------------------------------------------

def test_rx_ring_offers_the_maximum_ring():
    host = FakeHost(devices={"eth0": {"rings": {"rx": 512, "rx-max": 4096}}})
    assert rules(with_(host, missed={"eth0": T.MISSED_PER_S - 0.5})) == {}
    f = rules(with_(host, missed={"eth0": T.MISSED_PER_S}))["rx-ring:eth0"]
    assert f.fix == ("nettop set rings eth0 rx=4096",) and f.figures["rx_ring_max"] == 4096
    f = rules(with_(host, missed={"eth0": 10}, devices={"eth0": {"rings": {"rx": 4096, "rx-max": 4096}}}))["rx-ring:eth0"]
    assert f.fix == () and "maximum" in (f.command or "")


# 7 rss-imbalance ----------------------------------------------------------------------

def test_rss_imbalance_edges():
    def host(share: float, total: float = 20_000.0) -> FakeHost:
        return FakeHost(rx_queue_pps={"eth0": {0: total * share, 1: total * (1 - share)}})
    assert rules(host(T.RSS_SHARE - 0.01)) == {}
    f = rules(host(T.RSS_SHARE))["rss-imbalance:eth0"]
    assert f.fix == ("nettop set rfs eth0 32768",) and "ntuple" in (f.command or "") + f.why
    assert rules(host(0.99, total=T.BUSY_PPS - 1)) == {}


# 8 few-rx-queues ----------------------------------------------------------------------

def test_few_rx_queues_prefers_more_channels_then_rps():
    host = FakeHost(cpus=tuple(range(8)), queue_irqs={"eth0": {0: 30, 1: 31}}, irqs={30: {}, 31: {}},
                    link_pps={"eth0": (50_000, 0)}, net_rx={0: 5000, 1: 4000, 5: 100},
                    load={0: (70, 5, 0), 1: (60, 5, 10)},
                    devices={"eth0": {"channels": {"combined": 2, "combined-max": 16}}})
    f = rules(host)["few-rx-queues:eth0"]
    assert f.fix == ("nettop set channels eth0 combined=8",)
    f = rules(with_(host, devices={"eth0": {"channels": {"combined": 2, "combined-max": 2}}}))["few-rx-queues:eth0"]
    assert f.fix == ("nettop set rps eth0 all 0-7",)
    # NET_RX already spread (below the share), or the CPU not loaded: nothing
    assert "few-rx-queues:eth0" not in rules(with_(host, net_rx={0: 5000, 1: 4000, 5: 2000}))
    assert "few-rx-queues:eth0" not in rules(with_(host, load={0: (T.CPU_LOADED_PCT - 1, 0, 40)}))


# 9 bufferbloat ------------------------------------------------------------------------

def test_bufferbloat_edges():
    host = FakeHost(rtt={"peer": (0.5, 0.5 * T.BLOAT_RATIO)}, qdiscs={"eth0": [("tbf", T.BLOAT_BACKLOG_PKTS)]})
    f = rules(host)["bufferbloat:eth0"]
    assert f.fix[0] == "nettop set qdisc eth0 fq_codel" and f.figures["ratio"] == pytest.approx(10)
    assert rules(with_(host, rtt={"peer": (0.5, 0.5 * T.BLOAT_RATIO - 0.01)})) == {}
    assert rules(with_(host, qdiscs={"eth0": [("tbf", T.BLOAT_BACKLOG_PKTS - 1)]})) == {}
    assert rules(with_(host, qdiscs={"eth0": [("fq_codel", 500)]})) == {}
    # with TSO a few 64 KB packets are a standing queue too: ten frames' worth of bytes
    assert "bufferbloat:eth0" in rules(with_(host, qdiscs={"eth0": [("tbf", 2, T.BLOAT_BACKLOG_BYTES)]}))
    assert rules(with_(host, qdiscs={"eth0": [("tbf", 2, T.BLOAT_BACKLOG_BYTES - 1)]})) == {}
    # a tenfold rise of a tiny RTT is not bufferbloat: it must add a millisecond
    assert rules(with_(host, rtt={"peer": (0.01, 0.5)})) == {}


# 10 coalescing ------------------------------------------------------------------------

def test_coalescing_high_interrupt_rate_offers_adaptive_moderation():
    host = FakeHost(queue_irqs={"eth0": {0: 30}}, irqs={30: {1: T.IRQ_HIGH_PER_S}},
                    load={1: (20, T.HARDIRQ_HIGH_PCT, 50)},
                    devices={"eth0": {"coalesce": {"adaptive-rx": 0, "rx-usecs": 3}}})
    assert rules(host)["coalescing:eth0"].fix == ("nettop set coalesce eth0 adaptive-rx=on",)
    assert rules(with_(host, irqs={30: {1: T.IRQ_HIGH_PER_S - 1}})) == {}
    assert rules(with_(host, load={1: (20, T.HARDIRQ_HIGH_PCT - 1, 50)})) == {}


def test_coalescing_with_a_latency_target_lowers_rx_usecs():
    host = FakeHost(devices={"eth0": {"coalesce": {"adaptive-rx": 1, "rx-usecs": 50}}})
    assert rules(host) == {}
    f = rules(host, DoctorConfig(latency_target_ms=0.2))["coalescing:eth0"]
    assert f.fix == ("nettop set coalesce eth0 adaptive-rx=off rx-usecs=10",)
    host = with_(host, devices={"eth0": {"coalesce": {"adaptive-rx": 0, "rx-usecs": T.LOW_LATENCY_RX_USECS}}})
    assert rules(host, DoctorConfig(latency_target_ms=0.2)) == {}


# 11 offloads-off ----------------------------------------------------------------------

def test_offloads_off_on_a_busy_nic_only():
    host = FakeHost(features={"eth0": {"gro": False, "gso": True, "tso": True}}, link_pps={"eth0": (T.BUSY_PPS, 0)})
    assert rules(host)["offloads-off:eth0"].fix == ("nettop set features eth0 gro=on",)
    assert rules(with_(host, link_pps={"eth0": (T.BUSY_PPS - 1, 0)})) == {}
    assert rules(with_(host, features={"eth0": {"gro": True, "gso": True, "tso": True}})) == {}


# 12 power-latency ---------------------------------------------------------------------

def test_power_latency_needs_a_latency_target_and_is_read_only():
    host = FakeHost(governors={"powersave": 4}, idle_states=(("POLL", 0), ("C1", 2), ("C6", 133)))
    assert rules(host) == {}
    f = rules(host, DoctorConfig(latency_target_ms=1))["power-latency:host"]
    assert f.fix == () and "cpupower frequency-set -g performance" in (f.command or "")
    assert "idle-set" in (f.command or "")
    tidy = with_(host, governors={"performance": 4}, idle_states=(("POLL", 0), ("C1", T.DEEP_CSTATE_US)))
    assert rules(tidy, DoctorConfig(latency_target_ms=1)) == {}


# 13 no-xps ----------------------------------------------------------------------------

def test_no_xps_on_a_sending_multiqueue_nic():
    host = FakeHost(tx_queues={"eth0": ["0", "0", "0", "0"]}, link_pps={"eth0": (0, T.XPS_TX_PPS)})
    f = rules(host)["no-xps:eth0"]
    assert f.fix == ("nettop set xps eth0 0 0-0",) + tuple(f"nettop set xps eth0 {q} {q}" for q in range(1, 4))
    assert rules(with_(host, link_pps={"eth0": (0, T.XPS_TX_PPS - 1)})) == {}
    assert rules(with_(host, tx_queues={"eth0": ["1", "2", "4", "8"]})) == {}
    assert rules(with_(host, tx_queues={"eth0": ["0"]})) == {}


# 14 tcp-buffers -----------------------------------------------------------------------

def test_tcp_buffers_below_the_bdp():
    # 10 Gbit/s x 4 ms = 5 000 000 bytes
    host = FakeHost(links={"eth0": {"speed_mbps": 10_000}}, rtt={"peer": (4.0, 4.0)},
                    sysctls={"net.ipv4.tcp_rmem": "4096 131072 4999999", "net.ipv4.tcp_wmem": "4096 16384 5000000"})
    f = rules(host)["tcp-buffers:host"]
    assert f.figures["bdp_bytes"] == 5_000_000
    assert f.fix == ("nettop set sysctl net.ipv4.tcp_rmem 4096 131072 16777216",)
    assert rules(with_(host, sysctls={"net.ipv4.tcp_rmem": "4096 131072 5000000"})) == {}


# 15 conntrack -------------------------------------------------------------------------

def test_conntrack_fill_edges():
    assert rules(FakeHost(conntrack=(79, 100))) == {}
    assert rules(FakeHost(conntrack=(80, 100)))["conntrack:host"].severity is Severity.WARN
    assert rules(FakeHost(conntrack=(95, 100)))["conntrack:host"].severity is Severity.CRIT


# 16 drop-reasons ----------------------------------------------------------------------

def test_drop_reasons_in_words():
    f = rules(FakeHost(drops={"NO_SOCKET": 40, "SOCKET_RCVBUFF": 5, "TCP_CSUM": 0}))["drop-reasons:host"]
    assert "no socket listens" in f.title and "receive buffer" in f.title and "TCP_CSUM" not in str(f.evidence)
    assert rules(FakeHost(drops={"NO_SOCKET": T.DROP_REASON_PER_S - 0.5})) == {}


# the engine -----------------------------------------------------------------------------

def test_findings_are_worst_first_and_the_exit_code_follows_the_worst():
    host = FakeHost(dropped={0: 10}, conntrack=(85, 100), drops={"NO_SOCKET": 5})
    found = evaluate(host.points())
    assert [f.severity for f in found] == sorted((f.severity for f in found), reverse=True)
    assert worst(found) == 3 and worst([]) == 0


def test_one_sample_gives_only_the_static_rules():
    host = FakeHost(conntrack=(99, 100), dropped={0: 10})
    found = evaluate(host.points()[:1])
    assert [f.id for f in found] == ["conntrack:host"]


def test_nics_are_worked_out_once_per_links_mapping_and_per_cpu_columns_in_c():
    """The rules' shared per-tick answers (rules/common.nics, softnet._positive) are
    those of the plain expressions: nics() of a links mapping is kept by its identity
    (ten rules ask for one snapshot's every tick) and a new mapping is worked out
    afresh; a softnet column's positive rates keep the CPUs' order and float values."""
    import math
    import types

    from nettop.doctor.rules import common, softnet

    def link(aggregate: bool = False) -> object:
        return types.SimpleNamespace(is_aggregate=aggregate)

    links = {"eth1": link(), "lo": link(), "bond0": link(True), "eth0": link()}
    snap = types.SimpleNamespace(links=links)
    assert common.nics(snap) == ["eth0", "eth1"]
    kept = common._NICS[id(links)]
    assert kept[0] is links and common.nics(snap) == ["eth0", "eth1"] and common._NICS[id(links)] is kept
    common.nics(snap).append("x")  # a caller's list is its own
    assert common.nics(snap) == ["eth0", "eth1"]
    assert common.nics(types.SimpleNamespace(links={**links, "eth2": link()})) == ["eth0", "eth1", "eth2"]
    sn = {c: (1.0, v, -v, 0.0) for c, v in zip(range(9, 0, -1), (0.0, 2.5, -0.0, -1.0, 1e-300, math.nan, 7.0, 0.0, 3.0))}
    for k in range(4):
        want = {c: v[k] for c, v in sn.items() if v[k] > 0}
        got = softnet._positive(sn, k)
        assert list(got.items()) == list(want.items())
