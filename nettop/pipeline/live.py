"""`LivePipeline`: reader → sampler → Timeline → doctor, assembled once for every front end.

The live view, `nettop record`, `nettop serve` and the plain text report all sample the
host the same way: one sampler thread reads a snapshot every interval and `feed` appends
it to the Timeline, lets the doctor judge it, puts the point in the `Mailbox` (waking the
consumer at most once), writes it through the recording tap when one is recording, and
hands it to each listener, all on that thread. What a front end does not need is not
built: the doctor, the record key's tap and the eBPF switch are optional.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Mapping, TypeVar

from nettop.collectors.cpus import read_cpu_nodes
from nettop.collectors.session_path import SessionPath
from nettop.doctor import DoctorConfig, Finding, evaluate_recent
from nettop.doctor.watch import Watch
from nettop.ebpf.switch import ProbeSwitch
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.sampler import Reader, Sampler
from nettop.model.rates import Rates
from nettop.model.snapshot import Snapshot
from nettop.model.timeline import DigestStore, Event, Point, Timeline
from nettop.pipeline.source import Mailbox, Wake
from nettop.pipeline.tap import Opener, RecordingTap

if TYPE_CHECKING:
    from nettop.ping.prober import Prober

ROUTES_EVERY_S = 30.0  # routes change rarely; the summary reads them at most this often
T = TypeVar("T")


def off_loop(fn: Callable[[], T]) -> T:
    """Run `fn` on a short-lived thread and return its result (or raise its error).

    pyroute2's synchronous API drives an asyncio loop of its own, which it cannot do on
    a thread where Textual's loop is already running; netlink sockets are therefore
    opened and closed off the UI thread (and used only by the sampler thread)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    t = threading.Thread(target=run, name="nettop-netlink-setup")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class LivePipeline:
    """HostReader + Sampler + Timeline (+ doctor, tap, probes) on the sampler's own thread.

    `reader`: sample this instead of opening a HostReader on `root` (the caller keeps
    it, and the prober's life, then). `recording`: how the record key opens its file; no
    tap without it. `probes`: offer the eBPF switch. `doctor`: judge each sample.
    `extra_events`: polled once per sample before the doctor judges it (the headless
    recorder's tuning journal), its events added to the Timeline."""

    def __init__(self, root: SysRoot = LIVE, ifnames: Iterable[str] | None = None,
                 interval: float = 1.0, max_points: int = 3600, reader: Reader | None = None,
                 prober: Prober | None = None, latency_target_ms: float | None = None, *,
                 doctor: bool = True, recording: Opener | None = None, probes: bool = False,
                 extra_events: Callable[[], Iterable[Event]] | None = None,
                 whole_points: int | None = None, digest: Callable[[Snapshot, Rates], Any] | None = None,
                 digest_store: Callable[[int], DigestStore] | None = None) -> None:
        self.root = root
        self.prober = prober  # its results ride in each snapshot
        self._given_reader = reader  # else a HostReader is opened on start
        self.ifnames = list(ifnames) if ifnames else None
        self.is_root = os.geteuid() == 0
        self.mode = "live" if root.live and self.is_root else "read-only" if root.live else "capture"
        # a captured tree, archive or sosreport: when it was taken, and what its figures are
        self.captured_at: float | None = None
        self.capture_note: str | None = None
        if not root.live:
            from nettop.capture.archive import capture_time

            self.captured_at = capture_time(root.path)
        # whole_points/digest: keep few whole points and compact history (the live view's)
        self.timeline = Timeline(max_points=max_points, whole_points=whole_points, digest=digest,
                                 digest_store=digest_store)
        self.cpu_nodes: Mapping[int, int] = read_cpu_nodes(root)
        self.doctor: Watch | None = Watch(DoctorConfig(latency_target_ms=latency_target_ms)) if doctor else None
        self._doctor_config = DoctorConfig(latency_target_ms=latency_target_ms)
        self.tap: RecordingTap | None = RecordingTap(recording, root.path) if recording is not None else None
        self.probe_switch: ProbeSwitch | None = ProbeSwitch(self._attach_probes) if probes else None
        self.listeners: list[Callable[[Point], None]] = []  # called with every point, on the sampler thread
        self.errors = 0  # samples that could not be taken
        self.last_error: str | None = None
        self._extra_events = extra_events
        self._interval = interval
        self._paused = False
        self._mailbox = Mailbox()
        self._sampler: Sampler | None = None
        self._reader: Reader | None = None
        self._owns_prober = False
        self._wake: Wake | None = None
        self._own_cpu: tuple[float, float] | None = None  # (process CPU s, monotonic s) last asked
        self._routes: tuple[int, ...] = ()
        self._routes_t: float | None = None
        self._session: SessionPath | None = None
        self._on_screen: frozenset[str] | None = None  # the consumer's, once it has said
        self._screen_queues: dict[str, frozenset[tuple[str, int]]] | None = None  # its rows drawn

    @property
    def doctor_config(self) -> DoctorConfig:
        return self.doctor.config if self.doctor is not None else self._doctor_config

    @property
    def superseded(self) -> int:
        """Points replaced in the mailbox before the consumer took them."""
        return self._mailbox.superseded

    def route_ifindexes(self) -> tuple[int, ...]:
        """The interfaces of the default route (ifindexes, lowest metric first); none for
        a captured tree. Asked of the kernel on the sampler thread (`_refresh_routes`)."""
        return self._routes

    def playback(self) -> None:
        return None  # live: nothing to seek

    def session(self) -> SessionPath | None:
        """The SSH session this process runs in and the devices that carry it; None on
        the console and for a captured tree (nettop.collectors.session_path)."""
        return self._session

    def _refresh_routes(self) -> None:
        """Routes change rarely: the default route and the session's path are asked of
        the kernel at most every ROUTES_EVERY_S, on the sampler thread, never the UI's."""
        now = time.monotonic()
        if not self.root.live or (self._routes_t is not None and now - self._routes_t < ROUTES_EVERY_S):
            return
        from nettop.collectors.session_path import detect
        from nettop.kernel.routes import read_default_ifindexes

        self._routes, self._routes_t = read_default_ifindexes(), now
        self._session = detect(root=self.root)

    def _attach_probes(self, probes: Any) -> None:
        """Hand running eBPF probes to the reader (None: take them away); the reader takes
        their counts on its next tick."""
        if self._reader is not None and hasattr(self._reader, "probes"):
            self._reader.probes = probes

    @property
    def interval(self) -> float:
        return self._interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._interval = seconds
        if self._sampler is not None:
            self._sampler.interval = seconds

    @property
    def paused(self) -> bool:
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused = value
        if self._sampler is not None:
            self._sampler.paused = value

    def start(self, wake: Wake | None = None) -> None:
        """Open the reader (off the caller's event loop) and start sampling; `wake` is
        called when the mailbox gets a point the consumer has not been told of."""
        self._wake = wake
        if self._given_reader is None and not self.root.live and self._show_capture():
            return  # a capture that cannot change: its figures are shown once, not sampled
        if self._given_reader is None:
            from nettop.collectors.host import HostReader

            if self.prober is not None:
                self.prober.start()
                self._owns_prober = True
            self._reader = off_loop(lambda: HostReader(self.root, self.ifnames, prober=self.prober))
        else:
            self._reader = self._given_reader
        self._watch_settings()
        sampler = self._sampler = Sampler(self._reader, self._interval, self._on_sample, self._on_error)
        sampler.paused = self._paused
        sampler.start()

    def show_settings(self, ifnames: Iterable[str],
                      queues: Mapping[str, Collection[tuple[str, int]]] | None = None) -> None:
        """The interfaces on screen: their queue settings and IRQ affinities are read every
        tick, the others' in rotation (nettop/collectors/settings_rotation.py); with
        `queues` (by interface, (kind as in the queue map, index)), only those of the rows
        drawn, the rest of the interface in rotation too. Any thread."""
        self._screen_queues = None if queues is None else {n: frozenset(q) for n, q in queues.items()}
        self._on_screen = frozenset(ifnames)
        self._watch_settings()

    def _watch_settings(self) -> None:
        """Hand our HostReader the consumer's on-screen interfaces and, live, a watch on
        the tuning journal, so a change nettop makes is read on the next tick."""
        from nettop.collectors.host import HostReader

        reader = self._reader if self._reader is not None else self._given_reader
        if not isinstance(reader, HostReader):
            return
        if self._on_screen is not None:
            reader.screen_queues = self._screen_queues
            reader.on_screen = self._on_screen
        if reader.root.live and reader.settings_notices is None:
            from nettop.pipeline.notices import JournalWatch

            reader.settings_notices = JournalWatch().poll

    def _show_capture(self) -> bool:
        """One capture's since-boot averages, or two captures' rates, as the timeline's two
        points (nettop/output/captured.py), or its one point (totals, no rate) when it has no
        uptime; False (sample it instead) for a tree that may change or captures that
        cannot be paired."""
        from nettop.capture.archive import is_static
        from nettop.output.captured import BETWEEN, SINCE_BOOT, CaptureError, expand, pair, read_capture

        if not is_static(self.root.path):
            return False
        try:
            p = off_loop(lambda: pair([read_capture(r, self.ifnames) for r in expand([self.root])]))
        except (CaptureError, OSError) as exc:
            self._on_error(exc)
            return False
        self.capture_note = p.note
        if p.basis not in (SINCE_BOOT, BETWEEN):  # no uptime: its totals, and no rate at all
            self.timeline.add_event(Event(time.time(), "problem", p.note))
            self.feed(p.cur)
            return True
        if self.doctor is not None:  # judge the whole interval: the uptime, or between captures
            import dataclasses

            self.doctor = Watch(dataclasses.replace(
                self.doctor.config, window_s=p.cur.t_mono - p.prev.t_mono + 1.0))
        self.feed(p.prev)
        self.feed(p.cur)
        return True

    def _on_sample(self, snap: Snapshot) -> None:
        self.feed(snap)

    def feed(self, snap: Snapshot) -> Point:
        """One new snapshot, through every stage (the sampler's; tests call it directly)."""
        self._refresh_routes()
        point = self.timeline.append(snap)
        if self._extra_events is not None:
            for event in self._extra_events():
                self.timeline.add_event(event)
        if self.doctor is not None:
            self.doctor.observe(point, self.timeline)  # findings panel (7) and chart markers
        if self._mailbox.put(point) and self._wake is not None:
            self._wake()
        if self.tap is not None:
            self.tap.feed(snap, self.timeline)
        for listener in self.listeners:
            listener(point)
        return point

    def _on_error(self, exc: BaseException) -> None:
        self.errors += 1
        text = f"sampler: {exc}"
        if text != self.last_error:  # a failure that repeats every tick is one marker
            self.last_error = text
            self.timeline.add_event(Event(time.time(), "problem", text))

    def take(self) -> Point | None:
        return self._mailbox.take()

    def stop(self) -> None:
        if self.probe_switch is not None:
            self.probe_switch.stop()
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        if self.tap is not None:
            self.tap.stop()
        if self._reader is not None:
            close = getattr(self._reader, "close", None)  # the HostReader we opened
            if self._reader is not self._given_reader and close is not None:
                off_loop(close)
            self._reader = None
        if self.prober is not None and self._owns_prober:
            self.prober.stop()
            self._owns_prober = False

    def findings(self) -> list[Finding]:
        if self.doctor is not None:
            return self.doctor.shown()
        return evaluate_recent(self.timeline.points(), self._doctor_config)  # built without a doctor

    def own_cpu_percent(self) -> float | None:
        """CPU % of one CPU the whole process (sampler thread + UI) used since the previous
        call; None at the first. The kernel's per-process CPU clock: one syscall, where
        psutil's `cpu_percent` opened and parsed /proc/self/stat on every frame (~11 us
        warm, against ~0.3 us)."""
        now = (time.process_time(), time.monotonic())
        last, self._own_cpu = self._own_cpu, now
        if last is None:
            return None
        wall = now[1] - last[1]
        return 100.0 * (now[0] - last[0]) / wall if wall > 0 else 0.0


__all__ = ["LivePipeline", "ROUTES_EVERY_S", "off_loop"]
