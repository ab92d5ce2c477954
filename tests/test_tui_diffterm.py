"""ScreenDiff: the terminal ends up showing exactly what Textual drew, from fewer bytes."""

from __future__ import annotations

import random
import re

from nettop.tui.diffterm import ScreenDiff

SYNC_ON, SYNC_OFF = "\x1b[?2026h", "\x1b[?2026l"


class Terminal:
    """A minimal terminal: cursor position, SGR and text, enough to compare screens."""

    def __init__(self, width: int = 40, height: int = 6) -> None:
        self.cells = [[(" ", "")] * width for _ in range(height)]
        self.x = self.y = 0
        self.sgr = ""

    def write(self, data: str) -> None:
        for m in re.finditer(r"\x1b\[([0-9;?]*)([A-Za-z])|\r\n|([^\x1b\r\n]+)", data):
            params, final, text = m.group(1), m.group(2), m.group(3)
            if text:
                for ch in text:
                    self.cells[self.y][self.x] = (ch, self.sgr)
                    self.x += 1
            elif final == "H":
                y, _, x = (params or "1;1").partition(";")
                self.y, self.x = int(y) - 1, int(x or 1) - 1
            elif final == "m":
                self.sgr = "" if params in ("", "0") else (params[2:] if params.startswith("0;") else
                                                          (self.sgr + ";" + params if self.sgr else params))
            elif final == "J":
                self.cells = [[(" ", "")] * len(self.cells[0]) for _ in self.cells]
            elif m.group(0) == "\r\n":
                self.y, self.x = self.y + 1, 0


def frame(lines: list[tuple[int, int, str, str]]) -> str:
    """Textual-style output: per line a cursor move, then styled segments reset after each."""
    out = [SYNC_ON]
    for y, x, style, text in lines:
        out.append(f"\x1b[{y + 1};{x + 1}H\x1b[{style}m{text}\x1b[0m")
    out.append(SYNC_OFF)
    return "".join(out)


def test_an_unchanged_frame_sends_nothing():
    d = ScreenDiff()
    f = frame([(0, 0, "1;38;5;188", "nettop live"), (1, 0, "38;5;1", "eth0 rx-0   40")])
    assert d.feed(f) != ""
    assert d.feed(f) == ""


def test_one_changed_digit_sends_one_cell():
    d = ScreenDiff()
    d.feed(frame([(2, 0, "38;5;188", " eth0 rx-0   450 ")]))
    out = d.feed(frame([(2, 0, "38;5;188", " eth0 rx-0   460 ")]))
    assert out == f"{SYNC_ON}\x1b[3;15H\x1b[0;38;5;188m6\x1b[0m{SYNC_OFF}"


def test_a_style_change_alone_is_sent():
    d = ScreenDiff()
    d.feed(frame([(0, 0, "38;5;188", "5")]))
    out = d.feed(frame([(0, 0, "1;4;38;5;168", "5")]))
    assert "\x1b[0;1;4;38;5;168m5" in out


def test_a_clear_makes_the_next_frame_whole():
    d = ScreenDiff()
    f = frame([(0, 0, "38;5;188", "abc")])
    d.feed(f)
    assert d.feed("\x1b[2J") == "\x1b[2J"
    assert "abc" in d.feed(f)


def test_wide_characters_are_resent_whole():
    d = ScreenDiff()
    d.feed(frame([(0, 0, "", "ab宽c")]))
    out = d.feed(frame([(0, 0, "", "ab宽d")]))
    assert out.endswith(f"\x1b[1;6Hd{SYNC_OFF}") or "d" in out and "宽" not in out


def test_random_frames_leave_the_terminal_identical_to_undiffed_output():
    rng = random.Random(7)
    raw, diffed, d = Terminal(), Terminal(), ScreenDiff()
    styles = ["38;5;188", "1;38;5;74", "7;38;5;23", ""]
    for _ in range(200):
        lines = []
        for _ in range(rng.randint(1, 6)):
            y, x = rng.randrange(6), rng.randrange(30)
            text = "".join(rng.choice("01234 .kM⢀⡇▆") for _ in range(rng.randint(1, 40 - x)))
            lines.append((y, x, rng.choice(styles), text))
        f = frame(lines)
        raw.write(f)
        diffed.write(d.feed(f))
        assert diffed.cells == raw.cells


def test_a_table_with_one_moving_number_costs_a_few_bytes_per_frame():
    d = ScreenDiff()
    rows = [f" eth0 rx-{q}   {40 + q:<5} {q}        {100 * q:>6} " for q in range(20)]
    d.feed(frame([(y, 0, "38;5;188;48;5;16", r) for y, r in enumerate(rows)]))
    sent = []
    for tick in range(10):
        rows[5] = f" eth0 rx-5   45    5        {tick:>6} "
        sent.append(len(d.feed(frame([(y, 0, "38;5;188;48;5;16", r) for y, r in enumerate(rows)]))))
    full = len(frame([(y, 0, "38;5;188;48;5;16", r) for y, r in enumerate(rows)]))
    assert max(sent) < 60 < full / 10


def test_no_color_keeps_text_styles_and_drops_every_colour():
    d = ScreenDiff(strip_colour=True)
    out = d.feed(frame([(0, 0, "1;4;38;5;168;48;2;10;20;30", "hot"), (1, 0, "7;31;42", "cur")]))
    assert "\x1b[0;1;4mhot" in out and "\x1b[0;7mcur" in out
    assert "38;" not in out and "48;" not in out
