"""Tuning from the live view, on the real kernel: the keys open a prefilled `set` line or
the mask editor, the change is applied off the UI thread, read back, journaled, marked on
the timeline, undone and redone; refusals come back as one line and change nothing.

The app is fed real snapshots of a lab veth pair (read by the same HostReader the live
view uses) one at a time, so no timer runs; the Tuner writes to the real kernel and keeps
its journal in the test's temporary directory.
"""

from __future__ import annotations

import asyncio

import pytest

from test_tui_app import plain
from lab import run, sysfs, tc_root

from nettop.actions import Journal, Tuner
from nettop.actions.irq import nr_cpu_ids, parse_cpus
from nettop.collectors.cpus import format_cpu_mask
from nettop.collectors.host import HostReader
from nettop.kernel.sysroot import LIVE
from nettop.model.timeline import Event
from nettop.tui.app import NettopApp
from nettop.tui.scripted import ScriptedSource, synthetic
from nettop.tui.screens import Prompt
from nettop.tui.tuning import (
    BeforeAfterScreen, ConfirmScreen, JournalScreen, MaskEditor, before_after_rows, default_command,
    MaskEditor, parse_set,
)

SIZE = (120, 40)


def notices(app: NettopApp) -> list[str]:
    return [n.message for n in app._notifications]


class Lab:
    """The app on a lab veth, its source, a reader of real snapshots and the tuner."""

    def __init__(self, veth_lab, tmp_path) -> None:  # type: ignore[no-untyped-def]
        self.ifname = veth_lab.host_if
        self.src = ScriptedSource()
        self.reader = HostReader(LIVE, ifnames=[self.ifname])
        self.tuner = Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)
        self.app = NettopApp(self.src, tuner=self.tuner)

    def tick(self) -> None:
        self.src.push(self.reader.read())

    def queue(self, kind: str, index: int) -> str:
        return f"/sys/class/net/{self.ifname}/queues/{kind}-{index}"


@pytest.fixture
async def lab(veth_lab, tmp_path):
    t = Lab(veth_lab, tmp_path)
    async with t.app.run_test(size=SIZE) as pilot:
        t.pilot = pilot  # type: ignore[attr-defined]
        for _ in range(2):
            t.tick()
            await pilot.pause()
        yield t
        # pyroute2's blocking calls run an event loop of their own: not on this one's thread
        await asyncio.to_thread(t.tuner.revert_all)
    t.reader.close()


async def settle(t: Lab) -> None:
    """Let the tuning worker finish and its notices reach the app."""
    await t.app.workers.wait_for_complete()
    await t.pilot.pause()  # type: ignore[attr-defined]
    await t.pilot.pause()  # type: ignore[attr-defined]


async def select(t: Lab, label: str) -> None:
    """Put the queues table's cursor on a row such as "ntl…h rx-1"."""
    pilot = t.pilot  # type: ignore[attr-defined]
    await pilot.press("1")
    await pilot.press("home")
    for _ in range(16):
        row = t.app.selected_queue()
        if row is not None and row.label == label:
            return
        await pilot.press("down")
    raise AssertionError(f"no queue row {label}")


async def set_line(t: Lab, line: str) -> None:
    """`o`, type a whole `set` line, enter, and wait for the worker."""
    await t.pilot.press("o")  # type: ignore[attr-defined]
    await t.pilot.pause()  # type: ignore[attr-defined]
    t.app.screen.query_one("#prompt-input").value = line
    await t.pilot.press("enter")  # type: ignore[attr-defined]
    await settle(t)


# --- pure parts ----------------------------------------------------------------------

def test_a_set_line_parses_like_the_cli_with_or_without_the_leading_words():
    a = parse_set("rps eth0 0 0-3")
    b = parse_set("nettop set rps eth0 0 0-3")
    assert [(c.setting.key, c.value) for c in a] == [(c.setting.key, c.value) for c in b]
    assert a[0].setting.key.startswith("rps_cpus")


