"""Built-in latency prober: ICMP echo (raw or unprivileged datagram socket), TCP connect
and UDP probes, with kernel timestamps, for one or more targets.

    prober = Prober(["192.0.2.1", "tcp://example.org:443"], interval_s=0.1)
    prober.start()
    stats = prober.take()  # {"192.0.2.1": LatencyStats(...), ...} since the last take()
    prober.stop()
"""

from __future__ import annotations

from nettop.ping.prober import MAX_INTERVAL_S, MIN_INTERVAL_S, Prober
from nettop.ping.resolve import NO_DEFAULT_GATEWAY, default_targets, parse_target
from nettop.ping.stats import JSON_KEYS, LatencyStats, percentile, summarize, to_json

__all__ = ["JSON_KEYS", "LatencyStats", "MAX_INTERVAL_S", "MIN_INTERVAL_S",
           "NO_DEFAULT_GATEWAY", "Prober", "default_targets", "parse_target", "percentile",
           "summarize", "to_json"]
