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
    # the tree's changing files are rewritten in place (same inode, one write), as the
    # kernel regenerates its own: a reader may hold them open and read them again from
    # offset 0, as on the live kernel (benchmarks/record_cost.py's advancing tree); a
    # capture or a tree advanced by rename is opened afresh
    in_place: bool = False

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

        Read whole with `read_whole`; kernel text is ASCII, so latin-1 decoding (a plain
        widening copy) is exact and several times faster than UTF-8.
        """
        try:
            return read_whole(self.join(rel)).decode("latin-1")
        except FileNotFoundError:
            value = self._sos_sysctl(rel)
            if value is None:
                raise
            return value + "\n"

    def read_bytes(self, rel: str) -> bytes:
        """A whole kernel file's bytes (`read_whole`); raises OSError as the kernel reports
        it. For a per-CPU file whose parser's last answer is kept (collectors/unchanged.py):
        an unchanged file is known as such without decoding it."""
        return read_whole(self.join(rel))

    def read_head(self, rel: str, stop: str) -> str:
        """`read_text(rel)` up to the first `stop` (the whole text when there is none):
        only the part a parser reads is decoded (/proc/stat's cpuN lines, not the `intr`
        line after them, which has a number per IRQ: ~150 kB at 16,384 IRQs)."""
        try:
            data = read_whole(self.join(rel))
        except FileNotFoundError:
            value = self.read_text(rel)  # a sosreport's sysctl, or the error
            end = value.find(stop)
            return value if end < 0 else value[:end]
        end = data.find(stop.encode("latin-1"))
        return (data if end < 0 else data[:end]).decode("latin-1")

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

    def exists(self, rel: str, follow_symlinks: bool = True) -> bool:
        """Whether `rel` is there (following symlinks, unless told not to: a link itself).
        One access(2), which answers with a value: os.path.exists's stat raises, and
        catches, an exception for every absent path (a tree's interface asked each tick
        whether it is a bond, a bridge, enslaved)."""
        try:
            return os.access(self.join(rel), os.F_OK, follow_symlinks=follow_symlinks)
        except ValueError:  # a NUL in the path: nothing is there
            return False


@functools.lru_cache(maxsize=64)
def _is_root(path: str) -> bool:
    """Whether the absolute `path` resolves to `/`, resolved once per path: a tick asks
    ~10 times, and each realpath is an lstat per component of a captured tree's path."""
    return os.path.realpath(path) == "/"


_FILE = os.O_RDONLY | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FIRST = 1 << 16  # the first read of `read_whole`: all of most kernel files


def read_whole(path: str) -> bytes:
    """A whole file's bytes, read until the kernel gives no more: a procfs seq file gives
    what does not fit in one read in later ones, and may stop short of the size asked
    before its end. Open, read, read, close: an unbuffered file object's `readall` adds
    an fstat, a seek and the object (~2 us a file, six files a tick)."""
    fd = os.open(path, _FILE)
    try:
        data = os.read(fd, _FIRST)
        more = os.read(fd, _FIRST) if data else b""
        if not more:
            return data
        parts = [data, more]
        size = _FIRST
        while True:
            size = min(size * 2, 1 << 24)
            more = os.read(fd, size)
            if not more:
                return b"".join(parts)
            parts.append(more)
    finally:
        os.close(fd)


class HoldBudget:
    """Files that HeldDirs sharing this may hold open together (the settings rotation's
    share of the process's descriptors); taken when a file is held, given back when it
    is closed."""

    __slots__ = ("left",)

    def __init__(self, files: int) -> None:
        self.left = files


