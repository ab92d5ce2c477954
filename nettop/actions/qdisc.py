"""Replacing an interface's root qdisc over rtnetlink, with its main parameters.

Kinds: pfifo_fast, pfifo, bfifo, tbf, htb, fq_codel, fq, cake, and mq with one child of
a chosen kind per tx queue. pyroute2 encodes most of them; it has no bfifo or fq
encoder, so those two are registered in its tc plugin table here (bfifo shares pfifo's
`struct tc_fifo_qopt`; fq's TCA_FQ_* attributes are declared below), and mq needs no
options at all. A root qdisc the kernel attached by itself has handle 0; putting such a
default back means deleting nettop's root, which makes the kernel attach its default
again. A replace drops whatever the old qdisc held, so it asks for confirmation.

Units are the kernel's: tbf rate in bytes/s and burst/limit in bytes, fq_codel
target/interval in microseconds, fq maxrate in bytes/s; cake bandwidth in bit/s.
The value is a dict: {"kind": "tbf", "params": {"rate": 1250000, ...}}, plus
"children" for mq and "default": true for a kernel-attached root. Read-back compares
the kind and each parameter that was requested and that the kernel reports back.

tbf takes "children" too: the qdisc that holds what the shaper delays (`tbf ...
children=fq_codel` is fq_codel behind a rate limit, the bufferbloat case). Without it
tbf keeps its own hidden byte FIFO of `limit` bytes. The child's own parameters go in
"child_params" (`child.quantum=300` on the command line, the bufferbloat project's advice
for fq_codel below ~100 Mbit/s), read back and verified like the root's.
"""

from __future__ import annotations

import errno
import os
import re
import types
from fractions import Fraction
from dataclasses import dataclass
from typing import Any

from nettop.actions.base import ActionError, Setting, Value, need_iface, register, valid_ifname
from nettop.actions.typed import bare, clip, whole
from nettop.kernel.sysroot import LIVE, SysRoot

TC_H_ROOT = 0xFFFFFFFF
_RTAB_CELL_MAX = 2048  # the largest size in tbf's rate table: 256 cells of 8 bytes (MTU 1600)
KINDS = ("pfifo_fast", "pfifo", "bfifo", "tbf", "htb", "fq_codel", "fq", "cake", "mq", "noqueue")
# kinds with a child per class that `children=KIND` picks, and the kinds a child may be
PARENTS = ("mq", "tbf")
LEAVES = ("pfifo_fast", "pfifo", "bfifo", "fq_codel", "fq", "cake")
# parameters a user may give, per kind, with how to parse them (all whole numbers)
PARAMS: dict[str, tuple[str, ...]] = {
    "pfifo_fast": (), "pfifo": ("limit",), "bfifo": ("limit",),
    "tbf": ("rate", "burst", "limit"), "htb": ("default",),
    "fq_codel": ("limit", "target", "interval", "flows", "quantum", "ecn"),
    "fq": ("limit", "flow_limit", "quantum", "initial_quantum", "maxrate", "buckets"),
    "cake": ("bandwidth",), "mq": (), "noqueue": (),
}
_FQ_CODEL = {"limit": "fqc_limit", "target": "fqc_target", "interval": "fqc_interval",
             "flows": "fqc_flows", "quantum": "fqc_quantum", "ecn": "fqc_ecn"}
_registered = False