@pytest.mark.parametrize("line", ["", "rps", "frobnicate eth0 1", "rps eth0 0 0-3 extra words"])
def test_a_bad_set_line_is_one_line_naming_the_fix(line):
    from nettop.actions.base import ActionError

    with pytest.raises(ActionError) as exc:
        parse_set(line)
    assert "\n" not in str(exc.value) and ("e.g." in str(exc.value) or "--help" in str(exc.value))


def test_the_mask_editor_shows_and_sends_the_mask_as_sysfs_prints_it():
    def editor(chosen, ncpus):
        return MaskEditor("rps", "eth0", 0, range(ncpus), set(chosen), ncpus)
    assert editor([], 2).mask() == "0" and editor([0, 1], 2).mask() == "3"
    assert editor([4, 5, 6, 7], 8).mask() == "f0"
    # 32-bit groups sized by the kernel's CPU ids, as rps_cpus reads on such a host
    assert editor([0, 33], 36).mask() == "2,00000001"
    assert editor([0, 33], 64).mask() == "00000002,00000001"
    assert editor([0, 33], 64).command() == "rps eth0 0 0x00000002,00000001"
    assert parse_cpus("0x00000002,00000001") == (0, 33)  # and the set line reads it back


def test_keys_prefill_from_the_selected_queue():
    from nettop.tui import model

    row = model.QueueRow(key="eth0/combined/1", ifname="eth0", kind="combined", index=1, irqs=(25,),
                         affinity=(2,), effective=(2,), irq_per_s=None, rx_pps=None, tx_pps=None,
                         rps=None, xps=None, managed=False)
    assert default_command("affinity", row, [0, 1, 2, 3]) == "irq 25 2"
    assert default_command("spread", row, [0, 1, 2, 3]) == "irq eth0 spread 0-3"
    assert default_command("qdisc", row, [0, 1]) == "qdisc eth0 fq_codel"
    assert default_command("coalesce", row, [0]) == "coalesce eth0 "
    assert default_command("affinity", None, [0, 1]) == "irq IRQ CPUS"


def test_before_after_rows_average_each_side_of_the_change():
    src = ScriptedSource()
    points = [src.push(synthetic(i)) for i in range(12)]
    t_change = points[6].snapshot.t_wall
    rows, note = before_after_rows(points, t_change, 30.0)
    labels = [r[0] for r in rows]
    assert any("throughput" in label or "rx" in label for label in labels)
    assert "intervals before" in note and "no interval after" not in note
    rows, note = before_after_rows(points, points[-1].snapshot.t_wall + 1, 30.0)
    assert "no interval after the change yet" in note


# --- on the real kernel ----------------------------------------------------------------

async def test_k_edits_the_rps_mask_applies_it_and_u_U_undo_and_redo(lab):
    t, pilot = lab, lab.pilot
    await select(t, f"{t.ifname} rx-1")
    await pilot.press("k")
    await pilot.pause()
    editor = t.app.screen
    assert isinstance(editor, MaskEditor) and editor.what == "rps" and editor.queue == 1
    assert "none (off)" in str(editor.query_one("#mask-title").render())
    await pilot.press("1")  # toggle CPU 1
    assert "CPUs 1 = mask 2" in str(editor.query_one("#mask-title").render())
    await pilot.press("enter")
    await settle(t)
    assert sysfs(t.queue("rx", 1) + "/rps_cpus") == "2"
    assert any("rps_cpus" in n and "→ 2" in n for n in notices(t.app)), notices(t.app)
    events = [e for e in t.src.timeline.events() if e.kind == "tuning"]
    assert len(events) == 1 and "rps_cpus" in events[0].text  # the charts' marker
    t.tick()
    await pilot.pause()
    assert t.app.selected_queue().rps == "2"  # the row shows what the kernel now has

    await pilot.press("u")
    await settle(t)
    assert sysfs(t.queue("rx", 1) + "/rps_cpus") == "0"
    await pilot.press("U")
    await settle(t)
    assert sysfs(t.queue("rx", 1) + "/rps_cpus") == "2"
    await pilot.press("u")
    await settle(t)
    await pilot.press("u")
    await settle(t)
    assert any(n.startswith("nothing to undo") for n in notices(t.app)), notices(t.app)


