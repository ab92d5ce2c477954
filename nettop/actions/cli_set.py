"""`nettop set ...`, `undo`, `redo`, `journal`, `restore`, `revert`: the tuner for scripts.

Each command builds Changes, plans them (validation, "before → after", confirmation
reasons) and, unless --dry-run, applies them as one undo step. Disruptive changes need
--yes. With --json one document goes to stdout; errors are one line on stderr and exit
status 2 (1 when the kernel refused a write), never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
import time
from typing import Any, NoReturn, Sequence

from nettop.actions import ethtool, irq, rps_xps
from nettop.actions.base import QUEUE_MAX, ActionError, Change, Result, need_iface, parse_int
from nettop.actions.bql import BqlLimit
from nettop.actions.link import Mtu, TxQueueLen
from nettop.actions.qdisc import RootQdisc
from nettop.actions.sysctl import Sysctl
from nettop.actions.confirm_tty import cli_guard, keep_or_revert
from nettop.actions.journal import problem_line
from nettop.actions.trial import GUARDIAN_GRACE_S, install_exit_revert, revert_overdue
from nettop.actions.tuner import KernelRefused, Tuner, describe_entry
from nettop.actions.irq import IRQ_MAX
from nettop.actions.typed import bare, clip, looks_numeric, whole

COMMANDS = ("set", "undo", "redo", "journal", "restore", "revert")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--dry-run", action="store_true", help="validate and show, change nothing")


def _late(p: argparse.ArgumentParser) -> None:
    """The same flags after the setting's arguments (`set irq 30 1 --dry-run`)."""
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document")
    p.add_argument("--dry-run", action="store_true", default=argparse.SUPPRESS, help="validate and show, change nothing")
    p.add_argument("-y", "--yes", action="store_true", default=argparse.SUPPRESS,
                   help="confirm disruptive changes (MTU, qdisc, rings)")
    p.add_argument("--ban", action="store_true", default=argparse.SUPPRESS, help="also ban moved IRQs from irqbalance")
    p.add_argument("--confirm", type=_seconds, metavar="SECONDS", default=argparse.SUPPRESS,
                   help="apply on trial: revert after SECONDS unless `y` is typed (0: never)")