def _register_plugins() -> None:
    """Teach pyroute2's tc encoder bfifo and fq (its plugin table is the extension point)."""
    global _registered
    if _registered:
        return
    from pyroute2.netlink import nla
    from pyroute2.netlink.rtnl.tcmsg import plugins, sched_pfifo

    class fq_options(nla):
        nla_map = (
            ("TCA_FQ_UNSPEC", "none"), ("TCA_FQ_PLIMIT", "uint32"),
            ("TCA_FQ_FLOW_PLIMIT", "uint32"), ("TCA_FQ_QUANTUM", "uint32"),
            ("TCA_FQ_INITIAL_QUANTUM", "uint32"), ("TCA_FQ_RATE_ENABLE", "uint32"),
            ("TCA_FQ_FLOW_DEFAULT_RATE", "uint32"), ("TCA_FQ_FLOW_MAX_RATE", "uint32"),
            ("TCA_FQ_BUCKETS_LOG", "uint32"),
        )

    names = {"limit": "TCA_FQ_PLIMIT", "flow_limit": "TCA_FQ_FLOW_PLIMIT",
             "quantum": "TCA_FQ_QUANTUM", "initial_quantum": "TCA_FQ_INITIAL_QUANTUM",
             "maxrate": "TCA_FQ_FLOW_MAX_RATE", "buckets": "TCA_FQ_BUCKETS_LOG"}

    def fq_parameters(kwarg: dict[str, Any]) -> dict[str, Any]:
        return {"attrs": [[names[k], kwarg[k]] for k in names if k in kwarg]}

    # a plugin module as pyroute2's sched_*.py are, its names filled in through its namespace
    fq = types.ModuleType("nettop_sched_fq")
    vars(fq).update(parent=TC_H_ROOT, options=fq_options, get_parameters=fq_parameters)
    plugins.setdefault("bfifo", sched_pfifo)
    plugins.setdefault("fq", fq)
    _registered = True


# tc's units, so `fq_codel target=5ms` and `tbf rate=1gbit burst=32k` mean what `tc` means
_TIME_KEYS = {("fq_codel", "target"), ("fq_codel", "interval")}  # kernel: microseconds
_RATE_KEYS = {("tbf", "rate"): "bytes", ("fq", "maxrate"): "bytes", ("cake", "bandwidth"): "bits"}
_SIZE_KEYS = {("tbf", "burst"), ("tbf", "limit"), ("bfifo", "limit"), ("fq", "quantum"),
              ("fq", "initial_quantum"), ("fq_codel", "quantum")}  # kernel: bytes
_TIME = {"s": 1_000_000, "sec": 1_000_000, "ms": 1000, "msec": 1000, "us": 1, "usec": 1}
_BITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_BYTES_PER_S = {"bps": 1, "kbps": 10**3, "mbps": 10**6, "gbps": 10**9}
_SIZE = {"b": 1, "k": 1024, "kb": 1024, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}
# ASCII only; the arithmetic below is exact (Fraction, not float) and bounded, so "1e400",
# a 400-digit number or "²" cannot overflow or slow it down
_WITH_UNIT = re.compile(r"([0-9]+)(?:\.([0-9]+))?\s*([a-z]{1,5})", re.ASCII)
_TOO_BIG = 2**64 + 1  # beyond every parameter's range: the caller says "out of range"


def parse_param(kind: str, key: str, value: Any) -> int:
    """A qdisc parameter in the kernel's unit, from a bare number (already that unit) or
    tc's notation: times 5ms/100us/1s, rates 100mbit/1gbit (bits) or 125kbps (bytes),
    sizes 32k/1m (1024-based, as tc). ActionError naming the key and the units otherwise;
    the caller checks the range."""
    text = (value if isinstance(value, str) else str(value)).strip(" \t").lower()
    n = whole(text)
    if n is not None:
        return n
    m = _WITH_UNIT.fullmatch(text)
    if m is not None:
        ipart, fpart, unit = m.group(1).lstrip("0") or "0", (m.group(2) or "")[:9], m.group(3)
        number = Fraction(int(ipart) if len(ipart) <= 20 else _TOO_BIG)
        if fpart:
            number += Fraction(int(fpart), 10 ** len(fpart))
        factor: Fraction | None = None
        if (kind, key) in _TIME_KEYS and unit in _TIME:
            factor = Fraction(_TIME[unit])
        elif (kind, key) in _RATE_KEYS and (unit in _BITS or unit in _BYTES_PER_S):
            bits = _BITS[unit] if unit in _BITS else 8 * _BYTES_PER_S[unit]
            factor = Fraction(bits) if _RATE_KEYS[(kind, key)] == "bits" else Fraction(bits, 8)
        elif (kind, key) in _SIZE_KEYS and unit in _SIZE:
            factor = Fraction(_SIZE[unit])
        if factor is not None:
            return round(number * factor)
    if (kind, key) in _TIME_KEYS:
        hint = "microseconds, or 5ms / 100us / 1s"
    elif (kind, key) in _RATE_KEYS:
        hint = ("bit/s" if _RATE_KEYS[(kind, key)] == "bits" else "bytes/s") + ", or 100mbit / 1gbit / 125kbps"
    elif (kind, key) in _SIZE_KEYS:
        hint = "bytes, or 32k / 1m"
    else:
        hint = "a whole number"
    raise ActionError(f"{kind} {key}={clip(value)}: give {hint}")


