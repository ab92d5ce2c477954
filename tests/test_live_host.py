"""The whole sampler against the real kernel: the lab's veth pairs, eth0's virtio IRQs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from nettop.collectors.host import HostReader
from nettop.model.rates import compute_rates
from nettop.output.snapshot_json import build_document

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="live-host tests need root")


def _sysfs_counter(ifname: str, name: str) -> tuple[float, int]:
    with open(f"/sys/class/net/{ifname}/statistics/{name}") as f:
        v = int(f.read())
    return time.monotonic(), v


@pytest.fixture
def jumbo_lab():
    """A lab pair with a 65000-byte MTU: headers are ~0.1% of the bytes, so the
    interface's L2 byte counts and iperf3's payload bytes can be compared within 2%."""
    import lab as _lab

    reason = _lab.can_build_lab()
    if reason:
        pytest.skip(reason)
    with _lab.veth_lab(mtu=65000) as lab:
        yield lab


def _bracketed_read(reader: HostReader, ifname: str):
    """A snapshot with the kernel's tx_bytes counter read just before and just after it:
    the snapshot's own reading of the counter, and its timestamp, lie between the two."""
    before = _sysfs_counter(ifname, "tx_bytes")
    snap = reader.read()
    return snap, before, _sysfs_counter(ifname, "tx_bytes")


def _settled_tx_bytes(ifname: str, quiet_s: float = 0.2, limit_s: float = 5.0) -> None:
    """Wait until the interface's tx_bytes stops moving: what iperf3 wrote before it
    exited may still be leaving its socket buffer (megabytes; several % of a slow run)."""
    deadline = time.monotonic() + limit_s
    last = _sysfs_counter(ifname, "tx_bytes")[1]
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _sysfs_counter(ifname, "tx_bytes")[1]
        if now == last:
            return
        last = now


def test_veth_throughput_matches_kernel_counters_and_iperf3_within_2_percent(jumbo_lab):
    lab = jumbo_lab
    lab.iperf3_server()
    with HostReader(ifnames=[lab.host_if]) as reader:
        before = reader.read()
        client = lab.iperf3_client(3)
        time.sleep(1.0)
        mid_a, (ta0, ka0), (ta1, ka1) = _bracketed_read(reader, lab.host_if)
        time.sleep(1.0)
        mid_b, (tb0, kb0), (tb1, kb1) = _bracketed_read(reader, lab.host_if)
        out, err = client.communicate(timeout=30)
        assert client.returncode == 0, err
        _settled_tx_bytes(lab.host_if)
        after = reader.read()

    # Rate during the run: nettop's figure against the kernel's counters read by the test.
    # Each of nettop's two reads is bracketed by the test's, so whatever the load on the
    # machine, the bytes nettop counted lie in [kb0 - ka1, kb1 - ka0] and the time it
    # divided by in [tb0 - ta1, tb1 - ta0]: its rate must be those bytes over that time.
    rates = compute_rates(mid_a, mid_b)
    mid = rates.links[lab.host_if]
    assert (kb0 - ka0) / (tb0 - ta0) > 10e6, "iperf3 did not load the veth"
    assert tb0 - ta1 <= rates.elapsed_s <= tb1 - ta0, (ta0, ta1, tb0, tb1, rates.elapsed_s)
    assert kb0 - ka1 - 1 <= mid.tx_bytes_per_s * rates.elapsed_s <= kb1 - ka0 + 1, (
        ka0, ka1, kb0, kb1, mid.tx_bytes_per_s, rates.elapsed_s)

    # Over the whole run (its bytes all inside nettop's window, the socket drained): nettop's
    # bytes against iperf3's own report. Headers are ~0.1 % of the bytes at this MTU.
    report = json.loads(out)
    sent = report["end"]["sum_sent"]["bytes"]
    whole = compute_rates(before, after)
    nettop_bytes = whole.links[lab.host_if].tx_bytes_per_s * whole.elapsed_s
    assert nettop_bytes == pytest.approx(sent, rel=0.02)
    # and the rate iperf3 reports, against nettop's rate over iperf3's own seconds
    iperf_rate = report["end"]["sum_sent"]["bits_per_second"] / 8
    assert nettop_bytes / report["end"]["sum_sent"]["seconds"] == pytest.approx(iperf_rate, rel=0.02)


