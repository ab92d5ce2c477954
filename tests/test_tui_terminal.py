"""The app in a real pseudo-terminal: colour depth follows the terminal, NO_COLOR removes
colour, and the diffing driver keeps steady-state output small. The data is the
synthetic host pushed once a second by a timer inside the child, so no kernel is read."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

CHILD = r"""
from nettop.tui.app import NettopApp
from nettop.tui.diffterm import diffing_driver
from nettop.tui.scripted import ScriptedSource, synthetic

src = ScriptedSource()

class Ticking(NettopApp):
    def on_mount(self):
        super().on_mount()
        self.i = 0
        self.tick()
        self.set_interval(0.2, self.tick)

    def tick(self):
        src.push(synthetic(self.i, cpus=2))
        self.i += 1

import os
Ticking(src, driver_class=diffing_driver("NO_COLOR" in os.environ)).run()
"""


def run_in_pty(env_extra: dict[str, str], seconds: float = 3.0) -> bytes:
    return b"".join(d for _, d in timed_output(env_extra, seconds))


def timed_output(env_extra: dict[str, str], seconds: float) -> list[tuple[float, bytes]]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLORTERM", "TERM")}
    env.update(env_extra)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True)
    os.close(slave)
    chunks: list[tuple[float, bytes]] = []
    t0 = time.monotonic()

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append((time.monotonic() - t0, data))

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    time.sleep(seconds)
    os.write(master, b"q")
    try:
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    t.join(2)
    return chunks


def test_a_256_colour_terminal_gets_no_truecolor_codes():
    out = run_in_pty({"TERM": "xterm-256color"}).decode(errors="replace")
    assert "lab-host" in out and "eth0 rx-0" in out
    assert re.search(r"\x1b\[[0-9;]*38;5;\d+", out)
    assert not re.search(r"\x1b\[[0-9;]*38;2;\d+;\d+;\d+", out)


def test_a_truecolor_terminal_gets_the_theme_colours_exactly():
    out = run_in_pty({"TERM": "xterm-256color", "COLORTERM": "truecolor"}).decode(errors="replace")
    assert re.search(r"\x1b\[[0-9;]*38;2;\d+;\d+;\d+", out)


def test_no_color_sends_no_colour_codes():
    out = run_in_pty({"TERM": "xterm-256color", "NO_COLOR": "1"}).decode(errors="replace")
    assert "lab-host" in out
    assert not re.search(r"\x1b\[[0-9;]*(38|48);[25];", out)
    assert not re.search(r"\x1b\[(3[0-7]|4[0-7]|9[0-7])m", out)


def test_steady_state_output_is_a_small_part_of_a_full_screen():
    chunks = timed_output({"TERM": "xterm-256color"}, seconds=8.0)
    # windows counted from the first byte, not from the start: on a busy machine the child
    # takes seconds to import Textual, and a fixed 2 s then holds only part of the screen
    t0 = chunks[0][0] if chunks else 0.0
    start = [d for t, d in chunks if t < t0 + 2.0]
    steady = [d for t, d in chunks if t0 + 3.0 <= t < t0 + 5.0]  # 10 ticks, every number moving
    first_screen = sum(map(len, start))
    per_tick = sum(map(len, steady)) / 10
    assert first_screen > 8000  # a 120x40 screen of tables and a chart
    assert 0 < per_tick < first_screen / 5, (per_tick, first_screen)


@pytest.mark.parametrize("interval", ["0.2", "60"])
def test_a_terminal_that_goes_away_without_a_hangup_ends_the_live_view(interval):
    """The pty closes and no SIGHUP comes (nettop in a session of its own, as under nohup):
    Textual's input thread would spin on the end of input at a whole CPU for ever, and
    SIGTERM could not end it (its shutdown blocked on a dead writer). nettop notices within
    a second and ends as on a hang-up; SIGTERM always ends it. Samples every 0.2 s: their
    frames ask; one sample a minute: the check's own timer does."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "nettop.cli", "-i", interval, "--iface", "lo"], stdin=slave,
                            stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    got = b""
    try:
        deadline = time.monotonic() + 60
        while b"NET_RX" not in got and b"softirq" not in got and time.monotonic() < deadline:
            got += os.read(master, 65536)  # until the first screen is drawn
        os.close(master)
        master = -1
        assert proc.wait(15) == 128 + 1  # SIGHUP's exit
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
