"""`nettop experiment` on the veth lab: real qdiscs, real iperf3, the real journal.

The kernel decides the latency ordering: behind the same tbf shaper, a 500 kB queue must
hold packets longer than a 15 kB one, and both longer than the unshaped veth. The
dead-man switch is tripped by a variant that cuts the link (a shaper at 8 bytes/s: no
probe gets through); a kill -9 in the middle of a variant leaves the journal for
`nettop restore`. Phases are a second or two: the figures' order, not their size, is
checked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nettop.experiment.plan import PlanError, parse
from nettop.record.store import Reader

pytestmark = pytest.mark.lab

NETTOP = str(Path(sys.executable).with_name("nettop"))


def tc_root(ifname: str) -> dict:
    out = subprocess.run(["tc", "-j", "qdisc", "show", "dev", ifname], check=True, capture_output=True, text=True)
    return next(q for q in json.loads(out.stdout) if q.get("root"))


def plan_text(lab, variants: str, repeats: int = 2, measure: float = 2.5) -> str:
    return f"""
name = "lab"
iface = "{lab.host_if}"
target = "{lab.peer_ip}"
[load]
kind = "tcp"
flows = 4
server_netns = "{lab.netns}"
[timing]
idle = 0.5
warmup = 1
measure = {measure}
repeats = {repeats}
seed = 7
interval = 0.25
{variants}
"""


def run(argv: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "NETTOP_STATE_DIR": str(tmp_path / "state")}


def journal(env: dict[str, str]) -> list[dict]:
    path = Path(env["NETTOP_STATE_DIR"]) / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_queue_length_ordering_interleaving_and_revert(veth_lab, tmp_path, env):
    lab = veth_lab
    found = tc_root(lab.host_if)
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(lab, f"""
[[variant]]
name = "long"
set = ["nettop set qdisc {lab.host_if} tbf rate=2500000 burst=15000 limit=500000"]
[[variant]]
name = "short"
set = ["nettop set qdisc {lab.host_if} tbf rate=2500000 burst=15000 limit=15000"]
"""))
    out = tmp_path / "out"
    p = run([NETTOP, "experiment", str(plan), "-o", str(out), "--no-charts"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert tc_root(lab.host_if)["kind"] == found["kind"]  # reverted after the last variant

    rows = {}
    for line in (out / "results.csv").read_text().splitlines()[1:]:
        variant, figure, median, *_ = line.split(",")
        rows[(variant, figure)] = float(median)
    long_p99, short_p99, base_p99 = (rows[(v, "rtt_load_p99")] for v in ("long", "short", "baseline"))
    assert long_p99 > 3 * short_p99 > 0 and short_p99 > base_p99, (long_p99, short_p99, base_p99)
    for v in ("long", "short"):  # the shaper held both near 20 Mbit/s, unshaped veth far above
        assert 10e6 < rows[(v, "tput_bps")] < 25e6, rows
    assert rows[("baseline", "tput_bps")] > 100e6
    assert "| long | 2/2 |" in (out / "results.md").read_text()

    # the journal: each variant applied as one group and undone before the next one
    recs = [r for r in journal(env) if r.get("op") == "begin"]
    actions = [r["action"] for r in recs]
    assert actions == ["set", "undo"] * 4, actions
    # interleaved: the seed shuffles each repeat on its own, so the order is not fixed per variant
    reader = Reader(str(out / "run.nettop"))
    try:
        marks = [e.text for e in reader.events() if e.kind == "experiment"]
        assert len(reader) > 20
    finally:
        reader.close()
    applied = [m.split(":")[0] for m in marks if m.endswith(")") and ": applied" in m]
    assert sorted(applied) == ["baseline #1", "baseline #2", "long #1", "long #2", "short #1", "short #2"]
    assert sum("result {" in m for m in marks) == 6

    # nettop report rebuilds the table from the recording alone
    rep = run([NETTOP, "report", str(out / "run.nettop"), "--no-plots"], env)
    assert rep.returncode == 0 and "## Experiment: lab" in rep.stdout and "| short | 2/2 |" in rep.stdout


def test_the_dead_man_switch_reverts_a_variant_that_cuts_the_link_within_5s(veth_lab, tmp_path, env):
    lab = veth_lab
    found = tc_root(lab.host_if)
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(lab, f"""
[[variant]]
name = "cut"
set = ["nettop set qdisc {lab.host_if} tbf rate=8 burst=1600 limit=1600"]
""", repeats=1, measure=10))
    out = tmp_path / "out"
    p = run([NETTOP, "experiment", str(plan), "-o", str(out), "--no-charts"], env)
    assert p.returncode == 1, p.stderr[-3000:]  # a failed variant: exit 1
    assert tc_root(lab.host_if)["kind"] == found["kind"]
    reader = Reader(str(out / "run.nettop"))
    try:
        ev = [(e.t_wall, e.text) for e in reader.events() if e.kind == "experiment"]
    finally:
        reader.close()
    applied = next(t for t, x in ev if x.startswith("cut #1: applied"))
    fired = next(x for t, x in ev if x.startswith("cut #1: dead-man switch"))
    reverted = next(t for t, x in ev if x.startswith("cut #1: reverted"))
    assert "100% probe loss" in fired or "no bytes" in fired, fired
    assert reverted - applied <= 5.0, reverted - applied
    assert "cut: 1 run(s) failed" in (out / "results.md").read_text()


def test_kill_9_mid_variant_then_restore_gives_the_baseline(veth_lab, tmp_path, env):
    lab = veth_lab
    found = tc_root(lab.host_if)
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(lab, f"""
[[variant]]
name = "long"
set = ["nettop set qdisc {lab.host_if} tbf rate=2500000 burst=15000 limit=500000"]
""", repeats=3, measure=5))
    proc = subprocess.Popen([NETTOP, "experiment", str(plan), "-o", str(tmp_path / "out")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and tc_root(lab.host_if)["kind"] != "tbf":
            time.sleep(0.1)
        assert tc_root(lab.host_if)["kind"] == "tbf", "the variant never started"
        time.sleep(1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert tc_root(lab.host_if)["kind"] == "tbf"  # left behind by the kill
    r = run([NETTOP, "restore"], env)
    assert r.returncode == 0, r.stderr
    assert tc_root(lab.host_if)["kind"] == found["kind"]


@pytest.mark.parametrize("text, words", [
    ("name = ", "not valid TOML"),
    ('iface = "x"\n', "no [[variant]]"),
    ('[[variant]]\nname = "baseline"\nset = ["nettop set mtu x 1400"]\n', "'baseline'"),
    ('[[variant]]\nname = "a"\nset = ["rm -rf /"]\n', "not a `nettop set"),
    ('[[variant]]\nname = "a"\nset = "nettop set mtu x 1400"\n', "set must be a list"),
    ('[load]\nflows = 5000\n[[variant]]\nname = "a"\nset = ["nettop set mtu x 1"]\n', "load.flows"),
    ('[load]\nkind = "udp"\n[[variant]]\nname = "a"\nset = ["nettop set mtu x 1"]\n', "load.rate"),
    ('[timing]\nmeasure = 0\n[[variant]]\nname = "a"\nset = ["nettop set mtu x 1"]\n', "timing.measure"),
    ('[timing]\nrepeats = true\n[[variant]]\nname = "a"\nset = ["nettop set mtu x 1"]\n', "timing.repeats"),
])
def test_bad_plans_are_one_line(text, words):
    with pytest.raises(PlanError) as exc:
        parse(text, "p.toml")
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_the_cli_checks_the_plan_against_the_host_before_any_change(veth_lab, tmp_path, env):
    lab = veth_lab
    plan = tmp_path / "p.toml"
    for variants, words in (
        (f'[[variant]]\nname = "a"\nset = ["nettop set qdisc {lab.host_if} fq_codel"]\n', "fq_codel"),
        (f'[[variant]]\nname = "a"\nset = ["nettop set rps {lab.host_if} 0 0-4000"]\n', "variant a"),
        ('[[variant]]\nname = "a"\nset = ["nettop set mtu nosuchif0 1400"]\n', "variant a"),
    ):
        if words == "fq_codel" and Path("/sys/module/sch_fq_codel").exists():
            continue  # this kernel has it
        plan.write_text(plan_text(lab, variants, repeats=1))
        p = run([NETTOP, "experiment", str(plan), "-o", str(tmp_path / "o")], env)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr
        assert journal(env) == []
    p = run([NETTOP, "experiment", str(plan), "--iface", "nosuchif0", "-o", str(tmp_path / "o")], env)
    assert p.returncode == 2 and "does not exist" in p.stderr


def test_a_load_that_cannot_start_fails_each_phase_with_iperf3s_own_words(veth_lab, tmp_path, env):
    """No iperf3 server on the port: the clients end at once. Each phase fails with the
    reason ("unable to connect to server: Connection refused") instead of a bare "no
    samples", the run exits 1, and the variant is still reverted."""
    lab = veth_lab
    found = tc_root(lab.host_if)
    text = plan_text(lab, f"""
[[variant]]
name = "short"
set = ["nettop set qdisc {lab.host_if} tbf rate=2500000 burst=15000 limit=15000"]
""", repeats=1, measure=1).replace(f'server_netns = "{lab.netns}"\n', "port = 5999\n")
    plan = tmp_path / "p.toml"
    plan.write_text(text)
    out = tmp_path / "out"
    p = run([NETTOP, "experiment", str(plan), "-o", str(out), "--no-charts"], env, timeout=120)
    assert p.returncode == 1, p.stderr[-3000:]
    table = (out / "results.md").read_text()
    for v in ("baseline", "short"):
        assert f"- {v}: 1 run(s) failed: the load ended at once, before the measure window" in table, table
    assert "before the measure window: iperf3: unable to connect to server" in table, table
    assert "Connection refused" in table, table
    assert tc_root(lab.host_if)["kind"] == found["kind"]
