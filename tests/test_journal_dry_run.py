"""`undo`, `redo`, `revert` and `restore` with --dry-run show exactly what the real command
then does — the same writes in the same direction, or the same refusal — and change nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def nettop(state: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nettop.cli", *argv], capture_output=True, text=True,
                          cwd=ROOT, env={"NETTOP_STATE_DIR": str(state), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                          timeout=60)


def host(ifn: str) -> dict[str, str]:
    q = Path(f"/sys/class/net/{ifn}/queues")
    return {p.parent.name + "/" + p.name: p.read_text().strip() for p in sorted(q.glob("*/[rx]ps_cpus"))} | {
        "txqueuelen": Path(f"/sys/class/net/{ifn}/tx_queue_len").read_text().strip()}


def dry_then_real(state: Path, ifn: str, *argv: str) -> tuple[list, list]:
    """Run `argv --dry-run --json`, check it changed nothing, then the real command; return
    (what the dry-run said it would write, what the real command wrote)."""
    before, journal = host(ifn), (state / "journal.jsonl").read_text()
    dry = nettop(state, *argv, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert host(ifn) == before and (state / "journal.jsonl").read_text() == journal
    real = nettop(state, *argv, "--json")
    assert real.returncode == 0, real.stderr
    doc = json.loads(dry.stdout)
    assert doc["would_change"] == [w["text"] for w in doc["writes"]]
    would = [(w["key"], w["before"], w["value"], w["text"]) for w in doc["writes"]]
    did = [(r["key"], r["before"], r["requested"], r["text"]) for r in json.loads(real.stdout)["results"]]
    return would, did


def test_dry_runs_of_undo_redo_revert_restore_equal_the_real_runs(veth_lab, tmp_path):
    ifn = veth_lab.host_if
    assert nettop(tmp_path, "set", "rps", ifn, "all", "1").returncode == 0
    assert nettop(tmp_path, "set", "xps", ifn, "2", "0x3").returncode == 0
    assert nettop(tmp_path, "set", "txqueuelen", ifn, "777").returncode == 0

    would, did = dry_then_real(tmp_path, ifn, "undo")
    assert would == did == [(f"txqueuelen {ifn}", 777, 1000, f"txqueuelen {ifn}: 777 → 1000")]
    would, did = dry_then_real(tmp_path, ifn, "undo")  # the reverse direction, not the original
    assert would == did == [(f"xps_cpus {ifn} tx-2", "3", "0", f"xps_cpus {ifn} tx-2: 3 (CPUs 0-1) → 0 (off)")]
    would, did = dry_then_real(tmp_path, ifn, "redo")
    assert would == did == [(f"xps_cpus {ifn} tx-2", "0", "3", f"xps_cpus {ifn} tx-2: 0 (off) → 3 (CPUs 0-1)")]
    would, did = dry_then_real(tmp_path, ifn, "undo")
    would, did = dry_then_real(tmp_path, ifn, "undo")  # the group of four rps writes, newest first
    assert would == did and [w[0] for w in would] == [f"rps_cpus {ifn} rx-{q}" for q in (3, 2, 1, 0)]
    would, did = dry_then_real(tmp_path, ifn, "redo")
    assert would == did and len(did) == 4
    assert host(ifn)["rx-0/rps_cpus"] == "2"

    would, did = dry_then_real(tmp_path, ifn, "revert")
    assert would == did and {w[0] for w in would} == {f"rps_cpus {ifn} rx-{q}" for q in range(4)}
    assert all(v == "0" for k, v in host(ifn).items() if k.endswith("ps_cpus"))

    assert nettop(tmp_path, "set", "txqueuelen", ifn, "555").returncode == 0
    would, did = dry_then_real(tmp_path, ifn, "restore")
    assert would == did == [(f"txqueuelen {ifn}", 555, 1000, f"txqueuelen {ifn}: 555 → 1000")]


def test_a_dry_run_refuses_exactly_what_the_real_command_refuses(veth_lab, tmp_path):
    ifn = veth_lab.host_if
    # nothing to redo: the same line and status, and nothing happens
    assert nettop(tmp_path, "set", "rps", ifn, "0", "1").returncode == 0
    dry, real = nettop(tmp_path, "redo", "--dry-run"), nettop(tmp_path, "redo")
    assert (dry.returncode, dry.stderr) == (real.returncode, real.stderr) == (
        2, f"nettop: nothing to redo: the journal {tmp_path}/journal.jsonl has no undone change left\n")
    assert dry.stdout == real.stdout == ""
    # someone else changed the value: undo refuses, and so does its dry-run
    Path(f"/sys/class/net/{ifn}/queues/rx-0/rps_cpus").write_text("1")
    dry, real = nettop(tmp_path, "undo", "--dry-run"), nettop(tmp_path, "undo")
    assert (dry.returncode, dry.stderr) == (real.returncode, real.stderr)
    assert real.returncode == 2 and "changed by someone else" in real.stderr and real.stderr.count("\n") == 1
    assert Path(f"/sys/class/net/{ifn}/queues/rx-0/rps_cpus").read_text().strip() == "1"
    # --force: the dry-run shows the forced write, the real one makes it
    would, did = dry_then_real(tmp_path, ifn, "undo", "--force")
    assert would == did == [(f"rps_cpus {ifn} rx-0", "1", "0", f"rps_cpus {ifn} rx-0: 1 (CPUs 0) → 0 (off)")]
    # everything is back: revert's dry-run says nothing would change, and the real one does nothing
    dry, real = nettop(tmp_path, "revert", "--dry-run"), nettop(tmp_path, "revert")
    assert dry.returncode == real.returncode == 0
    assert dry.stdout == "revert: nothing would change\n" and real.stdout == "revert: nothing to put back\n"
    dry, real = nettop(tmp_path, "undo", "--dry-run"), nettop(tmp_path, "undo")
    assert (dry.returncode, dry.stderr) == (real.returncode, real.stderr) and "nothing to undo" in real.stderr
