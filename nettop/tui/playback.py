"""What the replay and record keys mean, as pure functions the app and its tests share.

The app binds keys to these: where "g 14:03:20" or "g -90" lands on the recording's
clock, how `>`/`<` move the speed, what the header and notice say in replay, and the
default name of a recording made from the live screen. Times on screen are UTC, as in
the live header, so a time typed into the prompt means the time the header showed.
"""

from __future__ import annotations

import datetime as _dt
import os
import re

from textual.binding import Binding

MIN_SPEED, MAX_SPEED = 1.0, 60.0
UTC = _dt.timezone.utc
STAMP = "%Y-%m-%d %H:%M:%S"

# Shown (footer, help) and active only while the source is a replay.
REPLAY_BINDINGS = [
    Binding("full_stop", "step(1)", "step", key_display=". ,", tooltip="replay: one sample forward"),
    Binding("comma", "step(-1)", "back", show=False, tooltip="replay: one sample back"),
    Binding("right_square_bracket", "next_event(1)", "event", key_display="[ ]",
            tooltip="replay: next event (tuning change, problem, mark)"),
    Binding("left_square_bracket", "next_event(-1)", "prev event", show=False,
            tooltip="replay: previous event"),
    Binding("greater_than_sign", "speed(1)", "speed", key_display="< >",
            tooltip="replay: twice as fast (up to 60x)"),
    Binding("less_than_sign", "speed(-1)", "slower", show=False, tooltip="replay: half as fast (down to 1x)"),
    Binding("g", "goto", "go to", tooltip="replay: go to a time (HH:MM:SS on the recording's date, or +/-seconds)"),
]
REPLAY_ACTIONS = frozenset(b.action.split("(")[0] for b in REPLAY_BINDINGS)

# Active only on a source that can record what it shows (the live one).
RECORD_BINDINGS = [
    Binding("R", "record", "record", show=False,
            tooltip="start / stop recording what the screen shows to a file (asks for its name)"),
]
RECORD_ACTIONS = frozenset({"record"})

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?$")
_RELATIVE = re.compile(r"^([+-])\s*(\d+(?:\.\d*)?)\s*([smh]?)$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_goto(text: str, now_wall: float) -> float:
    """The wall time `text` names, seen from the sample shown at `now_wall`.

    '+90', '-30s', '+5m', '-1h': relative to now; '14:03' or '14:03:20': that time (UTC)
    on the date of the shown sample; '2026-01-01 14:03:20': that moment (UTC).
    ValueError with one line saying what is accepted otherwise."""
    t = text.strip().lower()
    if m := _RELATIVE.match(t):
        sign = 1.0 if m.group(1) == "+" else -1.0
        return now_wall + sign * float(m.group(2)) * _UNIT[m.group(3)]
    if m := _CLOCK.match(t):
        h, mi, s = int(m.group(1)), int(m.group(2)), float(m.group(3) or 0)
        if h > 23 or mi > 59 or s >= 60:
            raise ValueError(f"{text.strip()!r} is not a time of day")
        day = _dt.datetime.fromtimestamp(now_wall, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return day.timestamp() + h * 3600 + mi * 60 + s
    try:
        return _dt.datetime.strptime(t, STAMP).replace(tzinfo=UTC).timestamp()
    except ValueError:
        pass
    raise ValueError(f"{text.strip()!r} is not a time: type HH:MM:SS (UTC, on the shown date), "
                     "YYYY-mm-dd HH:MM:SS, or +/-seconds (+90, -5m)")


def next_speed(speed: float, direction: int) -> float:
    """Twice (direction > 0) or half the speed, kept within 1x..60x."""
    new = speed * 2 if direction > 0 else speed / 2
    return float(min(MAX_SPEED, max(MIN_SPEED, new)))


def speed_text(speed: float) -> str:
    return f"{speed:g}x"


def stamp(t_wall: float) -> str:
    """'2026-01-01 00:00:05 UTC': the replay header's clock."""
    return _dt.datetime.fromtimestamp(t_wall, UTC).strftime(STAMP) + " UTC"


def replay_notice(path: str, warnings: list[str]) -> str:
    """One line: what is shown, that tuning is off, and the newest damage warning."""
    text = f"replay of {os.path.basename(path) or path} — tuning disabled"
    if warnings:
        more = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
        text += f" │ {warnings[-1]}{more}"
    return text


def default_record_path(host: str, t_wall: float, directory: str = ".") -> str:
    """nettop-<host>-<YYYYmmdd-HHMMSS>.db in `directory` (UTC, like the header)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"
    when = _dt.datetime.fromtimestamp(t_wall, UTC).strftime("%Y%m%d-%H%M%S")
    name = f"nettop-{safe}-{when}.db"
    return name if directory in ("", ".") else os.path.join(directory, name)


def size_text(n: int) -> str:
    """Bytes as the REC mark shows them: 812 kB, 3.4 MB."""
    if n < 1_000_000:
        return f"{max(1, round(n / 1000))} kB"
    if n < 1_000_000_000:
        return f"{n / 1e6:.1f} MB"
    return f"{n / 1e9:.2f} GB"


__all__ = [
    "RECORD_ACTIONS", "RECORD_BINDINGS", "REPLAY_ACTIONS", "REPLAY_BINDINGS", "default_record_path",
    "next_speed", "parse_goto", "replay_notice", "size_text", "speed_text", "stamp",
]
