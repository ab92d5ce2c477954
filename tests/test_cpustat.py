"""/proc/stat per-CPU times and the % split of elapsed ticks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from nettop.collectors.cpustat import PERCENT_FIELDS, cpu_percentages, parse_stat, read_stat
from nettop.model.snapshot import CpuTimes
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data" / "stat"


def test_real_capture_gives_known_times():
    times, problems = parse_stat((DATA / "vm-6.18-2cpu").read_text())
    assert problems == []
    assert times == {
        0: CpuTimes(0, 593, 0, 1080, 218580, 8, 0, 32, 27, 0, 0),
        1: CpuTimes(1, 3163, 0, 1916, 214537, 511, 0, 59, 28, 0, 0),
    }


def test_offline_cpus_leave_gaps_and_the_4096_irq_line_is_not_read():
    text = (DATA / "offline-cpu1-cpu3").read_text()
    assert len(text.split("\n")[3].split()) == 4096 + 2  # the capture really has them
    times, problems = parse_stat(text)
    assert problems == []
    assert sorted(times) == [0, 2]
    assert times[2] == CpuTimes(2, 6001, 0, 2950, 879001, 65, 102, 1204, 9, 0, 0)
    assert times[0].softirq == 931


def test_parser_stops_at_the_first_non_cpu_line():
    """A cpuN-looking line after intr (there is none in the kernel's file) is not read."""
    text = "cpu  1 1 1 1\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 5 1 1\ncpu1 9 9 9 9\n"
    times, problems = parse_stat(text)
    assert problems == [] and list(times) == [0]
    assert times[0] == CpuTimes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)


def test_old_seven_column_form_fills_missing_columns_with_zero():
    times, problems = parse_stat((DATA / "old-2.6.9-7col").read_text())
    assert problems == []
    assert times == {
        0: CpuTimes(0, 1132, 34, 1441, 11311718, 3675, 127, 438, 0, 0, 0),
        1: CpuTimes(1, 1123, 0, 849, 11313845, 2614, 0, 18, 0, 0, 0),
    }


def test_four_column_form_of_2_4_kernels():
    times, problems = parse_stat("cpu  3 0 2 7\ncpu0 3 0 2 7\n")
    assert problems == [] and times[0] == CpuTimes(0, 3, 0, 2, 7, 0, 0, 0, 0)


def test_malformed_cpu_lines_are_skipped_with_a_problem():
    text = "cpu  1 1 1 1\ncpu0 1 2 3 4 5 6 7\ncpux 1 2 3 4\ncpu2 1 2\ncpu3 1 2 x 4\ncpu4 1 2 3 4\n"
    times, problems = parse_stat(text)
    assert sorted(times) == [0, 4]
    assert len(problems) == 3 and all("/proc/stat" in p.message for p in problems)


def test_no_cpu_lines_and_missing_file(tmp_path):
    times, problems = parse_stat("intr 0\n")
    assert times == {} and "no per-CPU lines" in problems[0].message
    times, problems = read_stat(SysRoot(str(tmp_path)))
    assert times == {} and "cannot read /proc/stat" in problems[0].message


# --- percentages ---------------------------------------------------------------------


def _t(cpu=0, user=0, nice=0, system=0, idle=0, iowait=0, irq=0, softirq=0, steal=0):
    return CpuTimes(cpu, user, nice, system, idle, iowait, irq, softirq, steal)


def test_percentages_of_elapsed_ticks():
    a = _t(user=100, system=50, idle=1000, softirq=10)
    b = _t(user=130, system=60, idle=1050, irq=2, softirq=18)  # 30+10+50+2+8 = 100 ticks
    pct = cpu_percentages(a, b)
    assert pct == pytest.approx({"user": 30.0, "nice": 0.0, "system": 10.0, "idle": 50.0,
                                 "iowait": 0.0, "irq": 2.0, "softirq": 8.0, "steal": 0.0})
    assert {"user", "system", "idle", "iowait", "irq", "softirq", "steal"} <= set(pct)


def test_guest_time_is_not_counted_twice():
    a = CpuTimes(0, 100, 0, 0, 100, 0, 0, 0, 0, guest=50)
    b = CpuTimes(0, 150, 0, 0, 150, 0, 0, 0, 0, guest=100)  # guest is inside user
    assert cpu_percentages(a, b)["user"] == pytest.approx(50.0)


def test_no_elapsed_ticks_gives_zeros():
    a = _t(user=5, idle=5)
    assert cpu_percentages(a, a) == dict.fromkeys(PERCENT_FIELDS, 0.0)


def test_cpu_offlined_and_back_counts_from_the_restart():
    """Idle and iowait restart from zero (old nohz accounting); the rest keep counting."""
    a = _t(user=5000, system=2000, idle=900000, iowait=400)
    b = _t(user=5010, system=2010, idle=80, iowait=0)
    pct = cpu_percentages(a, b)
    assert pct["idle"] == pytest.approx(80.0)
    assert pct["user"] == pytest.approx(10.0) and pct["system"] == pytest.approx(10.0)
    assert min(pct.values()) >= 0.0
    assert sum(pct.values()) == pytest.approx(100.0)


def test_small_iowait_step_back_is_not_a_restart():
    """nohz iowait may step back a little: that is 0 iowait, not 'all iowait since boot'."""
    a = _t(user=1000, idle=50000, iowait=3000)
    b = _t(user=1050, idle=50048, iowait=2998)
    pct = cpu_percentages(a, b)
    assert pct["iowait"] == 0.0
    assert pct["user"] == pytest.approx(50 / 98 * 100)
    assert min(pct.values()) >= 0.0


def test_everything_reset_uses_the_new_values():
    a = _t(user=10**9, system=10**9, idle=10**10)
    b = _t(user=30, system=20, idle=50)
    pct = cpu_percentages(a, b)
    assert pct["user"] == pytest.approx(30.0) and pct["idle"] == pytest.approx(50.0)


# --- the live kernel -----------------------------------------------------------------


@pytest.mark.live
def test_live_stat_agrees_with_psutil():
    """psutil reads the same file independently (in seconds); ours bracket its values."""
    hz = os.sysconf("SC_CLK_TCK")
    first, p1 = read_stat(LIVE)
    theirs = psutil.cpu_times(percpu=True)
    second, p2 = read_stat(LIVE)
    assert p1 == p2 == []
    assert sorted(first) == list(range(len(theirs)))
    for cpu, t in enumerate(theirs):
        for name in ("user", "system", "idle", "softirq", "irq", "iowait", "steal"):
            ticks = round(getattr(t, name) * hz)
            assert getattr(first[cpu], name) <= ticks <= getattr(second[cpu], name), (cpu, name)


@pytest.mark.live
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a CPU 1 to spin on")
def test_live_busy_cpu_shows_busy():
    """Spin on CPU 1 for half a second: its share of non-idle ticks must dominate."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {1})
    try:
        before, _ = read_stat(LIVE)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
        after, _ = read_stat(LIVE)
    finally:
        os.sched_setaffinity(0, old)
    pct = cpu_percentages(before[1], after[1])
    assert pct["idle"] + pct["iowait"] < 50.0, pct
    assert pct["user"] + pct["system"] + pct["steal"] > 50.0, pct
