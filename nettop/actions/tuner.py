"""The Tuner: validate → describe → apply → read back → verified result, journaled and undoable.

One Tuner per process. Every method may run on a worker thread (the TUI calls it off the
UI thread); it touches no UI and reports each applied change through `on_event`, which
the live view points at `Timeline.add_event` so the charts mark the moment.

A group of changes (one CLI command, one "spread IRQs" action) is one undo step and is
all-or-nothing: when a write fails, the writes already made in the group are put back
before the error is raised, so the host and the journal agree.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from nettop.actions.base import ActionError, Change, Plan, Result, Setting, from_record
from nettop.actions import hangups
from nettop.actions.conflicts import IrqbalanceCheck
from nettop.actions.journal import Entry, Journal, State, Trial
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.model.timeline import Event

EventHook = Callable[[Event], None]


def read_only_reason() -> str | None:
    """Why this process may not tune anything, or None."""
    if os.geteuid() != 0:
        return "nettop runs without root, so tuning is read-only: run it as root (sudo nettop) to change settings"
    return None


class NeedsConfirm(ActionError):
    """The plan holds disruptive changes and `confirmed` was not given."""


class KernelRefused(ActionError):
    """A write the kernel refused; the group's earlier writes were put back."""


@dataclass(frozen=True, slots=True)
class Drift:
    """A value nettop set that someone else changed afterwards."""

    key: str
    set_to: Any
    now: Any
    shown: tuple[str, str] = ("", "")  # set_to and now as a person reads them

    def line(self) -> str:
        a, b = self.shown if any(self.shown) else (str(self.set_to), str(self.now))
        return f"{self.key} was set to {a} by nettop but is now {b}: changed by someone else"


