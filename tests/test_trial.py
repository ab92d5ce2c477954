"""Changes on trial revert unless confirmed, whoever is left to do it (issue 26).

These run on the veth lab with the real Tuner, real tc and real sysfs; the SSH lab
(tests/test_ssh_lab.py) does the same through a real sshd session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nettop.actions.base import ActionError, Change
from nettop.actions.irq import IrqAffinity
from nettop.actions.link import TxQueueLen
from nettop.actions.journal import Journal, replay
from nettop.actions.qdisc import RootQdisc
from nettop.actions.rps_xps import RpsCpus
from nettop.actions.sysctl import Sysctl
from nettop.actions.trial import apply_on_trial, path_reason, revert_overdue
from nettop.actions.tuner import Tuner
from nettop.collectors.session_path import PathResources, Peer, SessionPath, detect, peer_from_env, stack_below
from nettop.kernel.sysroot import LIVE, SysRoot

pytestmark = pytest.mark.lab
TBF = {"kind": "tbf", "params": {"rate": "8kbit", "burst": "1600", "limit": "3000"}}


def _tuner(tmp_path: Path) -> Tuner:
    return Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)


def _wait(pred, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def _kind(ifname: str) -> str:
    return RootQdisc(ifname).read()["kind"]


def test_ssh_connection_names_the_interface_its_peer_is_routed_through(veth_lab):
    env = {"SSH_CONNECTION": f"{veth_lab.peer_ip} 51022 {veth_lab.host_ip} 22"}
    path = detect(env)
    assert path is not None and path.ifname == veth_lab.host_if
    assert path.devices == (veth_lab.host_if,) and path.peer.source == "SSH_CONNECTION"
    assert detect({}) is None or detect({}).peer.source.startswith("sshd")  # not in an SSH session here
    assert peer_from_env({"SSH_CONNECTION": "not an address 1 2"}) is None


def test_a_bridge_over_the_lab_carries_the_session_down_to_its_port(veth_lab):
    br = f"{veth_lab.host_if[:11]}br"
    subprocess.run(["ip", "link", "add", br, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", veth_lab.host_if, "master", br], check=True)
        devices, nics = stack_below(LIVE, br)
        assert devices == (br, veth_lab.host_if) and nics == (veth_lab.host_if,)
    finally:
        subprocess.run(["ip", "link", "del", br], check=False)


def test_a_vlan_on_a_bond_resolves_to_both_slaves(tmp_path):
    """This kernel has neither bonding nor 8021q: a captured sysfs tree of a host that
    has them, with the kernel's own `lower_*` links (bond0.100 → bond0 → eth0, eth1)."""
    net = tmp_path / "sys/class/net"
    for dev in ("bond0.100", "bond0", "eth0", "eth1"):
        (net / dev).mkdir(parents=True)
    (net / "bond0.100/lower_bond0").symlink_to("../bond0")
    (net / "bond0/lower_eth0").symlink_to("../eth0")
    (net / "bond0/lower_eth1").symlink_to("../eth1")
    (net / "eth0/upper_bond0").symlink_to("../bond0")
    devices, nics = stack_below(SysRoot(str(tmp_path)), "bond0.100")
    assert devices == ("bond0.100", "bond0", "eth0", "eth1") and nics == ("eth0", "eth1")


def test_path_reason_names_changes_on_the_path_and_nothing_else():
    path = SessionPath(Peer("198.18.0.2", 5, "198.18.0.1", 22, "SSH_CONNECTION"), "bond0",
                       ("bond0", "eth0", "eth1"), ("eth0", "eth1"))
    res = PathResources((("eth0", "rx-0"),), (41, 42), (0, 1))
    assert "carries this SSH session" in path_reason(RootQdisc("eth1"), path, res)
    assert path_reason(RootQdisc("eth9"), path, res) is None
    assert "IRQ 41" in path_reason(IrqAffinity(41), path, res)
    assert path_reason(IrqAffinity(50), path, res) is None
    assert path_reason(RpsCpus("eth0", 0), path, res) is not None
    assert "every interface" in path_reason(Sysctl("net.core.netdev_budget"), path, res)
    assert path_reason(Sysctl("net.ipv4.conf.eth9.rp_filter"), path, res) is None
    assert path_reason(Sysctl("net.ipv4.conf.all.rp_filter"), path, res) is not None
    assert path_reason(Sysctl("vm.swappiness"), path, res) is None
    assert path_reason(RootQdisc("eth1"), None, res) is None