async def test_k_on_a_tx_queue_edits_xps_and_star_is_only_for_rps(lab):
    t, pilot = lab, lab.pilot
    await select(t, f"{t.ifname} tx-2")
    await pilot.press("k")
    await pilot.pause()
    editor = t.app.screen
    assert isinstance(editor, MaskEditor) and editor.what == "xps"
    await pilot.press("asterisk")
    assert not editor.all_queues
    await pilot.press("c", "0", "enter")
    await settle(t)
    assert int(sysfs(t.queue("tx", 2) + "/xps_cpus"), 16) == 1


async def test_star_in_the_mask_editor_sets_every_rx_queue_as_one_undo_step(lab):
    t, pilot = lab, lab.pilot
    await select(t, f"{t.ifname} rx-0")
    await pilot.press("k")
    await pilot.pause()
    await pilot.press("f", "asterisk")
    assert "every rx queue" in str(t.app.screen.query_one("#mask-title").render())
    await pilot.press("enter")
    await settle(t)
    cpus = format_cpu_mask(t.app.latest.snapshot.online_cpus, nr_cpu_ids())
    assert [sysfs(t.queue("rx", i) + "/rps_cpus") for i in range(4)] == [cpus] * 4
    await pilot.press("u")
    await settle(t)
    assert [sysfs(t.queue("rx", i) + "/rps_cpus") for i in range(4)] == ["0"] * 4


async def test_escape_in_the_mask_editor_changes_nothing(lab):
    t, pilot = lab, lab.pilot
    await select(t, f"{t.ifname} rx-3")
    await pilot.press("k")
    await pilot.pause()
    await pilot.press("1", "escape")
    await settle(t)
    assert sysfs(t.queue("rx", 3) + "/rps_cpus") == "0"
    assert not t.src.timeline.events()


async def test_o_takes_any_set_line_and_a_bad_line_keeps_the_prompt_open(lab):
    t, pilot = lab, lab.pilot
    await pilot.press("o")
    await pilot.pause()
    prompt = t.app.screen
    assert isinstance(prompt, Prompt)
    await pilot.press(*"txqueuelen")
    await pilot.press("enter")
    await pilot.pause()
    assert t.app.screen is prompt  # still open, saying what is wrong
    assert prompt.query_one("#prompt-error").display
    inp = prompt.query_one("#prompt-input")
    inp.value = f"txqueuelen {t.ifname} 5000"
    await pilot.press("enter")
    await settle(t)
    assert sysfs(f"/sys/class/net/{t.ifname}/tx_queue_len") == "5000"
    assert any("txqueuelen" in n or "tx_queue_len" in n for n in notices(t.app)), notices(t.app)


async def test_c_on_a_veth_says_in_one_line_that_the_driver_has_no_coalescing(lab):
    t, pilot = lab, lab.pilot
    await select(t, f"{t.ifname} rx-0")
    await pilot.press("c")
    await pilot.pause()
    prompt = t.app.screen
    assert isinstance(prompt, Prompt)
    await settle(t)  # the driver is asked on a worker thread, the prompt is open meanwhile
    title = str(prompt.query_one("#prompt-title").render())
    assert "not supported" in title or "EOPNOTSUPP" in title  # the hint already tells
    prompt.query_one("#prompt-input").value = f"coalesce {t.ifname} rx-usecs=10"
    await pilot.press("enter")
    await settle(t)
    errors = [n for n in notices(t.app) if "coalesce" in n or "EOPNOTSUPP" in n or "not supported" in n]
    assert errors and all("\n" not in n for n in errors), notices(t.app)
    assert not [e for e in t.src.timeline.events() if e.kind == "tuning"]
    assert t.tuner.state().entries == []  # nothing journaled for a refused change


