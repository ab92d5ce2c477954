"""Damaged captured trees through `nettop snapshot --root`: one line each, never a
traceback, at once. These are the trees that crashed it before (issue 18)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from treegen import generate_tree

NETTOP = [sys.executable, "-m", "nettop.cli"]


@pytest.fixture
def tree(tmp_path):
    return generate_tree(tmp_path / "t", cpus=4, irqs=40, queues=4)


def _snapshot(root):
    t0 = time.monotonic()
    r = subprocess.run([*NETTOP, "snapshot", "--json", "-i", "0.1", "--root", str(root)],
                       capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
    assert all(line.startswith("nettop: ") for line in r.stderr.splitlines()), r.stderr
    assert took < 20
    return json.loads(r.stdout), r.stderr


def _replace(path, old, new):
    """Replace bytes as the kernel would hold them: files are read as latin-1, so "²" is
    the single byte 0xb2 that str.isdigit() accepts and int() refuses."""
    data = path.read_bytes()
    assert old.encode("latin-1") in data
    path.write_bytes(data.replace(old.encode("latin-1"), new.encode("latin-1"), 1))


def test_a_non_decimal_digit_in_an_msi_irqs_entry_is_ignored(tree):
    msi = next(tree.glob("sys/devices/**/msi_irqs"))
    (msi / "²").write_text("msix\n")
    (msi / "²⁹").write_text("msix\n")
    doc, _ = _snapshot(tree)
    assert doc["interfaces"]["eth0"]["queues"]


def test_non_decimal_digits_in_proc_irq_and_proc_pid_names_are_ignored(tree):
    (tree / "proc/irq/²⁹").mkdir(parents=True)
    (tree / "proc/irq/²⁹/smp_affinity_list").write_text("0-1\n")
    (tree / "proc/²").mkdir()
    (tree / "proc/²/comm").write_text("irqbalance\n")
    (tree / "run/irqbalance").mkdir(parents=True)
    (tree / "run/irqbalance/irqbalance².sock").write_text("")
    doc, _ = _snapshot(tree)
    assert doc["host_config"]["irqbalance_running"] is False


def _interrupts_only(tree):
    """The tree as a kernel or capture without /sys/kernel/irq: /proc/interrupts is then
    where the per-IRQ counts come from (with it, nettop never reads that file)."""
    shutil.rmtree(tree / "sys/kernel/irq")
    return tree


def test_a_non_ascii_cell_in_the_interrupts_header_is_one_problem(tree):
    _interrupts_only(tree)
    _replace(tree / "proc/interrupts", "CPU1", "CPU²")
    doc, err = _snapshot(tree)
    assert any("/proc/interrupts" in p and "header" in p for p in doc["problems"]), doc["problems"]
    assert "/proc/interrupts" in err


def test_a_non_ascii_cell_in_the_softirqs_header_is_one_problem(tree):
    _replace(tree / "proc/softirqs", "CPU1", "CPU²")
    doc, _ = _snapshot(tree)
    assert any("/proc/softirqs" in p for p in doc["problems"]), doc["problems"]


@pytest.mark.parametrize("online", ["0-4294967295", "0-400000000:1/2", "0-99999999999"])
def test_an_absurd_online_cpu_range_is_refused_at_once(tree, online):
    (tree / "sys/devices/system/cpu/online").write_text(online + "\n")
    doc, _ = _snapshot(tree)
    assert any("cpu/online" in p and "beyond the highest possible CPU" in p for p in doc["problems"])
    assert doc["online_cpus"] == [0, 1, 2, 3]  # from /proc/stat instead


def test_a_per_cpu_file_that_disagrees_with_the_online_cpus_is_a_problem(tree):
    lines = (tree / "proc/net/softnet_stat").read_text().splitlines(keepends=True)
    (tree / "proc/net/softnet_stat").write_text("".join(lines[:-1]))
    doc, _ = _snapshot(tree)
    assert any("softnet_stat is inconsistent with the online CPUs" in p for p in doc["problems"])


def test_interrupts_holding_another_files_content_is_a_problem(tree):
    _interrupts_only(tree)
    (tree / "proc/interrupts").write_text((tree / "proc/softirqs").read_text())
    doc, _ = _snapshot(tree)
    assert any("holds no numbered IRQ line" in p for p in doc["problems"]), doc["problems"]


def test_a_duplicated_cpu_line_in_proc_stat_is_a_problem(tree):
    text = (tree / "proc/stat").read_text().splitlines(keepends=True)
    cpu1 = next(ln for ln in text if ln.startswith("cpu1 "))
    (tree / "proc/stat").write_text("".join(text).replace(cpu1, cpu1 + cpu1, 1))
    doc, _ = _snapshot(tree)
    assert any("cpu1 has two lines" in p for p in doc["problems"]), doc["problems"]


def test_a_long_run_of_blanks_in_an_irq_name_is_read_at_once(tree):
    _interrupts_only(tree)
    text = (tree / "proc/interrupts").read_text()
    (tree / "proc/interrupts").write_text(text.replace("mlx5_comp1@", "mlx5" + " " * 200_000 + "comp1@", 1))
    _snapshot(tree)


@pytest.mark.parametrize("bad", ["1,2,x,4", "1,2", "", "99999999999999999999999,1,1,1", "7" * 5000])
def test_a_damaged_per_cpu_count_is_one_problem_and_the_counts_come_from_proc_interrupts(tree, bad):
    irq = next(d for d in (tree / "sys/kernel/irq").iterdir() if "mlx5_comp1@" in (d / "actions").read_text())
    (irq / "per_cpu_count").write_text(bad + "\n")
    doc, err = _snapshot(tree)
    assert doc["nettop"]["irq_counts_source"] == "/proc/interrupts"
    said = [p for p in doc["problems"] if "per_cpu_count" in p]
    assert len(said) == 1 and "proc/interrupts instead" in said[0] and "\n" not in said[0], doc["problems"]
    assert doc["irqs"][irq.name]["count"] > 0  # from /proc/interrupts: known, never 0
