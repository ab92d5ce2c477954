"""`nettop doctor`: sample for N seconds, print the findings, exit with the worst severity.

Exit status: 0 no finding, 1 info, 2 warn, 3 crit (so cron or Ansible can act on it);
4 when the host could not be sampled. A bad argument is one line on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, TextIO

from nettop.doctor.engine import DoctorConfig, evaluate, worst
from nettop.doctor.finding import Finding
from nettop.model.timeline import Point
from nettop.output.argtypes import interval as _interval, latency_target as _ms, ping_interval as _ping_interval, root as _root

EXIT_CANNOT_SAMPLE = 4


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seconds {text!r} is not a number (give e.g. 5)") from None
    if not 1 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"seconds {v:g} is out of range: use 1 to 3600")
    return v



def _prober(targets: list[str] | None, interval: float | None) -> Any:
    if not targets:
        return None
    from nettop.ping import Prober
    return Prober(targets, interval_s=interval or 0.1)


def _start_probes(problems: list[str]) -> Any:
    """eBPF probes started now, or None with the reason in `problems`."""
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
    return probes


def add_subcommands(sub: Any) -> None:
    d = sub.add_parser("doctor", help="sample N seconds and name what the tuning guides would fix (exit 0-3 by severity)")
    d.add_argument("--json", action="store_true", dest="doc_json", help="one JSON document on stdout")
    d.add_argument("--seconds", type=_seconds, default=5.0, metavar="N", help="seconds to sample (1-3600, default 5)")
    d.add_argument("--latency-target", type=_ms, default=None, metavar="MS", dest="doc_latency_target",
                   help="the RTT this host must keep (ms): enables the coalescing and power-management latency rules")
    d.add_argument("-i", "--interval", type=_interval, default=None, dest="doc_interval", metavar="SECONDS",
                   help="seconds between samples (default 1)")
    d.add_argument("--root", type=_root, action="append", default=None, dest="doc_root", metavar="DIR",
                   help="judge a captured /proc + /sys tree, archive or sosreport (since-boot averages), or two "
                        "captures of one host (the interval between them)")
    d.add_argument("--iface", action="append", default=None, dest="doc_iface", metavar="IFACE",
                   help="only these interfaces (repeatable)")
    d.add_argument("--ping", action="append", default=None, dest="doc_ping", metavar="HOST",
                   help="probe latency to HOST (repeatable; tcp://HOST:PORT, udp://HOST:PORT): bufferbloat, BDP")
    d.add_argument("--ping-interval", type=_ping_interval, default=None, dest="doc_ping_interval", metavar="S",
                   help="seconds between probes to each target (default 0.1)")
    d.add_argument("--ebpf", action="store_true", dest="doc_ebpf",
                   help="also run the eBPF probes, for the drop-reasons rule (root and bcc)")


def sample(reader: Any, seconds: float, interval: float) -> list[Point]:
    """Timeline points of `reader` every `interval` s over `seconds` s (at least two)."""
    from nettop.model.timeline import Timeline

    tl = Timeline(max_points=int(seconds / interval) + 4)
    first = reader.read()
    tl.append(first)
    n = max(1, round(seconds / interval))
    for k in range(1, n + 1):
        time.sleep(max(0.0, first.t_mono + k * interval - time.monotonic()))
        tl.append(reader.read())
    return tl.points()


def captured_points(roots: list[Any], ifaces: list[str] | None) -> tuple[list[Point], str]:
    """Timeline points of one capture (the host at boot, then the capture: since-boot
    averages) or of two captures (their own interval); see nettop/output/captured.py."""
    from nettop.model.timeline import Timeline
    from nettop.output.captured import NONE, CaptureError, expand, pair, read_capture

    try:
        p = pair([read_capture(r, ifaces) for r in expand(roots)])
    except CaptureError as exc:
        raise OSError(str(exc)) from None
    if p.basis == NONE:
        raise OSError(p.note)
    tl = Timeline(max_points=4)
    tl.append(p.prev)
    tl.append(p.cur)
    return tl.points(), p.note


def render_text(findings: list[Finding], host: str, seconds: float, samples: int) -> str:
    w = worst(findings)
    names = {0: "none", 1: "info", 2: "warn", 3: "crit"}
    out = [f"nettop doctor: {host}, {samples} samples over {seconds:g} s: "
           f"{len(findings)} finding(s), worst {names[w]}"]
    for f in findings:
        out.append("")
        out.append(f"{f.severity.label.upper():4} {f.id}  {f.title}")
        out.append(f"     why: {f.why}")
        for e in f.evidence:
            out.append(f"     - {e}")
        for line in f.fix:
            out.append(f"     fix: {line}")
        if f.command:
            out.append(f"     run: {f.command}")
        out.append(f"     rule: {f.ref} ({f.source})")
    return "\n".join(out) + "\n"


def document(findings: list[Finding], host: str, kernel: str, seconds: float, samples: int,
             config: DoctorConfig, problems: list[str]) -> dict[str, Any]:
    return {
        "host": host, "kernel": kernel, "seconds": seconds, "samples": samples,
        "latency_target_ms": config.latency_target_ms,
        "worst": worst(findings), "findings": [f.to_json() for f in findings], "problems": problems,
    }


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from nettop.collectors.host import HostReader

    out = out or sys.stdout
    roots = args.doc_root or [args.root]
    root = roots[0]
    interval = args.doc_interval or args.interval
    ifaces = args.doc_iface or args.iface
    seconds = max(args.seconds, interval)
    # half an interval of slack: the first sample is never cut by the jitter of the clock
    config = DoctorConfig(window_s=seconds + interval / 2, latency_target_ms=args.doc_latency_target or args.latency_target)
    problems: list[str] = []
    probes = _start_probes(problems) if args.doc_ebpf else None
    prober = _prober(args.doc_ping or args.ping, args.doc_ping_interval or args.ping_interval)
    if prober is not None:
        prober.start()
    note = None
    try:
        if len(roots) > 1 or not root.live:
            points, note = captured_points(roots, ifaces)
            seconds = points[-1].snapshot.t_mono - points[0].snapshot.t_mono
            config = dataclasses.replace(config, window_s=seconds + 1.0)
            problems.append(f"judged on {note}")
        else:
            with HostReader(root, ifaces, prober=prober, probes=probes) as reader:
                points = sample(reader, seconds, interval)
    except OSError as exc:
        print(f"nettop: doctor cannot sample this host: {exc}", file=sys.stderr)
        return EXIT_CANNOT_SAMPLE
    finally:
        if prober is not None:
            prober.stop()
        if probes is not None:
            probes.stop()
    last = points[-1].snapshot
    if ifaces:
        unknown = [i for i in ifaces if i not in last.links]
        if unknown:
            print(f"nettop: no interface named {', '.join(unknown)} (see `ip link` for the names)", file=sys.stderr)
            return EXIT_CANNOT_SAMPLE
    findings = evaluate(points, config)
    problems += [p.message for p in last.problems]
    if args.doc_json:
        doc = document(findings, last.host, last.kernel, seconds, len(points), config, problems)
        if note is not None:
            doc["basis"] = note
        json.dump(doc, out, indent=1)
        out.write("\n")
    else:
        text = render_text(findings, last.host, seconds, len(points))
        if note is not None:  # say what the figures are: not a live window
            head, _, rest = text.partition("\n")
            # "2 samples over <uptime> s" is the boot snapshot and the capture: say what they are
            head = head.replace(f"{len(points)} samples over {seconds:g} s", note.split(":")[0], 1)
            text = f"{head}\n  judged on {note}\n{rest}"
        out.write(text)
    for line in problems:
        print(f"nettop: {line}", file=sys.stderr)
    return worst(findings)