def _seconds(text: str) -> float:
    """--confirm's value: whole or decimal seconds, 0 to 86400."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not (0 <= v <= 86400):
        raise argparse.ArgumentTypeError(f"--confirm takes seconds from 0 to 86400, not {clip(text)}")
    return v


class _QuietParser(argparse.ArgumentParser):
    """A `set` line's parser for prompts and plans: errors are an ActionError of one line,
    never usage text on a terminal a screen or a run is using."""

    def error(self, message: str) -> NoReturn:
        raise ActionError(f"{message}; e.g. `set rps eth0 0 0-3` (see `nettop set --help`)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise ActionError((message or "").strip() or "see `nettop set --help`")

    def print_help(self, file: Any = None) -> None:
        pass


def set_line_parser() -> argparse.ArgumentParser:
    """A parser of `set ...` words (the live view's prompt, an experiment plan's lines):
    `parse_args(["set", *words])`, then `build_changes`; ActionError for a bad line."""
    parser = _QuietParser(prog="set", add_help=False)
    add_subcommands(parser.add_subparsers(dest="command", parser_class=_QuietParser))
    return parser


def add_subcommands(sub: Any) -> None:
    """Add the tuning subcommands to nettop's argparse subparsers."""
    s = sub.add_parser("set", help="change a setting (validated, journaled, undoable)")
    _common(s)
    s.add_argument("-y", "--yes", action="store_true", help="confirm disruptive changes (MTU, qdisc, rings)")
    s.add_argument("--ban", action="store_true", help="also ban moved IRQs from irqbalance")
    s.add_argument("--confirm", type=_seconds, metavar="SECONDS", default=None,
                   help="apply on trial: revert after SECONDS unless `y` is typed (0: never; default: 30 "
                        "for a change on this SSH session's own path made from a terminal)")
    what = s.add_subparsers(dest="what", required=True)
    a = what.add_parser("irq", help="IRQ CPUS | IFACE spread CPUS | IFACE hint | IFACE numa")
    a.add_argument("target", help="an IRQ number, or an interface for spread/hint/numa")
    a.add_argument("args", nargs="+", metavar="ARG", help="CPUS (a list such as 0-3,8), or spread CPUS, hint, numa")
    for name in ("rps", "xps"):
        a = what.add_parser(name, help=f"IFACE QUEUE|all CPUS ({name}_cpus)")
        a.add_argument("iface", metavar="IFACE", help="the interface")
        a.add_argument("queue", metavar="QUEUE", help=f"the {'rx' if name == 'rps' else 'tx'} queue number, or all")
        a.add_argument("cpus", metavar="CPUS", help="a CPU list (0-3,8) or a hex mask; 0 or none turns it off")
    a = what.add_parser("rfs", help="IFACE ENTRIES [FLOW_CNT]")
    a.add_argument("iface", metavar="IFACE", help="the interface")
    a.add_argument("entries", metavar="ENTRIES", help="net.core.rps_sock_flow_entries (0 turns RFS off)")
    a.add_argument("flow_cnt", nargs="?", metavar="FLOW_CNT",
                   help="rps_flow_cnt of each rx queue (default ENTRIES / the number of queues)")
    for name in ("coalesce", "rings", "channels", "features"):
        a = what.add_parser(name, help="IFACE KEY=VALUE...")
        a.add_argument("iface", metavar="IFACE", help="the interface")
        a.add_argument("pairs", nargs="+", metavar="KEY=VALUE", help=f"the {name} settings, named as ethtool names them")
    a = what.add_parser("qdisc", help="IFACE KIND [KEY=VALUE...] (mq, tbf: children=KIND; tbf: child.KEY=VALUE)")
    a.add_argument("iface", metavar="IFACE", help="the interface")
    a.add_argument("qkind", metavar="KIND", help="the root qdisc: fq_codel, fq, cake, mq, tbf, pfifo_fast, ...")
    a.add_argument("pairs", nargs="*", metavar="KEY=VALUE", help="the qdisc's parameters, as tc names them")
    for name in ("txqueuelen", "mtu"):
        a = what.add_parser(name, help="IFACE VALUE")
        a.add_argument("iface", metavar="IFACE", help="the interface")
        a.add_argument("value", metavar="VALUE", help=f"the new {name}")
    a = what.add_parser("bql", help="IFACE QUEUE limit_max|limit_min VALUE")
    a.add_argument("iface", metavar="IFACE", help="the interface")
    a.add_argument("queue", metavar="QUEUE", help="the tx queue number, or all")
    a.add_argument("which", metavar="limit_max|limit_min", help="which BQL limit")
    a.add_argument("value", metavar="VALUE", help="bytes")
    a = what.add_parser("sysctl", help="NAME VALUE")
    a.add_argument("name", metavar="NAME", help="the sysctl, e.g. net.core.netdev_budget")
    a.add_argument("value", nargs="+", metavar="VALUE", help="the new value (several words for tcp_rmem's triple)")
    for sp in what.choices.values():
        _late(sp)
    for name, text in (("undo", "undo the last change"), ("redo", "redo the last undone change")):
        u = sub.add_parser(name, help=text)
        _common(u)
        u.add_argument("--force", action="store_true", help="even if someone else changed the value since")
    j = sub.add_parser("journal", help="show the tuning journal and drift")
    j.add_argument("--json", action="store_true", help="print one JSON document")
    for name, text in (("restore", "put every value nettop changed back (after a crash)"),
                       ("revert", "revert every change of this session")):
        r = sub.add_parser(name, help=text)
        _common(r)


