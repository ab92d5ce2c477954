"""The journal defends itself: torn and corrupt lines are skipped with one warning and the
records after them still count; appends start on a fresh line; reading it without root is
one line. Run through the real CLI on a lab veth, against real journal files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nettop.actions.journal import Journal, replay

ROOT = Path(__file__).parent.parent


def nettop(state: Path, *argv: str, user: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nettop.cli", *argv], capture_output=True, text=True,
                          cwd=ROOT, env={"NETTOP_STATE_DIR": str(state), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                          timeout=60, user=user)


def rps(ifname: str, q: int = 0) -> str:
    return Path(f"/sys/class/net/{ifname}/queues/rx-{q}/rps_cpus").read_text().strip()


def begin(i: int, g: int, ifname: str, before: int, value: int, **over) -> dict:
    rec = {"op": "begin", "id": i, "group": g, "action": "set", "ref": None, "t": 1.0,
           "setting": {"kind": "txqueuelen", "params": {"ifname": ifname}}, "key": f"txqueuelen {ifname}",
           "before": before, "value": value, "text": f"txqueuelen {ifname}: {before} → {value}"}
    rec.update(over)
    return rec


def good(i: int, ifname: str = "x") -> list[str]:
    """A complete set group: begin, end, group."""
    return [json.dumps(begin(i, i, ifname, 1000, 500 + i)),
            json.dumps({"op": "end", "id": i, "t": 1.0, "after": 500 + i, "verified": True, "error": None}),
            json.dumps({"op": "group", "group": i, "action": "set", "ref": None, "t": 1.0})]


CORRUPT = {
    "begin without id": json.dumps({"op": "begin"}),
    "list id": json.dumps(begin([7], 7, "y", 1, 2)),  # type: ignore[arg-type]
    "string id": json.dumps(begin("7", 7, "y", 1, 2)),  # type: ignore[arg-type]
    "bool id": json.dumps(begin(True, 7, "y", 1, 2)),  # type: ignore[arg-type]
    "float id": json.dumps(begin(7.5, 7, "y", 1, 2)),  # type: ignore[arg-type]
    "negative id": json.dumps(begin(-7, 7, "y", 1, 2)),
    "unknown params for a known kind": json.dumps(begin(7, 7, "y", 1, 2, setting={
        "kind": "txqueuelen", "params": {"ifname": "y", "evil": 1}})),
    "missing params": json.dumps(begin(7, 7, "y", 1, 2, setting={"kind": "txqueuelen"})),
    "params of the wrong type": json.dumps(begin(7, 7, "y", 1, 2, setting={
        "kind": "rps_cpus", "params": {"ifname": "y", "queue": "0"}}, key="rps_cpus y rx-0")),
    "unknown kind": json.dumps(begin(7, 7, "y", 1, 2, setting={"kind": "warp_drive", "params": {}})),
    "interface name that is a path": json.dumps(begin(7, 7, "../../../etc", 1, 2)),
    "sysctl outside the curated list": json.dumps(begin(7, 7, "y", "1", "2", setting={
        "kind": "sysctl", "params": {"name": "kernel.core_pattern"}}, key="sysctl kernel.core_pattern")),
    "key of another setting": json.dumps(begin(7, 7, "y", 1, 2, key="txqueuelen eth0")),
    "before of the wrong type": json.dumps(begin(7, 7, "y", "1000; rm", 2)),
    "action unknown": json.dumps(begin(7, 7, "y", 1, 2, action="launch")),
    "not JSON": '{"op": "begin", "id": 7, "gro',
    "NUL bytes": "\0" * 64,
    "a list": "[1, 2, 3]",
    "a string": '"begin"',
    "a number": "12",
    "null": "null",
    "NaN": "NaN",
    "deep nesting": "[" * 100_000 + "]" * 100_000,
    "5000-digit number": '{"op": "begin", "id": ' + "9" * 5000 + "}",
    "end of no begin": json.dumps({"op": "end", "id": 999, "after": 1, "verified": True, "error": None}),
    "end with an error that is not text": json.dumps({"op": "end", "id": 1, "after": 1, "verified": True,
                                                      "error": {"x": 1}}),
    "end whose after is of the wrong type": json.dumps({"op": "end", "id": 1, "after": [1], "verified": True,
                                                        "error": None}),
    "group of no number": json.dumps({"op": "group", "group": "x", "action": "set"}),
    "unknown op": json.dumps({"op": "teleport"}),
    "no op": json.dumps({"id": 3}),
    "invalid UTF-8": "\udcff\udcfe",
}


@pytest.mark.parametrize("what", CORRUPT)
def test_a_corrupt_line_is_skipped_with_a_reason_and_the_records_after_it_count(what):
    lines = good(1, "a") + [CORRUPT[what]] + good(2, "b")
    st = replay(lines)
    assert len(st.problems) == 1 and st.problems[0].startswith("line 4: ")
    assert "\n" not in st.problems[0] and len(st.problems[0]) < 300
    assert [e.key for e in st.entries] == ["txqueuelen a", "txqueuelen b"] and st.undo == [1, 2]
    assert all(e.ok for e in st.entries)
    assert st.next_id >= 3 and st.next_group >= 3


@pytest.mark.parametrize("end,why", [
    ({"after": [1], "verified": True, "error": None}, "whose after [1] is not a value txqueuelen a can hold"),
    ({"after": True, "verified": True, "error": None}, "whose after True is not a value"),
    ({"after": 5, "verified": True, "error": {"x": 1}}, "malformed error or verified field"),
    ({"after": 5, "verified": "yes", "error": None}, "malformed error or verified field"),
])
def test_a_malformed_end_leaves_its_write_pending_for_restore(end, why):
    lines = [good(1, "a")[0], json.dumps({"op": "end", "id": 1, **end})]
    st = replay(lines)
    assert len(st.problems) == 1 and why in st.problems[0]
    assert [e.id for e in st.pending()] == [1] and st.originals()["txqueuelen a"].before == 1000


def test_ids_on_skipped_lines_are_never_handed_out_again():
    bad = json.dumps(begin(40, 41, "y", 1, 2, key="txqueuelen other"))  # skipped: key mismatch
    st = replay(good(1) + [bad])
    assert st.problems and st.next_id == 41 and st.next_group == 42


def test_a_second_begin_with_the_same_id_is_skipped():
    lines = good(1, "a") + [json.dumps(begin(1, 9, "b", 5, 6))]
    st = replay(lines)
    assert [e.key for e in st.entries] == ["txqueuelen a"] and "second begin" in st.problems[0]


def test_append_after_a_torn_line_starts_a_fresh_line(tmp_path):
    path = tmp_path / "journal.jsonl"
    torn = '{"op": "begin", "id": 1, "gr'
    path.write_text(good(1)[0] + "\n" + torn)
    j = Journal(str(path))
    with j.locked() as st:
        j.append({"op": "clean", "t": 2.0, "reason": "test"})
        j.append({"op": "clean", "t": 3.0, "reason": "test"})
    lines = path.read_text().split("\n")
    assert lines[1] == torn and json.loads(lines[2])["t"] == 2.0 and json.loads(lines[3])["t"] == 3.0
    assert lines[4] == "" and st.problems == ["line 2: not a complete JSON record (torn by a crash?)"]


def test_torn_last_line_then_set_then_journal_undo_and_restore_put_the_change_back(veth_lab, tmp_path):
    """The scenario of issue 18: a set after a torn last line used to be glued onto it, and
    journal, undo and restore then said there was nothing to put back."""
    ifn = veth_lab.host_if
    journal = tmp_path / "journal.jsonl"
    journal.write_text('{"op":"begin","id":1,"group":1,"action":"set","ref":null,"t":17')  # killed mid-write
    r = nettop(tmp_path, "set", "rps", ifn, "0", "1")
    assert r.returncode == 0, r.stderr
    assert rps(ifn) == "2"
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("nettop: warning: journal ") and "line 1" in r.stderr

    r = nettop(tmp_path, "journal", "--json")
    doc = json.loads(r.stdout)
    assert [(e["key"], e["before"], e["after"]) for e in doc["entries"]] == [(f"rps_cpus {ifn} rx-0", "0", "2")]
    assert len(doc["undo"]) == 1 and doc["skipped_lines"] == ["line 1: not a complete JSON record (torn by a crash?)"]
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr

    r = nettop(tmp_path, "undo", "--dry-run")
    assert r.returncode == 0 and r.stdout == f"would undo: rps_cpus {ifn} rx-0: 2 (CPUs 1) → 0 (off)\n"
    r = nettop(tmp_path, "undo")
    assert r.returncode == 0, r.stderr
    assert rps(ifn) == "0"

    assert nettop(tmp_path, "redo").returncode == 0 and rps(ifn) == "2"
    r = nettop(tmp_path, "restore")
    assert r.returncode == 0 and r.stdout == f"rps_cpus {ifn} rx-0: 2 (CPUs 1) → 0 (off)\n"
    assert rps(ifn) == "0"


@pytest.mark.parametrize("what", ["begin without id", "list id", "string id", "unknown params for a known kind",
                                  "not JSON", "interface name that is a path", "deep nesting"])
def test_a_corrupt_record_never_stops_set_undo_or_restore(veth_lab, tmp_path, what):
    ifn = veth_lab.host_if
    (tmp_path / "journal.jsonl").write_text("\n".join(good(1, "gone0") + [CORRUPT[what]]) + "\n")
    r = nettop(tmp_path, "set", "rps", ifn, "1", "0x1")
    assert r.returncode == 0, r.stderr
    assert rps(ifn, 1) == "1"
    assert r.stderr.count("\n") == 1 and "warning" in r.stderr and "line 4" in r.stderr
    r = nettop(tmp_path, "journal")
    assert r.returncode == 0 and f"rps_cpus {ifn} rx-1: 0 (off) → 1 (CPUs 0)" in r.stdout
    r = nettop(tmp_path, "undo")
    assert r.returncode == 0, r.stderr
    assert rps(ifn, 1) == "0"
    assert nettop(tmp_path, "redo").returncode == 0 and rps(ifn, 1) == "1"
    r = nettop(tmp_path, "restore")  # gone0 has vanished: skipped; the rps change is put back
    assert r.returncode == 0, r.stderr
    assert rps(ifn, 1) == "0" and "skipped: " in r.stdout and "Traceback" not in r.stderr


@pytest.fixture
def shared_dir():
    """A directory user nobody can reach (pytest's tmp_path sits under a root-only 0700 one)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="nettop-i18-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _nobody_can_run_nettop() -> str | None:
    if os.geteuid() != 0:
        return "needs root to switch to nobody"
    probe = subprocess.run([sys.executable, "-c", "import nettop.cli"], cwd=ROOT, user=65534,
                           capture_output=True, text=True)
    return None if probe.returncode == 0 else f"nobody cannot import nettop here: {probe.stderr[-200:]}"


@pytest.mark.parametrize("argv", [["journal"], ["journal", "--json"], ["undo", "--dry-run"],
                                  ["redo", "--dry-run"], ["revert", "--dry-run"], ["restore", "--dry-run"]])
def test_without_root_a_root_only_journal_is_one_line(shared_dir, argv):
    why = _nobody_can_run_nettop()
    if why:
        pytest.skip(why)
    state = shared_dir / "state"
    state.mkdir(mode=0o700)
    (state / "journal.jsonl").write_text("\n".join(good(1)) + "\n")
    os.chmod(state / "journal.jsonl", 0o600)
    for blocked in (state / "journal.jsonl", state):  # the file unreadable, then its directory
        os.chmod(state, 0o755 if blocked != state else 0o700)
        r = nettop(state, *argv, user=65534)
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert r.stderr == (f"nettop: cannot read the tuning journal {state / 'journal.jsonl'}: Permission denied; "
                            "run nettop as root (the journal belongs to root)\n")
        assert r.stdout == ""


def test_without_root_a_readable_journal_is_shown(shared_dir):
    why = _nobody_can_run_nettop()
    if why:
        pytest.skip(why)
    tmp_path = shared_dir
    (tmp_path / "journal.jsonl").write_text("\n".join(good(1, "gone0")) + "\n")
    os.chmod(tmp_path / "journal.jsonl", 0o644)
    r = nettop(tmp_path, "journal", user=65534)
    assert r.returncode == 0 and "txqueuelen gone0: 1000 → 501" in r.stdout and r.stderr == ""
    r = nettop(tmp_path, "undo", user=65534)
    assert r.returncode == 2 and "read-only" in r.stderr and r.stderr.count("\n") == 1
