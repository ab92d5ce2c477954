"""A `record --dir` directory read as one recording: replay --at, seeking across files,
report/export of a time window, and a wall clock stepped an hour back or forward."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from nettop.collectors.host import HostReader
from nettop.record import wallclock
from nettop.record.recorder import Recorder
from nettop.record.replay import ReplaySource
from nettop.record.rotate import DirWriter, Rotation
from nettop.record.series import Recordings, listing
from nettop.record.store import Reader
from nettop.record import report

NETTOP = [sys.executable, "-m", "nettop.cli"]
T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC, on a minute
PERIOD = 60.0
N = 300


class FakeClock:
    def __init__(self) -> None:
        self.t_wall, self.t_mono = T0, 5000.0

    def wall(self) -> float:
        return self.t_wall

    def mono(self) -> float:
        return self.t_mono


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """N samples 1 s apart in 5 one-minute files; lo receives 1000 B/s more each second."""
    with HostReader() as r:
        base = r.read()
    d = str(tmp_path_factory.mktemp("series") / "rec")
    clock = FakeClock()
    w = DirWriter(Rotation(d, period=PERIOD), {"host": "lab-host", "interval_s": 1.0}, clock=clock,
                  out=io.StringIO(), err=io.StringIO())
    lo = base.links["lo"]
    for i in range(N):
        link = dataclasses.replace(lo, rx_bytes=lo.rx_bytes + i * i * 500)
        w.add_sample(dataclasses.replace(base, t_wall=clock.t_wall, t_mono=clock.t_mono,
                                         links={**base.links, "lo": link}), [])
        clock.t_wall += 1
        clock.t_mono += 1
    w.close()
    return d


def _source(path):
    src = ReplaySource(path, speed=60)
    src.paused = True
    src.start(lambda: None)
    return src


def test_the_directory_is_one_recording_in_file_order(series):
    r = Recordings(series)
    assert len(r.files) == 5 and len(r) == N and r.warnings == []
    assert [s.t_mono for s in r.snapshots()] == [5000.0 + i for i in range(N)]
    assert r.meta["host"] == "lab-host"
    r.close()


def test_stepping_crosses_a_file_boundary_with_the_rates_of_one_file(series):
    src = _source(series)
    try:
        src.seek_index(58)
        assert src.reader.file_of(59) != src.reader.file_of(60)
        p59, p60 = src.step(1), src.step(1)
        assert p60.snapshot.t_wall == T0 + 60
        # rx rises by (i*i - (i-1)**2) * 500 = (2i - 1) * 500 bytes in the second ending with sample i
        assert p59.rates.links["lo"].rx_bytes_per_s == pytest.approx(117 * 500)
        assert p60.rates.links["lo"].rx_bytes_per_s == pytest.approx(119 * 500)
        back = src.step(-1)  # back over the boundary: a seek, with the charts' history
        assert back.snapshot.t_wall == T0 + 59 and len(src.timeline.points()) > 50
    finally:
        src.stop()


def test_at_opens_the_right_file_at_the_right_sample(series):
    src = _source(series)
    try:
        at = wallclock.parse_when("2027-01-15 08:03:12")
        point = src.seek(at)
        assert point.snapshot.t_wall == T0 + 192
        assert src.reader.file_of(src.position).endswith("-20270115T080300Z.nettop")
        assert src.seek(at + 0.5).snapshot.t_wall == T0 + 192  # the last sample at or before it
    finally:
        src.stop()


def test_few_files_stay_open_and_one_deleted_meanwhile_costs_only_its_samples(series, tmp_path):
    import shutil
    from nettop.record.series import OPEN_FILES
    d = tmp_path / "copy"
    shutil.copytree(series, d)
    r = Recordings(str(d))
    assert len(list(r.snapshots())) == N and len(r._open) <= OPEN_FILES
    os.unlink(r.files[2])  # retention of a running recorder while someone replays
    r.close()
    got = [s.t_wall for s in r.snapshots()]
    assert got == [T0 + i for i in range(N) if not 120 <= i < 180]
    assert r.warnings == [f"{r.files[2]}: no such file (deleted since it was indexed?)"]
    r.close()


def _export(path, *args):
    p = subprocess.run([*NETTOP, "export", path, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return list(csv.DictReader(io.StringIO(p.stdout)))


def test_export_of_a_window_crosses_files_and_keeps_only_its_samples(series):
    rows = _export(series, "--since", "2027-01-15 08:00:50", "--until", "2027-01-15T08:02:10Z")
    times = [float(r["t_wall"]) for r in rows]
    assert times == [T0 + s for s in range(51, 131)]  # the first sample of a window has no rate
    assert float(rows[10]["link.lo.rx_bytes_per_s"]) == pytest.approx((2 * 61 - 1) * 500)


def test_report_of_a_window_names_its_span(series):
    p = subprocess.run([*NETTOP, "report", series, "--no-plots", "--since", "@%d" % (T0 + 120),
                        "--until", "@%d" % (T0 + 179)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "2027-01-15 08:02:01 UTC to 2027-01-15 08:02:59 UTC" in p.stdout


@pytest.mark.parametrize("cmd", [["replay", "--at", "yesterday"], ["report", "--since", "3 o'clock"],
                                 ["export", "--until", "2027-13-01"]])
def test_a_time_that_is_not_one_is_one_line(series, cmd):
    p = subprocess.run([*NETTOP, cmd[0], series, *cmd[1:]], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "is not a time" in p.stderr, p.stderr


def test_an_empty_directory_is_one_line(tmp_path):
    p = subprocess.run([*NETTOP, "report", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr) == (2, f"nettop: {tmp_path} holds no nettop recordings (nettop-NNNNNN-*.nettop)\n")


# --- the wall clock stepped -------------------------------------------------------------


class SteppedClock:
    """This host's clocks, with the wall clock moved by `offset` once `armed` is set."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.armed = threading.Event()

    def wall(self) -> float:
        return time.time() + (self.step if self.armed.is_set() else 0.0)

    def mono(self) -> float:
        return time.monotonic()


