"""The doctor on captured trees: what no VM here can show (two NUMA nodes, irqbalance), read
through the same HostReader as the live host, one second apart (tests/treegen.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from treegen import generate_tree
from nettop.collectors.host import HostReader
from nettop.doctor import evaluate
from nettop.kernel.sysroot import SysRoot
from nettop.model.timeline import Timeline

FIRST_IRQ = 24  # treegen's first IRQ: the NIC's queue IRQs follow it


def read_pair(t0: Path, t1: Path) -> dict:
    tl = Timeline()
    for tree in (t0, t1):
        with HostReader(SysRoot(str(tree))) as r:
            snap = r.read()
        # a captured tree has no clock of its own: one second apart
        tl.append(snap.__class__(**{**{f: getattr(snap, f) for f in snap.__slots__},
                                    "t_mono": 100.0 + (tree == t1), "t_wall": 1.7e9 + (tree == t1)}))
    return {f.id: f for f in evaluate(tl.points())}


def trees(tmp_path: Path, cpus: int = 16, queues: int = 4) -> tuple[Path, Path]:
    kw = dict(cpus=cpus, irqs=queues + 8, queues=queues)
    return generate_tree(tmp_path / "t0", step=0, **kw), generate_tree(tmp_path / "t1", step=1, **kw)


def two_nodes(tree: Path, cpus: int) -> None:
    for node, cpulist in ((0, f"0-{cpus // 2 - 1}"), (1, f"{cpus // 2}-{cpus - 1}")):
        d = tree / f"sys/devices/system/node/node{node}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpulist").write_text(cpulist + "\n")


def pin(tree: Path, irq: int, cpu: int) -> None:
    d = tree / f"proc/irq/{irq}"
    for name in ("smp_affinity_list", "effective_affinity_list"):
        (d / name).write_text(f"{cpu}\n")


def tidy(tree: Path, prev: Path | None, cpus: int, queues: int) -> None:
    """Queue IRQs on the NIC's node, one per CPU; softnet drops and squeezes not moving."""
    for q in range(queues):
        pin(tree, FIRST_IRQ + q, cpus // 2 + q)
        (tree / f"sys/class/net/eth0/queues/tx-{q}/xps_cpus").write_text(f"{1 << (cpus // 2 + q):x}\n")
    if prev is not None:
        old = (prev / "proc/net/softnet_stat").read_text().splitlines()
        new = (tree / "proc/net/softnet_stat").read_text().splitlines()
        rows = []
        for a, b in zip(old, new):
            fa, fb = a.split(), b.split()
            fb[1], fb[2] = fa[1], fa[2]
            rows.append(" ".join(fb))
        (tree / "proc/net/softnet_stat").write_text("\n".join(rows) + "\n")
    stats = tree / "sys/devices/pci0000:80/0000:81:00.0/net/eth0/statistics/rx_dropped"
    stats.write_text("0\n")


@pytest.fixture
def tidy_trees(tmp_path: Path) -> tuple[Path, Path]:
    t0, t1 = trees(tmp_path)
    for t, prev in ((t0, None), (t1, t0)):
        two_nodes(t, 16)
        tidy(t, prev, 16, 4)
    return t0, t1


def test_a_tidy_two_node_tree_gives_no_finding(tidy_trees):
    assert read_pair(*tidy_trees) == {}


def test_queue_irqs_on_the_other_numa_node_are_named_with_the_numa_fix(tidy_trees):
    t0, t1 = tidy_trees
    for t in (t0, t1):
        pin(t, FIRST_IRQ + 1, 2)  # node 0; the NIC is on node 1 (CPUs 8-15)
    f = read_pair(t0, t1)["numa-locality:eth0"]
    assert f.figures["far_irqs"] == 1 and f.fix == ("nettop set irq eth0 numa",)
    assert "NIC-local CPUs: 8-15" in f.evidence


def test_rps_on_the_other_node_is_named_with_an_rps_fix_on_the_local_cpus(tidy_trees):
    t0, t1 = tidy_trees
    for t in (t0, t1):
        (t / "sys/class/net/eth0/queues/rx-0/rps_cpus").write_text("0003\n")
    f = read_pair(t0, t1)["numa-locality:eth0"]
    assert f.figures["far_rps"] == 1 and f.fix == ("nettop set rps eth0 all 8-15",)


def test_xps_on_the_other_node_gets_one_fix_line_per_remote_queue(tidy_trees):
    t0, t1 = tidy_trees
    for t in (t0, t1):
        (t / "sys/class/net/eth0/queues/tx-2/xps_cpus").write_text("1\n")
    f = read_pair(t0, t1)["numa-locality:eth0"]
    assert f.figures["far_xps"] == 1 and f.fix == ("nettop set xps eth0 2 10",)


def test_irqbalance_running_over_a_manual_spread(tidy_trees):
    t0, t1 = tidy_trees
    for t in (t0, t1):
        (t / "proc/4242").mkdir(parents=True)
        (t / "proc/4242/comm").write_text("irqbalance\n")
    f = read_pair(t0, t1)["irqbalance:eth0"]
    assert "manual affinity" in f.title and "irqbalance" in (f.command or "")


def test_no_irqbalance_and_every_queue_irq_on_cpu0(tidy_trees):
    t0, t1 = tidy_trees
    for t in (t0, t1):
        for q in range(4):
            pin(t, FIRST_IRQ + q, 0)
    found = read_pair(t0, t1)
    assert found["irqbalance:eth0"].fix == ("nettop set irq eth0 spread 8-15",)
    assert "numa-locality:eth0" in found  # CPU 0 is also on the far node


def test_the_generated_256_cpu_tree_shows_its_drops_squeezes_and_remote_irqs(tmp_path):
    """treegen's host: mlx5 on node 1 (CPUs 128-255) with its IRQs on CPUs 0-63, and
    softnet dropping 7/s and squeezing 3/s on every CPU."""
    t0, t1 = generate_tree(tmp_path / "a", step=0), generate_tree(tmp_path / "b", step=1)
    found = read_pair(t0, t1)
    assert found["softnet-drops:host"].figures["dropped_per_s"] == pytest.approx(7 * 256)
    assert found["time-squeeze:host"].figures["time_squeeze_per_s"] == pytest.approx(3 * 256)
    assert found["numa-locality:eth0"].figures["far_irqs"] == 64
