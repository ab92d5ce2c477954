"""The doctor: tuning-guide rules evaluated over a window of the timeline.

Headless and pure: `engine.evaluate(points)` turns timeline points into `Finding`s, the
same code live (the TUI's findings panel), in replay, in `nettop report` and in
`nettop doctor`. Rules and their sources are documented in docs/doctor.md.
"""

from nettop.doctor.engine import DoctorConfig, evaluate, evaluate_recent
from nettop.doctor.finding import Finding, Severity

__all__ = ["DoctorConfig", "Finding", "Severity", "evaluate", "evaluate_recent"]
