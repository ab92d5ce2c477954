"""Captured trees that lack what a live kernel always has: every unknown is null plus one
Problem naming what is missing, never a 0 (issue 27).

Each tree is tests/treegen.py's small faithful host with one thing taken away or changed,
as real captures come: /proc-only tarballs, sosreports that copy a few sysfs files,
files copied at different moments.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from treegen import generate_tree
from nettop.cli import main
from nettop.collectors.host import HostReader
from nettop.collectors.net_dev import parse_net_dev
from nettop.kernel.sysroot import SysRoot
from nettop.model.rates import Presence, compute_rates

ETH0 = "sys/devices/pci0000:80/0000:81:00.0/net/eth0"

# /proc/net/dev as Linux 6.1 prints it (net/core/net-procfs.c): lo, a bridge and a veth
# that a /proc-only capture has no sysfs folder for.
NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1175363    3162    0    3    0     0          0         0  1175363    3162    0    0    0     0       0          0
  eth0: 9000000    7000    1    2    0     0          0        40  4500000    3500    0    5    0     0       0          0
docker0:  52000     400    0    0    0     0          0         0    81000     500    0    0    0     0       0          0
vethab12cd:  81000     500    0    0    0     0          0         0    52000     400    0    7    0     0       0          0
"""


def tree(tmp_path: Path, name: str = "t", cpus: int = 4, offline: tuple[int, ...] = ()) -> Path:
    return generate_tree(tmp_path / name, cpus=cpus, irqs=12, queues=4, offline=offline)


def read(t: Path):  # type: ignore[no-untyped-def]
    with HostReader(SysRoot(str(t))) as r:
        return r.read()


def messages(snap) -> list[str]:  # type: ignore[no-untyped-def]
    return [p.message for p in snap.problems]


