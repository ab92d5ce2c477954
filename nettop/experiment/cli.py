"""`nettop experiment`: arguments, output files and one-line errors."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any


def _duration(text: str) -> float:
    try:
        v = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"duration {text!r} is not a number of seconds (e.g. 10)") from None
    if not 1 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"duration {v:g} s is out of range: use 1 to 3600")
    return v


def add_subcommands(sub: Any) -> None:
    e = sub.add_parser("experiment", help="run a tuning matrix under load and print the results table (docs/experiments.md)")
    e.add_argument("plan", metavar="PLAN.toml")
    e.add_argument("--iface", default=None, dest="exp_iface", help="override the plan's interface")
    e.add_argument("--target", default=None, help="override the plan's target (iperf3 server and probe)")
    e.add_argument("--duration", type=_duration, default=None, help="override the measure window, seconds")
    e.add_argument("-o", "--output", default=None, dest="exp_output", metavar="DIR",
                   help="where the table, CSV, charts and recording go (default ./experiment-TIME)")
    e.add_argument("--no-charts", action="store_true")


def run(args: argparse.Namespace) -> int:
    from nettop.actions import ActionError, Tuner
    from nettop.experiment import plan as planmod
    from nettop.experiment.load import LoadError
    from nettop.experiment.runner import Runner
    from nettop.experiment.table import charts, csv_text, markdown, summarize
    from nettop.record.store import RecordingError

    tuner = Tuner()
    try:
        plan = planmod.load(args.plan).with_overrides(args.exp_iface, args.target, args.duration)
        planmod.validate(plan, tuner)
        tuner.check_writable()
        out = args.exp_output or f"experiment-{time.strftime('%Y%m%d-%H%M%S')}"
        os.makedirs(out, exist_ok=True)
        recording = os.path.join(out, "run.nettop")

        def progress(p: Any) -> None:
            if p.current:
                bar = "#" * int(30 * p.done / max(1, p.total))
                print(f"[{bar:<30}] {p.done}/{p.total} {p.current}", file=sys.stderr, flush=True)

        runner = Runner(plan, tuner, recording, progress)
        phases = runner.run()
    except (planmod.PlanError, ActionError, LoadError, RecordingError) as exc:
        print(f"nettop experiment: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nettop experiment: interrupted; the running variant was reverted "
              "(`nettop journal` shows it, `nettop restore` puts back anything left)", file=sys.stderr)
        return 130
    rows = summarize(phases)
    table = markdown(rows)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"# {plan.name}\n\n{table}")
    with open(os.path.join(out, "results.csv"), "w") as f:
        f.write(csv_text(rows))
    print(f"# {plan.name}\n\n{table}")
    if not args.no_charts:
        text = charts(rows)
        with open(os.path.join(out, "charts.txt"), "w") as f:
            f.write(text)
        print(text)
    print(f"\nwrote {out}/results.md, results.csv, charts.txt and the recording {recording} "
          f"(nettop replay / nettop report)")
    return 1 if any(r.failed for r in rows) else 0
