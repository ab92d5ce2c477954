"""Runs an experiment: repeats of shuffled variants, each applied, measured under load, reverted.

For each repeat the variants (baseline included) run in a new shuffled order from the
plan's seed, so a host that drifts during the run does not favour one variant. A
variant's `set` lines are applied as one journaled group through the Tuner, then: idle
probes, the load starts, warm-up, the measure window, the load stops, and the group is
undone. Every sample goes into one recording, with an event at each phase boundary and
one `result {...}` event per phase, so `nettop replay` shows the phases and `nettop
report` rebuilds the table from the file alone.

The dead-man switch watches each sample: no reply from the probe target for 3 s (100 %
loss; replies count however late they come, since seconds of queueing delay are what a
bloated variant is measured for, not a dead link), or under load no bytes on the
interface for 3 s, and the variant is reverted at once and marked failed.
A Ctrl-C, or `stop()` from another thread (the live view's stop key), reverts the
running variant before the run returns; a kill -9 leaves the journal, and `nettop
restore` puts the host back.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from nettop.experiment.load import Running, start_servers, stop
from nettop.experiment.measure import Phase, figures
from nettop.experiment.plan import ExperimentPlan, Variant, changes_of
from nettop.model.rates import compute_rates
from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event

DEADMAN_S = 3.0
EVENT_KIND = "experiment"


class Stopped(Exception):
    """`Runner.stop()` was called: the running variant has been reverted."""


@dataclass
class Progress:
    """What a progress bar shows: phases done of total, and the current one."""

    total: int
    done: int = 0
    current: str = ""
    log: list[str] = field(default_factory=list)
    # the probe target over the last sample, "rtt 21/160 ms" (p50/p99) or "no reply": the
    # live view's bar shows it, so each variant's effect on latency is seen as it runs
    rtt: str = ""


class Runner:
    def __init__(self, plan: ExperimentPlan, tuner: Any, recording: str,
                 on_progress: Callable[[Progress], None] | None = None) -> None:
        self.plan = plan
        self.tuner = tuner
        self.recording = recording
        self.on_progress = on_progress
        self.progress = Progress(total=len(plan.variants) * plan.timing.repeats)
        self.phases: list[Phase] = []
        self._pending: list[Event] = []
        self._writer: Any = None
        self._reader: Any = None
        self._tracker: Any = None
        self._history: list[Snapshot] = []
        self._load_started = 0.0
        self._applied_at = 0.0
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask the run to end at its next sample; the running variant is reverted first."""
        self._stop.set()

    # -- the run --------------------------------------------------------------------------
    def order(self) -> list[tuple[int, Variant]]:
        rng = random.Random(self.plan.timing.seed)
        out = []
        for r in range(self.plan.timing.repeats):
            vs = list(self.plan.variants)
            rng.shuffle(vs)
            out += [(r, v) for v in vs]
        return out

    def run(self) -> list[Phase]:
        from nettop.collectors.host import HostReader
        from nettop.kernel.sysroot import LIVE
        from nettop.ping import Prober
        from nettop.record.store import Writer

        if self._stop.is_set():
            raise Stopped("stopped before anything changed")
        p = self.plan
        servers = start_servers(p.load)
        prober = Prober([p.target], interval_s=p.timing.ping_interval, timeout_s=p.timing.ping_timeout) \
            if p.target else None
        try:
            if prober is not None:
                prober.start()
                self._tracker = prober.trackers()[p.target]
            self._reader = HostReader(LIVE, [p.iface], prober=prober)
            self._writer = Writer(self.recording, {"experiment": p.name, "host": self._reader.host,
                                                   "kernel": self._reader.kernel, "interval_s": p.timing.interval,
                                                   "started": time.time()})
            self._mark(f"experiment {p.name}: {len(p.variants)} variants x {p.timing.repeats} repeats, "
                       f"load {p.load.kind} {p.load.flows if p.load.kind == 'tcp' else p.load.rate or ''}")
            for repeat, variant in self.order():
                self.phases.append(self._variant(variant, repeat))
                self.progress.done += 1
                self._progress("")
            self._mark("experiment done")
            self._sample()  # carries the last events into the file
        finally:
            if prober is not None:
                prober.stop()
            if self._reader is not None:
                self._reader.close()
            if self._writer is not None:
                self._writer.close()
            stop(servers)
        return self.phases

    def _variant(self, v: Variant, repeat: int) -> Phase:
        p, t = self.plan, self.plan.timing
        label = f"{v.name} #{repeat + 1}"
        self._progress(f"{label}: apply")
        applied = False
        failed: str | None = None
        window: list[Snapshot] = []
        idle: list[float] = []
        loaded: list[float] = []
        sent = 0
        iperf: list[dict[str, Any]] = []
        running: Running | None = None
        try:
            if v.lines:
                self._apply([c for line in v.lines for c in changes_of(line)])
                applied = True
            self._mark(f"{label}: applied" + (f" ({'; '.join(v.lines)})" if v.lines else " (baseline: as found)"))
            self._history = []
            self._applied_at = time.monotonic()
            self._set_raw([])
            failed = self._watch(t.idle, [], None)
            idle = self._take_raw()
            if failed is None:
                self._mark(f"{label}: load on")
                running = Running(p.load, p.target, t.warmup + t.measure + 1)
                self._load_started = time.monotonic()
                failed = self._watch(t.warmup, [], running)
                if failed is None and running.ended():
                    took = time.monotonic() - self._load_started
                    when = "at once" if took < 0.5 else f"{took:.1f} s after it started"
                    failed = f"the load ended {when}, before the measure window: {running.why()}"
            if failed is None and running is not None:
                self._set_raw([])
                before_sent = self._sent()
                failed = self._watch(t.measure, window, running)
                loaded = self._take_raw()
                sent = self._sent() - before_sent
            if failed is not None:
                if running is not None:
                    running.kill()
                self._mark(f"{label}: dead-man switch: {failed}; reverting at once")
            if running is not None:
                iperf = running.results()
                running = None
        finally:
            if running is not None:
                running.kill()
            if applied:
                self.tuner.undo()
                self._mark(f"{label}: reverted")
        phase = figures(v.name, repeat, window, p.iface, p.load.reverse, idle, loaded, sent, iperf, failed)
        self._mark(phase.to_event_text())
        return phase

    def _apply(self, changes: list[Any]) -> None:
        """A variant's lines as one undo step, through the workflow every change takes
        (the run was confirmed as a whole); ActionError when the host refuses it."""
        from nettop.actions.base import ActionError
        from nettop.actions.tuner import KernelRefused
        from nettop.actions.workflow import run_changes

        out = run_changes(self.tuner, changes, confirmed=True)
        if out.error is not None:
            raise (KernelRefused if out.refused else ActionError)(out.error)

    # -- sampling ---------------------------------------------------------------------------
    def _sample(self) -> Snapshot:
        snap = self._reader.read()
        events, self._pending = self._pending, []
        self._writer.add_sample(snap, events)
        return snap

    def _sleep_to(self, deadline: float) -> None:
        time.sleep(max(0.0, deadline - time.monotonic()))

    def _watch(self, seconds: float, window: list[Snapshot], running: Running | None) -> str | None:
        """Sample for `seconds`; the dead-man's reason when it fires, else None. Without a
        load only probe loss counts (an idle link carries no bytes)."""
        end = time.monotonic() + seconds
        while seconds > 0:
            if self._stop.is_set():
                self._mark("experiment stopped by the user; reverting the running variant")
                raise Stopped("stopped; the running variant was reverted")
            snap = self._sample()
            self._live_rtt(snap)
            window.append(snap)
            self._history.append(snap)
            reason = self._deadman(self._history, running is not None)
            if reason:
                return reason
            if time.monotonic() >= end:
                return None
            if running is not None and running.procs and all(pr.poll() is not None for pr in running.procs):
                return None
            self._sleep_to(min(end, time.monotonic() + self.plan.timing.interval))
        return None

    def _deadman(self, history: list[Snapshot], loaded: bool) -> str | None:
        if self._tracker is not None:
            now = time.monotonic()
            heard = max(self._applied_at, (self._tracker.last_reply_ns or 0) / 1e9)
            if now - heard >= DEADMAN_S:
                return f"100% probe loss to {self.plan.target}: no reply for {now - heard:.1f} s"
        last = history[-1]
        old = [s for s in history if last.t_mono - s.t_mono >= DEADMAN_S]
        if not old:
            return None
        first = old[-1]
        if not loaded:
            return None
        if last.t_mono - self._load_started < DEADMAN_S:
            return None
        link = compute_rates(first, last).links.get(self.plan.iface)
        if link is not None and (link.rx_bytes_per_s or 0) + (link.tx_bytes_per_s or 0) == 0:
            return f"no bytes on {self.plan.iface} for {last.t_mono - first.t_mono:.1f} s"
        return None

    # -- helpers ----------------------------------------------------------------------------
    def _set_raw(self, raw: list[float]) -> None:
        if self._tracker is not None:
            self._tracker.raw = raw

    def _take_raw(self) -> list[float]:
        if self._tracker is None:
            return []
        raw, self._tracker.raw = self._tracker.raw or [], None
        return list(raw)

    def _sent(self) -> int:
        return self._tracker.histogram.view().sent if self._tracker is not None else 0

    def _mark(self, text: str) -> None:
        self._pending.append(Event(time.time(), EVENT_KIND, text))
        if not text.startswith("result "):
            self.progress.log.append(text)
            if text.startswith(tuple(f"{v.name} #" for v in self.plan.variants)):
                self._progress(text.split(" (", 1)[0])  # "long #1: load on", without the set lines

    def _live_rtt(self, snap: Snapshot) -> None:
        st = snap.latency.get(self.plan.target) if self.plan.target else None
        if st is None or not st.sent:
            return  # nothing decided in this sample: keep the last figure
        text = "no reply" if st.rtt_p50_ms is None or st.rtt_p99_ms is None else \
            f"rtt {_ms(st.rtt_p50_ms)}/{_ms(st.rtt_p99_ms)} ms"
        if text != self.progress.rtt:
            self.progress.rtt = text
            self._progress(self.progress.current)

    def _progress(self, current: str) -> None:
        self.progress.current = current
        if self.on_progress is not None:
            self.on_progress(self.progress)


def _ms(v: float) -> str:
    """RTTs from 0.05 ms (veth) to seconds (bufferbloat) in three or four characters."""
    return f"{v:.2f}" if v < 1 else f"{v:.1f}" if v < 10 else f"{v:.0f}"
