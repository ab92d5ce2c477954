"""Coalescing, rings, channels and offloads read rarely, and honestly: when they change,
and in rotation besides.

Each of those ethtool questions (three ioctls and the offloads' netlink request) takes
the kernel's RTNL lock; asked of every
interface every tick, a host with 200 veths saw ~600 requests a tick per nettop, and the
host's own `ip link` churn ran at half speed while nettop ran. They change when someone
tunes the NIC, and the kernel says when: it notifies the ethtool family's monitor group
whenever one is set, through netlink or the ioctl, by whatever tool
(`ethtool_nl.EthtoolMonitor`). So:

- an interface the monitor names (`changed`) is asked on the next tick, on screen or not;
- without a monitor (a kernel before 5.7, a captured tree) the interfaces on screen are
  asked every tick instead;
- an interface seen for the first time (or re-created with a new ifindex) at once;
- any interface nettop's own journal names (`notice`, from the pipeline) on the next tick;
- all of them in rotation, oldest first, enough per tick that each is asked again at
  least every `period_s` seconds: what a driver changes on its own (a reset that
  restores its defaults) sends no notification.

The last answer of an interface not asked this tick is kept with the tick that read it
(`read_at`); an interface that goes is forgotten, so the state is bounded by the
interfaces present. Not thread-safe except `notice`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Mapping

from nettop.model.problems import Problem

Settings = dict[str, int] | None


@dataclass(frozen=True, slots=True)
class NicRead:
    """One interface's last answer: coalescing, rings, channels, their problems, and when;
    and its offloads, when the reader was given a way to ask them."""

    coalesce: Settings
    rings: Settings
    channels: Settings
    problems: tuple[Problem, ...]
    read_at: float
    features: Mapping[str, bool] | None = None


ReadOne = Callable[[str], tuple[Settings, Settings, Settings, list[Problem]]]
ReadFeatures = Callable[[str], Mapping[str, bool] | None]


class NicSettingsRotation:
    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._last: OrderedDict[tuple[str, int], NicRead] = OrderedDict()  # oldest read first
        self._last_t: float | None = None
        self._credit = 0.0  # interfaces owed to the rotation: a fraction carries to the next tick
        self._lock = threading.Lock()
        self._noticed: set[str] = set()
        self.asked = 0  # interfaces asked on the last tick (a test's and benchmark's figure)

    def notice(self, ifnames: Iterable[str]) -> None:
        """Ask these interfaces on the next tick, on screen or not (nettop changed them)."""
        with self._lock:
            self._noticed.update(ifnames)

    def read(self, t: float, links: Mapping[str, int], on_screen: Callable[[str], bool],
             read_one: ReadOne, read_features: ReadFeatures | None = None,
             changed: Collection[str] | None = None) -> dict[str, NicRead]:
        """The settings of `links` (name -> ifindex) at tick time `t`, asked or kept; the
        offloads too (`read_features`) when given. `changed`: the interfaces the kernel's
        ethtool monitor named since the last tick (all of `links` when it dropped some);
        None when there is no monitor, and then those on screen are asked every tick."""
        with self._lock:
            dirty, self._noticed = self._noticed, set()
        dt = (t - self._last_t) if self._last_t is not None and t > self._last_t else self.period_s
        self._last_t = t
        present = {(n, i) for n, i in links.items()}
        last = self._last
        for key in [k for k in last if k not in present]:
            del last[key]  # gone (or re-created: a new ifindex is a new key)
        if changed is None:  # no monitor: what is on screen is asked every tick
            now = {n for n, i in links.items() if (n, i) not in last or on_screen(n) or n in dirty}
        else:
            now = {n for n, i in links.items() if (n, i) not in last or n in dirty or n in changed}
        rotating = [k for k in last if k[0] not in now]  # oldest first
        # a share of the whole per tick (a fraction carried over, so one interface at a 10 s
        # period is asked every 10th tick, not every tick), plus any that would pass the
        # period before the next tick
        credit = min(self._credit + len(rotating) * min(dt, self.period_s) / self.period_s, len(rotating))
        for key in rotating:
            if credit < 1 and t - last[key].read_at + dt <= self.period_s:
                break
            now.add(key[0])
            credit -= 1
        self._credit = max(credit, 0.0)
        for name in sorted(now):
            co, rings, ch, probs = read_one(name)
            feats = read_features(name) if read_features is not None else None
            key = (name, links[name])
            last.pop(key, None)
            last[key] = NicRead(co, rings, ch, tuple(probs), t, feats)
        self.asked = len(now)
        return {n: last[(n, i)] for n, i in links.items()}


__all__ = ["NicRead", "NicSettingsRotation"]
