"""Every threshold the rules use, in one place, each with the guide it comes from.

docs/doctor.md lists the same numbers; tests/test_doctor_rules.py checks each edge.
"""

from __future__ import annotations

# A NIC or host is "busy" above this many packets/s (rx + tx): below it a missing
# offload or XPS costs nothing anyone could measure.
BUSY_PPS = 5_000.0
# Queue IRQs of a NIC worth judging at all (interrupts/s, all its queues).
IRQ_BUSY_PER_S = 1_000.0
# irq-concentration: one CPU takes this share of a NIC's interrupts ...
IRQ_SHARE = 0.70
# ... while its softirq + hardirq load is at least this ...
CPU_LOADED_PCT = 50.0
# ... and another CPU of the node is at least this idle.
CPU_IDLE_PCT = 50.0
# softnet-drops, time-squeeze, rx-ring: events/s over the window that count as "rising".
DROPS_PER_S = 1.0
SQUEEZE_PER_S = 10.0  # a flood squeezes now and then at any budget: sustained counts
MISSED_PER_S = 1.0
# softnet-drops: RPS is "imbalanced" when one CPU takes this share of received_rps.
RPS_SHARE = 0.60
# rss-imbalance: one rx queue carries this share of the NIC's rx packets.
RSS_SHARE = 0.80
# few-rx-queues: the busiest `queues` CPUs carry this share of NET_RX softirqs.
NET_RX_SHARE = 0.90
# bufferbloat: RTT under load this many times the idle RTT, and at least this much more.
BLOAT_RATIO = 10.0
BLOAT_MIN_EXTRA_MS = 1.0
# ... with a standing queue of at least this many packets in a FIFO qdisc.
BLOAT_BACKLOG_PKTS = 10
# ... or bytes (ten 1514-byte frames): with TSO a qdisc holds a few 64 KB GSO packets
BLOAT_BACKLOG_BYTES = 15_140
FIFO_QDISCS = ("pfifo_fast", "pfifo", "bfifo", "tbf", "pfifo_head_drop")
AQM_QDISCS = ("fq_codel", "fq", "cake", "codel", "pie", "fq_pie")
# coalescing: one queue IRQ this many interrupts/s with this much hardirq time on its CPU.
IRQ_HIGH_PER_S = 20_000.0
HARDIRQ_HIGH_PCT = 10.0
# coalescing with a latency target: rx-usecs above this holds every packet that long.
LOW_LATENCY_RX_USECS = 10
# power-latency: a C-state whose exit latency exceeds this (µs) is "deep".
DEEP_CSTATE_US = 10
# xps: tx packets/s above which a multi-queue NIC without XPS is worth a note.
XPS_TX_PPS = 1_000.0
# conntrack fill that warns, and that is critical.
CONNTRACK_WARN = 0.80
CONNTRACK_CRIT = 0.95
# drop-reasons: reasons shown, and the rate below which one is not named.
DROP_REASONS_SHOWN = 3
DROP_REASON_PER_S = 1.0
