"""The one tuning workflow: plan → who else changes it → confirm → apply → ban, as an Outcome.

Every way of changing a setting goes through here: `nettop set`, the live view's keys and
prompt, the doctor's fixes (they fill that prompt), an experiment's variants and `nettop
apply`. So a key press, a doctor fix and the same `nettop set` line journal the same
entries, warn about the same conflicts and ban the same IRQs from irqbalance.

The workflow asks nothing and prints nothing: it returns an `Outcome` that says what it
did or why it stopped (a confirmation is needed, the line is bad, the kernel refused),
and the front end asks, shows or exits. A front end that can ask a person (`ask=True`,
the live view) is also stopped when irqbalance would undo the IRQs the change moves, so
it can offer to ban them; a script (`nettop set`) is warned instead.

`run_plans` is the one place every change passes between planning and writing, so what
must happen to every change before it is made (a trial on the SSH session's own path,
with a countdown and a guardian) belongs there, with its state carried by the Outcome.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, replace
from typing import Sequence

from nettop.actions.base import ActionError, Change, Plan, Result
from nettop.actions.conflicts import Conflict, find_conflicts
from nettop.actions.irq import IrqAffinity
from nettop.actions.trial import Guard, TrialRun, apply_on_trial
from nettop.actions.tuner import KernelRefused, Tuner

IRQBALANCE_ASK = "irqbalance is running and will move these IRQs back within seconds"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one request did, or why it stopped before writing anything."""

    plans: tuple[Plan, ...] = ()  # validated changes, each with its "before → after" text
    confirm: tuple[str, ...] = ()  # why to ask first ("mtu eth0: the link goes down ..."), one per reason
    pending: bool = False  # stopped before writing: the request needs `confirmed` (see `confirm`)
    irqs: tuple[int, ...] = ()  # the IRQs the change moves
    irqbalance: bool = False  # irqbalance runs (asked only when IRQs move)
    conflicts: tuple[Conflict, ...] = ()  # who else will change it; irqbalance's resolved by a ban
    results: tuple[Result, ...] = ()  # what the kernel took, journaled
    banned: str | None = None  # irqbalance's socket the moved IRQs were banned through
    warnings: tuple[str, ...] = ()  # the conflicts' messages, then a ban that failed
    error: str | None = None  # one line; nothing was written (a refused group is rolled back)
    refused: bool = False  # the error is the kernel refusing a write (`nettop set` exits 1)
    dry_run: bool = False
    trial: TrialRun | None = None  # applied on trial (it touches the SSH session's path): keep or revert it
    on_path: tuple[str, ...] = ()  # why the change touches the session's path

    @property
    def ok(self) -> bool:
        return self.error is None and not self.pending

    @property
    def may_ban(self) -> bool:
        """Whether banning the moved IRQs from irqbalance is worth offering."""
        return self.irqbalance and bool(self.irqs)

    def plan_lines(self) -> list[str]:
        return [f"set {p.text}" for p in self.plans]

    def ban_line(self) -> str | None:
        if self.banned is None:
            return None
        return f"irqbalance will leave IRQ {', '.join(map(str, self.irqs))} alone (banned through {self.banned})"


def line_args(text: str) -> argparse.Namespace:
    """One `set ...` line ("nettop" and "set" may be left out) parsed as the CLI parses it;
    ActionError for a line that is not one, ValueError for unbalanced quotes."""
    from nettop.actions.cli_set import set_line_parser

    words = shlex.split(text)
    if words and words[0] == "nettop":
        words = words[1:]
    if words and words[0] == "set":
        words = words[1:]
    if not words:
        raise ActionError("type what to set, e.g. `rps eth0 0 0-3` or `txqueuelen eth0 5000`")
    return set_line_parser().parse_args(["set", *words])


def parse_line(text: str) -> list[Change]:
    """The Changes of one `set ...` line; ActionError (or ValueError) otherwise."""
    from nettop.actions.cli_set import build_changes

    return build_changes(line_args(text))


