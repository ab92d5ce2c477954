"""`nettop set ... --confirm SECONDS`: the terminal countdown of a change on trial.

Like `netplan try`: the change is already applied; the terminal shows what it was and
how long until it reverts, and only `y` keeps it. Anything else, silence, a hang-up
(SIGHUP from sshd), SIGTERM, or the end of input reverts it; a kill -9 leaves it to the
guardian. The countdown is redrawn in place once a second, a few dozen bytes, so it
costs nothing on a session that is still alive and loses nothing on one that stalled.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import time
import tty
from typing import IO

from nettop.actions.trial import DEFAULT_SECONDS, Guard, TrialRun, session_now


def _open_terminal() -> tuple[int | None, bool]:
    """The fd to read the answer from, and whether nettop opened it (/dev/tty)."""
    if sys.stdin is not None and sys.stdin.isatty():
        return sys.stdin.fileno(), False
    try:
        return os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC), True
    except OSError:
        return None, False


def _columns(out: IO[str]) -> int | None:
    """The terminal's width now (it may be resized during the countdown), None if `out`
    is no terminal."""
    try:
        return os.get_terminal_size(out.fileno()).columns or None
    except (OSError, ValueError, AttributeError):
        return None


def countdown_line(what: str, seconds: int, columns: int | None) -> str:
    """The countdown's line, shortened to fit one row of `columns`: `\r` goes back to
    the start of the row, so a line that wrapped would leave its first row behind on
    every redraw (a new line each second at 80 columns). The question's end, the key
    and the seconds left are what must show; the change is cut with an ellipsis."""
    head, tail = f"keep {what}", f"? y keeps · reverts in {seconds} s "
    if columns is not None and len(head) + len(tail) > columns - 1:
        room = columns - 1 - len(tail) - 1
        head = head[:room] + "…" if room > 0 else ""
        if len(head) + len(tail) > columns - 1:  # too narrow even for that
            tail = f"y keeps · {seconds} s"[:max(columns - 1, 1)]
    return head + tail


def countdown(run: TrialRun, what: str, out: IO[str] | None = None) -> bool:
    """Wait for `y` until the trial's deadline; keep (True) or revert (False) the change.
    A hang-up meanwhile is `trial.install_exit_revert`'s, which the caller set."""
    out = out or sys.stderr
    fd, opened = _open_terminal()
    old = None
    try:
        if fd is not None:
            try:
                old = termios.tcgetattr(fd)
                tty.setcbreak(fd, termios.TCSANOW)  # one key answers; keys typed ahead are kept
            except termios.error:
                old = None
        shown = -1
        while True:
            left = run.seconds_left()
            if left <= 0:
                break
            if int(left + 0.999) != shown:
                shown = int(left + 0.999)
                out.write("\r\x1b[K" + countdown_line(what, shown, _columns(out)))
                out.flush()
            if fd is None:
                time.sleep(min(0.2, left))
                continue
            ready, _, _ = select.select([fd], [], [], min(0.2, left))
            if not ready:
                continue
            data = os.read(fd, 64)
            if not data:  # end of input: nobody can answer any more
                break
            if data.strip()[:1] in (b"y", b"Y"):
                kept = run.confirm()
                out.write(f"\r\x1b[K{what}: {'kept (confirmed)' if kept else run.message}\n")
                out.flush()
                return kept
            if data.strip()[:1] in (b"n", b"N"):
                run.revert("not kept (answered no)")
                out.write(f"\r\x1b[K{what}: {run.message or 'reverted'}\n")
                out.flush()
                return False
        run.revert(f"not confirmed within {round(run.trial.deadline - run.trial.t)} s")
        out.write(f"\r\x1b[K{what}: {run.message or 'reverted'}\n")
        out.flush()
        return False
    finally:
        if fd is not None and old is not None:
            try:
                termios.tcsetattr(fd, termios.TCSADRAIN, old)
            except termios.error:
                pass
        if opened and fd is not None:
            os.close(fd)


def cli_guard(requested: float | None) -> Guard:
    """The protection of a command run once from a shell (`nettop set`, `nettop apply`):
    `--confirm N` as given; else a change on the SSH session's path is a trial of
    DEFAULT_SECONDS when a person is at the terminal, and none for a script. The command
    also calls `trial.install_exit_revert` (a hang-up while a trial is made or counts
    down reverts it): a process-wide handler is the command's to set, not this query's."""
    path, res = session_now()
    interactive = sys.stdin is not None and sys.stdin.isatty()
    return Guard(path, res, requested, DEFAULT_SECONDS if interactive else None)


def keep_or_revert(run: TrialRun, out: IO[str] | None = None) -> bool:
    """Say what is on trial and why, then count it down on the terminal."""
    out = out or sys.stderr
    for r in run.results:
        out.write(_printable(r.line()) + "\n")
    for why in run.why:
        out.write(f"on trial: {_printable(why)}\n")
    return countdown(run, "; ".join(r.text for r in run.results) or "the change", out)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text)
