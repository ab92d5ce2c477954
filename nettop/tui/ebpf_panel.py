"""The eBPF panel: NAPI interrupt-vs-polling per queue, hardirq time per IRQ, NET_RX/NET_TX
softirq latency per CPU and drops by reason.

The figures are `nettop.ebpf.sample.to_json` of the snapshot's EbpfSample, the same
numbers `nettop snapshot --json --ebpf` prints and a recording replays, so the panel
never does maths of its own. The switch that compiles and starts the probes off the
UI thread is `nettop.ebpf.switch.ProbeSwitch`, held by the live pipeline.
"""

from __future__ import annotations

from typing import Any

from nettop.tui import format as fmt
from nettop.tui.tables import Cell, LiveTable, _lvl

TOP_IRQS = 8  # hardirq rows: the busiest
TOP_DROPS = 8


def header_text(state: str | None, sample: Any) -> str | None:
    """What the header says about the probes: compiling, on with their own CPU cost, or
    (in replay) that the figures were recorded; None when there is nothing to say."""
    if state == "compiling":
        return "eBPF compiling…"
    if state == "stopping":
        return "eBPF stopping…"
    if state == "on":
        if sample is None:
            return "eBPF on"
        duty = f" 1/{sample.duty}" if getattr(sample, "duty", 1) > 1 else ""
        us = sample.cost_us_per_s  # the probes' own kernel CPU time
        cost = f"{us / 1e4:.1f}% CPU" if us >= 1000 else f"{us:.0f} µs/s CPU"
        return f"eBPF on{duty} {cost}"
    if state is None and sample is not None:
        return "eBPF (recorded)"
    return None


def _us(v: float | None) -> str:
    return fmt.DASH if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


class NapiTable(LiveTable):
    COLUMNS = (("napi", "NAPI (device #id)", 18), ("irq", "irq", 4), ("polls", "polls/s", 7),
               ("pkts", "pkt/s", 7), ("per", "pkt/poll", 8), ("full", "budget%", 7), ("mode", "mode", 9))
    LEFT = frozenset({"napi", "mode"})

    @staticmethod
    def rows(doc: dict[str, Any]) -> list[tuple[str, tuple[Cell, ...]]]:
        out: list[tuple[str, tuple[Cell, ...]]] = []
        for n in doc["napi"]:
            where = n["ifname"] or f"backlog cpu{n['backlog_cpu']}"
            if n["ifname"] and not n["host_netns"]:
                where += "@ns"
            key = f"{n['ifname']}/{n['napi_id']}/{n['netns']}/{n['backlog_cpu']}"
            label = f"{where} #{n['napi_id']}" if n["napi_id"] else where
            mode = n["mode"]
            out.append((key, (
                (label, ""), (str(n["irq"]) if n["irq"] is not None else fmt.DASH, "muted" if n["irq"] is None else ""),
                (fmt.si(n["polls_per_s"]), ""), (fmt.si(n["packets_per_s"]), ""),
                (f"{n['packets_per_poll']:.1f}", ""),
                (f"{100 * n['full_budget_share']:.0f}", _lvl(n["full_budget_share"], 0.2, 0.5)),
                ("polling" if mode == "polling" else mode, "hot" if mode == "polling" else
                 ("muted" if mode == "idle" else "")),
            )))
        return out


class HardirqTable(LiveTable):
    COLUMNS = (("irq", "IRQ", 4), ("name", "handler", 18), ("count", "irq/s", 7), ("us", "µs/s", 7))
    LEFT = frozenset({"name"})

    @staticmethod
    def rows(doc: dict[str, Any]) -> list[tuple[str, tuple[Cell, ...]]]:
        busiest = sorted(doc["hardirq"], key=lambda r: -r["us_per_s"])[:TOP_IRQS]
        return [(str(r["irq"]), ((str(r["irq"]), ""), (r["name"], ""), (fmt.si(r["count_per_s"]), ""),
                                 (fmt.si(r["us_per_s"]), _lvl(r["us_per_s"], 10_000, 100_000))))
                for r in busiest]


class SoftirqTable(LiveTable):
    COLUMNS = (("cpu", "CPU", 4), ("vec", "softirq", 7), ("runs", "runs/s", 7), ("w50", "wait p50", 8),
               ("w99", "wait p99", 8), ("r50", "run p50", 7), ("r99", "run p99", 7), ("busy", "run µs/s", 8))
    LEFT = frozenset({"vec"})

    @staticmethod
    def rows(doc: dict[str, Any]) -> list[tuple[str, tuple[Cell, ...]]]:
        out: list[tuple[str, tuple[Cell, ...]]] = []
        for r in doc["softirq"]:
            w, run = r["wait_us"], r["run_us"]
            out.append((f"{r['cpu']}/{r['vec']}", (
                (str(r["cpu"]), ""), (r["vec"], ""), (fmt.si(r["runs_per_s"]), ""),
                (_us(w["p50"]), ""), (_us(w["p99"]), _lvl(w["p99"], 500, 5000)),
                (_us(run["p50"]), ""), (_us(run["p99"]), _lvl(run["p99"], 1000, 10000)),
                (fmt.si(r["run_us_per_s"]), _lvl(r["run_us_per_s"], 100_000, 500_000)),
            )))
        return out


class DropTable(LiveTable):
    COLUMNS = (("reason", "drop reason", 20), ("dev", "device", 10), ("rate", "drop/s", 7), ("where", "in", 24))
    LEFT = frozenset({"reason", "dev", "where"})

    @staticmethod
    def rows(doc: dict[str, Any]) -> list[tuple[str, tuple[Cell, ...]]]:
        out: list[tuple[str, tuple[Cell, ...]]] = []
        for r in doc["drops"]["rows"][:TOP_DROPS]:
            dev = r["ifname"] if r["host_netns"] or not r["ifname"] else f"{r['ifname']}@ns"
            key = f"{r['reason']}/{r['ifname']}/{r['netns']}/{r['location']}"
            out.append((key, ((r["reason"], ""), (dev or fmt.DASH, "" if dev else "muted"),
                              (fmt.si(r["per_s"]), "hot" if r["per_s"] > 0 else ""), (r["location"], "muted"))))
        return out


__all__ = ["DropTable", "HardirqTable", "NapiTable", "SoftirqTable", "header_text"]
