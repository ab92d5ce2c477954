"""The bad-request table: each refusal is one line naming the thing, and nothing changed —
neither the host value nor the journal."""

from __future__ import annotations

import json
import os

import pytest
from lab import irq_named, run

from nettop.actions import ActionError, Change, Journal, Tuner
from nettop.actions.bql import BqlLimit
from nettop.actions.cli_set import run as cli_run
from nettop.actions.irq import IrqAffinity
from nettop.actions.link import Mtu, TxQueueLen
from nettop.actions.qdisc import RootQdisc
from nettop.actions.rps_xps import RpsCpus, XpsCpus
from nettop.actions.sysctl import Sysctl


def journal_text(t: Tuner) -> str:
    try:
        with open(t.journal.path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


@pytest.fixture
def tuner(tmp_path):
    return Tuner(Journal(str(tmp_path / "journal.jsonl")), read_only=None)


def host_state(ifname: str) -> str:
    qd = run(["tc", "-j", "qdisc", "show", "dev", ifname]).stdout
    files = [f"/sys/class/net/{ifname}/{p}" for p in ("mtu", "tx_queue_len", "queues/rx-0/rps_cpus",
                                                       "queues/tx-0/xps_cpus")]
    return qd + "".join(open(p).read() for p in files)


BAD = [
    (lambda i: Change(RpsCpus(i, 0), "7"), "CPU 7 does not exist"),
    (lambda i: Change(RpsCpus(i, 0), "zz"), "give a CPU list like 0-3,8 or a hex mask like f0"),
    (lambda i: Change(RpsCpus(i, 0), "fg"), "is not hexadecimal"),
    (lambda i: Change(RpsCpus(i, 9), "1"), "has no queue rx-9 (it has rx-0 to rx-3)"),
    (lambda i: Change(XpsCpus(i, 0), "0-64"), "does not exist"),
    (lambda i: Change(TxQueueLen(i), "-5"), "out of range"),
    (lambda i: Change(TxQueueLen(i), "lots"), "is not a whole number"),
    (lambda i: Change(Mtu(i), "70000"), "out of range; use 68 to 65535"),
    (lambda i: Change(RootQdisc(i), {"kind": "sfb"}), "is not one nettop sets"),
    (lambda i: Change(RootQdisc(i), {"kind": "pfifo", "params": {"target": 5}}), "pfifo has no parameter target"),
    (lambda i: Change(RootQdisc(i), {"kind": "tbf", "params": {"rate": 100}}), "tbf needs rate"),
    (lambda i: Change(BqlLimit(i, 0, "limit_max"), 1000), "has no byte_queue_limits"),
    (lambda i: Change(Sysctl("net.ipv4.ip_forward"), "1"), "nettop does not set net.ipv4.ip_forward"),
    (lambda i: Change(Sysctl("net.ipv4.tcp_rmem"), "4096 10"), "give three whole numbers"),
    (lambda i: Change(Sysctl("net.core.netdev_budget"), "0"), "out of range"),
    (lambda i: Change(RpsCpus("nosuchif0", 0), "1"), "no interface named 'nosuchif0'"),
    (lambda i: Change(IrqAffinity(99999), "0"), "IRQ 99999 does not exist"),
]


@pytest.mark.parametrize("make,message", BAD, ids=[m for _, m in BAD])
def test_bad_request_is_refused_before_anything_changes(veth_lab, tuner, make, message):
    before, journal = host_state(veth_lab.host_if), journal_text(tuner)
    with pytest.raises(ActionError) as exc:
        tuner.apply(tuner.plan([make(veth_lab.host_if)]), confirmed=True)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert host_state(veth_lab.host_if) == before
    assert journal_text(tuner) == journal


def test_missing_qdisc_module_names_the_module_and_changes_nothing(veth_lab, tuner):
    if os.path.exists("/sys/module/sch_fq_codel"):
        pytest.skip("this kernel has sch_fq_codel")
    before = host_state(veth_lab.host_if)
    with pytest.raises(ActionError) as exc:
        tuner.apply(tuner.plan([Change(RootQdisc(veth_lab.host_if), {"kind": "fq_codel"})]), confirmed=True)
    assert str(exc.value) == ("this kernel has no sch_fq_codel: load it with `modprobe sch_fq_codel` "
                              "or pick another qdisc")
    assert host_state(veth_lab.host_if) == before
    st = tuner.state()
    assert st.undo == [] and [e.error for e in st.entries] == [str(exc.value)]
    assert tuner.revert_all() == []  # the journal's original equals the host's value


def test_kernel_managed_irq_is_refused_with_its_reason(tuner):
    irq = irq_named("virtio1-req.0")  # virtio-blk queue IRQs are managed
    if irq is None:
        pytest.skip("no virtio-blk queue IRQ on this machine")
    path = f"/proc/irq/{irq}/smp_affinity_list"
    before = open(path).read()
    with pytest.raises(ActionError) as exc:
        # asking for the value it already has: even a mistaken success moves nothing
        tuner.apply(tuner.plan([Change(IrqAffinity(irq), before.strip())]))
    assert str(exc.value).startswith(f"IRQ {irq} is kernel-managed (EPERM)")
    assert "ethtool -L" in str(exc.value)
    assert open(path).read() == before
    assert tuner.state().undo == []


def test_without_root_tuning_is_read_only_with_the_reason(tmp_path, veth_lab):
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only="auto")
    t.read_only = "nettop runs without root, so tuning is read-only: run it as root (sudo nettop) to change settings"
    plans = t.plan([Change(TxQueueLen(veth_lab.host_if), 10)])  # planning still works
    with pytest.raises(ActionError, match="read-only"):
        t.apply(plans)
    assert open(f"/sys/class/net/{veth_lab.host_if}/tx_queue_len").read().strip() == "1000"


