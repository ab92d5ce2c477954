"""Problems a collector met, as values a person can act on.

A collector never raises for a missing or unreadable kernel file: it returns what it
could read plus a `Problem`, so the rest of nettop keeps going and the UI or the JSON
can say in one line what is missing and why.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing nettop could not read, and what to do about it."""

    source: str  # what was being read: a path, "netlink RTM_GETLINK", "ethtool eth0"
    message: str  # one line, names the thing and the fix

    def __str__(self) -> str:
        return self.message


def _hint(err: int | None) -> str:
    if err in (errno.EACCES, errno.EPERM):
        return "permission denied; run nettop as root to see it"
    if err == errno.ENOENT:
        return "not present on this kernel or device"
    if err == errno.EOPNOTSUPP:
        return "not supported by this kernel or driver"
    if err == errno.ENODEV:
        return "the device is gone"
    return ""


def from_oserror(source: str, exc: OSError) -> Problem:
    """Turn an OSError into a one-line Problem naming `source` and the fix."""
    reason = exc.strerror or exc.__class__.__name__
    hint = _hint(exc.errno)
    text = f"cannot read {source}: {reason}"
    if hint and hint not in reason.lower():
        text += f" ({hint})"
    return Problem(source, text)


def malformed(source: str, detail: str) -> Problem:
    """A file was read but a line in it could not be understood."""
    return Problem(source, f"skipped a malformed line in {source}: {detail}")
