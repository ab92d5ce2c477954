"""ethtool over netlink, asked of the real kernel: eth0 read only (compared with the ethtool
CLI), the lab veth for changes and for the kernel's own refusals with their extack text.
The multi-queue NIC success paths (coalescing, rings) run in the qemu VM tier."""

from __future__ import annotations

import errno
import re

import pytest
from lab import run

from nettop.kernel import netlink as nl
from nettop.kernel.ethtool_nl import (CHANNELS, COALESCE, EthtoolNetlink, bitset_names, decode, encode,
                               encode_features)


@pytest.fixture
def eth():
    with EthtoolNetlink() as e:
        yield e


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1]


def _cli_numbers(text: str) -> dict[str, int]:
    """"RX:\t256" lines of `ethtool -g/-l` → {"rx": 256}; n/a lines left out."""
    out = {}
    for name, value in re.findall(r"^([A-Za-z ]+):\s+(\d+)\s*$", text, re.M):
        out[name.strip().lower().replace(" ", "-")] = int(value)
    return out


def test_eth0_rings_and_channels_agree_with_ethtool(eth):
    rings = eth.get_rings("eth0")
    g = run(["ethtool", "-g", "eth0"]).stdout
    cur = _cli_numbers(_section(g, "Current hardware settings:"))
    mx = _cli_numbers(_section(g, "Pre-set maximums:").split("Current hardware settings:")[0])
    assert {k: rings[k] for k in ("rx", "tx")} == {k: cur[k] for k in ("rx", "tx")}
    assert {k: rings[f"{k}-max"] for k in ("rx", "tx")} == {k: mx[k] for k in ("rx", "tx")}
    chans = eth.get_channels("eth0")
    lcli = run(["ethtool", "-l", "eth0"]).stdout
    cur = _cli_numbers(_section(lcli, "Current hardware settings:"))
    assert {k: v for k, v in chans.items() if not k.endswith("-max")} == cur  # n/a kinds absent in both


def test_eth0_coalescing_agrees_with_ethtool(eth):
    coal = eth.get_coalesce("eth0")
    c = run(["ethtool", "-c", "eth0"]).stdout
    cli = {k: int(v) for k, v in re.findall(r"^([a-z-]+):\s+(\d+)\s*$", c, re.M)}
    assert {k: v for k, v in coal.items() if not isinstance(v, bool)} == cli
    adaptive = re.search(r"Adaptive RX:\s+(\S+)\s+TX:\s+(\S+)", c)
    assert adaptive is not None
    for key, shown in (("adaptive-rx", adaptive.group(1)), ("adaptive-tx", adaptive.group(2))):
        assert coal.get(key) == ({"on": True, "off": False}.get(shown))  # n/a: absent


def test_eth0_offloads_agree_with_ethtool_and_fixed_ones_are_left_out(eth):
    feats = eth.get_features("eth0")
    k = run(["ethtool", "-k", "eth0"]).stdout
    shown = {name: (state, bool(fixed))
             for name, state, fixed in re.findall(r"^([a-z-]+): (on|off)( \[fixed\])?$", k, re.M)}
    for short, long_name in (("gro", "generic-receive-offload"), ("gso", "generic-segmentation-offload"),
                             ("tso", "tcp-segmentation-offload"), ("lro", "large-receive-offload")):
        on, fixed = shown[long_name]
        if fixed:
            assert short not in feats
        else:
            assert feats[short] is (on == "on")


def test_veth_channels_change_reads_back_and_above_maximum_is_the_kernels_einval(veth_lab, eth):
    ifn = veth_lab.host_if
    before = eth.get_channels(ifn)
    assert before["rx"] == 4 and before["rx-max"] >= 4
    with pytest.raises(nl.NetlinkError) as exc:
        eth.set_channels(ifn, {"rx": before["rx-max"] + 1})
    assert exc.value.errno == errno.EINVAL
    assert exc.value.extack == "requested channel count exceeds maximum"
    assert eth.get_channels(ifn) == before
    try:
        eth.set_channels(ifn, {"rx": 2})
        assert eth.get_channels(ifn)["rx"] == 2
        assert re.search(r"Current hardware settings:\s+RX:\s+2", run(["ethtool", "-l", ifn]).stdout)
    finally:
        eth.set_channels(ifn, {"rx": before["rx"]})
    assert eth.get_channels(ifn) == before


