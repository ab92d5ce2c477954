"""nettop on NICs whose queues raise interrupts: virtio-net with 4 queue pairs and e1000e.

Runs inside the real-driver guest (4 vCPUs, Debian's stock kernel, tests/vm/realdrv.py).
Traffic comes from iperf3 servers in the host's namespace (-R: into the guest). Every
figure is nettop's own (HostReader snapshots, compute_rates, the Tuner and its journal,
the prober) and is compared with an independent reading taken in the same window
(kernel_view.py). The tests run in file order: 3 to 6 change the NICs while the
session's recorder runs, and 7 closes the recording for the host to replay.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import kernel_view as kv
import pytest
from conftest import Recording, effect

from nettop.actions import Tuner
from nettop.actions.cli_set import build_changes
from nettop.cli import build_parser
from nettop.collectors.host import HostReader
from nettop.kernel.sysroot import LIVE
from nettop.model.rates import Rates, compute_rates
from nettop.model.snapshot import Snapshot
from nettop.ping import Prober
from nettop.record.recorder import JournalTail


def apply(tuner: Tuner, line: str) -> None:
    """`nettop set ...` through the real Tuner, as the CLI parses it."""
    words = shlex.split(line)
    res = tuner.apply(tuner.plan(build_changes(build_parser().parse_args(words[1:]))), confirmed=True)
    assert all(r.verified for r in res), res


def reader(nics: kv.Nics, prober: Prober | None = None) -> HostReader:
    return HostReader(LIVE, [nics.virtio, nics.e1000e], prober=prober)


def window(r: HostReader, seconds: float) -> tuple[Snapshot, Snapshot, Rates]:
    a = r.read()
    time.sleep(seconds)
    b = r.read()
    return a, b, compute_rates(a, b)


def delta(i0: dict, i1: dict, irq: int) -> tuple[int, ...]:
    return tuple(y - x for x, y in zip(i0[irq][1], i1[irq][1]))


def finish(p: subprocess.Popen[str]) -> dict:
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, f"iperf3 failed: {err or out[-400:]}"
    return json.loads(out)


def test_1_queue_irq_chain_equals_proc_interrupts_and_affinity(nics):
    with reader(nics) as r:
        s = r.read()
    table = kv.interrupts()
    for ifname, nqueues in ((nics.virtio, 4), (nics.e1000e, 1)):
        want = kv.queue_irqs(ifname)
        assert sorted(i for k, i in want if k == "rx") == list(range(nqueues)), f"{ifname}: {want}"
        got = {(q.kind, q.index): q.irqs for q in s.queue_maps[ifname].queues}
        assert got == {k: (irq,) for k, irq in want.items()}, ifname
        for irq in want.values():
            requested, effective = kv.affinity(irq)
            assert s.irq_affinity[irq].affinity == requested
            assert s.irq_affinity[irq].effective == effective and len(effective) == 1
            assert s.interrupts.irqs[irq].name == table[irq][0]
    # e1000e's third vector (link and other causes) is the device's, not a queue's
    other = kv.device_irqs(nics.e1000e) - set(kv.queue_irqs(nics.e1000e).values())
    assert set(s.queue_maps[nics.e1000e].other_irqs) == other and len(other) == 1


def test_1b_sysfs_per_cpu_counts_equal_proc_interrupts_under_load(nics):
    """nettop reads the queue IRQs' counts from /sys/kernel/irq/N/per_cpu_count (issue 29),
    not /proc/interrupts: under iperf3 on both NICs, each count it reads lies between two
    reads of /proc/interrupts taken just before and just after it, CPU by CPU, and the
    IRQs did fire in between (equal, not merely both zero)."""
    irqs = sorted(i for n in (nics.virtio, nics.e1000e) for i in kv.queue_irqs(n).values())
    loads = [kv.iperf3(kv.HOST_VIRTIO, kv.PORT_VIRTIO, 4, flows=16),
             kv.iperf3(kv.HOST_E1000E, kv.PORT_E1000E, 4, flows=2)]
    moved = 0
    with reader(nics) as r:
        r.read()  # discovery and the held descriptors, outside the windows
        time.sleep(1)
        for _ in range(5):
            lo = kv.interrupts()
            s = r.read()
            hi = kv.interrupts()
            assert s.irq_source == "/sys/kernel/irq"
            for irq in irqs:
                got = s.interrupts.irqs[irq].counts
                assert got is not None and len(got) == len(lo[irq][1])
                for cpu, (a, x, b) in enumerate(zip(lo[irq][1], got, hi[irq][1])):
                    assert a <= x <= b, (irq, cpu, a, x, b)
                moved += sum(hi[irq][1]) > sum(lo[irq][1])
            time.sleep(0.5)
    for p in loads:
        finish(p)
    assert moved > 0, "no queue IRQ fired inside a window"


def test_2_per_queue_irqs_and_packets_equal_the_kernels_counters(nics):
    irqs = {ifname: kv.queue_irqs(ifname) for ifname in (nics.virtio, nics.e1000e)}
    with reader(nics) as r:
        time.sleep(1)  # quiet: what the last test's traffic left has settled
        i0, e0 = kv.interrupts(), {n: kv.ethtool_stats(n) for n in irqs}
        a = r.read()
        loads = [kv.iperf3(kv.HOST_VIRTIO, kv.PORT_VIRTIO, 4, flows=16),
                 kv.iperf3(kv.HOST_E1000E, kv.PORT_E1000E, 4, flows=2)]
        for p in loads:
            finish(p)
        time.sleep(1)
        b = r.read()
        i1, e1 = kv.interrupts(), {n: kv.ethtool_stats(n) for n in irqs}
    rates = compute_rates(a, b)
    busy = 0
    for ifname, queues in irqs.items():
        for (kind, index), irq in sorted(queues.items()):
            ind = delta(i0, i1, irq)
            per_s = rates.irqs[irq].per_s
            assert per_s is not None
            ours = per_s * rates.elapsed_s
            assert abs(ours - sum(ind)) <= max(2, 0.02 * sum(ind)), (ifname, kind, index, ours, ind)
            for cpu, n in enumerate(ind):
                assert abs(rates.irqs[irq].per_cpu_per_s[cpu] * rates.elapsed_s - n) <= max(2, 0.02 * n)
            busy += kind == "rx" and sum(ind) > 50
            if kind == "rx" and index == 0:
                effect(f"{ifname} {kind}-{index} under iperf3", "irq/s (nettop vs /proc/interrupts)",
                       f"{per_s:.1f}", "", f"{sum(ind) / rates.elapsed_s:.1f}")
    assert busy >= 3, "the traffic reached fewer than 2 virtio rx queues and the e1000e rx queue"
    # virtio: per-queue packets from ethtool -S (this kernel has no netdev qstats)
    stats = b.queue_stats[nics.virtio]
    assert stats.source == "ethtool-stats"
    for q in stats.queues:
        key = f"{q.kind}_queue_{q.index}_packets"
        assert q.packets is not None and abs(q.packets - e1[nics.virtio][key]) <= 2, (key, q.packets)
        got = next(x for x in rates.links[nics.virtio].queues if (x.kind, x.index) == (q.kind, q.index))
        want = e1[nics.virtio][key] - e0[nics.virtio][key]
        assert got.packets_per_s is not None
        assert abs(got.packets_per_s * rates.elapsed_s - want) <= max(2, 0.02 * want), key
    # e1000e has one queue and no per-queue counters: its own rx/tx_packets are the figures
    assert b.queue_stats[nics.e1000e].queues == ()
    link = b.links[nics.e1000e]
    assert abs(link.rx_packets - e1[nics.e1000e]["rx_packets"]) <= 2
    assert abs(link.tx_packets - e1[nics.e1000e]["tx_packets"]) <= 2


def wait_moved(irq: int, cpu: int, timeout: float = 30) -> float:
    """Seconds until the IRQ's effective CPU is `cpu`.

    x86 moves an MSI vector only when it next fires, and that interrupt is still handled
    (and counted) on the old CPU. Under emulated load a queue can go seconds without an
    interrupt (seen: 5 s and more), so a window opened a fixed time after `set irq` can
    catch that last interrupt on the old CPU; the windows below open after the move.
    """
    t0 = time.monotonic()
    while kv.affinity(irq)[1] != (cpu,):
        assert time.monotonic() - t0 < timeout, f"IRQ {irq} still effective on {kv.affinity(irq)[1]} after {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - t0


def irq_window(r: HostReader, irq: int, least: float = 3, most: float = 20, min_irqs: int = 20):
    """nettop's samples and /proc/interrupts around a window holding at least min_irqs of irq
    (or `most` seconds): (rates, the last sample, interrupts before and after, seconds)."""
    s0, i0, t0 = r.read(), kv.interrupts(), time.monotonic()
    while True:
        time.sleep(0.25)
        elapsed = time.monotonic() - t0
        if elapsed >= most or (elapsed >= least and sum(delta(i0, kv.interrupts(), irq)) >= min_irqs):
            break
    s1, i1, t1 = r.read(), kv.interrupts(), time.monotonic()
    return compute_rates(s0, s1), s1, i0, i1, t1 - t0


def test_3_set_irq_moves_a_busy_rx_queue_and_undo_moves_it_back(nics, tuner, recording: Recording):
    # every queue IRQ of the NIC on CPUs 0-2 first: CPU 3 then does no NET_RX work of its own,
    # and moving a busy queue there must show (a CPU already busy with another queue's NAPI
    # polls both queues in the same softirqs, and its NET_RX count need not rise)
    b = 3
    queues = kv.queue_irqs(nics.virtio)
    spread_from = {i: kv.affinity(i)[0] for i in queues.values()}
    apply(tuner, f"nettop set irq {nics.virtio} spread 0-2")
    assert all(kv.affinity(i)[0] != (b,) for i in queues.values())
    load = kv.iperf3(kv.HOST_VIRTIO, kv.PORT_VIRTIO, 120, flows=16)
    try:
        time.sleep(3)
        rx = [irq for (kind, _), irq in queues.items() if kind == "rx"]
        with reader(nics) as r:
            _, s1, before = window(r, 3)
            irq = max(rx, key=lambda q: before.irqs[q].per_s or 0)
            a = kv.affinity(irq)[1][0]
            assert a != b and b in s1.online_cpus
            assert (before.irqs[irq].per_s or 0) > 5, f"IRQ {irq} is not busy: {before.irqs[irq]}"
            apply(tuner, f"nettop set irq {irq} {b}")
            assert kv.affinity(irq)[0] == (b,)
            # the first sample after the change: requested is b at once; effective is what the
            # kernel says, a until the IRQ next fires (read on both sides of nettop's sample)
            k0 = kv.affinity(irq)[1]
            first = r.read()
            k1 = kv.affinity(irq)[1]
            assert first.irq_affinity[irq].affinity == (b,)
            assert first.irq_affinity[irq].effective in (k0, k1)
            wait_moved(irq, b)
            _, _, settling = window(r, 2)
            stray = sum(v for c, v in settling.irqs[irq].per_cpu_per_s.items() if c != b) * settling.elapsed_s
            assert stray <= 1.5, settling.irqs[irq]  # one interrupt already pending on the old vector
            moved, last, i0, i1, secs = irq_window(r, irq)
            assert last.irq_affinity[irq].effective == kv.affinity(irq)[1] == (b,)
            per_cpu = moved.irqs[irq].per_cpu_per_s
            assert per_cpu[b] > 0 and all(v == 0 for c, v in per_cpu.items() if c != b), per_cpu
            assert [c for c, n in enumerate(delta(i0, i1, irq)) if n] == [b]
            rx_b_before, rx_b_after = before.cpus[b].net_rx_per_s or 0, moved.cpus[b].net_rx_per_s or 0
            assert rx_b_after > rx_b_before, (rx_b_before, rx_b_after)
            effect(f"set irq {irq} {a}->{b}", f"IRQ {irq} irq/s on CPU {b}", f"{before.irqs[irq].per_cpu_per_s[b]:.0f}",
                   f"{per_cpu[b]:.0f}", f"{delta(i0, i1, irq)[b] / secs:.0f} (/proc/interrupts)")
            effect(f"set irq {irq} {a}->{b}", f"NET_RX/s on CPU {b}", f"{rx_b_before:.0f}", f"{rx_b_after:.0f}", "")
            tuner.undo()
            assert kv.affinity(irq)[0] == (a,)
            wait_moved(irq, a)
            _, _, settling = window(r, 2)
            stray = sum(v for c, v in settling.irqs[irq].per_cpu_per_s.items() if c != a) * settling.elapsed_s
            assert stray <= 1.5, settling.irqs[irq]
            back, last, i0, i1, _ = irq_window(r, irq)
            per_cpu = back.irqs[irq].per_cpu_per_s
            assert per_cpu[a] > 0 and all(v == 0 for c, v in per_cpu.items() if c != a), per_cpu
            assert [c for c, n in enumerate(delta(i0, i1, irq)) if n] == [a]
            assert last.irq_affinity[irq].effective == kv.affinity(irq)[1] == (a,)
            assert kv.affinity(irq) == ((a,), (a,))
            effect(f"undo irq {irq}", f"IRQ {irq} irq/s on CPU {a}", f"{moved.irqs[irq].per_cpu_per_s[a]:.0f}",
                   f"{per_cpu[a]:.0f}", f"affinity {kv.affinity(irq)[1]} (/proc/irq)")
    finally:
        load.kill()
        load.wait()
    tuner.undo()  # the spread: every IRQ back where the driver had it
    assert all(kv.affinity(i)[0] == was for i, was in spread_from.items())


def test_4_rps_steers_a_virtio_rx_queue_to_another_cpu_and_undo_stops_it(nics, tuner, recording: Recording):
    load = kv.iperf3(kv.HOST_VIRTIO, kv.PORT_VIRTIO, 40, flows=16)
    moved: dict[int, str] = {}
    try:
        time.sleep(3)
        queues = {i: irq for (kind, i), irq in kv.queue_irqs(nics.virtio).items() if kind == "rx"}
        with reader(nics) as r:
            _, s1, before = window(r, 3)
            pkts = {q.index: q.packets_per_s or 0 for q in before.links[nics.virtio].queues if q.kind == "rx"}
            k = max(pkts, key=pkts.__getitem__)
            irq_cpu = kv.affinity(queues[k])[1][0]
            c = min((x for x in s1.online_cpus if x != irq_cpu), key=lambda x: before.cpus[x].net_rx_per_s or 0)
            # c's own queue IRQs go elsewhere for this check: a CPU already polling its own
            # queue runs RPS work inside the same NET_RX softirq, so its NET_RX count need
            # not rise (seen: 128 -> 102/s while received_rps rose); an idle c shows the rise
            for irq in kv.device_irqs(nics.virtio) | kv.device_irqs(nics.e1000e):
                if c in kv.affinity(irq)[0]:
                    path = Path(f"/proc/irq/{irq}/smp_affinity_list")
                    moved[irq] = path.read_text().strip()
                    path.write_text(str(irq_cpu))
            time.sleep(1)
            _, s1, before = window(r, 3)
            rps_before = before.cpus[c].received_rps_per_s or 0
            # as a mask: a lone `0` means RPS off (as `echo 0 > rps_cpus`), not CPU 0
            apply(tuner, f"nettop set rps {nics.virtio} {k} 0x{1 << c:x}")
            assert int(Path(f"/sys/class/net/{nics.virtio}/queues/rx-{k}/rps_cpus").read_text().replace(",", ""),
                       16) == 1 << c
            first = r.read()
            k0, t0 = kv.received_rps(), time.monotonic()
            time.sleep(3)
            second = r.read()
            k1, t1 = kv.received_rps(), time.monotonic()
            after = compute_rates(first, second)
            rps_after = after.cpus[c].received_rps_per_s or 0
            assert rps_after > rps_before + 5, (rps_before, rps_after)
            assert k1[c] - k0[c] > 0
            assert (after.cpus[c].net_rx_per_s or 0) > (before.cpus[c].net_rx_per_s or 0)
            effect(f"set rps rx-{k} -> CPU {c}", f"received_rps/s on CPU {c}", f"{rps_before:.0f}", f"{rps_after:.0f}",
                   f"{(k1[c] - k0[c]) / (t1 - t0):.0f} (softnet_stat)")
            effect(f"set rps rx-{k} -> CPU {c}", f"NET_RX/s on CPU {c}", f"{before.cpus[c].net_rx_per_s or 0:.0f}",
                   f"{after.cpus[c].net_rx_per_s or 0:.0f}", "")
            tuner.undo()
            assert int(Path(f"/sys/class/net/{nics.virtio}/queues/rx-{k}/rps_cpus").read_text().replace(",", ""),
                       16) == 0
            first = r.read()
            time.sleep(3)
            undone = compute_rates(first, r.read())
            assert (undone.cpus[c].received_rps_per_s or 0) < max(2.0, rps_after / 10), undone.cpus[c]
            effect(f"undo rps rx-{k}", f"received_rps/s on CPU {c}", f"{rps_after:.0f}",
                   f"{undone.cpus[c].received_rps_per_s or 0:.0f}", "rps_cpus back to 0")
    finally:
        load.kill()
        load.wait()
        for irq, cpus in moved.items():
            Path(f"/proc/irq/{irq}/smp_affinity_list").write_text(cpus)


def _moderated(nics: kv.Nics, r: HostReader, irq: int, seconds: float) -> tuple[float, float, float]:
    """(rx irq/s, nettop's RTT p50 ms, ping's avg ms) under light UDP load into e1000e."""
    load = kv.iperf3(kv.HOST_E1000E, kv.PORT_E1000E, seconds + 2, flows=1, udp_rate="20M")
    try:
        time.sleep(1)
        r.read()  # the prober's figures restart here
        a = r.read()
        ping = subprocess.run(["ping", "-q", "-c", str(int(seconds / 0.05)), "-i", "0.05", kv.HOST_E1000E],
                              capture_output=True, text=True)
        b = r.read()
    finally:
        load.kill()
        load.wait()
    rates = compute_rates(a, b)
    lat = b.latency[kv.HOST_E1000E]
    assert lat.rtt_p50_ms is not None and lat.received > 10, lat
    avg = float(ping.stdout.rsplit("=", 1)[1].split("/")[1])
    return rates.irqs[irq].per_s or 0.0, lat.rtt_p50_ms, avg


def test_5_e1000e_interrupt_moderation_trades_irqs_for_latency(nics, tuner, recording: Recording):
    irq = kv.queue_irqs(nics.e1000e)[("rx", 0)]
    found = kv.sh("ethtool", "-c", nics.e1000e)
    prober = Prober([kv.HOST_E1000E], interval_s=0.02)
    prober.start()
    try:
        with reader(nics, prober) as r:
            apply(tuner, f"nettop set coalesce {nics.e1000e} rx-usecs=10")
            # three samples each, their median: on a loaded host qemu is starved now and
            # then, and one starved sample of two (129 vs 361 irq/s at rx-usecs=10, with
            # the load of a memory benchmark, `yes` and the test suite) halved the factor
            low = [_moderated(nics, r, irq, 4) for _ in range(3)]
            apply(tuner, f"nettop set coalesce {nics.e1000e} rx-usecs=5000")
            assert "rx-usecs: 5000" in kv.sh("ethtool", "-c", nics.e1000e)
            high = [_moderated(nics, r, irq, 4) for _ in range(3)]
            tuner.undo()
            tuner.undo()
            assert kv.sh("ethtool", "-c", nics.e1000e) == found
            back = _moderated(nics, r, irq, 4)
    finally:
        prober.stop()
    irq_low, irq_high = statistics.median(x[0] for x in low), statistics.median(x[0] for x in high)
    rtt_low, rtt_high = statistics.median(x[1] for x in low), statistics.median(x[1] for x in high)
    ping_low, ping_high = statistics.median(x[2] for x in low), statistics.median(x[2] for x in high)
    factor = irq_low / max(irq_high, 1e-9)
    # rx-usecs=5000 asks for at most 200 irq/s; qemu's EITR emulation is looser than that
    assert factor >= 2, (low, high)
    assert rtt_high > rtt_low and ping_high > ping_low, (low, high)
    # the found setting is e1000e's adaptive ITR: it moderates too, so "back" sits between the
    # two; on a loaded host (qemu slower, packets batching) it measured 1.41x rx-usecs=5000's
    assert back[0] > irq_high * 1.25, (back, high)
    effect(f"coalesce {nics.e1000e} rx-usecs 10->5000", "rx irq/s", f"{irq_low:.0f}", f"{irq_high:.0f}",
           f"factor {factor:.1f}")
    effect(f"coalesce {nics.e1000e} rx-usecs 10->5000", "RTT p50 ms (nettop) / avg ms (ping)",
           f"{rtt_low:.2f} / {ping_low:.2f}", f"{rtt_high:.2f} / {ping_high:.2f}", "ping -i 0.05")
    effect(f"undo coalesce {nics.e1000e}", "rx irq/s; RTT p50 ms", f"{irq_high:.0f}; {rtt_high:.2f}",
           f"{back[0]:.0f}; {back[1]:.2f}", "ethtool -c as found")


def test_6_channels_4_to_2_drop_rx_2_and_rx_3_within_a_sample_with_a_marker(nics, tuner, journal_path,
                                                                             recording: Recording):
    tail = JournalTail(journal_path)
    tail.poll()
    with reader(nics) as r:
        before = r.read()
        assert sorted(q.index for q in before.queue_maps[nics.virtio].queues if q.kind == "rx") == [0, 1, 2, 3]
        apply(tuner, f"nettop set channels {nics.virtio} combined=2")
        s = r.read()
        assert kv.rx_queues(nics.virtio) == [0, 1]
        assert sorted(q.index for q in s.queue_maps[nics.virtio].queues if q.kind == "rx") == [0, 1]
        assert sorted(q.index for q in s.queue_stats[nics.virtio].queues if q.kind == "rx") == [0, 1]
        assert s.devices[nics.virtio].channels is not None and s.devices[nics.virtio].channels["combined"] == 2
        events = tail.poll()
        assert any("channels" in e.text and nics.virtio in e.text for e in events), events
        tuner.undo()
        s = r.read()
        assert sorted(q.index for q in s.queue_maps[nics.virtio].queues if q.kind == "rx") == [0, 1, 2, 3]
    effect(f"set channels {nics.virtio} combined 4->2", "rx queues in nettop's table", "0,1,2,3", "0,1",
           "/sys/class/net/*/queues: rx-0, rx-1")


def test_7_the_recording_holds_every_change(recording: Recording, journal_path):
    time.sleep(2)  # one more sample after the last change
    path = recording.stop()
    assert Path(path).stat().st_size > 0
    from nettop.record.replay import ReplaySource

    src = ReplaySource(path)
    texts = [e.text for e in src.events if e.kind == "tuning"]
    src.reader.close()
    for word in ("irq", "rps", "coalesce", "channels"):
        assert any(word in t for t in texts), (word, texts)


@pytest.mark.timeout(1200)  # 3 repeats x 3 variants under TCG: ~200 s idle, over 300 s with a CPU kept busy
def test_8_experiment_fq_codel_vs_pfifo_fast_behind_a_rate_limit_on_e1000e_with_128_flows(nics, tmp_path):
    """The ixgbe case's direction on a real driver: 128 TCP flows out of e1000e behind the
    same 10 Mbit/s rate limit (tbf), with pfifo_fast (txqueuelen packets) or fq_codel as
    the queue behind it. fq_codel's p99 RTT under load must be at most 1/5 of
    pfifo_fast's at similar throughput. At the emulated NIC's own speed the guest is
    CPU-bound under TCG and the queue is not where the latency comes from
    (docs/vm-tiers.md), so the rate limit is what puts the queue into the qdisc, as a
    slower link would; 10 Mbit/s keeps the packet rate low enough that emulation stalls
    do not set fq_codel's p99. The warm-up is 10 s: when the 128 flows start together the
    queue takes seconds to settle, and probes sent 3.5-4.5 s after the start were held up to
    a second; with a 4 s warm-up their replies opened the measure window and set fq_codel's
    p99 (966 ms against 94-179 ms for the rest of that window; CI saw 638 ms as a median)."""
    shaper = "rate=10mbit burst=15k"
    plan = tmp_path / "aqm.toml"
    plan.write_text(f"""
