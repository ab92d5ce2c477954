"""Deep probes of the network stack with eBPF (bcc, raw tracepoints only).

`EbpfProbes` attaches to napi:napi_poll, irq:irq_handler_entry/exit,
irq:softirq_raise/entry/exit and skb:kfree_skb, aggregates in kernel maps and hands
back an `EbpfSample` of counts per interval; `to_json` turns one into per-second rates.
Importing this package does not import bcc: hosts without it still run nettop.
"""

from __future__ import annotations

from nettop.ebpf.probes import EbpfProbes
from nettop.ebpf.sample import (DropCounts, EbpfSample, IrqCounts, NapiCounts, NapiMode,
                                ProbeCost, SoftirqCounts, to_json)

__all__ = ["EbpfProbes", "EbpfSample", "NapiCounts", "NapiMode", "IrqCounts",
           "SoftirqCounts", "DropCounts", "ProbeCost", "to_json"]
