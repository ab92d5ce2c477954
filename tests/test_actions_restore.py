"""`nettop restore` after a real kill -9: every value nettop changed goes back to its original,
including one whose write happened but whose journal entry was never completed."""

from __future__ import annotations

import json
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


EXITING = textwrap.dedent("""
    import sys
    from nettop.actions import Change, Journal, Tuner
    from nettop.actions.link import TxQueueLen
    t = Tuner(Journal(), read_only=None)
    t.revert_on_exit()
    t.apply(t.plan([Change(TxQueueLen(sys.argv[1]), 77)]))
    print(open(f"/sys/class/net/{sys.argv[1]}/tx_queue_len").read().strip())
""")


def test_revert_on_exit_puts_values_back_when_the_process_ends(veth_lab, tmp_path):
    env = {**os.environ, "NETTOP_STATE_DIR": str(tmp_path)}
    child = subprocess.run([sys.executable, "-c", EXITING, veth_lab.host_if], env=env, capture_output=True,
                           text=True, cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "77"  # it was applied while the process ran
    assert read(f"/sys/class/net/{veth_lab.host_if}/tx_queue_len") == "1000"
    assert Journal(str(tmp_path / "journal.jsonl")).read_state().entries == []


def test_without_root_the_cli_refuses_with_the_reason_and_changes_nothing(veth_lab, tmp_path):
    os.chmod(tmp_path, 0o777)
    env = {**os.environ, "NETTOP_STATE_DIR": str(tmp_path)}
    child = subprocess.run([sys.executable, "-m", "nettop.cli", "set", "txqueuelen", veth_lab.host_if, "50"],
                           env=env, capture_output=True, text=True, user=65534, group=65534,
                           cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert child.returncode == 2, child.stderr
    assert child.stderr.strip() == ("nettop: nettop runs without root, so tuning is read-only: "
                                    "run it as root (sudo nettop) to change settings")
    assert read(f"/sys/class/net/{veth_lab.host_if}/tx_queue_len") == "1000"
    assert not (tmp_path / "journal.jsonl").exists()
    dry = subprocess.run([sys.executable, "-m", "nettop.cli", "set", "txqueuelen", veth_lab.host_if, "50",
                          "--dry-run", "--json"], env=env, capture_output=True, text=True, user=65534,
                         group=65534, cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert "read-only" in doc["read_only"] and doc["changes"][0]["before"] == 1000
