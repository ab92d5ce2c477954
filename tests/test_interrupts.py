"""/proc/interrupts parsing on real captures (old and new kernels) and on the live kernel."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nettop.collectors.interrupts import parse_interrupts, read_interrupts
from nettop.kernel.sysroot import LIVE, SysRoot

DATA = Path(__file__).parent / "data" / "interrupts"
CAPTURES = sorted(DATA.glob("*.txt"))


def load(name: str) -> str:
    return (DATA / name).read_text()


def naive(text: str) -> tuple[list[int], dict[int, tuple[list[int], str]], dict[str, tuple[int, ...]]]:
    """An independent, slow reading: whitespace tokens, counts = the first len(cpus)."""
    lines = text.splitlines()
    cpus = [int(t[3:]) for t in lines[0].split()]
    rows, named = {}, {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        toks = rest.split()
        if label.strip().isdigit():
            rows[int(label)] = ([int(t) for t in toks[:len(cpus)]], line.rstrip())
        else:
            nums = []
            for t in toks[:len(cpus)]:
                if not t.isdigit():
                    break
                nums.append(int(t))
            named[label.strip()] = tuple(nums)
    return cpus, rows, named


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_capture_parses_like_a_token_by_token_reading(path):
    text = path.read_text()
    table, problems = parse_interrupts(text)
    cpus, rows, named = naive(text)
    assert problems == []
    assert table.cpus == tuple(cpus)
    assert set(table.irqs) == set(rows)
    for irq, (counts, line) in rows.items():
        got = table.irqs[irq]
        assert got.counts == tuple(counts), irq
        assert got.total == sum(counts)
        # the name is what the line ends with, the chip is the first word after the counts
        assert line.endswith(got.name)
        assert got.chip in line.split()[len(cpus) + 1:len(cpus) + 2]
    assert table.other == named


def test_mlx5_capture_names_counts_and_named_rows():
    table, _ = parse_interrupts(load("mlx5.Q6700.txt"))
    assert table.cpus == (0, 1, 2, 3)
    comp1 = table.irqs[31]
    assert (comp1.chip, comp1.hwirq, comp1.name) == ("PCI-MSI-edge", "", "mlx5_comp1@pci:0000:01:00.0")
    assert comp1.counts == (120112828, 5482507, 0, 0)
    assert table.irqs[18].name == "uhci_hcd:usb4, radeon"  # shared line: action list
    assert table.other["NMI"] == (13767, 6976, 2066, 6238)
    assert table.other["ERR"] == (0,) and table.other["MIS"] == (0,)


def test_old_kernel_chip_column_and_lines_without_an_action():
    table, _ = parse_interrupts(load("1xE3-1271.I217_and_X710.L2_mixed.masterconf.txt"))
    assert table.irqs[7].chip == "IR-IO-APIC-edge" and table.irqs[7].name == ""
    assert table.irqs[33].name == "i40e-eth0-TxRx-0"
    assert table.irqs[32].name == "i40e-0000:01:00.0:misc"


def test_new_kernel_chip_hwirq_and_name():
    table, _ = parse_interrupts(load("nettop-vm-6.18-virtio.txt"))
    assert table.cpus == (0, 1)
    out = table.irqs[39]
    assert (out.chip, out.hwirq, out.name) == ("PCI-MSIX-0000:00:03.0", "2-edge", "virtio2-output.0")
    ged = table.irqs[24]
    assert (ged.chip, ged.hwirq, ged.name) == ("IO-APIC", "5-edge", "ACPI:Ged")


def test_large_counts_in_a_32_cpu_capture():
    table, _ = parse_interrupts(load("strange-cpu.txt"))
    assert len(table.cpus) == 8
    assert table.irqs[61].name == "eth1-TxRx-0"
    assert table.irqs[61].counts[0] == 1832068106
    big, _ = parse_interrupts(load("2xE5-2640.i350_and_82599ES.l2_mixed.masterconf.txt"))
    assert big.cpus == tuple(range(32))


OFFLINE = (
    "           CPU0       CPU2       CPU3       \n"
    "  1:         10          0        300  IO-APIC   1-edge      i8042\n"
    " 40:          7     123456          0  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n"
    "NMI:          1          2          3   Non-maskable interrupts\n"
    "ERR:          0\n"
)


def test_offline_cpu_is_missing_from_header_and_counts_follow_the_ids():
    table, problems = parse_interrupts(OFFLINE)
    assert problems == []
    assert table.cpus == (0, 2, 3)
    per_cpu = dict(zip(table.cpus, table.irqs[40].counts))
    assert per_cpu == {0: 7, 2: 123456, 3: 0}
    assert table.other["NMI"] == (1, 2, 3)


def test_want_decides_which_counts_are_parsed_but_every_name_is_found():
    asked = []

    def want(irq: int, name: str) -> bool:
        asked.append((irq, name))
        return name.startswith("eth1-")

    table, _ = parse_interrupts(load("igb.E5606.txt"), want)
    assert (67, "eth1-rx-0") in asked and (58, "eth0-rx-0") in asked
    assert len(asked) == len(table.irqs)
    assert table.irqs[67].counts == (1389886576, 0, 0, 0) and table.irqs[67].total == 1389886576
    assert table.irqs[58].counts is None and table.irqs[58].total is None
    assert table.irqs[58].name == "eth0-rx-0"
    assert {i for i, q in table.irqs.items() if q.counts is not None} == set(range(66, 75)) - {66}


def test_line_that_is_not_fixed_width_is_read_token_by_token():
    text = load("nettop-vm-6.18-virtio.txt")
    squeezed = re.sub(r"^( 38:)\s+(\d+)\s+(\d+)\s+", r"\1 \2\t\3 ", text, flags=re.M)
    assert squeezed != text
    a, _ = parse_interrupts(text)
    b, problems = parse_interrupts(squeezed)
    assert problems == []
    assert b.irqs[38] == a.irqs[38]


def test_malformed_lines_become_problems_and_the_rest_is_parsed():
    text = OFFLINE.replace("  1:         10          0        300", "  1:         10  zz")
    text += "garbage without colon\n"
    table, problems = parse_interrupts(text)
    assert 40 in table.irqs and 1 not in table.irqs
    assert len(problems) == 2
    assert all("/proc/interrupts" in p.message for p in problems)


def test_no_header_is_one_problem():
    table, problems = parse_interrupts("")
    assert table.cpus == () and len(problems) == 1


def test_missing_file_under_a_root_is_a_problem(tmp_path):
    table, problems = read_interrupts(SysRoot(str(tmp_path)))
    assert table.irqs == {} and len(problems) == 1
    assert "proc/interrupts" in problems[0].message


def test_live_kernel_matches_a_naive_reading():
    with open("/proc/interrupts") as f:
        before = f.read()
    table, problems = read_interrupts(LIVE)
    assert problems == []
    cpus, rows, _ = naive(before)
    assert table.cpus == tuple(cpus)
    assert set(table.irqs) == set(rows)
    for irq, (counts, line) in rows.items():
        assert line.endswith(table.irqs[irq].name)
        # counters only grow between the two reads (wrap aside)
        assert all(b >= a for a, b in zip(counts, table.irqs[irq].counts))


ARM64 = (
    "           CPU0       CPU1\n"
    " 11:        262        109     GICv3  27 Level     arch_timer\n"
    " 13:          0          0     GICv3 412 Level     1004b800.serial:rx err\n"
    " 16:          0          0  ARMH0061:00   3 Edge      power\n"
    "IPI0:         9          9       Rescheduling interrupts\n"
    "Err:          0\n"
)


def test_arm64_level_column_and_names_with_spaces():
    table, problems = parse_interrupts(ARM64)
    assert problems == []
    timer = table.irqs[11]
    assert (timer.chip, timer.hwirq, timer.name, timer.counts) == ("GICv3", "27 Level", "arch_timer", (262, 109))
    assert table.irqs[13].name == "1004b800.serial:rx err"
    assert (table.irqs[16].chip, table.irqs[16].hwirq) == ("ARMH0061:00", "3 Edge")
    assert table.other == {"IPI0": (9, 9), "Err": (0,)}
