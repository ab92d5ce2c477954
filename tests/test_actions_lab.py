"""Tuning actions on the real kernel, in a lab veth pair: apply, read back, undo, redo, revert."""

from __future__ import annotations

import json

import pytest
from lab import run, sysfs, tc_root

from nettop.actions import Change, Journal, NeedsConfirm, Tuner
from nettop.actions.link import Mtu, TxQueueLen
from nettop.actions.qdisc import RootQdisc
from nettop.actions.rps_xps import RpsCpus, RpsFlowCnt, XpsCpus, rfs, rps_all
from nettop.actions.sysctl import Sysctl


@pytest.fixture
def tuner(tmp_path):
    events = []
    t = Tuner(Journal(str(tmp_path / "journal.jsonl")), on_event=events.append, read_only=None)
    t.events = events  # type: ignore[attr-defined]
    yield t
    t.revert_all()


def test_rps_mask_moves_rx_processing_to_cpu1_and_undo_puts_it_back(veth_lab, tuner):
    q = f"/sys/class/net/{veth_lab.host_if}/queues/rx-1/rps_cpus"
    assert sysfs(q) == "0"
    res = tuner.apply(tuner.plan([Change(RpsCpus(veth_lab.host_if, 1), "1")]))
    assert sysfs(q) == "2" and res[0].verified and res[0].after == "2"
    assert tuner.events[-1].kind == "tuning" and "rps_cpus" in tuner.events[-1].text
    tuner.undo()
    assert sysfs(q) == "0"
    tuner.redo()
    assert sysfs(q) == "2"


def test_rps_hex_mask_on_all_queues_is_one_undo_step(veth_lab, tuner):
    tuner.apply(tuner.plan(rps_all(veth_lab.host_if, "0x3")))  # a bare "3" would be CPU 3
    masks = [sysfs(f"/sys/class/net/{veth_lab.host_if}/queues/rx-{i}/rps_cpus") for i in range(4)]
    assert masks == ["3"] * 4
    tuner.undo()
    assert [sysfs(f"/sys/class/net/{veth_lab.host_if}/queues/rx-{i}/rps_cpus") for i in range(4)] == ["0"] * 4


def test_xps_cpu_list_is_written_as_mask(veth_lab, tuner):
    res = tuner.apply(tuner.plan([Change(XpsCpus(veth_lab.host_if, 2), "0-1")]))
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/queues/tx-2/xps_cpus") == "3"
    assert res[0].verified


def test_rfs_sets_the_global_table_and_each_queue_rounded_to_power_of_two(veth_lab, tuner):
    before = sysfs("/proc/sys/net/core/rps_sock_flow_entries")
    res = tuner.apply(tuner.plan(rfs(veth_lab.host_if, 1000)))
    assert sysfs("/proc/sys/net/core/rps_sock_flow_entries") == "1024"
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/queues/rx-0/rps_flow_cnt") == "256"
    assert all(r.verified for r in res)
    assert "kernel took 1024" in res[0].line()
    tuner.revert_all()
    assert sysfs("/proc/sys/net/core/rps_sock_flow_entries") == before
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/queues/rx-0/rps_flow_cnt") == "0"


def test_txqueuelen_and_mtu_with_confirmation(veth_lab, tuner):
    tuner.apply(tuner.plan([Change(TxQueueLen(veth_lab.host_if), "500")]))
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/tx_queue_len") == "500"
    plans = tuner.plan([Change(Mtu(veth_lab.host_if), "9000")])
    assert "reset the link" in plans[0].confirm
    with pytest.raises(NeedsConfirm):
        tuner.apply(plans)
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/mtu") == "1500"
    tuner.apply(plans, confirmed=True)
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/mtu") == "9000"
    tuner.revert_all()
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/mtu") == "1500"
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/tx_queue_len") == "1000"