name = "fq_codel vs pfifo_fast behind 10 Mbit/s, 128 flows, e1000e"
iface = "{nics.e1000e}"
target = "{kv.HOST_E1000E}"
[load]
kind = "tcp"
flows = 128
port = {kv.PORT_E1000E}
[timing]
idle = 1
warmup = 10
measure = 8
repeats = 3
seed = 3
interval = 0.5
ping_interval = 0.02
[[variant]]
name = "pfifo_fast"
set = ["nettop set qdisc {nics.e1000e} tbf {shaper} children=pfifo_fast"]
[[variant]]
name = "fq_codel"
set = ["nettop set qdisc {nics.e1000e} tbf {shaper} children=fq_codel"]
""")
    out = tmp_path / "out"
    env = {**os.environ, "NETTOP_STATE_DIR": str(tmp_path / "state")}
    nettop = str(Path(sys.executable).with_name("nettop"))
    p = subprocess.run([nettop, "experiment", str(plan), "-o", str(out), "--no-charts"], env=env,
                       capture_output=True, text=True, timeout=900)
    # three repeats: the median p99 then stands on two windows. exit 1 is a failed variant: the unshaped baseline may starve the emulated CPUs past
    # the dead-man switch; the two compared variants must complete every repeat
    assert p.returncode in (0, 1), p.stderr[-3000:]
    table = (out / "results.md").read_text()
    Path("/tmp/vmout").mkdir(exist_ok=True)
    Path("/tmp/vmout/experiment.md").write_text(table)
    rows: dict[tuple[str, str], float] = {}
    for line in (out / "results.csv").read_text().splitlines()[1:]:
        variant, figure, median, _low, _high, n, failed = line.split(",")
        rows[(variant, figure)] = float(median)
        if variant != "baseline":
            assert failed == "0" and n == "3", (line, table, p.stderr[-2000:])
    what = "experiment: tbf 10 Mbit/s, pfifo_fast -> fq_codel behind it (e1000e, 128 flows)"
    fifo, aqm = rows[("pfifo_fast", "rtt_load_p99")], rows[("fq_codel", "rtt_load_p99")]
    tp_fifo, tp_aqm = rows[("pfifo_fast", "tput_bps")], rows[("fq_codel", "tput_bps")]
    effect(what, "RTT p99 under load ms", f"{fifo:.1f}", f"{aqm:.1f}",
           f"throughput {tp_fifo / 1e6:.1f} -> {tp_aqm / 1e6:.1f} Mbit/s")
    effect(what, "RTT p50 under load ms", f"{rows[('pfifo_fast', 'rtt_load_p50')]:.1f}",
           f"{rows[('fq_codel', 'rtt_load_p50')]:.1f}", "median of the window's probes")
    assert aqm * 5 <= fifo, table
    assert 0.7 <= tp_aqm / tp_fifo <= 1.3, table
