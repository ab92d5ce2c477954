"""An experiment plan (TOML): variants, a load, latency probes and timing — checked before use.

    name = "qdisc under load"
    iface = "eth0"                     # the interface whose counters measure throughput
    target = "10.0.0.2"                # the iperf3 server and the latency probe's target
    [load]
    kind = "tcp"                       # "tcp" (flows), "udp" (rate) or "command" (argv)
    flows = 100                        # above 128: several iperf3 clients on port, port+1, ...
    port = 5201
    reverse = false                    # true: the target sends (iperf3 -R)
    server_netns = "lab-peer"          # optional: nettop starts the iperf3 servers in this namespace
    [timing]
    idle = 2                           # s of probes without load, per variant
    warmup = 2
    measure = 10
    repeats = 3
    seed = 1
    [[variant]]
    name = "fq_codel"
    set = ["nettop set qdisc eth0 fq_codel"]

The baseline (the host as found) is always a variant. Every `set` line is parsed as the
CLI parses it and validated by the Tuner against this host before anything changes;
qdisc kinds are tried in a scratch namespace, so a kind this kernel lacks is one line
here instead of a failure in the middle of a run. `--iface`/`--target`/`--duration`
override the plan, so one example plan runs on any host: the interface name in `set`
lines is rewritten from the plan's to the override.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

MAX_FLOWS = 1000
IPERF3_MAX_PARALLEL = 128  # iperf3 -P refuses more


class PlanError(Exception):
    """One line naming the plan's key and the fix."""


@dataclass(frozen=True)
class Load:
    kind: str = "tcp"
    flows: int = 8
    rate: str | None = None  # udp: iperf3 -b, e.g. "500M"
    port: int = 5201
    reverse: bool = False
    server_netns: str | None = None
    argv: tuple[str, ...] = ()  # kind = "command"

    @property
    def clients(self) -> int:
        return -(-self.flows // IPERF3_MAX_PARALLEL) if self.kind != "command" else 0


@dataclass(frozen=True)
class Timing:
    idle: float = 2.0
    warmup: float = 2.0
    measure: float = 10.0
    repeats: int = 3
    seed: int = 1
    interval: float = 0.5  # sampling within a phase
    ping_interval: float = 0.05
    # a reply later than this is a lost probe; long, because a bloated queue delays replies
    # by seconds and that delay is what the run measures
    ping_timeout: float = 5.0


@dataclass(frozen=True)
class Variant:
    name: str
    lines: tuple[str, ...] = ()  # `nettop set ...` lines; () is the baseline


@dataclass(frozen=True)
class ExperimentPlan:
    name: str
    iface: str
    target: str
    load: Load
    timing: Timing
    variants: tuple[Variant, ...] = field(default_factory=tuple)  # baseline first

    def with_overrides(self, iface: str | None, target: str | None, duration: float | None) -> ExperimentPlan:
        p = self
        if iface and iface != self.iface:
            p = replace(p, iface=iface, variants=tuple(
                Variant(v.name, tuple(_rename(line, self.iface, iface) for line in v.lines)) for v in p.variants))
        if target:
            p = replace(p, target=target)
        if duration is not None:
            p = replace(p, timing=replace(p.timing, measure=duration))
        return p


def _rename(line: str, old: str, new: str) -> str:
    return shlex.join(new if w == old else w for w in shlex.split(line))


def _get(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any, where: str) -> Any:
    v = doc.get(key, default)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if v is None and default is None:
        return None
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise PlanError(f"{where}{key} must be a {names}, not {str(v)[:40]!r}")
    return v


def _seconds(doc: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    v = float(_get(doc, key, (int, float), default, "timing."))
    if not lo <= v <= hi:
        raise PlanError(f"timing.{key} = {v:g} s is out of range: use {lo:g} to {hi:g}")
    return v


def parse(text: str, source: str = "plan") -> ExperimentPlan:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{source} is not valid TOML: {exc}") from None
    name = str(_get(doc, "name", str, os.path.basename(source), ""))[:80]
    iface = _get(doc, "iface", str, "", "")
    target = _get(doc, "target", str, "", "")
    ld = _get(doc, "load", dict, {}, "")
    kind = _get(ld, "kind", str, "tcp", "load.")
    if kind not in ("tcp", "udp", "command"):
        raise PlanError(f"load.kind = {kind[:20]!r}: use \"tcp\", \"udp\" or \"command\"")
    flows = _get(ld, "flows", int, 8, "load.")
    if not 1 <= flows <= MAX_FLOWS:
        raise PlanError(f"load.flows = {flows}: use 1 to {MAX_FLOWS}")
    port = _get(ld, "port", int, 5201, "load.")
    if not 1 <= port <= 65535 - flows // IPERF3_MAX_PARALLEL:
        raise PlanError(f"load.port = {port}: use a port from 1 to 65535 (one per {IPERF3_MAX_PARALLEL} flows)")
    argv = _get(ld, "argv", list, [], "load.")
    if kind == "command" and (not argv or not all(isinstance(a, str) and a for a in argv)):
        raise PlanError("load.argv: kind = \"command\" needs an argv list of strings, e.g. [\"flent\", \"rrul\", ...]")
    rate = _get(ld, "rate", str, None, "load.")
    if kind == "udp" and not rate:
        raise PlanError("load.rate: a udp load needs a rate, e.g. rate = \"500M\" (iperf3 -b)")
    load = Load(kind, flows, rate, port, bool(_get(ld, "reverse", bool, False, "load.")),
                _get(ld, "server_netns", str, None, "load."), tuple(argv))
    tm = _get(doc, "timing", dict, {}, "")
    repeats = _get(tm, "repeats", int, 3, "timing.")
    if not 1 <= repeats <= 100:
        raise PlanError(f"timing.repeats = {repeats}: use 1 to 100")
    timing = Timing(_seconds(tm, "idle", 2.0, 0, 600), _seconds(tm, "warmup", 2.0, 0, 600),
                    _seconds(tm, "measure", 10.0, 1, 3600), repeats, _get(tm, "seed", int, 1, "timing."),
                    _seconds(tm, "interval", 0.5, 0.1, 10), _seconds(tm, "ping_interval", 0.05, 0.001, 10),
                    _seconds(tm, "ping_timeout", 5.0, 0.1, 60))
    variants = [Variant("baseline")]
    raw = _get(doc, "variant", list, [], "")
    for n, v in enumerate(raw):
        where = f"variant {n + 1}: "
        if not isinstance(v, dict):
            raise PlanError(f"{where}use [[variant]] tables with name and set")
        vname = _get(v, "name", str, "", where)
        if not vname or vname == "baseline" or any(x.name == vname for x in variants):
            raise PlanError(f"{where}name {vname[:40]!r} is empty, 'baseline' or used twice: give each a new name")
        lines = _get(v, "set", list, [], where)
        if not lines or not all(isinstance(x, str) for x in lines):
            raise PlanError(f"{where}set must be a list of `nettop set ...` lines")
        for line in lines:
            try:
                words = shlex.split(line) if line.strip() else []
            except ValueError:
                raise PlanError(f"{where}{line[:60]!r}: unbalanced quotes") from None
            if words[:2] != ["nettop", "set"]:
                raise PlanError(f"{where}{line[:60]!r} is not a `nettop set ...` line")
        variants.append(Variant(vname, tuple(lines)))
    if len(variants) < 2:
        raise PlanError(f"{source} has no [[variant]]: add at least one to compare with the baseline")
    return ExperimentPlan(name, iface, target, load, timing, tuple(variants))


def load(path: str) -> ExperimentPlan:
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc.strerror}") from None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise PlanError(f"{path} is not UTF-8 text: not a TOML plan") from None
    return parse(text, path)


def changes_of(line: str) -> list[Any]:
    """The Changes of one `nettop set` line, parsed as the CLI parses it."""
    from nettop.actions.base import ActionError
    from nettop.actions.cli_set import build_changes, set_line_parser

    try:
        words = shlex.split(line)
        args = set_line_parser().parse_args(words[1:])
    except (ActionError, ValueError):
        raise PlanError(f"{line[:80]!r} is not a valid `nettop set` line (try it with --dry-run)") from None
    try:
        return build_changes(args)
    except ActionError as exc:
        raise PlanError(f"{line[:80]!r}: {exc}") from None


# what tc needs to create a kind at all (tbf has no defaults)
MINIMAL_ARGS = {"tbf": ["rate", "1mbit", "burst", "10kb", "latency", "50ms"]}


def qdisc_available(kind: str) -> bool:
    """Whether this kernel has qdisc `kind`: tried on a veth in a scratch namespace."""
    ns = f"ntx-qd-{os.getpid()}"
    run = lambda *a: subprocess.run(list(a), capture_output=True, text=True, timeout=20)  # noqa: E731
    try:
        if run("ip", "netns", "add", ns).returncode != 0:
            return True  # cannot probe (not root): the Tuner's own error stands
        run("ip", "-n", ns, "link", "add", "qd0", "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
            "peer", "name", "qd1")
        need = MINIMAL_ARGS.get(kind, [])
        return run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "qd0", "root", kind, *need).returncode == 0
    finally:
        run("ip", "netns", "del", ns)


