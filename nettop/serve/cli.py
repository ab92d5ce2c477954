"""`nettop serve`: arguments and the one-line errors; the work is in server.py."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from nettop.serve.server import DEFAULT_LISTEN, ServeError, parse_listen


def add_subcommands(sub: Any, interval_type: Any, root_type: Any, latency_type: Any) -> None:
    s = sub.add_parser("serve", help="Prometheus /metrics of nettop's figures (headless; docs/fleet.md)")
    s.add_argument("--listen", default=DEFAULT_LISTEN, metavar="ADDR:PORT",
                   help=f"where to serve /metrics (default {DEFAULT_LISTEN}; loopback unless --allow-remote)")
    s.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --listen address (/metrics names interfaces, IRQs, ping targets)")
    s.add_argument("--web.config.file", dest="web_config", default=None, metavar="FILE",
                   help="TLS and basic auth, in Prometheus exporter-toolkit's YAML format (docs/fleet.md)")
    s.add_argument("--per-cpu-irqs", action="store_true",
                   help="also export each queue IRQ's count per CPU (CPUs x IRQs series)")
    s.add_argument("-i", "--interval", type=interval_type, default=None, dest="serve_interval", metavar="SECONDS",
                   help="seconds between samples (default 1)")
    s.add_argument("--root", type=root_type, default=None, dest="serve_root", metavar="DIR", help="serve a captured /proc + /sys tree")
    s.add_argument("--iface", action="append", default=None, dest="serve_iface", metavar="IFACE",
                   help="only these interfaces (repeatable)")
    s.add_argument("--latency-target", type=latency_type, default=None, dest="serve_latency_target", metavar="MS",
                   help="the RTT this host must keep (ms): the doctor's latency rules then apply to the findings gauge")
    s.add_argument("--ebpf", action="store_true", dest="serve_ebpf",
                   help="also run the eBPF tracepoint probes and export their counters (root and bcc)")


def run(args: argparse.Namespace, prober: Any, start_probes: Any) -> int:
    from nettop.collectors.host import HostReader
    from nettop.serve.metrics import Options
    from nettop.serve.server import serve
    from nettop.serve.webconfig import Gate, WebConfigError, load

    try:
        listen = parse_listen(args.listen, args.allow_remote)
        gate = None if args.web_config is None else Gate(load(args.web_config))
    except (ServeError, WebConfigError) as exc:
        print(f"nettop serve: {exc}", file=sys.stderr)
        return 2
    if args.allow_remote and (gate is None or not gate.tls or not gate.config().users):
        print("nettop serve: --allow-remote without TLS and basic_auth_users in a --web.config.file: anyone who "
              "reaches the port reads /metrics in clear text (docs/fleet.md)", file=sys.stderr)
    probes = None
    if args.serve_ebpf:
        problems: list[str] = []
        probes = start_probes(problems)
        for line in problems:
            print(f"nettop serve: {line}", file=sys.stderr)
    root = args.serve_root or args.root
    reader = HostReader(root, args.serve_iface or args.iface, prober=prober, probes=probes)
    try:
        return serve(listen, reader, args.serve_interval or args.interval, Options(args.per_cpu_irqs), prober,
                     args.serve_latency_target or args.latency_target, gate)
    except ServeError as exc:
        print(f"nettop serve: {exc}", file=sys.stderr)
        return 2
    finally:
        if probes is not None:
            probes.stop()
