"""Pure parts of the prober: target strings, default gateway, ICMP packets, cookies.

The route tables are captured from this VM's kernel (6.18): an IPv4 default route via
192.0.2.1 and an IPv6 one via fd00::1, plus the kernel's reject route on lo.
"""

from __future__ import annotations

import socket
import struct

import pytest

from nettop.ping import default_targets, parse_target
from nettop.ping import icmp
from nettop.ping.resolve import parse_ipv6_route_gateway, parse_route_gateway
from nettop.ping.sockio import SO_EE_ORIGIN_ICMP, parse_ancillary
from nettop.kernel.sysroot import SysRoot

ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""
IPV6_ROUTE = """\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000003 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
"""


def test_ipv4_default_gateway_from_proc_net_route():
    assert parse_route_gateway(ROUTE) == "192.0.2.1"


def test_ipv4_lowest_metric_default_wins_and_non_default_routes_are_ignored():
    two = ROUTE + "eth1\t00000000\t0100000A\t0003\t0\t0\t50\t00000000\t0\t0\t0\n"
    two = two.replace("010200C0\t0003\t0\t0\t0", "010200C0\t0003\t0\t0\t100")
    assert parse_route_gateway(two) == "10.0.0.1"
    assert parse_route_gateway(ROUTE.splitlines()[0] + "\n" + ROUTE.splitlines()[2]) is None


def test_ipv6_default_gateway_skips_the_reject_route_on_lo():
    assert parse_ipv6_route_gateway(IPV6_ROUTE) == "fd00::1"
    reject_only = IPV6_ROUTE.splitlines()[-1]
    assert parse_ipv6_route_gateway(reject_only) is None


def test_ipv6_link_local_gateway_carries_its_interface():
    line = ("00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
            "fe800000000000000000000000000001 00000400 00000002 00000000 00000003     ens5")
    assert parse_ipv6_route_gateway(line) == "fe80::1%ens5"


def test_malformed_route_lines_are_skipped():
    assert parse_route_gateway("header\neth0\tzz\t010200C0\t0003\n") is None
    assert parse_ipv6_route_gateway("garbage\n") is None


def test_default_targets_from_a_captured_root(tmp_path):
    (tmp_path / "proc/net").mkdir(parents=True)
    (tmp_path / "proc/net/route").write_text(ROUTE.splitlines()[0] + "\n")
    (tmp_path / "proc/net/ipv6_route").write_text(IPV6_ROUTE)
    assert default_targets(SysRoot(str(tmp_path))) == ["fd00::1"]
    (tmp_path / "proc/net/route").write_text(ROUTE)
    assert default_targets(SysRoot(str(tmp_path))) == ["192.0.2.1"]


def test_no_gateway_and_no_files_give_the_empty_state(tmp_path):
    assert default_targets(SysRoot(str(tmp_path))) == []


def test_live_default_target_agrees_with_ip_route():
    import json
    import subprocess
    routes = json.loads(subprocess.run(["ip", "-j", "-4", "route", "show", "default"],
                                       capture_output=True, text=True, check=True).stdout)
    gateways = [r["gateway"] for r in routes if "gateway" in r]
    if not gateways:
        pytest.skip("this host has no IPv4 default gateway")
    assert default_targets()[0] in gateways


@pytest.mark.parametrize("text,kind,host,port", [
    ("192.0.2.1", "icmp", "192.0.2.1", 0),
    ("gw.example", "icmp", "gw.example", 0),
    ("fe80::1%eth0", "icmp", "fe80::1%eth0", 0),
    ("[2001:db8::1]", "icmp", "2001:db8::1", 0),
    ("icmp://10.0.0.1", "icmp", "10.0.0.1", 0),
    ("tcp://example.org:443", "tcp", "example.org", 443),
    ("udp://[2001:db8::1]:53", "udp", "2001:db8::1", 53),
    ("TCP://h:22", "tcp", "h", 22),
])
def test_parse_target(text, kind, host, port):
    spec = parse_target(text)
    assert (spec.text, spec.kind, spec.host, spec.port) == (text, kind, host, port)


@pytest.mark.parametrize("text", ["", "tcp://host", "tcp://host:0", "udp://host:70000",
                                  "tcp://2001:db8::1:80", "http://x", "tcp://:80"])
def test_bad_targets_raise_one_line(text):
    with pytest.raises(ValueError) as e:
        parse_target(text)
    assert "\n" not in str(e.value)