def _checked(kind: str, given: dict[str, Any], shown: str, key_prefix: str = "") -> dict[str, int]:
    """`given` parameters of `kind` in the kernel's units, each a u32; ActionError naming
    an unknown key (with the keys `kind` takes, as the user writes them: `key_prefix`) or
    a value out of range (`shown` + key=value). The root's and tbf's child's share it."""
    bad = [k for k in given if k not in PARAMS[kind]]
    if bad:
        allowed = ", ".join(f"{key_prefix}{k}" for k in PARAMS[kind]) or "none"
        raise ActionError(f"{kind} has no parameter {', '.join(map(bare, bad))} (it takes: {allowed})")
    out = {}
    for k, v in given.items():
        out[k] = parse_param(kind, k, v)
        if out[k] < 0 or out[k] > 2**32 - 1:
            raise ActionError(f"{shown}{k}={clip(v)}: out of range (0 to 4294967295)", errno.ERANGE)
    return out


def _options(kind: str, opts: Any) -> dict[str, Any]:
    """The parameters nettop tracks, from a dumped qdisc's decoded TCA_OPTIONS."""
    if opts is None or isinstance(opts, str):
        return {}
    if kind in ("pfifo", "bfifo"):
        return {"limit": opts.get("limit")}
    attrs = dict(opts.get("attrs", [])) if hasattr(opts, "get") else {}
    if kind == "tbf":
        p = attrs.get("TCA_TBF_PARMS") or {}
        out = {"rate": p.get("rate"), "limit": p.get("limit")}
        if p.get("rate") and p.get("buffer"):
            from pyroute2.netlink.rtnl.tcmsg.common import TIME_UNITS_PER_SEC, tick_in_usec

            # buffer is the burst's transmit time in scheduler ticks (tc's calc_xmittime inverted)
            out["burst"] = round(p["buffer"] / tick_in_usec * p["rate"] / TIME_UNITS_PER_SEC)
        return out
    if kind == "htb":
        init = attrs.get("TCA_HTB_INIT") or {}
        return {"default": init.get("defcls")}
    if kind == "fq_codel":
        # not flows: the kernel refuses to change it on a live fq_codel, so an undo that
        # carried it back would fail
        return {k: attrs.get(f"TCA_FQ_CODEL_{k.upper()}") for k in ("limit", "target", "interval", "quantum", "ecn")}
    if kind == "fq":
        return {"limit": attrs.get("TCA_FQ_PLIMIT")}
    if kind == "cake" and attrs.get("TCA_CAKE_BASE_RATE64") is not None:
        return {"bandwidth": attrs["TCA_CAKE_BASE_RATE64"] * 8}  # bytes/s in the kernel, bit/s here
    return {}


