"""What the host's kernel cannot answer, on a stock Debian kernel under qemu: coalescing,
rings and channels on a multi-queue netdevsim device, and fq_codel / fq / cake / mq swaps.

Runs only inside the VM tier's guest (tests/test_vm_tier.py boots it and runs this
directory there). Everything goes through the same Tuner, journal and netlink code as on
the host, and is checked with the real `ethtool` and `tc` the operator would use.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nettop.actions import ActionError, Change, Journal, NeedsConfirm, Tuner
from nettop.actions.cli_set import build_changes
from nettop.cli import build_parser
from nettop.kernel.ethtool_nl import EthtoolNetlink

NSIM_ID = 10


def sh(*argv: str) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout


def changes(*words: str) -> list[Change]:
    """The Changes of `nettop set WORDS...`, parsed as the CLI parses them."""
    return build_changes(build_parser().parse_args(["set", *words]))


def ethtool_field(section: str, text: str, name: str) -> str:
    """A value of `ethtool -g/-l` output in its "Current hardware settings" part."""
    part = text.split(section, 1)[1]
    for line in part.splitlines():
        if line.strip().startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{name} not in {text}")


def tc_root(ifname: str) -> dict:
    return next(q for q in json.loads(sh("tc", "-j", "qdisc", "show", "dev", ifname)) if q.get("root"))


@pytest.fixture
def nsim():
    """A netdevsim device with one port and 4 queues, up; removed afterwards."""
    sh("modprobe", "netdevsim")
    Path("/sys/bus/netdevsim/new_device").write_text(f"{NSIM_ID} 1 4")
    net = Path(f"/sys/bus/netdevsim/devices/netdevsim{NSIM_ID}/net")
    try:
        for _ in range(100):
            if net.is_dir() and os.listdir(net):
                break
            time.sleep(0.05)
        ifname = os.listdir(net)[0]
        sh("ip", "link", "set", ifname, "up")
        yield ifname
    finally:
        Path("/sys/bus/netdevsim/del_device").write_text(str(NSIM_ID))


@pytest.fixture
def tuner(tmp_path):
    return Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)


def test_coalescing_is_set_read_back_by_ethtool_and_undone(nsim, tuner):
    res = tuner.apply(tuner.plan(changes("coalesce", nsim, "rx-usecs=50", "tx-frames=16", "adaptive-rx=on")))
    assert res[0].verified and res[0].after == {"rx-usecs": 50, "tx-frames": 16, "adaptive-rx": True}
    out = sh("ethtool", "-c", nsim)
    assert "rx-usecs: 50" in out and "tx-frames: 16" in out and "Adaptive RX: on" in out
    tuner.undo()
    out = sh("ethtool", "-c", nsim)
    assert "rx-usecs: 0" in out and "tx-frames: 0" in out and "Adaptive RX: off" in out


def test_a_coalescing_value_out_of_range_is_refused_before_any_write(nsim, tuner):
    with pytest.raises(ActionError) as exc:
        tuner.plan(changes("coalesce", nsim, "rx-usecs=99999999999"))
    assert exc.value.errno == errno.ERANGE
    assert "rx-usecs: 0" in sh("ethtool", "-c", nsim)


def test_ring_sizes_ask_first_then_change_and_undo(nsim, tuner):
    plans = tuner.plan(changes("rings", nsim, "rx=512", "tx=256"))
    with pytest.raises(NeedsConfirm):
        tuner.apply(plans)
    assert ethtool_field("Current", sh("ethtool", "-g", nsim), "RX") == "0"
    res = tuner.apply(plans, confirmed=True)
    assert res[0].verified
    out = sh("ethtool", "-g", nsim)
    assert ethtool_field("Current", out, "RX") == "512" and ethtool_field("Current", out, "TX") == "256"
    tuner.undo()
    assert ethtool_field("Current", sh("ethtool", "-g", nsim), "RX") == "0"


def test_a_ring_above_the_device_maximum_is_refused_and_the_kernel_says_why(nsim, tuner):
    with pytest.raises(ActionError) as exc:
        tuner.plan(changes("rings", nsim, "rx=99999"))
    assert "maximum is 4096" in str(exc.value) and exc.value.errno == errno.ERANGE
    with EthtoolNetlink() as nl, pytest.raises(OSError) as raw:  # what the kernel itself answers
        nl.set_rings(nsim, {"rx": 99999})
    assert raw.value.errno == errno.EINVAL and "exceeds maximum" in (raw.value.extack or "")
    assert ethtool_field("Current", sh("ethtool", "-g", nsim), "RX") == "0"


def test_channels_recreate_the_queues_and_undo_brings_them_back(nsim, tuner):
    queues = Path(f"/sys/class/net/{nsim}/queues")
    assert {"rx-3", "tx-3"} <= set(os.listdir(queues))
    res = tuner.apply(tuner.plan(changes("channels", nsim, "combined=2")), confirmed=True)
    assert res[0].verified
    assert ethtool_field("Current", sh("ethtool", "-l", nsim), "Combined") == "2"
    assert sorted(os.listdir(queues)) == ["rx-0", "rx-1", "tx-0", "tx-1"]
    tuner.undo()
    assert ethtool_field("Current", sh("ethtool", "-l", nsim), "Combined") == "4"
    assert "rx-3" in os.listdir(queues)


def test_channels_above_the_maximum_are_refused_with_the_kernels_sentence(nsim, tuner):
    with pytest.raises(ActionError) as exc:
        tuner.plan(changes("channels", nsim, "combined=9"))
    assert "maximum is 4" in str(exc.value)
    with EthtoolNetlink() as nl, pytest.raises(OSError) as raw:
        nl.set_channels(nsim, {"combined": 9})
    assert "requested channel count exceeds maximum" in (raw.value.extack or "")
    assert ethtool_field("Current", sh("ethtool", "-l", nsim), "Combined") == "4"


def test_fq_codel_with_target_and_interval_then_undo(nsim, tuner):
    before = tc_root(nsim)["kind"]
    res = tuner.apply(tuner.plan(changes("qdisc", nsim, "fq_codel", "target=2000", "interval=50000", "limit=2048")),
                      confirmed=True)
    root = tc_root(nsim)
    assert root["kind"] == "fq_codel" and root["options"]["limit"] == 2048
    # CoDel stores time in 1024 ns units: tc prints 2000 µs back as 1999, and that is what was asked
    assert 1998 <= root["options"]["target"] <= 2000 and 49998 <= root["options"]["interval"] <= 50000
    assert res[0].verified, res[0].line()
    tuner.undo()
    assert tc_root(nsim)["kind"] == before


def test_fq_and_cake_replace_the_root(nsim, tuner):
    tuner.apply(tuner.plan(changes("qdisc", nsim, "fq", "limit=5000")), confirmed=True)
    root = tc_root(nsim)
    assert root["kind"] == "fq" and root["options"]["limit"] == 5000
    tuner.apply(tuner.plan(changes("qdisc", nsim, "cake", "bandwidth=100000000")), confirmed=True)
    root = tc_root(nsim)
    assert root["kind"] == "cake" and root["options"]["bandwidth"] == 12_500_000  # tc -j: bytes/s
    tuner.undo()
    assert tc_root(nsim)["kind"] == "fq"


def test_mq_with_an_fq_codel_child_per_tx_queue(nsim, tuner):
    tuner.apply(tuner.plan(changes("qdisc", nsim, "mq", "children=fq_codel", "target=3ms")), confirmed=True)
    qdiscs = json.loads(sh("tc", "-j", "qdisc", "show", "dev", nsim))
    assert tc_root(nsim)["kind"] == "mq"
    kids = [q for q in qdiscs if not q.get("root")]
    assert len(kids) == 4 and {q["kind"] for q in kids} == {"fq_codel"}
    assert {q["options"]["target"] for q in kids} <= {2998, 2999, 3000}


def test_the_cli_sets_coalescing_as_json_and_undoes_it(nsim, tmp_path):
    env = {"NETTOP_STATE_DIR": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    nettop = [sys.executable, "-m", "nettop.cli"]
    out = subprocess.run([*nettop, "set", "coalesce", nsim, "rx-usecs=30", "--json"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)["results"][0]
    assert result["verified"] and result["after"] == {"rx-usecs": 30}
    assert "rx-usecs: 30" in sh("ethtool", "-c", nsim)
    undo = subprocess.run([*nettop, "undo"], env=env, capture_output=True, text=True, timeout=300)
    assert undo.returncode == 0, undo.stderr
    assert "rx-usecs: 0" in sh("ethtool", "-c", nsim)


def test_the_collector_reads_coalescing_rings_and_channels_of_a_multiqueue_driver(nsim):
    from nettop.collectors.host import HostReader

    sh("ethtool", "-C", nsim, "rx-usecs", "8")
    sh("ethtool", "-G", nsim, "rx", "1024")
    with HostReader(ifnames=[nsim]) as reader:
        dev = reader.read().devices[nsim]
    assert dev.driver == "netdevsim"
    assert dev.coalesce is not None and dev.coalesce["rx-usecs"] == 8
    assert dev.rings is not None and dev.rings["rx"] == 1024 and dev.rings["rx-max"] == 4096
    assert dev.channels is not None and dev.channels["combined"] == 4 and dev.channels["combined-max"] == 4
    assert len([q for q in dev.queues if q.kind == "rx"]) == 4