class Tuner:
    def __init__(self, journal: Journal | None = None, on_event: EventHook | None = None,
                 read_only: str | None = "auto", root: SysRoot = LIVE) -> None:
        self.journal = journal or Journal()
        self.on_event = on_event
        self.read_only = read_only_reason() if read_only == "auto" else read_only
        # who else changes what nettop changes (irqbalance, tuned), asked by the workflow
        self.root = root
        self.irqbalance = IrqbalanceCheck(root)
        self._lock = threading.Lock()
        self.skipped: list[str] = []  # what the last revert/restore found gone

    # -- planning ---------------------------------------------------------------------
    def plan(self, changes: Sequence[Change]) -> list[Plan]:
        """Validate every change against the live host; ActionError on the first bad one."""
        plans = []
        for ch in changes:
            s = ch.setting
            value = s.normalize(ch.value)
            try:
                before = s.read()
            except OSError as exc:
                raise ActionError(s.explain(exc), exc.errno) from None
            text = f"{s.key}: {s.show(before)} → {s.show(value)}"
            plans.append(Plan(s, before, value, s.confirm_reason(before, value), text))
        return plans

    def check_writable(self) -> None:
        if self.read_only:
            raise ActionError(self.read_only, errno.EPERM)

    # -- applying ---------------------------------------------------------------------
    def apply(self, plans: Sequence[Plan], confirmed: bool = False) -> list[Result]:
        """Write a validated group; raises NeedsConfirm, or ActionError after rolling back."""
        return self.apply_group(plans, confirmed)[1]

    def apply_group(self, plans: Sequence[Plan], confirmed: bool = False,
                    trial: tuple[float, str] | None = None) -> tuple[int, list[Result]]:
        """`apply`, also giving the journal group it wrote. An ActionError raised after
        the group was begun carries it (`.group`), so the caller can close a trial.

        `trial` (seconds, why) marks the group in the journal as applied on trial before
        anything is written, so whatever happens to this process afterwards, the journal
        says the group must be reverted at the deadline unless confirmed
        (nettop.actions.trial)."""
        self.check_writable()
        reasons = [f"{p.setting.key}: {p.confirm}" for p in plans if p.confirm]
        if reasons and not confirmed:
            raise NeedsConfirm("needs confirmation: " + "; ".join(reasons))
        with hangups.deferred(), self._lock, self.journal.locked() as st:
            # `before` is read again here, under the journal's lock: another nettop may have
            # changed the value since plan(), and the journal must hold what was really there
            items = []
            for p in plans:
                before = self._read(p.setting)
                text = p.text if before == p.before else \
                    f"{p.setting.key}: {p.setting.show(before)} → {p.setting.show(p.value)}"
                items.append((p.setting, before, p.value, text))
            group = st.next_group
            st.next_group += 1
            try:
                if trial is not None:
                    self.journal.trial(st, group, trial[0], trial[1])
                results = self._write_group(st, group, "set", None, items)
            except ActionError as exc:
                exc.group = group
                raise
            self.journal.finish_group(st, group, "set", None)
        return group, results

    # -- trials -----------------------------------------------------------------------

    def confirm_trial(self, group: int) -> bool:
        """Keep a group applied on trial; False when it was already reverted (too late)."""
        with hangups.deferred(), self._lock, self.journal.locked() as st:
            trial = st.trials.get(group)
            if trial is None or not trial.pending:
                return trial is not None and trial.outcome == "confirmed"
            self.journal.trial_end(st, group, "confirmed")
            return True

    def revert_trial(self, group: int, reason: str) -> list[Result] | None:
        """Put a group on trial back, once: None when it is no longer pending (confirmed,
        already reverted by another process, or not a trial). Values someone else changed
        since are put back all the same: the point is to give the operator the host back."""
        with hangups.deferred(), self._lock, self.journal.locked() as st:
            trial = st.trials.get(group)
            if trial is None or not trial.pending:
                return None
            results: list[Result] = []
            errors: list[str] = []
            if group in st.undo:
                gid = st.next_group
                st.next_group += 1
                entries = [e for e in st.groups.get(group, []) if e.action == "set" and e.ok]
                for e in reversed(entries):
                    try:
                        s = from_record(e.setting)
                        now = self._read(s)
                    except ActionError as exc:
                        errors.append(str(exc))
                        continue
                    if now == e.before:
                        continue
                    res = self._write_one(st, gid, "undo", group, s, now, e.before,
                                          f"{e.key}: {s.show(now)} → {s.show(e.before)}")
                    (errors.append(res.error) if res.error else results.append(res))
                self.journal.finish_group(st, gid, "undo", group)
            self.journal.trial_end(st, group, "reverted", reason)
            if errors:
                self.skipped = errors
            return results

    def pending_trials(self) -> list[Trial]:
        """Groups on trial that are neither confirmed nor reverted, oldest first."""
        st = self.journal.read_state()
        return sorted((t for t in st.trials.values() if t.pending), key=lambda t: t.deadline_mono)

    def _write_group(self, st: State, group: int, action: str, ref: int | None,
                     items: list[tuple[Setting, Any, Any, str]]) -> list[Result]:
        done: list[tuple[Setting, Any]] = []
        results = []
        for setting, before, value, text in items:
            res = self._write_one(st, group, action, ref, setting, before, value, text)
            if res.error is not None:
                if res.after is not None and res.after != before:
                    done.append((setting, before))  # a multi-step write stopped half way
                self._rollback(st, group, done)
                raise KernelRefused(res.error)
            done.append((setting, before))
            results.append(res)
        return results

    def _write_one(self, st: State, group: int, action: str, ref: int | None, setting: Setting,
                   before: Any, value: Any, text: str) -> Result:
        e = self.journal.begin(st, group=group, action=action, ref=ref, setting=setting.to_record(),
                               key=setting.key, before=before, value=value, text=text)
        error = None
        try:
            setting.write(value)
        except ActionError as exc:
            error = str(exc)
        except OSError as exc:
            error = setting.explain(exc)
        except Exception as exc:  # noqa: BLE001  a request nettop could not even build: the end line must still be written
            error = f"{setting.key}: nettop could not make this request ({type(exc).__name__}: {exc})"
        try:
            after = setting.read()
        except OSError as exc:
            after = None
            error = error or setting.explain(exc)
        try:
            verified = error is None and setting.matches(value, after)
        except (TypeError, ValueError, KeyError, AttributeError):  # a value from a damaged journal
            verified = False
        self.journal.end(e, after=after, verified=verified, error=error)
        eff = None
        if error is None:
            try:
                eff = setting.effective()
            except OSError:
                eff = None
            self._event(e.t, text if action == "set" else f"{action}: {text}")
        return Result(e.id, setting.key, text, before, value, after, verified, eff, error)

    def _rollback(self, st: State, group: int, done: list[tuple[Setting, Any]]) -> None:
        for setting, before in reversed(done):
            try:
                now = setting.read()
            except OSError:
                continue
            if now == before:
                continue
            self._write_one(st, group, "rollback", group, setting, now, before,
                            f"{setting.key}: {setting.show(now)} → {setting.show(before)}")

    def _event(self, t: float, text: str) -> None:
        if self.on_event is not None:
            self.on_event(Event(t, "tuning", text))

    # -- undo, redo, revert -----------------------------------------------------------
    def undo(self, force: bool = False) -> list[Result]:
        return self._step("undo", force)

    def redo(self, force: bool = False) -> list[Result]:
        return self._step("redo", force)

    def _step(self, action: str, force: bool) -> list[Result]:
        self.check_writable()
        with hangups.deferred(), self._lock, self.journal.locked() as st:
            ref, items = self._step_items(st, action, force)
            group = st.next_group
            st.next_group += 1
            results = self._write_group(st, group, action, ref, items)
            self.journal.finish_group(st, group, action, ref)
        return results

    def _step_items(self, st: State, action: str, force: bool) -> tuple[int, list[tuple[Setting, Any, Any, str]]]:
        """The group an undo/redo acts on and its writes (setting, now, target, text), or the
        ActionError the command ends with; shared by the real command and its dry-run."""
        stack = st.undo if action == "undo" else st.redo
        if not stack:
            raise ActionError(f"nothing to {action}: the journal {self.journal.path} has no "
                              f"{'applied' if action == 'undo' else 'undone'} change left")
        ref = stack[-1]
        entries = [e for e in st.groups.get(ref, []) if e.action == "set" and e.ok]
        if action == "undo":
            entries = list(reversed(entries))
        items = []
        for e in entries:
            s = from_record(e.setting)
            expect, target = (e.after, e.before) if action == "undo" else (e.before, e.after)
            now = self._read(s)
            if not s.unchanged(expect, now) and not force:
                raise ActionError(f"cannot {action} {e.key}: it is {s.show(now)} now, not "
                                  f"{s.show(expect)} as nettop left it (changed by someone else); "
                                  f"use --force to {action} anyway")
            items.append((s, now, target, f"{e.key}: {s.show(now)} → {s.show(target)}"))
        return ref, items

    def revert_all(self, reason: str = "revert") -> list[Result]:
        """Put every value changed this epoch back to its original; used by restore too."""
        self.check_writable()
        with hangups.deferred(), self._lock, self.journal.locked() as st:
            items, self.skipped, errors = self._revert_items(st)
            group = st.next_group
            st.next_group += 1
            results: list[Any] = []
            for s, now, before, text in items:
                res = self._write_one(st, group, reason, None, s, now, before, text)
                (errors.append(res.error) if res.error else results.append(res))
            if errors:
                raise ActionError(f"{reason}: {len(errors)} value(s) could not be put back: " + "; ".join(errors))
            self.journal.clean(st, reason)
        return results

    def _revert_items(self, st: State) -> tuple[list[tuple[Setting, Any, Any, str]], list[str], list[str]]:
        """What revert/restore would write (setting, now, original, text), what it skips
        because the value vanished, and what it cannot even read."""
        items: list[tuple[Setting, Any, Any, str]] = []
        skipped: list[str] = []
        errors: list[str] = []
        for e in reversed(list(st.originals().values())):
            try:
                s = from_record(e.setting)
                now = self._read(s)
            except ActionError as exc:
                # a vanished interface or IRQ took its value with it: nothing to put back
                (skipped if exc.errno in (errno.ENOENT, errno.ENODEV) else errors).append(str(exc))
                continue
            if now == e.before:
                continue
            items.append((s, now, e.before, f"{e.key}: {s.show(now)} → {s.show(e.before)}"))
        return items, skipped, errors

    def preview(self, command: str, force: bool = False) -> Preview:
        """What `undo`, `redo`, `revert` or `restore` would write now, computed by the same
        code as the real command; raises the ActionError the real command would end with
        before writing anything ("nothing to undo", "changed by someone else")."""
        with hangups.deferred(), self._lock, self.journal.reading() as st:
            if command in ("undo", "redo"):
                _, items = self._step_items(st, command, force)
                return Preview(command, [_planned(i) for i in items], [], [])
            items, skipped, errors = self._revert_items(st)
            return Preview(command, [_planned(i) for i in items], skipped, errors)

    def revert_on_exit(self) -> None:
        """Put everything back when this process exits normally (the TUI's option).

        A kill -9 skips this; the journal still lets `nettop restore` do it later.
        """
        import atexit

        def _revert() -> None:
            try:
                self.revert_all("exit")
            except ActionError:
                pass  # the journal keeps the originals for `nettop restore`

        atexit.register(_revert)

    def restore(self) -> list[Result]:
        """After a crash or kill -9: every value nettop changed back to its original."""
        return self.revert_all("restore")

    # -- looking ----------------------------------------------------------------------
    def state(self) -> State:
        return self.journal.read_state()

    def drift(self) -> list[Drift]:
        """Values nettop set (and did not undo) that differ from what the kernel has now."""
        st = self.journal.read_state()
        live = {e.key for g in st.undo for e in st.groups.get(g, []) if e.ok}
        out = []
        for key, e in st.last_ok().items():
            if key not in live:
                continue
            try:
                s = from_record(e.setting)
                now = s.read()
            except (OSError, ActionError):
                continue
            if not s.unchanged(e.after, now):
                out.append(Drift(key, e.after, now, (s.show(e.after), s.show(now))))
        return out

    @staticmethod
    def _read(s: Setting) -> Any:
        try:
            return s.read()
        except OSError as exc:
            raise ActionError(s.explain(exc), exc.errno) from None


@dataclass(frozen=True, slots=True)
class Preview:
    """A dry-run of undo/redo/revert/restore: the writes the real command would make."""

    command: str
    writes: list[dict[str, Any]]  # key, text, before (the value now), value (what would be written)
    skipped: list[str]  # values that vanished: the real command skips them too
    errors: list[str]  # values it could not read: the real command would fail on them


def _planned(item: tuple[Setting, Any, Any, str]) -> dict[str, Any]:
    s, now, target, text = item
    return {"key": s.key, "text": text, "before": now, "value": target}


def describe_entry(e: Entry) -> dict[str, Any]:
    """A journal entry as the CLI's --json prints it."""
    return {"id": e.id, "group": e.group, "action": e.action, "ref": e.ref,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.t)), "key": e.key,
            "before": e.before, "requested": e.value, "after": e.after, "verified": e.verified,
            "error": e.error, "ended": e.ended, "text": e.text}
