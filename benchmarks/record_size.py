"""Recording size and speed: bytes per sample, projected 24 h at 1 Hz, open and seek time.

Two cases: this host, recorded live for a few seconds with the real HostReader; and a
generated 64-CPU / 32-queue host (tests/treegen.py) whose counters advance each second
by the generator's per-step increments scaled by a random factor 0.5-1.5, so deltas are
not all alike. For open/seek a 24 h file (86 400 samples) is built by recording one
hour of the generated host and repeating its rows with shifted times (counters repeat
per hour; file size and row layout are those of a real 24 h file).

Targets: 24 h of the 64-CPU host <= 100 MB; open <= 1 s; seek <= 50 ms.
Run: .venv/bin/python benchmarks/record_size.py [--hours-sampled 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.record import codec  # noqa: E402
from nettop.record.recorder import Recorder  # noqa: E402
from nettop.record.replay import ReplaySource  # noqa: E402
from nettop.record.store import Reader, Writer, _crc  # noqa: E402
from nettop.kernel.sysroot import SysRoot  # noqa: E402

DAY = 86_400
MB = 1e6


def file_size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def live_host(tmp: str, seconds: float) -> None:
    path = os.path.join(tmp, "live.nettop")
    with HostReader() as reader:
        rec = Recorder(reader, path, interval=0.5, duration=seconds, out=open(os.devnull, "w"))
        res = rec.run()
    db = sqlite3.connect(path)
    blob = db.execute("SELECT avg(length(ints) + length(floats) + 40) FROM sample").fetchone()[0]
    print(f"live host: {res.samples} samples, {blob:.0f} bytes/sample in rows "
          f"-> 24 h at 1 Hz ~ {blob * DAY / MB:.1f} MB (file now {file_size(path) / 1e3:.0f} kB)")


def generated_series(tmp: str, n: int, seed: int = 1, noise: str = "poisson"):
    """n snapshots of a generated 64-CPU / 32-queue host, 1 s apart.

    noise "poisson": each counter's rate drifts (x e^N(0, 0.02) per second, within
    1/4-4x of the generator's step) and each second's increment is that rate plus
    Poisson-like noise (sd sqrt(rate)), as event counters behave. noise "uniform":
    every increment independently 0.5-1.5x the step, white noise (the worst case).
    """
    from treegen import generate_tree

    snaps = []
    for step in (0, 1):
        d = Path(tmp) / f"tree{step}"
        generate_tree(d, cpus=64, irqs=256, queues=32, step=step)
        with HostReader(SysRoot(str(d))) as r:
            snaps.append(r.read())
    sk0, i0, f0 = codec.split(snaps[0])
    sk1, i1, _ = codec.split(snaps[1])
    assert sk0 == sk1, "generated tree changed shape between steps"
    skeleton = json.loads(sk0)
    inc = [b - a for a, b in zip(i0, i1)]
    rnd = random.Random(seed)
    ints = list(i0)
    rate = [float(d) for d in inc]
    for k in range(n):
        floats = list(f0)
        floats[0], floats[1] = 1000.0 + k, 1.8e9 + k
        yield codec.join(skeleton, ints, floats)
        if noise == "uniform":
            ints = [v + (round(d * rnd.uniform(0.5, 1.5)) if d > 0 else 0) for v, d in zip(ints, inc)]
            continue
        for j, d in enumerate(inc):
            if d > 0:
                r = min(4 * d, max(d / 4, rate[j] * math.exp(rnd.gauss(0, 0.02))))
                rate[j] = r
                ints[j] += max(0, round(r + rnd.gauss(0, math.sqrt(r))))


def generated_host(tmp: str, samples: int, noise: str) -> str:
    path = os.path.join(tmp, f"gen-{noise}.nettop")
    w = Writer(path, {"host": "gen64", "interval_s": 1.0})
    first = None
    write_s = 0.0  # add_sample alone, not the generator
    for snap in generated_series(tmp, samples, noise=noise):
        if first is None:
            first = snap
            _, ints, _ = codec.split(snap)
        t = time.perf_counter()
        w.add_sample(snap)
        write_s += time.perf_counter() - t
    w.close()
    db = sqlite3.connect(path)
    per, keys = db.execute("SELECT avg(length(ints) + length(floats) + 40), "
                           "sum(base_seq IS NULL) FROM sample").fetchone()
    size = file_size(path)
    print(f"64-CPU / 32-queue, {noise} noise: {len(ints)} ints per snapshot, {samples} samples ({keys} key samples), "
          f"{per:.0f} bytes/sample in rows, file {size / samples:.0f} bytes/sample "
          f"-> 24 h at 1 Hz ~ {size / samples * DAY / MB:.1f} MB (target <= 100 MB); "
          f"write {1000 * write_s / samples:.2f} ms/sample")
    return path


def day_file(src: str, tmp: str) -> str:
    """A 24 h file: the recorded hour's rows repeated with shifted seq and times."""
    path = os.path.join(tmp, "day.nettop")
    db = sqlite3.connect(src)
    db.execute("VACUUM INTO ?", (path,))
    db.close()
    db = sqlite3.connect(path)
    shas = dict(db.execute("SELECT id, sha1 FROM config"))
    rows = db.execute("SELECT seq, t_wall, t_mono, config_id, base_seq, pred, key_seq, ints, floats, crc FROM sample ORDER BY seq").fetchall()
    n = len(rows)
    copies = -(-DAY // n)
    with db:
        for c in range(1, copies):
            db.executemany("INSERT INTO sample VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                (s + c * n, tw + c * n, tm + c * n, cid, None if b is None else b + c * n, p, k + c * n, i, f,
                 _crc(s + c * n, cid, None if b is None else b + c * n, p, k + c * n, shas[cid], i, f,
                      (tm + c * n, tw + c * n)))
                for s, tw, tm, cid, b, p, k, i, f, crc in rows if s + c * n <= DAY])
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    print(f"24 h file: {DAY} samples, {os.path.getsize(path) / MB:.1f} MB on disk")
    return path