def test_echo_request_checksum_verifies_and_cookie_round_trips():
    token = bytes.fromhex("0123456789abcdef")
    payload = icmp.make_payload(token, probe=0x1_0000_0005, sent_ns=123456789)
    assert len(payload) == icmp.DEFAULT_PAYLOAD
    pkt = icmp.build_echo(socket.AF_INET, ident=0xBEEF, seq=0x1_0000_0005, payload=payload)
    assert icmp.checksum(pkt) == 0  # a correct checksum sums to zero
    assert struct.unpack("!BBHHH", pkt[:8])[3:] == (0xBEEF, 5)
    cookie = icmp.read_cookie(pkt[8:], token)
    assert cookie is not None and (cookie.probe, cookie.sent_ns) == (0x1_0000_0005, 123456789)
    assert icmp.read_cookie(pkt[8:], b"\0" * 8) is None  # another instance's token


def test_parse_echo_reply_with_and_without_the_ipv4_header():
    token = b"T" * 8
    body = icmp.make_payload(token, 7, 0)
    reply = struct.pack("!BBHHH", 0, 0, 0, 42, 7) + body
    iphdr = bytes([0x45]) + bytes(19)
    assert icmp.parse_echo_reply(socket.AF_INET, iphdr + reply, True) == (42, 7, body)
    assert icmp.parse_echo_reply(socket.AF_INET, reply, False) == (42, 7, body)
    request = struct.pack("!BBHHH", 8, 0, 0, 42, 7) + body
    assert icmp.parse_echo_reply(socket.AF_INET, request, False) is None
    v6 = struct.pack("!BBHHH", 129, 0, 0, 42, 7) + body
    assert icmp.parse_echo_reply(socket.AF_INET6, v6, False) == (42, 7, body)
    assert icmp.parse_echo_reply(socket.AF_INET, b"\x45\x00", True) is None


def test_find_cookie_inside_a_quoted_packet():
    token = b"K" * 8
    quoted = bytes(28) + struct.pack("!BBHHH", 8, 0, 0, 1, 2) + icmp.make_payload(token, 2, 9)
    cookie = icmp.find_cookie(quoted, token)
    assert cookie is not None and cookie.probe == 2
    assert icmp.find_cookie(quoted[:40], token) is None  # cut short by the quoting router


def test_icmp_error_words():
    assert icmp.describe_icmp_error(socket.AF_INET, 3, 1) == "host unreachable"
    assert icmp.describe_icmp_error(socket.AF_INET6, 1, 3) == "address unreachable"
    assert icmp.is_port_unreachable(socket.AF_INET, 3, 3)
    assert icmp.is_port_unreachable(socket.AF_INET6, 1, 4)
    assert not icmp.is_port_unreachable(socket.AF_INET, 3, 1)


def test_parse_ancillary_timestamp_and_extended_error():
    stamp = struct.pack("@qqqqqq", 5, 250, 0, 0, 0, 0)
    ee = struct.pack("=IBBBBII", 113, SO_EE_ORIGIN_ICMP, 3, 1, 0, 0, 0)
    offender = struct.pack("=HH4s8x", socket.AF_INET, 0, socket.inet_aton("198.18.0.1"))
    ns, err = parse_ancillary([(socket.SOL_SOCKET, 37, stamp), (socket.SOL_IP, 11, ee + offender)])
    assert ns == 5_000_000_250
    assert err is not None and (err.origin, err.type, err.code) == (SO_EE_ORIGIN_ICMP, 3, 1)
    assert err.offender == "198.18.0.1"
    assert parse_ancillary([]) == (None, None)


@pytest.mark.parametrize("interval", [0.0005, 10.5, 0])
def test_interval_outside_1ms_to_10s_is_refused(interval):
    from nettop.ping import Prober
    with pytest.raises(ValueError, match="interval"):
        Prober(["127.0.0.1"], interval_s=interval)


def test_interval_limits_are_accepted_and_keys_keep_the_users_spelling():
    from nettop.ping import Prober
    for interval in (0.001, 10.0):
        p = Prober(["TCP://h:22", "127.0.0.1", "127.0.0.1"], interval_s=interval)
        assert p.targets == ["TCP://h:22", "127.0.0.1"]


def test_prober_without_targets_is_an_empty_state_not_an_error():
    from nettop.ping import NO_DEFAULT_GATEWAY, Prober
    p = Prober([])
    p.start()
    assert p.take() == {} and p.methods() == {}
    p.stop()
    p.stop()  # idempotent
    assert "default gateway" in NO_DEFAULT_GATEWAY and "\n" not in NO_DEFAULT_GATEWAY