def snapshot_json(t: Path, capsys) -> dict:  # type: ignore[no-untyped-def]
    """`nettop snapshot --json --root T`, as a user runs it."""
    capsys.readouterr()
    assert main(["snapshot", "--json", "--root", str(t), "-i", "0.1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_missing_statistics_is_null_and_one_problem_never_zero(tmp_path, capsys):
    t = tree(tmp_path)
    shutil.rmtree(t / ETH0 / "statistics")
    snap = read(t)
    eth0 = snap.links["eth0"]
    for f in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
              "rx_errors", "tx_errors", "rx_dropped", "tx_dropped"):
        assert getattr(eth0, f) is None, f
    about = [m for m in messages(snap) if "statistics" in m]
    assert len(about) == 1, about
    assert "sys/class/net/eth0/statistics" in about[0] and "unknown" in about[0]
    assert compute_rates(snap, snap.__class__(**{**{f: getattr(snap, f) for f in snap.__slots__},
                                                 "t_mono": snap.t_mono + 1})).links["eth0"].rx_bytes_per_s is None
    doc = snapshot_json(t, capsys)
    iface = doc["interfaces"]["eth0"]
    assert iface["rx_bytes_per_s"] is None and iface["tx_packets_per_s"] is None
    assert all(v is None for v in iface["counters"].values()), iface["counters"]
    assert sum("sys/class/net/eth0/statistics" in p for p in doc["problems"]) == 1


def test_one_missing_statistics_file_is_null_and_named(tmp_path):
    t = tree(tmp_path)
    (t / ETH0 / "statistics/rx_dropped").unlink()
    snap = read(t)
    assert snap.links["eth0"].rx_dropped is None
    assert snap.links["eth0"].rx_bytes == 10**12
    assert [m for m in messages(snap) if "statistics" in m] == [
        f"{t}/sys/class/net/eth0/statistics lacks rx_dropped: unknown"]


@pytest.mark.parametrize("text", ["12x\n", "-5\n", "1_000\n", f"{2**64}\n", "\n", "7", "9" * 70 + "\n", "12\n34"])
def test_a_statistics_file_that_is_not_a_plain_counter_is_named_and_the_others_read(tmp_path, text):
    """The eight counters are read in one pass while each is a plain decimal; one that is
    not (damaged, signed, too wide, cut, longer than a counter, two lines) is read file by
    file, as before: that one named, the other seven as the files say."""
    t = tree(tmp_path)
    stats = t / ETH0 / "statistics"
    want = {f: int((stats / f).read_text()) for f in ("rx_bytes", "tx_bytes", "rx_packets", "tx_dropped")}
    (stats / "rx_errors").write_text(text)
    snap = read(t)
    link = snap.links["eth0"]
    assert {f: getattr(link, f) for f in want} == want
    named = [m for m in messages(snap) if "statistics/rx_errors" in m]
    if text == "7":  # no newline is still a counter, read the slow way
        assert link.rx_errors == 7 and named == []
    else:
        assert link.rx_errors is None and len(named) == 1


def test_a_damaged_mtu_or_a_missing_operstate_is_read_file_by_file_and_the_rest_as_the_files_say(tmp_path):
    t = tree(tmp_path)
    want = int((t / ETH0 / "statistics/rx_bytes").read_text())
    (t / ETH0 / "mtu").write_text("15x0\n")
    (t / ETH0 / "operstate").unlink()
    link = read(t).links["eth0"]
    assert (link.mtu, link.operstate, link.rx_bytes) == (0, "unknown", want)
    assert link.ifindex == int((t / ETH0 / "ifindex").read_text())


def test_proc_net_dev_fills_counters_and_lists_interfaces_sysfs_lacks(tmp_path):
    t = tree(tmp_path)
    shutil.rmtree(t / ETH0 / "statistics")
    (t / "proc/net/dev").write_text(NET_DEV)
    snap = read(t)
    eth0 = snap.links["eth0"]
    assert (eth0.rx_bytes, eth0.rx_packets, eth0.rx_errors, eth0.rx_dropped) == (9000000, 7000, 1, 2)
    assert (eth0.tx_bytes, eth0.tx_packets, eth0.tx_errors, eth0.tx_dropped) == (4500000, 3500, 0, 5)
    assert eth0.ifindex == 2 and eth0.operstate == "up"  # state still from sysfs
    assert snap.links["lo"].rx_bytes == 1000  # lo has statistics/: sysfs wins
    for name, rx, tx_drop in (("docker0", 52000, 0), ("vethab12cd", 81000, 7)):
        link = snap.links[name]
        assert (link.rx_bytes, link.tx_dropped, link.ifindex) == (rx, tx_drop, 0)
    assert not [m for m in messages(snap) if "statistics" in m or "net/dev" in m]


def test_a_proc_only_capture_still_lists_every_interface(tmp_path):
    t = tree(tmp_path)
    shutil.rmtree(t / "sys/class/net")
    (t / "proc/net/dev").write_text(NET_DEV)
    snap = read(t)
    assert sorted(snap.links) == ["docker0", "eth0", "lo", "vethab12cd"]
    assert snap.links["lo"].rx_packets == 3162
    assert sum("sys/class/net" in m for m in messages(snap)) == 1


def test_damaged_proc_net_dev_line_is_one_problem(tmp_path):
    rows, problems = parse_net_dev(NET_DEV.replace("52000     400", "52000     4x0", 1))
    assert "docker0" not in rows and len(rows) == 3
    assert len(problems) == 1 and "docker0" in problems[0].message


def test_cpus_sysfs_says_are_offline_are_marked_offline(tmp_path, capsys):
    t = tree(tmp_path, cpus=4)
    # /proc/stat and softnet_stat copied while CPUs 2-3 were up, cpu/online after they went down
    (t / "sys/devices/system/cpu/online").write_text("0-1\n")
    (t / "sys/devices/system/cpu/offline").write_text("2-3\n")
    a = read(t)
    b = a.__class__(**{**{f: getattr(a, f) for f in a.__slots__}, "t_mono": a.t_mono + 1})
    rates = compute_rates(a, b)
    assert a.online_cpus == (0, 1)
    assert {c: r.presence for c, r in rates.cpus.items()} == {
        0: Presence.BOTH, 1: Presence.BOTH, 2: Presence.OFFLINE, 3: Presence.OFFLINE}
    assert rates.cpus[2].softirq_pct is None and rates.cpus[2].softnet_processed_per_s is None
    doc = snapshot_json(t, capsys)
    assert [c["status"] for c in doc["cpus"]] == ["ok", "ok", "offline", "offline"]


def test_offline_file_is_heeded_when_online_is_missing(tmp_path):
    t = tree(tmp_path, cpus=4)
    (t / "sys/devices/system/cpu/online").unlink()
    (t / "sys/devices/system/cpu/offline").write_text("3\n")
    assert read(t).online_cpus == (0, 1, 2)


def test_online_and_offline_disagreeing_is_a_problem(tmp_path):
    t = tree(tmp_path, cpus=4)
    (t / "sys/devices/system/cpu/offline").write_text("3\n")
    snap = read(t)
    assert snap.online_cpus == (0, 1, 2)
    assert sum("both list CPU 3" in m for m in messages(snap)) == 1


def test_msi_irqs_missing_from_proc_interrupts_is_a_problem(tmp_path):
    t = tree(tmp_path)
    (t / "sys/devices/pci0000:80/0000:81:00.0/msi_irqs/977").write_text("msix\n")
    snap = read(t)
    about = [m for m in messages(snap) if "msi_irqs" in m]
    assert len(about) == 1 and "977" in about[0] and "eth0" in about[0]


def test_a_damaged_softnet_line_gives_one_warning_not_a_hotplug_one(tmp_path):
    t = tree(tmp_path, cpus=4)
    lines = (t / "proc/net/softnet_stat").read_text().splitlines()
    lines[2] = lines[2].replace("0", "g", 1)
    (t / "proc/net/softnet_stat").write_text("\n".join(lines) + "\n")
    snap = read(t)
    about = [m for m in messages(snap) if "softnet" in m]
    assert len(about) == 1 and "malformed" in about[0], about
    assert not any("offline" in m for m in messages(snap))


def test_uptime_is_read_and_its_absence_named(tmp_path):
    t = tree(tmp_path)
    assert read(t).uptime_s == 86400.0
    (t / "proc/uptime").unlink()
    snap = read(t)
    assert snap.uptime_s is None
    assert sum("/proc/uptime" in m for m in messages(snap)) == 1


@pytest.mark.parametrize("text", ["", "abc 1.0", "nan 1", "-5 2"])
def test_a_damaged_uptime_is_one_problem(tmp_path, text):
    t = tree(tmp_path)
    (t / "proc/uptime").write_text(text + "\n")
    snap = read(t)
    assert snap.uptime_s is None
    assert sum("/proc/uptime" in m for m in messages(snap)) == 1


def test_unknown_counters_stay_null_through_a_recording(tmp_path):
    from nettop.record.store import Reader, Writer

    t = tree(tmp_path)
    shutil.rmtree(t / ETH0 / "statistics")
    snaps = [read(t) for _ in range(3)]
    path = str(tmp_path / "r.nettop")
    w = Writer(path, {"host": "h"})
    for s in snaps:
        w.add_sample(s)
    w.close()
    got = list(Reader(path).snapshots())
    assert got == snaps
    assert got[-1].links["eth0"].rx_bytes is None and got[-1].uptime_s == 86400.0


def test_the_json_carries_the_totals_each_rate_came_from(tmp_path, capsys):
    """Checked against the files themselves, parsed here on their own."""
    t = tree(tmp_path, cpus=4)
    doc = snapshot_json(t, capsys)
    assert doc["schema"] == "nettop.snapshot/1" and doc["schema_version"] == 2
    assert doc["uptime_s"] == 86400.0
    softnet = {int(f[12], 16): [int(x, 16) for x in f]
               for f in (line.split() for line in (t / "proc/net/softnet_stat").read_text().splitlines())}
    stat = {int(f[0][3:]): [int(x) for x in f[1:]] for f in
            (line.split() for line in (t / "proc/stat").read_text().splitlines())
            if f[0].startswith("cpu") and f[0] != "cpu"}
    sirq = {line.split(":")[0].strip(): [int(x) for x in line.split(":")[1].split()]
            for line in (t / "proc/softirqs").read_text().splitlines()[1:]}
    for c in doc["cpus"]:
        cpu, tot = c["cpu"], c["totals"]
        assert (tot["softnet_processed"], tot["softnet_dropped"], tot["time_squeeze"],
                tot["received_rps"], tot["flow_limit_count"]) == tuple(softnet[cpu][i] for i in (0, 1, 2, 9, 10))
        assert (tot["user_ticks"], tot["system_ticks"], tot["idle_ticks"], tot["softirq_ticks"]) == \
            (stat[cpu][0], stat[cpu][2], stat[cpu][3], stat[cpu][6])
        assert (tot["net_rx"], tot["net_tx"]) == (sirq["NET_RX"][cpu], sirq["NET_TX"][cpu])
    header = (t / "proc/interrupts").read_text().splitlines()[0].split()
    for line in (t / "proc/interrupts").read_text().splitlines()[1:]:
        head, _, rest = line.partition(":")
        if head.strip() in doc["irqs"]:
            counts = [int(x) for x in rest.split()[:len(header)]]
            irq = doc["irqs"][head.strip()]
            assert irq["per_cpu"] == {h[3:]: n for h, n in zip(header, counts)}
            assert irq["count"] == sum(counts)
    assert len(doc["irqs"]) >= 4
    eth0 = doc["interfaces"]["eth0"]["counters"]
    assert eth0["rx_bytes"] == int((t / ETH0 / "statistics/rx_bytes").read_text())
