"""One change, three ways in: `nettop set`, the live view's key and a doctor fix go through
the one tuning workflow, so they journal the same entry, handle irqbalance the same way
(a ban resolves its conflict) and leave the kernel the same.

The kernel is real: RPS on a lab veth, and the virtio balloon's IRQ (harmless to move).
irqbalance is not installed here (and a real one would move this machine's IRQs), so the
Tuner's host root is a small tree with an irqbalance process and its control socket,
served by a thread that speaks irqbalance's protocol; that root is the only stand-in.
Each way in has its own journal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lab import sysfs
from test_doctor_tui import WatchedSource, cells

from nettop.actions import Journal, Tuner
from nettop.actions import cli_set, workflow
from nettop.collectors.host import HostReader
from nettop.doctor.finding import Finding, Severity
from nettop.doctor.watch import Watch
from nettop.kernel.sysroot import LIVE, SysRoot
from nettop.tui.app import NettopApp
from nettop.tui.doctor_panel import FindingsTable
from nettop.tui.tuning import ConfirmScreen

SIZE = (160, 50)
PID = 4242  # the stand-in irqbalance's pid in the host root


class Irqbalance:
    """irqbalance's control socket: one command per connection, "setup" answered with
    its ban list, "settings ban irqs ..." replacing it (as irqbalance 1.9 does)."""

    def __init__(self, root: Path) -> None:
        (root / f"proc/{PID}").mkdir(parents=True)
        (root / f"proc/{PID}/comm").write_text("irqbalance\n")
        (root / "run/irqbalance").mkdir(parents=True)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(root / f"run/irqbalance/irqbalance{PID}.sock"))
        self.srv.listen(4)
        self.banned: list[int] = []
        self.bans: list[list[int]] = []  # each ban command's list, in order
        self.got: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                msg = conn.recv(500)
                self.got.append(msg)
                if msg == b"setup":
                    conn.sendall(("SLEEP 10 " + "".join(f"IRQ {i} LOAD 0 DIFF 0 CLASS 0 " for i in self.banned)
                                  + "BANNED 0").encode())
                elif msg.startswith(b"settings ban irqs "):
                    self.banned = [int(w) for w in msg.split()[3:] if w.isdigit()]
                    self.bans.append(self.banned)

    def wait_bans(self, n: int) -> list[list[int]]:
        """The ban commands once `n` have arrived: nettop sends one without waiting for a
        reply, so it may still be on its way when the change is reported."""
        deadline = time.monotonic() + 10
        while len(self.bans) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.bans

    def close(self) -> None:
        self.srv.close()


@pytest.fixture
def host(tmp_path):
    """The Tuners' host root: irqbalance runs, no tuned profile."""
    root = tmp_path / "host"
    fake = Irqbalance(root)
    yield SysRoot(str(root)), fake
    fake.close()


