"""A finding: one problem the tuning guides describe, seen in the figures, with its fix."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping


class Severity(enum.IntEnum):
    """Ordered; `nettop doctor` exits with the worst one's value (0: no finding)."""

    INFO = 1  # worth knowing; costs nothing measurable yet
    WARN = 2  # costs throughput, latency or CPU now
    CRIT = 3  # packets are being lost now

    @property
    def label(self) -> str:
        return self.name.lower()


DOC = "docs/doctor.md"


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule's verdict about one subject (an interface, a CPU, the host)."""

    rule: str  # the rule's id in docs/doctor.md, e.g. "softnet-drops"
    subject: str  # "host", an interface name, "cpu3"
    severity: Severity
    title: str  # one line: what is wrong
    why: str  # one line: why it matters
    evidence: tuple[str, ...]  # figures as a person reads them, e.g. "dropped 412/s on CPU 1"
    figures: Mapping[str, float] = field(default_factory=dict)  # raw numbers for before/after
    window: tuple[float, float] = (0.0, 0.0)  # wall time of the first and last sample used
    fix: tuple[str, ...] = ()  # `nettop set ...` lines nettop can apply
    command: str | None = None  # what to run where nettop does not change it itself
    source: str = ""  # the guide the rule and threshold come from

    @property
    def id(self) -> str:
        """Stable across ticks and runs: the same problem keeps its id while it lasts."""
        return f"{self.rule}:{self.subject}"

    @property
    def ref(self) -> str:
        return f"{DOC}#{self.rule}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "rule": self.rule, "subject": self.subject,
            "severity": self.severity.label, "title": self.title, "why": self.why,
            "evidence": list(self.evidence), "figures": dict(self.figures),
            "window": {"from": self.window[0], "to": self.window[1]},
            "fix": list(self.fix), "command": self.command, "ref": self.ref, "source": self.source,
        }

    def one_line(self) -> str:
        return f"{self.severity.label.upper()} {self.id}: {self.title}"
