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
