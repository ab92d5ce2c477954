"""The eBPF panel: NAPI interrupt-vs-polling per queue, hardirq time per IRQ, NET_RX/NET_TX
softirq latency per CPU and drops by reason — and the switch that turns the probes on.

The figures are `nettop.ebpf.sample.to_json` of the snapshot's EbpfSample, the same
numbers `nettop snapshot --json --ebpf` prints and a recording replays, so the panel
never does maths of its own. Compiling the BPF programs takes seconds: `ProbeSwitch`
does it on a thread of its own, neither the UI's nor the sampler's, and hands the
running probes to the HostReader, which takes their counts on each tick.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from nettop.tui import format as fmt
from nettop.tui.tables import Cell, LiveTable, _lvl

TOP_IRQS = 8  # hardirq rows: the busiest
TOP_DROPS = 8


class ProbeSwitch:
    """Off → compiling → on → off, with the reason when they could not start.

    `attach(probes | None)` hands the running probes to the sampler's reader (or takes
    them away); `changed()` tells the UI to redraw its header. Both are called from the
    switch's own thread."""

    def __init__(self, attach: Callable[[Any], None], changed: Callable[[], None] | None = None,
                 factory: Callable[[], Any] | None = None) -> None:
        self._attach = attach
        self.changed = changed
        self._factory = factory
        self._lock = threading.Lock()
        self.state = "off"  # "off", "compiling", "on", "stopping"
        self.reason: str | None = None  # why the last start failed: one line with the fix
        self.probes: Any = None
        self._thread: threading.Thread | None = None

    def toggle(self) -> str:
        """Start or stop the probes in the background; returns the new state."""
        with self._lock:
            if self.state in ("compiling", "stopping"):
                return self.state
            turning_on = self.state == "off"
            self.state = "compiling" if turning_on else "stopping"
            if turning_on:
                self.reason = None
            self._thread = threading.Thread(target=self._start if turning_on else self._stop,
                                            name="nettop-ebpf", daemon=True)
            self._thread.start()
            return self.state

    def wait(self, timeout: float | None = None) -> None:
        """Until the start or stop under way has finished (tests, and quitting)."""
        t = self._thread
        if t is not None:
            t.join(timeout)

    def _make(self) -> Any:
        """New probes (the factory's, else nettop's), once their preflight says they can run."""
        if self._factory is not None:
            probes = self._factory()
        else:
            from nettop.ebpf import EbpfProbes

            probes = EbpfProbes()
        ok, why = type(probes).available(probes.probes)
        if not ok:
            raise _Unavailable(why)
        return probes

    def _start(self) -> None:
        probes = None
        try:
            probes = self._make()
            if not probes.start():
                reason = "; ".join(probes.errors) or "eBPF probes did not start"
                probes.stop()
                self._finish("off", None, reason)
                return
            self._attach(probes)
            self._finish("on", probes, None)
        except _Unavailable as exc:
            self._finish("off", None, str(exc))
        except Exception as exc:  # noqa: BLE001 - any failure is one line and nettop runs on
            if probes is not None:
                probes.stop()
            self._finish("off", None, f"eBPF probes failed: {exc}".splitlines()[0])

    def _stop(self) -> None:
        probes = self.probes
        self._attach(None)
        if probes is not None:
            probes.stop()
        self._finish("off", None, None)

    def _finish(self, state: str, probes: Any, reason: str | None) -> None:
        with self._lock:
            self.state, self.probes = state, probes
            if reason is not None:
                self.reason = reason
        if self.changed is not None:
            self.changed()

    def stop(self) -> None:
        """On quit: wait for a start under way, then detach and stop."""
        self.wait(30)
        if self.probes is not None:
            self._stop()


class _Unavailable(Exception):
    """Preflight says no (no bcc, headers, privilege, tracepoint): its one line."""


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


__all__ = ["DropTable", "HardirqTable", "NapiTable", "ProbeSwitch", "SoftirqTable", "header_text"]