def test_cli_bad_request_is_one_line_on_stderr_with_status_2(veth_lab, tmp_path, capsys, monkeypatch):
    from nettop.cli import build_parser

    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path))
    args = build_parser().parse_args(["set", "rps", veth_lab.host_if, "0", "0-9", "--json"])
    assert cli_run(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CPU 2-9 does not exist" in err


def test_cli_needs_yes_for_qdisc_replace(veth_lab, tmp_path, capsys, monkeypatch):
    from nettop.cli import build_parser

    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path))
    args = build_parser().parse_args(["set", "qdisc", veth_lab.host_if, "pfifo", "limit=10"])
    assert cli_run(args) == 2
    assert "add --yes" in capsys.readouterr().err
    assert json.loads(run(["tc", "-j", "qdisc", "show", "dev", veth_lab.host_if]).stdout)[0]["kind"] == "noqueue"
    args = build_parser().parse_args(["set", "qdisc", veth_lab.host_if, "pfifo", "limit=10", "--yes", "--json"])
    assert cli_run(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"][0]["verified"] and doc["results"][0]["after"]["kind"] == "pfifo"
    assert cli_run(build_parser().parse_args(["revert"])) == 0


def test_default_qdisc_of_a_missing_module_is_refused_by_the_kernel(tuner):
    if os.path.exists("/sys/module/sch_fq_codel"):
        pytest.skip("this kernel has sch_fq_codel")
    path = "/proc/sys/net/core/default_qdisc"
    before = open(path).read()
    with pytest.raises(ActionError) as exc:
        tuner.apply(tuner.plan([Change(Sysctl("net.core.default_qdisc"), "fq_codel")]))
    assert str(exc.value).startswith("net.core.default_qdisc: this kernel has no such qdisc (ENOENT)")
    assert open(path).read() == before
    assert tuner.state().undo == []


def test_bql_on_eth0_rewrites_its_own_value_and_refuses_beyond_dql_max(tuner):
    # eth0 (virtio_net) has BQL; writing the value it already has moves nothing
    base = "/sys/class/net/eth0/queues/tx-0/byte_queue_limits"
    if not os.path.exists(f"{base}/limit_max"):
        pytest.skip("eth0 has no BQL here")
    lmax, lmin = (open(f"{base}/{n}").read().strip() for n in ("limit_max", "limit_min"))
    res = tuner.apply(tuner.plan([Change(BqlLimit("eth0", 0, "limit_max"), lmax)]))
    assert res[0].verified and res[0].after == int(lmax)
    with pytest.raises(ActionError, match="is out of range; use 0 to 1879048192"):
        tuner.plan([Change(BqlLimit("eth0", 0, "limit_min"), 1879048193)])  # DQL_MAX_LIMIT + 1
    assert (open(f"{base}/limit_max").read().strip(), open(f"{base}/limit_min").read().strip()) == (lmax, lmin)
