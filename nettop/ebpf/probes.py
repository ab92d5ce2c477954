"""EbpfProbes: load, read and unload nettop's deep probes (NAPI polls, hard IRQ time,
NET_RX/NET_TX softirq latency, packet drops by reason).

The probes are an optional view on top of the procfs counters: `available()` says in
one line why they cannot run here, `start()` compiles and attaches them (seconds of
clang work, so it is meant for a worker thread) and never raises, `take()` returns what
the kernel counted since the previous take. Counters stay cumulative in the kernel and
the differences are taken here, so nothing is lost between two reads and nothing is
sent per event. All methods may be called from any thread.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
import threading
import time
from collections import defaultdict
from typing import Iterator

from nettop.ebpf import preflight
from nettop.ebpf.cost import ProgRun, RunTimeStats, read_prog_run
from nettop.ebpf.hist import diff
from nettop.ebpf.maps import (DROP_KEY, DROP_VAL, IRQ_KEY, IRQ_VAL, NAPI_KEY, NAPI_VAL,
                              SIRQ_WORDS, HashReader, PerCpuReader, decode_sirq, ifname)
from nettop.ebpf.program import PROBES, function_name, layout_from_btf, render
from nettop.ebpf.sample import (DropCounts, EbpfSample, IrqCounts, NapiCounts, ProbeCost,
                                SoftirqCounts)

_VECS = ("NET_TX", "NET_RX")
# Softirq runs timed per second and CPU before timing is sampled: enough for p99 in one
# interval, few enough that the clock reads cost little on a packet flood.
TIMED_PER_S = 10000
_REASON_PREFIX = "SKB_DROP_REASON_"


class EbpfProbes:
    """The deep probes of nettop; `probes` picks the groups to attach (see PROBES)."""

    PROBES = PROBES  # group -> tracepoints; a subclass may name others

    def __init__(self, probes: tuple[str, ...] | None = None, measure_cost: bool = True) -> None:
        self.probes = tuple(p for p in (probes or tuple(self.PROBES)) if p in self.PROBES)
        self.measure_cost = measure_cost
        self.attached: tuple[str, ...] = ()
        self.errors: tuple[str, ...] = ()
        self._lock = threading.RLock()
        self._bpf = None
        self._stats = RunTimeStats()
        self._readers: dict[str, object] = {}
        self._progs: dict[str, int] = {}  # tracepoint -> prog fd
        self._prev: dict[str, object] = {}
        self._t_prev = time.monotonic()
        self._reasons: dict[int, str] = {}
        self._irq_names: dict[int, str] = {}
        self._ksyms: dict[int, str] = {}
        self._netns_self = own_netns()
        self._possible_cpus: list[int] = []
        self._mask = 0

    # --- availability ---------------------------------------------------------------

    @classmethod
    def available(cls, probes: tuple[str, ...] | None = None) -> tuple[bool, str]:
        """(True, what will attach) or (False, one line: what is missing and the fix)."""
        groups = tuple(probes or tuple(cls.PROBES))
        for check in (preflight.bcc_problem, preflight.privilege_problem,
                      preflight.headers_problem):
            why = check()
            if why:
                return False, why
        btf, why = preflight.load_btf()
        if btf is None:
            return False, why or "kernel BTF unreadable"
        missing = preflight.tracepoint_problems(btf, groups, cls.PROBES)
        if missing:
            return False, "; ".join(missing[g] for g in groups if g in missing)
        return True, f"eBPF probes available: {', '.join(groups)}"

    @property
    def running(self) -> bool:
        return self._bpf is not None

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> bool:
        """Compile and attach the enabled probes; False (and `errors` set) on failure."""
        with self._lock:
            if self._bpf is not None:
                return True
            errors: list[str] = []
            try:
                ok = self._start(errors)
            except Exception as exc:  # bcc raises bare Exceptions for attach failures
                errors.append(f"eBPF probes failed to start: {_one_line(exc)}")
                self._teardown()
                ok = False
            self.errors = tuple(errors)
            return ok

    def _start(self, errors: list[str]) -> bool:
        for check in (preflight.bcc_problem, preflight.privilege_problem,
                      preflight.headers_problem):
            why = check()
            if why:
                errors.append(why)
                return False
        btf, why = preflight.load_btf()
        if btf is None:
            errors.append(why or "kernel BTF unreadable")
            return False
        missing = preflight.tracepoint_problems(btf, self.probes, self.PROBES)
        errors.extend(missing[g] for g in self.probes if g in missing)
        groups = tuple(g for g in self.probes if g not in missing)
        if not groups:
            return False
        self._reasons = {v: n.removeprefix(_REASON_PREFIX)
                         for v, n in btf.enum_values("skb_drop_reason").items()}
        from bcc import BPF
        from bcc.libbcc import lib
        from bcc.utils import get_possible_cpus

        self._possible_cpus = get_possible_cpus()

        text = render(groups, layout_from_btf(btf))
        with _captured_stderr() as err:
            try:
                bpf = BPF(text=text.encode())
            except Exception as exc:
                detail = _last_error_line(err.read()) or _one_line(exc)
                errors.append(f"eBPF probes did not compile: {detail}")
                return False
        self._bpf = bpf
        for group in groups:
            for tp in self.PROBES[group]:
                name = tp.partition(":")[2]
                bpf.attach_raw_tracepoint(tp=name.encode(), fn_name=function_name(tp).encode())
                self._progs[name] = bpf.funcs[function_name(tp).encode()].fd
        if self.measure_cost and not self._stats.enable():
            errors.append(self._stats.note)
        if "napi" in groups:
            self._readers["napi"] = _hash_reader(lib, bpf, "napi_stats", NAPI_KEY, NAPI_VAL,
                                                 len(self._possible_cpus))
        if "hardirq" in groups:
            self._readers["hardirq"] = _hash_reader(lib, bpf, "irq_stats", IRQ_KEY, IRQ_VAL)
        if "drops" in groups:
            self._readers["drops"] = _hash_reader(lib, bpf, "drop_stats", DROP_KEY, DROP_VAL,
                                                  len(self._possible_cpus))
        if "softirq" in groups:
            self._readers["softirq"] = PerCpuReader(lib, bpf[b"sirq"].map_fd, SIRQ_WORDS,
                                                    self._possible_cpus)
        self.attached = groups
        self._prev = self._read_raw()
        self._t_prev = time.monotonic()
        return True

    def stop(self) -> None:
        """Detach and unload every probe and turn run-time statistics back off."""
        with self._lock:
            self._teardown()

    def _teardown(self) -> None:
        bpf, self._bpf = self._bpf, None
        if bpf is not None:
            bpf.cleanup()
            atexit.unregister(bpf.cleanup)
        self._stats.disable()
        self._readers, self._progs, self._prev = {}, {}, {}
        self.attached = ()

    # --- reading --------------------------------------------------------------------

    def _read_raw(self) -> dict[str, object]:
        raw: dict[str, object] = {}
        for group, reader in self._readers.items():
            raw[group] = reader.read()  # type: ignore[attr-defined]
        raw["cost"] = {tp: read_prog_run(fd) for tp, fd in self._progs.items()}
        return raw

    def take(self) -> EbpfSample:
        """Counts since the previous take() (or start()), never raising."""
        with self._lock:
            cpu0 = time.thread_time()
            now = time.monotonic()
            elapsed = now - self._t_prev
            if self._bpf is None:
                return EbpfSample(elapsed_s=elapsed, errors=self.errors or (
                    "eBPF probes are not running",))
            errors = list(self.errors)
            try:
                cur = self._read_raw()
            except OSError as exc:
                errors.append(f"cannot read the eBPF maps: {exc.strerror or exc}")
                return EbpfSample(elapsed_s=elapsed, probes=self.attached,
                                  errors=tuple(errors))
            prev, self._prev, self._t_prev = self._prev, cur, now
            self._collect_idle(cur, prev)
            softirq = _softirq(cur.get("softirq"), prev.get("softirq"),
                               self._readers.get("softirq"))
            if softirq:
                self._set_sample_mask(softirq, elapsed)
            sample = EbpfSample(
                elapsed_s=elapsed, probes=self.attached,
                napi=self._napi(cur.get("napi"), prev.get("napi")),
                hardirq=self._hardirq(cur.get("hardirq"), prev.get("hardirq")),
                softirq=softirq,
                drops=self._drops(cur.get("drops"), prev.get("drops")),
                cost=_cost(cur["cost"], prev.get("cost")),  # type: ignore[arg-type]
                cost_note=self._stats.note,
                read_cpu_s=time.thread_time() - cpu0,
                errors=tuple(errors),
                netns_self=self._netns_self,
            )
            return sample

    def _set_sample_mask(self, rows: tuple[SoftirqCounts, ...], elapsed: float) -> None:
        """Time at most about TIMED_PER_S softirq runs per CPU and second (see
        program.py): the busiest CPU of this interval sets the rate for the next."""
        busiest = max((r.runs + r.raised) / 2 for r in rows) / max(elapsed, 1e-3)
        mask = sample_mask(busiest)
        if mask != self._mask and self._bpf is not None:
            import ctypes as ct
            self._bpf[b"sirq_cfg"][ct.c_int(0)] = ct.c_uint64(mask)
            self._mask = mask

    def _collect_idle(self, cur: dict, prev: dict) -> None:
        """Free the slots of entries that did not change in this interval once a map is
        three quarters full (NAPIs of deleted devices, IRQs gone quiet), so new ones
        still find room. A freed entry restarts from zero if it comes back."""
        for group in ("napi", "hardirq", "drops"):
            reader = self._readers.get(group)
            rows = cur.get(group)
            if not isinstance(reader, HashReader) or not rows:
                continue
            if len(rows) * 4 < reader.max_entries * 3:
                continue
            old = dict(prev.get(group) or ())
            idle = [key for key, val in rows if old.get(key) == val]
            reader.delete(idle)
            gone = set(idle)
            cur[group] = [(k, v) for k, v in rows if k not in gone]

    def _napi(self, cur, prev) -> tuple[NapiCounts, ...]:
        if cur is None:
            return ()
        cpus = self._possible_cpus
        before = _napi_flat(prev or (), cpus)
        out = []
        for (ptr, cpu, napi_id), val in _napi_flat(cur, cpus).items():
            polls, work, full, empty, budget, _, ifindex, irq, netns, _, name = val
            old = before.get((ptr, cpu, napi_id))
            if old is not None and old[0] <= polls:
                polls, work = polls - old[0], work - old[1]
                full, empty = full - old[2], empty - old[3]
            dev = ifname(name)
            out.append(NapiCounts(
                ifname=dev, ifindex=ifindex, netns=netns, napi_id=napi_id,
                irq=irq if dev and irq >= 0 else None, cpu=cpu,
                polls=polls, work=work, full=full, empty=empty, budget=budget))
        return tuple(out)

    def _hardirq(self, cur, prev) -> tuple[IrqCounts, ...]:
        if cur is None:
            return ()
        before = dict(prev or ())
        out = []
        for key, val in cur:
            old = before.get(key, (0, 0))
            if val[0] == old[0]:
                continue
            out.append(IrqCounts(irq=key[0], name=self._irq_name(key[0]), cpu=key[1],
                                 count=val[0] - old[0], time_ns=val[1] - old[1]))
        return tuple(out)

    def _drops(self, cur, prev) -> tuple[DropCounts, ...]:
        if cur is None:
            return ()
        cpus = self._possible_cpus
        before = _drops_flat(prev or (), cpus)
        sums: dict[tuple[int, str, int, int, int], int] = defaultdict(int)
        for key, val in _drops_flat(cur, cpus).items():
            count, ifindex, netns, _, _, name = val
            old = before.get(key)
            n = count - old[0] if old is not None and old[0] <= count else count
            if n > 0:
                reason, _dev, location, _cpu, _ = key
                sums[(reason, ifname(name), ifindex, netns, location)] += n
        return tuple(
            DropCounts(reason=self._reason(reason), code=reason, ifname=dev, ifindex=ifindex,
                       netns=netns, location=self._ksym(location), count=n)
            for (reason, dev, ifindex, netns, location), n in sums.items())

    def _reason(self, code: int) -> str:
        name = self._reasons.get(code)
        if name:
            return name
        if code >> 16:  # a subsystem's own reasons (mac80211, openvswitch, ...)
            return f"SUBSYS{code >> 16}_{code & 0xFFFF}"
        return str(code)

    def _irq_name(self, irq: int) -> str:
        name = self._irq_names.get(irq)
        if name is None:
            name = irq_handler_names(irq)
            self._irq_names[irq] = name
        return name

    def _ksym(self, addr: int) -> str:
        sym = self._ksyms.get(addr)
        if sym is None:
            from bcc import BPF
            sym = BPF.ksym(addr, show_offset=True).decode("ascii", "replace")
            self._ksyms[addr] = sym
        return sym


def sample_mask(runs_per_s: float) -> int:
    """Mask for the softirq probes: time 1 in (mask + 1) raises and runs, so about
    TIMED_PER_S are timed per second on the busiest CPU (0: time every one)."""
    mask = 0
    while runs_per_s > TIMED_PER_S * (mask + 1) and mask < 1023:
        mask = mask * 2 + 1
    return mask


def own_netns() -> int:
    """Inode of this process's network namespace (what the probes report per device)."""
    try:
        return os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return 0


