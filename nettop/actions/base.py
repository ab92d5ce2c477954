"""What every tuning change is made of: a Setting, a requested value, and errors people can act on.

A `Setting` names one kernel value nettop may change (one IRQ's affinity, one queue's
rps_cpus, the root qdisc of one interface) and knows how to read it, check a requested
value, write it and explain a kernel refusal in one line. Settings are plain frozen
dataclasses registered by `kind`, so the journal stores `{"kind", "params"}` and a later
process (`nettop restore` after a kill -9) rebuilds the same Setting and writes the
original value back. Values are JSON values (text as the kernel prints it, numbers, or
small dicts), so "did the kernel take it" is a comparison of what `read()` returns.

The same objects serve the CLI and the TUI: `Tuner.plan()` validates and describes,
`Tuner.apply()` writes, reads back and journals, all callable from a worker thread.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from nettop.actions.typed import clip, ifname_problem, whole
from nettop.kernel.sysroot import LIVE, SysRoot

Value = Any  # a JSON value: str, int, bool, None, or a dict/list of those

REGISTRY: dict[str, type[Setting]] = {}


class ActionError(Exception):
    """A change that cannot be made, as one line naming the thing and what to do."""

    def __init__(self, message: str, err: int | None = None) -> None:
        super().__init__(message)
        self.errno = err
        # the journal group a failed Tuner.apply() had begun (and rolled back), so a trial
        # can be closed; None when it failed before writing anything
        self.group: int | None = None

    def __str__(self) -> str:
        return str(self.args[0])


def register(cls: type[Setting]) -> type[Setting]:
    """Class decorator: make a Setting rebuildable from its journal record."""
    REGISTRY[cls.kind] = cls
    return cls


class Setting(ABC):
    """One kernel value nettop may change. Subclasses are frozen dataclasses."""

    __slots__ = ()
    # declared, not set: @dataclass sets it on each subclass. It tells the type checker
    # what the docstring says, so dataclasses.asdict/fields take a Setting as it is
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    kind: ClassVar[str]
    # Where the setting's kernel files are: every path is built from this root, never
    # spelled out as "/sys/..." or "/proc/...". A change is made on the running kernel.
    root: ClassVar[SysRoot] = LIVE
    value_types: ClassVar[tuple[type, ...]] = (object,)  # JSON types `read` returns (the journal checks them)

    @property
    @abstractmethod
    def key(self) -> str:
        """Identity of the value across processes: "rps_cpus eth0 rx-0"."""

    @abstractmethod
    def read(self) -> Value:
        """The current value, in the form `normalize` returns; raises OSError."""

    @abstractmethod
    def normalize(self, value: Value) -> Value:
        """The value to write for a request (CPU list → mask, "1500" → 1500); raises ActionError."""

    @abstractmethod
    def write(self, value: Value) -> None:
        """Write a normalized value; raises OSError (or ActionError with the kernel's text)."""

    def matches(self, requested: Value, after: Value) -> bool:
        """Whether the read-back value is what was asked for (some settings round)."""
        return requested == after

    def unchanged(self, left: Value, now: Value) -> bool:
        """Whether `now` is still what nettop left (the journal's read-back). Undo and the
        drift check ask this; a setting whose read-back grows fields in a newer nettop
        compares only the fields the journal holds, so an upgrade is not "someone else"."""
        return now == left

    def confirm_reason(self, before: Value, value: Value) -> str | None:
        """Why this change needs the operator's confirmation (link reset, dropped packets)."""
        return None

    def effective(self) -> str | None:
        """Extra read-back worth showing next to the value ("effective 1" for IRQs)."""
        return None

    def explain(self, exc: OSError) -> str:
        """One line for a kernel refusal of a write."""
        return explain_oserror(self.key, exc)

    def show(self, value: Value) -> str:
        """A value as shown to a person."""
        if isinstance(value, dict):
            return " ".join(f"{k}={_show_scalar(v)}" for k, v in value.items()) or "{}"
        return _show_scalar(value)

    def validate(self) -> None:
        """Refuse parameters that cannot name this kind of value (an interface name that is
        a path, an IRQ below 0); a journal record is rebuilt only when this passes."""

    def to_record(self) -> dict[str, Any]:
        return {"kind": self.kind, "params": dataclasses.asdict(self)}


def _show_scalar(v: Value) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if v == "":
        return '""'
    return str(v)


def from_record(record: Any) -> Setting:
    """The Setting a journal record names; ActionError for an unknown kind or parameters
    that do not fit it (wrong names, wrong types, or values `validate` refuses)."""
    kind = record.get("kind") if isinstance(record, dict) else None
    cls = REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ActionError(f"journal names an unknown setting kind {clip(kind)}: "
                          "was it written by a newer nettop?")
    params = record.get("params")
    if not isinstance(params, dict):
        raise ActionError(f"journal record of a {kind} setting has no parameters")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if set(params) != set(fields):
        raise ActionError(f"journal record of a {kind} setting has parameters {sorted(map(clip, params))}, "
                          f"not {sorted(fields)}")
    hints = _hints(cls)
    for name, v in params.items():
        if not _fits(hints.get(name), v):
            raise ActionError(f"journal record of a {kind} setting: {name}={clip(v)} is not a "
                              f"{getattr(hints.get(name), '__name__', hints.get(name))}")
    setting = cls(**params)
    setting.validate()
    return setting


@functools.cache
def _hints(cls: type[Setting]) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fits(hint: Any, v: Any) -> bool:
    if hint is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if hint is str:
        return isinstance(v, str)
    if typing.get_origin(hint) is tuple:
        return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
    return False


@dataclass(frozen=True, slots=True)
class Change:
    """A request: set `setting` to `value` (as typed, before normalization)."""

    setting: Setting
    value: Value


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated change: what is there now, what will be written, and whether to ask first."""

    setting: Setting
    before: Value
    value: Value
    confirm: str | None  # reason to ask before applying, None when harmless
    text: str  # "rps_cpus eth0 rx-0: 0 → 3"


@dataclass(frozen=True, slots=True)
class Result:
    """What the kernel took after a write, for the UI to show."""

    entry: int  # journal entry id
    key: str
    text: str
    before: Value
    requested: Value
    after: Value
    verified: bool
    effective: str | None = None
    error: str | None = None

    def line(self) -> str:
        if self.error:
            return self.error
        s = self.text
        if not self.verified:
            s += f" (requested {_show_scalar(self.requested)}, kernel took {_show_scalar(self.after)})"
        elif self.after != self.requested and not isinstance(self.after, dict):
            s += f" (kernel took {_show_scalar(self.after)})"
        if self.effective:
            s += f" ({self.effective})"
        return s


def explain_oserror(thing: str, exc: OSError) -> str:
    """Generic one-line form of a refused write, with the usual fixes."""
    err = exc.errno
    if err in (errno.EACCES, errno.EPERM):
        return f"{thing}: permission denied ({_name(err)}); run nettop as root"
    if err == errno.ENODEV or err == errno.ENOENT:
        return f"{thing}: the device or file is gone ({_name(err)}); check `ip link` for the interface"
    if err == errno.EOPNOTSUPP:
        return f"{thing}: not supported by this driver or kernel (EOPNOTSUPP)"
    return f"{thing}: the kernel refused the value ({_name(err)}: {os.strerror(err or 0)})"


def _name(err: int | None) -> str:
    return errno.errorcode.get(err or 0, str(err))


def write_file(path: str, text: str) -> None:
    """One write() of `text` to a sysfs/procfs file, so the kernel's errno reaches us."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def read_file(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


def iface_exists(ifname: str, root: SysRoot = LIVE) -> bool:
    return ifname_problem(ifname) is None and os.path.isdir(root.join(f"sys/class/net/{ifname}"))


def need_iface(ifname: str, root: SysRoot = LIVE) -> None:
    """ActionError unless `ifname` is a valid interface name that exists: checked before
    the name becomes part of any /sys path."""
    valid_ifname(ifname)
    if not iface_exists(ifname, root):
        raise ActionError(f"no interface named {ifname!r} (see `ip link` for the names)", errno.ENODEV)


QUEUE_MAX = 65535  # queue indexes are u16 in the kernel (netdev_queue's index is below num_tx_queues)


def valid_ifname(ifname: object) -> None:
    """ActionError unless `ifname` could be an interface name (no existence check: a
    journal may name one that is gone, and restore reports that as skipped)."""
    why = ifname_problem(ifname)
    if why is not None:
        raise ActionError(f"{clip(ifname)} is not an interface name: {why} (see `ip link` for the names)",
                          errno.EINVAL)


def valid_queue(queue: object) -> None:
    if not (isinstance(queue, int) and not isinstance(queue, bool) and 0 <= queue <= QUEUE_MAX):
        raise ActionError(f"{clip(queue)} is not a queue number (0 to {QUEUE_MAX})", errno.EINVAL)


def parse_int(name: str, value: Value, lo: int, hi: int) -> int:
    """An integer request in [lo, hi], typed as ASCII decimal or 0x hex; ActionError
    naming the range otherwise ("²", "1_000", " +1" and 400-digit numbers included)."""
    if isinstance(value, int) and not isinstance(value, bool):
        n: int | None = value
    else:
        n = whole(value) if isinstance(value, str) else None
    if n is None:
        raise ActionError(f"{name}: {clip(value)} is not a whole number (ASCII digits, or 0x hex)")
    if not lo <= n <= hi:
        shown = str(n) if abs(n) < 2**64 else ("-" if n < 0 else "") + "a number beyond 2**64"
        raise ActionError(f"{name}: {shown} is out of range; use {lo} to {hi}", errno.ERANGE)
    return n
