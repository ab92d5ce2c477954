"""The effects table on real drivers: one row per action, what should move, before/after.

Boots the real-driver tier's guest (4 vCPUs, a 4-queue virtio-net NIC and an e1000e NIC,
tests/vm/realdrv.py), runs its seven checks under iperf3 traffic and prints the rows
they measured: nettop's figure before and after each action, and the independent
reading taken in the same window (/proc/interrupts, softnet_stat, /proc/irq, ping,
sysfs). Under qemu's software emulation the absolute rates are far below a real NIC's;
the directions and factors are what carry over.

Usage (root): .venv/bin/python benchmarks/effects.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from vm import realdrv  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", metavar="DIR", help="keep the guest's recording in DIR")
    args = ap.parse_args()
    reason = realdrv.why_not()
    if reason:
        print(f"effects: {reason}", file=sys.stderr)
        return 2
    outcome = realdrv.run()
    rows = realdrv.name_drivers(realdrv.effects(outcome.output), realdrv.nic_drivers(outcome.output))
    print("| action | figure | before | after | independent reading |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    exp = outcome.kept.get("experiment.md")
    if exp:
        print("\nnettop experiment in the guest (e1000e, 128 flows):\n")
        print(exp.decode())
    result = [line for line in outcome.output.splitlines() if " passed" in line or " failed" in line]
    print(f"\nguest: {result[-1] if result else 'no pytest summary'} (exit {outcome.rc})")
    if args.keep:
        for p in realdrv.write_kept(outcome, Path(args.keep)):
            print(f"kept {p}")
    return 0 if outcome.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
