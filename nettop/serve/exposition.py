"""The Prometheus text exposition format (version 0.0.4), written to its specification.

A family is declared once with its type and help; samples carry labels. Label values
are escaped (backslash, double quote, newline) because interface names and qdisc
handles come from the host, and HELP text escapes backslash and newline. Counter names
end in `_total`, units are base units (seconds, bytes) — what `promtool check metrics`
checks. No timestamps: Prometheus stamps each sample with its scrape time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KINDS = ("counter", "gauge", "histogram")

Labels = Mapping[str, str]


@dataclass
class Family:
    name: str
    kind: str
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)  # (suffix, labels, value)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        self.samples.append((suffix, labels, value))


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def number(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 2**63):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def render(families: Iterable[Family]) -> str:
    """One text document; families without samples are left out."""
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        out.append(f"# HELP {fam.name} {escape_help(fam.help)}")
        out.append(f"# TYPE {fam.name} {fam.kind}")
        for suffix, labels, value in fam.samples:
            out.append(f"{fam.name}{suffix}{_labels(labels)} {number(value)}")
    out.append("")
    return "\n".join(out)


def series_count(families: Iterable[Family]) -> int:
    return sum(len(f.samples) for f in families)