@pytest.mark.parametrize("value,tc_kind,tc_opts", [
    ({"kind": "pfifo", "params": {"limit": 77}}, "pfifo", {"limit": 77}),
    ({"kind": "bfifo", "params": {"limit": 50000}}, "bfifo", {"limit": 50000}),
    ({"kind": "pfifo_fast"}, "pfifo_fast", {}),
    ({"kind": "tbf", "params": {"rate": 1250000, "burst": 10000}}, "tbf", {"rate": 1250000}),
    ({"kind": "htb", "params": {"default": 16}}, "htb", {"default": "0x10"}),
])
def test_qdisc_swap_reads_back_like_tc(veth_lab, tuner, value, tc_kind, tc_opts):
    res = tuner.apply(tuner.plan([Change(RootQdisc(veth_lab.host_if), value)]), confirmed=True)
    root = tc_root(veth_lab.host_if)
    assert root["kind"] == tc_kind and res[0].verified
    for k, v in tc_opts.items():
        assert root["options"][k] == v
    tuner.undo()
    assert tc_root(veth_lab.host_if)["kind"] == "noqueue"


def test_mq_with_pfifo_children_then_swap_to_tbf_and_back(veth_lab, tuner):
    ifn = veth_lab.host_if
    tuner.apply(tuner.plan([Change(RootQdisc(ifn), {"kind": "mq", "children": "pfifo",
                                                    "params": {"limit": 33}})]), confirmed=True)
    shown = json.loads(run(["tc", "-j", "qdisc", "show", "dev", ifn]).stdout)
    assert [q["kind"] for q in shown if q.get("root")] == ["mq"]
    kids = [q for q in shown if not q.get("root")]
    assert len(kids) == 4 and all(q["kind"] == "pfifo" and q["options"]["limit"] == 33 for q in kids)
    tuner.apply(tuner.plan([Change(RootQdisc(ifn), {"kind": "tbf", "params": {"rate": 125000, "burst": 5000}})]),
                confirmed=True)
    assert tc_root(ifn)["kind"] == "tbf"
    tuner.undo()
    assert tc_root(ifn)["kind"] == "mq"
    tuner.undo()
    assert tc_root(ifn)["kind"] == "noqueue"


def test_undo_refuses_when_someone_else_changed_the_value(veth_lab, tuner):
    q = f"/sys/class/net/{veth_lab.host_if}/queues/rx-0/rps_cpus"
    tuner.apply(tuner.plan([Change(RpsCpus(veth_lab.host_if, 0), "1")]))
    with open(q, "w") as f:
        f.write("3")
    drift = tuner.drift()
    assert [d.key for d in drift] == [f"rps_cpus {veth_lab.host_if} rx-0"]
    assert drift[0].line() == (f"rps_cpus {veth_lab.host_if} rx-0 was set to 2 (CPUs 1) by nettop but is now "
                               "3 (CPUs 0-1): changed by someone else")
    with pytest.raises(Exception, match="changed by someone else"):
        tuner.undo()
    assert sysfs(q) == "3"
    tuner.undo(force=True)
    assert sysfs(q) == "0"


def test_new_change_clears_redo_and_journal_replays_same_stacks(veth_lab, tuner):
    ifn = veth_lab.host_if
    tuner.apply(tuner.plan([Change(TxQueueLen(ifn), 600)]))
    tuner.apply(tuner.plan([Change(TxQueueLen(ifn), 700)]))
    tuner.undo()
    assert sysfs(f"/sys/class/net/{ifn}/tx_queue_len") == "600"
    assert len(tuner.state().redo) == 1
    tuner.apply(tuner.plan([Change(TxQueueLen(ifn), 800)]))
    st = Tuner(Journal(tuner.journal.path), read_only=None).state()  # another process's view
    assert st.redo == [] and len(st.undo) == 2


