"""The live view inside a real SSH session, on a real terminal (tmux), tuning its own path.

tmux runs the ssh client in the client namespace (tests/ssh_lab.py); nettop runs in the
session on the server side, where real sshd set SSH_CONNECTION. We type as an operator
would (`o`, a `set` line, `y` on the confirm screen) a tbf that passes nothing on the
veth that carries the session, then go away in each way an operator can. The dropping
qdisc makes the kernel abort the session's TCP connection after ~7.5 s (tcp_retries2
resource probes; see tests/test_ssh_trial_cli.py), so the countdown that must bring the
same connection back is 3 s: reverted by its deadline + 2 s (a busy machine's timer), it
is back before the kernel gives up.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ssh_lab
from nettop.actions.journal import Journal
from test_ssh_trial_cli import _server_pids, _wait

pytestmark = pytest.mark.lab
TMUX = shutil.which("tmux")
NETTOP = str(Path(sys.executable).parent / "nettop")
STALL = "qdisc eth1 tbf rate=8kbit burst=64 limit=64"


class Term:
    """A tmux server of our own whose one pane is the ssh client."""

    def __init__(self, sl: ssh_lab.SshLab, state: Path, width: int, height: int) -> None:
        self.sl, self.socket = sl, f"nettop-ssh-{os.getpid()}-{width}"
        self.journal = Journal(str(state / "journal.jsonl"))
        remote = ["env", f"NETTOP_STATE_DIR={state}", NETTOP, "-i", "0.5"]
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "keep", "-x", "20", "-y", "5")
        self.tmux("set-option", "-g", "remain-on-exit", "on")
        self.tmux("new-session", "-d", "-s", "ssh", "-x", str(width), "-y", str(height),
                  "-e", "TERM=xterm-256color", *sl.ssh_argv(remote))

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, check=check, env=env)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "ssh", check=False).stdout

    def wait(self, needle: str, seconds: float) -> str:
        assert _wait(lambda: needle in self.screen(), seconds), f"no {needle!r} on:\n{self.screen()}"
        return self.screen()

    def keys(self, *keys: str, literal: bool = False) -> None:
        for k in keys:
            self.tmux("send-keys", "-t", "ssh", *(["-l"] if literal else []), k)
            time.sleep(0.3)

    def client_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", "ssh", "#{pane_pid}").stdout)

    def set_line(self, line: str) -> None:
        """`o`, the line instead of the prefilled one, enter; `y` on the confirm screen."""
        self.keys("o")
        self.wait("nettop set", 10)
        self.keys("C-u")
        self.keys(line, literal=True)
        self.keys("Enter")
        self.wait("y applies", 10)
        self.keys("y")

    def close(self) -> None:
        self.tmux("kill-server", check=False)


@pytest.fixture
def term(tmp_path):
    if TMUX is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    reason = ssh_lab.can_build()
    if reason:
        pytest.skip(reason)
    made: list[Term] = []

    def open_term(width: int = 120, height: int = 40) -> Term:
        t = Term(sl, tmp_path / f"state{len(made)}", width, height)
        made.append(t)
        t.wait(f"◆ ssh via {sl.server_if}", 30)
        return t

    with ssh_lab.ssh_lab(tmp_path) as sl:
        try:
            yield sl, open_term
        finally:
            for t in made:
                t.close()


def _trial(t: Term):
    assert _wait(lambda: bool(t.journal.read_state().trials), 10)
    (trial,) = t.journal.read_state().trials.values()
    return trial


def test_the_session_interface_is_marked_at_80x24_and_120x40(term):
    sl, open_term = term
    small = open_term(80, 24)
    screen = small.wait(f"eth1 ◆", 20)  # the summary's interface row
    assert f"◆ ssh via eth1" in screen.splitlines()[0]
    big = open_term(120, 40)
    big.keys("3")
    screen = big.wait("eth1 ◆", 20)  # the throughput panel's row
    assert f"◆ ssh via eth1" in screen.splitlines()[0]


def test_nobody_answers_the_live_view_reverts_by_the_deadline_and_shows_why(term):
    sl, open_term = term
    t = open_term()
    t.set_line(f"{STALL} --confirm 3")
    trial = _trial(t)
    assert _wait(lambda: sl.root_qdisc() == "tbf", 3)
    assert _wait(lambda: sl.root_qdisc() == "noqueue", trial.deadline_mono + 2 - time.monotonic())
    assert time.monotonic() <= trial.deadline_mono + 2
    # the same connection came back and says why. The app's own timer reverts at the deadline;
    # when a loaded machine makes it more than the guardian's grace late, the guardian does
    # ("not confirmed in time (guardian)") and the app shows that instead.
    t.wait("reverted: not confirmed", 40)


def test_the_ssh_client_killed_during_the_countdown_the_live_view_reverts_on_sighup(term):
    sl, open_term = term
    t = open_term()
    t.set_line(f"{STALL} --confirm 60")
    trial = _trial(t)
    os.kill(t.client_pid(), signal.SIGKILL)
    assert _wait(lambda: sl.root_qdisc() == "noqueue", 15), "SIGHUP did not revert the change"
    (trial,) = t.journal.read_state().trials.values()
    assert "SIGHUP" in trial.reason or "hung up" in trial.reason, trial.reason
    assert _wait(lambda: not _server_pids(sl, "nettop.actions.guardian"), 5)


def test_the_live_view_killed_during_the_countdown_the_guardian_reverts(term):
    sl, open_term = term
    t = open_term()
    t.set_line(f"{STALL} --confirm 5")
    trial = _trial(t)
    for pid in _server_pids(sl, f"{NETTOP} -i"):
        os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: sl.root_qdisc() == "noqueue", trial.deadline_mono + 2 - time.monotonic())
    assert time.monotonic() <= trial.deadline_mono + 2
    (trial,) = t.journal.read_state().trials.values()
    assert trial.outcome == "reverted" and "guardian" in trial.reason
    assert _wait(lambda: not _server_pids(sl, "nettop.actions.guardian"), 5)


def test_y_in_the_live_view_keeps_the_change_after_the_session_ends(term):
    sl, open_term = term
    t = open_term()
    t.set_line(STALL)
    trial = _trial(t)
    assert round(trial.deadline - trial.t) == 30
    t.keys("y")  # reaches nettop: only the server's way out is stalled
    assert _wait(lambda: t.journal.read_state().trials[trial.group].outcome == "confirmed", 10)
    assert _wait(lambda: not _server_pids(sl, "nettop.actions.guardian"), 5)
    os.kill(t.client_pid(), signal.SIGKILL)
    time.sleep(max(0.0, trial.deadline_mono - time.monotonic()) + 2.5)
    assert sl.root_qdisc() == "tbf"


def test_a_change_off_the_sessions_path_applies_in_the_live_view_with_no_countdown(term):
    sl, open_term = term
    sl.server_run(["ip", "link", "add", "other0", "type", "veth", "peer", "name", "other1"])
    t = open_term()
    t.set_line("qdisc other0 tbf rate=8kbit burst=64 limit=64")
    assert _wait(lambda: "tbf" in sl.server_run(["tc", "qdisc", "show", "dev", "other0", "root"]).stdout, 10)
    time.sleep(1.5)
    assert "reverts in" not in t.screen() and not t.journal.read_state().trials
