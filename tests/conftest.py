"""Shared fixtures: the real-kernel lab and the captured driver trees."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import lab as _lab  # noqa: E402

DATA = Path(__file__).parent / "data"

# tests/vm runs inside the VM tier's guest only (test_vm_tier.py boots it and sets this)
collect_ignore = [] if os.environ.get("NETTOP_IN_VM") else ["vm"]
# tests/vm_realdrv runs inside the real-driver guest only (test_vm_realdrv.py boots it)
if not os.environ.get("NETTOP_IN_REALDRV"):
    collect_ignore.append("vm_realdrv")


@pytest.fixture(scope="session", autouse=True)
def _sweep_lab_leftovers():
    if _lab.can_build_lab() is None:
        _lab.sweep_leftovers()
    yield


@pytest.fixture
def veth_lab():
    """A multi-queue veth pair, one end in the root namespace; skipped without root."""
    reason = _lab.can_build_lab()
    if reason:
        pytest.skip(reason)
    with _lab.veth_lab() as lab:
        yield lab


@pytest.fixture
def deflate_irq():
    """The virtio balloon's deflate (or inflate) IRQ: harmless to move; its affinity is
    put back afterwards whatever the test did."""
    irq = _lab.irq_named("virtio0-deflate") or _lab.irq_named("virtio0-inflate")
    if irq is None:
        pytest.skip("no virtio balloon IRQ to move on this machine")
    path = f"/proc/irq/{irq}/smp_affinity_list"
    original = _lab.sysfs(path)
    try:
        yield irq
    finally:
        with open(path, "w") as f:
            f.write(original)


@pytest.fixture
def data_dir() -> Path:
    return DATA


def pytest_report_header(config):
    return f"nettop lab: {'root' if os.geteuid() == 0 else 'not root: lab tests skip'}"
