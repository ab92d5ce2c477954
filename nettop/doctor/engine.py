"""Evaluate every rule over the newest window of a timeline.

Pure: points and events in, findings out, no clock and no kernel. Live, in replay, in
the report and in `nettop doctor` the same call runs on the same kind of points. A rule
that raises is a bug in the rule, not in the host: it is reported as an INFO finding
naming the rule, so one bad rule never hides the others' findings.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from nettop.doctor.finding import Finding, Severity
from nettop.doctor.rules import cpu_irq, host, latency, nic, softnet
from nettop.doctor.rules.common import Context, DoctorConfig, Rule
from nettop.doctor.window import Window
from nettop.model.timeline import Event, Point

RULES: tuple[Rule, ...] = (*cpu_irq.RULES, *softnet.RULES, *nic.RULES, *latency.RULES, *host.RULES)

__all__ = ["DoctorConfig", "RECENT", "RULES", "evaluate", "evaluate_recent", "evaluate_window", "worst"]

RECENT = 12  # the newest points a source without a Watch (a replay) judges its findings over


def evaluate(points: Sequence[Point], config: DoctorConfig = DoctorConfig(),
             events: Iterable[Event] = ()) -> list[Finding]:
    """Findings over the last `config.window_s` seconds of `points`, worst first."""
    if not points:
        return []
    return evaluate_window(Window(points, config.window_s, events), config)


def evaluate_recent(points: Sequence[Point], config: DoctorConfig = DoctorConfig()) -> list[Finding]:
    """`evaluate` over the RECENT newest points: what a source without a live Watch shows
    for its newest point (ReplaySource, on its playback thread)."""
    return evaluate(points[-RECENT:], config)


def evaluate_window(window: Window, config: DoctorConfig = DoctorConfig()) -> list[Finding]:
    ctx = Context(window, config)
    out: list[Finding] = []
    for rule in RULES:
        try:
            out.extend(rule(ctx))
        except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the rest
            out.append(Finding("rule-error", rule.__name__, Severity.INFO,
                               f"rule {rule.__name__} could not judge this sample: {exc!r}",
                               "a bug in nettop's doctor, not in this host; please report it",
                               (), {}, window.span))
    out.sort(key=lambda f: (-f.severity, f.rule, f.subject))
    return out


def worst(findings: Iterable[Finding]) -> int:
    """0 without findings, else the worst severity's value (1 info, 2 warn, 3 crit)."""
    return max((int(f.severity) for f in findings), default=0)