def open_and_seek(path: str) -> None:
    t = time.perf_counter()
    r = Reader(path)
    r.snapshot(r.index[0].seq)
    open_s = time.perf_counter() - t
    rnd = random.Random(2)
    seeks = []
    for _ in range(50):
        target = r.index[0].t_wall + rnd.uniform(0, DAY)
        r.drop_cache()  # cold: a jump, not the next sample
        t = time.perf_counter()
        pos = r.position(target)
        snap = r.snapshot(r.index[pos].seq)
        seeks.append(time.perf_counter() - t)
        assert snap is not None
    step = []
    for pos in range(1000, 1100):
        t = time.perf_counter()
        r.snapshot(r.index[pos].seq)
        step.append(time.perf_counter() - t)
    r.close()
    print(f"open 24 h: {open_s * 1000:.0f} ms (target <= 1000); seek to a random time: "
          f"median {statistics.median(seeks) * 1000:.1f} ms, max {max(seeks) * 1000:.1f} ms (target <= 50); "
          f"next sample {statistics.median(step) * 1000:.2f} ms")
    t = time.perf_counter()
    src = ReplaySource(path)
    src.paused = True
    src.start(lambda: None)
    ui_open = time.perf_counter() - t
    t = time.perf_counter()
    src.seek(src.reader.index[0].t_wall + DAY / 2)
    ui_seek = time.perf_counter() - t
    src.stop()
    print(f"ReplaySource: open + first point {ui_open * 1000:.0f} ms; seek with "
          f"{180} samples of chart history rebuilt {ui_seek * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--live-seconds", type=float, default=5.0)
    ap.add_argument("--samples", type=int, default=3600, help="generated samples recorded (default one hour)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        live_host(tmp, args.live_seconds)
        generated_host(tmp, args.samples // 4, "uniform")
        gen = generated_host(tmp, args.samples, "poisson")
        open_and_seek(day_file(gen, tmp))


if __name__ == "__main__":
    main()
