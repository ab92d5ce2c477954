"""NUMA nodes for a generated tree: `treegen.py` writes one node's worth of facts (the
NIC's), not the node directories, so a test or benchmark that needs a 4-socket host
writes `sys/devices/system/node/nodeN/cpulist` with this (the counters `treegen.py
--advance` rewrites are elsewhere, so the nodes stay)."""

from __future__ import annotations

import argparse
from pathlib import Path

from treegen import cpu_list


def set_nodes(dest: Path, cpus: int, nodes: int = 4) -> dict[int, int]:
    """Split CPUs 0..cpus-1 into `nodes` equal runs, node 0 first (as a BIOS numbers
    sockets); returns CPU -> node."""
    per = -(-cpus // nodes)
    out = {}
    for n in range(nodes):
        members = range(n * per, min(cpus, (n + 1) * per))
        d = Path(dest) / f"sys/devices/system/node/node{n}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpulist").write_text(cpu_list(members) + "\n")
        out.update({c: n for c in members})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--nodes", type=int, default=4)
    a = ap.parse_args()
    set_nodes(a.dest, a.cpus, a.nodes)


if __name__ == "__main__":
    main()
