"""The raw netlink core: dumps, acknowledged requests and the kernel's extack text, asked
of the real kernel (a lab veth for the refusal, nlctrl and netdev for generic netlink)."""

from __future__ import annotations

import errno
import socket
import struct

import pytest

from nettop.kernel import netlink as nl

RTM_NEWQDISC, RTM_GETLINK, RTM_NEWLINK = 36, 18, 16
TCMSG = struct.Struct("=BxxxiIII")


def test_a_refused_request_carries_the_kernels_extack_text(veth_lab):
    idx = socket.if_nametoindex(veth_lab.host_if)
    body = TCMSG.pack(0, idx, 0, 0xFFFFFFFF, 0) + nl.attr(1, nl.cstr("nettop-no-such-qdisc"))
    with nl.NetlinkSocket(socket.NETLINK_ROUTE) as s:
        with pytest.raises(nl.NetlinkError) as exc:
            s.request(RTM_NEWQDISC, body, nl.NLM_F_ACK | 0x400 | 0x100, what=f"qdisc {veth_lab.host_if}")
        assert exc.value.errno == errno.ENOENT
        assert exc.value.extack == "Specified qdisc kind is unknown"
        assert str(exc.value) == (f"[Errno 2] qdisc {veth_lab.host_if}: No such file or directory: "
                                  "Specified qdisc kind is unknown")
        # the socket stays usable: a dump right after sees the veth
        links = s.request(RTM_GETLINK, struct.pack("=BxHiII", 0, 0, 0, 0, 0), nl.NLM_F_DUMP)
        assert idx in {struct.unpack_from("=BxHiII", m.payload)[2] for m in links}
        assert all(m.type == RTM_NEWLINK for m in links)


def test_generic_family_is_resolved_with_the_operations_this_kernel_has():
    with nl.GenlSocket("nlctrl") as s:
        assert s.family_id == nl.GENL_ID_CTRL and nl.CTRL_CMD_GETFAMILY in s.ops
    with nl.GenlSocket("netdev") as s:
        assert {10, 11} <= s.ops  # queue-get, napi-get (Linux 6.8+, this kernel 6.18)
        assert 200 not in s.ops


def test_a_family_the_kernel_does_not_have_is_enoent():
    with pytest.raises(nl.NetlinkError) as exc:
        nl.GenlSocket("nettop-nofam")
    assert exc.value.errno == errno.ENOENT and "nettop-nofam" in str(exc.value)


def _error_message(code: int, flags: int, inner: bytes, extack: str | None) -> tuple[memoryview, int]:
    payload = struct.pack("=i", -code) + inner
    if extack is not None:
        payload += nl.attr(nl.NLMSGERR_ATTR_MSG, nl.cstr(extack))
    return memoryview(payload), flags


@pytest.mark.parametrize("capped", [True, False])
def test_parse_error_finds_the_message_after_a_capped_or_whole_request(capped):
    request = nl.HDR.pack(nl.HDR.size + 8, 36, 5, 1, 0) + b"\x01\x02\x03\x04\x05\x06\x07\x08"
    inner = request[:nl.HDR.size] if capped else request
    flags = nl.NLM_F_ACK_TLVS | (nl.NLM_F_CAPPED if capped else 0)
    assert nl.parse_error(*_error_message(errno.EINVAL, flags, inner, "bad value")) == (errno.EINVAL, "bad value")
    assert nl.parse_error(*_error_message(errno.EINVAL, 0, inner, None)) == (errno.EINVAL, None)
    assert nl.parse_error(*_error_message(0, 0, inner, None)) == (0, None)


def test_attributes_round_trip_and_a_short_attribute_stops_parsing():
    raw = nl.attr(1, nl.u32(7)) + nl.attr(2, nl.cstr("eth0")) + nl.nest(3, nl.attr(1, nl.u8(1)))
    got = nl.attrs(memoryview(raw))
    assert nl.as_int(got[1]) == 7 and nl.as_str(got[2]) == "eth0"
    assert [(k, nl.as_int(v)) for k, v in nl.attr_list(got[3])] == [(1, 1)]
    assert nl.attrs(memoryview(raw + b"\x02\x00\x09\x00")).keys() == {1, 2, 3}
