"""The doctor's section of `nettop report`: findings as they came and went, and at the end.

The recorder stores each finding that appeared or resolved as an event of kind
"finding"; this lists them, and evaluates the rules once more over the recording's last
window (so a recording made before the doctor existed still gets a verdict).
"""

from __future__ import annotations

import collections
import datetime as dt
from typing import Deque, Iterable, Iterator

from nettop.doctor.engine import DoctorConfig, evaluate
from nettop.doctor.watch import EVENT_KIND
from nettop.model.rates import Rates
from nettop.model.snapshot import Snapshot
from nettop.model.timeline import Event, Point


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


class Tail:
    """Passes (snapshot, rates) pairs through, keeping the last few as timeline points."""

    def __init__(self, keep: int = 64) -> None:
        self.points: Deque[Point] = collections.deque(maxlen=keep)

    def feed(self, pairs: Iterable[tuple[Snapshot, Rates]]) -> Iterator[tuple[Snapshot, Rates]]:
        for snap, rates in pairs:
            self.points.append(Point(snap, rates))
            yield snap, rates

    def markdown(self, events: Iterable[Event], config: DoctorConfig = DoctorConfig()) -> str:
        return section(events, list(self.points), config)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def section(events: Iterable[Event], points: list[Point], config: DoctorConfig = DoctorConfig()) -> str:
    out = ["\n## Findings (nettop doctor)\n"]
    seen = [e for e in events if e.kind == EVENT_KIND]
    if seen:
        out.append("| when | finding |\n|---|---|")
        out += [f"| {_when(e.t_wall)} | {_cell(e.text)} |" for e in seen]
    else:
        out.append("No finding appeared while recording.")
    if points:
        found = evaluate(points, config)
        judged = f", {config.describe()}" if config.describe() else ""
        out.append(f"\nAt the end of the recording ({_when(points[-1].snapshot.t_wall)}, "
                   f"last {config.window_s:g} s{judged}): {len(found) or 'no'} finding(s).\n")
        for f in found:
            out.append(f"- **{f.severity.label}** `{f.id}`: {f.title}. {f.why}.")
            out += [f"  - {e}" for e in f.evidence]
            out += [f"  - fix: `{line}`" for line in f.fix]
            if f.command:
                out.append(f"  - run: `{f.command}`")
    return "\n".join(out) + "\n"
