"""The last answer of a per-CPU file's parser, kept for a tick whose text is the same.

`/proc/stat`, `/proc/softirqs` and `softnet_stat` are read whole every tick and their
parsers are pure: the same text gives the same rows and the same problems. Building the
rows is most of their cost (1,024 frozen objects a file at 1,024 CPUs), and a file whose
counters did not move since the last tick (a quiet host's softnet and softirqs, a
captured or generated tree) gives the same text. So a reader keeps the text it parsed
last and its answer, and hands the same row objects out again while the text is equal
(one C-level comparison). The rows are frozen; a dict and the problem list are new
each tick, so a consumer that changes its copy changes nothing kept here. A `CpuTable`
(a big host's file, `model/cpu_table.py`) cannot be changed, so it is handed out
itself: copying it into a dict would make the rows it exists not to make.
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, Mapping, TypeVar

from nettop.model.cpu_table import CpuTable
from nettop.model.problems import Problem

R = TypeVar("R")


class LastAnswer(Generic[R]):
    """One parser's last (input, answer); not thread-safe (one per reader)."""

    __slots__ = ("_key", "_rows", "_problems", "hits")

    def __init__(self) -> None:
        self._key: Hashable | None = None
        self._rows: Mapping[int, R] = {}
        self._problems: list[Problem] = []
        self.hits = 0  # answers given again (for tests and the cost report)

    def get(self, key: Hashable, parse: Callable[[], tuple[Mapping[int, R], list[Problem]]]
            ) -> tuple[Mapping[int, R], list[Problem]]:
        """`parse()`'s answer for `key` (the parser's whole input): kept from the last call
        when `key` equals that call's, else parsed and kept."""
        if self._key is not None and key == self._key:
            self.hits += 1
        else:
            self._rows, self._problems = parse()
            self._key = key
        rows = self._rows
        return rows if type(rows) is CpuTable else dict(rows), list(self._problems)


__all__ = ["LastAnswer"]
