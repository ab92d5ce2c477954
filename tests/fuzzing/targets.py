"""Every parser nettop has, driven with fuzzed input, and the contract each must keep.

A target makes one input from a seeded RNG (`make`) and runs it (`run`). `run` returns
an Outcome: how many Problems the parser reported (the input was flagged as incomplete
or inconsistent) and the inconsistencies an independent check found in the result that
no Problem mentions (silent: a plausible-looking wrong figure). Any exception other
than the target's `allowed` project exceptions is a crash. See docs/bad-input.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from fuzzing.mutate import mutate, mutate_value

TESTS = Path(__file__).resolve().parent.parent
DATA = TESTS / "data"
U32 = 1 << 32
U64 = 1 << 64


@dataclass(frozen=True)
class Outcome:
    flagged: int = 0  # Problems (or allowed project errors) the parser reported
    silent: tuple[str, ...] = ()  # inconsistencies no Problem reported


@dataclass
class Target:
    name: str
    make: Callable[[random.Random], str]
    run: Callable[[str], Outcome]
    allowed: tuple[type[BaseException], ...] = ()
    group: str = "collectors"  # "actions": owned by nettop/actions (xfail until fixed there)
    ci_inputs: int = 1500  # the short CI pass (a few seconds)
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None


def _seed_files(*patterns: str) -> list[str]:
    out = []
    for pat in patterns:
        for p in sorted(DATA.glob(pat)):
            if p.is_file() and p.name not in ("LICENSE", "NOTICE", "README", "README.md"):
                out.append(p.read_bytes().decode("latin-1"))
    assert out, f"no seed captures match {patterns} under {DATA}"
    return out


_SEEDS: dict[str, list[str]] = {}


def seeds(kind: str) -> list[str]:
    if kind not in _SEEDS:
        _SEEDS[kind] = {
            "interrupts": lambda: _seed_files("interrupts/*.txt"),
            "softirqs": lambda: _seed_files("softirqs/*", "softirqs/*/*", "softirqs/*/*/*"),
            "softnet": lambda: _seed_files("softnet/*", "softnet/*/*"),
            "stat": lambda: _seed_files("stat/*"),
        }[kind]()
    return _SEEDS[kind]


def _others(kind: str) -> list[str]:
    return [t for k in ("interrupts", "softirqs", "softnet", "stat") if k != kind for t in seeds(k)[:3]]


def _text_maker(kind: str) -> Callable[[random.Random], str]:
    def make(rng: random.Random) -> str:
        return mutate(rng.choice(seeds(kind)), rng, _others(kind))
    return make


# --- /proc/interrupts ------------------------------------------------------------------

_NUMBERED = re.compile(r"^ *([0-9]+):", re.M)


def run_interrupts(text: str) -> Outcome:
    from nettop.collectors.interrupts import parse_interrupts

    table, problems = parse_interrupts(text)
    even, problems2 = parse_interrupts(text, lambda irq, name: irq % 2 == 0)
    silent = []
    if not problems:
        if len(set(table.cpus)) != len(table.cpus):
            silent.append("header names a CPU twice")
        for irq in table.irqs.values():
            if irq.counts is None or len(irq.counts) != len(table.cpus):
                silent.append(f"IRQ {irq.irq} counts do not match the header")
            elif any(not 0 <= c < U32 for c in irq.counts):
                silent.append(f"IRQ {irq.irq} count outside 32 bits")
        labels = _NUMBERED.findall(text)
        if len(labels) != len(set(labels)):
            silent.append("an IRQ listed twice")
        if table.cpus and not table.irqs:
            silent.append("no IRQ line")
    wanted = {i for i, irq in even.irqs.items() if irq.counts is not None}
    if not problems2 and wanted != {i for i in table.irqs if i % 2 == 0}:
        silent.append("the wanted subset changes which IRQs are seen")
    return Outcome(len(problems), tuple(silent))


# --- /proc/softirqs --------------------------------------------------------------------


def run_softirqs(text: str) -> Outcome:
    from nettop.collectors.softirqs import parse_softirqs

    out, problems = parse_softirqs(text)
    silent = []
    if not problems:
        for c in out.values():
            if not (0 <= c.net_rx < U32 and 0 <= c.net_tx < U32):
                silent.append(f"CPU {c.cpu} count outside 32 bits")
        for line in text.split("\n"):
            name, sep, rest = line.partition(":")
            if sep and name.strip() in ("NET_RX", "NET_TX") and len(rest.split()) != len(out) and out:
                silent.append(f"{name.strip()} has {len(rest.split())} counts for {len(out)} CPUs")
                break
    return Outcome(len(problems), tuple(silent))


# --- /proc/net/softnet_stat ------------------------------------------------------------


def run_softnet(text: str) -> Outcome:
    from nettop.collectors.softnet import parse_softnet

    out, problems = parse_softnet(text)
    out2, problems2 = parse_softnet(text, (0, 1, 2, 3, 5, 8))
    silent = []
    if not problems:
        lines = [ln for ln in text.splitlines() if ln.split()]
        if len(lines) != len(out):
            silent.append(f"{len(lines)} lines but {len(out)} CPUs")
        for r in out.values():
            if any(not 0 <= v < U32 for v in (r.processed, r.dropped, r.time_squeeze,
                                               r.received_rps, r.flow_limit_count)):
                silent.append(f"CPU {r.cpu} field outside 32 bits")
    return Outcome(len(problems) + len(problems2), tuple(silent))


# --- /proc/stat ------------------------------------------------------------------------

_CPU_LINE = re.compile(r"^cpu[0-9]+\s", re.M)


def run_stat(text: str) -> Outcome:
    from nettop.collectors.cpustat import PERCENT_FIELDS, cpu_percentages, parse_stat

    out, problems = parse_stat(text)
    silent = []
    end = text.find("\nintr")
    head = text if end < 0 else text[:end]
    if not problems:
        if len(_CPU_LINE.findall(head)) != len(out):
            silent.append(f"{len(_CPU_LINE.findall(head))} cpuN lines but {len(out)} CPUs")
        for t in out.values():
            if any(not 0 <= getattr(t, f) < U64 for f in PERCENT_FIELDS):
                silent.append(f"cpu{t.cpu} time outside 64 bits")
    base = {t.cpu: t for t in parse_stat(seeds("stat")[0])[0].values()}
    for cpu, t in out.items():
        for a, b in ((base.get(cpu), t), (t, base.get(cpu))):
            if a is None or b is None:
                continue
            pct = cpu_percentages(a, b)
            if any(not (0.0 <= v <= 100.0 + 1e-6) or math.isnan(v) for v in pct.values()):
                silent.append(f"cpu{cpu} percentages outside 0-100")
    return Outcome(len(problems), tuple(silent))


# --- CPU lists and masks ---------------------------------------------------------------

CPU_LIST_SEEDS = ("0-3", "0-3,8,10-11", "0", "0-7:2/4", "1,3,5", "0-255", "0-8191", "2-3\n", "",
                  "0-1", "4-4", "0,1,2,3")
CPU_MASK_SEEDS = ("f", "00000000,0000000f", "ff,00000000", "3", "0", "ffffffff,ffffffff",
                  "80000000,00000000,00000001", "00000001\n", "f0")


def _check_cpus(cpus: tuple[int, ...]) -> list[str]:
    from nettop.collectors.cpus import MAX_CPUS

    silent = []
    if list(cpus) != sorted(set(cpus)):
        silent.append("CPU ids not sorted and unique")
    if cpus and not 0 <= cpus[0] <= cpus[-1] < MAX_CPUS:
        silent.append("CPU id beyond the bound")
    return silent


def run_cpu_list(text: str) -> Outcome:
    from nettop.collectors.cpus import format_cpu_list, parse_cpu_list

    try:
        cpus = parse_cpu_list(text)
    except ValueError:
        return Outcome(1)
    silent = _check_cpus(cpus)
    if not silent and parse_cpu_list(format_cpu_list(cpus)) != cpus:
        silent.append("list does not round-trip")
    return Outcome(0, tuple(silent))


def run_cpu_mask(text: str) -> Outcome:
    from nettop.collectors.cpus import format_cpu_mask, parse_cpu_mask

    try:
        cpus = parse_cpu_mask(text)
    except ValueError:
        return Outcome(1)
    silent = _check_cpus(cpus)
    if not silent and cpus and parse_cpu_mask(format_cpu_mask(cpus, cpus[-1] + 1)) != cpus:
        silent.append("mask does not round-trip")
    return Outcome(0, tuple(silent))


# --- /proc/irq/N files, device facts, BQL, queue directories, msi_irqs ----------------

IRQ_FILE_SEEDS = ("0-3", "1", "", "0", "00000000,00000000", "f", "-1", "1\n", "0-1,3")


def run_irq_affinity(text: str) -> Outcome:
    from nettop.collectors.irq_affinity import parse_affinity_hint, parse_affinity_list, parse_node
    from nettop.collectors.device_info import parse_numa_node

    flagged = 0
    silent: list[str] = []
    for parse in (parse_affinity_list.__wrapped__, parse_affinity_hint.__wrapped__):  # type: ignore[attr-defined]
        try:
            cpus = parse(text)
        except ValueError:
            flagged += 1
        else:
            silent += _check_cpus(cpus or ())
    for parse in (parse_node.__wrapped__, parse_numa_node):  # type: ignore[attr-defined]
        try:
            node = parse(text)
        except ValueError:
            flagged += 1
        else:
            if node is not None and not 0 <= node < 1 << 31:
                silent.append(f"node {node}")
    return Outcome(flagged, tuple(silent))


def make_bql(rng: random.Random) -> str:
    base = rng.choice(("2317 1879048192 0 0", "0 1879048192 0 0", "30282 1879048192 0 1514"))
    return mutate_value(base, rng)


def run_bql(text: str) -> Outcome:
    from nettop.collectors.bql import FIELDS, parse_bql

    parts = (text.split(" ") + ["", "", "", ""])[:4]
    try:
        st = parse_bql(0, dict(zip(FIELDS, parts)))
    except ValueError:
        return Outcome(1)
    bad = [f for f in FIELDS if not 0 <= getattr(st, f) < U32]
    return Outcome(0, tuple(f"{f} outside 32 bits" for f in bad))


NAME_SEEDS = ("rx-0 rx-1 tx-0 tx-1", "rx-0 tx-0 rx-10 tx-10", "24 25 26 27", "node0 node1",
              "virtio0 0000:00:03.0 msi_irqs", "eth0-TxRx-3 mlx5_comp2@pci:0000:81:00.0 virtio2-input.0")


def run_names(text: str) -> Outcome:
    """Directory entries (queues/rx-N, msi_irqs/N) and IRQ names through their parsers."""
    from nettop.collectors.device_info import bus_info_of
    from nettop.collectors.queue_config import parse_queue_dirs
    from nettop.collectors.queue_irqs import DeviceIrqs, classify

    names = text.split(" ")
    silent = []
    queues = parse_queue_dirs(names)
    refused = sum(1 for n in names if n.startswith(("rx-", "tx-"))) - len(queues)
    for kind, idx in queues:
        if kind not in ("rx", "tx") or not 0 <= idx < 1 << 20:
            silent.append(f"queue {kind}-{idx}")
    dev = DeviceIrqs("0000:81:00.0", "virtio2", frozenset({24, 25}))
    for name in names:
        for q in (classify(name, "eth0", dev, True) or []):
            if not 0 <= q[1] < 1 << 20 and q[1] != -1:
                silent.append(f"queue index {q[1]} from {name!r}")
    bus_info_of(["/sys/devices/" + n for n in names[:3]])
    return Outcome(int(refused > 0), tuple(silent))


def run_queue_map(text: str) -> Outcome:
    """An IRQ table from a fuzzed /proc/interrupts mapped to queues by driver naming."""
    from nettop.collectors.interrupts import parse_interrupts
    from nettop.collectors.queue_irqs import DeviceIrqs, map_by_names

    table, problems = parse_interrupts(text)
    silent = []
    for dev in (None, DeviceIrqs("0000:81:00.0", None, frozenset(list(table.irqs)[:8])),
                DeviceIrqs(None, "virtio0", None)):
        for ifname in ("eth0", "eth1", "enp3s0f0"):
            m = map_by_names(ifname, table, dev, [("rx", 0), ("tx", 0), ("rx", 1), ("tx", 1)])
            for q in m.queues:
                for irq in q.irqs:
                    if irq not in table.irqs:
                        silent.append(f"queue {q.kind}-{q.index} got unknown IRQ {irq}")
    return Outcome(len(problems), tuple(silent))


# --- rates of fuzzed counters ----------------------------------------------------------


def _snap(t: float, text_irq: str, text_sirq: str, text_snet: str, text_stat: str) -> Any:
    from nettop.collectors.cpustat import parse_stat
    from nettop.collectors.interrupts import parse_interrupts
    from nettop.collectors.softirqs import parse_softirqs
    from nettop.collectors.softnet import parse_softnet
    from nettop.model.snapshot import Snapshot

    table, p1 = parse_interrupts(text_irq)
    sirq, p2 = parse_softirqs(text_sirq)
    snet, p3 = parse_softnet(text_snet)
    times, p4 = parse_stat(text_stat)
    return Snapshot(t_mono=t, t_wall=1e9 + t, host="fuzz", kernel="6.18", online_cpus=tuple(sorted(times)),
                    interrupts=table, softirqs=sirq, cpu_times=times, softnet=snet,
                    problems=tuple(p1 + p2 + p3 + p4))


def make_rates(rng: random.Random) -> str:
    which = rng.randrange(4)
    kinds = ("interrupts", "softirqs", "softnet", "stat")
    return f"{which}\x1e" + mutate(rng.choice(seeds(kinds[which])), rng)


def _rate_checks(rates: Any) -> list[str]:
    bad = []
    lim = float(U64) / rates.elapsed_s
    for c in rates.cpus.values():
        for f in dataclasses.fields(c):
            v = getattr(c, f.name)
            if f.name.endswith("_pct") and v is not None and not 0.0 <= v <= 100.0 + 1e-6:
                bad.append(f"CPU {c.cpu} {f.name} = {v}")
            elif f.name.endswith("_per_s") and v is not None and not 0.0 <= v <= lim:
                bad.append(f"CPU {c.cpu} {f.name} = {v}")
        pct = sum(getattr(c, n) or 0.0 for n in ("user_pct", "system_pct", "idle_pct", "iowait_pct",
                                                  "irq_pct", "softirq_pct", "steal_pct"))
        if pct > 100.0 + 1e-6:
            bad.append(f"CPU {c.cpu} shares add up to {pct}")
    for r in rates.irqs.values():
        if r.per_s is not None and not 0.0 <= r.per_s <= lim:
            bad.append(f"IRQ {r.irq} {r.per_s}/s")
        if any(not 0.0 <= v <= lim for v in r.per_cpu_per_s.values()):
            bad.append(f"IRQ {r.irq} per-CPU rate out of range")
    return bad


def run_rates(text: str) -> Outcome:
    from nettop.model.rates import compute_rates
    from nettop.output.snapshot_json import build_document

    which_s, _, fuzzed = text.partition("\x1e")
    which = int(which_s) if which_s in ("0", "1", "2", "3") else 0
    files = [seeds(k)[0] for k in ("interrupts", "softirqs", "softnet", "stat")]
    good = _snap(0.0, *files)
    files[which] = fuzzed
    bad = _snap(1.0, *files)
    flagged = 0
    silent: list[str] = []
    for a, b in ((good, dataclasses.replace(bad, t_mono=1.0)), (dataclasses.replace(bad, t_mono=0.0),
                                                                dataclasses.replace(good, t_mono=1.0))):
        rates = compute_rates(a, b)
        json.dumps(build_document(a, b, rates, 1.0))
        flagged += len(rates.problems) + len(b.problems)
        found = _rate_checks(rates)
        if found and not (rates.problems or a.problems or b.problems):
            silent += found
    return Outcome(flagged, tuple(silent[:3]))


# --- the recording decoder -------------------------------------------------------------

_CODEC_SEED: list[tuple[Any, str, list[int], list[float]]] = []


def _codec_seed() -> tuple[Any, str, list[int], list[float]]:
    if not _CODEC_SEED:
        from nettop.record import codec

        files = [seeds(k)[0] for k in ("interrupts", "softirqs", "softnet", "stat")]
        snap = _snap(0.0, *files)
        skel, ints, floats = codec.split(snap)
        _CODEC_SEED.append((snap, skel, ints, floats))
    return _CODEC_SEED[0]


def make_codec(rng: random.Random) -> str:
    _, skel, ints, floats = _codec_seed()
    part = rng.randrange(3)
    texts = [skel, " ".join(map(str, ints)), " ".join(map(repr, floats))]
    texts[part] = mutate(texts[part], rng)
    return "\x1e".join(texts)


def run_codec(text: str) -> Outcome:
    from nettop.model.rates import compute_rates
    from nettop.output.snapshot_json import build_document
    from nettop.output.text_report import render
    from nettop.record import codec

    parts = (text.split("\x1e") + ["", "", ""])[:3]
    try:
        skel = json.loads(parts[0])
    except (ValueError, RecursionError):
        return Outcome(1)  # the store refuses such a configuration ("is damaged")
    ints = [int(t) for t in parts[1].split() if re.fullmatch(r"-?[0-9]{1,30}", t)]
    floats = []
    for t in parts[2].split():
        try:
            floats.append(float(t))
        except ValueError:
            pass
    try:
        snap = codec.Decoder(skel).build(ints, floats)
    except codec.CodecError:
        return Outcome(1)
    seed_snap = _codec_seed()[0]
    a = dataclasses.replace(seed_snap, t_mono=0.0)
    b = dataclasses.replace(snap, t_mono=1.0)
    rates = compute_rates(a, b)
    render(build_document(a, b, rates, 1.0))
    found = _rate_checks(rates)
    return Outcome(len(rates.problems), tuple(found[:3]) if found and not rates.problems else ())


def make_blob(rng: random.Random) -> str:
    from nettop.record import codec

    _, _, ints, _ = _codec_seed()
    base = ints if rng.random() < 0.5 else None
    vals = [v + rng.randrange(-3, 1000) for v in ints]
    blob = codec.pack_ints(vals, base)
    raw = blob.decode("latin-1")
    return ("b" if base else "n") + mutate(raw, rng)


def run_blob(text: str) -> Outcome:
    from nettop.record import codec

    _, _, ints, _ = _codec_seed()
    base = ints if text[:1] == "b" else None
    try:
        blob = text[1:].encode("latin-1")
    except UnicodeEncodeError:
        blob = text[1:].encode("utf-8", "surrogatepass")
    try:
        codec.unpack_ints(blob, base)
        codec.unpack_floats(blob)
        codec.unpack_floats_tagged(blob)
    except codec.CodecError:
        return Outcome(1)
    return Outcome(0)


# --- a whole recording file ------------------------------------------------------------

_STORE: dict[str, Any] = {}


def _store_setup() -> None:
    if _STORE:
        return
    from nettop.record.store import Writer

    d = tempfile.mkdtemp(prefix="nettop-fuzz-store-")
    path = os.path.join(d, "seed.nettop")
    files = [seeds(k)[0] for k in ("interrupts", "softirqs", "softnet", "stat")]
    w = Writer(path, {"host": "fuzz"})
    snap = _snap(0.0, *files)
    for i in range(6):
        w.add_sample(dataclasses.replace(snap, t_mono=float(i), t_wall=1e9 + i))
    w.close()
    _STORE.update(dir=d, seed=Path(path).read_bytes(), work=os.path.join(d, "work.nettop"))


def _store_teardown() -> None:
    if _STORE:
        shutil.rmtree(_STORE["dir"], ignore_errors=True)
        _STORE.clear()


_CELLS = (("meta", "value"), ("config", "skeleton"), ("config", "sha1"), ("sample", "t_wall"),
          ("sample", "t_mono"), ("sample", "config_id"), ("sample", "base_seq"), ("sample", "pred"),
          ("sample", "key_seq"), ("sample", "ints"), ("sample", "floats"), ("sample", "crc"),
          ("event", "t_wall"), ("event", "kind"), ("event", "text"), ("event", "seq"))
_CELL_VALUES = (None, "x", "", -1, 0, 2 ** 63 - 1, -(2 ** 63), 1e308, float("inf"), b"\x00\xff", "[[[[",
                "9" * 400, 1.5)


def _sql_mutation(rng: random.Random) -> bytes:
    """The seed recording with cells changed through SQLite: a well-formed file whose
    content is wrong (what a bug or a hand edit leaves, past the page-level checks)."""
    import sqlite3

    path = os.path.join(_STORE["dir"], "sql.nettop")
    Path(path).write_bytes(_STORE["seed"])
    db = sqlite3.connect(path)
    try:
        for _ in range(rng.choice((1, 1, 2, 3))):
            table, col = rng.choice(_CELLS)
            try:
                db.execute(f"UPDATE {table} SET {col} = ? WHERE rowid IN (SELECT rowid FROM {table} "
                           f"ORDER BY rowid LIMIT 1 OFFSET ?)", (rng.choice(_CELL_VALUES), rng.randrange(4)))
            except sqlite3.IntegrityError:  # NOT NULL, UNIQUE: the schema itself refuses it
                pass
        if rng.random() < 0.3:
            try:
                db.execute("INSERT INTO event (seq, t_wall, kind, text) VALUES (?, ?, ?, ?)",
                           (rng.choice((1, None, -5)), rng.choice(_CELL_VALUES), "problem",
                            rng.choice(_CELL_VALUES)))
            except sqlite3.IntegrityError:
                pass
        db.commit()
    finally:
        db.close()
    return Path(path).read_bytes()


def make_store(rng: random.Random) -> str:
    _store_setup()
    if rng.random() < 0.5:
        return _sql_mutation(rng).decode("latin-1")
    data = bytearray(_STORE["seed"])
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        op = rng.randrange(4)
        i = rng.randrange(len(data))
        if op == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            del data[rng.randrange(min(100, len(data)), len(data) + 1):]
        elif op == 2:
            data[i:i + 8] = rng.randbytes(8)
        else:
            j = rng.randrange(len(data))
            data[i:i + 64] = data[j:j + 64]
    return bytes(data).decode("latin-1")


def run_store(text: str) -> Outcome:
    from nettop.model.rates import compute_rates
    from nettop.record.store import Reader, RecordingError

    _store_setup()
    path = _STORE["work"]
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
    Path(path).write_bytes(text.encode("latin-1", "replace"))
    try:
        reader = Reader(path)
    except RecordingError:
        return Outcome(1)
    try:
        snaps = [s for s in reader.snapshots() if s is not None]
        reader.events()
        for a, b in zip(snaps, snaps[1:]):
            if b.t_mono > a.t_mono:
                compute_rates(a, b)
        return Outcome(len(reader.warnings) if hasattr(reader, "warnings") else 0)
    finally:
        reader.close()


# --- whole captured trees through the snapshot path -----------------------------------

_TREE: dict[str, Any] = {}
_INTERESTING = ("proc/interrupts", "proc/softirqs", "proc/stat", "proc/net/softnet_stat",
                "sys/devices/system/cpu/online", "sys/devices/system/cpu/possible",
                "smp_affinity_list", "effective_affinity_list", "affinity_hint", "/node",
                "rps_cpus", "xps_cpus", "rps_flow_cnt", "statistics/", "byte_queue_limits/",
                "numa_node", "local_cpulist", "ifindex", "speed", "proc/sys/", "comm", "cpulist")


def _tree_setup() -> None:
    if _TREE:
        return
    from treegen import generate_tree

    d = Path(tempfile.mkdtemp(prefix="nettop-fuzz-tree-"))
    root = generate_tree(d / "t", cpus=4, irqs=40, queues=4, offline=(2,))
    (root / "proc/1234").mkdir(parents=True, exist_ok=True)
    (root / "proc/1234/comm").write_text("irqbalance\n")
    (root / "sys/devices/system/node/node0").mkdir(parents=True, exist_ok=True)
    (root / "sys/devices/system/node/node0/cpulist").write_text("0-3\n")
    files, dirs = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for f in filenames:
            if not os.path.islink(os.path.join(dirpath, f)):
                files.append(os.path.join(rel, f))
        for n in dirnames:
            if re.search(r"[0-9]$", n) and not os.path.islink(os.path.join(dirpath, n)):
                dirs.append(os.path.join(rel, n))
    for dirpath, _, filenames in os.walk(root):  # msi_irqs entries are files named N
        if dirpath.endswith("msi_irqs"):
            dirs += [os.path.join(os.path.relpath(dirpath, root), f) for f in filenames]
    files.sort()
    dirs.sort()
    _TREE.update(dir=d, root=root, files=files, dirs=dirs,
                 hot=[f for f in files if any(k in f for k in _INTERESTING)])


def _tree_teardown() -> None:
    if _TREE:
        shutil.rmtree(_TREE["dir"], ignore_errors=True)
        _TREE.clear()


def make_tree(rng: random.Random) -> str:
    _tree_setup()
    root: Path = _TREE["root"]
    edits, renames = [], []
    for _ in range(rng.choice((1, 1, 2, 3))):
        if rng.random() < 0.2:
            rel = rng.choice(_TREE["dirs"])
            base = os.path.basename(rel)
            new = re.sub(r"[0-9]+$", lambda m: rng.choice(("²", "²⁹", "٣", "１", "0" * 30 + "7",
                                                              "4294967296", m.group(0) + "_1",
                                                              "-" + m.group(0), "99999999999999999999")), base)
            renames.append([rel, new])
        else:
            rel = rng.choice(_TREE["hot"] if rng.random() < 0.8 else _TREE["files"])
            text = (root / rel).read_bytes().decode("latin-1")
            if rel == "sys/devices/system/cpu/online" and rng.random() < 0.3:
                edits.append([rel, rng.choice(("0-4294967295\n", "0-400000000:1/2\n", "0-8192\n", "²\n"))])
            else:
                edits.append([rel, mutate_value(text, rng) if len(text) < 40 else mutate(text, rng)])
    return json.dumps({"edits": edits, "renames": renames}, ensure_ascii=True)


def run_tree(text: str) -> Outcome:
    from nettop.collectors.host import HostReader
    from nettop.kernel.sysroot import SysRoot
    from nettop.model.rates import compute_rates
    from nettop.output.snapshot_json import build_document
    from nettop.output.text_report import render

    _tree_setup()
    root: Path = _TREE["root"]
    spec = json.loads(text)
    saved: list[tuple[Path, bytes]] = []
    moved: list[tuple[Path, Path]] = []
    try:
        for rel, content in spec.get("edits", []):
            p = root / rel
            if p.is_file() and not p.is_symlink():
                saved.append((p, p.read_bytes()))
                p.write_bytes(content.encode("utf-8", "surrogatepass"))
        for rel, new in spec.get("renames", []):
            p = root / rel
            q = p.parent / new
            if p.exists() and not q.exists() and "/" not in new and new not in ("", ".", ".."):
                os.rename(p, q)
                moved.append((q, p))
        with HostReader(SysRoot(str(root))) as reader:
            a = reader.read()
            b = reader.read()
        b = dataclasses.replace(b, t_mono=a.t_mono + 1.0)
        rates = compute_rates(a, b)
        doc = build_document(a, b, rates, 1.0)
        json.dumps(doc)
        render(doc)
        found = _rate_checks(rates)
        silent = tuple(found[:3]) if found and not doc["problems"] else ()
        return Outcome(len(doc["problems"]), silent)
    finally:
        for q, p in reversed(moved):
            os.rename(q, p)
        for p, data in reversed(saved):
            p.write_bytes(data)


# --- typed values of nettop/actions (owned by the i18-actions branch) -----------------

ACTION_CPU_SEEDS = ("0-1", "0", "1", "3", "f0", "ff,00000000", "0x3", "0-7:2/4", "1,0", "none", "")
QDISC_SEEDS = ("5ms", "100us", "1s", "100mbit", "1gbit", "125kbps", "32k", "1m", "1000", "0x10")
SYSCTL_SEEDS = ("300", "1000", "4096 131072 6291456", "2", "8192", "0")
ETHTOOL_SEEDS = ("on", "off", "256", "0x10", "1", "0", "4096", "yes")


def _action_allowed() -> tuple[type[BaseException], ...]:
    from nettop.actions.base import ActionError
    from nettop.cli import UsageError

    return (ActionError, UsageError)


def _action_run(call: Callable[[str], Any]) -> Callable[[str], Outcome]:
    def run(text: str) -> Outcome:
        try:
            call(text)
        except _action_allowed():
            return Outcome(1)
        return Outcome(0)
    return run


def _value_maker(values: Sequence[str]) -> Callable[[random.Random], str]:
    def make(rng: random.Random) -> str:
        return mutate_value(rng.choice(values), rng)
    return make


def _check_cpus_action(text: str) -> Any:
    from nettop.actions.irq import check_cpus

    return check_cpus("fuzz", text)


def _rps_action(text: str) -> Any:
    from nettop.actions.rps_xps import RpsCpus

    return RpsCpus("lo", 0).normalize(text)


_QDISC_KEYS = (("tbf", "rate"), ("tbf", "burst"), ("tbf", "limit"), ("fq_codel", "target"),
               ("fq_codel", "interval"), ("pfifo", "limit"), ("bfifo", "limit"), ("cake", "bandwidth"))


def _qdisc_action(text: str) -> Any:
    from nettop.actions.qdisc import parse_param

    kind, key = _QDISC_KEYS[sum(map(ord, text[:4])) % len(_QDISC_KEYS)]
    return parse_param(kind, key, text)


def _ethtool_action(text: str) -> Any:
    from nettop.actions.ethtool import _parse

    _parse("rx-usecs", text, False)
    return _parse("adaptive-rx", text, True)


_SYSCTLS = ("net.core.netdev_budget", "net.core.netdev_max_backlog", "net.core.rmem_max",
            "net.ipv4.tcp_rmem", "net.core.rps_sock_flow_entries", "net.core.default_qdisc")


def _sysctl_action(text: str) -> Any:
    from nettop.actions.sysctl import Sysctl

    return Sysctl(_SYSCTLS[len(text) % len(_SYSCTLS)]).normalize(text)


TARGETS: list[Target] = [
    Target("interrupts", _text_maker("interrupts"), run_interrupts, ci_inputs=3000),
    Target("softirqs", _text_maker("softirqs"), run_softirqs, ci_inputs=8000),
    Target("softnet", _text_maker("softnet"), run_softnet, ci_inputs=6000),
    Target("cpustat", _text_maker("stat"), run_stat, ci_inputs=6000),
    Target("cpu_list", _value_maker(CPU_LIST_SEEDS), run_cpu_list, (ValueError,), ci_inputs=10000),
    Target("cpu_mask", _value_maker(CPU_MASK_SEEDS), run_cpu_mask, (ValueError,), ci_inputs=10000),
    Target("irq_affinity", _value_maker(IRQ_FILE_SEEDS), run_irq_affinity, ci_inputs=10000),
    Target("bql", make_bql, run_bql, ci_inputs=10000),
    Target("names", _value_maker(NAME_SEEDS), run_names, ci_inputs=5000),
    Target("queue_irqs", _text_maker("interrupts"), run_queue_map, ci_inputs=1500),
    Target("rates", make_rates, run_rates, ci_inputs=1500),
    Target("codec", make_codec, run_codec, ci_inputs=2000),
    Target("codec_blob", make_blob, run_blob, ci_inputs=3000),
    Target("store", make_store, run_store, ci_inputs=800, setup=_store_setup, teardown=_store_teardown),
    Target("tree", make_tree, run_tree, ci_inputs=500, setup=_tree_setup, teardown=_tree_teardown),
    Target("action_cpus", _value_maker(ACTION_CPU_SEEDS), _action_run(_check_cpus_action),
           group="actions", ci_inputs=5000),
    Target("action_rps_mask", _value_maker(ACTION_CPU_SEEDS), _action_run(_rps_action),
           group="actions", ci_inputs=5000),
    Target("action_qdisc_param", _value_maker(QDISC_SEEDS), _action_run(_qdisc_action),
           group="actions", ci_inputs=5000),
    Target("action_ethtool_param", _value_maker(ETHTOOL_SEEDS), _action_run(_ethtool_action),
           group="actions", ci_inputs=5000),
    Target("action_sysctl", _value_maker(SYSCTL_SEEDS), _action_run(_sysctl_action),
           group="actions", ci_inputs=5000),
]
BY_NAME = {t.name: t for t in TARGETS}
