"""Latency and buffering: bufferbloat, power management, TCP buffers against the BDP."""

from __future__ import annotations

import statistics
from typing import Iterator

from nettop.doctor import thresholds as T
from nettop.doctor.finding import Finding, Severity
from nettop.doctor.rules.common import RH, RH_LOWLAT, Context, nics
from nettop.ping.stats import LatencyStats

BLOAT = "bufferbloat.net (RFC 8290 fq_codel; BQL)"


def _load_rtt(stats: list[LatencyStats]) -> float | None:
    rtts = [s.rtt_p50_ms if s.rtt_p50_ms is not None else s.rtt_avg_ms for s in stats]
    vals = [v for v in rtts if v is not None]
    return statistics.median(vals) if vals else None


def bufferbloat(ctx: Context) -> Iterator[Finding]:
    """9. RTT under load >= 10x idle while a FIFO qdisc holds a standing queue."""
    w, snap = ctx.window, ctx.snap
    worst: tuple[float, str, float, float] | None = None  # ratio, target, idle, loaded
    for target, stats in w.latency().items():
        idle = w.idle_rtt_ms(target)
        loaded = _load_rtt(stats)
        if idle is None or loaded is None or idle <= 0:
            continue
        if loaded >= T.BLOAT_RATIO * idle and loaded - idle >= T.BLOAT_MIN_EXTRA_MS:
            ratio = loaded / idle
            if worst is None or ratio > worst[0]:
                worst = (ratio, target, idle, loaded)
    if worst is None:
        return
    ratio, target, idle, loaded = worst
    best: tuple[int, str, str, int] | None = None  # backlog pkts, ifname, kind, bytes
    for name, qds in snap.qdiscs.items():
        kinds = {q.kind for q in qds}
        if kinds & set(T.AQM_QDISCS):
            continue
        for q in qds:
            if q.kind in T.FIFO_QDISCS and (q.backlog_packets >= T.BLOAT_BACKLOG_PKTS
                                            or q.backlog_bytes >= T.BLOAT_BACKLOG_BYTES):
                if best is None or q.backlog_packets > best[0]:
                    best = (q.backlog_packets, name, q.kind, q.backlog_bytes)
    if best is None:
        return
    pkts, name, kind, nbytes = best
    link = snap.links.get(name)
    qlen = link.txqueuelen if link else 0
    dev = snap.devices.get(name)
    fix = [f"nettop set qdisc {name} fq_codel"]
    if dev is not None and dev.bql:
        fix.append(f"nettop set bql {name} 0 limit_max 65536")
    yield Finding(
        "bufferbloat", name, Severity.WARN,
        f"RTT to {target} is {ratio:.0f}x its idle value ({idle:.2f} -> {loaded:.2f} ms) while {kind} on {name} "
        f"holds {pkts} packets",
        "a long FIFO in front of a busy link makes every packet wait behind the whole queue; an AQM (fq_codel, "
        "fq) keeps the queue short and isolates flows",
        (f"RTT to {target}: idle {idle:.2f} ms, under load {loaded:.2f} ms (median p50)",
         f"{kind} backlog {pkts} packets / {nbytes} bytes, txqueuelen {qlen}"),
        {"rtt_idle_ms": idle, "rtt_load_ms": loaded, "ratio": ratio, "backlog_pkts": float(pkts),
         "txqueuelen": float(qlen)},
        w.span, tuple(fix), None, f"{BLOAT}; {RH} (txqueuelen, qdisc)")


def power_latency(ctx: Context) -> Iterator[Finding]:
    """12. powersave governor or deep C-states on a host with a latency target (read-only)."""
    target = ctx.config.latency_target_ms
    t = ctx.snap.tuning
    if target is None or t is None:
        return
    powersave = t.governors.get("powersave", 0)
    deep = [(n, lat) for n, lat in t.idle_states if lat > T.DEEP_CSTATE_US]
    if not powersave and not deep:
        return
    cmds = []
    if powersave:
        cmds.append("cpupower frequency-set -g performance")
    if deep:
        cmds.append(f"cpupower idle-set -D {T.DEEP_CSTATE_US}")
    yield Finding(
        "power-latency", "host", Severity.WARN,
        "power management adds wake-up latency: "
        + "; ".join(x for x in (f"{powersave} CPU(s) on the powersave governor" if powersave else "",
                                "deep C-states enabled: " + ", ".join(f"{n} ({lat} µs)" for n, lat in deep)
                                if deep else "") if x),
        "a CPU in a deep C-state or at low clock takes tens to hundreds of µs to serve an interrupt",
        (f"governors: {dict(t.governors) or 'none'}",
         "enabled C-states: " + (", ".join(f"{n} {lat} µs" for n, lat in t.idle_states) or "none"),
         f"latency target {target:g} ms"),
        {"powersave_cpus": float(powersave), "deep_cstates": float(len(deep))}, ctx.window.span, (),
        "; ".join(cmds), RH_LOWLAT)


def _max_of(text: str | None) -> int | None:
    try:
        return int(text.split()[-1]) if text else None
    except ValueError:
        return None


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def tcp_buffers(ctx: Context) -> Iterator[Finding]:
    """14. tcp_rmem/tcp_wmem maxima below the bandwidth-delay product (link speed x idle RTT)."""
    w, snap = ctx.window, ctx.snap
    speeds = [(snap.links[n].speed_mbps or 0, n) for n in nics(snap)
              if snap.links[n].operstate in ("up", "unknown") and snap.links[n].speed_mbps]
    # the path's own delay (the lowest RTT seen), not one inflated by a queue
    rtts = [r for r in (w.idle_rtt_ms(t) for t in w.latency()) if r is not None]
    if not speeds or not rtts:
        return
    speed, name = max(speeds)
    rtt = max(rtts)
    bdp = int(speed * 1e6 / 8 * rtt / 1000)
    short = []
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        text = snap.host_config.sysctls.get(key)
        top = _max_of(text)
        if top is not None and text is not None and top < bdp:
            short.append((key, text, top))
    if not short:
        return
    fix = []
    for key, text, _ in short:
        parts = text.split()
        if len(parts) == 3:
            # twice the BDP: with tcp_adv_win_scale 1 half the buffer is overhead, not window
            fix.append(f"nettop set sysctl {key} {parts[0]} {parts[1]} {_pow2(2 * bdp)}")
    yield Finding(
        "tcp-buffers", "host", Severity.WARN,
        f"{' and '.join(k.rsplit('.', 1)[1] for k, _, _ in short)} max below the bandwidth-delay product "
        f"({bdp} bytes = {speed} Mbit/s of {name} x {rtt:.2f} ms)",
        "a TCP flow cannot have more than its buffer in flight: it cannot fill the link over this RTT",
        (f"BDP {bdp} bytes ({speed} Mbit/s x {rtt:.2f} ms)",) + tuple(f"{k} = {t}" for k, t, _ in short),
        {"bdp_bytes": float(bdp), "speed_mbps": float(speed), "rtt_ms": rtt,
         **{k.rsplit('.', 1)[1] + "_max": float(m) for k, _, m in short}},
        w.span, tuple(fix), None, f"{RH} (TCP buffer sizes: tcp_rmem/tcp_wmem and the BDP)")


RULES = (bufferbloat, power_latency, tcp_buffers)