def test_failed_group_rolls_back_the_writes_already_made(veth_lab, tuner):
    ifn = veth_lab.host_if
    plans = tuner.plan([Change(TxQueueLen(ifn), 321), Change(RootQdisc(ifn), {"kind": "pfifo"})])
    # the qdisc write fails for real: the interface is deleted between plan and apply
    run(["ip", "link", "del", ifn])
    with pytest.raises(Exception, match="vanished|gone|no interface"):
        tuner.apply(plans, confirmed=True)
    st = tuner.state()
    assert st.undo == [] and all(e.ended for e in st.entries)


def test_sysctl_netdev_budget_set_and_revert(tuner):
    before = sysfs("/proc/sys/net/core/netdev_budget")
    new = str(int(before) + 1)
    tuner.apply(tuner.plan([Change(Sysctl("net.core.netdev_budget"), new)]))
    assert sysfs("/proc/sys/net/core/netdev_budget") == new
    tuner.revert_all()
    assert sysfs("/proc/sys/net/core/netdev_budget") == before


def test_group_with_a_refused_write_puts_the_earlier_writes_back(veth_lab, tuner):
    # GIVEN a group whose second change the kernel refuses (no sch_fq_codel here)
    ifn = veth_lab.host_if
    if __import__("os").path.exists("/sys/module/sch_fq_codel"):
        pytest.skip("this kernel has sch_fq_codel")
    plans = tuner.plan([Change(TxQueueLen(ifn), 321), Change(RootQdisc(ifn), {"kind": "fq_codel"})])
    # WHEN it is applied
    with pytest.raises(Exception, match="no sch_fq_codel"):
        tuner.apply(plans, confirmed=True)
    # THEN the first write was made and put back, and the journal says so
    assert sysfs(f"/sys/class/net/{ifn}/tx_queue_len") == "1000"
    st = tuner.state()
    assert [(e.action, e.value, e.after) for e in st.entries if e.key == f"txqueuelen {ifn}"] == [
        ("set", 321, 321), ("rollback", 1000, 1000)]
    assert st.undo == [] and tuner.events[-1].text.startswith("rollback:")


def test_interface_vanishing_between_plan_and_apply_is_one_line(veth_lab, tuner):
    plans = tuner.plan([Change(RpsCpus(veth_lab.host_if, 0), "1")])
    run(["ip", "link", "del", veth_lab.host_if])
    with pytest.raises(Exception) as exc:
        tuner.apply(plans)
    assert str(exc.value) == f"rps_cpus {veth_lab.host_if} rx-0: {veth_lab.host_if} or its queue vanished (ENOENT)"
    st = tuner.state()  # `before` is read under the journal lock, so nothing was begun
    assert st.undo == [] and st.entries == []


def test_spread_over_eth0_queue_irqs_is_planned_from_the_queue_map():
    from nettop.actions.irq import queue_irqs, spread

    with open("/proc/interrupts") as f:
        named = {line.split()[-1]: int(line.split(":")[0]) for line in f
                 if line.split() and line.split()[0].rstrip(":").isdigit()}
    if "virtio2-input.0" not in named:
        pytest.skip("eth0 is not the virtio_net device of this VM")
    irqs = queue_irqs("eth0")
    assert set(irqs) == {named["virtio2-input.0"], named["virtio2-output.0"]}
    assert [c.value for c in spread(irqs, "0-1")] == ["0", "1"]  # planned only: eth0 is not moved


def test_changes_become_timeline_events_and_another_tuner_can_undo_them(veth_lab, tmp_path):
    from nettop.model.timeline import Timeline

    timeline = Timeline()
    a = Tuner(Journal(str(tmp_path / "j.jsonl")), on_event=timeline.add_event, read_only=None)
    b = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)  # e.g. `nettop undo` in a shell
    a.apply(a.plan([Change(TxQueueLen(veth_lab.host_if), 42)]))
    [event] = timeline.events()
    assert event.kind == "tuning" and event.text == f"txqueuelen {veth_lab.host_if}: 1000 → 42"
    b.undo()
    assert sysfs(f"/sys/class/net/{veth_lab.host_if}/tx_queue_len") == "1000"
    assert a.state().redo and not a.state().undo
