"""Send the terminal only the cells that changed.

Textual repaints a dirty region by re-sending whole line prefixes with full colour codes,
so a number that changes in the middle of a table costs a line of output. Over SSH, at
1 Hz, that adds up; ncurses programs such as htop send only changed cells. `ScreenDiff`
sits between Textual and the terminal: it keeps a copy of what the terminal shows, reads
Textual's output (cursor moves, colour codes, text), and writes only cells whose text
or style differ, with as few cursor moves and colour codes as it can. Sequences it does
not model are passed through, and any that could change the screen behind its back
(clears, scrolls, mode switches) make it forget the copy, so the next frame is sent whole.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len

if TYPE_CHECKING:
    from textual.driver import Driver

_TOKEN = re.compile(
    r"\x1b\[([0-9;?<>=]*)([@-~])"  # CSI: params, final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (title, clipboard): passed through
    r"|\x1b[^\[\]]"  # other escapes: passed through
    r"|(\r\n|\r|\n)"
    r"|([^\x1b\r\n]+)"
)
_SYNC = ("\x1b[?2026h", "\x1b[?2026l")


class ScreenDiff:
    """Stateful filter: feed it what Textual writes, write what it returns."""

    def __init__(self, strip_colour: bool = False) -> None:
        self.strip_colour = strip_colour  # NO_COLOR: keep bold/underline/reverse, drop colours
        self._chars: list[list[str | None]] = []
        self._styles: list[list[str | None]] = []
        self._x = self._y = 0  # where Textual's cursor is
        self._style = ""  # Textual's current SGR parameters
        self._out_x = self._out_y = -1  # where the real terminal's cursor is
        self._out_style: str | None = None
        self.bytes_in = 0
        self.bytes_out = 0

    def invalidate(self) -> None:
        """Forget the copy: the next frame is sent in full."""
        self._chars.clear()
        self._styles.clear()
        self._out_x = self._out_y = -1
        self._out_style = None

    def _row(self, y: int, width: int) -> tuple[list[str | None], list[str | None]]:
        while len(self._chars) <= y:
            self._chars.append([])
            self._styles.append([])
        chars, styles = self._chars[y], self._styles[y]
        if len(chars) < width:
            chars.extend([None] * (width - len(chars)))
            styles.extend([None] * (width - len(styles)))
        return chars, styles

    def feed(self, data: str) -> str:
        self.bytes_in += len(data)
        out: list[str] = []
        changed = False
        for m in _TOKEN.finditer(data):
            params, final, newline, text = m.group(1), m.group(2), m.group(3), m.group(4)
            if text is not None:
                changed |= self._text(text, out)
            elif newline is not None:
                if newline != "\r":
                    self._y += 1
                self._x = 0
            elif final == "m":
                if self.strip_colour:
                    params = _without_colour(params)
                if params in ("", "0"):
                    self._style = ""
                elif params.startswith("0;"):
                    self._style = params[2:]
                else:
                    self._style = f"{self._style};{params}" if self._style else params
            elif final == "H" and params is not None and "?" not in params:
                y, _, x = params.partition(";")
                self._y = int(y or 1) - 1
                self._x = int(x or 1) - 1
            else:
                seq = m.group(0)
                if seq in _SYNC:
                    out.append(seq)
                    continue
                if final in ("J", "K", "S", "T", "L", "M", "P", "@", "X", "r") or (
                        final in ("h", "l") and params is not None and "1049" in params):
                    self.invalidate()
                out.append(seq)
                changed = True
                self._out_x = self._out_y = -1
        if not changed:
            return ""
        if self._out_style:
            at = len(out) - 1 if out and out[-1] == _SYNC[1] else len(out)
            out.insert(at, "\x1b[0m")
            self._out_style = ""
        result = "".join(out)
        self.bytes_out += len(result)
        return result

    def _text(self, text: str, out: list[str]) -> bool:
        x, y, style = self._x, self._y, self._style
        if text.isascii() or all(c < "\u1100" for c in text):
            cells = list(text)
        else:
            cells = []
            for c in text:
                cells.append(c)
                if cell_len(c) == 2:
                    cells.append("")  # the right half of a wide character
        n = len(cells)
        self._x = x + n
        chars, styles = self._row(y, x + n)
        if chars[x:x + n] == cells and styles[x:x + n] == [style] * n:
            return False
        changed = False
        i = 0
        while i < n:
            if chars[x + i] == cells[i] and styles[x + i] == style:
                i += 1
                continue
            j = i
            while j < n and not (chars[x + j] == cells[j] and styles[x + j] == style):
                j += 1
            while i > 0 and cells[i] == "":  # never start in the middle of a wide character
                i -= 1
            self._emit(x + i, y, style, "".join(cells[i:j]), out)
            chars[x + i:x + j] = cells[i:j]
            styles[x + i:x + j] = [style] * (j - i)
            changed = True
            i = j
        return changed

    def _emit(self, x: int, y: int, style: str, text: str, out: list[str]) -> None:
        if (x, y) != (self._out_x, self._out_y):
            out.append(f"\x1b[{y + 1};{x + 1}H")
        if style != self._out_style:
            out.append(f"\x1b[0;{style}m" if style else "\x1b[0m")
            self._out_style = style
        out.append(text)
        self._out_x, self._out_y = x + cell_len(text), y


def _without_colour(params: str) -> str:
    """SGR parameters minus every colour (30-49, 90-107, and 38/48 with their arguments)."""
    out: list[str] = []
    parts = params.split(";")
    i = 0
    while i < len(parts):
        p = parts[i]
        if p in ("38", "48", "58"):
            i += 3 if i + 1 < len(parts) and parts[i + 1] == "5" else 5
            continue
        if p.isdigit() and (30 <= int(p) <= 49 or 90 <= int(p) <= 107):
            i += 1
            continue
        out.append(p)
        i += 1
    return ";".join(out)


def diffing_driver(no_color: bool = False) -> type[Driver]:
    """A Linux terminal driver whose output goes through a ScreenDiff; with `no_color`
    (the NO_COLOR convention) it also removes every colour code."""
    from textual.drivers.linux_driver import LinuxDriver

    class DiffingDriver(LinuxDriver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.screen_diff = ScreenDiff(strip_colour=no_color)

        def write(self, data: str) -> None:
            writer = getattr(self, "_writer_thread", None)
            if writer is not None and not writer.is_alive():
                # the terminal went away (the writer thread died on EIO): Textual's writer
                # queue would fill and block the app's shutdown for ever, leaving the
                # sampler running with no screen (seen after a pty closed)
                return
            filtered = self.screen_diff.feed(data)
            if filtered:
                super().write(filtered)

    return DiffingDriver