@pytest.fixture
def outcomes(monkeypatch):
    """Every Outcome the workflow returns, whichever way in called it."""
    seen: list[workflow.Outcome] = []
    real = workflow.run_plans

    def spy(*args: Any, **kwargs: Any) -> workflow.Outcome:
        out = real(*args, **kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(workflow, "run_plans", spy)
    return seen


def tuner(tmp_path: Path, name: str, root: SysRoot) -> Tuner:
    return Tuner(Journal(str(tmp_path / name / "journal.jsonl")), read_only=None, root=root)


def journaled(t: Tuner) -> list[tuple]:
    """The journal's entries without their times: what each way in must write alike."""
    return [(e.id, e.group, e.action, e.key, e.setting, e.before, e.value, e.text, e.after, e.verified, e.error)
            for e in t.journal.read_state().entries]


def handling(out: workflow.Outcome) -> tuple:
    """The conflict handling of one applied Outcome."""
    return (out.irqs, out.irqbalance, [c.what for c in out.conflicts], out.warnings, out.banned is not None,
            out.pending, out.error, [r.text for r in out.results])


def cli(t: Tuner, words: list[str], capsys: Any) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    cli_set.add_subcommands(parser.add_subparsers(dest="command"))
    assert cli_set.run(parser.parse_args(["set", *words, "--json"]), t) == 0
    return json.loads(capsys.readouterr().out)


async def settle(app: NettopApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def by_key(t: Tuner, ifname: str, line: str, key: str, answer: str | None) -> list[str]:
    """The live view: `key` opens the tuning prompt, the line is typed, enter; `answer`
    on the confirm screen when one opens. Returns the notices."""
    app = NettopApp(WatchedSource(Watch()), tuner=t)
    reader = HostReader(LIVE, ifnames=[ifname])
    try:
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(2):
                app.source.push(reader.read())  # type: ignore[attr-defined]  # the scripted source's feed
                await pilot.pause()
            await pilot.press(key)
            await pilot.pause()
            app.screen.query_one("#prompt-input").value = line  # type: ignore[attr-defined]
            await pilot.press("enter")
            await settle(app, pilot)
            if answer is not None:
                assert isinstance(app.screen, ConfirmScreen), app.screen
                await pilot.press(answer)
                await settle(app, pilot)
            return [n.message for n in app._notifications]
    finally:
        reader.close()


class OneFinding(Watch):
    """The doctor's Watch showing one finding whose fix is the line under test."""

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

    def shown(self) -> list[Finding]:
        return [self.finding]


async def by_doctor_fix(t: Tuner, ifname: str, line: str, answer: str | None) -> list[str]:
    """The findings panel: 7, Enter on the finding, Enter on its prefilled fix."""
    finding = Finding("workflow-test", ifname, Severity.WARN, "a finding whose fix is under test", "test",
                      ("figures",), fix=(f"nettop set {line}",))
    src = WatchedSource(OneFinding(finding))
    app = NettopApp(src, tuner=t)
    reader = HostReader(LIVE, ifnames=[ifname])
    try:
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(2):
                src.push(reader.read())
                await pilot.pause()
            assert any(r[1] == finding.id for r in cells(app)), cells(app)
            await pilot.press("7")
            table = app.query_one("#findings-table", FindingsTable)
            table.cursor = [k.split("|", 1)[1] for k in table.row_keys()].index(finding.id)
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen.query_one("#prompt-input").value == line  # type: ignore[attr-defined]
            await pilot.press("enter")
            await settle(app, pilot)
            if answer is not None:
                assert isinstance(app.screen, ConfirmScreen), app.screen
                await pilot.press(answer)
                await settle(app, pilot)
            return [n.message for n in app._notifications]
    finally:
        reader.close()


async def test_an_rps_change_is_the_same_from_the_cli_the_key_and_the_doctor(veth_lab, tmp_path, host,
                                                                             outcomes, capsys):
    root, _ = host
    ifname = veth_lab.host_if
    path = f"/sys/class/net/{ifname}/queues/rx-0/rps_cpus"
    original = sysfs(path)
    line = f"rps {ifname} 0 1"
    tuners = [tuner(tmp_path, n, root) for n in ("cli", "key", "doctor")]
    after: list[str] = []
    sets: list[list[tuple]] = []  # each journal's set entries, read before its revert

    doc = await asyncio.to_thread(cli, tuners[0], line.split(), capsys)
    after.append(sysfs(path))
    sets.append([e for e in journaled(tuners[len(sets)]) if e[2] == "set"])
    await asyncio.to_thread(tuners[0].revert_all)
    assert sysfs(path) == original
    shown_key = await by_key(tuners[1], ifname, line, "o", None)
    after.append(sysfs(path))
    sets.append([e for e in journaled(tuners[len(sets)]) if e[2] == "set"])
    await asyncio.to_thread(tuners[1].revert_all)
    shown_doctor = await by_doctor_fix(tuners[2], ifname, line, None)
    after.append(sysfs(path))
    sets.append([e for e in journaled(tuners[len(sets)]) if e[2] == "set"])
    await asyncio.to_thread(tuners[2].revert_all)
    assert sysfs(path) == original

    # THEN the kernel took CPU 1's mask each time, and each journal says so alike
    assert int(after[0].replace(",", ""), 16) == 0b10 and after == [after[0]] * 3
    assert len(sets[0]) == 1 and sets[0][0][8] == after[0] and sets[0][0][9] is True
    assert sets[1] == sets[0] and sets[2] == sets[0]
    # and the workflow handled it alike: no IRQ moved, so irqbalance is neither asked nor banned
    assert len(outcomes) == 3 and handling(outcomes[1]) == handling(outcomes[0]) == handling(outcomes[2])
    assert outcomes[0].irqs == () and not outcomes[0].irqbalance and outcomes[0].banned is None
    assert doc["warnings"] == [] and doc["irqbalance_ban"] is None
    assert [r["text"] for r in doc["results"]] == [sets[0][0][7]]
    assert any(sets[0][0][7] in n for n in shown_key) and any(sets[0][0][7] in n for n in shown_doctor)


async def test_an_irq_move_with_a_ban_is_the_same_from_the_cli_the_key_and_the_doctor(veth_lab, deflate_irq,
                                                                                    tmp_path, host, outcomes,
                                                                                    capsys):
    root, balance = host
    irq = deflate_irq
    path = f"/proc/irq/{irq}/smp_affinity_list"
    original = sysfs(path)
    target = "0" if original == "1" else "1"
    line = f"irq {irq} {target}"
    tuners = [tuner(tmp_path, n, root) for n in ("cli", "key", "doctor")]
    after: list[str] = []
    sets: list[list[tuple]] = []  # each journal's set entries, read before its revert

    # GIVEN irqbalance runs; WHEN the move is made with a ban: `--ban`, or b on the confirm screen
    doc = await asyncio.to_thread(cli, tuners[0], [*line.split(), "--ban"], capsys)
    after.append(sysfs(path))
    sets.append([e for e in journaled(tuners[len(sets)]) if e[2] == "set"])
    await asyncio.to_thread(tuners[0].revert_all)
    shown_key = await by_key(tuners[1], veth_lab.host_if, line, "a", "b")
    after.append(sysfs(path))
    sets.append([e for e in journaled(tuners[len(sets)]) if e[2] == "set"])
    await asyncio.to_thread(tuners[1].revert_all)
    shown_doctor = await by_doctor_fix(tuners[2], veth_lab.host_if, line, "b")
    after.append(sysfs(path))
    sets.append([e for e in journaled(tuners[len(sets)]) if e[2] == "set"])
    await asyncio.to_thread(tuners[2].revert_all)
    assert sysfs(path) == original

    # THEN the kernel took it, the same entry is journaled and irqbalance was told each time
    assert after == [target] * 3
    assert len(sets[0]) == 1 and sets[0][0][8] == target and sets[0][0][9] is True
    assert sets[1] == sets[0] and sets[2] == sets[0]
    assert balance.wait_bans(3) == [[irq]] * 3
    # and, banned, irqbalance's conflict is resolved: reported by none of the three
    applied = [o for o in outcomes if o.results]
    assert len(applied) == 3 and handling(applied[1]) == handling(applied[0]) == handling(applied[2])
    assert applied[0].irqs == (irq,) and applied[0].irqbalance and applied[0].banned is not None
    assert "irqbalance" not in [c.what for c in applied[0].conflicts]
    assert doc["irqbalance_ban"] == applied[0].banned and doc["warnings"] == []
    for shown in (shown_key, shown_doctor):
        assert any(f"irqbalance will leave IRQ {irq} alone" in n for n in shown), shown
        assert not any("will move these IRQs back" in n for n in shown), shown
    # the key and the doctor asked first (irqbalance runs, they can offer the ban); the CLI's --ban did not need to
    assert [o.pending for o in outcomes if not o.results] == [True, True]


async def test_without_a_ban_irqbalances_conflict_is_reported_by_the_cli_and_the_key(deflate_irq, veth_lab,
                                                                                   tmp_path, host, capsys):
    root, balance = host
    irq = deflate_irq
    original = sysfs(f"/proc/irq/{irq}/smp_affinity_list")
    target = "0" if original == "1" else "1"
    t = tuner(tmp_path, "cli", root)
    doc = await asyncio.to_thread(cli, t, ["irq", str(irq), target], capsys)
    assert doc["irqbalance_ban"] is None and any("irqbalance is running" in w for w in doc["warnings"])
    await asyncio.to_thread(t.revert_all)
    t = tuner(tmp_path, "key", root)
    shown = await by_key(t, veth_lab.host_if, f"irq {irq} {target}", "a", "y")
    await asyncio.to_thread(t.revert_all)
    assert any("irqbalance is running" in n for n in shown), shown
    assert balance.got == []  # nobody told irqbalance anything
    assert os.path.exists(root.join(f"run/irqbalance/irqbalance{PID}.sock"))


# --- the workflow's own answers ------------------------------------------------------------

def test_a_bad_line_a_read_only_tuner_and_a_disruptive_change_stop_before_writing(veth_lab, tmp_path, host):
    root, _ = host
    ifname = veth_lab.host_if
    mtu = f"/sys/class/net/{ifname}/mtu"
    before = sysfs(mtu)
    t = tuner(tmp_path, "w", root)
    bad = workflow.run_line(t, "rps")
    assert bad.error is not None and "\n" not in bad.error and not bad.results
    bad = workflow.run_line(t, "rps 'eth0")
    assert bad.error is not None and bad.error.startswith("cannot read that line")
    ro = Tuner(Journal(str(tmp_path / "ro.jsonl")), read_only="read-only here", root=root)
    out = workflow.run_line(ro, f"mtu {ifname} 1400")
    assert out.error == "read-only here" and out.plans and not out.results
    out = workflow.run_line(t, f"mtu {ifname} 1400")
    assert out.pending and out.confirm and out.confirm[0].startswith(f"mtu {ifname}") and not out.results
    assert sysfs(mtu) == before and t.journal.read_state().entries == []
    dry = workflow.run_line(t, f"mtu {ifname} 1400", confirmed=True, dry_run=True)
    assert dry.dry_run and not dry.pending and not dry.results and sysfs(mtu) == before
    done = workflow.run_line(t, f"mtu {ifname} 1400", confirmed=True)
    try:
        assert done.ok and sysfs(mtu) == "1400" and [r.after for r in done.results] == [1400]
    finally:
        t.revert_all()
    assert sysfs(mtu) == before


def test_the_mask_editor_sizes_a_mask_like_the_queues_own():
    from nettop.collectors.cpus import format_cpu_mask
    from nettop.tui.tuning import mask_bits

    assert mask_bits("00000000,00000003") == 64 and mask_bits("3") == 4 and mask_bits(None) is None
    assert format_cpu_mask({1}, mask_bits("00000000,00000003") or 1) == "00000000,00000002"
    assert format_cpu_mask({1}, mask_bits("3") or 1) == "2"
