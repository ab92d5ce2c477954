"""Coalescing, ring sizes, channel counts and offloads, through ethtool netlink.

Written against `nettop.kernel.ethtool_nl.EthtoolNetlink` (imported when used), whose errors
carry the kernel's own extack text ("netlink error: ...: unsupported parameter"): that
text is what the operator sees. The value is a dict of ethtool CLI names ("rx-usecs",
"adaptive-rx", "combined", "gro"); only the keys asked for are read back and compared,
and only keys the driver reports can be set, so an unsupported parameter is refused
before anything is written. Rings and channels may reset the link: they ask first.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any

from nettop.actions.base import ActionError, Setting, Value, need_iface, parse_int, register, valid_ifname
from nettop.actions.typed import bare, clip

def _nl() -> Any:
    try:
        from nettop.kernel.ethtool_nl import EthtoolNetlink
    except ImportError:
        raise ActionError("ethtool netlink support (nettop.kernel.ethtool_nl) is not available in this "
                          "nettop; use `ethtool` for this change", errno.EOPNOTSUPP) from None
    return EthtoolNetlink()


def _parse(key: str, v: Any, boolean: bool) -> int | bool:
    """A typed value: on/off where the driver reports a flag (adaptive-rx, gro), else a
    whole number (rx-usecs, rx ring size, combined channels)."""
    if isinstance(v, bool) or boolean:
        if isinstance(v, bool):
            return v
        t = str(v).strip().lower()
        if t in ("on", "1", "true", "yes"):
            return True
        if t in ("off", "0", "false", "no"):
            return False
        raise ActionError(f"{key}={clip(v)}: give on or off")
    return parse_int(key, v if isinstance(v, int) else str(v), 0, 2**32 - 1)


@dataclass(frozen=True, slots=True)
class _EthtoolSetting(Setting):
    value_types = (dict,)
    ifname: str
    keys: tuple[str, ...]  # which parameters this setting covers (the ones requested)
    what = ""  # "coalesce", "rings", "channels", "features"

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))  # a journal record holds a list

    @property
    def key(self) -> str:
        return f"{self.what} {self.ifname} {','.join(self.keys)}"

    def validate(self) -> None:
        valid_ifname(self.ifname)
        if not self.keys or len(self.keys) > 64 or not all(
                isinstance(k, str) and 0 < len(k) <= 64 and k.isascii() and k.isprintable() for k in self.keys):
            raise ActionError(f"{self.what} {self.ifname}: {clip(self.keys)} are not ethtool parameter names")

    def _get(self) -> dict[str, Any]:
        with _nl() as nl:
            return dict(getattr(nl, f"get_{self.what}")(self.ifname))

    def read(self) -> Value:
        cur = self._get()
        return {k: cur.get(k) for k in self.keys}

    def normalize(self, value: Value) -> Value:
        need_iface(self.ifname)
        if not isinstance(value, dict) or not value:
            raise ActionError(f"{self.what} {self.ifname}: give KEY=VALUE pairs")
        try:
            cur = self._get()
        except OSError as exc:
            raise ActionError(self.explain(exc), exc.errno) from None
        settable = {k for k in cur if not k.endswith("-max")}  # maxima are read-only
        unsupported = [k for k in value if k not in settable]
        if unsupported:
            offered = ", ".join(sorted(settable)) or "none"
            raise ActionError(f"{self.ifname}'s driver does not offer {self.what} "
                              f"{', '.join(map(bare, unsupported))} (it offers: {offered})", errno.EOPNOTSUPP)
        out = {k: _parse(k, v, isinstance(cur[k], bool)) for k, v in value.items()}
        self._check_max(out, cur)
        return out

    def _check_max(self, value: dict[str, Any], cur: dict[str, Any]) -> None:
        for k, v in value.items():
            mx = cur.get(f"{k}-max", cur.get(f"max-{k}"))
            if isinstance(mx, int) and not isinstance(v, bool) and v > mx:
                raise ActionError(f"{self.what} {self.ifname} {k}={v}: the device maximum is {mx}", errno.ERANGE)

    def write(self, value: Value) -> None:
        with _nl() as nl:
            getattr(nl, f"set_{self.what}")(self.ifname, value)

    def explain(self, exc: OSError) -> str:
        extack = getattr(exc, "extack", None)
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        if extack:
            return f"{self.what} {self.ifname}: {extack} ({name})"
        return super(_EthtoolSetting, self).explain(exc)


@register
@dataclass(frozen=True, slots=True)
class Coalesce(_EthtoolSetting):
    kind = "coalesce"
    what = "coalesce"


@register
@dataclass(frozen=True, slots=True)
class Rings(_EthtoolSetting):
    kind = "rings"
    what = "rings"

    def confirm_reason(self, before: Value, value: Value) -> str | None:
        return "changing ring sizes resets the NIC on most drivers (the link drops briefly)"


@register
@dataclass(frozen=True, slots=True)
class Channels(_EthtoolSetting):
    kind = "channels"
    what = "channels"

    def confirm_reason(self, before: Value, value: Value) -> str | None:
        return "changing channel counts recreates the queues and their IRQs (the link drops briefly)"


@register
@dataclass(frozen=True, slots=True)
class Features(_EthtoolSetting):
    kind = "features"
    what = "features"


def make(what: str, ifname: str, params: dict[str, str]) -> Setting:
    cls = {"coalesce": Coalesce, "rings": Rings, "channels": Channels, "features": Features}[what]
    return cls(ifname, tuple(params))


def offered(what: str, ifname: str) -> dict[str, Any]:
    """What the driver reports for coalesce/rings/channels/features, with current values:
    the only parameters a UI should offer (maxima come as "<key>-max" when the API gives them)."""
    need_iface(ifname)
    try:
        with _nl() as nl:
            return dict(getattr(nl, f"get_{what}")(ifname))
    except OSError as exc:
        raise ActionError(make(what, ifname, {}).explain(exc), exc.errno) from None
