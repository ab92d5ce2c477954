"""IRQ affinity read-back: pure parsers on kernel text, captured /proc/irq trees (offline
CPUs, kernels without effective_affinity_list, 64-CPU masks, unreadable files), and the
live kernel: eth0's virtio IRQs, and a real move of the balloon's stats IRQ."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from nettop.collectors.cpus import parse_cpu_mask, read_online_cpus, read_possible_cpus
from nettop.collectors.irq_affinity import (
    parse_affinity_hint,
    parse_affinity_list,
    parse_node,
    read_irq_affinity,
)
from nettop.model.snapshot import IrqAffinity
from nettop.kernel.sysroot import LIVE, SysRoot

# This VM's (kernel 6.18, 2 CPUs) /proc/irq/38 = virtio2-input.0, as the kernel prints it.
VM_IRQ38 = {
    "smp_affinity": "3\n",
    "smp_affinity_list": "0-1\n",
    "effective_affinity": "2\n",
    "effective_affinity_list": "1\n",
    "affinity_hint": "3\n",
    "node": "-1\n",
}


def make_irqs(tmp: Path, irqs: dict[int, dict[str, str]]) -> SysRoot:
    """proc/irq/N/<file> with the given text; a value of None makes that name a directory
    (what an unreadable file looks like to a reader that runs as root)."""
    for irq, files in irqs.items():
        d = tmp / "proc" / "irq" / str(irq)
        d.mkdir(parents=True)
        for name, text in files.items():
            if text is None:
                (d / name).mkdir()
            else:
                (d / name).write_text(text)
    return SysRoot(str(tmp))


# --- parsers --------------------------------------------------------------------------


@pytest.mark.parametrize("text, cpus", [
    ("0-1\n", (0, 1)),
    ("1\n", (1,)),
    ("0-3,8-11\n", (0, 1, 2, 3, 8, 9, 10, 11)),
    ("\n", None),  # shut-down IRQ: no target
])
def test_parse_affinity_list(text, cpus):
    assert parse_affinity_list(text) == cpus


@pytest.mark.parametrize("text, cpus", [
    ("3\n", (0, 1)),
    ("0\n", None),
    ("00000000,00000000\n", None),
    ("00000000,00000f00\n", (8, 9, 10, 11)),
    ("ffffffff,ffffffff\n", tuple(range(64))),  # 64-CPU host, comma-grouped
    ("80000000,00000001\n", (0, 63)),
])
def test_parse_affinity_hint_mask(text, cpus):
    assert parse_affinity_hint(text) == cpus


@pytest.mark.parametrize("text, node", [("-1", None), ("0", 0), ("3\n", 3)])
def test_parse_node(text, node):
    assert parse_node(text) == node


def test_parsers_reject_garbage():
    for parse, text in ((parse_affinity_list, "zz"), (parse_affinity_hint, "0x3"),
                        (parse_node, "node0")):
        with pytest.raises(ValueError):
            parse(text)


# --- captured trees -------------------------------------------------------------------


def test_vm_capture_reads_requested_effective_and_hint(tmp_path):
    root = make_irqs(tmp_path, {38: VM_IRQ38})
    got, problems = read_irq_affinity(root, [38])
    assert problems == []
    assert got == {38: IrqAffinity(38, affinity=(0, 1), effective=(1,), hint=(0, 1), node=None)}


def test_kernel_without_effective_affinity_gives_none_without_problem(tmp_path):
    files = {k: v for k, v in VM_IRQ38.items() if not k.startswith("effective")}
    files["node"] = "1\n"
    root = make_irqs(tmp_path, {38: files})
    got, problems = read_irq_affinity(root, [38])
    assert problems == []
    assert got[38].effective is None
    assert got[38].affinity == (0, 1)
    assert got[38].node == 1


def test_kernel_without_node_file(tmp_path):
    files = {k: v for k, v in VM_IRQ38.items() if k != "node"}  # CONFIG_NUMA=n
    got, problems = read_irq_affinity(make_irqs(tmp_path, {38: files}), [38])
    assert problems == [] and got[38].node is None


def test_offline_cpus_requested_but_never_effective(tmp_path):
    # GIVEN an 8-CPU host with CPUs 2 and 3 offline: the requested list keeps them, the
    # kernel targets an online CPU
    root = make_irqs(tmp_path, {70: {
        "smp_affinity_list": "0-7\n", "effective_affinity_list": "4\n",
        "affinity_hint": "0c\n", "node": "0\n"}})
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-1,4-7\n")
    got, problems = read_irq_affinity(root, [70])
    online, _ = read_online_cpus(root)
    assert problems == []
    assert got[70].affinity == tuple(range(8))  # as requested, not clipped to online CPUs
    assert set(got[70].effective) <= set(online)
    assert got[70].hint == (2, 3)  # the driver may hint offline CPUs; shown as is


def test_64_cpu_host_masks(tmp_path):
    root = make_irqs(tmp_path, {120: {
        "smp_affinity_list": "32-63\n", "effective_affinity_list": "40\n",
        "affinity_hint": "00000100,00000000\n", "node": "1\n"}})
    got, problems = read_irq_affinity(root, [120])
    assert problems == []
    assert got[120] == IrqAffinity(120, tuple(range(32, 64)), (40,), (40,), 1)


def test_all_zero_hint_is_none(tmp_path):
    root = make_irqs(tmp_path, {5: {**VM_IRQ38, "affinity_hint": "00000000,00000000\n"}})
    got, _ = read_irq_affinity(root, [5])
    assert got[5].hint is None


def test_vanished_irq_is_skipped_without_problem(tmp_path):
    root = make_irqs(tmp_path, {38: VM_IRQ38})
    got, problems = read_irq_affinity(root, [38, 39, 4000])
    assert list(got) == [38]
    assert problems == []


def test_only_the_irqs_asked_for_are_read(tmp_path):
    # every other IRQ's files are unreadable: touching any of them would be a problem
    broken = {name: None for name in VM_IRQ38}
    root = make_irqs(tmp_path, {**{i: broken for i in range(1, 40) if i != 38}, 38: VM_IRQ38})
    got, problems = read_irq_affinity(root, [38])
    assert problems == []
    assert list(got) == [38]


def test_unreadable_affinity_is_one_line_problem_and_the_rest_is_read(tmp_path):
    root = make_irqs(tmp_path, {38: {**VM_IRQ38, "smp_affinity_list": None}})
    got, problems = read_irq_affinity(root, [38])
    assert got[38].affinity is None
    assert got[38].effective == (1,)
    assert len(problems) == 1
    msg = problems[0].message
    assert "/proc/irq/38/smp_affinity_list" in msg and "\n" not in msg
    assert "directory" in msg.lower()


def test_unreadable_hint_and_malformed_effective(tmp_path):
    root = make_irqs(tmp_path, {38: {**VM_IRQ38, "affinity_hint": None,
                                     "effective_affinity_list": "one\n"}})
    got, problems = read_irq_affinity(root, [38])
    assert got[38].affinity == (0, 1)
    assert got[38].effective is None and got[38].hint is None
    sources = sorted(p.source for p in problems)
    assert sources == ["/proc/irq/38/affinity_hint", "/proc/irq/38/effective_affinity_list"]
    assert any("malformed" in p.message and "'one'" in p.message for p in problems)


def test_dangling_symlink_for_effective_list_reads_as_absent(tmp_path):
    root = make_irqs(tmp_path, {38: {k: v for k, v in VM_IRQ38.items()
                                     if k != "effective_affinity_list"}})
    os.symlink("gone", tmp_path / "proc/irq/38/effective_affinity_list")
    got, problems = read_irq_affinity(root, [38])
    assert got[38].effective is None and problems == []


# --- the live kernel ------------------------------------------------------------------


def _irqs_named(pattern: str) -> dict[int, str]:
    out = {}
    with open("/proc/interrupts") as f:
        for line in f:
            head, _, rest = line.partition(":")
            if head.strip().isdigit():
                name = rest.split()[-1]
                if re.fullmatch(pattern, name):
                    out[int(head)] = name
    return out


@pytest.mark.live
def test_live_eth0_virtio_irqs_agree_with_the_mask_files():
    irqs = _irqs_named(r"virtio\d+-(input|output)\.\d+")
    if not irqs:
        pytest.skip("no virtio_net queue IRQs on this host")
    got, problems = read_irq_affinity(LIVE, irqs)
    assert problems == []
    assert set(got) == set(irqs)
    online = set(read_online_cpus(LIVE)[0])
    possible = set(read_possible_cpus(LIVE)[0])
    for irq, aff in got.items():
        # cross-check the list files against the mask files the kernel prints beside them
        assert aff.affinity == parse_cpu_mask(LIVE.read_line(f"proc/irq/{irq}/smp_affinity"))
        assert set(aff.affinity) <= possible
        if os.path.exists(f"/proc/irq/{irq}/effective_affinity"):
            assert aff.effective == parse_cpu_mask(
                LIVE.read_line(f"proc/irq/{irq}/effective_affinity"))
            assert set(aff.effective) <= online


@pytest.mark.live
def test_live_moving_the_balloon_stats_irq_is_seen_requested_then_effective():
    named = _irqs_named(r"virtio\d+-stats")
    online = read_online_cpus(LIVE)[0]
    if not named or len(online) < 2:
        pytest.skip("needs a virtio balloon stats IRQ and 2 online CPUs")
    irq = next(iter(named))
    path = f"/proc/irq/{irq}/smp_affinity_list"
    before = LIVE.read_line(f"proc/irq/{irq}/smp_affinity_list")
    start = read_irq_affinity(LIVE, [irq])[0][irq]
    target = next(c for c in online if c not in (start.effective or ()))
    try:
        with open(path, "w") as f:
            f.write(f"{target}\n")
        now = read_irq_affinity(LIVE, [irq])[0][irq]
        assert now.affinity == (target,)
        # x86 without interrupt remapping moves the vector at the next interrupt: until
        # then the kernel still targets the old CPU, which is why both sets are read.
        assert now.effective in (start.effective, (target,))
        deadline = time.monotonic() + 30  # the balloon reports stats every few seconds
        while now.effective != (target,) and time.monotonic() < deadline:
            time.sleep(0.2)
            now = read_irq_affinity(LIVE, [irq])[0][irq]
        assert now.effective == (target,)
    finally:
        with open(path, "w") as f:
            f.write(before + "\n")
    assert LIVE.read_line(f"proc/irq/{irq}/smp_affinity_list") == before