def validate(plan: ExperimentPlan, tuner: Any) -> None:
    """Everything the run will need, checked before anything changes."""
    from nettop.actions.base import ActionError

    if not plan.iface:
        raise PlanError("no interface: set iface = \"...\" in the plan or give --iface")
    if not os.path.isdir(f"/sys/class/net/{plan.iface}"):
        raise PlanError(f"interface {plan.iface!r} does not exist on this host; give --iface")
    if plan.load.kind != "command" and not plan.target:
        raise PlanError("no target: set target = \"HOST\" (the iperf3 server) in the plan or give --target")
    if plan.load.server_netns and not os.path.exists(f"/run/netns/{plan.load.server_netns}"):
        raise PlanError(f"load.server_netns {plan.load.server_netns!r} is not a network namespace here (ip netns list)")
    kinds: set[str] = set()
    for v in plan.variants:
        for line in v.lines:
            changes = changes_of(line)
            try:
                tuner.plan(changes)
            except ActionError as exc:
                raise PlanError(f"variant {v.name}: {line[:80]!r}: {exc}") from None
            for ch in changes:
                if getattr(ch.setting, "kind", "") == "qdisc" and isinstance(ch.value, dict):
                    kinds.add(str(ch.value.get("kind")))
                    if ch.value.get("children"):
                        kinds.add(str(ch.value["children"]))
    for kind in sorted(kinds - {"noqueue"}):
        if not qdisc_available(kind):
            raise PlanError(f"this kernel has no {kind} qdisc (sch_{kind} not built or loadable): "
                            "drop the variant or run on a kernel with it")
