"""`nettop set/undo/redo/journal/revert` end to end on a lab veth, through nettop's own parser."""

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


def rps(ifname: str, q: int) -> str:
    return (Path(f"/sys/class/net/{ifname}/queues/rx-{q}/rps_cpus")).read_text().strip()


def test_set_rps_dry_run_changes_nothing_and_writes_no_journal(veth_lab, tmp_path):
    r = nettop(tmp_path, "set", "rps", veth_lab.host_if, "0", "1", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dry_run"] and doc["changes"][0]["value"] == "2" and doc["changes"][0]["before"] == "0"
    assert rps(veth_lab.host_if, 0) == "0"
    assert not (tmp_path / "journal.jsonl").exists()


def test_set_undo_redo_journal_revert(veth_lab, tmp_path):
    ifn = veth_lab.host_if
    r = nettop(tmp_path, "set", "rps", ifn, "all", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert [x["after"] for x in json.loads(r.stdout)["results"]] == ["2"] * 4
    r = nettop(tmp_path, "set", "xps", ifn, "1", "0-1")
    assert r.returncode == 0 and r.stdout.startswith(f"xps_cpus {ifn} tx-1: 0 (off) → 3 (CPUs 0-1)")
    assert nettop(tmp_path, "undo").returncode == 0
    assert Path(f"/sys/class/net/{ifn}/queues/tx-1/xps_cpus").read_text().strip() == "0"
    assert nettop(tmp_path, "undo").returncode == 0
    assert [rps(ifn, q) for q in range(4)] == ["0"] * 4
    r = nettop(tmp_path, "undo")
    assert r.returncode == 2 and r.stderr.startswith("nettop: nothing to undo")
    assert nettop(tmp_path, "redo").returncode == 0
    assert [rps(ifn, q) for q in range(4)] == ["2"] * 4
    doc = json.loads(nettop(tmp_path, "journal", "--json").stdout)
    assert len(doc["undo"]) == 1 and len(doc["redo"]) == 1 and doc["drift"] == []
    assert [e["action"] for e in doc["entries"]].count("undo") == 5
    r = nettop(tmp_path, "revert", "--json")
    assert r.returncode == 0 and len(json.loads(r.stdout)["results"]) == 4
    assert [rps(ifn, q) for q in range(4)] == ["0"] * 4
    assert "no changes" in nettop(tmp_path, "journal").stdout


def test_set_qdisc_mq_children_and_sysctl_triples(veth_lab, tmp_path):
    ifn = veth_lab.host_if
    r = nettop(tmp_path, "set", "qdisc", ifn, "mq", "children=bfifo", "limit=30000", "--yes")
    assert r.returncode == 0, r.stderr
    kids = [q for q in json.loads(subprocess.run(["tc", "-j", "qdisc", "show", "dev", ifn],
                                                capture_output=True, text=True).stdout) if not q.get("root")]
    assert {(q["kind"], q["options"]["limit"]) for q in kids} == {("bfifo", 30000)}
    before = Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()
    new = [before[0], str(int(before[1]) + 4096), before[2]]
    r = nettop(tmp_path, "set", "sysctl", "net.ipv4.tcp_rmem", *new)
    assert r.returncode == 0, r.stderr
    assert Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split() == new
    assert nettop(tmp_path, "revert").returncode == 0
    assert Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split() == before
    assert subprocess.run(["tc", "qdisc", "show", "dev", ifn], capture_output=True, text=True).stdout.startswith("qdisc noqueue")