class SteppedReader:
    """The real host reader; its snapshots take their wall time from the clock, so the
    step lands in the data exactly as `date -s` would put it there."""

    def __init__(self, clock: SteppedClock, at: int) -> None:
        self.host = HostReader(ifnames=["lo"])
        self.clock, self.at, self.reads = clock, at, 0

    def read(self):
        snap = self.host.read()
        self.reads += 1
        if self.reads == self.at:
            self.clock.armed.set()
        return dataclasses.replace(snap, t_wall=self.clock.wall())


def _record_with_step(directory: str, step: float) -> int:
    """Record for 3.5 s with the wall clock stepped at the 15th sample; the number of reads."""
    clock = SteppedClock(step)
    reader = SteppedReader(clock, at=15)
    rec = Recorder(reader, directory, interval=0.1, duration=None, out=io.StringIO(),
                   rotation=Rotation(directory, period=3600.0), clock=clock)
    stopper = threading.Thread(target=lambda: (time.sleep(3.5), rec.request_stop()))
    stopper.start()
    try:
        result = rec.run()
    finally:
        stopper.join()
        reader.host.close()
    assert result.ok, result.reason
    return reader.reads


@pytest.mark.parametrize("step", [-3600.0, 3600.0])
def test_a_wall_clock_stepped_an_hour_loses_and_reorders_no_sample_and_says_where(tmp_path, step):
    d = str(tmp_path / "rec")
    reads = _record_with_step(d, step)
    r = Recordings(d)
    snaps = list(r.snapshots())
    assert len(snaps) == len(r) >= 20 and r.warnings == []
    assert reads - 2 <= len(snaps) <= reads  # every sample read is there (one may be in flight at the stop)
    assert all(b.t_mono > a.t_mono for a, b in zip(snaps, snaps[1:]))  # in the order taken
    assert len(r.clock_steps) == 1, r.clock_steps
    (found,) = r.clock_steps
    assert found.pos == 14 and found.seconds == pytest.approx(step, abs=0.5)
    way = "back" if step < 0 else "forward"
    problems = [e for e in r.events() if e.kind == "problem"]
    assert [e.text for e in problems] == [
        f"wall clock stepped {way} 1:00:00 (NTP or date -s); samples stay in the order they were taken"]
    assert problems[0].t_wall == snaps[14].t_wall
    if step > 0:  # an hour forward passes the hour's boundary: the next file starts there
        assert len(r.files) == 2 and len(Reader(r.files[0])) == 14
    r.close()


