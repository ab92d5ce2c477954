"""The live view on a captured tree never looks live: its header names the captured host,
kernel and capture time, not the clock (issue 27)."""

from __future__ import annotations

import os
import tarfile

from treegen import generate_tree
from nettop.capture.archive import capture_roots, extract
from nettop.kernel.sysroot import SysRoot
from nettop.tui.app import NettopApp
from nettop.tui.source import LiveSource


async def _header(root: SysRoot) -> str:
    src = LiveSource(root, None, interval=0.2)
    app = NettopApp(src)
    async with app.run_test(size=(160, 40)) as pilot:
        for _ in range(100):
            if app.latest is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.1)
        return str(app.query_one("#header").render())


async def test_a_captured_tree_shows_its_host_kernel_and_capture_time(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=4, irqs=12, queues=4)
    when = 1_700_000_000  # 2023-11-14 22:13:20 UTC
    for rel in ("proc/uptime", "proc/net/dev", "proc/stat", "proc/net/softnet_stat", "proc/softirqs"):
        if (tree / rel).exists():
            os.utime(tree / rel, (when, when))
    arc = tmp_path / "t.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(tree), arcname="host")
    (root,) = capture_roots(extract(str(arc)))  # the archive keeps the files' times
    header = await _header(SysRoot(str(root)))
    assert "nettop CAPTURE (not live)" in header and "live" not in header.replace("(not live)", "")
    assert "gen4" in header and "6.1.0-generated-amd64" in header
    assert "captured 2023-11-14 22:13:20 UTC" in header


async def test_a_static_capture_shows_since_boot_averages_not_zeros(tmp_path):
    tree = generate_tree(tmp_path / "t", cpus=4, irqs=12, queues=4)
    arc = tmp_path / "t.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(tree), arcname="host")
    (root,) = capture_roots(extract(str(arc)))
    src = LiveSource(SysRoot(str(root)), None, interval=0.2)
    app = NettopApp(src)
    async with app.run_test(size=(160, 40)) as pilot:
        for _ in range(100):
            if app.latest is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        header = str(app.query_one("#header").render())
        points = src.timeline.points()
    assert len(points) == 2  # read once: the host at boot, then the capture
    assert points[-1].rates.links["eth0"].rx_bytes_per_s == 10**12 / 86400
    assert "since boot" in header and "every" not in header


def _archive(tmp_path, when: int, uptime: bool = True):
    tree = generate_tree(tmp_path / "t", cpus=4, irqs=12, queues=4)
    if not uptime:
        (tree / "proc/uptime").unlink()
    for rel in ("proc/uptime", "proc/net/dev", "proc/stat", "proc/net/softnet_stat", "proc/softirqs"):
        if (tree / rel).exists():
            os.utime(tree / rel, (when, when))
    arc = tmp_path / "t.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(tree), arcname="host")
    return arc


def test_a_capture_s_json_time_is_its_capture_time_not_the_reading(tmp_path, capsys):
    import json

    from nettop.cli import main

    arc = _archive(tmp_path, 1_700_000_000)
    assert main(["snapshot", "--json", "--root", str(arc)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time"].startswith("2023-11-14T22:13:20")


async def test_a_recording_of_a_capture_replays_at_its_capture_time_and_never_looks_live(tmp_path, capsys):
    from nettop.cli import main
    from nettop.record.replay import ReplaySource
    from nettop.record.store import Reader

    arc = _archive(tmp_path, 1_700_000_000)
    out = tmp_path / "cap.nettop"
    assert main(["record", "--root", str(arc), "-o", str(out)]) == 0  # returns at once
    rec = Reader(str(out))
    assert len(rec) == 2 and rec.meta["captured"] == "1"
    assert [s.t_wall for s in rec.snapshots()] == [1_700_000_000 - 86400.0, 1_700_000_000]
    src = ReplaySource(str(out), speed=1)
    app = NettopApp(src)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):
            if app.latest is not None and src.at_end:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        header = str(app.query_one("#header").render())
        rates = app.latest.rates
    assert src.at_end  # the uptime between boot and capture is not waited through
    assert header.startswith(" nettop replay CAPTURE") or "nettop replay CAPTURE" in header
    assert "captured 2023-11-14 22:13:20 UTC" in header
    assert rates.links["eth0"].rx_bytes_per_s == 10**12 / 86400


async def test_a_capture_without_uptime_shows_totals_only_never_rates_of_zero(tmp_path):
    arc = _archive(tmp_path, 1_700_000_000, uptime=False)
    (root,) = capture_roots(extract(str(arc)))
    src = LiveSource(SysRoot(str(root)), None, interval=0.2)
    app = NettopApp(src)
    async with app.run_test(size=(160, 40)) as pilot:
        for _ in range(100):
            if app.latest is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        header = str(app.query_one("#header").render())
        points = src.timeline.points()
    assert len(points) == 1 and points[0].rates is None  # read once, nothing divided
    assert "totals only" in header and "every" not in header


async def test_the_doctor_judges_a_capture_over_its_uptime_in_view_record_and_report(tmp_path, capsys):
    from nettop.cli import main

    tree = generate_tree(tmp_path / "t", cpus=4, irqs=12, queues=4, step=3600)  # softnet drops since boot
    arc = tmp_path / "t.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(tree), arcname="host")
    out = tmp_path / "cap.nettop"
    assert main(["record", "--root", str(arc), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    report = capsys.readouterr().out
    assert "a captured host (not live)" in report and "crit softnet-drops:host" in report
    (root,) = capture_roots(extract(str(arc)))
    header = await _header(SysRoot(str(root)))
    assert "findings" in header and "crit" in header  # a 5 s window would hold no rate
