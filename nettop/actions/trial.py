"""Changes on trial: a change on the SSH session's own path reverts unless confirmed.

A qdisc that shapes to a few kbit/s, fewer channels, an MTU or an IRQ moved to a starved
CPU can cut the very session that made the change, and then nobody is left to undo it.
Like `netplan try` or Junos `commit confirmed`, such a change is applied as a trial: the
journal marks its group with a deadline *before* anything is written, and it is put
back at the deadline unless the operator confirms it. Three things see to that, so the
change reverts however the operator is gone:
1. the process that made it, when its countdown ends (the terminal alive but silent);
2. its SIGHUP/SIGTERM handler (sshd closed the session) — see `install_exit_revert`;
3. a guardian process in a session of its own (nettop.actions.guardian), plus a
   `systemd-run` timer where systemd runs, for a process that is killed outright.
Whoever comes first reverts it, under the journal's lock, once; a confirmed trial is
never reverted. Which changes touch the path is `path_reason`'s question.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from nettop.actions import hangups
from nettop.actions.base import ActionError, Plan, Result, Setting
from nettop.actions.journal import Trial
from nettop.actions.tuner import Tuner
from nettop.collectors.session_path import PathResources, SessionPath

DEFAULT_SECONDS = 30.0  # the live view's countdown for a change on the session's path
GUARDIAN_GRACE_S = 3.0  # a later nettop reverts an overdue trial only once its guardian had its turn
_IFACE_KINDS = frozenset({"qdisc", "mtu", "txqueuelen", "coalesce", "rings", "channels", "features",
                          "bql", "rps_cpus", "xps_cpus", "rps_flow_cnt"})
_PER_IFACE_SYSCTL = ("net.ipv4.conf.", "net.ipv6.conf.", "net.ipv4.neigh.", "net.ipv6.neigh.")


def path_reason(setting: Setting, path: SessionPath | None, res: PathResources | None = None) -> str | None:
    """Why writing `setting` may cut the session on `path`, or None when it cannot."""
    if path is None or path.ifname is None:
        return None
    via = f"it carries this SSH session ({path.describe()})"
    params = setting.to_record()["params"]
    if setting.kind in _IFACE_KINDS:
        ifname = params.get("ifname")
        return f"{ifname}: {via}" if ifname in path.devices else None
    if setting.kind == "irq_affinity":
        irq = params.get("irq")
        if res is not None and irq in res.irqs:
            return f"IRQ {irq} serves a queue of {', '.join(path.nics) or path.ifname}, which carries this SSH session"
        return None
    if setting.kind == "sysctl":
        name = str(params.get("name", ""))
        for prefix in _PER_IFACE_SYSCTL:
            if name.startswith(prefix):
                dev = name[len(prefix):].split(".", 1)[0]
                if dev in ("all", "default") or dev in path.devices:
                    return f"sysctl {name} applies to {path.ifname}, which carries this SSH session"
                return None
        if name.startswith("net."):
            return f"sysctl {name} applies to every interface, {path.ifname} (this SSH session's) too"
    return None


@dataclass(frozen=True, slots=True)
class Guard:
    """How a front end protects the session's path: where it is, and for how long a
    change on it is on trial (`seconds`: --confirm N, 0 never; None: `default` for a
    change on the path, None again for none, as for a script)."""

    path: SessionPath | None
    resources: PathResources | None
    seconds: float | None = None
    default: float | None = DEFAULT_SECONDS

    def trial(self, plans: Sequence[Plan]) -> tuple[float | None, list[str]]:
        """(seconds on trial or None, why) for a group of plans."""
        reasons = plan_reasons(plans, self.path, self.resources)
        if self.seconds is not None:
            return (self.seconds if self.seconds > 0 else None), reasons
        return (self.default if reasons else None), reasons


def plan_reasons(plans: Sequence[Plan], path: SessionPath | None, res: PathResources | None) -> list[str]:
    """The path reasons of a group's plans, each once."""
    out: list[str] = []
    for p in plans:
        why = path_reason(p.setting, path, res)
        if why and why not in out:
            out.append(why)
    return out


