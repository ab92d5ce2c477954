"""`nettop experiment`: arguments, output files and one-line errors."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
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
    e.add_argument("plan", metavar="PLAN.toml", help="the experiment plan (docs/experiments.md)")
    e.add_argument("--iface", default=None, dest="exp_iface", metavar="IFACE", help="override the plan's interface")
    e.add_argument("--target", default=None, metavar="HOST", help="override the plan's target (iperf3 server and probe)")
    e.add_argument("--duration", type=_duration, default=None, metavar="SECONDS", help="override the measure window, seconds")
    e.add_argument("-o", "--output", default=None, dest="exp_output", metavar="DIR",
                   help="where the table, CSV, charts and recording go (default ./experiment-TIME)")
    e.add_argument("--no-charts", action="store_true", help="leave out the PNG/text charts of the results")


def run(args: argparse.Namespace) -> int:
    from nettop.actions import ActionError, Tuner
    from nettop.experiment import plan as planmod
    from nettop.experiment.load import LoadError
    from nettop.experiment.runner import Runner
    from nettop.record.store import RecordingError

    tuner = Tuner()
    try:
        plan = planmod.load(args.plan).with_overrides(args.exp_iface, args.target, args.duration)
        planmod.validate(plan, tuner)
        tuner.check_writable()
        out = args.exp_output or f"experiment-{time.strftime('%Y%m%d-%H%M%S')}"
        os.makedirs(out, exist_ok=True)
        recording = os.path.join(out, "run.nettop")

        shown: list[tuple[str, int]] = [("", -1)]

        def progress(p: Any) -> None:  # one line per phase step, not per sample
            if p.current and (p.current, p.done) != shown[0]:
                shown[0] = (p.current, p.done)
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
    out_files = write_outputs(plan.name, phases, out, charts=not args.no_charts)
    print(out_files.text)
    print(f"\nwrote {out_files.summary} (nettop replay / nettop report)")
    return 1 if out_files.failed else 0


@dataclass(frozen=True)
class Outputs:
    text: str      # what the terminal shows: the Markdown table and the charts
    summary: str   # "DIR/results.md, results.csv, ... and the recording DIR/run.nettop"
    failed: bool   # a variant failed (dead-man switch or an error)
    rows: tuple[Any, ...] = ()  # nettop.experiment.table.Row, one per variant


def write_outputs(name: str, phases: list[Any], out: str, charts: bool = True) -> Outputs:
    """results.md, results.csv and charts.txt in `out`, from the run's phases; the CLI
    and the live view's experiment key write the same files."""
    from nettop.experiment.table import charts as draw_charts, csv_text, markdown, summarize

    rows = summarize(phases)
    table = markdown(rows)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"# {name}\n\n{table}")
    with open(os.path.join(out, "results.csv"), "w") as f:
        f.write(csv_text(rows))
    text = f"# {name}\n\n{table}"
    files = "results.md, results.csv"
    if charts:
        chart_text = draw_charts(rows)
        with open(os.path.join(out, "charts.txt"), "w") as f:
            f.write(chart_text)
        text += "\n" + chart_text
        files += ", charts.txt"
    return Outputs(text, f"{out}/{files} and the recording {os.path.join(out, 'run.nettop')}",
                   any(r.failed for r in rows), tuple(rows))
