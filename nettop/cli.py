"""Command line: `nettop` (live view) and `nettop snapshot`.

Every user error ends as one line on stderr naming the thing and the fix, with exit
status 2; nothing here prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import NoReturn, Sequence

from nettop.output.argtypes import interval as _interval, latency_target as _latency_target, ping_interval as _ping_interval, root as _root
from nettop.kernel.sysroot import SysRoot


class UsageError(Exception):
    """A bad argument or environment, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line naming the argument and where help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nettop", description="Live view and tuning of a Linux host's network stack.")
    p.add_argument("-i", "--interval", type=_interval, default=1.0, help="sampling interval in seconds (0.1-60, default 1)")
    p.add_argument("--root", type=_root, default=SysRoot("/"), help="read a captured /proc + /sys tree instead of the live kernel")
    p.add_argument("--iface", action="append", default=None, metavar="IFACE", help="only these interfaces (repeatable)")
    p.add_argument("--revert-on-exit", action="store_true",
                   help="live view: put back every setting nettop changed when it exits (kill -9: `nettop restore`)")
    _ping_args(p)
    p.add_argument("--latency-target", type=_latency_target, default=None, metavar="MS",
                   help="the RTT this host must keep (ms): the doctor's coalescing and power-management rules "
                        "then speak up (live view and --record)")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    s = sub.add_parser("snapshot", help="take two samples INTERVAL apart and print the rates")
    s.add_argument("--json", action="store_true", help="print one JSON document (schema in docs/snapshot-json.md)")
    s.add_argument("-i", "--interval", type=_interval, default=None, dest="snap_interval", help="seconds between the two samples (default 1)")
    s.add_argument("--root", type=_root, action="append", default=None, dest="snap_root",
                   help="read a captured /proc + /sys tree: once for since-boot averages, twice "
                        "(two captures of one host) for the rates between them")
    s.add_argument("--iface", action="append", default=None, dest="snap_iface", metavar="IFACE")
    _ping_args(s, prefix="snap_")
    s.add_argument("--ebpf", action="store_true",
                   help="also run the eBPF tracepoint probes (NAPI, hardirq, softirq, drops; root and bcc)")
    from nettop.actions.cli_set import add_subcommands
    add_subcommands(sub)
    from nettop.doctor import cli as doctor_cli
    doctor_cli.add_subcommands(sub)
    from nettop.experiment import cli as experiment_cli
    experiment_cli.add_subcommands(sub)
    from nettop.fleet import cli as fleet_cli
    fleet_cli.add_subcommands(sub)
    from nettop.capture import cli as capture_cli
    capture_cli.add_subcommands(sub)
    from nettop.serve import cli as serve_cli
    serve_cli.add_subcommands(sub, _interval, _root, _latency_target)
    _ping_args(sub.choices["serve"], prefix="serve_")
    _record_args(p, sub)
    return p


def _size(text: str) -> int:
    from nettop.record.recorder import parse_size
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration(text: str) -> float:
    from nettop.record.recorder import parse_duration
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _record_args(p: argparse.ArgumentParser, sub) -> None:  # type: ignore[no-untyped-def]
    """`--record FILE` (headless), `record`, `replay`, `export`, `report`."""
    p.add_argument("--record", metavar="FILE", default=None,
                   help="record to FILE without a screen (see docs/recording-format.md); Ctrl-C stops")
    p.add_argument("--duration", type=_duration, default=None, help="with --record: stop after this long (90s, 15m, 24h)")
    p.add_argument("--max-size", type=_size, default=None, help="with --record: stop when the file reaches SIZE (500M, 2G)")
    r = sub.add_parser("record", help="record without a screen (same as --record FILE)")
    r.add_argument("-o", "--output", required=True, metavar="FILE", dest="rec_output")
    r.add_argument("-i", "--interval", type=_interval, default=None, dest="rec_interval")
    r.add_argument("--duration", type=_duration, default=None, dest="rec_duration")
    r.add_argument("--max-size", type=_size, default=None, dest="rec_max_size")
    r.add_argument("--root", type=_root, default=None, dest="rec_root")
    r.add_argument("--iface", action="append", default=None, dest="rec_iface", metavar="IFACE")
    r.add_argument("--latency-target", type=_latency_target, default=None, dest="rec_latency_target", metavar="MS",
                   help="the RTT this host must keep (ms), for the recorded doctor findings")
    _ping_args(r, prefix="rec_")
    rp = sub.add_parser("replay", help="open a recording in the same screens (play/pause, seek, events)")
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--speed", type=float, default=1.0, help="playback speed 1-60 (default 1)")
    ex = sub.add_parser("export", help="rates per sample of a recording as CSV or JSON")
    ex.add_argument("file", metavar="FILE")
    ex.add_argument("--format", choices=("csv", "json"), default="csv")
    ex.add_argument("-o", "--output", default=None, metavar="OUT", help="write here instead of stdout")
    rep = sub.add_parser("report", help="Markdown incident summary of a recording")
    rep.add_argument("file", metavar="FILE")
    rep.add_argument("--no-plots", action="store_true", help="leave out the text plots")


