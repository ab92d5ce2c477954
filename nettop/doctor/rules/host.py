"""Host-wide tables: conntrack fill, and the kernel's own drop reasons (eBPF)."""

from __future__ import annotations

from typing import Iterator

from nettop.doctor import thresholds as T
from nettop.doctor.finding import Finding, Severity
from nettop.doctor.rules.common import Context, rate

CONNTRACK_DOC = "Linux Documentation/networking/nf_conntrack-sysctl.rst"
DROPREASON_DOC = "Linux include/net/dropreason-core.h (enum skb_drop_reason)"

# The common kfree_skb reasons in words (dropreason-core.h's comments, shortened).
REASON_WORDS = {
    "NOT_SPECIFIED": "dropped without a reason given (older call site)",
    "NO_SOCKET": "no socket listens on the destination port",
    "PKT_TOO_SMALL": "packet shorter than its headers",
    "TCP_CSUM": "TCP checksum wrong",
    "UDP_CSUM": "UDP checksum wrong",
    "SOCKET_FILTER": "a socket filter (BPF) refused it",
    "SOCKET_RCVBUFF": "the socket's receive buffer was full (raise rmem or read faster)",
    "PROTO_MEM": "the protocol's memory limit (tcp_mem/udp_mem) was reached",
    "NETFILTER_DROP": "a netfilter rule dropped it",
    "OTHERHOST": "addressed to another host's MAC",
    "IP_CSUM": "IP header checksum wrong",
    "IP_INHDR": "IP header malformed",
    "IP_RPFILTER": "reverse-path filter: source not reachable back through this interface",
    "UNICAST_IN_L2_MULTICAST": "unicast IP in a link-layer multicast frame",
    "XFRM_POLICY": "IPsec policy refused it",
    "IP_NOPROTO": "no handler for this IP protocol",
    "QDISC_DROP": "the qdisc dropped it (queue full or AQM)",
    "CPU_BACKLOG": "the per-CPU backlog was full (netdev_max_backlog)",
    "TC_INGRESS": "a tc ingress filter dropped it",
    "TC_EGRESS": "a tc egress filter dropped it",
    "TCP_OFOMERGE": "TCP out-of-order data merged (duplicate)",
    "TCP_OLD_DATA": "TCP data already received (retransmission)",
    "TCP_INVALID_SEQUENCE": "TCP segment outside the receive window",
    "TCP_RESET": "TCP segment on a reset connection",
    "TCP_CLOSE": "TCP segment on a closed connection",
    "NEIGH_FAILED": "neighbour (ARP/ND) resolution failed",
    "NEIGH_QUEUEFULL": "too many packets waiting for ARP/ND resolution",
    "FULL_RING": "the driver's tx ring was full",
    "NOMEM": "out of memory",
    "DEV_READY": "the device was down or not ready",
    "IPV6DISABLED": "IPv6 is disabled",
    "SKB_UCOPY_FAULT": "copy to user space failed",
}


def conntrack(ctx: Context) -> Iterator[Finding]:
    """15. conntrack table near full."""
    t = ctx.snap.tuning
    if t is None or t.conntrack_count is None or not t.conntrack_max:
        return
    fill = t.conntrack_count / t.conntrack_max
    if fill < T.CONNTRACK_WARN:
        return
    yield Finding(
        "conntrack", "host", Severity.CRIT if fill >= T.CONNTRACK_CRIT else Severity.WARN,
        f"conntrack table {fill * 100:.0f} % full ({t.conntrack_count} of {t.conntrack_max})",
        "when it is full every new connection is dropped (\"nf_conntrack: table full, dropping packet\")",
        (f"nf_conntrack_count {t.conntrack_count}, nf_conntrack_max {t.conntrack_max}",),
        {"count": float(t.conntrack_count), "max": float(t.conntrack_max), "fill": fill},
        ctx.window.span, (),
        f"sysctl -w net.netfilter.nf_conntrack_max={2 * t.conntrack_max}  (and nf_conntrack_buckets to max/4)",
        CONNTRACK_DOC)


def drop_reasons(ctx: Context) -> Iterator[Finding]:
    """16. With the eBPF probes on: the top kfree_skb drop reasons, in words."""
    reasons = ctx.window.drop_reasons()
    top = sorted(((r, v) for r, v in reasons.items() if v >= T.DROP_REASON_PER_S), key=lambda x: -x[1])
    top = top[:T.DROP_REASONS_SHOWN]
    if not top:
        return
    yield Finding(
        "drop-reasons", "host", Severity.INFO,
        "the kernel drops packets: " + "; ".join(f"{REASON_WORDS.get(r, r.lower().replace('_', ' '))} ({rate(v)})"
                                                  for r, v in top),
        "each reason points at a different fix; the counters elsewhere only say that packets were lost",
        tuple(f"{r}: {rate(v)} — {REASON_WORDS.get(r, 'see dropreason-core.h')}" for r, v in top),
        {r: v for r, v in top}, ctx.window.span, (), None, DROPREASON_DOC)


RULES = (conntrack, drop_reasons)