def test_an_unconfirmed_trial_reverts_once_and_a_confirmed_one_never(veth_lab, tmp_path):
    t = _tuner(tmp_path)
    run = apply_on_trial(t, t.plan([Change(RootQdisc(veth_lab.host_if), TBF)]), 30, ["test"], confirmed=True)
    assert _kind(veth_lab.host_if) == "tbf" and run.guardian is not None
    assert run.revert("test says so") is not None
    assert _kind(veth_lab.host_if) == "noqueue"
    assert run.revert("again") is None and not run.confirm()  # never twice, too late to keep
    assert _wait(lambda: run.guardian.poll() is not None, 5)  # the guardian is gone too
    st = t.journal.read_state()
    assert st.trials[run.group].status() == "reverted: test says so" and run.group not in st.undo

    run2 = apply_on_trial(t, t.plan([Change(RootQdisc(veth_lab.host_if), TBF)]), 1, ["test"], confirmed=True)
    assert run2.confirm()
    assert _wait(lambda: run2.guardian.poll() is not None, 5)
    time.sleep(1.5)  # past the deadline: a confirmed trial stays
    assert _kind(veth_lab.host_if) == "tbf" and revert_overdue(t) == []
    assert t.journal.read_state().trials[run2.group].status() == "confirmed"


def test_a_trial_the_kernel_refuses_is_rolled_back_and_closed_without_a_guardian(veth_lab, tmp_path):
    """The group's second write is refused (this kernel has no sch_fq_codel): the first is
    put back, the journal closes the trial as "not applied" (its group number comes with
    the error, Tuner.apply_group), and no guardian is left to revert anything."""
    if os.path.exists("/sys/module/sch_fq_codel"):
        pytest.skip("this kernel has sch_fq_codel: nothing refuses the second write")
    t = _tuner(tmp_path)
    ifn = veth_lab.host_if
    plans = t.plan([Change(TxQueueLen(ifn), 321), Change(RootQdisc(ifn), {"kind": "fq_codel"})])
    with pytest.raises(ActionError, match="no sch_fq_codel") as err:
        apply_on_trial(t, plans, 30, ["test"], confirmed=True)
    group = err.value.group
    assert group is not None
    assert Path(f"/sys/class/net/{ifn}/tx_queue_len").read_text().strip() == "1000"
    st = t.journal.read_state()
    trial = st.trials[group]
    assert not trial.pending and trial.outcome == "reverted" and trial.reason.startswith("not applied: ")
    assert trial.guardian is None and st.undo == [] and t.pending_trials() == []