def _pairs(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k:
            raise ActionError(f"{clip(p)} is not KEY=VALUE")
        if k in out:
            raise ActionError(f"{bare(k)} is given twice")
        out[k] = v
    return out


def _irq_target(target: str, args: Sequence[str]) -> int | None:
    """The IRQ number `set irq TARGET ...` names, or None when TARGET is an interface."""
    if args and args[0] in IFACE_MODES:
        return None
    if target.isascii() and target.isdigit():
        n = whole(target)
        if n is None or n > IRQ_MAX:
            raise ActionError(f"IRQ {clip(target)} does not exist (see /proc/interrupts)", errno.ENOENT)
        return n
    if looks_numeric(target):
        raise ActionError(f"{clip(target)} is not an IRQ number: IRQs are 0, 1, 2 ... in ASCII digits "
                          "(see /proc/interrupts)", errno.EINVAL)
    return None


IFACE_MODES = ("spread", "hint", "numa")


def build_changes(a: argparse.Namespace) -> list[Change]:
    """The Changes of one parsed `set` command; ActionError for a request that cannot be one."""
    w = a.what
    if w == "irq":
        n = _irq_target(a.target, a.args)
        if n is not None:
            if len(a.args) != 1:
                raise ActionError("use `set irq IRQ CPUS`, e.g. `set irq 57 2-3`")
            return [irq.move_irq(n, a.args[0])]
        need_iface(a.target)
        mode = a.args[0]
        if mode == "spread" and len(a.args) == 2:
            return irq.spread(irq.queue_irqs(a.target), a.args[1])
        if mode == "hint" and len(a.args) == 1:
            return irq.apply_hints(irq.queue_irqs(a.target))
        if mode == "numa" and len(a.args) == 1:
            return irq.numa_local(a.target, irq.queue_irqs(a.target))
        raise ActionError("use `set irq IRQ CPUS`, `set irq IFACE spread CPUS`, `set irq IFACE hint` or `set irq IFACE numa`")
    if w in ("rps", "xps"):
        need_iface(a.iface)
        if a.queue == "all":
            if w == "rps":
                return rps_xps.rps_all(a.iface, a.cpus)
            raise ActionError("xps takes one queue number")
        q = _queue(a.queue)
        cls = rps_xps.RpsCpus if w == "rps" else rps_xps.XpsCpus
        return [Change(cls(a.iface, q), a.cpus)]
    if w == "rfs":
        need_iface(a.iface)
        entries = parse_int("rfs ENTRIES", a.entries, 0, rps_xps.FLOW_MAX)
        flow_cnt = None if a.flow_cnt is None else parse_int("rfs FLOW_CNT", a.flow_cnt, 0, rps_xps.FLOW_MAX)
        return rps_xps.rfs(a.iface, entries, flow_cnt)
    if w in ("coalesce", "rings", "channels", "features"):
        need_iface(a.iface)
        params = _pairs(a.pairs)
        return [Change(ethtool.make(w, a.iface, params), params)]
    if w == "qdisc":
        need_iface(a.iface)
        params = _pairs(a.pairs)
        children = params.pop("children", None)
        kid = {k[6:]: params.pop(k) for k in [k for k in params if k.startswith("child.")]}
        value: dict[str, Any] = {"kind": a.qkind, "params": params}
        if children:
            value["children"] = children
        if kid:
            value["child_params"] = kid
        return [Change(RootQdisc(a.iface), value)]
    if w == "txqueuelen":
        return [Change(TxQueueLen(a.iface), a.value)]
    if w == "mtu":
        return [Change(Mtu(a.iface), a.value)]
    if w == "bql":
        return [Change(BqlLimit(a.iface, _queue(a.queue), a.which), a.value)]
    if w == "sysctl":
        return [Change(Sysctl(a.name), " ".join(a.value))]
    raise ActionError(f"nettop cannot set {clip(w)}")


def _queue(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ActionError(f"queue {clip(text)} is not a queue number (ASCII digits, or `all` for rps)")
    n = whole(text)
    if n is None or n > QUEUE_MAX:
        raise ActionError(f"queue {clip(text)} does not exist (queue numbers go up to {QUEUE_MAX})", errno.ENOENT)
    return n


def _emit(doc: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    if as_json:
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        for line in lines:
            print(line)


def _results(results: list[Result]) -> list[dict[str, Any]]:
    return [{"key": r.key, "text": r.text, "before": r.before, "requested": r.requested, "after": r.after,
             "verified": r.verified, "effective": r.effective, "entry": r.entry} for r in results]


def run(args: argparse.Namespace, tuner: Tuner | None = None) -> int:
    """Run one tuning command; returns the exit status."""
    t = tuner or Tuner()
    as_json = getattr(args, "json", False)
    try:
        if not t.read_only and not getattr(args, "dry_run", False):
            for tr in revert_overdue(t, grace=GUARDIAN_GRACE_S):  # their guardian and nettop are gone
                print(f"nettop: reverted group {tr.group}, on trial until "
                      f"{time.strftime('%H:%M:%S', time.localtime(tr.deadline))} and never confirmed", file=sys.stderr)
        return _run(args, t, as_json)
    except ActionError as exc:
        print(f"nettop: {one_line(str(exc))}", file=sys.stderr)
        return 1 if isinstance(exc, KernelRefused) else 2
    finally:
        if t.journal.problems:  # damaged lines were skipped: said once per command
            print(f"nettop: warning: {problem_line(t.journal.path, t.journal.problems)}", file=sys.stderr)


def one_line(text: str) -> str:
    """Text from the journal or the kernel as one printable line."""
    return "".join(c if c.isprintable() else " " for c in text)


def _run(args: argparse.Namespace, t: Tuner, as_json: bool) -> int:
    if args.command == "set":
        return _run_set(args, t, as_json)
    if args.command == "journal":
        st = t.state()
        drift = t.drift()
        entries = [describe_entry(e) for e in st.entries]
        trials = {g: tr.status() for g, tr in st.trials.items()}
        _emit({"path": t.journal.path, "entries": entries, "undo": st.undo, "redo": st.redo,
               "drift": [d.line() for d in drift], "skipped_lines": st.problems,
               "trials": [{"group": g, "status": s, "why": st.trials[g].why} for g, s in trials.items()]}, as_json,
              [one_line(f"{e['time']} #{e['id']} {e['action']}: {e['text']}"
                        + (f" [{trials[e['group']]}]" if e["group"] in trials else "")
                        + ("" if e["ended"] else " (never completed: nettop died; run `nettop restore`)")
                        + (f" FAILED: {e['error']}" if e["error"] else "")) for e in entries]
              + [one_line(f"drift: {d.line()}") for d in drift]
              + ([] if entries else [f"no changes in {t.journal.path}"]))
        return 0
    if getattr(args, "dry_run", False):
        pv = t.preview(args.command, getattr(args, "force", False))
        _emit({"dry_run": True, "command": args.command, "would_change": [w["text"] for w in pv.writes],
               "writes": pv.writes, "skipped": pv.skipped, "errors": pv.errors, "read_only": t.read_only},
              as_json,
              [one_line(f"would {args.command}: {w['text']}") for w in pv.writes]
              + [one_line(f"would skip: {x}") for x in pv.skipped]
              + [one_line(f"cannot {args.command}: {x}") for x in pv.errors]
              or [f"{args.command}: nothing would change"])
        return 2 if pv.errors else 0
    if args.command in ("undo", "redo"):
        res = t.undo(args.force) if args.command == "undo" else t.redo(args.force)
    else:
        res = t.restore() if args.command == "restore" else t.revert_all()
    gone = [f"skipped: {x}" for x in t.skipped]
    _emit({"command": args.command, "results": _results(res), "skipped": t.skipped}, as_json,
          [one_line(r.line()) for r in res] + [one_line(g) for g in gone] or [f"{args.command}: nothing to put back"])
    return 0


def _run_set(args: argparse.Namespace, t: Tuner, as_json: bool) -> int:
    """The parsed line through the one workflow (`nettop.actions.workflow`), then printed."""
    from nettop.actions.workflow import run_changes

    guard = None
    if not args.dry_run:
        install_exit_revert()  # a hang-up while a trial is made or counts down reverts it
        guard = cli_guard(getattr(args, "confirm", None))
    out = run_changes(t, build_changes(args), confirmed=args.yes, ban=args.ban, dry_run=args.dry_run, guard=guard)
    if out.error is not None:
        raise (KernelRefused if out.refused else ActionError)(out.error)
    warn = list(out.warnings)
    if out.dry_run:
        _emit({"dry_run": True, "changes": [{"key": p.setting.key, "text": p.text, "before": p.before,
                                              "value": p.value, "confirm": p.confirm} for p in out.plans],
               "warnings": warn, "read_only": t.read_only}, as_json,
              [f"would set {p.text}" + (f" (needs --yes: {p.confirm})" if p.confirm else "") for p in out.plans]
              + [f"warning: {w}" for w in warn])
        return 0
    if out.pending:
        raise ActionError("needs confirmation: " + "; ".join(out.confirm) + "; add --yes to go ahead")
    results = list(out.results)
    if out.trial is not None:
        if not keep_or_revert(out.trial):
            _emit({"results": _results(results), "warnings": warn, "trial": out.trial.outcome,
                   "trial_message": out.trial.message}, as_json, [])
            return 3
    _emit({"results": _results(results), "warnings": warn, "irqbalance_ban": out.banned,
           "trial": out.trial.outcome if out.trial is not None else None}, as_json,
          [r.line() for r in results] + [f"warning: {w}" for w in warn])
    return 0
