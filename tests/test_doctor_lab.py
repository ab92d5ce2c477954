"""The doctor on a real kernel: each lab problem is induced, named by `nettop doctor --json`
with its evidence, then fixed with the finding's own `nettop set` line and gone.

The lab is a multi-queue veth pair with the peer in its own namespace (tests/lab.py);
traffic is iperf3 between the two ends only. Host-wide sysctls a test lowers
(netdev_max_backlog, netdev_budget) are put back whatever happens. eth0 is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

import lab as _lab

NETTOP = [sys.executable, "-m", "nettop.cli"]
ROOT = Path(__file__).resolve().parent.parent


def doctor(*args: str, netns: str | None = None, state: Path | None = None) -> dict:
    """`nettop doctor --json ARGS` as a separate process (inside `netns` when given)."""
    argv = [*NETTOP, "doctor", "--json", *args]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if state is not None:
        env["NETTOP_STATE_DIR"] = str(state)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert run.returncode in (0, 1, 2, 3), run.stderr
    doc = json.loads(run.stdout)
    assert doc["worst"] == run.returncode
    return doc


def by_id(doc: dict) -> dict[str, dict]:
    return {f["id"]: f for f in doc["findings"]}


def apply(line: str, netns: str | None = None, state: Path | None = None) -> None:
    """Run a finding's fix exactly as printed (`nettop set ...`), confirmed."""
    words = shlex.split(line)
    assert words[:2] == ["nettop", "set"], line
    argv = [*NETTOP, "set", "--yes", *words[2:]]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if state is not None:
        env["NETTOP_STATE_DIR"] = str(state)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert run.returncode == 0, f"{line}: {run.stderr}"


@contextlib.contextmanager
def sysctl(name: str, value: str) -> Iterator[None]:
    path = "/proc/sys/" + name.replace(".", "/")
    old = _lab.sysfs(path)
    try:
        with open(path, "w") as f:
            f.write(value)
        yield
    finally:
        with open(path, "w") as f:
            f.write(old)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A journal of our own, so fixes applied here never mix with the host's."""
    os.environ["NETTOP_STATE_DIR"] = str(tmp_path / "state")
    yield tmp_path / "state"
    os.environ.pop("NETTOP_STATE_DIR", None)


def tcp_load(lab: _lab.VethLab, seconds: float, reverse: bool = False, extra: list[str] | None = None) -> None:
    lab.iperf3_server()
    lab.iperf3_client(seconds, reverse=reverse, extra=extra)
    time.sleep(0.5)  # the flow is up before the doctor samples


def test_the_idle_lab_gives_no_finding(veth_lab):
    doc = doctor("--seconds", "2", "--iface", veth_lab.host_if)
    assert doc["findings"] == [], doc["findings"]


def test_gro_off_on_a_busy_veth_is_named_and_the_fix_resolves_it(veth_lab, state):
    # veth starts with GRO off; under a TCP stream it is a busy NIC
    tcp_load(veth_lab, 20, reverse=True)
    doc = doctor("--seconds", "2", "--iface", veth_lab.host_if)
    assert f"offloads-off:{veth_lab.host_if}" in by_id(doc), doc
    f = by_id(doc)[f"offloads-off:{veth_lab.host_if}"]
    assert f["fix"] == [f"nettop set features {veth_lab.host_if} gro=on"]
    assert f["figures"]["gro_off"] == 1 and f["figures"]["pps"] >= 5000
    apply(f["fix"][0], state=state)
    assert f"offloads-off:{veth_lab.host_if}" not in by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))


def test_tso_off_is_named_and_the_fix_resolves_it(veth_lab, state):
    _lab.run(["ethtool", "-K", veth_lab.host_if, "tso", "off", "gro", "on"])
    tcp_load(veth_lab, 20)
    f = by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))[f"offloads-off:{veth_lab.host_if}"]
    assert f["fix"] == [f"nettop set features {veth_lab.host_if} tso=on"]
    apply(f["fix"][0], state=state)
    assert f"offloads-off:{veth_lab.host_if}" not in by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))


def test_no_xps_on_a_sending_multiqueue_veth_and_its_fix(veth_lab, state):
    tcp_load(veth_lab, 25)
    f = by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))[f"no-xps:{veth_lab.host_if}"]
    assert f["figures"]["tx_queues"] == 4 and len(f["fix"]) == 4
    for line in f["fix"]:
        apply(line, state=state)
    masks = [_lab.sysfs(f"/sys/class/net/{veth_lab.host_if}/queues/tx-{q}/xps_cpus") for q in range(4)]
    assert all(int(m.replace(",", ""), 16) for m in masks)
    assert f"no-xps:{veth_lab.host_if}" not in by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))


