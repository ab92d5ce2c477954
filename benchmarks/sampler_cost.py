"""Sampler cost per tick against the floor: merely reading the same kernel data.

For the live host and for a generated 256-CPU / 4096-IRQ / 64-queue tree, prints:
  - the sampler's CPU time per tick (thread CPU time of HostReader.read(), median of N),
  - the floor: CPU time to open+read() exactly the files a tick read (recorded by
    wrapping os.open/os.listdir/os.readlink over N ticks, their clock stepped by 1 s so
    that the settings rotation reads what it would at a 1 s interval; per-tick means),
    plus, live, the raw netlink dumps (links, qdiscs) received as bytes without parsing,
  - their ratio. Targets: <= 3x the floor; <= 20 ms per tick on the 256-CPU tree.

Usage: .venv/bin/python benchmarks/sampler_cost.py [--ticks N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import builtins
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.kernel.sysroot import SysRoot  # noqa: E402


def record_accesses(reader: HostReader, ticks: int = 1) -> tuple[list[str], list[str], list[str]]:
    """Paths `ticks` ticks open, list and read links of (all of them, in order)."""
    opened: list[str] = []
    listed: list[str] = []
    linked: list[str] = []
    real_open, real_listdir, real_readlink = os.open, os.listdir, os.readlink
    real_builtin_open = builtins.open

    def bo(path, mode="r", *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(path, str) and "r" in mode and "+" not in mode:
            opened.append(path)
        return real_builtin_open(path, mode, *a, **kw)

    def o(path, flags, *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(path, str) and (flags & (os.O_WRONLY | os.O_RDWR)) == 0:
            opened.append(path)
        return real_open(path, flags, *a, **kw)

    def ld(path="."):  # type: ignore[no-untyped-def]
        listed.append(path)
        return real_listdir(path)

    def rl(path, *a, **kw):  # type: ignore[no-untyped-def]
        linked.append(path)
        return real_readlink(path, *a, **kw)

    os.open, os.listdir, os.readlink = o, ld, rl  # type: ignore[assignment]
    builtins.open = bo
    try:
        for _ in range(ticks):
            reader.read()
    finally:
        os.open, os.listdir, os.readlink = real_open, real_listdir, real_readlink  # type: ignore[assignment]
        builtins.open = real_builtin_open
    return opened, listed, linked


def _netlink_dump(msg_type: int, family_hdr: bytes) -> int:
    """Receive a whole rtnetlink dump as raw bytes; returns the byte count."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    try:
        hdr = struct.pack("=LHHLL", 16 + len(family_hdr), msg_type, 0x301, 1, 0)  # NLM_F_REQUEST|DUMP
        s.sendto(hdr + family_hdr, (0, 0))
        total = 0
        while True:
            data = s.recv(1 << 16)
            total += len(data)
            off = 0
            done = False
            while off + 16 <= len(data):
                length, typ = struct.unpack_from("=LH", data, off)
                if typ in (2, 3):  # NLMSG_ERROR, NLMSG_DONE
                    done = True
                off += (length + 3) & ~3
                if length == 0:
                    break
            if done:
                return total
    finally:
        s.close()


def floor_cpu(opened: list[str], listed: list[str], linked: list[str], netlink: bool) -> float:
    t = time.thread_time()
    for p in opened:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            while os.read(fd, 1 << 20):
                pass
        except OSError:
            pass
        os.close(fd)
    for p in listed:
        try:
            os.listdir(p)
        except OSError:
            pass
    for p in linked:
        try:
            os.readlink(p)
        except OSError:
            pass
    if netlink:
        _netlink_dump(18, struct.pack("=BxHiII", 0, 0, 0, 0, 0))  # RTM_GETLINK
        _netlink_dump(38, struct.pack("=BxxxiLLL", 0, 0, 0, 0, 0))  # RTM_GETQDISC
    return time.thread_time() - t


class SteppedClock:
    """A monotonic clock that moves `interval` seconds per tick: the settings rotation
    (nettop/collectors/settings_rotation.py) spreads its reads over time, so ticks taken
    back to back would read fewer settings files than ticks at the sampler's interval."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.t = time.monotonic()

    def __call__(self) -> float:
        self.t += self.interval
        return self.t


def measure(label: str, root: SysRoot, ticks: int, interval: float = 1.0) -> dict[str, float]:
    with HostReader(root, clock=SteppedClock(interval)) as reader:
        reader.read()  # warm caches (string tables, static device facts)
        # the files of `ticks` ticks at `interval`: with the settings rotation, ticks
        # read different settings files, so the floor and the counts are per-tick means
        opened, listed, linked = record_accesses(reader, ticks)
        costs = []
        for _ in range(ticks):
            t = time.thread_time()
            reader.read()
            costs.append(time.thread_time() - t)
    floors = [floor_cpu(opened, listed, linked, False) / ticks + floor_cpu([], [], [], root.live)
              for _ in range(3)]
    tick = statistics.median(costs)
    floor = statistics.median(floors)
    print(f"{label}:")
    print(f"  files read per tick: {len(opened) / ticks:.1f} opened, {len(listed) / ticks:.1f} listed, "
          f"{len(linked) / ticks:.1f} links (mean of {ticks} ticks at {interval:g} s)"
          + (", + netlink link and qdisc dumps" if root.live else ""))
    print(f"  sampler CPU per tick : {tick * 1000:8.2f} ms (median of {ticks})")
    print(f"  floor (read only)    : {floor * 1000:8.2f} ms")
    print(f"  ratio                : {tick / floor:8.2f}x   (target <= 3x)")
    return {"tick": tick, "floor": floor, "opened": len(opened) / ticks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--keep", help="write the generated tree here and keep it")
    args = ap.parse_args()

    measure("live host", SysRoot("/"), args.ticks)

    from treegen import generate_tree  # tests/treegen.py

    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(args.keep or tmp) / "host256"
        t = time.monotonic()
        generate_tree(dest, cpus=256, irqs=4096, queues=64)
        print(f"\n(generated 256-CPU / 4096-IRQ / 64-queue tree in {time.monotonic() - t:.1f} s)")
        big = measure("generated 256-CPU tree", SysRoot(str(dest)), args.ticks)
        ok = big["tick"] <= 0.020
        print(f"  per tick vs 20 ms    : {'ok' if ok else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
