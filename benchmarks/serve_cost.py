"""`nettop serve`: series count and CPU per scrape, on the live host and the 256-CPU tree.

Series: the default exposition of the generated 256-CPU / 4096-IRQ / 64-queue tree
(target <= 5000) and with --per-cpu-irqs. CPU per scrape, two ways:
- render: thread CPU to turn a new snapshot into the text (what the first scrape after
  each sample costs; later scrapes of the same sample reuse the families);
- HTTP: CPU of a running `nettop serve` process per /metrics request, from its
  /proc/PID/stat over N scrapes at 1 s (sampling included, as Prometheus would see it).
Peers in the same run: HostReader.read (the sampler's own tick) and, when Debian's
prometheus-node-exporter is installed, node_exporter's CPU per scrape of its default
collectors on this host.

Usage (root for the live host): .venv/bin/python benchmarks/serve_cost.py [--scrapes N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from treegen import generate_tree  # noqa: E402

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.kernel.sysroot import LIVE, SysRoot  # noqa: E402
from nettop.serve.exposition import render, series_count  # noqa: E402
from nettop.serve.metrics import Options, snapshot_families  # noqa: E402

SERIES_TARGET = 5000
NETTOP = str(Path(sys.executable).with_name("nettop"))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_ms(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        t = time.thread_time()
        fn()
        times.append((time.thread_time() - t) * 1000)
    return statistics.median(times)


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape_cost(argv: list[str], url: str, scrapes: int) -> tuple[float, int]:
    """(CPU ms per scrape of the process at 1 scrape/s, bytes of the last scrape)."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        body = b""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    body = r.read()
                if r.status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        time.sleep(2)
        start = proc_cpu_s(p.pid)
        for _ in range(scrapes):
            with urllib.request.urlopen(url, timeout=5) as r:
                body = r.read()
            time.sleep(1)
        return (proc_cpu_s(p.pid) - start) * 1000 / scrapes, len(body)
    finally:
        p.terminate()
        p.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=20)
    a = ap.parse_args()
    tree = generate_tree(Path(tempfile.mkdtemp(prefix="serve-cost.")) / "t")
    rows = []
    for name, root in (("live host", LIVE), ("256-CPU tree", SysRoot(str(tree)))):
        with HostReader(root) as r:
            snap = r.read()
            read_ms = cpu_ms(r.read, 5)
        fams = snapshot_families(snap)
        wide = snapshot_families(snap, Options(per_cpu_irqs=True))
        render_ms = cpu_ms(lambda: render(snapshot_families(snap)), 10)
        rows.append((name, len(snap.online_cpus), series_count(fams), series_count(wide), render_ms, read_ms))
    print("| host | CPUs | series (default) | series (--per-cpu-irqs) | render ms per new sample | HostReader.read ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, cpus, n, wide_n, rms, read_ms in rows:
        print(f"| {name} | {cpus} | {n:,} | {wide_n:,} | {rms:.1f} | {read_ms:.1f} |")
    tree_series = rows[1][2]
    print(f"\ndefault series on the 256-CPU tree: {tree_series:,} (target <= {SERIES_TARGET:,}): "
          f"{'met' if tree_series <= SERIES_TARGET else 'OVER'}")

    print(f"\nCPU per scrape at 1 scrape/s over {a.scrapes} scrapes (process CPU incl. its own 1 s sampling):")
    print("| exporter | host | CPU ms per scrape | bytes per scrape |")
    print("|---|---|---:|---:|")
    if os.geteuid() == 0:
        port = free_port()
        ms, size = scrape_cost([NETTOP, "serve", "--listen", f"127.0.0.1:{port}"],
                               f"http://127.0.0.1:{port}/metrics", a.scrapes)
        print(f"| nettop serve | live host | {ms:.1f} | {size:,} |")
    port = free_port()
    ms, size = scrape_cost([NETTOP, "serve", "--listen", f"127.0.0.1:{port}", "--root", str(tree)],
                           f"http://127.0.0.1:{port}/metrics", a.scrapes)
    print(f"| nettop serve | 256-CPU tree | {ms:.1f} | {size:,} |")
    ne = shutil.which("prometheus-node-exporter")
    if ne:
        port = free_port()
        ms, size = scrape_cost([ne, f"--web.listen-address=127.0.0.1:{port}"], f"http://127.0.0.1:{port}/metrics",
                               a.scrapes)
        print(f"| node_exporter (peer, default collectors) | live host | {ms:.1f} | {size:,} |")
    else:
        print("| node_exporter | - | not installed (apt-get install prometheus-node-exporter) | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
