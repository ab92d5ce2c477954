"""Argument types the commands share: the sampling interval, a captured tree, the ping
interval. Here, in a headless package, so `nettop doctor`/`serve` and the main parser
give the same one-line errors without the doctor importing the CLI that opens the TUI."""

from __future__ import annotations

import argparse
import os

from nettop.kernel.sysroot import SysRoot


def interval(text: str) -> float:
    from nettop.model.sampler import clamp_interval

    try:
        return clamp_interval(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if "range" in str(exc) else
                                         f"interval {text!r} is not a number of seconds") from None


def root(text: str) -> SysRoot:
    from nettop.capture.archive import CaptureFileError, capture_roots, extract, is_archive

    if is_archive(text):  # `nettop capture`'s archive, or a tarball of /proc and /sys
        try:
            trees = capture_roots(extract(text))
        except CaptureFileError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not trees:
            raise argparse.ArgumentTypeError(f"archive {text!r} holds no tree with a proc/ directory")
        return SysRoot(str(trees[0]))  # a second capture in it is found from the first
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"root {text!r} is not a directory (give a captured tree holding proc/ and sys/)")
    if not os.path.isdir(os.path.join(text, "proc")):
        raise argparse.ArgumentTypeError(f"root {text!r} has no proc/ directory (give a captured tree holding proc/ and sys/)")
    return SysRoot(text)


def latency_target(text: str) -> float:
    """The RTT (ms) a host must keep: the doctor's coalescing and power-management rules
    apply only when one is given."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"latency target {text!r} is not a number of ms (give e.g. 1)") from None
    if not 0 < v <= 60_000:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"latency target {v:g} ms is out of range: use more than 0 up to 60000")
    return v


def ping_interval(text: str) -> float:
    from nettop.ping import MAX_INTERVAL_S, MIN_INTERVAL_S

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"ping interval {text!r} is not a number of seconds") from None
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"ping interval {value:g} s is out of range: use {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} s")
    return value
