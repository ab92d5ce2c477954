"""The real-driver tier: nettop on a 4-queue virtio-net NIC and an e1000e NIC, under traffic.

Boots Debian's stock kernel (the VM tier's guest) with 4 vCPUs and both NICs
(tests/vm/realdrv.py) and runs tests/vm_realdrv inside; the guest's recording of its
changes comes back and is replayed and reported here. Any failed, skipped or missing
guest test fails this one (docs/vm-tiers.md says what the tier proves and what not).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nettop.record.replay import ReplaySource
from vm import realdrv

pytestmark = pytest.mark.vm

GUEST_TESTS = 16  # test_real_drivers.py 9, test_sos_guest.py 3, test_survive_guest.py 4


@pytest.mark.timeout(3600)
def test_the_real_driver_tier_passes_and_its_recording_replays(tmp_path):
    reason = realdrv.why_not()
    if reason:
        pytest.skip(reason)
    try:
        outcome = realdrv.run(timeout=3300)  # sos report ~6 min and the survive checks ~5-10 min of it
    except RuntimeError as exc:
        pytest.fail(str(exc))
    tail = outcome.output[-8000:]
    summary = re.findall(r"^=*\s*(\d+ (?:passed|failed|errors?)\b.*?) in [0-9.]+s", outcome.output, re.M)
    assert outcome.rc == 0 and summary, f"guest exit {outcome.rc}:\n{tail}"
    assert re.search(rf"\b{GUEST_TESTS} passed\b", summary[-1]), f"{summary[-1]}\n{tail}"
    for bad in ("failed", "error", "skipped"):
        assert bad not in summary[-1], f"{summary[-1]}\n{tail}"
    assert len(realdrv.effects(outcome.output)) >= 8, tail

    print("\n".join("\t".join(row) for row in realdrv.effects(outcome.output)))
    paths = realdrv.write_kept(outcome, tmp_path)
    exp = tmp_path / "experiment.md"
    assert exp.exists(), "the guest's experiment left no table"
    print(exp.read_text())
    rec = next((p for p in paths if p.name == "realdrv.nettop"), None)
    assert rec is not None, f"the guest left no recording: {[p.name for p in paths]}"
    src = ReplaySource(str(rec))
    try:
        tuning = [e for e in src.events if e.kind == "tuning"]
    finally:
        src.reader.close()
    for word in ("irq", "rps", "coalesce", "channels"):
        assert any(word in e.text for e in tuning), (word, [e.text for e in tuning])
    nettop = str(Path(sys.executable).with_name("nettop"))
    report = subprocess.run([nettop, "report", str(rec)], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    for word in ("irq", "rps", "coalesce", "channels"):
        assert re.search(rf"^\|.*{word}.*→", report.stdout, re.M), (word, report.stdout[-3000:])

    # the guest's sosreport, opened here as a support engineer would open it: its NICs'
    # drivers and settings come from its own sos_commands, not from this host
    arc = next((p for p in paths if p.name == "sos-guest.tar.xz"), None)
    assert arc is not None, f"the guest's sos test left no archive: {[p.name for p in paths]}"
    snap = subprocess.run([nettop, "snapshot", "--json", "--root", str(arc)], capture_output=True, text=True)
    assert snap.returncode == 0, snap.stderr
    nics = {i["driver"]: i for i in json.loads(snap.stdout)["interfaces"].values() if i["driver"]}
    assert nics["virtio_net"]["channels"]["combined"] == 4 and nics["e1000e"]["coalesce"] is not None, nics
