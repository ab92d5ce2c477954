"""A monotonic clock for HostReader(clock=...) that moves a fixed step per call.

The settings and ethtool rotations (nettop/collectors/settings_rotation.py,
nic_rotation.py) spread their reads over time: ticks taken back to back would read fewer
files than ticks at the sampler's interval, so tests and benchmarks/sampler_cost.py step
the reader's clock instead of sleeping.
"""

from __future__ import annotations

import time


class SteppedClock:
    """Monotonic time that moves one `step` per tick, from `start` (default: now)."""

    def __init__(self, step: float = 1.0, start: float | None = None) -> None:
        self.step = step
        self.t = time.monotonic() if start is None else start

    def __call__(self) -> float:
        self.t += self.step
        return self.t