def _set_rps(ifname: str, mask: str) -> None:
    qdir = f"/sys/class/net/{ifname}/queues"
    for q in os.listdir(qdir):
        if q.startswith("rx-"):
            with open(f"{qdir}/{q}/rps_cpus", "w") as f:
                f.write(mask)


@pytest.mark.skipif(os.cpu_count() < 2, reason="needs two CPUs to steer between")
@pytest.mark.parametrize("sender_cpu,rps_cpu", [(0, 1), (1, 0)])
def test_rps_mask_moves_received_rps_to_the_chosen_cpu(veth_lab, sender_cpu, rps_cpu):
    lab = veth_lab
    # GIVEN the peer sends from one CPU (iperf3 -R: the server in the namespace sends)
    lab.spawn(["iperf3", "-s", "-1", "-B", lab.peer_ip, "-A", str(sender_cpu)], in_ns=True)
    time.sleep(0.3)
    # WHEN every rx queue of the receiving veth steers to the other CPU
    _set_rps(lab.host_if, format(1 << rps_cpu, "x"))
    client = lab.iperf3_client(4, reverse=True, extra=["-u", "-b", "200M", "-l", "1000"])
    with HostReader(ifnames=[lab.host_if]) as reader:
        time.sleep(1.0)
        a = reader.read()
        time.sleep(2.0)
        b = reader.read()
    client.communicate(timeout=30)
    cpus = compute_rates(a, b).cpus
    # THEN the chosen CPU receives the RPS IPIs and the sender's CPU does not
    assert cpus[rps_cpu].received_rps_per_s > 100
    assert cpus[sender_cpu].received_rps_per_s < cpus[rps_cpu].received_rps_per_s / 20
    # and nettop shows the mask it reads back
    rows = build_document(a, b, compute_rates(a, b))["interfaces"][lab.host_if]["queues"]
    assert {r["rps_cpus"] for r in rows if r["kind"] == "rx"} == {format(1 << rps_cpu, "x")}


def _virtio_irqs() -> dict[str, int]:
    found = {}
    with open("/proc/interrupts") as f:
        for line in f:
            m = re.match(r"\s*(\d+):.*\s(virtio\d+-(?:input|output)\.\d+)\s*$", line)
            if m:
                found[m.group(2)] = int(m.group(1))
    return found


def _eth0_virtio() -> str | None:
    try:
        dev = os.path.basename(os.path.realpath("/sys/class/net/eth0/device"))
        drv = os.path.basename(os.path.realpath("/sys/class/net/eth0/device/driver"))
    except OSError:
        return None
    return dev if drv == "virtio_net" else None


@pytest.mark.skipif(_eth0_virtio() is None, reason="eth0 is not a virtio_net device here")
def test_eth0_virtio_queues_map_to_their_input_and_output_irqs():
    dev = _eth0_virtio()
    irqs = _virtio_irqs()
    with HostReader(ifnames=["eth0"]) as reader:
        snap = reader.read()
    qmap = snap.queue_maps["eth0"]
    got = {(q.kind, q.index): q.irqs for q in qmap.queues}
    assert got[("rx", 0)] == (irqs[f"{dev}-input.0"],)
    assert got[("tx", 0)] == (irqs[f"{dev}-output.0"],)
    assert qmap.source in ("netdev-netlink", "driver-naming")
    assert snap.devices["eth0"].driver == "virtio_net"


def _irq_named(pattern: str) -> int | None:
    with open("/proc/interrupts") as f:
        for line in f:
            m = re.match(rf"\s*(\d+):.*\s{pattern}\s*$", line)
            if m:
                return int(m.group(1))
    return None


# The balloon driver's stats IRQ fires every few seconds on its own and serves nothing
# the tests depend on. (The disk's IRQ is kernel-managed: EPERM.)
_STATS_IRQ = _irq_named(r"virtio\d+-stats")


@pytest.mark.skipif(_STATS_IRQ is None or (os.cpu_count() or 1) < 2,
                    reason="needs the virtio balloon stats IRQ to move and 2 CPUs")
