"""Command line: the parser and the seventeen commands.

`nettop` alone opens the live view; `snapshot` prints two samples' rates; `record`,
`replay`, `export` and `report` make and read recordings; `set`, `undo`, `redo`,
`journal`, `restore` and `revert` change the host through the journal (actions/cli_set.py);
`doctor`, `experiment`, `persist`, `apply` and `serve` come from their packages' cli.py.
Screen code is imported only by the two commands that open a screen (the live view and
`replay`).

Every user error ends as one line on stderr naming the thing and the fix, with exit
status 2; nothing here prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, NoReturn, Sequence

from nettop.output.argtypes import interval as _interval, latency_target as _latency_target, ping_interval as _ping_interval, root as _root
from nettop import __version__
from nettop.kernel.sysroot import SysRoot

if TYPE_CHECKING:  # for the hints only: the commands import these lazily, when they run
    from nettop.ebpf import EbpfProbes
    from nettop.ping import Prober


class UsageError(Exception):
    """A bad argument or environment, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line naming the argument and where help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nettop", description="Live view and tuning of a Linux host's network stack.")
    p.add_argument("--version", action="version", version=f"nettop {__version__}", help="print nettop's version and exit")
    p.add_argument("-i", "--interval", type=_interval, default=1.0, metavar="SECONDS", help="sampling interval in seconds (0.1-60, default 1)")
    p.add_argument("--root", type=_root, default=SysRoot("/"), metavar="DIR", help="read a captured /proc + /sys tree instead of the live kernel")
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
    s.add_argument("-i", "--interval", type=_interval, default=None, dest="snap_interval", metavar="SECONDS", help="seconds between the two samples (default 1)")
    s.add_argument("--root", type=_root, action="append", default=None, dest="snap_root", metavar="DIR",
                   help="read a captured /proc + /sys tree, `nettop capture` archive or sosreport: once for "
                        "since-boot averages, twice (two captures of one host) for the rates between them")
    s.add_argument("--iface", action="append", default=None, dest="snap_iface", metavar="IFACE",
                   help="only these interfaces (repeatable)")
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
    from nettop import manpage, units
    manpage.add_subcommands(sub)
    units.add_subcommands(sub)
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


