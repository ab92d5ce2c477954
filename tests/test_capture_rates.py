"""One capture gives since-boot averages, two captures of one host the rates between them
(`nettop snapshot --root A [--root B]`, `nettop doctor --root ...`); never the zeros of one
tree read twice. Trees from tests/treegen.py, whose counters grow at known rates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from treegen import LINK_RX_BYTES_RATE, NET_RX_RATE, generate_tree
from nettop.cli import main

ETH0 = "sys/devices/pci0000:80/0000:81:00.0/net/eth0"


def pair(tmp_path: Path, seconds: int = 10) -> tuple[Path, Path]:
    kw = dict(cpus=4, irqs=12, queues=4)
    return (generate_tree(tmp_path / "a", step=0, **kw),
            generate_tree(tmp_path / "b", step=seconds, **kw))


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(list(argv))
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_one_capture_gives_since_boot_averages_not_zeros(tmp_path, capsys):
    a, _ = pair(tmp_path)
    rc, out, err = run(capsys, "snapshot", "--json", "--root", str(a))
    doc = json.loads(out)
    assert rc == 0 and doc["rates_basis"] == "since_boot" and doc["interval_s"] == 86400.0
    up = 86400.0
    eth0 = doc["interfaces"]["eth0"]
    # every average is its total divided by the uptime, checked against the file itself
    rx_bytes = int((a / ETH0 / "statistics/rx_bytes").read_text())
    assert eth0["rx_bytes_per_s"] == round(rx_bytes / up, 3) and eth0["rx_bytes_per_s"] > 0
    for c in doc["cpus"]:
        assert c["net_rx_per_s"] == round(c["totals"]["net_rx"] / up, 3)
        assert c["softnet_processed_per_s"] == round(c["totals"]["softnet_processed"] / up, 3)
        ticks = {k: v for k, v in c["totals"].items() if k.endswith("_ticks")}
        assert c["softirq_pct"] == round(100 * ticks["softirq_ticks"] / sum(ticks.values()), 3)
    for n, irq in doc["irqs"].items():
        assert irq["per_s"] == round(irq["count"] / up, 3)
    assert "since-boot averages" in doc["problems"][0] and "since-boot" in err


def test_one_capture_without_uptime_gives_totals_and_null_rates(tmp_path, capsys):
    a, _ = pair(tmp_path)
    (a / "proc/uptime").unlink()
    rc, out, _ = run(capsys, "snapshot", "--json", "--root", str(a))
    doc = json.loads(out)
    assert rc == 0 and doc["rates_basis"] == "none" and doc["interval_s"] is None
    eth0 = doc["interfaces"]["eth0"]
    assert eth0["rx_bytes_per_s"] is None and eth0["counters"]["rx_bytes"] == 10**12
    assert all(c["softirq_pct"] is None and c["totals"]["net_rx"] is not None for c in doc["cpus"])


def test_two_captures_give_the_rates_over_their_own_interval(tmp_path, capsys):
    a, b = pair(tmp_path, 10)
    rc, out, _ = run(capsys, "snapshot", "--json", "--root", str(a), "--root", str(b))
    doc = json.loads(out)
    assert rc == 0 and doc["rates_basis"] == "between_captures" and doc["interval_s"] == 10.0
    assert doc["interfaces"]["eth0"]["rx_bytes_per_s"] == LINK_RX_BYTES_RATE
    assert doc["interfaces"]["eth0"]["rx_dropped_per_s"] == 11.0
    assert [c["net_rx_per_s"] for c in doc["cpus"]] == [NET_RX_RATE] * 4
    assert [c["softirq_pct"] for c in doc["cpus"]] == [15.0] * 4
    assert not any(c["counter_reset"] for c in doc["cpus"])


def test_a_counter_reset_between_captures_is_detected(tmp_path, capsys):
    a, b = pair(tmp_path, 10)
    (b / ETH0 / "statistics/rx_bytes").write_text("5000\n")  # driver reloaded: from 0 again
    rc, out, _ = run(capsys, "snapshot", "--json", "--root", str(a), "--root", str(b))
    eth0 = json.loads(out)["interfaces"]["eth0"]
    assert eth0["counter_reset"] and eth0["rx_bytes_per_s"] == 500.0


@pytest.mark.parametrize("change,words", [
    (lambda a, b: (b / "proc/uptime").write_text("100.0 1.0\n"), "rebooted"),
    (lambda a, b: (b / "proc/sys/kernel/hostname").write_text("other\n"), "two hosts"),
    (lambda a, b: (b / "proc/uptime").unlink(), "uptime"),
])
def test_captures_that_cannot_give_rates_are_refused_in_one_line(tmp_path, capsys, change, words):
    a, b = pair(tmp_path, 10)
    change(a, b)
    rc, out, err = run(capsys, "snapshot", "--root", str(a), "--root", str(b))
    assert rc == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_the_doctor_judges_two_captures_and_says_so(tmp_path, capsys):
    a, b = pair(tmp_path, 10)  # treegen's softnet drops 7/s per CPU
    rc, out, err = run(capsys, "doctor", "--json", "--root", str(a), "--root", str(b))
    doc = json.loads(out)
    assert "softnet-drops:host" in {f["id"] for f in doc["findings"]}
    assert doc["basis"].startswith("two captures 10.00 s apart") and doc["seconds"] == 10.0


def test_the_doctor_judges_one_capture_since_boot_and_says_so(tmp_path, capsys):
    a, _ = pair(tmp_path, 10)
    b = generate_tree(tmp_path / "late", cpus=4, irqs=12, queues=4, step=3600)
    rc, out, err = run(capsys, "doctor", "--root", str(b))
    assert "judged on one capture: figures are since-boot averages" in out.splitlines()[1]
    assert "softnet-drops:host" in out  # 7 drops/s per CPU for an hour, averaged over the uptime
    rc, out, err = run(capsys, "doctor", "--root", str(a))
    assert "softnet-drops" not in out  # no drop since boot


def test_the_doctor_counts_since_boot_drops_per_hour_of_uptime_from_the_files(tmp_path, capsys):
    b = generate_tree(tmp_path / "late", cpus=4, irqs=12, queues=4, step=3600)
    rc, out, err = run(capsys, "doctor", "--root", str(b))
    head = out.splitlines()[0]
    assert "one capture" in head and "samples" not in head
    up = float((b / "proc/uptime").read_text().split()[0])
    rows = [line.split() for line in (b / "proc/net/softnet_stat").read_text().splitlines()]
    dropped = sum(int(r[1], 16) for r in rows)
    squeezed = sum(int(r[2], 16) for r in rows)
    assert "softnet drops" in out and "on average since boot" in out
    assert (f"since boot: {dropped:,} drops in {up / 3600:.1f} h of uptime = "
            f"{dropped * 3600 / up:,.0f} per hour") in out
    if "time-squeeze:host" in out:  # below its threshold in this tree, judged the same way
        assert f"since boot: {squeezed:,} time_squeeze events" in out
    rc, out, err = run(capsys, "doctor", "--root", str(b), "--root", str(b))
    assert "since boot:" not in out  # refused or between captures: never since-boot wording


def test_the_text_report_says_since_boot_or_totals_only_never_an_interval(tmp_path, capsys):
    a, b = pair(tmp_path)
    rc, out, err = run(capsys, "snapshot", "--root", str(a))
    assert rc == 0 and "since-boot averages over 86400s of uptime" in out.splitlines()[0]
    assert "interval" not in out.splitlines()[0]
    rc, out, err = run(capsys, "snapshot", "--root", str(a), "--root", str(b))
    assert rc == 0 and "between captures 10.00s apart" in out.splitlines()[0]
    (a / "proc/uptime").unlink()
    rc, out, err = run(capsys, "snapshot", "--root", str(a))
    assert rc == 0 and "totals only (no interval)" in out.splitlines()[0]
