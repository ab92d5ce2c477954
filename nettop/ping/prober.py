"""The prober: one thread that probes every target on its own schedule.

One thread and one epoll serve all targets, so probes are sent on a monotonic grid
while replies are read whenever they arrive (their kernel timestamps make the read
time irrelevant). Name lookups run in short helper threads so a slow resolver never
delays the other targets. A target that fails (bad name, no route, no permission)
reports one line in `LatencyStats.error` and the others keep going.
"""

from __future__ import annotations

import os
import queue
import select
import threading
import time
from typing import Callable, Iterable, cast

from nettop.ping.icmp import DEFAULT_PAYLOAD
from nettop.ping.icmp_target import IcmpTarget, send_error
from nettop.ping.resolve import TargetSpec, parse_target, resolve, resolve_error
from nettop.ping.stats import LatencyStats
from nettop.ping.tcp_udp import TcpTarget, UdpTarget
from nettop.ping.tracker import Tracker

MIN_INTERVAL_S = 0.001
MAX_INTERVAL_S = 10.0
RESOLVE_RETRY_S = 10.0
_CATCH_UP_NS = 10_000_000  # how far behind the grid sending may catch up


class _Slot:
    """One target: its spec, its prober object and its schedule."""

    def __init__(self, spec: TargetSpec | None, target: IcmpTarget | TcpTarget | UdpTarget
                 | None, tracker: Tracker) -> None:
        self.spec = spec
        self.target = target
        self.tracker = tracker
        self.next_send_ns: int | None = None  # None until open
        self.retry_resolve_ns: int | None = None


