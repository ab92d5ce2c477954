"""From two cumulative reads of the probes' maps to the counts of one interval.

The kernel side only ever adds, so the counts of an interval are differences of two
reads. An entry whose counters went backwards was restarted (a new NAPI or device at a
freed address, or a slot freed by the reader) and its whole value is the interval's.
Everything here is a pure function of decoded map contents.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Callable

from nettop.ebpf.cost import ProgRun
from nettop.ebpf.hist import diff
from nettop.ebpf.maps import HashReader, decode_sirq, ifname
from nettop.ebpf.sample import DropCounts, IrqCounts, NapiCounts, ProbeCost, SoftirqCounts

VECS = ("NET_TX", "NET_RX")
# Softirq runs timed per second and CPU before timing is sampled: enough for p99 in one
# interval, few enough that the clock reads cost little on a packet flood.
TIMED_PER_S = 10000


def napi_rows(cur, prev, cpus: list[int]) -> tuple[NapiCounts, ...]:
    """Per-CPU NAPI counts of the interval, including NAPIs that did not poll in it."""
    if cur is None:
        return ()
    before = napi_flat(prev or (), cpus)
    out = []
    for (ptr, cpu, napi_id), val in napi_flat(cur, cpus).items():
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


def hardirq_rows(cur, prev, name_of: Callable[[int], str]) -> tuple[IrqCounts, ...]:
    """Per-(IRQ, CPU) handler runs and time of the interval; quiet IRQs left out."""
    if cur is None:
        return ()
    before = dict(prev or ())
    out = []
    for key, val in cur:
        old = before.get(key, (0, 0))
        if old[0] > val[0]:
            old = (0, 0)
        if val[0] == old[0]:
            continue
        out.append(IrqCounts(irq=key[0], name=name_of(key[0]), cpu=key[1],
                             count=val[0] - old[0], time_ns=val[1] - old[1]))
    return tuple(out)


def drop_rows(cur, prev, cpus: list[int], reason_of: Callable[[int], str],
              ksym_of: Callable[[int], str]) -> tuple[DropCounts, ...]:
    """Drops of the interval summed over CPUs per reason, device and location."""
    if cur is None:
        return ()
    before = drops_flat(prev or (), cpus)
    sums: dict[tuple[int, str, int, int, int], int] = defaultdict(int)
    for key, val in drops_flat(cur, cpus).items():
        count, ifindex, netns, _, _, name = val
        old = before.get(key)
        n = count - old[0] if old is not None and old[0] <= count else count
        if n > 0:
            reason, _dev, location, _cpu, _ = key
            sums[(reason, ifname(name), ifindex, netns, location)] += n
    return tuple(
        DropCounts(reason=reason_of(reason), code=reason, ifname=dev, ifindex=ifindex,
                   netns=netns, location=ksym_of(location), count=n)
        for (reason, dev, ifindex, netns, location), n in sums.items())


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


def hash_reader(lib, bpf, name: str, kfmt, vfmt, ncpus: int = 0) -> HashReader:
    """A reader for bcc table `name`, after checking its compiled sizes match ours."""
    import ctypes as ct
    table = bpf[name.encode()]
    leaf = getattr(table, "sLeaf", table.Leaf)  # per-CPU tables keep the one-CPU type
    if ct.sizeof(table.Key) != kfmt.size or ct.sizeof(leaf) != vfmt.size:
        raise RuntimeError(f"map {name}: compiled key/value sizes "
                           f"{ct.sizeof(table.Key)}/{ct.sizeof(leaf)} differ from "
                           f"the reader's {kfmt.size}/{vfmt.size}")
    return HashReader(lib, table.map_fd, kfmt, vfmt, table.max_entries, ncpus)


def napi_flat(rows, cpus: list[int]) -> dict[tuple[int, int, int], tuple]:
    """{(napi address, cpu, napi_id): value} for the CPUs that polled each NAPI."""
    out = {}
    for (ptr,), per_cpu in rows:
        for idx, val in enumerate(per_cpu):
            if val[9]:  # seen: this CPU has polled it
                out[(ptr, cpus[idx] if idx < len(cpus) else idx, val[5])] = val
    return out


def drops_flat(rows, cpus: list[int]) -> dict[tuple[int, int, int, int, int], tuple]:
    """{(reason, device address, location, cpu, ifindex): value} per CPU that dropped."""
    out = {}
    for (reason, _, dev, location), per_cpu in rows:
        for idx, val in enumerate(per_cpu):
            if val[3]:  # seen
                cpu = cpus[idx] if idx < len(cpus) else idx
                out[(reason, dev, location, cpu, val[1])] = val
    return out


def softirq_rows(cur, prev, reader) -> tuple[SoftirqCounts, ...]:
    if not cur or reader is None:
        return ()
    now = decode_sirq(cur, reader.cpus)
    before = decode_sirq(prev, reader.cpus) if prev else {}
    out = []
    for cpu, rec in now.items():
        old = before.get(cpu)
        for i, vec in enumerate(VECS):
            def d(field: str) -> int:
                return rec[field][i] - (old[field][i] if old else 0)
            out.append(SoftirqCounts(
                cpu=cpu, vec=vec, raised=d("raised"), runs=d("runs"), timed=d("timed"),
                run_ns=d("run_ns"), waits=d("waits"), wait_ns=d("wait_ns"),
                wait_hist=diff(rec["wait_hist"][i], old["wait_hist"][i] if old else None),
                run_hist=diff(rec["run_hist"][i], old["run_hist"][i] if old else None)))
    return tuple(out)


def cost_rows(cur: dict[str, ProgRun], prev: dict[str, ProgRun] | None) -> tuple[ProbeCost, ...]:
    prev = prev or {}
    out = []
    for tp, run in cur.items():
        old = prev.get(tp, ProgRun())
        out.append(ProbeCost(prog=tp, run_ns=run.run_time_ns - old.run_time_ns,
                             runs=run.run_cnt - old.run_cnt,
                             missed=run.recursion_misses - old.recursion_misses))
    return tuple(out)