def cmd_record(args: argparse.Namespace) -> int:
    from nettop.record.recorder import record
    sub = args.command == "record"
    path = args.rec_output if sub else args.record
    ping = (args.rec_ping if sub else None) or args.ping
    ping_interval = (args.rec_ping_interval if sub else None) or args.ping_interval
    return record(path, (args.rec_root if sub else None) or args.root,
                  (args.rec_iface if sub else None) or args.iface,
                  (args.rec_interval if sub else None) or args.interval,
                  (args.rec_duration if sub else None) or args.duration,
                  (args.rec_max_size if sub else None) or args.max_size,
                  _prober(ping, ping_interval),
                  latency_target_ms=(args.rec_latency_target if sub else None) or args.latency_target)


def cmd_recording(args: argparse.Namespace) -> int:
    from nettop.record.store import RecordingError
    try:
        if args.command == "replay":
            return cmd_replay(args.file, args.speed)
        if args.command == "export":
            from nettop.record.export import export
            return export(args.file, args.format, args.output)
        from nettop.record.report import report
        return report(args.file, plots=not args.no_plots)
    except RecordingError as exc:
        raise UsageError(str(exc)) from None


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
    from nettop.collectors.host import HostReader
    from nettop.model.rates import compute_rates
    from nettop.output.snapshot_json import build_document

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
        from nettop.output.text_report import render
        sys.stdout.write(render(doc))
    for line in doc["problems"]:
        print(f"nettop: {line}", file=sys.stderr)
    return 0


def cmd_snapshot_captured(roots: list[SysRoot], ifaces: list[str] | None, as_json: bool) -> int:
    """`nettop snapshot --root A [--root B]`: each capture read once (output/captured.py)."""
    from nettop.output.captured import CaptureError, snapshot_document

    try:
        doc = snapshot_document(roots, ifaces)
    except CaptureError as exc:
        raise UsageError(str(exc)) from None
    if ifaces:
        unknown = [i for i in ifaces if i not in doc["interfaces"]]
        if unknown:
            raise UsageError(f"no interface named {', '.join(unknown)} in the capture")
    if as_json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        from nettop.output.text_report import render
        # no interval (one capture without uptime): the report's first problem line says so
        sys.stdout.write(render({**doc, "interval_s": doc["interval_s"] or 0.0}))
    for line in doc["problems"]:
        print(f"nettop: {line}", file=sys.stderr)
    return 0


def cmd_live(root: SysRoot, interval: float, ifaces: list[str] | None,
             ping: list[str] | None = None, ping_interval: float | None = None,
             revert_on_exit: bool = False, latency_target_ms: float | None = None) -> int:
    """The full-screen app on a terminal; the plain refreshing report when output is not one."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        from nettop.output.text_report import watch
        return watch(root, interval, ifaces)
    from nettop.tui.app import run
    from nettop.tui.source import LiveSource
    return run(LiveSource(root, ifaces, interval, prober=_prober(ping, ping_interval),
                          latency_target_ms=latency_target_ms), revert_on_exit)


def cmd_replay(path: str, speed: float = 1.0) -> int:
    """`nettop replay FILE`: the TUI on the recording; damage is reported in one line.
    Here, not in nettop.record, so that the recording package never imports the TUI."""
    from nettop.record.replay import ReplaySource

    source = ReplaySource(path, speed)
    for w in source.warnings:
        print(f"nettop: {w}", file=sys.stderr)
    if not len(source.reader):
        print(f"nettop: {path} holds no intact sample", file=sys.stderr)
        return 1
    from nettop.tui.app import run
    return run(source)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in ("set", "undo", "redo", "journal", "restore", "revert"):
            from nettop.actions.cli_set import run as run_tuning
            return run_tuning(args)
        if args.command == "doctor":
            from nettop.doctor.cli import run as run_doctor
            return run_doctor(args)
        if args.command == "experiment":
            from nettop.experiment.cli import run as run_experiment
            return run_experiment(args)
        if args.command in ("persist", "apply"):
            from nettop.fleet.cli import run as run_fleet
            return run_fleet(args)
        if args.command == "serve":
            from nettop.serve.cli import run as run_serve
            return run_serve(args, _prober(args.serve_ping or args.ping, args.serve_ping_interval or args.ping_interval),
                             _start_probes)
        if args.command == "record" or (args.record and args.command is None):
            return cmd_record(args)
        if args.command in ("replay", "export", "report"):
            return cmd_recording(args)
        if args.command == "capture":
            from nettop.capture.cli import run as run_capture
            return run_capture(args)
        if args.command == "snapshot" and (args.snap_root or not args.root.live):
            return cmd_snapshot_captured(args.snap_root or [args.root], args.snap_iface or args.iface, args.json)
        if args.command == "snapshot":
            return cmd_snapshot(args.root, args.snap_interval or args.interval,
                                args.snap_iface or args.iface, args.json,
                                args.snap_ping or args.ping, args.snap_ping_interval or args.ping_interval,
                                args.ebpf)
        return cmd_live(args.root, args.interval, args.iface, args.ping, args.ping_interval,
                        args.revert_on_exit, args.latency_target)
    except UsageError as exc:
        print(f"nettop: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
