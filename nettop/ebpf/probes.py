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
import dataclasses
import ctypes as ct
import os
import tempfile
import threading
import time
from typing import Any, Iterator, cast

from nettop.ebpf import preflight
from nettop.ebpf.cost import ProgRun, RunTimeStats, read_prog_run
from nettop.ebpf.deltas import (cost_rows, drop_rows, hardirq_rows, hash_reader,
                                irq_handler_names, napi_rows, own_netns, sample_mask,
                                softirq_rows)
from nettop.ebpf.duty import MIN_INTERVAL_S, Window, duty_for, events_in
from nettop.ebpf.maps import (DROP_KEY, DROP_VAL, IRQ_KEY, IRQ_VAL, NAPI_KEY, NAPI_VAL,
                              SIRQ_WORDS, HashReader, PerCpuReader)
from nettop.ebpf.program import PROBES, function_name, layout_from_btf, render
from nettop.ebpf.sample import EbpfSample, SoftirqCounts

_REASON_PREFIX = "SKB_DROP_REASON_"
__all__ = ["EbpfProbes"]


class EbpfProbes:
    """The deep probes of nettop; `probes` picks the groups to attach (see PROBES)."""

    PROBES = PROBES  # group -> tracepoints; a subclass may name others

    def __init__(self, probes: tuple[str, ...] | None = None, measure_cost: bool = True) -> None:
        self.probes = tuple(p for p in (probes or tuple(self.PROBES)) if p in self.PROBES)
        self.measure_cost = measure_cost
        self.attached: tuple[str, ...] = ()
        self.errors: tuple[str, ...] = ()
        self._lock = threading.RLock()
        self._bpf: Any = None  # bcc.BPF once loaded (bcc ships no types)
        self._stats = RunTimeStats()
        self._readers: dict[str, HashReader | PerCpuReader] = {}
        self._progs: dict[str, int] = {}  # tracepoint -> prog fd
        self._prev: dict[str, object] = {}
        self._t_prev = time.monotonic()
        self._reasons: dict[int, str] = {}
        self._irq_names: dict[int, str] = {}
        self._ksyms: dict[int, str] = {}
        self._netns_self = own_netns()
        self._possible_cpus: list[int] = []
        self._mask = 0
        self.duty = 1  # probes attached 1/duty of each interval (see duty.py)
        self._window = Window()
        self._timer: threading.Timer | None = None
        self._tracepoints: list[tuple[str, str]] = []  # (tracepoint name, function)
        self._starting = False

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
        """Compile and attach the enabled probes; False (and `errors` set) on failure.

        The compile (the slow part) runs without holding the lock, so take() from a
        sampler thread meanwhile returns at once ("starting") instead of waiting."""
        with self._lock:
            if self._bpf is not None or self._starting:
                return self._bpf is not None
            self._starting = True
        errors: list[str] = []
        bpf = None
        try:
            built = self._build(errors)
            if built is not None:
                bpf, groups = built
                with self._lock:
                    self._install(bpf, groups, errors)
        except Exception as exc:  # bcc raises bare Exceptions for attach failures
            errors.append(f"eBPF probes failed to start: {_one_line(exc)}")
            with self._lock:
                if self._bpf is None and bpf is not None:
                    self._bpf = bpf
                self._teardown()
        finally:
            with self._lock:
                self._starting = False
                self.errors = tuple(errors)
        return self.running

    def _build(self, errors: list[str]):
        """Check, then compile the program for the usable groups: (BPF, groups) or None."""
        for check in (preflight.bcc_problem, preflight.privilege_problem,
                      preflight.headers_problem):
            why = check()
            if why:
                errors.append(why)
                return None
        btf, why = preflight.load_btf()
        if btf is None:
            errors.append(why or "kernel BTF unreadable")
            return None
        missing = preflight.tracepoint_problems(btf, self.probes, self.PROBES)
        errors.extend(missing[g] for g in self.probes if g in missing)
        groups = tuple(g for g in self.probes if g not in missing)
        if not groups:
            return None
        self._reasons = {v: n.removeprefix(_REASON_PREFIX)
                         for v, n in btf.enum_values("skb_drop_reason").items()}
        from bcc import BPF
        from bcc.utils import get_possible_cpus

        self._possible_cpus = get_possible_cpus()
        text = render(groups, layout_from_btf(btf))
        with _captured_stderr() as err:
            try:
                bpf = BPF(text=text.encode())
            except Exception as exc:
                detail = _last_error_line(err.read()) or _one_line(exc)
                errors.append(f"eBPF probes did not compile: {detail}")
                return None
        return bpf, groups

    def _install(self, bpf, groups: tuple[str, ...], errors: list[str]) -> None:
        """Attach the compiled probes and take the baseline read (under the lock)."""
        from bcc.libbcc import lib

        self._bpf = bpf
        self._tracepoints = [(tp.partition(":")[2], function_name(tp))
                             for group in groups for tp in self.PROBES[group]]
        self._attach()
        self._progs = {name: bpf.funcs[fn.encode()].fd for name, fn in self._tracepoints}
        if self.measure_cost and not self._stats.enable():
            errors.append(self._stats.note)
        ncpus = len(self._possible_cpus)
        if "napi" in groups:
            self._readers["napi"] = hash_reader(lib, bpf, "napi_stats", NAPI_KEY, NAPI_VAL,
                                                ncpus)
        if "hardirq" in groups:
            self._readers["hardirq"] = hash_reader(lib, bpf, "irq_stats", IRQ_KEY, IRQ_VAL)
        if "drops" in groups:
            self._readers["drops"] = hash_reader(lib, bpf, "drop_stats", DROP_KEY, DROP_VAL,
                                                 ncpus)
        if "softirq" in groups:
            self._readers["softirq"] = PerCpuReader(lib, bpf[b"sirq"].map_fd, SIRQ_WORDS,
                                                    self._possible_cpus)
        self.attached = groups
        self._prev = self._read_raw()
        self._t_prev = time.monotonic()
        self._window = Window()
        self._window.opened(self._t_prev)

    def _attach(self) -> None:
        bpf = self._bpf
        for name, fn in self._tracepoints:
            if name.encode() not in bpf.raw_tracepoint_fds:
                bpf.attach_raw_tracepoint(tp=name.encode(), fn_name=fn.encode())

    def _detach(self) -> None:
        bpf = self._bpf
        for name, _ in self._tracepoints:
            if name.encode() in bpf.raw_tracepoint_fds:
                bpf.detach_raw_tracepoint(tp=name.encode())

    def _forget_pending(self) -> None:
        """Clear the per-CPU start times of IRQs and softirqs that were in flight when
        the probes were detached, so no wait or run spans a detached gap."""
        from bcc.libbcc import lib
        for group, table, words, keep in (("softirq", b"sirq", SIRQ_WORDS, 4),
                                          ("hardirq", b"irq_start", 2, 2)):
            if group not in self.attached:
                continue
            fd = self._bpf[table].map_fd
            n = max(1, len(self._possible_cpus))
            buf = (ct.c_uint64 * (words * n))()
            key = ct.c_uint32(0)
            if lib.bpf_lookup_elem(fd, ct.byref(key), buf) != 0:
                continue
            for cpu in range(n):
                for w in range(keep):  # the timestamps lead each record
                    buf[cpu * words + w] = 0
            lib.bpf_update_elem(fd, ct.byref(key), buf, 0)

    def _detach_for_duty(self) -> None:
        """Timer callback: end this interval's attached window."""
        with self._lock:
            if self._bpf is not None and self._window.open:
                self._detach()
                self._window.closed(time.monotonic())

    def _plan_next_interval(self, sample: EbpfSample, now: float) -> None:
        """Pick the duty from this interval's event rate and open the next window."""
        if sample.window_s > 0 and sample.elapsed_s >= MIN_INTERVAL_S:
            # Step down by halves only, so a flood with short pauses does not bring
            # back a fully attached interval each time it resumes.
            self.duty = max(duty_for(events_in(sample) / sample.window_s), self.duty // 2)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._window.open:
            self._forget_pending()
            self._attach()
            self._window.opened(now)
        if self.duty > 1:
            self._timer = threading.Timer(max(sample.elapsed_s, 0.05) / self.duty,
                                          self._detach_for_duty)
            self._timer.daemon = True
            self._timer.start()

    def stop(self) -> None:
        """Detach and unload every probe and turn run-time statistics back off."""
        with self._lock:
            self._teardown()

    def _teardown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.duty = 1
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
            raw[group] = reader.read()
        raw["cost"] = {tp: read_prog_run(fd) for tp, fd in self._progs.items()}
        return raw

    def take(self) -> EbpfSample:
        """Counts since the previous take() (or start()), never raising."""
        with self._lock:
            cpu0 = time.thread_time()
            now = time.monotonic()
            elapsed = now - self._t_prev
            if self._bpf is None:
                why = ("eBPF probes are starting",) if self._starting else (
                    self.errors or ("eBPF probes are not running",))
                return EbpfSample(elapsed_s=elapsed, errors=why)
            errors = list(self.errors)
            try:
                cur = self._read_raw()
            except OSError as exc:
                errors.append(f"cannot read the eBPF maps: {exc.strerror or exc}")
                return EbpfSample(elapsed_s=elapsed, probes=self.attached,
                                  errors=tuple(errors))
            prev, self._prev, self._t_prev = self._prev, cur, now
            window = self._window.take(now)
            self._collect_idle(cur, prev)
            softirq = softirq_rows(cur.get("softirq"), prev.get("softirq"),
                                   self._readers.get("softirq"))
            if softirq:
                self._set_sample_mask(softirq, window)
            cpus = self._possible_cpus
            sample = EbpfSample(
                elapsed_s=elapsed, window_s=window, duty=self.duty, probes=self.attached,
                napi=napi_rows(cur.get("napi"), prev.get("napi"), cpus),
                hardirq=hardirq_rows(cur.get("hardirq"), prev.get("hardirq"), self._irq_name),
                softirq=softirq,
                drops=drop_rows(cur.get("drops"), prev.get("drops"), cpus, self._reason,
                                self._ksym),
                # _read_raw keeps the programs' run counts under "cost", beside the maps' rows
                cost=cost_rows(cast("dict[str, ProgRun]", cur["cost"]),
                               cast("dict[str, ProgRun] | None", prev.get("cost"))),
                cost_note=self._stats.note,
                errors=tuple(errors),
                netns_self=self._netns_self,
            )
            self._plan_next_interval(sample, now)
            return dataclasses.replace(sample, read_cpu_s=time.thread_time() - cpu0)

    def _set_sample_mask(self, rows: tuple[SoftirqCounts, ...], window: float) -> None:
        """Time at most about TIMED_PER_S softirq runs per CPU and second (see
        program.py): the busiest CPU of this interval sets the rate for the next."""
        busiest = max((r.runs + r.raised) / 2 for r in rows) / max(window, 1e-3)
        mask = sample_mask(busiest)
        if mask != self._mask and self._bpf is not None:
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
