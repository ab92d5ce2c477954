"""The VM tiers' watch on qemu's console: a guest whose vCPUs are stuck for good is
ended at once, not at the tier's 55-minute timeout, and a short report is not.

A real qemu is not needed for this: `_watch` reads a process's stdout, and a small
script prints what a locked-up guest kernel prints on its serial console.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from vm import guest

LINE = "[ {t}.42] watchdog: BUG: soft lockup - CPU#{cpu} stuck for {s}s! [swapper/{cpu}:0]"


def _console(tmp_path: Path, stuck_s: list[int], then_sleep: float) -> list[str]:
    script = tmp_path / "console.py"
    lines = [LINE.format(t=100 + i, cpu=i % 4, s=s) for i, s in enumerate(stuck_s)]
    script.write_text("import sys, time\n"
                      f"for line in {lines!r}:\n"
                      "    print(line, flush=True)\n"
                      "    time.sleep(0.2)\n"
                      f"time.sleep({then_sleep})\n"
                      "print('5 passed in 1.00s', flush=True)\n")
    return [sys.executable, str(script)]


def test_a_vcpu_stuck_for_minutes_ends_the_boot_within_seconds(tmp_path):
    argv = _console(tmp_path, [22, 50, 78, 106, 134, 162, 190, 218, 246, 274], then_sleep=600)
    t0 = time.monotonic()
    out = guest._watch(argv, timeout=300)
    assert time.monotonic() - t0 < 30
    m = re.search(r"\[guest: killed, a vCPU stuck for (\d+) s\]$", out)
    assert m and int(m.group(1)) >= guest.STUCK_FOR_GOOD_S, out[-300:]
    assert "5 passed" not in out


def test_a_short_lockup_report_is_waited_out(tmp_path):
    out = guest._watch(_console(tmp_path, [22, 26], then_sleep=1), timeout=60)
    assert "5 passed in 1.00s" in out and "[guest: killed" not in out, out


def test_the_timeout_still_ends_a_silent_guest(tmp_path):
    t0 = time.monotonic()
    out = guest._watch([sys.executable, "-c", "import time; print('booting', flush=True); time.sleep(600)"],
                       timeout=3)
    assert time.monotonic() - t0 < 20
    assert out.startswith("booting") and out.endswith("[guest: killed after 3 s]"), out
