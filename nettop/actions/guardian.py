"""The guardian: reverts a trial change at its deadline if nettop is no longer there to.

Started by `nettop.actions.trial.spawn_guardian` in a session of its own, so it outlives
a nettop that is killed (kill -9, the OOM killer) or hung up on. It reads the journal
every half second and exits as soon as the trial is confirmed or reverted by anyone.
At the deadline it reverts the group through the Tuner, under the journal's lock, so a
trial is never reverted twice and a confirmed one never. While nettop itself is alive it
leaves it a short grace, so the revert message appears on the operator's screen.

    python -m nettop.actions.guardian --journal PATH --group N [--parent PID] [--now]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from nettop.actions.base import ActionError
from nettop.actions.journal import Journal
from nettop.actions.tuner import Tuner
from nettop.kernel.sysroot import LIVE

POLL_S = 0.5
GRACE_S = 1.0  # the process that made the change reverts first when it is alive


def alive(pid: int | None) -> bool:
    """Whether a process `pid` exists (signal 0; one we may not signal exists too)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _protect_from_oom() -> None:
    """The guardian is tiny; ask the OOM killer to take anything else first (root only)."""
    try:
        with open(LIVE.join("proc/self/oom_score_adj"), "w") as f:
            f.write("-1000")
    except OSError:
        pass


_stop = False


def _on_term(_signum: int, _frame: object) -> None:
    """nettop stops the guardian once the trial ended; a revert under way finishes first."""
    global _stop
    _stop = True


def watch(journal: Journal, group: int, parent: int | None, now: bool = False) -> str:
    """Wait for the trial's end; revert it at the deadline. Returns what happened."""
    tuner = Tuner(journal, read_only=None)
    while not _stop:
        try:
            trial = journal.read_state().trials.get(group)
        except ActionError as exc:
            return f"journal unreadable: {exc}"
        if trial is None:
            return "no such trial"
        if not trial.pending:
            return trial.outcome or "ended"
        left = trial.deadline_mono - time.monotonic()
        if not now and alive(parent):
            left += GRACE_S
        if now or left <= 0:
            why = "not confirmed in time; nettop was gone, so its guardian reverted it" \
                if not alive(parent) else "not confirmed in time (guardian)"
            try:
                done = tuner.revert_trial(group, why)
            except ActionError as exc:
                return f"revert failed: {exc}"
            return "reverted" if done is not None else "ended"
        time.sleep(min(POLL_S, max(left, 0.01)))
    return "stopped"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nettop-guardian", description=__doc__)
    p.add_argument("--journal", required=True, metavar="PATH", help="the tuning journal")
    p.add_argument("--group", required=True, type=int, metavar="N", help="the group on trial")
    p.add_argument("--parent", type=int, metavar="PID", help="the nettop that made the change")
    p.add_argument("--now", action="store_true", help="revert now if still pending (systemd timer)")
    a = p.parse_args(argv)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_term)
    # started while nettop held these (hangups.deferred): the mask is inherited
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP, signal.SIGTERM})
    _protect_from_oom()
    watch(Journal(a.journal), a.group, a.parent, a.now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