class HeldDir:
    """A directory under a root held open, its files opened by name relative to it.

    Opening "rx-5/rps_cpus" at a held fd of /sys/class/net/IF/queues walks two path
    components; the full path walks eight, one of them a symlink into /sys/devices/...
    (on this machine's sysfs ~30 % of a settings file's cost: benchmarks/settings_files.py).
    One fd per directory, not per file. The directory may go and come back under the same
    path (an interface removed and re-created, moved between namespaces, a driver reload):
    when a file is not found through the held fd, the path is looked up once (at most once
    per `begin`, a read pass) and, if it names another directory now (device and inode),
    that one is held and the file looked up again there; so a file that is really absent
    costs one stat per pass, not one per file.

    On the live kernel a file read with `hold=True` (the caller's word that it reads this
    file every pass: a setting on screen, read every tick) is held open and read again
    from offset 0, which makes sysfs and procfs show it afresh: one `pread` instead of
    open, read and close. It is closed at the `begin` of a pass after one that did not
    read it with `hold` (or by `release`), and only while its `budget` (shared with the
    other directories of one reader) has room; so what is held is bounded by what is on
    screen and by the budget, never by the rotation, which reads a file once a period and
    holds none. Without a budget nothing is held. A held file whose attribute went (its
    interface, queue or IRQ removed) fails its read (ENODEV, EIO) and is then opened
    afresh by name, which answers as if it had never been held. Trees never hold: a
    replaced or unlinked file would go on giving its old bytes. Not thread-safe; `close`
    when done (also closed when dropped).
    """

    __slots__ = ("path", "_fd", "_id", "_checked", "_error", "_budget", "_held", "_used")

    def __init__(self, root: SysRoot, rel: str, budget: HoldBudget | None = None) -> None:
        self.path = root.join(rel)
        self._fd = -1
        self._id = (0, 0)  # (st_dev, st_ino) of the held directory
        self._checked = False  # the path was looked up in this pass
        self._error: OSError | None = None  # why it could not be opened in this pass
        # kernfs and procfs answer a held file's removal with an error; a tree's file
        # replaced would go on giving its old bytes: only the live kernel holds
        self._budget = budget if root.live else None
        self._held: dict[str, int] = {}  # name -> descriptor held open
        self._used: set[str] = set()  # held names read with `hold` in this pass

    def begin(self) -> None:
        """Start a read pass: a missing file may re-open the directory once again; a held
        file the last pass did not read with `hold` is closed."""
        self._checked = False
        self._error = None
        if self._held:
            if len(self._used) < len(self._held):
                self._let_go([n for n in self._held if n not in self._used])
            self._used = set()

    def read(self, name: str, hold: bool = False) -> bytes:
        """Bytes of the file `name` (relative to the directory; one read of up to 64 KiB,
        what a sysfs/procfs attribute gives); raises OSError as the kernel reports it.
        `hold`: this file is read every pass; keep it open (live kernel only)."""
        held = self._held
        if held:
            fd = held.get(name)
            if fd is not None:
                try:
                    data = os.pread(fd, 65536, 0)
                except OSError:  # gone (or failing now): asked afresh by name below
                    self._let_go([name])
                else:
                    if hold:
                        self._used.add(name)
                    return data
        try:
            fd = os.open(name, _FILE, dir_fd=self._fd if self._fd >= 0 else self._open())
        except FileNotFoundError:
            if self._checked or not self._replaced():
                raise
            fd = os.open(name, _FILE, dir_fd=self._fd)
        keep = False
        try:
            data = os.read(fd, 65536)
            budget = self._budget
            if hold and budget is not None and budget.left > 0:
                budget.left -= 1
                held[name] = fd
                self._used.add(name)
                keep = True
            return data
        finally:
            if not keep:
                os.close(fd)

    @property
    def held(self) -> int:
        """Files held open now (a test's and benchmark's figure)."""
        return len(self._held)

    def release(self) -> None:
        """Close the held files (what was on screen left it); the directory stays open."""
        if self._held:
            self._let_go(list(self._held))

    def _let_go(self, names: list[str]) -> None:
        """Close these held files and give their places back to the budget."""
        for name in names:
            os.close(self._held.pop(name))
            self._used.discard(name)
        self._budget.left += len(names)  # type: ignore[union-attr]

    def exists(self, name: str) -> bool:
        """Whether `name` is there relative to the directory (after a `read` of this pass)."""
        try:
            os.stat(name, dir_fd=self._fd if self._fd >= 0 else self._open())
        except OSError:
            return False
        return True

    def _open(self) -> int:
        if self._error is not None:
            raise self._error
        try:
            fd = os.open(self.path, _DIR)
        except OSError as exc:
            self._checked, self._error = True, exc
            raise
        st = os.fstat(fd)
        self._fd, self._id = fd, (st.st_dev, st.st_ino)
        return fd

    def _replaced(self) -> bool:
        """Whether the path names another directory than the held one now (then held)."""
        self._checked = True
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) == self._id:
            return False
        self.close()
        self._open()
        return True

    def close(self) -> None:
        self.release()
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit `os` may be gone: the fd goes with the process
            pass


LIVE = SysRoot("/")