def spawn_guardian(journal_path: str, group: int) -> subprocess.Popen[bytes] | None:
    """A process that reverts the group at its deadline if nobody else did: in a session
    of its own, so the SIGHUP that ends the operator's session does not reach it, and
    not a thread, so a kill -9 or the OOM killer of nettop does not take it along."""
    argv = [sys.executable, "-m", "nettop.actions.guardian", "--journal", journal_path,
            "--group", str(group), "--parent", str(os.getpid())]
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError:
        return None


def systemd_timer_argv(journal_path: str, group: int, seconds: float) -> list[str] | None:
    """`systemd-run` argv for a transient timer that runs the guardian once at the
    deadline (outside nettop's cgroup, so it survives a session scope being killed);
    None where systemd is not PID 1."""
    if not os.path.isdir("/run/systemd/system") or shutil.which("systemd-run") is None:
        return None
    return ["systemd-run", "--quiet", "--collect", f"--unit=nettop-trial-{os.getpid()}-{group}",
            f"--on-active={max(1, int(seconds + 0.999))}s", "--timer-property=AccuracySec=100ms",
            sys.executable, "-m", "nettop.actions.guardian", "--journal", journal_path,
            "--group", str(group), "--now"]


_ACTIVE: list[TrialRun] = []  # this process's trials still counting down
_ACTIVE_LOCK = threading.RLock()  # the hang-up handler may interrupt its holder


def active() -> list[TrialRun]:
    """This process's trials that are neither confirmed nor reverted."""
    with hangups.deferred(), _ACTIVE_LOCK:  # the hang-up handler asks this too
        return [r for r in _ACTIVE if r.outcome is None]


@dataclass
class TrialRun:
    """One group on trial in this process: its countdown, confirmation and revert."""

    tuner: Tuner
    trial: Trial
    why: list[str]
    results: list[Result]
    guardian: subprocess.Popen[bytes] | None = None
    outcome: str | None = None  # "confirmed", "reverted", or None while counting down
    message: str = ""

    @property
    def group(self) -> int:
        return self.trial.group

    def seconds_left(self) -> float:
        return max(0.0, self.trial.deadline_mono - time.monotonic())

    def confirm(self) -> bool:
        """Keep the change; False when it was reverted before the answer came."""
        kept = self.tuner.confirm_trial(self.group)
        self.outcome = "confirmed" if kept else "reverted"
        self.message = "kept" if kept else "it was already reverted: not confirmed in time"
        self._ended()
        return kept

    def revert(self, reason: str) -> list[Result] | None:
        """Put the change back (once); None when it was confirmed or reverted already."""
        results = self.tuner.revert_trial(self.group, reason)
        if results is not None:
            self.outcome, self.message = "reverted", f"reverted: {reason}"
        elif self.outcome is None:  # another process ended it first: say what it did
            trial = self.tuner.journal.read_state().trials.get(self.group)
            self.outcome = trial.outcome if trial is not None and trial.outcome else "reverted"
            self.message = trial.status() if trial is not None else "ended elsewhere"
        self._ended()
        return results

    def _ended(self) -> None:
        with hangups.deferred(), _ACTIVE_LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
        self._stop_guardian()

    def _stop_guardian(self) -> None:
        g = self.guardian
        if g is not None and g.poll() is None:
            g.terminate()
            try:
                g.wait(timeout=2)
            except subprocess.TimeoutExpired:
                g.kill()
                g.wait()