def test_irq_moved_by_the_test_shows_its_new_effective_affinity():
    # x86 moves an MSI's vector at its next interrupt: the requested CPU shows at once,
    # the effective one once the IRQ has fired on its new CPU.
    irq = _STATS_IRQ
    path = f"/proc/irq/{irq}/smp_affinity_list"
    with open(path) as f:
        original = f.read().strip()
    with open(f"/proc/irq/{irq}/effective_affinity_list") as f:
        current = int(f.read().strip().split(",")[0].split("-")[0])
    target = 1 - current if current in (0, 1) else 0
    try:
        with open(path, "w") as f:
            f.write(str(target))
        with HostReader(ifnames=["lo"], follow_irqs=[irq]) as reader:
            before = reader.read()
            deadline = time.monotonic() + 60
            while True:
                after = reader.read()
                if after.irq_affinity[irq].effective == (target,) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        assert before.irq_affinity[irq].affinity == (target,)  # requested: at once
        assert after.irq_affinity[irq].effective == (target,)  # effective: once it fired
        counts = after.interrupts.irqs[irq].counts
        assert counts is not None and counts[after.interrupts.cpus.index(target)] > 0
    finally:
        with open(path, "w") as f:
            f.write(original)


_BLK_IRQ = _irq_named(r"virtio\d+-req\.\d+")  # virtio-blk: its queue IRQs are kernel-managed


def _affinity_files(irq: int) -> tuple[str, str]:
    with open(f"/proc/irq/{irq}/smp_affinity_list") as a, open(f"/proc/irq/{irq}/effective_affinity_list") as e:
        return a.read(), e.read()


@pytest.mark.skipif(_eth0_virtio() is None, reason="eth0 is not a virtio_net device here")
def test_eth0_queue_irqs_are_found_movable_and_probing_changes_nothing():
    dev = _eth0_virtio()
    qirqs = [i for n, i in _virtio_irqs().items() if n.startswith(f"{dev}-input.") or n.startswith(f"{dev}-output.")]
    assert qirqs
    before = {i: _affinity_files(i) for i in qirqs}
    with HostReader(ifnames=["eth0"]) as reader:
        snap = reader.read()
    assert {i: snap.irq_affinity[i].managed for i in qirqs} == {i: False for i in qirqs}
    assert {i: _affinity_files(i) for i in qirqs} == before


@pytest.mark.skipif(_BLK_IRQ is None, reason="no virtio-blk queue IRQ (a kernel-managed one) on this host")
def test_kernel_managed_irq_is_marked_and_the_kernel_really_refuses_it():
    irq = _BLK_IRQ
    before = _affinity_files(irq)
    with HostReader(ifnames=["lo"], follow_irqs=[irq]) as reader:
        assert reader.read().irq_affinity[irq].managed is True
    assert _affinity_files(irq) == before
    with pytest.raises(PermissionError):  # what a real move gets: EPERM (EIO before 6.12)
        with open(f"/proc/irq/{irq}/smp_affinity_list", "w") as f:
            f.write(before[0].strip())
    assert _affinity_files(irq) == before


def _nettop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nettop.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_snapshot_json_has_the_documented_fields(veth_lab):
    lab = veth_lab
    lab.iperf3_server()
    # The load must cover the snapshot's second, however long a busy machine takes to
    # start nettop: it runs until the snapshot is done, then is stopped.
    client = lab.iperf3_client(120)
    time.sleep(0.5)
    p = _nettop("snapshot", "--json", "--interval", "1")
    assert client.poll() is None, "iperf3 ended before the snapshot did"
    client.kill()
    client.communicate(timeout=30)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    for key in ("host", "kernel", "interval_s", "cpus", "interfaces"):
        assert key in doc
    assert 0.9 < doc["interval_s"] < 2.0
    for c in doc["cpus"]:
        assert {"cpu", "softirq_pct", "irq_pct", "net_rx_per_s", "net_tx_per_s",
                "softnet_dropped_per_s", "time_squeeze_per_s"} <= c.keys()
    veth = doc["interfaces"][lab.host_if]
    for key in ("rx_bytes_per_s", "tx_bytes_per_s", "rx_packets_per_s", "tx_packets_per_s",
                "rx_dropped_per_s", "tx_dropped_per_s", "qdisc", "queues"):
        assert key in veth
    assert veth["tx_bytes_per_s"] > 1e6
    kinds = sorted((q["kind"], q["index"]) for q in veth["queues"])
    assert kinds == [("rx", i) for i in range(4)] + [("tx", i) for i in range(4)]
    for q in veth["queues"]:
        assert q["irqs"] == [] and q["irq_per_s"] == 0.0
        assert ("rps_cpus" in q) if q["kind"] == "rx" else ("xps_cpus" in q)


