"""Concurrent `nettop set` on one value journals true originals: `before` is read under the
journal's lock, so every undo puts back exactly what the previous writer left and undoing
everything ends at the value the queue had before any of them ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nettop.actions import Journal, Tuner

ROOT = Path(__file__).parent.parent
PAIRS = 20


def test_20_concurrent_pairs_on_one_rx_queue_journal_true_originals_and_undo_to_the_start(veth_lab, tmp_path):
    ifn = veth_lab.host_if
    path = Path(f"/sys/class/net/{ifn}/queues/rx-0/rps_cpus")
    original = path.read_text().strip()
    env = {"NETTOP_STATE_DIR": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    # GIVEN 20 pairs of real nettop processes, the two of a pair started together, each
    # pair asking for different masks (CPU 0 and CPU 1), so a stale `before` shows
    for i in range(PAIRS):
        procs = [subprocess.Popen([sys.executable, "-m", "nettop.cli", "set", "rps", ifn, "0", mask],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for mask in ("0x1", "0x2")]
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    # THEN the journal is one chain: each write's `before` is what the previous one left
    t = Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)
    st = t.state()
    sets = [e for e in st.entries if e.action == "set"]
    assert len(sets) == 2 * PAIRS and len(st.undo) == 2 * PAIRS and not st.problems
    assert sets[0].before == original
    stale = [(a.id, a.after, b.id, b.before) for a, b in zip(sets, sets[1:]) if b.before != a.after]
    assert stale == []
    # WHEN everything is undone, newest first, without --force
    for _ in range(2 * PAIRS):
        t.undo()
    # THEN the queue is back at the true original
    assert path.read_text().strip() == original
    assert t.state().undo == [] and len(t.state().redo) == 2 * PAIRS
