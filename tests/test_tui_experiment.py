"""An experiment started from the live view, on the veth lab: `X`, the plan line, the
confirmation, a progress bar that moves while the panels keep drawing, the table at the
end, and the host back as found. `X` again stops a run and its variant is reverted;
tuning keys are refused while one runs; a bad plan line is one line in the prompt.

Real qdiscs, a real iperf3 in the lab's namespace, the real journal (in tmp_path).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from lab import tc_root

from nettop.actions import Journal, Tuner
from nettop.collectors.host import HostReader
from nettop.kernel.sysroot import LIVE
from nettop.tui.app import NettopApp
from nettop.tui.experiment_keys import ResultScreen, bar_text, fitted_bar, parse_command
from nettop.tui.scripted import ScriptedSource
from nettop.tui.screens import Prompt
from nettop.tui.tuning import ConfirmScreen

pytestmark = pytest.mark.lab
SIZE = (120, 40)


def plan_file(tmp_path: Path, lab, measure: float = 1.0, repeats: int = 1) -> Path:  # type: ignore[no-untyped-def]
    p = tmp_path / "plan.toml"
    p.write_text(f"""
name = "from the live view"
iface = "IFACE"
target = "{lab.peer_ip}"
[load]
kind = "tcp"
flows = 2
server_netns = "{lab.netns}"
[timing]
idle = 0.3
warmup = 0.5
measure = {measure}
repeats = {repeats}
seed = 1
interval = 0.25
[[variant]]
name = "shaped"
set = ["nettop set qdisc IFACE tbf rate=2500000 burst=15000 limit=100000"]
""")
    return p


class Live:
    def __init__(self, veth_lab, tmp_path) -> None:  # type: ignore[no-untyped-def]
        self.lab = veth_lab
        self.src = ScriptedSource()
        self.reader = HostReader(LIVE, ifnames=[veth_lab.host_if])
        self.journal = tmp_path / "journal.jsonl"
        self.tuner = Tuner(Journal(str(self.journal)), read_only=None)
        self.app = NettopApp(self.src, tuner=self.tuner)
        self.frames: list[int] = []

    async def tick(self) -> None:
        self.src.push(await asyncio.to_thread(self.reader.read))
        await self.pilot.pause()  # type: ignore[attr-defined]

    def bar(self) -> str:
        w = self.app.query_one("#experiment-bar")
        return w.text if w.display else ""  # type: ignore[attr-defined]

    def notices(self) -> list[str]:
        return [n.message for n in self.app._notifications]

    async def start(self, line: str) -> None:
        pilot = self.pilot  # type: ignore[attr-defined]
        await pilot.press("X")
        await pilot.pause()
        assert isinstance(self.app.screen, Prompt)
        self.app.screen.query_one("#prompt-input").value = line  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(self.app.screen, ConfirmScreen), self.app.screen
        await pilot.press("y")
        await pilot.pause()


@pytest.fixture
async def live(veth_lab, tmp_path):
    t = Live(veth_lab, tmp_path)
    async with t.app.run_test(size=SIZE) as pilot:
        t.pilot = pilot  # type: ignore[attr-defined]
        for _ in range(2):
            await t.tick()
        yield t
        if t.app.experiment is not None:
            t.app.experiment.stop()
        await asyncio.to_thread(t.app.wait_for_experiment, 60)
        await asyncio.to_thread(t.tuner.revert_all)
    t.reader.close()


def entries(journal: Path) -> list[dict]:
    return [json.loads(x) for x in journal.read_text().splitlines() if x.strip()] if journal.exists() else []


async def start_until_shaped(live: Live, tmp_path: Path) -> str:
    """Start a long run and wait until its shaped variant is on the link; the root qdisc
    kind the host had before."""
    lab = live.lab
    found = tc_root(lab.host_if)["kind"]
    await live.start(f"{plan_file(tmp_path, lab, measure=30, repeats=3)} --iface {lab.host_if} "
                     f"-o {tmp_path / 'out'}")
    deadline = time.monotonic() + 60
    while tc_root(lab.host_if)["kind"] != "tbf" and time.monotonic() < deadline:
        await live.tick()
        await asyncio.sleep(0.2)
    assert tc_root(lab.host_if)["kind"] == "tbf", "the shaped variant never ran"
    return str(found)


# --- pure parts ----------------------------------------------------------------------

def test_the_bar_fills_with_the_phases_done():
    assert bar_text(0, 4, "shaped #1: apply", width=8) == "experiment ░░░░░░░░ 0/4 shaped #1: apply · X stops"
    assert bar_text(2, 4, "x", width=8).startswith("experiment ████░░░░ 2/4")
    assert bar_text(4, 4, "", width=8).startswith("experiment ████████ 4/4")
    assert bar_text(1, 4, "fifo #1: load on", width=4, rtt="rtt 0.05/2.1 ms") == \
        "experiment █░░░ 1/4 fifo #1: load on · rtt 0.05/2.1 ms · X stops"


def test_the_bar_shrinks_so_a_long_phase_and_its_rtt_fit_80_columns():
    line = fitted_bar(6, 10, "tbf-short-queue #2: applied", "rtt 1714/2566 ms", 80)
    assert len(line) <= 78 and line.endswith("· rtt 1714/2566 ms · X stops"), line
    assert "█" in line and "░" in line
    assert fitted_bar(6, 10, "x #1: load on", "", 160) == bar_text(6, 10, "x #1: load on")  # full bar when there is room
    # one bar length through a run at 80 columns, whatever the phase's name or RTT
    longest = "tbf-short-queue #2: load on"
    bars = {fitted_bar(d, 10, c, r, 80, longest).split()[1]
            for d, c, r in ((0, "a #1: apply", ""), (6, "tbf-short-queue #2: applied", "rtt 1714/2566 ms"),
                            (9, "b #2: load on", "rtt 0.05/0.07 ms"))}
    assert len({len(b) for b in bars}) == 1, bars


def test_live_rtt_figures_fit_three_or_four_characters():
    from nettop.experiment.runner import _ms

    assert [_ms(v) for v in (0.047, 0.5, 2.14, 9.99, 21.4, 1714.66)] == ["0.05", "0.50", "2.1", "10.0", "21", "1715"]


@pytest.mark.parametrize("line,message", [
    ("", "give a plan"),
    ("/nonexistent/plan.toml", "cannot read plan /nonexistent/plan.toml"),
    ("plan.toml --bogus", "unrecognized arguments: --bogus"),
    ("plan.toml --duration 0", "duration 0 s is out of range"),
    ('plan.toml --iface "eth0', "quotation"),
])
def test_a_bad_experiment_line_is_one_line(line, message):
    from nettop.experiment.plan import PlanError

    with pytest.raises((PlanError, ValueError)) as exc:
        parse_command(line)
    assert message in str(exc.value) and "\n" not in str(exc.value)


# --- on the lab ------------------------------------------------------------------------

async def test_x_runs_a_plan_with_a_progress_bar_and_shows_the_table(live, tmp_path):
    lab = live.lab
    found = tc_root(lab.host_if)["kind"]
    out = tmp_path / "out"
    await live.start(f"nettop experiment {plan_file(tmp_path, lab)} --iface {lab.host_if} -o {out}")
    seen: list[str] = []
    frames = live.app.frames
    refused = False
    deadline = time.monotonic() + 90
    while live.app.experiment is not None and time.monotonic() < deadline:
        await live.tick()  # the panels keep drawing while the run goes on
        if live.bar() and live.bar() not in seen:
            seen.append(live.bar())
        if not refused and "shaped" in live.bar():
            await live.pilot.press("d")  # a tuning key: refused while the run goes on
            await live.pilot.pause()
            refused = any("an experiment is running" in n for n in live.notices())
            if isinstance(live.app.screen, Prompt):
                await live.pilot.press("escape")
        await asyncio.sleep(0.2)
    assert live.app.experiment is None, "the run did not end in 90 s"
    await live.app.workers.wait_for_complete()
    await live.pilot.pause()
    assert live.app.frames > frames + 3
    assert refused, live.notices()
    # the bar moved through the phases: 0/2 at the start, then 1/2, while it named them
    assert any(" 0/2 " in b for b in seen) and any(" 1/2 " in b for b in seen), seen
    assert any("load on" in b for b in seen) and all(b.endswith("X stops") for b in seen), seen
    # and the probe target's latency of the last sample, live, while a variant runs
    assert any(re.search(r"#1: (load on|applied) · rtt [0-9.]+/[0-9.]+ ms · X stops$", b) for b in seen), seen
    assert live.bar() == ""
    assert isinstance(live.app.screen, ResultScreen), (live.app.screen, live.notices())
    text = str(live.app.screen.query_one("#result-table").content)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["variant", "runs", "tput"], text
    assert any(x.startswith("baseline ") and " 1/1 " in x for x in lines), text
    shaped = next(x for x in lines if x.startswith("shaped "))
    assert " 1/1 " in shaped and "M " in shaped, text  # 20 Mbit/s shaper: megabits, not gigabits
    assert all(len(x) <= SIZE[0] - 4 for x in lines), text
    md = (out / "results.md").read_text()
    assert "| baseline" in md and "| shaped" in md
    assert (out / "results.md").exists() and (out / "results.csv").exists() and (out / "run.nettop").exists()
    assert tc_root(lab.host_if)["kind"] == found  # reverted after the variant
    actions = [e.get("action") for e in entries(live.journal)]
    assert "set" in actions and "undo" in actions, actions
    await live.pilot.press("escape")
    await live.pilot.pause()
    assert not isinstance(live.app.screen, ResultScreen)


async def test_x_again_stops_the_run_and_reverts_the_running_variant(live, tmp_path):
    lab = live.lab
    found = await start_until_shaped(live, tmp_path)
    t0 = time.monotonic()
    await live.pilot.press("X")
    while live.app.experiment is not None and time.monotonic() < t0 + 20:
        await live.tick()
        await asyncio.sleep(0.1)
    assert live.app.experiment is None
    assert time.monotonic() - t0 < 10  # within a sample or two, not at the end of the 30 s window
    await live.app.workers.wait_for_complete()
    await live.pilot.pause()
    assert tc_root(lab.host_if)["kind"] == found
    assert any("stopped; the running variant was reverted" in n for n in live.notices()), live.notices()
    assert not isinstance(live.app.screen, ResultScreen)
    assert live.bar() == ""


async def test_a_bad_plan_stays_in_the_prompt_with_one_line(live, tmp_path):
    await live.pilot.press("X")
    await live.pilot.pause()
    prompt = live.app.screen
    assert isinstance(prompt, Prompt)
    prompt.query_one("#prompt-input").value = str(tmp_path / "missing.toml")
    await live.pilot.press("enter")
    await live.pilot.pause()
    assert live.app.screen is prompt  # still open, saying why
    error = str(prompt.query_one("#prompt-error").content)
    assert "cannot read plan" in error and "\n" not in error
    await live.pilot.press("escape")
    await live.pilot.pause()
    assert live.app.experiment is None


async def test_a_plan_naming_a_missing_interface_changes_nothing(live, tmp_path):
    """The plan is checked against the host on the worker before anything changes."""
    lab = live.lab
    await live.start(f"{plan_file(tmp_path, lab)} --iface nosuch0 -o {tmp_path / 'out'}")
    await live.app.workers.wait_for_complete()
    await live.pilot.pause()
    assert any("interface 'nosuch0' does not exist" in n for n in live.notices()), live.notices()
    assert live.app.experiment is None and live.bar() == ""
    assert entries(live.journal) == []


async def test_quitting_mid_run_reverts_the_running_variant_first(live, tmp_path):
    lab = live.lab
    found = await start_until_shaped(live, tmp_path)
    at_exit: list[str] = []
    exit_ = live.app.exit

    def exit_spy(*a, **k):  # type: ignore[no-untyped-def]
        at_exit.append(tc_root(lab.host_if)["kind"])  # what the host has when the app decides to end
        return exit_(*a, **k)

    live.app.exit = exit_spy  # type: ignore[method-assign]
    await live.pilot.press("q")
    for _ in range(100):
        if not live.app.is_running:
            break
        await asyncio.sleep(0.1)
    assert not live.app.is_running
    assert at_exit == [found]  # put back before the app ended


def test_the_screen_table_fits_the_terminal_and_shows_big_changes_as_factors():
    from nettop.experiment.table import Row, Spread, screen_table

    def row(name, tput, p99, failed=0):
        figs = {"tput_bps": Spread(tput, tput, tput, 2), "rtt_load_p99": Spread(p99, p99, p99, 2)}
        return Row(name, 2, failed, figs, ("dead-man",) if failed else ())

    rows = [row("baseline", 9.4e9, 0.05), row("tbf-long-queue-with-a-long-name", 19.9e6, 104.96, failed=1)]
    for width in (76, 100, 114):  # 80 columns and up; the first six columns always show (64)
        table = screen_table(rows, width).splitlines()
        assert all(len(x) <= width for x in table[:3]), (width, table)
    narrow, wide = screen_table(rows, 76), screen_table(rows, 114)
    assert "retrans" not in narrow and "retrans" in wide
    assert "×2099" in narrow and "-100%" in narrow  # 104.96 / 0.05; 19.9M vs 9.4G
    assert "tbf-long-queue-wi…" in narrow and "1/2" in narrow
    assert "tbf-long-queue-with-a-long-name: 1 run(s) failed: dead-man" in narrow
