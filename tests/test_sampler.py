"""The sampler's clock: a fixed grid, no bursts after a stall, bounds on the interval."""

import threading
import time

import pytest

from nettop.model.sampler import Sampler, clamp_interval


class CountingReader:
    def __init__(self, stall_on: int | None = None, stall_s: float = 0.0):
        self.calls: list[float] = []
        self.stall_on = stall_on
        self.stall_s = stall_s

    def read(self):
        self.calls.append(time.monotonic())
        if self.stall_on is not None and len(self.calls) == self.stall_on:
            time.sleep(self.stall_s)
        return len(self.calls)


@pytest.mark.parametrize("bad", [0.05, 0, -1, 61, 1000])
def test_interval_outside_0_1_to_60_seconds_is_refused(bad):
    with pytest.raises(ValueError, match="out of range"):
        clamp_interval(bad)


def test_ticks_follow_the_interval_and_a_stall_is_skipped_not_replayed():
    reader = CountingReader(stall_on=3, stall_s=0.55)
    got: list[int] = []
    done = threading.Event()

    def on_sample(n):
        got.append(n)
        if len(got) >= 8:
            done.set()

    s = Sampler(reader, 0.1, on_sample)
    s.start()
    assert done.wait(5)
    s.stop()
    gaps = [b - a for a, b in zip(reader.calls, reader.calls[1:])]
    # after the 0.55 s stall the next tick comes at once on the grid, then 0.1 s apart:
    # never several back-to-back reads to "catch up"
    after = gaps[3:]
    assert all(g > 0.05 for g in after), gaps


def test_a_reader_exception_is_reported_and_sampling_goes_on():
    errors = []
    seen = []
    done = threading.Event()

    class Flaky:
        n = 0

        def read(self):
            self.n += 1
            if self.n == 2:
                raise RuntimeError("boom")
            return self.n

    def on_sample(n):
        seen.append(n)
        if n >= 4:
            done.set()

    s = Sampler(Flaky(), 0.1, on_sample, errors.append)
    s.start()
    assert done.wait(5)
    s.stop()
    assert [str(e) for e in errors] == ["boom"]
    assert 2 not in seen and 3 in seen


def test_pause_stops_reads_until_resumed():
    reader = CountingReader()
    s = Sampler(reader, 0.1, lambda n: None)
    s.start()
    time.sleep(0.25)
    s.paused = True
    time.sleep(0.05)
    n = len(reader.calls)
    time.sleep(0.3)
    assert len(reader.calls) == n
    s.paused = False
    time.sleep(0.25)
    s.stop()
    assert len(reader.calls) > n