def run_line(tuner: Tuner, text: str, confirmed: bool = False, ban: bool = False, ask: bool = False,
             dry_run: bool = False, guard: Guard | None = None) -> Outcome:
    """A `set` line through the workflow; the line's own `--ban` counts as `ban`."""
    from nettop.actions.cli_set import build_changes

    try:
        args = line_args(text)
        changes = build_changes(args)
    except ActionError as exc:
        return Outcome(error=str(exc))
    except ValueError as exc:
        return Outcome(error=f"cannot read that line: {exc}")
    seconds = getattr(args, "confirm", None)
    if guard is not None and seconds is not None:  # the line's own --confirm wins
        guard = replace(guard, seconds=seconds)
    return run_changes(tuner, changes, confirmed=confirmed, ban=ban or bool(getattr(args, "ban", False)),
                       ask=ask, dry_run=dry_run, guard=guard)


def run_changes(tuner: Tuner, changes: Sequence[Change], confirmed: bool = False, ban: bool = False,
                ask: bool = False, dry_run: bool = False, guard: Guard | None = None) -> Outcome:
    """Plan the changes against the live host, then `run_plans`."""
    try:
        plans = tuner.plan(changes)
    except ActionError as exc:
        return Outcome(error=str(exc))
    return run_plans(tuner, plans, confirmed=confirmed, ban=ban, ask=ask, dry_run=dry_run, guard=guard)


def run_plans(tuner: Tuner, plans: Sequence[Plan], confirmed: bool = False, ban: bool = False,
              ask: bool = False, dry_run: bool = False, guard: Guard | None = None) -> Outcome:
    """Conflicts → confirmation → apply (one undo step) → ban: every change passes here.

    `confirmed` lets disruptive changes through (`--yes`, the confirm screen's y); `ban`
    bans the moved IRQs from irqbalance once they are written, which resolves irqbalance's
    conflict; `ask` stops before writing when irqbalance would undo the change unbanned.
    `guard`: a change on the SSH session's path is applied on trial (nettop.actions.trial):
    the Outcome carries the TrialRun for the front end's countdown.
    """
    irqs = tuple(p.setting.irq for p in plans if isinstance(p.setting, IrqAffinity))
    balancing = bool(irqs) and tuner.irqbalance.running()
    conflicts = find_conflicts({p.setting.kind for p in plans}, tuner.root, balancing)
    out = Outcome(plans=tuple(plans), irqs=irqs, irqbalance=balancing, conflicts=tuple(conflicts),
                  confirm=tuple(f"{p.setting.key}: {p.confirm}" for p in plans if p.confirm),
                  warnings=tuple(c.message for c in conflicts), dry_run=dry_run)
    if dry_run:
        return out
    try:
        tuner.check_writable()
    except ActionError as exc:
        return replace(out, error=str(exc))
    if not confirmed:
        if ask and balancing and not ban:
            return replace(out, pending=True, confirm=out.confirm + (IRQBALANCE_ASK,))
        if out.confirm:
            return replace(out, pending=True)
    seconds, on_path = guard.trial(plans) if guard is not None else (None, [])
    out = replace(out, on_path=tuple(on_path))
    try:
        if seconds is None:
            results = tuner.apply(plans, confirmed=True)
        else:
            run = apply_on_trial(tuner, plans, seconds, on_path, confirmed=True)
            results, out = run.results, replace(out, trial=run)
    except ActionError as exc:
        return replace(out, error=str(exc), refused=isinstance(exc, KernelRefused))
    out = replace(out, results=tuple(results))
    if not (ban and irqs):
        return out
    try:
        path = tuner.irqbalance.ban(irqs)
    except ActionError as exc:  # the change itself is made and journaled all the same
        return replace(out, warnings=out.warnings + (str(exc),))
    kept = tuple(c for c in conflicts if c.what != "irqbalance")  # banned: it leaves them alone
    return replace(out, banned=path, conflicts=kept, warnings=tuple(c.message for c in kept))


__all__ = ["IRQBALANCE_ASK", "Outcome", "line_args", "parse_line", "run_changes", "run_line", "run_plans"]