def test_the_guardian_reverts_when_nettop_is_killed(veth_lab, tmp_path):
    """kill -9 during the countdown: the guardian, in a session of its own, reverts the
    change by the deadline (+2 s) and then exits."""
    journal = tmp_path / "journal.jsonl"
    script = textwrap.dedent(f"""
        import sys, time
        from nettop.actions.base import ActionError, Change
        from nettop.actions.journal import Journal
        from nettop.actions.qdisc import RootQdisc
        from nettop.actions.trial import apply_on_trial
        from nettop.actions.tuner import Tuner
        t = Tuner(Journal({str(journal)!r}), read_only=None)
        run = apply_on_trial(t, t.plan([Change(RootQdisc({veth_lab.host_if!r}), {TBF!r})]), 3, ["test"], True)
        print(run.guardian.pid, run.trial.deadline_mono, flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        guardian, deadline = p.stdout.readline().split()
        assert _kind(veth_lab.host_if) == "tbf"
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert _wait(lambda: _kind(veth_lab.host_if) == "noqueue", float(deadline) + 2 - time.monotonic())
        assert time.monotonic() <= float(deadline) + 2
        assert _wait(lambda: not os.path.exists(f"/proc/{guardian}") or
                     Path(f"/proc/{guardian}/stat").read_text().split()[2] == "Z", 5)
        trial = Journal(str(journal)).read_state().trials[1]
        assert trial.outcome == "reverted" and "guardian" in trial.reason
    finally:
        if p.poll() is None:
            p.kill()


def test_a_journal_with_damaged_trial_records_keeps_the_rest(tmp_path):
    lines = [json.dumps({"op": "trial", "group": 1, "t": 1.0, "deadline": "soon", "deadline_mono": 2.0}),
             json.dumps({"op": "trial_end", "group": 7, "outcome": "confirmed"}),
             json.dumps({"op": "trial", "group": 2, "t": 1.0, "deadline": 2.0, "deadline_mono": 2.0, "why": "x"}),
             json.dumps({"op": "trial_end", "group": 2, "outcome": "kept?"})]
    st = replay(lines)
    assert len(st.problems) == 3 and st.trials[2].pending


@pytest.mark.parametrize("second", [signal.SIGHUP, signal.SIGTERM])
def test_a_second_hang_up_while_the_first_reverts_still_reverts_and_ends(veth_lab, tmp_path, second):
    """sshd's hang-up can come as the tty's SIGHUP and another signal right after it.
    Python ran the handler again inside the first one, whose revert held the Tuner's lock:
    `nettop set` then hung for ever, its change often still in place (12 of 16 here
    before the handler ignored a second hang-up). Each round sends the second signal a
    little later, to land in a different part of the first revert."""
    for delay in (0.0, 0.002, 0.005, 0.01, 0.02, 0.05):
        state = tmp_path / f"state-{delay}"
        journal = Journal(str(state / "journal.jsonl"))
        p = subprocess.Popen([sys.executable, "-m", "nettop.cli", "set", "qdisc", veth_lab.host_if, "tbf",
                              "rate=8kbit", "burst=1600", "limit=3000", "--yes", "--confirm", "60"],
                             env={**os.environ, "NETTOP_STATE_DIR": str(state)}, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert _wait(lambda: os.path.exists(journal.path) and bool(journal.read_state().trials), 30)
            assert _kind(veth_lab.host_if) == "tbf"
            time.sleep(0.3)  # into the countdown
            p.send_signal(signal.SIGHUP)
            time.sleep(delay)
            p.send_signal(second)
            out, _ = p.communicate(timeout=15)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        # the first handled ends it: with no delay Python may take the SIGTERM first
        assert p.returncode in (128 + signal.SIGHUP, 128 + second), (delay, out)
        assert _kind(veth_lab.host_if) == "noqueue", delay
        trial = journal.read_state().trials[1]
        assert trial.outcome == "reverted", (delay, trial.reason)
        assert trial.reason.startswith(signal.Signals(p.returncode - 128).name), (delay, trial.reason)


def test_a_hang_up_while_the_main_thread_holds_the_tuner_reverts_once_it_lets_go(veth_lab, tmp_path):
    """In a process with other threads (the live view) the kernel may give a hang-up held
    by the main thread's mask to another thread, and Python then runs the handler on the
    main thread inside the Tuner's locked work (its revert on exit, say). The handler must
    not wait there for the lock its own thread holds: it reverts on a thread of its own
    once the work is done, and ends the process."""
    journal = tmp_path / "journal.jsonl"
    script = textwrap.dedent(f"""
        import sys, threading, time
        from nettop.actions import hangups
        from nettop.actions.base import Change
        from nettop.actions.journal import Journal
        from nettop.actions.qdisc import RootQdisc
        from nettop.actions.trial import apply_on_trial, install_exit_revert
        from nettop.actions.tuner import Tuner
        t = Tuner(Journal({str(journal)!r}), read_only=None)
        run = apply_on_trial(t, t.plan([Change(RootQdisc({veth_lab.host_if!r}), {TBF!r})]), 60, ["test"], True)
        install_exit_revert()
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # takes the signal
        with hangups.deferred(), t._lock:  # what each Tuner operation holds while it works
            print("holding", flush=True)
            time.sleep(2)  # the hang-up comes now
            print("let go", flush=True)
        time.sleep(30)
    """)
    out, _ = _hung_up_when(veth_lab, tmp_path, script, "holding")
    assert out.strip() == "let go", out


def _hung_up_when(veth_lab, tmp_path: Path, script: str, ready: str):
    """Run `script` (its journal: tmp_path/journal.jsonl), send SIGHUP once it prints
    `ready` with the tbf in place; the process must end by the hang-up with the trial
    reverted. What it printed after `ready`, and the trial."""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == ready
        assert _kind(veth_lab.host_if) == "tbf"
        p.send_signal(signal.SIGHUP)
        out, _ = p.communicate(timeout=15)
        assert p.returncode == 128 + signal.SIGHUP, out
        assert _kind(veth_lab.host_if) == "noqueue"
        trial = Journal(str(tmp_path / "journal.jsonl")).read_state().trials[1]
        assert trial.outcome == "reverted" and trial.reason.startswith("SIGHUP"), trial.reason
        return out, trial
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if _kind(veth_lab.host_if) != "noqueue":
            _tuner(tmp_path).revert_all()


def test_a_hang_up_while_a_trial_is_being_made_reverts_it_once_it_is_whole(veth_lab, tmp_path):
    """The trial is journaled before it is on the process's list of trials to revert and
    its guardian started. A hang-up then, given by the kernel to another thread (numpy's
    OpenBLAS starts one; CI saw `nettop set` end with its tbf in place and no guardian),
    must wait for the trial to be whole and revert it, not end the process at once with
    nothing found to revert. The guardian's start is slowed to hold that window open."""
    journal = tmp_path / "journal.jsonl"
    script = textwrap.dedent(f"""
        import threading, time
        from nettop.actions import trial
        from nettop.actions.base import Change
        from nettop.actions.journal import Journal
        from nettop.actions.qdisc import RootQdisc
        from nettop.actions.tuner import Tuner
        spawn = trial.spawn_guardian
        def slow_spawn(path, group):
            print("journaled", flush=True)
            time.sleep(2)  # the hang-up comes now
            return spawn(path, group)
        trial.spawn_guardian = slow_spawn
        t = Tuner(Journal({str(journal)!r}), read_only=None)
        trial.install_exit_revert()
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # takes the signal
        trial.apply_on_trial(t, t.plan([Change(RootQdisc({veth_lab.host_if!r}), {TBF!r})]), 60, ["test"], True)
        print("whole", flush=True)
        time.sleep(30)
    """)
    _, trial = _hung_up_when(veth_lab, tmp_path, script, "journaled")
    assert trial.guardian is not None
    assert _wait(lambda: not os.path.exists(f"/proc/{trial.guardian}"), 5), "the guardian was left running"


def test_the_countdown_on_an_80_column_terminal_redraws_one_row_in_place(veth_lab, tmp_path):
    """`\\r` goes back to the start of a row only: a countdown longer than the terminal is
    wide wrapped, and each second's redraw left a row behind (seen at 100 columns in
    tmux with a tbf's description). Under a real pty of 80x24 every redraw fits one row
    and still says which key keeps it and how long is left."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "nettop.cli", "set", "qdisc", veth_lab.host_if, "tbf",
                          "rate=8kbit", "burst=1600", "limit=3000", "--yes", "--confirm", "3"],
                         env={**os.environ, "NETTOP_STATE_DIR": str(tmp_path / "state")},
                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    data = b""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            data += chunk
        assert p.wait(timeout=10) == 3
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()
    text = data.decode()
    redraws = [seg.split("\r\n")[0] for seg in text.split("\r\x1b[K") if "y keeps" in seg]
    assert len(redraws) >= 3, text  # 3, 2, 1 s
    assert all(len(r) <= 79 and "reverts in" in r for r in redraws), redraws
    assert [r.split("reverts in ")[1].split()[0] for r in redraws] == ["3", "2", "1"], redraws
    assert _kind(veth_lab.host_if) == "noqueue"