def apply_on_trial(tuner: Tuner, plans: Sequence[Plan], seconds: float, why: Sequence[str],
                   confirmed: bool = False) -> TrialRun:
    """Apply a group as a trial of `seconds` and start its guardian."""
    text = "; ".join(why) or "on trial (--confirm)"
    # a hang-up now would find the trial half made (no guardian yet): held, it is
    # handled by install_exit_revert's handler once the trial is whole
    with hangups.deferred():
        try:
            group, results = tuner.apply_group(plans, confirmed=confirmed, trial=(seconds, text))
        except ActionError as exc:
            if exc.group is not None:  # nothing stayed applied (rolled back): the trial is over
                tuner.revert_trial(exc.group, f"not applied: {exc}")
            raise
        guardian = spawn_guardian(tuner.journal.path, group)
        timer = systemd_timer_argv(tuner.journal.path, group, seconds)
        if timer is not None:
            subprocess.run(timer, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False, timeout=10)
        with tuner.journal.locked() as st:
            trial = st.trials[group]
            if guardian is not None:
                tuner.journal.trial_guardian(st, trial, guardian.pid)
        run = TrialRun(tuner, trial, list(why), results, guardian)
        with _ACTIVE_LOCK:
            _ACTIVE.append(run)
    return run


def revert_overdue(tuner: Tuner, grace: float = 0.0) -> list[Trial]:
    """Revert trials whose deadline passed with nobody left to do it (their guardian and
    their process gone): called when a nettop starts and by `nettop restore`."""
    done: list[Trial] = []
    if tuner.read_only:
        return done
    for trial in tuner.pending_trials():
        if trial.deadline_mono + grace <= time.monotonic():
            if tuner.revert_trial(trial.group, "not confirmed in time (found overdue)") is not None:
                done.append(trial)
    return done


def install_exit_revert(revert_all: Callable[[], None] | None = None,
                        after: Callable[[int], None] | None = None) -> None:
    """On SIGHUP or SIGTERM (sshd hung up, the window closed): revert this process's
    pending trials (and, with `revert_all`, every change: --revert-on-exit) before it
    ends. `after(signum)` then ends the process (default: exit with 128 + signum)."""

    ending = False  # a hang-up's handler ran: it ends the process

    def end(signum: int) -> None:
        name = signal.Signals(signum).name
        for run in active():
            run.revert(f"{name}: the session ended before it was confirmed")
        if revert_all is not None:
            revert_all()
        if after is not None:
            after(signum)
        else:
            os._exit(128 + signum)

    def end_once_settled(signum: int) -> None:
        hangups.settled()  # a trial being made is on the active list only once its block ends
        end(signum)

    def handler(signum: int, _frame: object) -> None:
        # The tty's hang-up, sshd's own signal and a SIGTERM can come one after another;
        # Python would run this handler again inside the first, whose revert holds the
        # Tuner's lock: the second would wait for it for ever, the change left in place
        # (seen: 12 of 16 double SIGHUPs hung `nettop set`). The first one ends the
        # process; any later one has nothing left to do.
        nonlocal ending
        if ending:
            return
        ending = True
        if hangups.inside():  # the main thread is mid-change, perhaps holding the Tuner (hangups.py)
            threading.Thread(target=end_once_settled, args=(signum,), name="nettop-hangup").start()
        else:
            end(signum)

    if threading.current_thread() is not threading.main_thread():
        return  # Python runs handlers on the main thread only; its owner installs them there
    for sig in hangups.HANGUPS:
        signal.signal(sig, handler)


def session_now() -> tuple[SessionPath | None, PathResources | None]:
    """The live session's path and what serves it now (one snapshot of its devices), for
    a command that changes settings once (`nettop set`, `nettop apply`)."""
    from nettop.collectors.host import HostReader
    from nettop.collectors.session_path import detect, resources

    path = detect()
    if path is None or not path.devices:
        return path, None
    try:
        reader = HostReader(ifnames=path.devices)
    except OSError:
        return path, None
    try:
        return path, resources(path, reader.read())
    except OSError:
        return path, None
    finally:
        reader.close()