def test_veth_gro_toggles_and_a_fixed_offload_is_refused(veth_lab, eth):
    ifn = veth_lab.host_if
    was = eth.get_features(ifn)["gro"]
    try:
        eth.set_features(ifn, {"gro": not was})
        assert eth.get_features(ifn)["gro"] is (not was)
        line = [x for x in run(["ethtool", "-k", ifn]).stdout.splitlines() if x.startswith("generic-receive-offload")]
        assert line == [f"generic-receive-offload: {'off' if was else 'on'}"]
    finally:
        eth.set_features(ifn, {"gro": was})
    before = eth.get_features(ifn)
    with pytest.raises(nl.NetlinkError) as exc:
        eth.set_features(ifn, {"lro": True})
    assert exc.value.errno == errno.EOPNOTSUPP and "lro" in str(exc.value)
    assert eth.get_features(ifn) == before


def test_features_read_each_time_see_a_change_made_by_another_tool(veth_lab, eth):
    # get_features reuses its decoding while the kernel's reply is unchanged: a change made
    # outside nettop (here the ethtool CLI) must still show on the very next read
    ifn = veth_lab.host_if
    was = eth.get_features(ifn)
    mine = eth.get_features(ifn)
    mine["gro"] = not mine["gro"]  # a caller's copy: changing it changes nothing kept
    assert eth.get_features(ifn) == was
    try:
        run(["ethtool", "-K", ifn, "gro", "off" if was["gro"] else "on"])
        assert eth.get_features(ifn) == {**was, "gro": not was["gro"]}
    finally:
        run(["ethtool", "-K", ifn, "gro", "on" if was["gro"] else "off"])
    assert eth.get_features(ifn) == was


def test_veth_has_no_coalescing_or_rings_and_says_so(veth_lab, eth):
    ifn = veth_lab.host_if
    for call in (lambda: eth.get_coalesce(ifn), lambda: eth.set_coalesce(ifn, {"rx-usecs": 50}),
                 lambda: eth.get_rings(ifn), lambda: eth.set_rings(ifn, {"rx": 64})):
        with pytest.raises(nl.NetlinkError) as exc:
            call()
        assert exc.value.errno == errno.EOPNOTSUPP


def test_a_missing_interface_is_enodev_with_the_kernels_words(eth):
    with pytest.raises(nl.NetlinkError) as exc:
        eth.get_rings("ntl-nosuch0")
    assert exc.value.errno == errno.ENODEV and exc.value.extack == "no device matches name"


def test_codec_round_trip_and_unknown_names():
    raw = encode({"rx-usecs": 50, "adaptive-rx": True}, COALESCE, "coalesce")
    assert decode(nl.attrs(memoryview(raw)), COALESCE) == {"rx-usecs": 50, "adaptive-rx": True}
    with pytest.raises(ValueError, match="no settable parameter 'rx-max'"):
        encode({"rx-max": 4}, CHANNELS, "channels")
    with pytest.raises(ValueError, match="'bogus'"):
        encode({"bogus": 1}, COALESCE, "coalesce")


def test_features_request_names_every_changeable_member_of_a_group():
    wanted = nl.attrs(memoryview(encode_features({"tso": False, "gro": True},
                                                 {"tx-tcp-segmentation", "tx-tcp6-segmentation", "rx-gro"})))
    bitset = wanted[3]
    names_on = bitset_names(bitset)  # a masked bitset: set bits carry VALUE
    listed = {nl.as_str(nl.attrs(b)[2]) for _, b in nl.attr_list(nl.attrs(bitset)[3])}
    assert listed == {"tx-tcp-segmentation", "tx-tcp6-segmentation", "rx-gro"}
    assert names_on == {"rx-gro"}


def test_interfaces_of_one_kind_share_a_decoding_and_each_still_reads_its_own(veth_lab, eth):
    """Decodings are kept by the kernel's bitsets, not by interface name: many veths of
    one kind keep one entry (a host whose containers make thousands keeps a few, not a
    thousand ~7 kB ones), and an interface whose offloads differ from its twins' (gro
    turned off by the ethtool CLI) still reads its own, as do the twins."""
    ifn = veth_lab.host_if
    names = [f"ntfe{k}" for k in range(3)]
    try:
        for k, name in enumerate(names):
            run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"ntfp{k}"])
        base = eth.get_features(ifn)
        assert [eth.get_features(n) for n in names] == [base] * 3
        kept = len(eth._features_seen)
        for k in range(3):
            eth.get_features(f"ntfp{k}")
        assert len(eth._features_seen) == kept  # six more veths of the same kind: no new entry
        run(["ethtool", "-K", names[1], "gro", "off" if base["gro"] else "on"])
        assert [eth.get_features(n)["gro"] for n in names] == [base["gro"], not base["gro"], base["gro"]]
        assert eth.get_features(ifn) == base
    finally:
        for name in names:
            run(["ip", "link", "del", name], check=False)
