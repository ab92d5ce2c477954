"""The /metrics endpoint: a sampler, the doctor's watch and an HTTP server, headless.

The live pipeline (`nettop.pipeline`, as for the live view and `nettop record`) reads
the host every interval on its sampler thread, appends each snapshot to a short
timeline and lets the doctor observe it; its listener here adds the eBPF interval
counts to running totals, then swaps in the new snapshot. A scrape
renders the latest snapshot once (cached until the next one) plus the prober's live
histograms, so any number of scrapers cost one render per sample.

Binding: loopback unless `--allow-remote`, because /metrics names the host's interfaces,
drivers, IRQs and ping targets (docs/fleet.md, "What is exposed").
"""

from __future__ import annotations

import errno
import ipaddress
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Point
from nettop.pipeline import LivePipeline
from nettop.serve.exposition import CONTENT_TYPE, Family, render, series_count
from nettop.serve.metrics import EbpfTotals, FindingGauge, Options, finding_families, ping_families, snapshot_families
from nettop.serve.webconfig import Gate

DEFAULT_LISTEN = "127.0.0.1:9741"


class ServeError(Exception):
    """One line for the user: a bad --listen, a port in use."""


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    tls: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/metrics"


def parse_listen(text: str, allow_remote: bool) -> Listen:
    """'127.0.0.1:9741', '[::1]:9741', 'localhost:9741', '0.0.0.0:9741' (with allow_remote)."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ServeError(f"--listen {text!r}: give ADDRESS:PORT, e.g. {DEFAULT_LISTEN}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isascii() or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ServeError(f"--listen {text!r}: the port must be a number from 1 to 65535")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise ServeError(f"--listen {text!r}: {host!r} is not an IP address (use 127.0.0.1, ::1 or an address of this host)") from None
    if not addr.is_loopback and not allow_remote:
        raise ServeError(f"--listen {text}: {host} is reachable from the network and /metrics names this host's "
                         "interfaces, IRQs and ping targets; add --allow-remote to mean it")
    return Listen(str(addr), int(port_text))


class Exporter:
    """Samples `reader` and renders the text a scrape gets."""

    def __init__(self, reader: Any, interval: float, opts: Options = Options(), prober: Any = None,
                 latency_target_ms: float | None = None) -> None:
        self.reader = reader
        self.interval = interval
        self.opts = opts
        self.prober = prober  # started and stopped by `serve`, read here for its histograms
        self.pipeline = LivePipeline(reader=reader, interval=interval, max_points=2,
                                     latency_target_ms=latency_target_ms)
        self.pipeline.listeners.append(self._on_point)
        self.timeline = self.pipeline.timeline
        assert self.pipeline.doctor is not None
        self.watch = self.pipeline.doctor
        self.ebpf = EbpfTotals()
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._cached: tuple[Snapshot, list[Family]] | None = None

    @property
    def errors(self) -> int:
        """Samples the pipeline could not take since it started."""
        return self.pipeline.errors

    def start(self) -> None:
        self.pipeline.start()

    def stop(self) -> None:
        self.pipeline.stop()

    def observe(self, snap: Snapshot) -> None:
        """One new snapshot (the sampler's; tests and benchmarks call it directly)."""
        self.pipeline.feed(snap)

    def _on_point(self, point: Point) -> None:
        snap = point.snapshot
        if snap.ebpf is not None:
            self.ebpf.add(snap.ebpf)
        with self._lock:
            self._latest = snap

    def families(self) -> list[Family] | None:
        with self._lock:
            snap, cached = self._latest, self._cached
        if snap is None:
            return None
        if cached is None or cached[0] is not snap:
            host = snapshot_families(snap, self.opts) + self.ebpf.families()
            with self._lock:
                self._cached = (snap, host)
        else:
            host = cached[1]
        found = [FindingGauge(f.id, f.rule, f.subject, int(f.severity), f.severity.label) for f in self.watch.shown()]
        extra = finding_families(found)
        if self.prober is not None:
            extra += ping_families({t: tr.histogram.view() for t, tr in self.prober.trackers().items()})
        meta = Family("nettop_sampler_errors_total", "counter",
                      "Samples nettop could not take since it started (a read of the host failed).")
        meta.add({}, self.errors)
        return host + extra + [meta]

    def render(self) -> str | None:
        fams = self.families()
        return None if fams is None else render(fams)

    def series(self) -> int:
        fams = self.families()
        return 0 if fams is None else series_count(fams)


def _handler(exporter: Exporter, gate: Gate | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "nettop"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if gate is not None and not gate.allows(self.headers.get("Authorization")):
                self._send(401, "text/plain; charset=utf-8", "Unauthorized\n", {"WWW-Authenticate": "Basic"})
            elif path == "/metrics":
                text = exporter.render()
                if text is None:
                    self._send(503, "text/plain; charset=utf-8", "nettop: no sample yet; scrape again in a second\n")
                else:
                    self._send(200, CONTENT_TYPE, text)
            elif path == "/":
                self._send(200, "text/plain; charset=utf-8", "nettop serve: metrics at /metrics\n")
            else:
                self._send(404, "text/plain; charset=utf-8", "not found: nettop serves /metrics\n")

        def _send(self, code: int, ctype: str, body: str, headers: dict[str, str] | None = None) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for name, value in {**(gate.config().headers if gate is not None else {}), **(headers or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass  # one line per scrape would fill a journal; errors are counted instead

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, listen: Listen, handler: type[BaseHTTPRequestHandler], gate: Gate | None = None) -> None:
        self.address_family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
        self.gate = gate
        super().__init__((listen.host, listen.port), handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's own thread, so a slow TLS handshake holds up no one else."""
        if self.gate is None or not self.gate.tls:
            return super().finish_request(request, client_address)
        conn = self.gate.wrap(request)
        if conn is not None:
            try:
                super().finish_request(conn, client_address)
            finally:
                conn.close()


def bind(listen: Listen, exporter: Exporter, gate: Gate | None = None) -> ThreadingHTTPServer:
    try:
        return _Server(listen, _handler(exporter, gate), gate)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"--listen {listen.host}:{listen.port}: the port is in use; pick another port") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ServeError(f"--listen {listen.host}:{listen.port}: no interface of this host has that address") from None
        if exc.errno == errno.EACCES:
            raise ServeError(f"--listen {listen.host}:{listen.port}: permission denied (ports below 1024 need root)") from None
        raise ServeError(f"--listen {listen.host}:{listen.port}: {exc.strerror}") from None


def serve(listen: Listen, reader: Any, interval: float, opts: Options, prober: Any = None,
          latency_target_ms: float | None = None, gate: Gate | None = None) -> int:
    """Run until SIGINT/SIGTERM; returns the exit status."""
    exporter = Exporter(reader, interval, opts, prober, latency_target_ms)
    server = bind(listen, exporter, gate)
    if gate is not None:
        listen = Listen(listen.host, listen.port, gate.tls)
    if prober is not None:
        prober.start()
    exporter.start()
    stop = threading.Event()

    def _stop(*_: Any) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    old = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    print(f"nettop: serving {listen.url} (every {interval:g} s); Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        server.server_close()
        exporter.stop()
        if prober is not None:
            prober.stop()
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    return 0
