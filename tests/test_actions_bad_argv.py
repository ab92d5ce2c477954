"""The bad-request table, through nettop's real command line: every hostile `nettop set ...`
ends with status 2 and one line on stderr naming the thing and the fix — no traceback, no
hang, no memory that grows with the numbers typed — and nothing on the host or in the
journal changed. Issue 18 found 27 tracebacks and several silent errors in 143 such requests."""

from __future__ import annotations

import glob
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
sys.path.insert(0, str(Path(__file__).parent))  # as the worker, run outside pytest

from lab import irq_named, run  # noqa: E402

from nettop import cli  # noqa: E402
from nettop.actions.sysctl import CURATED

ROOT = Path(__file__).parent.parent
BIG = "9" * 400
LIST_RANGES = ["0-99999999999", "0-4294967295", "0-400000000:1/2", "4294967296", "2", "0-2", "1,2,3"]
BAD_CPUS = LIST_RANGES + [
    "0x4", "f" * 24, "f" * 20000, "100000000,00000000", "1_000", " +1", "+1", "-1", "1-0", "0-1:0/2",
    "0-1:3/2", "0-1:1/0", "0-1:1", "0--1", "0,,1", ",", "0,", "²", "١", "１", "0x", "0xg", "0x+1",
    "0x-1", "0x1_0", "g", "", "   ", "0 1", "0\t1", "nan", "all", "\x00", "0,00000000,0000000g",
    BIG, "0-" + BIG, "0-1:1/" + BIG,
]
IFNAMES = [".", "..", "a/b", "../lo", "x" * 16, "", "a b", "a:b", "lo\n", "\udcff", "ｅｔｈ０", "nosuchif9"]

