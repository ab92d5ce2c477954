"""`nettop capture OUT.tar.gz [--twice N] [--addresses]`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from nettop.capture.archive import ARCHIVE_SUFFIXES, write_capture


def add_subcommands(sub: Any) -> None:
    c = sub.add_parser("capture", help="write the kernel files nettop reads to OUT.tar.gz, for `--root` "
                                       "on another machine (docs/captures.md)")
    c.add_argument("out", metavar="OUT.tar.gz", help="archive to write (.tar.gz or .tar.xz)")
    c.add_argument("--twice", type=_seconds, default=None, metavar="N",
                   help="take a second capture N seconds after the first (rates between them)")
    c.add_argument("--addresses", action="store_true",
                   help="also keep MAC addresses (sysfs address files, `ip link`); left out by default")


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--twice {text!r} is not a number of seconds") from None
    if not 0.1 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"--twice {text!r}: give 0.1 to 3600 seconds")
    return v


def run(args: argparse.Namespace) -> int:
    out: str = args.out
    if not out.endswith(ARCHIVE_SUFFIXES):
        print(f"nettop: {out}: name the archive .tar.gz or .tar.xz", file=sys.stderr)
        return 2
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        print(f"nettop: cannot write {out}: {parent} is not a directory", file=sys.stderr)
        return 2
    try:
        meta = write_capture(out, args.twice, args.addresses,
                             log=lambda s: print(f"nettop: {s}", file=sys.stderr))
    except OSError as exc:
        print(f"nettop: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    n = len(meta["captures"])
    print(f"{out}: {n} capture(s) of {meta['host']} ({meta['kernel']}), "
          f"{os.path.getsize(out)} bytes; open with `nettop --root {out}`")
    return 0