def irq_handler_names(irq: int, proc: str = "/proc/irq") -> str:
    """Handler names of `irq` from the directories /proc/irq/N/ holds, one per action."""
    try:
        with os.scandir(f"{proc}/{irq}") as it:
            names = sorted(e.name for e in it if e.is_dir())
    except OSError:
        return ""
    return ",".join(names)


def _hash_reader(lib, bpf, name: str, kfmt, vfmt, ncpus: int = 0) -> HashReader:
    import ctypes as ct
    table = bpf[name.encode()]
    leaf = getattr(table, "sLeaf", table.Leaf)  # per-CPU tables keep the one-CPU type
    if ct.sizeof(table.Key) != kfmt.size or ct.sizeof(leaf) != vfmt.size:
        raise RuntimeError(f"map {name}: compiled key/value sizes "
                           f"{ct.sizeof(table.Key)}/{ct.sizeof(leaf)} differ from "
                           f"the reader's {kfmt.size}/{vfmt.size}")
    return HashReader(lib, table.map_fd, kfmt, vfmt, table.max_entries, ncpus)


def _napi_flat(rows, cpus: list[int]) -> dict[tuple[int, int, int], tuple]:
    """{(napi address, cpu, napi_id): value} for the CPUs that polled each NAPI."""
    out = {}
    for (ptr,), per_cpu in rows:
        for idx, val in enumerate(per_cpu):
            if val[9]:  # seen: this CPU has polled it
                out[(ptr, cpus[idx] if idx < len(cpus) else idx, val[5])] = val
    return out