def _record_args(p: argparse.ArgumentParser, sub: argparse._SubParsersAction[_Parser]) -> None:
    """`--record FILE` (headless), `record`, `replay`, `export`, `report`."""
    p.add_argument("--record", metavar="FILE", default=None,
                   help="record to FILE without a screen (see docs/recording-format.md); Ctrl-C stops")
    p.add_argument("--duration", type=_duration, default=None, metavar="TIME", help="with --record: stop after this long (90s, 15m, 24h)")
    p.add_argument("--max-size", type=_size, default=None, metavar="SIZE", help="with --record: stop when the file reaches SIZE (500M, 2G)")
    r = sub.add_parser("record", help="record without a screen (same as --record FILE)")
    where = r.add_mutually_exclusive_group(required=True)
    where.add_argument("-o", "--output", metavar="FILE", dest="rec_output",
                       help="the one new recording to write (docs/recording-format.md)")
    where.add_argument("--dir", metavar="DIR", dest="rec_dir", default=None,
                       help="record for good into DIR, one file per --period (docs/recording.md); SIGHUP starts the next file")
    r.add_argument("--period", type=_duration, default=None, metavar="DURATION", dest="rec_period",
                   help="with --dir: length of each file (default 1h; 15m, 1d)")
    r.add_argument("--keep", type=_duration, default=None, metavar="AGE", dest="rec_keep",
                   help="with --dir: delete files older than this (7d, 12h); default keep all")
    r.add_argument("--keep-size", type=_size, default=None, metavar="SIZE", dest="rec_keep_size",
                   help="with --dir: delete the oldest files while all together exceed SIZE (2G, 500M)")
    r.add_argument("-i", "--interval", type=_interval, default=None, dest="rec_interval", metavar="SECONDS",
                   help="sampling interval in seconds (0.1-60, default 1)")
    r.add_argument("--duration", type=_duration, default=None, dest="rec_duration", metavar="TIME",
                   help="stop after this long (90s, 15m, 24h; default: until Ctrl-C or SIGTERM)")
    r.add_argument("--max-size", type=_size, default=None, dest="rec_max_size", metavar="SIZE",
                   help="with -o: stop when the file reaches SIZE (500M, 2G)")
    r.add_argument("--root", type=_root, default=None, dest="rec_root", metavar="DIR",
                   help="record a captured /proc + /sys tree instead of the live kernel")
    r.add_argument("--iface", action="append", default=None, dest="rec_iface", metavar="IFACE",
                   help="only these interfaces (repeatable)")
    r.add_argument("--latency-target", type=_latency_target, default=None, dest="rec_latency_target", metavar="MS",
                   help="the RTT this host must keep (ms), for the recorded doctor findings")
    _ping_args(r, prefix="rec_")
    rp = sub.add_parser("replay", help="open a recording in the same screens (play/pause, seek, events)")
    rp.add_argument("file", metavar="FILE|DIR", help="a recording, or a `record --dir` directory")
    rp.add_argument("--speed", type=float, default=1.0, metavar="X", help="playback speed 1-60 (default 1)")
    rp.add_argument("--at", type=_when, default=None, metavar="TIME",
                    help='start at this wall time ("2026-11-25 03:12", UTC unless "+01:00" follows; -2h)')
    ex = sub.add_parser("export", help="rates per sample of a recording as CSV or JSON")
    ex.add_argument("file", metavar="FILE|DIR", help="a recording, or a `record --dir` directory")
    _window_args(ex)
    ex.add_argument("--format", choices=("csv", "json"), default="csv", help="csv (default) or json")
    ex.add_argument("-o", "--output", default=None, metavar="OUT", help="write here instead of stdout")
    rep = sub.add_parser("report", help="Markdown incident summary of a recording")
    rep.add_argument("file", metavar="FILE|DIR", help="a recording, or a `record --dir` directory")
    _window_args(rep)
    rep.add_argument("--no-plots", action="store_true", help="leave out the text plots")


def _when(text: str) -> float:
    from nettop.record.wallclock import parse_when
    try:
        return parse_when(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _window_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", type=_when, default=None, metavar="TIME",
                   help='only samples from this wall time on ("2026-11-25 03:00", UTC unless "+01:00" follows; -2h)')
    p.add_argument("--until", type=_when, default=None, metavar="TIME", help="only samples up to this wall time")


def _rotation(args: argparse.Namespace) -> object:
    """`record --dir`'s settings, or None for one file; misplaced options are usage errors."""
    rotating = ("--period", args.rec_period), ("--keep", args.rec_keep), ("--keep-size", args.rec_keep_size)
    if args.rec_dir is None:
        given = [name for name, value in rotating if value is not None]
        if given:
            raise UsageError(f"{given[0]} needs --dir DIR (a single -o FILE is never rotated)")
        return None
    if args.rec_max_size is not None:
        raise UsageError("--max-size stops a single file; with --dir use --keep-size")
    from nettop.record.rotate import MIN_PERIOD_S, Rotation
    period = args.rec_period or 3600.0
    if period < MIN_PERIOD_S:
        raise UsageError(f"--period must be at least {MIN_PERIOD_S:g} s")
    return Rotation(args.rec_dir, period, args.rec_keep, args.rec_keep_size)


