"""`nettop restore` after a real kill -9: every value nettop changed goes back to its original,
including one whose write happened but whose journal entry was never completed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from nettop.actions.journal import Journal

CHILD = textwrap.dedent("""
    import os, signal, sys
    from nettop.actions import Change, Journal, Tuner
    from nettop.actions.link import TxQueueLen
    from nettop.actions.qdisc import RootQdisc
    from nettop.actions.rps_xps import RpsCpus
    ifn = sys.argv[1]
    t = Tuner(Journal(), read_only=None)
    t.apply(t.plan([Change(RpsCpus(ifn, 2), "1"), Change(TxQueueLen(ifn), 123)]))
    t.apply(t.plan([Change(RootQdisc(ifn), {"kind": "pfifo", "params": {"limit": 9}})]), confirmed=True)
    # the next write reaches the kernel but dies before its journal entry is completed
    s = TxQueueLen(ifn)
    with t.journal.locked() as st:
        e = t.journal.begin(st, group=st.next_group, action="set", ref=None, setting=s.to_record(),
                            key=s.key, before=s.read(), value=456, text="txqueuelen")
        s.write(456)
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
""")


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def test_restore_after_kill_9_puts_every_value_back(veth_lab, tmp_path):
    ifn = veth_lab.host_if
    env = {**os.environ, "NETTOP_STATE_DIR": str(tmp_path)}
    child = subprocess.run([sys.executable, "-c", CHILD, ifn], env=env, capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert child.stdout.strip() == "ready"
    q = f"/sys/class/net/{ifn}"
    assert read(f"{q}/tx_queue_len") == "456" and read(f"{q}/queues/rx-2/rps_cpus") == "2"
    assert [e.key for e in Journal(str(tmp_path / "journal.jsonl")).read_state().pending()] == [f"txqueuelen {ifn}"]

    journal = subprocess.run([sys.executable, "-m", "nettop.cli", "journal"], env=env, capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert "never completed" in journal.stdout

    restore = subprocess.run([sys.executable, "-m", "nettop.cli", "restore"], env=env, capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert restore.returncode == 0, restore.stderr
    assert read(f"{q}/tx_queue_len") == "1000"
    assert read(f"{q}/queues/rx-2/rps_cpus") == "0"
    tc = subprocess.run(["tc", "qdisc", "show", "dev", ifn], capture_output=True, text=True).stdout
    assert tc.startswith("qdisc noqueue")
    st = Journal(str(tmp_path / "journal.jsonl")).read_state()
    assert st.entries == [] and st.undo == []  # a clean epoch: nothing left to restore

    again = subprocess.run([sys.executable, "-m", "nettop.cli", "restore"], env=env, capture_output=True,
                           text=True, cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert again.returncode == 0 and "nothing to put back" in again.stdout