def _drops_flat(rows, cpus: list[int]) -> dict[tuple[int, int, int, int, int], tuple]:
    """{(reason, device address, location, cpu, ifindex): value} per CPU that dropped."""
    out = {}
    for (reason, _, dev, location), per_cpu in rows:
        for idx, val in enumerate(per_cpu):
            if val[3]:  # seen
                cpu = cpus[idx] if idx < len(cpus) else idx
                out[(reason, dev, location, cpu, val[1])] = val
    return out


def _softirq(cur, prev, reader) -> tuple[SoftirqCounts, ...]:
    if not cur or reader is None:
        return ()
    now = decode_sirq(cur, reader.cpus)
    before = decode_sirq(prev, reader.cpus) if prev else {}
    out = []
    for cpu, rec in now.items():
        old = before.get(cpu)
        for i, vec in enumerate(_VECS):
            def d(field: str) -> int:
                return rec[field][i] - (old[field][i] if old else 0)
            out.append(SoftirqCounts(
                cpu=cpu, vec=vec, raised=d("raised"), runs=d("runs"), timed=d("timed"),
                run_ns=d("run_ns"), waits=d("waits"), wait_ns=d("wait_ns"),
                wait_hist=diff(rec["wait_hist"][i], old["wait_hist"][i] if old else None),
                run_hist=diff(rec["run_hist"][i], old["run_hist"][i] if old else None)))
    return tuple(out)


def _cost(cur: dict[str, ProgRun], prev: dict[str, ProgRun] | None) -> tuple[ProbeCost, ...]:
    prev = prev or {}
    out = []
    for tp, run in cur.items():
        old = prev.get(tp, ProgRun())
        out.append(ProbeCost(prog=tp, run_ns=run.run_time_ns - old.run_time_ns,
                             runs=run.run_cnt - old.run_cnt,
                             missed=run.recursion_misses - old.recursion_misses))
    return tuple(out)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else exc.__class__.__name__)[:200]


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
    return lines[0][:200] if lines else ""


@contextlib.contextmanager
def _captured_stderr() -> Iterator:
    """Send fd 2 to a temporary file while bcc compiles: clang's warnings would
    otherwise be written over a full-screen UI. The file is yielded for reading."""
    tmp = tempfile.TemporaryFile(mode="w+")
    saved = os.dup(2)
    try:
        os.dup2(tmp.fileno(), 2)
        yield _Rewound(tmp)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        tmp.close()


class _Rewound:
    def __init__(self, f) -> None:
        self._f = f

    def read(self) -> str:
        self._f.flush()
        self._f.seek(0)
        return self._f.read()
