"""benchmarks/effects.py names each NIC's driver in its rows, from the NIC lines the
real-driver guest prints (tests/vm_realdrv/conftest.py); the VM itself is not booted here."""

from __future__ import annotations

from vm import realdrv

GUEST_OUTPUT = """\
tests/vm_realdrv/test_real_drivers.py .......
NIC\teth0\tvirtio_net
NIC\teth1\te1000e
EFFECT\teth0 rx-2 under iperf3\tirq/s (nettop vs /proc/interrupts)\t10\t12\t11
EFFECT\tcoalesce eth1 rx-usecs 10->5000\trx irq/s\t900\t40\t
EFFECT\tset irq 24 0->1\tIRQ 24 irq/s on CPU 1\t0\t300\t
EFFECT\tveth10 stays\tnothing\t0\t0\t
"""


def test_rows_name_each_nics_driver():
    rows = realdrv.name_drivers(realdrv.effects(GUEST_OUTPUT), realdrv.nic_drivers(GUEST_OUTPUT))
    assert [r[0] for r in rows] == ["eth0 (virtio_net) rx-2 under iperf3",
                                    "coalesce eth1 (e1000e) rx-usecs 10->5000",
                                    "set irq 24 0->1", "veth10 stays"]
    assert rows[0][1:] == ["irq/s (nettop vs /proc/interrupts)", "10", "12", "11"]


def test_output_of_a_guest_without_nic_lines_is_left_as_it_was():
    out = "EFFECT\tcoalesce eth1 rx-usecs 10->5000\trx irq/s\t900\t40\t\n"
    assert realdrv.name_drivers(realdrv.effects(out), realdrv.nic_drivers(out)) == realdrv.effects(out)