CASES: list[list[str]] = (
    [["set", "rps", "{if}", "0", c] for c in BAD_CPUS]
    + [["set", "xps", "{if}", "1", c] for c in ("", "0-4294967295", "0x4", "1_0", "²", "  ")]
    + [["set", "rps", "{if}", "all", c] for c in ("", "0-99999999999", "0-400000000:1/2")]
    + [["set", "irq", "{irq}", c] for c in ("", "0x0", "none", "0-99999999999", "0-400000000:1/2",
                                           "4294967296", "² ", "1_0")]
    + [["set", "irq", t, "1"] for t in ("²⁹", "-5", "+5", "1²3", "99999999999999999999999", "4294967296", "١٢")]
    + [["set", "irq", "{irq}", "0", "1"], ["set", "irq", "{if}", "fly"], ["set", "irq", "{if}", "spread", ""],
       ["set", "irq", "{if}", "spread", "0-4294967295"], ["set", "irq", "{if}", "hint", "extra"],
       ["set", "irq", ".", "spread", "0"], ["set", "irq", "..", "hint"], ["set", "irq", "a/b", "numa"],
       ["set", "irq", "{if}", "spread"]]
    + [["set", "rps", n, "0", "1"] for n in IFNAMES]
    + [["set", "txqueuelen", n, "5"] for n in IFNAMES]
    + [["set", "mtu", n, "1500"] for n in (".", "..", "a/b", "x" * 16, "")]
    + [["set", "qdisc", n, "pfifo"] for n in (".", "../lo", "x" * 16)]
    + [["set", "bql", n, "0", "limit_max", "5"] for n in (".", "a/b")]
    + [["set", "coalesce", n, "rx-usecs=1"] for n in (".", "..")]
    + [["set", "rfs", n, "64"] for n in (".", "x" * 16)]
    + [["set", "rps", "{if}", q, "1"] for q in ("²", "-1", "1_0", "99", "99999999999999999999", "０", "", "0x1")]
    + [["set", "xps", "{if}", "all", "1"], ["set", "xps", "{if}", "9", "1"]]
    + [["set", "bql", "{if}", "²", "limit_max", "5"], ["set", "bql", "{if}", "0", "limit_mid", "5"],
       ["set", "bql", "{if}", "0", "limit_max", "²"], ["set", "bql", "{if}", "99", "limit_max", "5"],
       ["set", "bql", "{if}", "-1", "limit_max", "5"]]
    + [["set", "rfs", "{if}", e] for e in ("²", "-1", "99999999999", BIG, "1_0", "")]
    + [["set", "rfs", "{if}", "64", f] for f in ("²", "-1", BIG)]
    + [["set", "txqueuelen", "{if}", v] for v in ("²", "-1", "1_000", " +1", "1e3", "0x", BIG, "4294967296",
                                                  "１２", "", "nan", "0b101", "0o7")]
    + [["set", "mtu", "{if}", v] for v in ("²", "67", "65536", BIG, "1_500", "abc", "-1500")]
    + [["set", "sysctl", "net.core.netdev_budget", *v] for v in (["²"], ["0"], ["-1"], ["1_000"], [BIG],
                                                                  ["1", "2"], ["１２"], [" +1"], ["0x10"])]
    + [["set", "sysctl", "net.ipv4.tcp_rmem", *v] for v in (["1", "2"], ["3", "2", "1"], ["²", "2", "3"],
                                                             ["0", "1", "2"], ["1", "2", BIG], ["1", "2", "3", "4"])]
    + [["set", "sysctl", n, "1"] for n in ("kernel.core_pattern", "../../../etc/passwd", "net.core.netdev_budget.",
                                           "", "net/core/netdev_budget")]
    + [["set", "sysctl", "net.core.default_qdisc", v] for v in ("fq_codel_x", "", "../x")]
    + [["set", "qdisc", "{if}", *v] for v in (
        ["sfb"], [""], ["pfifo", f"limit={BIG}"], ["pfifo", "limit=-1"], ["pfifo", "limit=²"], ["pfifo", "limit=1_0"],
        ["pfifo", "limit=1e9"], ["tbf", "rate=1e400", "burst=1k"], ["tbf", f"rate={BIG}mbit", "burst=1k"],
        ["tbf", "rate=1mbit"], ["tbf", "rate=1mbit", "burst=1k", "extra=1"], ["pfifo", "target=5"],
        ["pfifo", "limit"], ["pfifo", "=5"], ["pfifo", "limit=1", "limit=2"], ["mq", "children=htb"],
        ["mq", "children=mq"], ["mq", "children=²"], ["tbf", "rate=10ms", "burst=1k"],
        ["tbf", "rate=1bit", "burst=4294967295"], ["fq_codel", f"target={BIG}s"], ["pfifo", "limit=0x"],
        ["bfifo", "limit=1.5.5k"], ["tbf", "rate=1.mbit", "burst=1k"])]
    + [["set", w, "{if}", *v] for w, v in (
        ("coalesce", ["rx-usecs=²"]), ("coalesce", ["x"]), ("rings", [f"rx={BIG}"]), ("channels", ["combined=-1"]),
        ("features", ["gro=maybe"]), ("features", ["²=on"]), ("coalesce", ["=1"]))]
    + [["set"], ["set", "fly"], ["set", "rps"], ["set", "rps", "{if}"], ["set", "rps", "{if}", "0"],
       ["set", "rps", "{if}", "0", "1", "2"], ["set", "--bogus"], ["set", "rps", "{if}", "0", "1", "--nope"],
       ["undo", "--bogus"], ["set", "rfs", "{if}"], ["set", "bql", "{if}", "0", "limit_max"],
       ["set", "sysctl", "net.core.netdev_budget"], ["journal", "extra"], ["set", "irq"]]
)


def host_state(ifname: str, irqs: list[int], sysctls: list[str]) -> dict[str, str]:
    """Everything a `set` could touch: the IRQs and sysctls the request names, the lab's
    and eth0's queue files and link settings, and both qdisc trees. (Other IRQs and
    sysctls are left out: other test runs on this machine change them meanwhile.)"""
    parts = {}
    for pattern in ([f"/proc/irq/{n}/smp_affinity_list" for n in irqs]
                    + [f"/sys/class/net/{ifname}/queues/*/*", f"/sys/class/net/{ifname}/queues/*/byte_queue_limits/limit_m*",
                       "/sys/class/net/eth0/queues/*/*", f"/sys/class/net/{ifname}/mtu",
                       f"/sys/class/net/{ifname}/tx_queue_len"]):
        for p in sorted(glob.glob(pattern)):
            try:
                parts[p] = Path(p).read_text().strip()
            except OSError:
                pass
    for name in sysctls:
        p = Path("/proc/sys/" + name.replace(".", "/"))
        if p.exists():
            parts[name] = p.read_text().strip()
    for dev in (ifname, "eth0"):
        parts[f"tc {dev}"] = run(["tc", "-j", "qdisc", "show", "dev", dev]).stdout
    return parts