@pytest.mark.parametrize("args,needle", [
    (["snapshot", "--interval", "0.01"], "out of range"),
    (["snapshot", "--interval", "soon"], "not a number"),
    (["snapshot", "--root", "/nonexistent/tree"], "not a directory"),
    (["snapshot", "--iface", "nosuchif0", "--interval", "0.1"], "no interface named nosuchif0"),
])
def test_bad_input_is_one_line_without_traceback(args, needle):
    p = _nettop(*args)
    assert p.returncode == 2
    lines = [l for l in p.stderr.splitlines() if l.strip() and not l.startswith("usage:")]
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_snapshot_json_ping_gives_latency_per_target_as_given(veth_lab):
    # Run inside the lab namespace: the unresolvable name's DNS query cannot leave it.
    p = subprocess.run(veth_lab.ns([sys.executable, "-m", "nettop.cli", "snapshot", "--json",
                                    "--interval", "1", "--ping", veth_lab.host_ip,
                                    "--ping", "no-such-host.invalid", "--ping-interval", "0.05"]),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lat = json.loads(p.stdout)["latency"]
    peer = lat[veth_lab.host_ip]
    for key in ("sent", "received", "loss_pct", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms",
                "rtt_mdev_ms", "rtt_p99_ms"):
        assert key in peer
    assert peer["sent"] >= 10 and peer["received"] == peer["sent"] and peer["loss_pct"] == 0
    assert 0 < peer["rtt_min_ms"] <= peer["rtt_avg_ms"] <= peer["rtt_max_ms"] < 50
    bad = lat["no-such-host.invalid"]
    assert bad["received"] == 0 and bad["error"] and "\n" not in bad["error"]


def test_snapshot_json_ebpf_section_has_napi_hardirq_softirq_drops():
    from nettop.ebpf import EbpfProbes

    ok, why = EbpfProbes.available()
    if not ok:
        pytest.skip(why)
    p = _nettop("snapshot", "--json", "--ebpf", "--interval", "1", timeout=180)
    assert p.returncode == 0, p.stderr
    e = json.loads(p.stdout)["ebpf"]
    assert {"napi", "hardirq", "softirq", "drops", "cost"} <= e.keys()
    assert e["cost"]["cpu_us_per_s"] is not None
    assert e["errors"] == [] and sorted(e["probes"]) == ["drops", "hardirq", "napi", "softirq"]
    # a quiet host may fire no device IRQ in one second; whatever fired is named and timed
    for row in e["hardirq"]:
        assert row["name"] and row["count_per_s"] >= 0 and row["us_per_s"] >= 0


def _as_nobody():
    os.setgid(65534)
    os.setgroups([])
    os.setuid(65534)


def test_without_root_snapshot_still_reports_and_says_what_needs_root_in_one_line():
    p = subprocess.run([sys.executable, "-m", "nettop.cli", "snapshot", "--json", "--ebpf",
                        "--interval", "0.3"], capture_output=True, text=True, timeout=60,
                       preexec_fn=_as_nobody, cwd="/")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert doc["cpus"] and "lo" in doc["interfaces"]
    assert doc["ebpf"]["available"] is False and "root" in doc["ebpf"]["reason"]
    assert all(q["irqs_managed"] is None for q in doc["interfaces"]["eth0"]["queues"])  # cannot ask
    for line in doc["problems"]:
        assert "\n" not in line
    assert any("root" in line for line in p.stderr.splitlines())