def cmd_record(args: argparse.Namespace) -> int:
    from nettop.record.recorder import record
    sub = args.command == "record"
    rotation = _rotation(args) if sub else None
    path = (args.rec_output or args.rec_dir) if sub else args.record
    ping = (args.rec_ping if sub else None) or args.ping
    ping_interval = (args.rec_ping_interval if sub else None) or args.ping_interval
    return record(path, (args.rec_root if sub else None) or args.root,
                  (args.rec_iface if sub else None) or args.iface,
                  (args.rec_interval if sub else None) or args.interval,
                  (args.rec_duration if sub else None) or args.duration,
                  (args.rec_max_size if sub else None) or args.max_size,
                  _prober(ping, ping_interval),
                  latency_target_ms=(args.rec_latency_target if sub else None) or args.latency_target,
                  rotation=rotation)


def cmd_recording(args: argparse.Namespace) -> int:
    from nettop.record.store import RecordingError
    try:
        if args.command == "replay":
            return cmd_replay(args.file, args.speed, args.at)
        if args.command == "export":
            from nettop.record.export import export
            return export(args.file, args.format, args.output, args.since, args.until)
        from nettop.record.report import report
        return report(args.file, plots=not args.no_plots, since=args.since, until=args.until)
    except RecordingError as exc:
        raise UsageError(str(exc)) from None


def _ping_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--ping", action="append", default=None, dest=f"{prefix}ping", metavar="HOST",
                   help="probe latency to HOST (repeatable; tcp://HOST:PORT and udp://HOST:PORT too)")
    p.add_argument("--ping-interval", type=_ping_interval, default=None, dest=f"{prefix}ping_interval",
                   metavar="S", help="seconds between probes to each target (0.001-10, default 0.1)")


def _prober(targets: list[str] | None, interval: float | None) -> Prober | None:
    if not targets:
        return None
    from nettop.ping import Prober
    return Prober(targets, interval_s=interval or 0.1)


def _start_probes(problems: list[str]) -> EbpfProbes | None:
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
    from nettop.collectors import session_path

    doc["session"] = session_path.to_json(session_path.detect(root=root), second)
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
        sys.stdout.write(render(doc))
    for line in doc["problems"]:
        print(f"nettop: {line}", file=sys.stderr)
    return 0


def cmd_live(root: SysRoot, interval: float, ifaces: list[str] | None,
             ping: list[str] | None = None, ping_interval: float | None = None,
             revert_on_exit: bool = False, latency_target_ms: float | None = None) -> int:
    """The full-screen app on a terminal; the plain refreshing report when output is not one."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        from nettop.pipeline.text import watch
        return watch(root, interval, ifaces)
    from nettop.tui.app import run
    from nettop.tui.source import LiveSource
    return run(LiveSource(root, ifaces, interval, prober=_prober(ping, ping_interval),
                          latency_target_ms=latency_target_ms), revert_on_exit)


def cmd_replay(path: str, speed: float = 1.0, at: float | None = None) -> int:
    """`nettop replay FILE|DIR [--at TIME]`: the TUI on the recording; damage is reported
    in one line. Here, not in nettop.record, so that the recording package never imports the TUI."""
    from nettop.record.replay import ReplaySource

    source = ReplaySource(path, speed)
    for w in source.warnings:
        print(f"nettop: {w}", file=sys.stderr)
    if not len(source.reader):
        print(f"nettop: {path} holds no intact sample", file=sys.stderr)
        return 1
    if at is not None:
        walls = [s.t_wall for s in source.reader.index]
        utc = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
        if at < min(walls):
            print(f"nettop: --at {utc} is before {path} starts; showing its first sample", file=sys.stderr)
        elif at > max(walls):
            print(f"nettop: --at {utc} is after {path} ends; showing its last sample", file=sys.stderr)
        source.seek(at)
    from nettop.tui.app import run
    return run(source)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "man":
            from nettop.manpage import run as run_man
            return run_man(args, parser)
        if args.command == "install-service":
            from nettop.units import run as run_install_service
            return run_install_service(args, parser)
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
        if args.command in ("serve", "record", "replay", None) or args.record:
            from nettop.pipeline.gc_policy import for_long_runs
            for_long_runs()  # the sampling modes: see pipeline/gc_policy.py
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