@pytest.fixture(scope="module")
def lab_host():
    import lab as _lab

    reason = _lab.can_build_lab()
    if reason:
        pytest.skip(reason)
    with _lab.veth_lab() as lab:
        yield lab


def _fill(argv: list[str], ifname: str, irq: int) -> list[str]:
    return [a.replace("{if}", ifname).replace("{irq}", str(irq)) for a in argv]


def _irq() -> int:
    return irq_named("virtio0-deflate") or irq_named("virtio0-inflate") or 0


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


AS_LIMIT = 1 << 30  # the worker's address space: expanding a giant range fails inside it, not the host


@pytest.fixture(scope="module")
def results(lab_host, tmp_path_factory):
    """Every case run by `cli.main` in one worker process whose memory is capped, so a
    regression that expands `0-4294967295` is a MemoryError in the worker, not an OOM."""
    state = tmp_path_factory.mktemp("state")
    job = {"ifname": lab_host.host_if, "irq": _irq(), "state": str(state), "cases": CASES}
    r = subprocess.run([sys.executable, __file__], input=json.dumps(job), capture_output=True, text=True,
                       cwd=ROOT, timeout=600, preexec_fn=_limit_memory,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NETTOP_STATE_DIR": str(state)})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_the_table_holds_at_least_143_requests():
    assert len(CASES) >= 143


@pytest.mark.parametrize("i", range(len(CASES)), ids=[" ".join(c)[:60] for c in CASES])
def test_bad_request_is_one_line_status_2_and_changes_nothing(results, i):
    res = results[i]
    assert res["crash"] is None, res["crash"]
    assert res["status"] == 2, res
    err = res["err"]
    assert err.count("\n") == 1 and err.startswith("nettop") and "Traceback" not in err, err
    assert len(err) < 400, err
    assert res["out"] == ""
    assert res["host_changed"] == [] and res["journal_written"] is False
    assert res["seconds"] < 10  # a hang guard, not a speed target


def worker(job: dict) -> list[dict]:
    """Run each case in this process through `cli.main`; what a person would see of it."""
    import contextlib
    import io
    import os
    import time
    import traceback

    os.environ["NETTOP_STATE_DIR"] = job["state"]
    journal = Path(job["state"]) / "journal.jsonl"
    out = []
    for argv in job["cases"]:
        irqs = [job["irq"]] + [int(a) for a in argv if a.isascii() and a.isdigit() and len(a) < 8]
        sysctls = [n for n in CURATED if n in argv] or (list(CURATED) if "sysctl" in argv else [])
        before = host_state(job["ifname"], irqs, sysctls)
        so, se = io.StringIO(), io.StringIO()
        crash = None
        t0 = time.monotonic()
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            try:
                status = cli.main(_fill(argv, job["ifname"], job["irq"]))
            except SystemExit as exc:  # argparse's own refusals
                status = exc.code
            except BaseException:  # noqa: BLE001  exactly what the test is looking for
                status, crash = None, traceback.format_exc()[-2000:]
            seconds = time.monotonic() - t0
            if status == 0:  # a request the table wrongly calls bad was applied: put it back
                cli.main(["revert"])
        written = journal.exists()
        if written:
            journal.unlink()
        after = host_state(job["ifname"], irqs, sysctls)
        out.append({"status": status, "out": so.getvalue(), "err": se.getvalue(), "crash": crash,
                    "seconds": seconds, "host_changed": sorted(k for k in before if after.get(k) != before[k]),
                    "journal_written": written})
    return out


@pytest.mark.parametrize("cpus", LIST_RANGES + ["0-" + BIG])
def test_giant_ranges_answer_at_once_in_a_small_address_space(lab_host, tmp_path, cpus):
    """A real process limited to 1 GiB: expanding any of these ranges would need gigabytes."""
    r = subprocess.run([sys.executable, "-m", "nettop.cli", "set", "rps", lab_host.host_if, "0", cpus, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=30, preexec_fn=_limit_memory,
                       env={"NETTOP_STATE_DIR": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "does not exist (this kernel has CPUs 0-" in r.stderr, r.stderr
    assert json.loads(json.dumps(r.stderr))  # one plain line


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    json.dump(worker(json.load(sys.stdin)), sys.stdout)
