"""Where kernel files are read from: the live `/` or a captured /proc + /sys tree.

Every reader takes a `SysRoot`, so tests and replays of captured hosts read the same
code path as the live kernel. With a root other than `/`, interface counters come from
sysfs instead of netlink, and ioctl/netlink sources are not used (`live` is False).
A sosreport's `sysctl -a` output stands in for the proc/sys files it did not copy.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SysRoot:
    """A directory holding `proc/` and `sys/` as the kernel would present them."""

    path: str = "/"

    @property
    def live(self) -> bool:
        """True when this is the running kernel (netlink and ioctl may be used)."""
        path = self.path
        # a relative path resolves against the working directory, which may change
        return _is_root(path) if path.startswith("/") else os.path.realpath(path) == "/"

    def join(self, rel: str) -> str:
        """Absolute path of `rel` (given as "/proc/..." or "proc/...") under the root."""
        base = self.path
        return (base if base.endswith("/") else base + "/") + rel.lstrip("/")

    def read_text(self, rel: str) -> str:
        """Read a whole kernel file as text; raises OSError as the kernel reports it.

        Unbuffered `readall` sizes its buffer once for regular files (captured trees)
        and grows it geometrically for procfs; kernel text is ASCII, so latin-1 decoding
        (a plain widening copy) is exact and several times faster than UTF-8.
        """
        try:
            with open(self.join(rel), "rb", buffering=0) as f:
                return f.readall().decode("latin-1")
        except FileNotFoundError:
            value = self._sos_sysctl(rel)
            if value is None:
                raise
            return value + "\n"

    def read_line(self, rel: str) -> str:
        """Read a one-value sysfs file, stripped of its trailing newline."""
        try:
            fd = os.open(self.join(rel), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            value = self._sos_sysctl(rel)
            if value is None:
                raise
            return value
        try:
            return os.read(fd, 65536).decode("latin-1").strip()
        finally:
            os.close(fd)

    def _sos_sysctl(self, rel: str) -> str | None:
        """A proc/sys file a sosreport did not copy, from its `sysctl -a` output
        (nettop/kernel/sos.py); None for every other root and path."""
        if self.path == "/" or not rel.lstrip("/").startswith("proc/sys/"):
            return None
        from nettop.kernel import sos

        return sos.sysctl_for(self.path, rel) if sos.is_sos(self.path) else None

    def listdir(self, rel: str) -> list[str]:
        """Directory entries under the root; raises OSError."""
        return os.listdir(self.join(rel))

    def readlink(self, rel: str) -> str:
        """Target of a symlink under the root (e.g. a device's driver); raises OSError."""
        return os.readlink(self.join(rel))

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.join(rel))


@functools.lru_cache(maxsize=64)
def _is_root(path: str) -> bool:
    """Whether the absolute `path` resolves to `/`, resolved once per path: a tick asks
    ~10 times, and each realpath is an lstat per component of a captured tree's path."""
    return os.path.realpath(path) == "/"


LIVE = SysRoot("/")
