"""`nettop persist` and `nettop apply`: arguments and one-line errors."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from nettop.fleet.formats import DEFAULT_INSTALL_DIR, FORMATS


def add_subcommands(sub: Any) -> None:
    p = sub.add_parser("persist", help="write the journal's current changes as boot-time artifacts (docs/fleet.md)")
    p.add_argument("--format", required=True, choices=FORMATS, dest="persist_format",
                   help="the boot-time mechanism to write for (docs/fleet.md's table)")
    p.add_argument("-o", "--output", default="nettop-persist", metavar="DIR", dest="persist_output",
                   help="directory to write into (default ./nettop-persist)")
    p.add_argument("--install-dir", default=DEFAULT_INSTALL_DIR, metavar="DIR",
                   help=f"where the unit, playbook and tuned profile expect plan.json (default {DEFAULT_INSTALL_DIR})")
    p.add_argument("--nettop", default=None, metavar="PATH", help="nettop's path on the target hosts (default: this one's)")
    a = sub.add_parser("apply", help="apply a plan from `nettop persist`, checked against this host first")
    a.add_argument("file", metavar="FILE", help="plan.json, or - for stdin")
    a.add_argument("--dry-run", action="store_true", dest="apply_dry_run", help="show what differs, change nothing")
    a.add_argument("-y", "--yes", action="store_true", dest="apply_yes",
                   help="confirm disruptive changes (qdisc, rings, MTU) without asking")
    a.add_argument("--confirm", type=float, default=None, metavar="SECONDS", dest="apply_confirm",
                   help="apply on trial: revert after SECONDS unless `y` is typed (0: never; default: 30 "
                        "for a change on this SSH session's own path made from a terminal)")


def _nettop_path() -> str:
    here = shutil.which("nettop") or sys.argv[0]
    return os.path.abspath(here)


def run(args: argparse.Namespace) -> int:
    from nettop.actions import ActionError, Tuner
    from nettop.actions.cli_set import one_line
    from nettop.fleet.plan import PlanError

    tuner = Tuner()
    try:
        if args.command == "persist":
            from nettop.fleet.formats import write
            from nettop.fleet.plan import from_journal

            plan = from_journal(tuner)
            if not plan.items:
                print(f"nettop persist: no change in {tuner.journal.path} differs from what nettop found; "
                      "nothing to persist", file=sys.stderr)
                return 1
            paths = write(plan, args.persist_format, args.persist_output, args.nettop or _nettop_path(),
                          args.install_dir)
            for it in plan.items:
                print(f"persisted {one_line(it.text)}")
            for p in paths:
                print(f"wrote {p}")
            return 0
        from nettop.fleet.apply import apply

        code, lines = apply(args.file, tuner, args.apply_dry_run, args.apply_yes, args.apply_confirm)
        for line in lines:
            print(one_line(line))
        return code
    except (PlanError, ActionError) as exc:
        print(f"nettop {args.command}: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"nettop {args.command}: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