async def test_d_asks_before_replacing_the_qdisc_and_n_leaves_it(lab):
    t, pilot = lab, lab.pilot
    before = tc_root(t.ifname)["kind"]
    await select(t, f"{t.ifname} tx-0")
    await pilot.press("d")
    await pilot.pause()
    prompt = t.app.screen
    assert str(prompt.query_one("#prompt-input").value) == f"qdisc {t.ifname} fq_codel"
    prompt.query_one("#prompt-input").value = f"qdisc {t.ifname} pfifo limit=50"
    await pilot.press("enter")
    await settle(t)
    confirm = t.app.screen
    assert isinstance(confirm, ConfirmScreen)
    assert "pfifo" in str(confirm.query_one("#confirm-text").render())
    await pilot.press("n")
    await settle(t)
    assert tc_root(t.ifname)["kind"] == before

    await pilot.press("d")
    await pilot.pause()
    t.app.screen.query_one("#prompt-input").value = f"qdisc {t.ifname} pfifo limit=50"
    await pilot.press("enter")
    await settle(t)
    await pilot.press("y")
    await settle(t)
    root = tc_root(t.ifname)
    assert root["kind"] == "pfifo" and root["options"]["limit"] == 50


async def test_a_qdisc_this_kernel_lacks_is_one_line_and_nothing_changes(lab):
    t, pilot = lab, lab.pilot
    before = tc_root(t.ifname)
    await select(t, f"{t.ifname} tx-0")
    await pilot.press("d")
    await pilot.pause()
    await pilot.press("enter")  # the prefilled fq_codel, which this kernel does not have
    await settle(t)
    if isinstance(t.app.screen, ConfirmScreen):
        await pilot.press("y")
        await settle(t)
    if tc_root(t.ifname)["kind"] == "fq_codel":
        pytest.skip("this kernel has sch_fq_codel")
    assert any("sch_fq_codel" in n for n in notices(t.app)), notices(t.app)
    assert tc_root(t.ifname)["kind"] == before["kind"]
    assert not [e for e in t.src.timeline.events() if e.kind == "tuning"]


async def test_j_lists_the_journal_and_b_compares_before_and_after(lab):
    t, pilot = lab, lab.pilot
    for _ in range(3):
        t.tick()
        await pilot.pause()
    await select(t, f"{t.ifname} rx-2")
    await pilot.press("k")
    await pilot.pause()
    await pilot.press("0", "enter")
    await settle(t)
    for _ in range(3):
        t.tick()
        await pilot.pause()
    await pilot.press("j")
    await settle(t)
    journal = t.app.screen
    assert isinstance(journal, JournalScreen)
    assert "rps_cpus" in str(journal.query_one("#journal-list").render())
    await pilot.press("b")
    await pilot.pause()
    ba = t.app.screen
    assert isinstance(ba, BeforeAfterScreen)
    table = str(ba.query_one("#ba-table").render())
    assert "before" in table and "after" in table
    assert "no interval after" not in str(ba.query_one("#ba-note").render())
    await pilot.press("escape")
    await pilot.press("escape")
    await pilot.pause()
    await pilot.press("b")  # straight to the newest change
    await pilot.pause()
    assert isinstance(t.app.screen, BeforeAfterScreen)


async def test_x_in_the_journal_reverts_everything(lab):
    t, pilot = lab, lab.pilot
    await set_line(t, f"rps {t.ifname} all 0x3")
    assert sysfs(t.queue("rx", 0) + "/rps_cpus") == "3"
    await pilot.press("j")
    await settle(t)
    await pilot.press("x")
    await settle(t)
    assert [sysfs(t.queue("rx", i) + "/rps_cpus") for i in range(4)] == ["0"] * 4


