"""`nettop set ... --confirm` inside a real SSH session whose own path the change stalls.

sshd listens in one namespace, the ssh client connects from another (tests/ssh_lab.py);
nettop runs in the session on the server side, where sshd sets SSH_CONNECTION, and puts
a tbf that passes nothing (8 kbit/s, a bucket smaller than one SSH packet) on the very
veth that carries the session. The operator then goes away in each way they can, and
the qdisc must come back as found: through the countdown, sshd's SIGHUP, or the guardian.

A qdisc that drops every packet locally makes the kernel abort the session's TCP
connection after tcp_retries2 (15) resource probes 500 ms apart, about 7.5 s (seen here:
`ss` shows `timer:(persist,...,15)`, then the socket is gone); sshd then hangs up. So
the test where the same connection must come back uses a 5 s countdown, and the
default 30 s trial of such a change ends through SIGHUP (docs/tuning.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ssh_lab
from nettop.actions.journal import Journal

pytestmark = pytest.mark.lab
NETTOP = str(Path(sys.executable).parent / "nettop")
STALL = ["qdisc", "eth1", "tbf", "rate=8kbit", "burst=64", "limit=64"]


class Screen:
    """Everything the ssh client printed, read on a thread (the client blocks otherwise)."""

    def __init__(self, p: subprocess.Popen) -> None:
        self.text = ""
        self._t = threading.Thread(target=self._pump, args=(p,), daemon=True)
        self._t.start()

    def _pump(self, p: subprocess.Popen) -> None:
        assert p.stdout is not None
        for chunk in iter(lambda: os.read(p.stdout.fileno(), 4096), b""):
            self.text += chunk.decode("utf-8", "replace")

    def wait_for(self, needle: str, seconds: float) -> bool:
        return _wait(lambda: needle in self.text, seconds)


def _wait(pred, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return bool(pred())


@pytest.fixture
def sl(tmp_path):
    reason = ssh_lab.can_build()
    if reason:
        pytest.skip(reason)
    with ssh_lab.ssh_lab(tmp_path) as lab_:
        yield lab_


def _start(sl, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Screen, Journal]:
    state = tmp_path / "state"
    remote = ["env", f"NETTOP_STATE_DIR={state}", NETTOP, "set", *STALL, "--yes", *extra]
    p = sl.spawn(sl.ssh_argv(remote), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    screen = Screen(p)
    assert _wait(lambda: sl.root_qdisc() == "tbf", 20), screen.text
    # the countdown itself cannot reach the client any more: the path is stalled
    journal = Journal(str(state / "journal.jsonl"))
    assert _wait(lambda: bool(journal.read_state().trials), 5)
    return p, screen, journal


def _trial(journal: Journal):
    trials = journal.read_state().trials
    assert len(trials) == 1
    return next(iter(trials.values()))


def _server_pids(sl, needle: str) -> list[int]:
    out = []
    for pid in subprocess.run(["ip", "netns", "pids", sl.server_ns], capture_output=True, text=True).stdout.split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmd:
            out.append(int(pid))
    return out


def test_nobody_answers_the_change_reverts_by_the_deadline_and_the_session_lives(sl, tmp_path):
    p, screen, journal = _start(sl, tmp_path, "--confirm", "5")
    trial = _trial(journal)
    assert _wait(lambda: sl.root_qdisc() != "tbf", trial.deadline_mono + 2 - time.monotonic())
    assert time.monotonic() <= trial.deadline_mono + 2
    assert sl.root_qdisc() == "noqueue"
    # the same connection carries the rest of the session: the revert message, the exit
    assert screen.wait_for("not confirmed within 5 s", 30), screen.text
    assert p.wait(timeout=20) == 3
    assert _trial(journal).status() == "reverted: not confirmed within 5 s"


def test_the_ssh_client_killed_during_the_countdown_sshd_hangs_up_and_nettop_reverts(sl, tmp_path):
    p, screen, journal = _start(sl, tmp_path, "--confirm", "60")
    p.kill()
    # what nettop was doing when it did not, should it happen again (stop 39's CI run)
    assert _wait(lambda: sl.root_qdisc() == "noqueue", 15), \
        f"SIGHUP did not revert the change: nettop {_server_pids(sl, f'{NETTOP} set')} " \
        f"sshd {_server_pids(sl, 'sshd')} trial {_trial(journal)}"
    trial = _trial(journal)
    assert "SIGHUP" in trial.reason and time.monotonic() < trial.deadline_mono - 30
    assert _wait(lambda: not _server_pids(sl, "nettop.actions.guardian"), 5)


def test_nettop_killed_during_the_countdown_the_guardian_reverts(sl, tmp_path):
    p, screen, journal = _start(sl, tmp_path, "--confirm", "5")
    pids = [pid for pid in _server_pids(sl, f"{NETTOP} set") if pid not in _server_pids(sl, "guardian")]
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    trial = _trial(journal)
    assert _wait(lambda: sl.root_qdisc() == "noqueue", trial.deadline_mono + 2 - time.monotonic())
    assert time.monotonic() <= trial.deadline_mono + 2
    trial = _trial(journal)
    assert trial.outcome == "reverted" and "guardian" in trial.reason
    assert _wait(lambda: not _server_pids(sl, "nettop.actions.guardian"), 5)


def test_y_keeps_the_change_after_the_session_ends_and_no_guardian_is_left(sl, tmp_path):
    """No --confirm: a change on the session's path from a terminal is a 30 s trial."""
    p, screen, journal = _start(sl, tmp_path)
    assert round(_trial(journal).deadline - _trial(journal).t) == 30
    assert p.stdin is not None
    p.stdin.write(b"y")
    p.stdin.flush()
    assert _wait(lambda: _trial(journal).outcome == "confirmed", 10)
    assert _wait(lambda: not _server_pids(sl, "nettop.actions.guardian"), 5)
    p.kill()  # the session ends (its own output is stuck behind the kept qdisc)
    time.sleep(max(0.0, _trial(journal).deadline_mono - time.monotonic()) + 2.5)
    assert sl.root_qdisc() == "tbf"


def test_a_change_off_the_sessions_path_applies_with_no_prompt(sl, tmp_path):
    sl.server_run(["ip", "link", "add", "other0", "type", "veth", "peer", "name", "other1"])
    state = tmp_path / "state"
    remote = ["env", f"NETTOP_STATE_DIR={state}", NETTOP, "set", "qdisc", "other0", "tbf", "rate=8kbit",
              "burst=64", "limit=64", "--yes"]
    r = subprocess.run(sl.ssh_argv(remote), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reverts in" not in r.stdout + r.stderr
    out = sl.server_run(["tc", "qdisc", "show", "dev", "other0", "root"]).stdout
    assert out.split()[1] == "tbf" and not Journal(str(state / "journal.jsonl")).read_state().trials
