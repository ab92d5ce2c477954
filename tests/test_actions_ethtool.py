"""Coalescing and channels through ethtool netlink on a lab veth: the error this kernel really
gives for coalescing on veth, and a real channel change read back with `ethtool -l`.
The multi-queue NIC success paths (coalesce, rings) run in the qemu VM tier."""

from __future__ import annotations

import errno
import re

import pytest
from lab import run

from nettop.actions import ActionError, Change, Journal, Tuner
from nettop.actions.ethtool import Channels, Coalesce



@pytest.fixture
def tuner(tmp_path):
    t = Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)
    yield t
    t.revert_all()


def current_channels(ifname: str) -> dict[str, str]:
    out = run(["ethtool", "-l", ifname]).stdout
    current = out.split("Current hardware settings:")[1]
    return dict(re.findall(r"^(RX|TX):\s+(\S+)", current, re.M))


def test_coalescing_on_veth_is_refused_with_the_kernels_answer(veth_lab, tuner):
    with pytest.raises(ActionError) as exc:
        tuner.plan([Change(Coalesce(veth_lab.host_if, ("rx-usecs",)), {"rx-usecs": "50"})])
    assert exc.value.errno == errno.EOPNOTSUPP
    assert str(exc.value).startswith(f"coalesce {veth_lab.host_if}") and "\n" not in str(exc.value)
    assert "EOPNOTSUPP" in str(exc.value)
    assert not tuner.state().entries


def test_veth_channel_count_change_reads_back_like_ethtool_and_undoes(veth_lab, tuner):
    ifn = veth_lab.host_if
    assert current_channels(ifn) == {"RX": "4", "TX": "4"}
    plans = tuner.plan([Change(Channels(ifn, ("rx",)), {"rx": "2"})])
    assert "link drops" in plans[0].confirm
    res = tuner.apply(plans, confirmed=True)
    assert res[0].verified and res[0].after == {"rx": 2}
    assert current_channels(ifn)["RX"] == "2"
    tuner.undo()
    assert current_channels(ifn)["RX"] == "4"


def test_channel_count_above_the_maximum_changes_nothing(veth_lab, tuner):
    ifn = veth_lab.host_if
    with pytest.raises(ActionError) as exc:
        tuner.apply(tuner.plan([Change(Channels(ifn, ("rx",)), {"rx": "9"})]), confirmed=True)
    assert "maximum" in str(exc.value)
    assert current_channels(ifn) == {"RX": "4", "TX": "4"}
    assert tuner.state().undo == []


def test_unknown_coalesce_key_is_refused_before_any_write(veth_lab, tuner):
    with pytest.raises(ActionError) as exc:
        tuner.plan([Change(Coalesce(veth_lab.host_if, ("rx-bananas",)), {"rx-bananas": "1"})])
    assert "rx-bananas" in str(exc.value) or "EOPNOTSUPP" in str(exc.value)