async def test_the_journal_shows_a_value_someone_else_changed(lab):
    t, pilot = lab, lab.pilot
    await set_line(t, f"txqueuelen {t.ifname} 3000")
    run(["ip", "link", "set", t.ifname, "txqueuelen", "1234"])  # someone else
    await pilot.press("j")
    await settle(t)
    drift = str(t.app.screen.query_one("#journal-drift").render())
    assert "changed by someone else" in drift and "1234" in drift


async def test_a_journal_with_a_torn_line_is_said_once_and_shown_in_the_journal_screen(lab):
    """A crash can leave a torn last line; the CLI warns once per command, the live view once
    per set of skipped lines (not on every key) and always in the journal screen."""
    t, pilot = lab, lab.pilot
    with open(t.tuner.journal.path, "a") as f:
        f.write('{"op": "begin", "id": 9')  # torn mid-record, no newline
    await set_line(t, f"txqueuelen {t.ifname} 3000")
    assert sysfs(f"/sys/class/net/{t.ifname}/tx_queue_len") == "3000"  # the change still lands
    said = [n for n in notices(t.app) if "skipped 1 unreadable line" in n]
    assert len(said) == 1 and "line 1:" in said[0] and t.tuner.journal.path in said[0]
    await set_line(t, f"txqueuelen {t.ifname} 3001")
    assert len([n for n in notices(t.app) if "unreadable line" in n]) == 1  # not again
    await pilot.press("j")
    await settle(t)
    skipped = t.app.screen.query_one("#journal-skipped")
    assert skipped.display and "skipped 1 unreadable line" in str(skipped.render())
    assert "txqueuelen" in str(t.app.screen.query_one("#journal-list").render())
    await pilot.press("escape")
    await pilot.press("u")  # the records after the torn line still count
    await settle(t)
    assert sysfs(f"/sys/class/net/{t.ifname}/tx_queue_len") == "3000"


async def test_a_clean_journal_shows_no_skipped_line(lab):
    t, pilot = lab, lab.pilot
    await set_line(t, f"txqueuelen {t.ifname} 3000")
    await pilot.press("j")
    await settle(t)
    assert not t.app.screen.query_one("#journal-skipped").display
    assert not [n for n in notices(t.app) if "unreadable line" in n]


# --- refusals without the kernel ---------------------------------------------------------

@pytest.mark.parametrize("key", ["a", "A", "k", "c", "d", "o", "u", "U"])
async def test_replay_refuses_every_tuning_key_with_the_reason(key):
    src = ScriptedSource(mode="replay")
    app = NettopApp(src)
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        src.push(synthetic(1))
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
        assert not isinstance(app.screen, (Prompt, MaskEditor))
        assert any("replay: tuning is disabled" in n for n in notices(app))
        assert app.tuner is None  # no Tuner (and no journal) is made for a recording


@pytest.mark.parametrize("key", ["a", "k", "o", "u"])
async def test_without_root_the_keys_say_why_they_are_disabled(key):
    src = ScriptedSource(mode="read-only", is_root=False)
    reason = "nettop runs without root, so tuning is read-only: run it as root (sudo nettop) to change settings"
    app = NettopApp(src, tuner=Tuner(Journal("/nonexistent/never-written"), read_only=reason))
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        src.push(synthetic(1))
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
        assert not isinstance(app.screen, (Prompt, MaskEditor))
        assert reason in notices(app)


async def test_a_captured_tree_is_not_tuned_even_as_root():
    src = ScriptedSource(mode="read-only", is_root=True)
    app = NettopApp(src, tuner=Tuner(Journal("/nonexistent/never-written"), read_only=None))
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        await pilot.pause()
        await pilot.press("k")
        await pilot.pause()
        assert any("captured" in n for n in notices(app))


