"""`nettop record`'s CPU per sample on a big host: sampling, doctor and writing together.

On the generated 1,024-CPU / 16,384-IRQ / 4x128-queue / 4-node tree (tests/treegen.py,
with /sys/kernel/irq; `--cpus 256` for the 256-CPU one), one thread does what the
recorder's two threads do for each sample: HostReader.read(), LivePipeline.feed() (the
Timeline, the doctor) and Writer.add_sample() into a real recording file. Before each
sample, outside the measured time, the counters a busy host moves are advanced
(`Advancer`): every CPU's /proc/stat line, softnet_stat line and NET_RX/NET_TX counts,
every NIC queue IRQ's per_cpu_count on its CPU, and the NICs' statistics; so no reader
can get away with "the text did not change". The per_cpu_count files are rewritten in
place (`SysRoot.in_place`), as sysfs regenerates its own, so the reader holds them open
and reads them again as it does on a live kernel; `--open-each-tick` advances them by
rename instead, and the reader opens each afresh, as on a captured tree.

Prints, per sample (median): CPU of the read, of the pipeline (doctor included), of the
write, and their sum, also with the writes of a chain's key sample and its successor
(measured in the warm-up) spread over the KEY_EVERY samples of a chain, with the floor
of the read (raw reads of the files of one tick) beside it; the recording's bytes per sample and the projected size of 24 h at 1 s; and
the process's RSS after the run. Targets (issue 29): <= 25 ms of CPU per sample at
1,024 CPUs; 24 h <= 400 MB; RSS <= 200 MB. The first and last lines are the machine's
own speed then (benchmarks/machine.py).

    .venv/bin/python benchmarks/record_cost.py [--cpus 1024] [--samples 40] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.kernel.sysroot import SysRoot  # noqa: E402
from nettop.pipeline.live import LivePipeline  # noqa: E402
from nettop.pipeline.tap import EventCursor  # noqa: E402
from nettop.record.store import KEY_EVERY, Writer  # noqa: E402
from sampler_cost import floor_cpu  # noqa: E402  (the same floor: open + read of exactly these files)
from stepped_clock import SteppedClock  # noqa: E402  (tests/stepped_clock.py)

SIZES = {
    256: dict(cpus=256, irqs=4096, queues=64, nics=1, nodes=2, sparse=True),
    1024: dict(cpus=1024, irqs=16384, queues=128, nics=4, nodes=4, sparse=True),
}
U32 = 1 << 32
DAY = 86_400


def _write(path: str, text: str) -> None:
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Advancer:
    """Moves a generated tree's per-tick counters as a busy host's would move in one second."""

    def __init__(self, dest: Path, irq_paths: list[str], in_place: bool = True) -> None:
        self.dest = str(dest)
        self.stat = self._read("proc/stat")
        self.softnet = self._read("proc/net/softnet_stat")
        self.softirqs = self._read("proc/softirqs")
        from treegen import FiringIrqs  # tests/treegen.py

        self.irqs = FiringIrqs(irq_paths, in_place=in_place)
        stats = []
        for nic in sorted(os.listdir(os.path.join(self.dest, "sys/class/net"))):
            d = os.path.join(self.dest, "sys/class/net", nic, "statistics")
            for f in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets"):
                p = os.path.join(d, f)
                if os.path.exists(p):
                    stats.append((p, int(open(p).read())))
        self.stats = stats

    def _read(self, rel: str) -> str:
        with open(os.path.join(self.dest, rel)) as f:
            return f.read()

    def step(self, k: int) -> None:
        head, sep, tail = self.stat.partition("\nintr")
        lines = head.split("\n")
        out = [lines[0]]
        for j, line in enumerate(lines[1:]):
            f = line.split()
            v = [int(x) for x in f[1:]]
            soft = 5 + (j * 7 + k * 3) % 30  # each CPU's softirq share moves each second
            v[0] += 30 * k
            v[2] += 10 * k
            v[3] += (55 - soft + 15) * k
            v[5] += 5 * k
            v[6] += soft * k
            out.append(f[0] + " " + " ".join(map(str, v)))
        _write(os.path.join(self.dest, "proc/stat"), "\n".join(out) + sep + tail)
        sn = []
        for j, line in enumerate(self.softnet.splitlines()):
            f = line.split()
            f[0] = f"{(int(f[0], 16) + 750_000 * k + j * k) % U32:08x}"
            if j % 16 == 0:
                f[2] = f"{(int(f[2], 16) + 3 * k) % U32:08x}"
            f[9] = f"{(int(f[9], 16) + 500 * k) % U32:08x}"
            sn.append(" ".join(f))
        _write(os.path.join(self.dest, "proc/net/softnet_stat"), "\n".join(sn) + "\n")
        sl = []
        for line in self.softirqs.split("\n"):
            name, colon, rest = line.partition(":")
            if colon and name.strip() in ("NET_RX", "NET_TX"):
                add = 25_000 if name.strip() == "NET_RX" else 2_000
                vals = [(int(x) + add * k + i) % U32 for i, x in enumerate(rest.split())]
                line = name + ":" + "".join(f" {x:10d}" for x in vals)
            sl.append(line)
        _write(os.path.join(self.dest, "proc/softirqs"), "\n".join(sl))
        self.irqs.step(k)
        for p, base in self.stats:
            _write(p, f"{base + 1_000_000 * k}\n")  # whole: memory.py advances while nettop reads


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run(size: int, samples: int, keep: str | None, in_place: bool = True) -> dict[str, float]:
    from treegen import generate_tree  # tests/treegen.py

    base = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="nettop-recbench-"))
    dest = base / f"tree{size}"
    if not (dest / "proc/stat").exists():
        t = time.monotonic()
        generate_tree(dest, **SIZES[size])  # type: ignore[arg-type]
        print(f"(generated the {size}-CPU tree in {time.monotonic() - t:.0f} s: {dest})")
    out = base / f"rec{size}.nettop"
    if out.exists():
        out.unlink()
    root = SysRoot(str(dest), in_place=in_place)
    reader = HostReader(root, clock=SteppedClock(1.0))
    pipeline = LivePipeline(root, reader=reader, max_points=2)
    writer = Writer(str(out), {"host": reader.host, "kernel": reader.kernel, "interval_s": 1.0})
    cursor = EventCursor()
    try:
        key_bytes = 0
        chain_head = []  # CPU of writing a chain's key and its pred-1 successor: once per KEY_EVERY
        for warm in range(2):  # discovery, static device facts, the first chain
            if warm:
                # counters already move between the chain's first two samples, as on a busy
                # host: the writer's storage order (codec.Order) comes from that interval,
                # and from two idle reads it would leave every busy counter in the long tail
                adv = Advancer(dest, list(reader._irq_sysfs._paths.values()), in_place)
                adv.step(1)
            snap = reader.read()
            pipeline.feed(snap)
            before = writer.bytes_written
            events = cursor.new(snap, pipeline.timeline)
            t = time.thread_time()
            writer.add_sample(snap, events)
            chain_head.append(time.thread_time() - t)
            key_bytes = key_bytes or writer.bytes_written - before  # the first sample is a key
        floor_files = [str(dest / r) for r in ("proc/stat", "proc/net/softnet_stat", "proc/softirqs",
                                                "sys/devices/system/cpu/online")]
        floor_files += list(reader._irq_sysfs._paths.values())
        reads, feeds, writes, floors = [], [], [], []
        sizes = []
        for k in range(2, samples + 2):
            adv.step(k)
            t0 = time.thread_time()
            snap = reader.read()
            t1 = time.thread_time()
            point = pipeline.feed(snap)
            events = cursor.new(snap, pipeline.timeline)
            t2 = time.thread_time()
            before = writer.bytes_written
            writer.add_sample(snap, events)
            t3 = time.thread_time()
            sizes.append(writer.bytes_written - before)
            reads.append(t1 - t0)
            feeds.append(t2 - t1)
            writes.append(t3 - t2)
            floors.append(floor_cpu(floor_files, [], []))
            del point
    finally:
        writer.close()
        reader.close()
    # a key sample (absolute counters) every KEY_EVERY samples, differences between
    per_sample_bytes = (key_bytes + (KEY_EVERY - 1) * statistics.median(sizes)) / KEY_EVERY
    r, f, w = (statistics.median(x) * 1000 for x in (reads, feeds, writes))
    fl = statistics.median(floors) * 1000
    total = statistics.median(a + b + c for a, b, c in zip(reads, feeds, writes)) * 1000
    how = ("per_cpu_count rewritten in place and held open, as on a live kernel" if in_place
           else "per_cpu_count renamed over, opened afresh each tick, as on a captured tree")
    print(f"record at {size} CPUs ({samples} samples, counters advancing each sample; {how}):")
    print(f"  read (HostReader)     : {r:8.2f} ms   floor of its counter files {fl:.2f} ms "
          f"(stat, softnet, softirqs, {len(floor_files) - 4} per_cpu_count; settings files not counted)")
    print(f"  pipeline (doctor)     : {f:8.2f} ms")
    print(f"  write (store)         : {w:8.2f} ms")
    # the chain's first two samples (a key, then differences from it) cost more to write;
    # the median never sees them, so they are spread over the KEY_EVERY samples they serve
    head_extra = sum(chain_head) * 1000 - 2 * w
    print(f"  CPU per sample        : {total:8.2f} ms   median; with a chain's key and its successor "
          f"({chain_head[0] * 1000:.0f} + {chain_head[1] * 1000:.0f} ms to write) spread over {KEY_EVERY}: "
          f"{total + head_extra / KEY_EVERY:.2f} ms   (target <= 25 ms at 1,024 CPUs)")
    print(f"  bytes per sample      : {per_sample_bytes:8.0f}   (a key of {key_bytes / 1e3:.0f} kB every {KEY_EVERY}, "
          f"median {statistics.median(sizes):.0f} B between)   24 h at 1 s: {per_sample_bytes * DAY / 1e6:.0f} MB "
          "(target <= 400 MB)")
    print(f"  RSS after the run     : {_rss_mb():8.1f} MB")
    return {"total": total, "read": r, "feed": f, "write": w, "bytes": per_sample_bytes,
            "amortized": total + head_extra / KEY_EVERY}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="1024", help="256, 1024 or both (256,1024)")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--keep", help="generate the trees here and keep them (re-used when present)")
    ap.add_argument("--open-each-tick", action="store_true",
                    help="advance per_cpu_count by rename: the reader opens each afresh (a captured tree)")
    a = ap.parse_args()
    from nettop.pipeline.gc_policy import for_long_runs

    for_long_runs()  # as `nettop record` runs (nettop/cli.py): the collector's pace is part of its cost
    import machine  # benchmarks/machine.py: the 25 ms target is this machine's; so is its speed today

    print(machine.line())
    for size in (int(x) for x in re.split(r"[, ]+", a.cpus) if x):
        if size not in SIZES:
            print(f"record_cost: --cpus takes {', '.join(map(str, SIZES))}, not {size}", file=sys.stderr)
            return 2
        run(size, a.samples, a.keep, not a.open_each_tick)
    print(machine.line().replace("today", "at the end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