def udp_flood(lab: _lab.VethLab, seconds: float) -> None:
    """Small UDP datagrams from the peer to the host end, four streams, as fast as they go.
    The sender (iperf3's server, in reverse mode) runs on CPU 0, so RPS to CPU 1 queues
    every packet across CPUs into CPU 1's backlog."""
    server = lab.iperf3_server()
    os.sched_setaffinity(server.pid, {0})
    lab.iperf3_client(seconds, reverse=True, extra=["-u", "-b", "0", "-l", "64", "-P", "4"])
    time.sleep(1.0)


def test_softnet_drops_from_a_tiny_backlog_with_rps_on_one_cpu_and_the_fix(veth_lab, state):
    for q in range(4):  # RPS: every rx queue of the host end to CPU 1
        with open(f"/sys/class/net/{veth_lab.host_if}/queues/rx-{q}/rps_cpus", "w") as f:
            f.write("2")
    with sysctl("net.core.netdev_max_backlog", "1"):
        udp_flood(veth_lab, 25)
        doc = doctor("--seconds", "3", "--iface", veth_lab.host_if)
        assert "softnet-drops:host" in by_id(doc), (doc, [p.poll() for p in veth_lab._procs], _lab.sysfs("/proc/net/softnet_stat"))
        f = by_id(doc)["softnet-drops:host"]
        assert f["severity"] == "crit" and f["figures"]["dropped_per_s"] >= 1
        assert f["figures"]["netdev_max_backlog"] == 1 and f["figures"]["cpu"] == 1
        assert "RPS" in f["title"] and f["figures"]["rps_share"] > 0.9
        assert f["fix"] == ["nettop set sysctl net.core.netdev_max_backlog 2048"]
        apply(f["fix"][0], state=state)
        assert "softnet-drops:host" not in by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))


def test_time_squeeze_from_a_tiny_budget_and_the_fix(veth_lab, state):
    with sysctl("net.core.netdev_budget", "1"), sysctl("net.core.netdev_budget_usecs", "8000"):
        udp_flood(veth_lab, 25)
        f = by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))["time-squeeze:host"]
        assert f["figures"]["netdev_budget"] == 1 and f["figures"]["time_squeeze_per_s"] >= 10
        assert f["fix"] == ["nettop set sysctl net.core.netdev_budget 600",
                            "nettop set sysctl net.core.netdev_budget_usecs 16000"]
        for line in f["fix"]:
            apply(line, state=state)
        assert "time-squeeze:host" not in by_id(doctor("--seconds", "2", "--iface", veth_lab.host_if))


def _peer_echo_requests(lab: _lab.VethLab) -> int:
    """ICMP echo requests the lab's peer has received (its namespace's Icmp InEchos)."""
    lines = [l.split() for l in lab.ns_run(["cat", "/proc/net/snmp"]).stdout.splitlines()
             if l.startswith("Icmp:")]
    return int(lines[1][lines[0].index("InEchos")])


def test_bufferbloat_behind_tbf_is_named_with_idle_and_loaded_rtt(veth_lab, state):
    """tbf with a 4 MB queue at 20 Mbit/s under four TCP streams: a standing queue. The
    doctor samples a second of idle RTT before the load starts, as a live session would."""
    _lab.run(["tc", "qdisc", "replace", "dev", veth_lab.host_if, "root", "tbf",
              "rate", "20mbit", "burst", "32k", "limit", "4m"])
    veth_lab.iperf3_server()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([*NETTOP, "doctor", "--json", "--seconds", "6", "--iface", veth_lab.host_if,
                          "--ping", veth_lab.peer_ip], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, cwd=ROOT)
    try:
        # The idle second is counted from the doctor's first probe reaching the peer, not
        # from Popen: a busy machine can take seconds to start nettop, and a load started
        # before the doctor samples leaves it no idle RTT to compare with.
        deadline = time.monotonic() + 60
        while _peer_echo_requests(veth_lab) == 0 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        time.sleep(1.5)
        veth_lab.iperf3_client(15, extra=["-P", "4"])
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    f = by_id(json.loads(out))[f"bufferbloat:{veth_lab.host_if}"]
    assert f["figures"]["ratio"] >= 10 and f["figures"]["rtt_load_ms"] - f["figures"]["rtt_idle_ms"] >= 1
    assert f["figures"]["backlog_pkts"] >= 1 and "tbf" in f["title"]
    assert f["fix"][0] == f"nettop set qdisc {veth_lab.host_if} fq_codel"
    # This kernel has no fq_codel (the VM tier's has): the fix is refused with the reason.
    words = shlex.split(f["fix"][0])
    run = subprocess.run([*NETTOP, "set", "--yes", *words[2:]], capture_output=True, text=True, env=env, cwd=ROOT)
    if run.returncode != 0:
        assert "fq_codel" in run.stderr and "\n" == run.stderr[-1] and run.stderr.count("\n") == 1
    else:
        assert _lab.tc_root(veth_lab.host_if)["kind"] == "fq_codel"


