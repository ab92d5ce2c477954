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
    calls = reader.calls
    # After the 0.55 s stall the next tick comes on the grid, then 0.1 s apart: never
    # several back-to-back reads to "catch up". Each read starts at or after its own grid
    # point, and the next grid point is always after the end of the previous read, so any
    # read and the one two after it are more than one interval apart, however late the
    # busy machine wakes the thread (a single gap may be short: a late tick, then one on
    # time). Catching up the five missed ticks would put them all within microseconds.
    spans = [c - a for a, c in zip(calls, calls[2:])]
    assert all(s > 0.1 for s in spans), spans


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
    # A read the thread had already decided on may still start after the pause is set
    # (a busy machine can delay the thread for any time between its check and the read):
    # at most that one. Unpaused, the sampler would read about six times in 0.6 s.
    n = len(reader.calls)
    s.paused = True
    time.sleep(0.6)
    assert len(reader.calls) - n <= 1, reader.calls
    n = len(reader.calls)
    s.paused = False
    deadline = time.monotonic() + 5  # resumed: it reads at once (waited for, not timed)
    while len(reader.calls) == n and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert len(reader.calls) > n
