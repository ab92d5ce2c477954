"""nettop's systemd services: the unit files shipped with the package, and
`nettop install-service record|serve`, which fills in this nettop's path and writes one.

The units (nettop-record.service, nettop-serve.service beside this file) are templates:
@NETTOP@ is the absolute path of the nettop executable (systemd wants one), @ARGS@ the
options of `nettop serve`. Their hardening keeps what nettop reads readable; the
comments in the files say why each option is or is not there.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

UNITS = {"record": "nettop-record.service", "serve": "nettop-serve.service"}
SERVE_DEFAULT_ARGS = ("--listen", "127.0.0.1:9741")
UNIT_DIR = "/etc/systemd/system"
HIDDEN_BY_PROTECT_HOME = ("/home/", "/root/", "/run/user/")


class UnitError(Exception):
    """One line: a path systemd cannot use, a directory that cannot be written."""


@dataclass(frozen=True, slots=True)
class Unit:
    name: str
    text: str


def template(which: str) -> str:
    return resources.files(__name__).joinpath(UNITS[which]).read_text()


def quote(arg: str) -> str:
    """One ExecStart word: systemd's specifiers (%) and variables ($) escaped, quoted if it has a space."""
    if any(c in arg for c in "\n\r\0"):
        raise UnitError(f"{arg!r}: a line break cannot be part of an ExecStart argument")
    word = arg.replace("%", "%%").replace("$", "$$")
    if word and not any(c in word for c in " \t\"'\\;"):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def nettop_path() -> str:
    """This installation's nettop executable (a venv's too), absolute."""
    beside = Path(sys.executable).with_name("nettop")
    found = str(beside) if beside.is_file() else shutil.which("nettop")
    if not found:
        raise UnitError("cannot find the nettop executable; give its absolute path with --nettop")
    return os.path.abspath(found)


def render(which: str, nettop: str, args: Sequence[str] = ()) -> Unit:
    """The unit text for `which` ('record' or 'serve') with nettop at `nettop`."""
    if not os.path.isabs(nettop):
        raise UnitError(f"--nettop {nettop}: systemd needs an absolute path")
    text = template(which).replace("@NETTOP@", quote(nettop))
    if which == "serve":
        text = text.replace("@ARGS@", " ".join(quote(a) for a in (args or SERVE_DEFAULT_ARGS)))
    elif args:
        raise UnitError("only `install-service serve` takes extra options (record's are in the unit: docs/fleet.md)")
    return Unit(UNITS[which], text)


def install(unit: Unit, directory: str = UNIT_DIR) -> Path:
    target = Path(directory, unit.name)
    try:
        tmp = target.with_name(f".{unit.name}.tmp")
        tmp.write_text(unit.text)
        os.chmod(tmp, 0o644)
        tmp.replace(target)
    except OSError as exc:
        raise UnitError(f"cannot write {target}: {exc.strerror} (root writes {UNIT_DIR}; --dry-run prints the unit)") from None
    return target


def add_subcommands(sub: Any) -> None:
    s = sub.add_parser("install-service", help="write nettop-record.service or nettop-serve.service for systemd",
                       description="install-service's own options go before the service's name; after `serve`, "
                                   "the options of `nettop serve` the unit runs it with.")
    s.add_argument("--dry-run", action="store_true", dest="unit_dry_run", help="print the unit, write nothing")
    s.add_argument("--unit-dir", default=UNIT_DIR, metavar="DIR", help=f"where to write it (default {UNIT_DIR})")
    s.add_argument("--nettop", default=None, metavar="PATH", dest="unit_nettop",
                   help="nettop's absolute path in ExecStart (default: this nettop's)")
    s.add_argument("service", choices=tuple(UNITS), help="record: the flight recorder; serve: the Prometheus exporter")
    s.add_argument("service_args", nargs=argparse.REMAINDER, metavar="SERVE-OPTIONS",
                   help=f"serve: the options in the unit (default {' '.join(SERVE_DEFAULT_ARGS)})")


def _check_serve_args(parser: argparse.ArgumentParser, extra: list[str]) -> None:
    """The options as `nettop serve` will parse them, so a typo fails now, not at boot."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(["serve", *extra])
    except SystemExit:
        why = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "not valid"
        why = why.split(": ", 1)[-1].split(" (see ", 1)[0]
        raise UnitError(f"serve options {' '.join(extra)!r}: {why} (install-service's own options go before "
                        "the service's name)") from None


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    extra = list(args.service_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    try:
        nettop = args.unit_nettop or nettop_path()
        if args.service == "serve" and extra:
            _check_serve_args(parser, extra)
        unit = render(args.service, nettop, extra)
        if args.unit_dry_run:
            sys.stdout.write(unit.text)
            return 0
        target = install(unit, args.unit_dir)
    except UnitError as exc:
        print(f"nettop install-service: {exc}", file=sys.stderr)
        return 2
    if nettop.startswith(HIDDEN_BY_PROTECT_HOME):
        print(f"nettop install-service: {nettop} is under a home directory, which ProtectHome=yes hides from the "
              "service; install nettop elsewhere (e.g. /opt) or give --nettop", file=sys.stderr)
    print(f"wrote {target}; start it with: systemctl daemon-reload && systemctl enable --now {unit.name}")
    return 0