def test_tcp_buffers_below_the_bdp_inside_the_peer_namespace_and_the_fix(veth_lab, tmp_path):
    """tcp_rmem is per network namespace: the doctor runs inside the peer's, where the
    veth says 10000 Mb/s, and probes the host end for the RTT.

    The veth's lowest RTT swings from ~7 to ~50 µs between runs on a busy machine (a
    BDP of 9 to 65 kB), so the starting maximum is 1 kB (below any RTT over 0.8 µs), and
    a later run may measure a longer path than the fix was sized for: it must then name
    a BDP above the value now set and a larger fix, and the findings must converge."""
    ns = veth_lab.netns
    veth_lab.ns_run(["sysctl", "-w", "net.ipv4.tcp_rmem=1024 1024 1024"])
    doc = doctor("--seconds", "2", "--ping", veth_lab.host_ip, netns=ns)
    f = by_id(doc)["tcp-buffers:host"]
    bdp = f["figures"]["bdp_bytes"]
    assert f["figures"]["speed_mbps"] == 10000 and bdp > 1024 and f["figures"]["tcp_rmem_max"] == 1024
    assert f["figures"]["bdp_bytes"] == int(10000e6 / 8 * f["figures"]["rtt_ms"] / 1000)
    for _ in range(4):
        (line,) = f["fix"]
        assert line.startswith("nettop set sysctl net.ipv4.tcp_rmem 1024 1024 ")
        new_max = int(line.split()[-1])
        assert new_max >= 2 * bdp
        apply(line, netns=ns, state=tmp_path / "state")
        assert int(_lab.run(veth_lab.ns(["cat", "/proc/sys/net/ipv4/tcp_rmem"])).stdout.split()[-1]) == new_max
        f = by_id(doctor("--seconds", "2", "--ping", veth_lab.host_ip, netns=ns)).get("tcp-buffers:host")
        if f is None:
            break
        bdp = f["figures"]["bdp_bytes"]
        assert f["figures"]["tcp_rmem_max"] == new_max and bdp > new_max, f
    else:
        pytest.fail(f"tcp-buffers still found after 4 fixes: {f}")


def test_a_recording_keeps_the_findings_as_events_for_replay_and_report(veth_lab, tmp_path):
    """Record during induced softnet drops: the finding is an event in the file, the
    replay source feeds it to the timeline (a marker), and the report has a section."""
    rec = tmp_path / "run.nettop"
    for q in range(4):
        with open(f"/sys/class/net/{veth_lab.host_if}/queues/rx-{q}/rps_cpus", "w") as f:
            f.write("2")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NETTOP_STATE_DIR": str(tmp_path / "state")}
    with sysctl("net.core.netdev_max_backlog", "1"):
        udp_flood(veth_lab, 25)
        run = subprocess.run([*NETTOP, "record", "-o", str(rec), "--iface", veth_lab.host_if,
                              "--duration", "4"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr
    from nettop.record.replay import ReplaySource
    source = ReplaySource(str(rec), 60.0)
    try:
        recorded = [e.text for e in source.events if e.kind == "finding"]
        assert any(t.startswith("crit softnet-drops:host") for t in recorded), recorded
        while not source.at_end:
            source.step(1)
        assert any(e.kind == "finding" for e in source.timeline.events())
    finally:
        source.stop()
    report = subprocess.run([*NETTOP, "report", str(rec), "--no-plots"], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=60)
    assert report.returncode == 0, report.stderr
    body = report.stdout.split("## Findings (nettop doctor)", 1)[1]
    assert "crit softnet-drops:host" in body


def _probes_why() -> str | None:
    from nettop.ebpf import EbpfProbes
    ok, why = EbpfProbes.available()
    return None if ok else why


@pytest.mark.skipif(_probes_why() is not None, reason=str(_probes_why()))
def test_drop_reasons_name_udp_to_a_closed_port_in_words(veth_lab):
    """--ebpf: UDP to a port nobody listens on in the peer namespace is NO_SOCKET,
    which the finding says in words."""
    import socket
    import threading

    stop = threading.Event()

    def send() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((veth_lab.host_ip, 0))
            while not stop.is_set():
                for _ in range(50):
                    s.sendto(b"x" * 32, (veth_lab.peer_ip, 9))
                time.sleep(0.02)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    try:
        doc = doctor("--ebpf", "--seconds", "3", "--iface", veth_lab.host_if)
    finally:
        stop.set()
        t.join(5)
    f = by_id(doc)["drop-reasons:host"]
    assert "no socket listens on the destination port" in f["title"]
    assert f["figures"]["NO_SOCKET"] >= 100 and f["severity"] == "info"
