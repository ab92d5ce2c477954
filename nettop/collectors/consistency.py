"""Checks across files read at one tick: do the per-CPU files agree on which CPUs exist?

Each per-CPU file is parsed on its own and cannot know the host's online CPUs, so a file
that lists fewer or more CPUs than are online (truncated, copied from another host, or
half of a captured tree) would otherwise give per-CPU figures that look plausible and are
not. The kernel prints /proc/interrupts, /proc/stat and softnet_stat for online CPUs and
/proc/softirqs for possible ones (a superset), so those are the rules; a CPU going on- or
offline between the reads can also trip them for one tick, which the message says.
"""

from __future__ import annotations

from typing import Collection, Iterable

from nettop.collectors.cpus import format_cpu_list
from nettop.model.problems import Problem


def _cpus(ids: Iterable[int]) -> str:
    text = format_cpu_list(ids)
    return text if len(text) <= 40 else text[:37] + "..."


def check_cpu_sets(online: Collection[int], interrupts: Collection[int],
                   softirqs: Collection[int], stat: Collection[int],
                   softnet: Collection[int], damaged: Collection[str] = ()) -> list[Problem]:
    """Problems for per-CPU files whose CPUs disagree with the online set (empty inputs
    are files that could not be read, already reported by their own collector).

    `damaged` names the files (as "/proc/...") whose collector already reported a line
    it skipped: a CPU missing from such a file is that line, not a CPU that went
    offline, so it is not reported a second time with a wrong cause."""
    if not online:
        return []
    listed = tuple(online)
    on: set[int] = set()  # made at the first file that differs
    out: list[Problem] = []
    for source, cpus, superset_ok in (("/proc/interrupts", interrupts, False),
                                      ("/proc/softirqs", softirqs, True),
                                      ("/proc/stat", stat, False),
                                      ("/proc/net/softnet_stat", softnet, False)):
        if not cpus or tuple(cpus) == listed:  # the same CPUs, in the same order: no sets made
            continue
        on = on or set(online)
        have = set(cpus)
        missing = set() if source in damaged else on - have
        extra = set() if superset_ok else have - on
        if not missing and not extra:
            continue
        parts = []
        if missing:
            parts.append(f"lacks online CPU {_cpus(missing)}")
        if extra:
            parts.append(f"has CPU {_cpus(extra)} that is not online")
        out.append(Problem(source, (
            f"{source} is inconsistent with the online CPUs ({_cpus(on)}): it "
            f"{' and '.join(parts)} (truncated or copied from another host, or a CPU went "
            "on- or offline between the reads); those CPUs' figures are missing or unverified")))
    return out
