"""The live view puts a change on the SSH session's own path on trial (issue 26).

The app runs on the veth lab with a scripted source whose session (as
`collectors.session_path.detect` finds one under sshd) is carried by the lab's veth;
changes are real tc and sysfs writes through the real Tuner. tests/test_ssh_tui.py runs
the same through a real sshd session."""

from __future__ import annotations

import asyncio
import time

import pytest

from nettop.actions.journal import Journal
from nettop.actions.qdisc import RootQdisc
from nettop.actions.tuner import Tuner
from nettop.collectors.host import HostReader
from nettop.collectors.session_path import Peer, SessionPath
from nettop.kernel.sysroot import LIVE
from nettop.tui.app import NettopApp
from nettop.tui.scripted import ScriptedSource
from nettop.tui.tuning import ConfirmScreen

pytestmark = pytest.mark.lab
SIZE = (120, 40)


class Lab:
    def __init__(self, veth_lab, tmp_path, carried: bool = True) -> None:  # type: ignore[no-untyped-def]
        self.ifname = veth_lab.host_if
        self.src = ScriptedSource()
        if carried:
            self.src.session_path = SessionPath(Peer(veth_lab.peer_ip, 50000, veth_lab.host_ip, 22, "SSH_CONNECTION"),
                                                self.ifname, (self.ifname,), (self.ifname,))
        self.reader = HostReader(LIVE, ifnames=[self.ifname])
        self.tuner = Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)
        self.app = NettopApp(self.src, tuner=self.tuner)


@pytest.fixture
async def lab(veth_lab, tmp_path):
    t = Lab(veth_lab, tmp_path)
    async with t.app.run_test(size=SIZE) as pilot:
        t.pilot = pilot  # type: ignore[attr-defined]
        for _ in range(2):
            t.src.push(t.reader.read())
            await pilot.pause()
        yield t
        await asyncio.to_thread(t.tuner.revert_all)
    t.reader.close()


async def settle(t: Lab) -> None:
    await t.app.workers.wait_for_complete()
    for _ in range(3):
        await t.pilot.pause()  # type: ignore[attr-defined]


async def apply_line(t: Lab, line: str) -> None:
    """`o`, the line, enter, then y on the confirm screen (a qdisc drops packets)."""
    pilot = t.pilot  # type: ignore[attr-defined]
    await pilot.press("o")
    await pilot.pause()
    t.app.screen.query_one("#prompt-input").value = line
    await pilot.press("enter")
    await settle(t)
    if isinstance(t.app.screen, ConfirmScreen):
        await pilot.press("y")
        await settle(t)


def bar(t: Lab) -> str:
    w = t.app.query_one("#trial-bar")
    return str(w.render()) if w.display else ""


async def kind(t: Lab) -> str:
    """pyroute2 runs a loop of its own: never on the app's thread."""
    return (await asyncio.to_thread(RootQdisc(t.ifname).read))["kind"]


async def test_a_change_on_the_sessions_interface_counts_down_and_reverts_unless_kept(lab):
    t = lab
    await apply_line(t, f"qdisc {t.ifname} tbf rate=1mbit burst=10k --confirm 2")
    assert await kind(t) == "tbf"
    assert "keep qdisc" in bar(t) and "y keeps · reverts in" in bar(t), bar(t)
    deadline = time.monotonic() + 6
    while await kind(t) == "tbf" and time.monotonic() < deadline:
        await t.pilot.pause(0.2)  # type: ignore[attr-defined]
    await settle(t)
    assert await kind(t) == "noqueue"
    assert "reverted: not confirmed within 2 s" in bar(t), bar(t)
    trial = t.tuner.journal.read_state().trials
    assert [tr.status() for tr in trial.values()] == ["reverted: not confirmed within 2 s"]


async def test_y_keeps_the_change_and_the_bar_says_so(lab):
    t = lab
    await apply_line(t, f"qdisc {t.ifname} tbf rate=1mbit burst=10k")
    st = t.tuner.journal.read_state()
    (trial,) = st.trials.values()
    assert round(trial.deadline - trial.t) == 30  # the live view's default on the session's path
    await t.pilot.press("y")  # type: ignore[attr-defined]
    await settle(t)
    assert "kept" in bar(t) and await kind(t) == "tbf"
    assert [tr.status() for tr in t.tuner.journal.read_state().trials.values()] == ["confirmed"]


async def test_a_change_off_the_sessions_path_applies_without_a_trial(veth_lab, tmp_path):
    t = Lab(veth_lab, tmp_path, carried=False)
    async with t.app.run_test(size=SIZE) as pilot:
        t.pilot = pilot  # type: ignore[attr-defined]
        t.src.push(t.reader.read())
        await pilot.pause()
        await apply_line(t, f"qdisc {t.ifname} tbf rate=1mbit burst=10k")
        assert await kind(t) == "tbf" and bar(t) == ""
        assert not t.tuner.journal.read_state().trials
        await asyncio.to_thread(t.tuner.revert_all)
    t.reader.close()


async def test_the_session_interface_is_marked_in_the_header_and_its_row(lab):
    t = lab
    await t.pilot.press("3")  # type: ignore[attr-defined]
    await settle(t)
    header = str(t.app.query_one("#header").render())
    assert f"◆ ssh via {t.ifname}" in header, header
    table = t.app.query_one("#ifaces-table")
    assert table.cell(t.ifname, "if")[0] == f"{t.ifname} ◆"