async def test_a_tuning_event_is_a_marker_on_the_charts():
    src = ScriptedSource()
    app = NettopApp(src, tuner=Tuner(Journal("/nonexistent/never-written"), read_only=None))
    async with app.run_test(size=SIZE) as pilot:
        for i in range(3):
            src.push(synthetic(i))
            await pilot.pause()
        app.get_tuner().on_event(Event(src.timeline.latest().snapshot.t_wall, "tuning", "rps_cpus x rx-0: 0 → f"))
        src.push(synthetic(3))
        await pilot.pause()
        from nettop.tui import model

        events = src.timeline.events()
        assert [e.kind for e in events] == ["tuning"]
        assert model.event_offsets(events, app.latest.snapshot, app.window_s) == [-1.0]


async def test_a_moves_an_irq_and_the_notice_says_requested_and_effective(lab, deflate_irq):
    """The harmless virtio balloon IRQ stands in for a NIC queue's (veth has none)."""
    t, pilot, irq = lab, lab.pilot, deflate_irq
    path = f"/proc/irq/{irq}/smp_affinity_list"
    original = sysfs(path)
    await select(t, f"{t.ifname} rx-0")
    await pilot.press("a")
    await pilot.pause()
    prompt = t.app.screen
    assert isinstance(prompt, Prompt)
    assert prompt.query_one("#prompt-input").value == "irq IRQ CPUS"  # a veth queue has no IRQ
    prompt.query_one("#prompt-input").value = f"irq {irq} 1"
    await pilot.press("enter")
    await settle(t)
    assert sysfs(path) == "1"
    line = next(n for n in notices(t.app) if f"irq {irq}" in n or f"IRQ {irq}" in n or str(irq) in n)
    assert "effective" in line, line
    await pilot.press("u")
    await settle(t)
    assert sysfs(path) == original


async def test_moving_an_irq_while_irqbalance_runs_offers_to_ban_it(lab, deflate_irq, monkeypatch):
    """irqbalance is not installed here, so "running" is the one thing stood in; the ban
    itself really looks for irqbalance's socket and says, in one line, that none is there."""
    t, pilot, irq = lab, lab.pilot, deflate_irq
    monkeypatch.setattr(t.tuner.irqbalance, "running", lambda: True)
    path = f"/proc/irq/{irq}/smp_affinity_list"
    original = sysfs(path)
    await set_line(t, f"irq {irq} 1")
    confirm = t.app.screen
    assert isinstance(confirm, ConfirmScreen) and confirm.allow_ban
    assert "irqbalance is running" in str(confirm.query_one("#confirm-text").render())
    assert sysfs(path) == original  # nothing before the answer
    await pilot.press("b")
    await settle(t)
    assert sysfs(path) == "1"  # moved and journaled, even though the ban found no irqbalance
    assert any("no running irqbalance" in n for n in notices(t.app)), notices(t.app)


@pytest.mark.parametrize("mode,root,reason", [
    ("replay", True, "replay: tuning is disabled"),
    ("read-only", False, "nettop runs without root"),
])
async def test_help_shows_the_tuning_keys_disabled_with_the_reason(mode, root, reason):
    from nettop.tui.screens import HelpScreen

    src = ScriptedSource(mode=mode, is_root=root)
    tuner = None if mode == "replay" else Tuner(Journal("/nonexistent/never-written"),
                                                read_only="nettop runs without root, so tuning is read-only")
    app = NettopApp(src, tuner=tuner)
    async with app.run_test(size=SIZE) as pilot:
        src.push(synthetic(0))
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = plain(app.screen.query_one("#help-keys"))
        rows = [line for line in text.splitlines() if "[disabled: " in line]
        assert rows and all(reason in line for line in rows)
        assert any("RPS (rx queue) or XPS" in line for line in rows)
        assert not any("pause" in line for line in rows)  # only the tuning keys
