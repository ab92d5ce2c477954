"""Command line: `nettop` (live view) and `nettop snapshot`.

Every user error ends as one line on stderr naming the thing and the fix, with exit
status 2; nothing here prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import NoReturn, Sequence

from nettop.sampler import clamp_interval
from nettop.sysroot import SysRoot


class UsageError(Exception):
    """A bad argument or environment, reported as one line."""


def _interval(text: str) -> float:
    try:
        return clamp_interval(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if "range" in str(exc) else
                                         f"interval {text!r} is not a number of seconds") from None


def _root(text: str) -> SysRoot:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"root {text!r} is not a directory (give a captured tree holding proc/ and sys/)")
    if not os.path.isdir(os.path.join(text, "proc")):
        raise argparse.ArgumentTypeError(f"root {text!r} has no proc/ directory (give a captured tree holding proc/ and sys/)")
    return SysRoot(text)


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line naming the argument and where help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nettop", description="Live view and tuning of a Linux host's network stack.")
    p.add_argument("-i", "--interval", type=_interval, default=1.0, help="sampling interval in seconds (0.1-60, default 1)")
    p.add_argument("--root", type=_root, default=SysRoot("/"), help="read a captured /proc + /sys tree instead of the live kernel")
    p.add_argument("--iface", action="append", default=None, metavar="IFACE", help="only these interfaces (repeatable)")
    _ping_args(p)
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    s = sub.add_parser("snapshot", help="take two samples INTERVAL apart and print the rates")
    s.add_argument("--json", action="store_true", help="print one JSON document (schema in docs/snapshot-json.md)")
    s.add_argument("-i", "--interval", type=_interval, default=None, dest="snap_interval", help="seconds between the two samples (default 1)")
    s.add_argument("--root", type=_root, default=None, dest="snap_root", help="read a captured /proc + /sys tree")
    s.add_argument("--iface", action="append", default=None, dest="snap_iface", metavar="IFACE")
    _ping_args(s, prefix="snap_")
    s.add_argument("--ebpf", action="store_true",
                   help="also run the eBPF tracepoint probes (NAPI, hardirq, softirq, drops; root and bcc)")
    from nettop.actions.cli_set import add_subcommands
    add_subcommands(sub)
    return p


def _ping_interval(text: str) -> float:
    from nettop.ping import MAX_INTERVAL_S, MIN_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"ping interval {text!r} is not a number of seconds") from None
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"ping interval {value:g} s is out of range: use {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} s")
    return value


def _ping_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--ping", action="append", default=None, dest=f"{prefix}ping", metavar="HOST",
                   help="probe latency to HOST (repeatable; tcp://HOST:PORT and udp://HOST:PORT too)")
    p.add_argument("--ping-interval", type=_ping_interval, default=None, dest=f"{prefix}ping_interval",
                   metavar="S", help="seconds between probes to each target (0.001-10, default 0.1)")


def _prober(targets: list[str] | None, interval: float | None):  # type: ignore[no-untyped-def]
    if not targets:
        return None
    from nettop.ping import Prober
    return Prober(targets, interval_s=interval or 0.1)


def _start_probes(problems: list[str]):  # type: ignore[no-untyped-def]
    """eBPF probes started (compiled) now, or None with the reason in `problems`."""
    from nettop.ebpf import EbpfProbes
    ok, why = EbpfProbes.available()
    if not ok:
        problems.append(f"eBPF probes off: {why}")
        return None
    probes = EbpfProbes()
    if not probes.start():
        problems.append("eBPF probes off: " + "; ".join(probes.errors))
        probes.stop()
        return None
    problems.extend(f"eBPF: {e}" for e in probes.errors)
    return probes


def cmd_snapshot(root: SysRoot, interval: float, ifaces: list[str] | None, as_json: bool,
                 ping: list[str] | None = None, ping_interval: float | None = None,
                 ebpf: bool = False) -> int:
    from nettop.collect import HostReader
    from nettop.rates import compute_rates
    from nettop.snapshot_json import build_document

    extra: list[str] = []
    probes = _start_probes(extra) if ebpf else None
    prober = _prober(ping, ping_interval)
    if prober is not None:
        prober.start()
    try:
        with HostReader(root, ifaces, prober=prober, probes=probes) as reader:
            first = reader.read()
            time.sleep(max(0.0, first.t_mono + interval - time.monotonic()))
            second = reader.read()
    finally:
        if prober is not None:
            prober.stop()
        if probes is not None:
            probes.stop()
    if ifaces:
        unknown = [i for i in ifaces if i not in second.links]
        if unknown:
            raise UsageError(f"no interface named {', '.join(unknown)} (see `ip link` for the names)")
    doc = build_document(first, second, compute_rates(first, second), interval)
    doc["problems"].extend(extra)
    if ebpf and doc["ebpf"] is None:
        doc["ebpf"] = {"available": False, "reason": extra[0] if extra else "eBPF probes did not start"}
    if as_json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        from nettop.text_report import render
        sys.stdout.write(render(doc))
    for line in doc["problems"]:
        print(f"nettop: {line}", file=sys.stderr)
    return 0


def cmd_live(root: SysRoot, interval: float, ifaces: list[str] | None,
             ping: list[str] | None = None, ping_interval: float | None = None) -> int:
    """The full-screen app on a terminal; the plain refreshing report when output is not one."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        from nettop.text_report import watch
        return watch(root, interval, ifaces)
    from nettop.tui.app import run
    from nettop.tui.source import LiveSource
    return run(LiveSource(root, ifaces, interval, prober=_prober(ping, ping_interval)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in ("set", "undo", "redo", "journal", "restore", "revert"):
            from nettop.actions.cli_set import run as run_tuning
            return run_tuning(args)
        if args.command == "snapshot":
            return cmd_snapshot(args.snap_root or args.root, args.snap_interval or args.interval,
                                args.snap_iface or args.iface, args.json,
                                args.snap_ping or args.ping, args.snap_ping_interval or args.ping_interval,
                                args.ebpf)
        return cmd_live(args.root, args.interval, args.iface, args.ping, args.ping_interval)
    except UsageError as exc:
        print(f"nettop: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
