"""A latency target (`--latency-target MS`) reaches the doctor wherever it runs: the live
view, the recorder (`--record` and `record`), `nettop serve` and `nettop doctor`. Without
one, the rules that trade latency for CPU stay quiet (docs/doctor.md, rules 10 and 12).

The host is a generated tree whose CPUs run the powersave governor: the power-latency
finding must appear with a target and never without one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from treegen import generate_tree

from nettop.cli import build_parser
from nettop.kernel.sysroot import SysRoot
from nettop.tui.app import NettopApp
from nettop.tui.source import LiveSource

ROOT = Path(__file__).resolve().parent.parent
NETTOP = [sys.executable, "-m", "nettop.cli"]


@pytest.fixture(scope="module")
def powersave(tmp_path_factory) -> Path:
    tree = generate_tree(tmp_path_factory.mktemp("ps") / "t", cpus=4, irqs=40, queues=4)
    policy = tree / "sys/devices/system/cpu/cpufreq/policy0"
    policy.mkdir(parents=True)
    (policy / "scaling_governor").write_text("powersave\n")
    (policy / "affected_cpus").write_text("0 1 2 3\n")
    return tree


def _nettop(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NETTOP_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([*NETTOP, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("argv", [
    ["--latency-target", "x"], ["--latency-target", "0"], ["--latency-target", "nan"],
    ["record", "-o", "/tmp/never", "--latency-target", "-1"],
    ["serve", "--latency-target", "inf"], ["doctor", "--latency-target", "1e9"],
])
def test_a_bad_latency_target_is_one_line_naming_it(argv, tmp_path):
    r = _nettop(*argv, tmp_path=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "latency target" in lines[0], r.stderr


def test_every_command_takes_the_target_before_or_after_its_name():
    p = build_parser()
    assert p.parse_args(["--latency-target", "2"]).latency_target == 2.0
    assert p.parse_args(["record", "-o", "f", "--latency-target", "3"]).rec_latency_target == 3.0
    assert p.parse_args(["serve", "--latency-target", "4"]).serve_latency_target == 4.0
    assert p.parse_args(["doctor", "--latency-target", "5"]).doc_latency_target == 5.0
    # given before the command, it is kept for it (a subcommand's default must not erase it)
    assert p.parse_args(["--latency-target", "6", "doctor"]).latency_target == 6.0


@pytest.mark.parametrize("target", [None, "1"])
def test_the_recorder_judges_its_findings_against_the_target(powersave, tmp_path, target):
    rec = tmp_path / "run.nettop"
    extra = ["--latency-target", target] if target else []
    r = _nettop("record", "-o", str(rec), "--root", str(powersave), "-i", "0.5", "--duration", "3", *extra,
                tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    from nettop.record.replay import ReplaySource
    source = ReplaySource(str(rec), 60.0)
    try:
        found = [e.text for e in source.events if e.kind == "finding" and "power-latency:host" in e.text]
        kept = source.reader.meta.get("latency_target_ms")
    finally:
        source.stop()
    if target:
        assert found and "powersave" in found[0], found
        assert float(kept) == 1.0  # the recording says what its findings were judged against
    else:
        assert not found and kept is None
    # the report judges the recording's last window by the same target
    report = _nettop("report", str(rec), "--no-plots", tmp_path=tmp_path)
    assert report.returncode == 0, report.stderr
    end = report.stdout.split("At the end of the recording", 1)[1]
    assert ("latency target 1 ms" in end and "`power-latency:host`" in end) if target else \
        ("latency target" not in end and "power-latency" not in end), end


async def test_replay_judges_the_findings_by_the_recorded_target(powersave, tmp_path):
    from nettop.record.replay import ReplaySource
    from nettop.tui.doctor_panel import FindingsTable

    rec = tmp_path / "run.nettop"
    r = _nettop("record", "-o", str(rec), "--root", str(powersave), "-i", "0.5", "--duration", "3",
                "--latency-target", "1", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    source = ReplaySource(str(rec), 60.0)
    assert source.doctor_config.latency_target_ms == 1.0
    app = NettopApp(source)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):
            await asyncio.sleep(0.05)
            await pilot.pause()
            if source.at_end:
                break
        await pilot.press("7")
        await pilot.pause()
        table = app.query_one("#findings-table", FindingsTable)
        ids = [table.cell(k, "id")[0] for k in table.row_keys()]
        status = str(app.query_one("#doctor").border_subtitle or "") + str(app.query_one("#doctor").border_title or "")
    assert "power-latency:host" in ids, ids
    assert "latency target 1 ms" in status, status


@pytest.mark.parametrize("meta, want", [
    ({}, None), ({"latency_target_ms": 1}, 1.0), ({"latency_target_ms": "2.5"}, 2.5),
    ({"latency_target_ms": "nan"}, None), ({"latency_target_ms": "inf"}, None), ({"latency_target_ms": "x"}, None),
    ({"latency_target_ms": True}, None), ({"latency_target_ms": [1]}, None), ({"latency_target_ms": -1}, None),
    ({"latency_target_ms": "1" * 400}, None),
])
def test_a_recordings_target_is_read_back_and_a_damaged_one_is_none(meta, want):
    from nettop.doctor import DoctorConfig

    assert DoctorConfig.from_meta(meta).latency_target_ms == want


def test_doctor_takes_the_target_given_before_its_name(powersave, tmp_path):
    r = _nettop("--latency-target", "1", "doctor", "--root", str(powersave), "--seconds", "1", "--json",
                tmp_path=tmp_path)
    assert "power-latency:host" in r.stdout, (r.stdout, r.stderr)


@pytest.mark.parametrize("target", [None, 1.0])
async def test_the_live_view_shows_the_power_finding_only_with_a_target(powersave, target):
    src = LiveSource(SysRoot(str(powersave)), None, interval=0.2, latency_target_ms=target)
    app = NettopApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):  # the doctor's window fills within ~1 s of samples
            await asyncio.sleep(0.1)
            await pilot.pause()
            if src.doctor.findings and app.frames > 8:
                break
        ids = [f.id for f in src.doctor.findings]
        header = str(app.query_one("#header").render())
    if target:
        assert "power-latency:host" in ids, ids
        assert "findings" in header
    else:
        assert "power-latency:host" not in ids


def test_serve_exports_the_power_finding_with_a_target(powersave, tmp_path):
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NETTOP_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([*NETTOP, "serve", "--root", str(powersave), "-i", "0.5", "--listen",
                             f"127.0.0.1:{port}", "--latency-target", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    body = ""
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and 'id="power-latency:host"' not in body:
            time.sleep(0.5)
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                assert proc.poll() is None, proc.communicate()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert 'nettop_doctor_finding{id="power-latency:host"' in body, body[-2000:]


async def test_the_record_key_keeps_the_live_views_target(powersave, tmp_path, monkeypatch):
    import time

    from textual.widgets import Input

    from nettop.record.store import Reader

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path / "state"))
    src = LiveSource(SysRoot(str(powersave)), None, interval=0.1, latency_target_ms=2.0)
    app = NettopApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.latest is not None:
                break
            await pilot.pause(0.05)
        await pilot.press("R")
        name = app.screen.query_one(Input).value
        await pilot.press("enter")
        deadline = time.monotonic() + 20
        while src.tap.status().samples < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await pilot.press("R")
    r = Reader(str(tmp_path / name))
    try:
        assert float(r.meta["latency_target_ms"]) == 2.0
    finally:
        r.close()