def test_replay_and_report_show_the_step_and_seek_finds_the_first_of_a_repeated_time(tmp_path):
    d = str(tmp_path / "rec")
    _record_with_step(d, -3600.0)
    src = _source(d)
    try:
        while not src.at_end:
            src.step(1)
        problems = [e.text for e in src.timeline.events() if e.kind == "problem"]
        assert any(t.startswith("wall clock stepped back 1:00:00") for t in problems), problems
        index = src.reader.index
        # the hour before the step happened twice; its times are found where they first happened
        assert src.reader.position(index[5].t_wall) == 5
        assert src.reader.position(index[20].t_wall) == 20  # an hour earlier, only after the step
    finally:
        src.stop()
    p = subprocess.run([*NETTOP, "report", d, "--no-plots"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "| problem | wall clock stepped back 1:00:00 (NTP or date -s)" in p.stdout
    # the minute before the step is found on the monotonic clock (by wall time it was an
    # hour later, and the window came out empty: "– → ..."), and the span leaves the step out
    row = next(ln for ln in p.stdout.splitlines() if "wall clock stepped back" in ln)
    assert row.split(" | ")[3].startswith("0 bit/s → "), row
    span = re.search(r"UTC \((-?[0-9.]+) min\)", p.stdout)
    assert span is not None and 0 <= float(span.group(1)) < 1, p.stdout[:400]


def test_position_over_a_stepped_index_is_pure():
    class S:
        def __init__(self, w, m):
            self.t_wall, self.t_mono = w, m
    idx = [S(100, 0), S(101, 1), S(102, 2), S(50, 3), S(51, 4), S(103, 5), S(104, 6)]
    assert wallclock.runs(idx) == [(0, 3), (3, 7)]
    assert [s.pos for s in wallclock.steps(idx)] == [3, 5]
    assert wallclock.position(idx, 101.5) == 1
    assert wallclock.position(idx, 50.5) == 3
    assert wallclock.position(idx, 103.5) == 5
    assert wallclock.position(idx, 10) == 0
    assert wallclock.position(idx, 75) == 4  # between 51 and 103 of the second run
    gap = [S(100, 0), S(102, 2), S(50, 3), S(51, 4)]
    assert wallclock.position(gap, 75) == 3  # no run covers it: the latest sample before it
    # `date -s` +1 h, then back: 103.5 was stepped over at first, read after the step back
    idx = [S(100, 0), S(101, 1), S(200, 2), S(201, 3), S(103, 4), S(104, 5)]
    assert wallclock.position(idx, 103.5) == 4
    assert wallclock.position(idx, 101.5) == 1  # read before the step forward
    assert wallclock.position(idx, 200.5) == 2


def test_replay_at_a_time_outside_the_recording_says_so_in_one_line(series, monkeypatch, capsys):
    import nettop.tui.app
    from nettop.cli import main
    shown = []
    monkeypatch.setattr(nettop.tui.app, "run", lambda source: shown.append(source.take().snapshot.t_wall) or 0)
    assert main(["replay", series, "--at", "2027-01-15 07:00"]) == 0
    assert main(["replay", series, "--at", "2027-01-15 09:00"]) == 0
    assert main(["replay", series, "--at", "2027-01-15 08:01:00"]) == 0
    assert shown == [T0, T0 + N - 1, T0 + 60]
    assert capsys.readouterr().err == (
        f"nettop: --at 2027-01-15 07:00:00 UTC is before {series} starts; showing its first sample\n"
        f"nettop: --at 2027-01-15 09:00:00 UTC is after {series} ends; showing its last sample\n")


@pytest.mark.parametrize("boots,steps", [(("a", "b"), 0), (("a", "a"), 1)])
def test_files_of_another_boot_are_no_clock_step(tmp_path, boots, steps):
    """After a reboot the new boot's monotonic clock can happen to be ahead of the old
    one's last reading while the wall clock is days later: no step, unless same boot."""
    with HostReader(ifnames=["lo"]) as r:
        base = r.read()
    clock = FakeClock()
    for boot in boots:
        w = DirWriter(Rotation(str(tmp_path)), {"boot_id": boot}, clock=clock, out=io.StringIO(), err=io.StringIO())
        for _ in range(3):
            w.add_sample(dataclasses.replace(base, t_wall=clock.t_wall, t_mono=clock.t_mono), [])
            clock.t_wall += 1
            clock.t_mono += 1
        w.close()
        clock.t_wall += 3 * 86400  # down for three days; the next boot's uptime is ahead by chance
        clock.t_mono += 100
    rec = Recordings(str(tmp_path))
    assert len(rec) == 6 and len(rec.clock_steps) == steps
    assert Reader(rec.files[0]).meta["boot_id"] == "a"
    rec.close()