class Prober:
    """Probes `targets` every `interval_s` seconds; `take()` returns per-target stats.

    mode: "auto" (raw ICMP socket if allowed, else the unprivileged datagram socket),
    "raw" or "dgram". `timeout_s` is how long a probe may wait for its reply before it
    counts as lost; `size` is the ICMP payload / UDP datagram size in bytes.
    """

    def __init__(self, targets: Iterable[str], interval_s: float = 1.0,
                 timeout_s: float = 1.0, size: int = DEFAULT_PAYLOAD,
                 mode: str = "auto") -> None:
        if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
            raise ValueError(f"ping interval must be {MIN_INTERVAL_S * 1000:g} ms to "
                             f"{MAX_INTERVAL_S:g} s, not {interval_s:g} s")
        if timeout_s <= 0:
            raise ValueError("ping timeout must be positive")
        if mode not in ("auto", "raw", "dgram"):
            raise ValueError(f"ping mode must be auto, raw or dgram, not {mode!r}")
        self.interval_ns = int(interval_s * 1e9)
        timeout_ns = int(timeout_s * 1e9)
        self.token = os.urandom(8)
        self._slots: list[_Slot] = []
        for text in dict.fromkeys(targets):
            tracker = Tracker(text, timeout_ns)
            try:
                spec = parse_target(text)
            except ValueError as exc:
                tracker.error = str(exc)
                self._slots.append(_Slot(None, None, tracker))
                continue
            target: IcmpTarget | TcpTarget | UdpTarget
            if spec.kind == "icmp":
                target = IcmpTarget(tracker, self.token, mode, size)
            elif spec.kind == "tcp":
                target = TcpTarget(tracker)
            else:
                target = UdpTarget(tracker, self.token, size)
            self._slots.append(_Slot(spec, target, tracker))
        self._stop = threading.Event()
        self._wake_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._resolved: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_fd = -1
        self._ep: select.epoll | None = None
        self._handlers: dict[int, Callable[[int], None]] = {}

    @property
    def targets(self) -> list[str]:
        return [s.tracker.target for s in self._slots]

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._handlers.clear()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._ep = select.epoll()
        self._ep.register(self._wake_fd, select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name="nettop-ping", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close every socket; take() still works afterwards."""
        if self._thread is None or self._ep is None:
            return
        with self._wake_lock:
            self._stop.set()
            os.eventfd_write(self._wake_fd, 1)
        self._thread.join(timeout=5)
        for slot in self._slots:
            if slot.target is not None:
                slot.target.close()
        self._ep.close()
        os.close(self._wake_fd)
        self._thread, self._ep, self._wake_fd = None, None, -1

    def take(self) -> dict[str, LatencyStats]:
        """Stats of every target since the previous take(), keyed as given."""
        return {s.tracker.target: s.tracker.take() for s in self._slots}

    def methods(self) -> dict[str, str | None]:
        """How each target is probed: "icmp-raw", "icmp-dgram", "tcp", "udp", or None
        while it is not (yet) open."""
        out: dict[str, str | None] = {}
        for s in self._slots:
            t = s.target
            if isinstance(t, IcmpTarget):
                out[s.tracker.target] = None if t.sock is None else \
                    ("icmp-raw" if t.raw else "icmp-dgram")
            elif t is None or s.next_send_ns is None:
                out[s.tracker.target] = None
            else:
                out[s.tracker.target] = "tcp" if isinstance(t, TcpTarget) else "udp"
        return out

    def icmp_identifiers(self) -> dict[str, int]:
        """The echo identifier each open ICMP target puts on the wire (on datagram
        sockets the kernel's choice: the socket's port), e.g. to find it in tcpdump."""
        return {s.tracker.target: s.target.expect_ident for s in self._slots
                if isinstance(s.target, IcmpTarget) and s.target.sock is not None}

    def trackers(self) -> dict[str, Tracker]:
        """The live bookkeeping (duplicate, late and foreign reply counts)."""
        return {s.tracker.target: s.tracker for s in self._slots}

    def __enter__(self) -> Prober:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the thread ---------------------------------------------------------------

    def _register(self, fd: int, mask: int, handler: Callable[[int], None]) -> None:
        assert self._ep is not None
        self._handlers[fd] = handler
        self._ep.register(fd, mask)

    def _unregister(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None and self._ep is not None:
            self._ep.unregister(fd)

    def _resolve_in_background(self, index: int, spec: TargetSpec) -> None:
        def work() -> None:
            try:
                result: object = resolve(spec)
            except OSError as exc:
                result = resolve_error(spec, exc)
            except UnicodeError:
                result = f"cannot resolve {spec.host!r}: not a valid host name"
            self._resolved.put((index, result))
            with self._wake_lock:  # stop() closes the fd under this lock
                if not self._stop.is_set():
                    os.eventfd_write(self._wake_fd, 1)
        threading.Thread(target=work, name="nettop-ping-resolve", daemon=True).start()

    def _opened(self, index: int, result: object) -> None:
        slot = self._slots[index]
        now = time.monotonic_ns()
        if isinstance(result, str):
            slot.tracker.error = result
            slot.retry_resolve_ns = now + int(RESOLVE_RETRY_S * 1e9)
            return
        family, sockaddr = cast(tuple[int, tuple], result)
        slot.tracker.address = sockaddr[0]
        assert slot.target is not None
        try:
            slot.target.open(family, sockaddr, self._register, self._unregister)
        except OSError as exc:
            # PermissionError from open_icmp carries its own one-line hint, no errno.
            slot.tracker.error = (str(exc) if exc.errno is None
                                  else send_error(slot.tracker.target, exc))
            slot.retry_resolve_ns = now + int(RESOLVE_RETRY_S * 1e9)
            return
        # Spread the targets' sends over the interval instead of sending in bursts.
        offset = self.interval_ns * index // max(1, len(self._slots))
        slot.next_send_ns = now + offset

    def _run(self) -> None:
        ep = self._ep
        assert ep is not None
        for i, slot in enumerate(self._slots):
            if slot.spec is not None:
                self._resolve_in_background(i, slot.spec)
        while not self._stop.is_set():
            while not self._resolved.empty():
                self._opened(*self._resolved.get_nowait())
            now = time.monotonic_ns()
            # Replies already queued by `now` are read before anything expires at `now`:
            # a thread the machine left unscheduled for longer than the timeout would
            # otherwise call probes lost whose replies came in time and were waiting.
            self._drain(ep)
            deadline = now + 1_000_000_000
            for i, slot in enumerate(self._slots):
                if slot.target is not None:
                    try:
                        deadline = min(deadline, self._tick(i, slot, now))
                    except Exception as exc:  # one target's bug must not stop the others
                        slot.tracker.error = _internal(slot.tracker.target, exc)
            wait = max(0, deadline - time.monotonic_ns()) / 1e9
            if wait:
                # select() waits with µs precision where epoll_wait rounds up to a ms.
                select.select([ep], [], [], wait)
            self._drain(ep)

    def _drain(self, ep: select.epoll) -> None:
        """Handle every fd that is ready now, without waiting."""
        for fd, events in ep.poll(0):
            if fd == self._wake_fd:
                try:
                    os.eventfd_read(self._wake_fd)
                except BlockingIOError:
                    pass
                continue
            handler = self._handlers.get(fd)
            if handler is None:
                continue
            try:
                handler(events)
            except Exception as exc:
                owner = getattr(handler, "__self__", None)
                if owner is not None and hasattr(owner, "tracker"):
                    owner.tracker.error = _internal(owner.tracker.target, exc)
                self._unregister(fd)  # a level-triggered fd would spin otherwise

    def _tick(self, index: int, slot: _Slot, now: int) -> int:
        """Expire, retry and send for one target; returns when it next needs the thread."""
        assert slot.target is not None and slot.spec is not None  # both, or neither (__init__)
        deadline = now + 1_000_000_000
        if slot.retry_resolve_ns is not None:
            if slot.retry_resolve_ns <= now:
                slot.retry_resolve_ns = None
                self._resolve_in_background(index, slot.spec)
            else:
                deadline = slot.retry_resolve_ns
        gone, next_expiry = slot.tracker.expire(now)
        if gone:
            slot.target.expired(gone)
        if next_expiry is not None:
            deadline = min(deadline, next_expiry)
        if slot.next_send_ns is None:
            return deadline
        if slot.next_send_ns <= now:
            slot.target.send()
            slot.next_send_ns += self.interval_ns
            # A short stall is made up on the next loops; a long one is skipped, so a
            # slow second never turns into a burst of probes.
            if slot.next_send_ns < now - max(self.interval_ns, _CATCH_UP_NS):
                slot.next_send_ns = now + self.interval_ns
        return min(deadline, slot.next_send_ns)


def _internal(target: str, exc: Exception) -> str:
    return f"{target}: internal error in the prober: {exc.__class__.__name__}: {exc}"