@register
@dataclass(frozen=True, slots=True)
class RootQdisc(Setting):
    value_types = (dict,)
    ifname: str
    kind = "qdisc"

    @property
    def key(self) -> str:
        return f"qdisc {self.ifname} root"

    def validate(self) -> None:
        valid_ifname(self.ifname)

    def _index(self, ipr: Any) -> int:
        idx = ipr.link_lookup(ifname=self.ifname)
        if not idx:
            raise OSError(errno.ENODEV, "No such device")
        return int(idx[0])

    def read(self) -> Value:
        from pyroute2 import IPRoute

        _register_plugins()
        with IPRoute() as ipr:
            idx = self._index(ipr)
            qdiscs = list(ipr.get_qdiscs(idx))
        root = next((q for q in qdiscs if q["parent"] == TC_H_ROOT), None)
        if root is None:
            return {"kind": "none", "params": {}, "default": True}
        kind = root.get_attr("TCA_KIND")
        value: dict[str, Any] = {"kind": kind, "params": _options(kind, root.get_attr("TCA_OPTIONS")),
                                 "default": root["handle"] == 0}
        if kind in PARENTS and root["handle"]:
            under = [q for q in qdiscs if q["parent"] >> 16 == root["handle"] >> 16 and q["parent"] != TC_H_ROOT]
            kids = sorted({q.get_attr("TCA_KIND") for q in under})
            if kids:  # tbf's own FIFO is hidden from dumps: no kids means "none chosen"
                value["children"] = kids[0] if len(kids) == 1 else ",".join(kids)
            if kind == "tbf" and len(under) == 1:
                got = _options(kids[0], under[0].get_attr("TCA_OPTIONS"))
                if any(v is not None for v in got.values()):
                    value["child_params"] = {k: v for k, v in got.items() if v is not None}
        return value

    def normalize(self, value: Value) -> Value:
        need_iface(self.ifname)
        if not isinstance(value, dict) or value.get("kind") not in KINDS:
            raise ActionError(f"qdisc {clip(value.get('kind') if isinstance(value, dict) else value)} is not one "
                              f"nettop sets; use one of {', '.join(KINDS[:-1])}")
        kind = value["kind"]
        child = value.get("children") or ("pfifo_fast" if kind == "mq" else None)
        if child is not None and kind not in PARENTS:
            raise ActionError(f"{kind} takes no children=; only {' and '.join(PARENTS)} do")
        if child is not None and child not in LEAVES:
            raise ActionError(f"{kind} children must be a classless qdisc ({', '.join(LEAVES)}), not {clip(child)}")
        pkind: str = child if kind == "mq" and child is not None else kind  # mq's parameters are its children's
        params = value.get("params") or {}
        if not isinstance(params, dict):
            raise ActionError(f"qdisc {kind}: parameters are KEY=VALUE pairs, not {clip(params)}")
        params = _checked(pkind, params, f"{kind} ")
        if pkind == "tbf" and not (params.get("rate") and params.get("burst")):
            raise ActionError("tbf needs rate=BYTES_PER_SECOND and burst=BYTES above 0 (limit=BYTES optional)")
        if pkind == "tbf":
            params.setdefault("limit", max(params["burst"], 10_000))
            from pyroute2.netlink.rtnl.tcmsg.common import TIME_UNITS_PER_SEC, tick_in_usec

            # the burst travels as its transmit time in scheduler ticks, a u32
            if params["burst"] * TIME_UNITS_PER_SEC * tick_in_usec / params["rate"] >= 2**32:
                raise ActionError(f"tbf burst={params['burst']} takes too long to send at rate="
                                  f"{params['rate']} bytes/s; raise the rate or lower the burst", errno.ERANGE)
            # so does each cell of the rate table (sizes up to 2048 bytes for a 1600-byte MTU)
            if _RTAB_CELL_MAX * TIME_UNITS_PER_SEC * tick_in_usec / params["rate"] >= 2**32:
                lowest = int(_RTAB_CELL_MAX * TIME_UNITS_PER_SEC * tick_in_usec / 2**32) + 1
                raise ActionError(f"tbf rate={params['rate']} bytes/s is too slow for the kernel's rate table "
                                  f"(a {_RTAB_CELL_MAX}-byte packet must take under 274 s); the lowest rate is "
                                  f"{lowest} bytes/s", errno.ERANGE)
        child_params = self._child_params(kind, child, value.get("child_params"))
        if kind == "mq" and len(_tx_queues(self.ifname)) < 2:
            raise ActionError(f"mq needs a multi-queue device and {self.ifname} has one tx queue; "
                              "pick a classless qdisc", errno.EOPNOTSUPP)
        out: dict[str, Any] = {"kind": kind, "params": params, "default": bool(value.get("default"))}
        if child is not None:
            out["children"] = child
        if child_params:
            out["child_params"] = child_params
        return out

    @staticmethod
    def _child_params(kind: str, child: str | None, given: Any) -> dict[str, int]:
        """tbf's child's parameters, checked and in the kernel's units as the root's are."""
        if not given:
            return {}
        if kind != "tbf" or child is None:
            raise ActionError(f"child.KEY=VALUE sets the parameters of tbf's children=KIND; {kind} "
                              + ("takes its children's parameters as its own KEY=VALUE" if kind == "mq"
                                 else "has no child"))
        if not isinstance(given, dict):
            raise ActionError(f"qdisc {kind}: child parameters are child.KEY=VALUE pairs, not {clip(given)}")
        return _checked(child, given, f"{child} child.", key_prefix="child.")

    def write(self, value: Value) -> None:
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError

        _register_plugins()
        kind, params = value["kind"], dict(value.get("params") or {})
        try:
            with IPRoute(ext_ack=True) as ipr:
                idx = self._index(ipr)
                if value.get("default"):
                    if self.read().get("default"):
                        return
                    ipr.tc("del", index=idx, parent=TC_H_ROOT)
                    return
                if kind == "mq":
                    self._write_mq(ipr, idx, value)
                    return
                fresh_flows = "flows" in (value.get("child_params") or {})
                if kind == "tbf" and (not value.get("children") or fresh_flows):
                    # only then can the tbf now in place have to go: read it back just for these
                    now = self.read()
                    if (not value.get("children") and now.get("children")) or \
                            (fresh_flows and now.get("children") == value.get("children")):
                        # a tbf change keeps its grafted child, and a live fq_codel refuses a new
                        # flows count: only a new tbf gets its own FIFO back or a fresh child
                        ipr.tc("del", index=idx, parent=TC_H_ROOT)
                ipr.tc("replace", kind, idx, handle=0, parent=TC_H_ROOT, **_tc_args(kind, params))
                if kind == "tbf" and value.get("children"):
                    self._write_child(ipr, idx, value["children"], value.get("child_params") or {})
        except NetlinkError as exc:
            if exc.code == errno.ENOENT:
                k = value.get("children") if kind == "mq" else kind
                raise ActionError(f"this kernel has no sch_{k}: load it with `modprobe sch_{k}` "
                                  "or pick another qdisc", errno.ENOENT) from None
            extack = exc.args[1] if len(exc.args) > 1 else ""
            if extack and extack != os.strerror(exc.code) and exc.code != errno.ENODEV:
                # the kernel's own words (netlink extack) say more than the errno
                raise ActionError(f"qdisc {self.ifname} {kind}: {extack} "
                                  f"({errno.errorcode.get(exc.code, exc.code)})", exc.code) from None
            raise OSError(exc.code, os.strerror(exc.code)) from None

    def _write_mq(self, ipr: Any, idx: int, value: dict[str, Any]) -> None:
        qdiscs = list(ipr.get_qdiscs(idx))
        root = next((q for q in qdiscs if q["parent"] == TC_H_ROOT), None)
        if root is None or root.get_attr("TCA_KIND") != "mq" or root["handle"] == 0:
            ipr.tc("replace", "mq", idx, handle=0x10000, parent=TC_H_ROOT)
            major = 0x10000
        else:
            major = root["handle"]
        ntx = len([q for q in _tx_queues(self.ifname)])
        child = value.get("children") or "pfifo_fast"
        for i in range(1, ntx + 1):
            ipr.tc("replace", child, idx, handle=0, parent=major | i, **_tc_args(child, value.get("params") or {}))

    def _write_child(self, ipr: Any, idx: int, child: str, params: dict[str, Any]) -> None:
        """Graft `child` under the tbf root just written (its class is HANDLE:1)."""
        root = next((q for q in ipr.get_qdiscs(idx) if q["parent"] == TC_H_ROOT), None)
        if root is None or root.get_attr("TCA_KIND") != "tbf" or not root["handle"]:
            raise ActionError(f"qdisc {self.ifname}: the tbf root vanished before its child was added")
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            ipr.tc("replace", child, idx, handle=0, parent=root["handle"] | 1, **_tc_args(child, params))
        except NetlinkError as exc:
            if exc.code == errno.ENOENT:  # tbf itself was created: it is the child's kind that is missing
                raise ActionError(f"this kernel has no sch_{child}: load it with `modprobe sch_{child}` "
                                  "or pick another child", errno.ENOENT) from None
            raise

    def matches(self, requested: Value, after: Value) -> bool:
        if not isinstance(after, dict) or not isinstance(requested, dict) or \
                not isinstance(requested.get("params", {}), dict):
            return False
        if requested.get("default"):
            return bool(after.get("default"))
        if after.get("kind") != requested["kind"]:
            return False
        if requested["kind"] in PARENTS and requested.get("children") and \
                after.get("children") != requested.get("children"):
            return False
        got = after.get("params") or {}
        kind = requested.get("children") if requested["kind"] == "mq" else requested["kind"]
        child_got = after.get("child_params") or {}
        return all(_same(kind, k, v, got.get(k)) for k, v in requested.get("params", {}).items()
                   if k not in ("burst",)) and \
            all(_same(requested.get("children"), k, v, child_got.get(k))
                for k, v in (requested.get("child_params") or {}).items())

    def unchanged(self, left: Value, now: Value) -> bool:
        """The parameters a journal holds still read the same; a parameter it does not hold
        (fq_codel's quantum and ecn, tbf's child_params: read back since 2026-11) is not a
        change by someone else."""
        if not isinstance(left, dict) or not isinstance(now, dict):
            return bool(left == now)
        for key in set(left) | set(now):
            a, b = left.get(key), now.get(key)
            if key in ("params", "child_params") and isinstance(b, dict) and isinstance(a, dict | None):
                if any(b.get(k) != v for k, v in (a or {}).items()):
                    return False
            elif a != b:
                return False
        return True

    def confirm_reason(self, before: Value, value: Value) -> str | None:
        reason = "replacing the root qdisc drops the packets queued in the old one"
        if isinstance(before, dict) and not before.get("default") and before.get("kind") in ("htb", "mq"):
            reason += (f"; undo brings back the {before['kind']} root with its main parameters, "
                       "not classes or filters configured under it")
        return reason

    def show(self, value: Value) -> str:
        if not isinstance(value, dict):
            return str(value)
        s = str(value.get("kind"))
        if value.get("children"):
            kid = value.get("child_params")
            extra = " ".join(f"{k}={v}" for k, v in kid.items()) if isinstance(kid, dict) else clip(kid) if kid else ""
            s += f" (children {value['children']}{' ' + extra if extra else ''})"
        raw = value.get("params") or {}
        params = {k: v for k, v in raw.items() if v is not None} if isinstance(raw, dict) else {"params": clip(raw)}
        if params:
            s += " " + " ".join(f"{k}={v}" for k, v in params.items())
        if value.get("default"):
            s += " (kernel default)"
        return s

    def explain(self, exc: OSError) -> str:
        if exc.errno == errno.ENODEV:
            return f"qdisc {self.ifname}: interface {self.ifname} vanished (ENODEV)"
        if exc.errno == errno.EINVAL:
            return f"qdisc {self.ifname}: the kernel refused these parameters (EINVAL); check them against `man tc-<kind>`"
        return super(RootQdisc, self).explain(exc)


def _same(kind: str | None, key: str, requested: Any, got: Any) -> bool:
    """A read-back parameter equals the request, as the kernel can store it.

    CoDel keeps target/interval in 1024 ns units and prints them back in whole µs, so
    2000 µs reads back as 1999: up to 2 µs below the request is the same value.
    """
    if got is None or got == requested:
        return True
    if kind == "fq_codel" and key in ("target", "interval") and isinstance(got, int):
        return requested - 2 <= got <= requested
    return False


def _tc_args(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    if kind == "fq_codel":
        return {_FQ_CODEL[k]: v for k, v in params.items()}
    if kind == "tbf":
        return {"rate": params["rate"], "burst": params["burst"], "limit": params["limit"]}
    if kind == "cake" and "bandwidth" in params:
        return {"bandwidth": params["bandwidth"]}
    if kind in ("mq", "pfifo_fast"):
        return {}
    return dict(params)


def _tx_queues(ifname: str, root: SysRoot = LIVE) -> list[str]:
    return [n for n in root.listdir(f"sys/class/net/{ifname}/queues") if n.startswith("tx-")]
