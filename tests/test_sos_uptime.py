"""A sosreport's time since boot, from the `uptime` text its host plugin keeps (no sos
plugin copies /proc/uptime): with it a single sosreport gives since-boot averages and the
doctor judges them; without it, totals only as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.cli import main
from nettop.kernel.sos_text import parse_uptime

GUEST = Path(__file__).parent / "data" / "sos-guest"


@pytest.mark.parametrize("text, seconds", [
    (" 01:05:28 up  4:20,  0 user,  load average: 3.00, 4.85, 10.68\n", 4 * 3600 + 20 * 60),
    (" 10:00:00 up 3 days,  4:05,  2 users,  load average: 0.00, 0.01, 0.05\n", 3 * 86400 + 4 * 3600 + 5 * 60),
    (" 10:00:00 up 1 day, 20 min,  1 user,  load average: 0.10, 0.20, 0.30\n", 86400 + 20 * 60),
    (" 10:00:00 up 5 min,  1 user,  load average: 0.10, 0.20, 0.30\n", 5 * 60),
    (" 10:00:00 up 412 days, 23:59,  0 users,  load average: 1.00, 1.00, 1.00\n", 412 * 86400 + 23 * 3600 + 59 * 60),
    ("up 2 weeks, 3 hours, 1 minute\n", 14 * 86400 + 3 * 3600 + 60),  # uptime -p
    ("up 1 year, 2 days, 1 hour, 5 minutes\n", 365 * 86400 + 2 * 86400 + 3600 + 300),
])
def test_the_uptime_commands_wordings_give_seconds_since_boot(text, seconds):
    assert parse_uptime(text) == seconds


@pytest.mark.parametrize("text", ["", "up", " 10:00:00 up ages,  1 user", "load average: 1, 2, 3",
                                  " 10:00:00 up 3 parsecs, 4:05,  2 users", "up 99999999 years"])
def test_text_without_a_readable_uptime_gives_none(text):
    assert parse_uptime(text) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_number_of_seconds_or_none(text):
    got = parse_uptime(text)
    assert got is None or 0 < got < 1e10


def _sos_with_uptime(tmp_path: Path, text: str | None) -> Path:
    tree = tmp_path / "sos"
    shutil.copytree(GUEST, tree, symlinks=True)
    if text is not None:
        (tree / "sos_commands/host").mkdir(parents=True, exist_ok=True)
        (tree / "sos_commands/host/uptime").write_text(text)
    return tree


def _snapshot(tree: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["snapshot", "--json", "--root", str(tree)]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_sosreport_with_the_host_plugins_uptime_gives_since_boot_averages(tmp_path, capsys):
    tree = _sos_with_uptime(tmp_path, " 09:14:02 up 2 days,  3:00,  1 user,  load average: 0.5, 0.4, 0.3\n")
    doc = _snapshot(tree, capsys)
    uptime = 2 * 86400 + 3 * 3600
    assert doc["setting_sources"]["uptime"] == "sos_commands/host/uptime"
    assert any("sos_commands/host/uptime" in p and "to the minute" in p for p in doc["problems"])
    checked = 0
    for name, iface in doc["interfaces"].items():
        total = (iface.get("counters") or {}).get("rx_bytes")
        if total and iface.get("rx_bytes_per_s") is not None:
            assert iface["rx_bytes_per_s"] == pytest.approx(total / uptime, rel=1e-6), name
            checked += 1
    assert checked >= 1, doc["interfaces"]


def test_the_doctor_judges_a_sosreport_with_an_uptime_and_refuses_one_without(tmp_path, capsys):
    with_up = _sos_with_uptime(tmp_path, " 09:14:02 up 2 days,  3:00,  1 user,  load average: 0.5, 0.4, 0.3\n")
    capsys.readouterr()
    rc = main(["doctor", "--root", str(with_up)])
    out = capsys.readouterr()
    assert rc in (0, 1, 2), out
    assert "judged on one capture" in out.out and "since-boot averages over 2.1 days" in out.out, out.out[-2000:]
    shutil.rmtree(with_up)
    without = _sos_with_uptime(tmp_path, None)
    rc = main(["doctor", "--root", str(without)])
    out = capsys.readouterr()
    assert "judged on one capture" not in out.out and "uptime" in (out.err + out.out).lower(), out
