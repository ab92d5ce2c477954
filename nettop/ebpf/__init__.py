"""Deep probes of the network stack with eBPF (bcc, raw tracepoints only).

`EbpfProbes` attaches to napi:napi_poll, irq:irq_handler_entry/exit,
irq:softirq_raise/entry/exit and skb:kfree_skb (raw tracepoints, no kprobes, no tracefs
needed), aggregates in kernel maps and hands back an `EbpfSample` of counts per
interval; `to_json` turns one into per-second rates. Struct offsets, tracepoint
signatures and drop-reason names come from the running kernel's BTF, so the program
compiles against older headers. Above ~100k probe runs per second the probes attach
for only part of each interval to bound their cost. Importing this package does not
import bcc: hosts without it still run nettop.
"""

from __future__ import annotations

from nettop.ebpf.probes import EbpfProbes
from nettop.ebpf.sample import (DropCounts, EbpfSample, IrqCounts, NapiCounts, NapiMode,
                                ProbeCost, SoftirqCounts, to_json)

__all__ = ["EbpfProbes", "EbpfSample", "NapiCounts", "NapiMode", "IrqCounts",
           "SoftirqCounts", "DropCounts", "ProbeCost", "to_json"]
