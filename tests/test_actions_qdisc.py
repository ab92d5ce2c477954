"""The qdisc requests nettop builds itself (fq, bfifo) encode the kernel's attribute numbers
(include/uapi/linux/pkt_sched.h), and kinds this kernel lacks are refused by the kernel itself."""

from __future__ import annotations

import errno
import os
import struct

import pytest

from nettop.actions import ActionError, Change, Journal, Tuner
from nettop.actions.qdisc import RootQdisc, _register_plugins, _tc_args

# enum { TCA_FQ_UNSPEC, TCA_FQ_PLIMIT, TCA_FQ_FLOW_PLIMIT, TCA_FQ_QUANTUM, TCA_FQ_INITIAL_QUANTUM,
#        TCA_FQ_RATE_ENABLE, TCA_FQ_FLOW_DEFAULT_RATE, TCA_FQ_FLOW_MAX_RATE, TCA_FQ_BUCKETS_LOG, ...}
UAPI_FQ = {"limit": 1, "flow_limit": 2, "quantum": 3, "initial_quantum": 4, "maxrate": 7, "buckets": 8}


def nlattrs(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    while len(data) >= 4:
        length, kind = struct.unpack_from("HH", data)
        out.append((kind & 0x3FFF, data[4:length]))
        data = data[(length + 3) & ~3:]
    return out


def encode(kind: str, params: dict) -> dict[int, bytes]:
    from pyroute2.netlink.rtnl.tcmsg import plugins, tcmsg

    _register_plugins()
    m = tcmsg()
    m["index"], m["parent"] = 1, 0xFFFFFFFF
    m["attrs"] = [("TCA_KIND", kind), ("TCA_OPTIONS", plugins[kind].get_parameters(_tc_args(kind, params)))]
    m.encode()
    attrs = dict(nlattrs(m.data[16 + 20:]))  # nlmsghdr + struct tcmsg
    assert attrs[1] == kind.encode() + b"\0"  # TCA_KIND
    return attrs


def test_fq_request_carries_uapi_attribute_numbers():
    params = {"limit": 100, "flow_limit": 10, "quantum": 3028, "initial_quantum": 15140,
              "maxrate": 12345, "buckets": 10}
    opts = dict(nlattrs(encode("fq", params)[2]))  # TCA_OPTIONS
    assert {k: struct.unpack("I", opts[n])[0] for k, n in UAPI_FQ.items()} == params


def test_fq_codel_request_carries_uapi_attribute_numbers_in_microseconds():
    # enum { TCA_FQ_CODEL_UNSPEC, _TARGET, _LIMIT, _INTERVAL, _ECN, _FLOWS, _QUANTUM, ... }
    params = {"target": 5000, "limit": 10240, "interval": 100000, "ecn": 1, "flows": 1024, "quantum": 1514}
    opts = dict(nlattrs(encode("fq_codel", params)[2]))
    numbers = {"target": 1, "limit": 2, "interval": 3, "ecn": 4, "flows": 5, "quantum": 6}
    assert {k: struct.unpack("I", opts[n])[0] for k, n in numbers.items()} == params


def test_cake_bandwidth_in_bits_goes_out_as_bytes_per_second():
    opts = dict(nlattrs(encode("cake", {"bandwidth": 80_000_000})[2]))
    assert struct.unpack("Q", opts[2]) == (10_000_000,)  # TCA_CAKE_BASE_RATE64


def test_bfifo_request_is_a_tc_fifo_qopt():
    assert struct.unpack("I", encode("bfifo", {"limit": 50000})[2]) == (50000,)


@pytest.mark.parametrize("kind,module", [("fq_codel", "sch_fq_codel"), ("fq", "sch_fq"), ("cake", "sch_cake")])
def test_qdisc_this_kernel_lacks_is_refused_by_the_kernel(veth_lab, tmp_path, kind, module):
    if os.path.exists(f"/sys/module/{module}"):
        pytest.skip(f"this kernel has {module}")
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    with pytest.raises(ActionError) as exc:
        t.apply(t.plan([Change(RootQdisc(veth_lab.host_if), {"kind": kind})]), confirmed=True)
    assert str(exc.value) == f"this kernel has no {module}: load it with `modprobe {module}` or pick another qdisc"
    assert RootQdisc(veth_lab.host_if).read()["kind"] == "noqueue"


def test_mq_children_of_a_missing_kind_name_the_child_module(veth_lab, tmp_path):
    if os.path.exists("/sys/module/sch_fq"):
        pytest.skip("this kernel has sch_fq")
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    with pytest.raises(ActionError, match="this kernel has no sch_fq: "):
        t.apply(t.plan([Change(RootQdisc(veth_lab.host_if), {"kind": "mq", "children": "fq"})]), confirmed=True)
    assert RootQdisc(veth_lab.host_if).read()["kind"] == "noqueue"  # the mq root was put back too


def test_tbf_burst_that_overflows_the_tick_count_is_refused_before_encoding(veth_lab, tmp_path):
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    with pytest.raises(ActionError, match="tbf burst=100000 takes too long to send at rate=1 bytes/s"):
        t.plan([Change(RootQdisc(veth_lab.host_if), {"kind": "tbf", "params": {"rate": 1, "burst": 100000}})])
    with pytest.raises(ActionError, match="tbf needs rate"):
        t.plan([Change(RootQdisc(veth_lab.host_if), {"kind": "tbf", "params": {"rate": 0, "burst": 0}})])


def test_mq_on_a_single_queue_device_is_refused_and_the_kernel_agrees(tmp_path):
    from lab import can_build_lab, run

    if can_build_lab():
        pytest.skip(can_build_lab())
    name = f"ntq{os.getpid() % 1000000}"
    run(["ip", "link", "add", name, "numtxqueues", "1", "numrxqueues", "1", "type", "veth",
         "peer", "name", name + "p"])
    try:
        t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
        with pytest.raises(ActionError, match=f"mq needs a multi-queue device and {name} has one tx queue"):
            t.plan([Change(RootQdisc(name), {"kind": "mq"})])
        # the kernel's own answer, bypassing validation, is EOPNOTSUPP and changes nothing
        s = RootQdisc(name)
        before = s.read()
        with pytest.raises(OSError) as exc:
            s.write({"kind": "mq", "params": {}, "default": False, "children": "pfifo"})
        assert exc.value.errno == errno.EOPNOTSUPP
        assert s.explain(exc.value) == f"qdisc {name} root: not supported by this driver or kernel (EOPNOTSUPP)"
        assert s.read() == before
    finally:
        run(["ip", "link", "del", name], check=False)


@pytest.mark.parametrize("kind,key,text,value", [
    ("fq_codel", "target", "5ms", 5000), ("fq_codel", "interval", "100ms", 100_000),
    ("fq_codel", "target", "250us", 250), ("fq_codel", "target", "2000", 2000),
    ("tbf", "rate", "1gbit", 125_000_000), ("tbf", "rate", "125kbps", 125_000), ("tbf", "rate", "1250", 1250),
    ("cake", "bandwidth", "100mbit", 100_000_000), ("fq", "maxrate", "1.5gbit", 187_500_000),
    ("tbf", "burst", "32k", 32_768), ("bfifo", "limit", "1m", 1 << 20), ("pfifo", "limit", "0x10", 16),
])
def test_qdisc_parameters_take_tcs_units(kind, key, text, value):
    from nettop.actions.qdisc import parse_param

    assert parse_param(kind, key, text) == value


@pytest.mark.parametrize("kind,key,text,hint", [
    ("pfifo", "limit", "10k", "give a whole number"),  # packets: no unit makes sense
    ("fq_codel", "target", "5 parsecs", "give microseconds, or 5ms / 100us / 1s"),
    ("cake", "bandwidth", "fast", "give bit/s, or 100mbit / 1gbit / 125kbps"),
    ("tbf", "rate", "10ms", "give bytes/s, or 100mbit / 1gbit / 125kbps"),
])
def test_a_parameter_in_the_wrong_unit_names_the_units_it_takes(kind, key, text, hint):
    from nettop.actions.qdisc import parse_param

    with pytest.raises(ActionError) as exc:
        parse_param(kind, key, text)
    assert str(exc.value) == f"{kind} {key}={text!r}: {hint}"


def test_tbf_with_tc_units_reads_back_as_tc_prints_it(veth_lab, tmp_path):
    import json

    from lab import run

    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    res = t.apply(t.plan([Change(RootQdisc(veth_lab.host_if),
                                 {"kind": "tbf", "params": {"rate": "100mbit", "burst": "32k"}})]), confirmed=True)
    assert res[0].verified, res[0].line()
    root = next(q for q in json.loads(run(["tc", "-j", "qdisc", "show", "dev", veth_lab.host_if]).stdout)
                if q.get("root"))
    assert root["kind"] == "tbf" and root["options"]["rate"] == 12_500_000  # tc -j: bytes/s
    t.undo()


def _tc_qdiscs(ifname: str) -> list[dict]:
    import json

    from lab import run

    return json.loads(run(["tc", "-j", "qdisc", "show", "dev", ifname]).stdout)


def test_tbf_with_a_child_queues_behind_the_shaper_and_undo_brings_back_tbf_own_fifo(veth_lab, tmp_path):
    """`tbf ... children=KIND` is KIND behind a rate limit: tc shows the child under tbf's
    class 1; undo from there to a plain tbf gives tbf its hidden byte FIFO again."""
    dev = veth_lab.host_if
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    shaper = {"rate": "20mbit", "burst": "15k", "limit": "1m"}
    t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": shaper})]), confirmed=True)
    assert [q["kind"] for q in _tc_qdiscs(dev)] == ["tbf"]  # its own FIFO is invisible
    res = t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": shaper, "children": "pfifo_fast"})]),
                  confirmed=True)
    assert res[0].verified, res[0].line()
    qs = _tc_qdiscs(dev)
    root = next(q for q in qs if q.get("root"))
    assert [q["kind"] for q in qs] == ["tbf", "pfifo_fast"]
    assert qs[1]["parent"] == root["handle"] + "1"  # "80ba:" + "1": tbf's one class
    assert RootQdisc(dev).read()["children"] == "pfifo_fast"
    t.undo()
    assert [q["kind"] for q in _tc_qdiscs(dev)] == ["tbf"]
    assert "children" not in RootQdisc(dev).read()
    t.undo()
    assert RootQdisc(dev).read()["kind"] == "noqueue"


def test_a_tbf_child_this_kernel_lacks_is_named_and_the_root_is_put_back(veth_lab, tmp_path):
    if os.path.exists("/sys/module/sch_fq_codel"):
        pytest.skip("this kernel has sch_fq_codel")
    dev = veth_lab.host_if
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    with pytest.raises(ActionError, match="this kernel has no sch_fq_codel: .* or pick another child"):
        t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": {"rate": "20mbit", "burst": "15k"},
                                                "children": "fq_codel"})]), confirmed=True)
    assert RootQdisc(dev).read()["kind"] == "noqueue"  # the half-made tbf was rolled back


@pytest.mark.parametrize("value,message", [
    ({"kind": "htb", "children": "pfifo"}, "htb takes no children=; only mq and tbf do"),
    ({"kind": "tbf", "params": {"rate": 1000, "burst": 1500}, "children": "htb"}, "tbf children must be a classless"),
    ({"kind": "tbf", "params": {"rate": 1000, "burst": 1500}, "children": "tbf"}, "tbf children must be a classless"),
    ({"kind": "pfifo", "children": "pfifo"}, "pfifo takes no children="),
])
def test_children_only_where_the_kernel_has_a_class_for_them(veth_lab, value, message):
    with pytest.raises(ActionError, match=message):
        RootQdisc(veth_lab.host_if).normalize(value)


def test_a_tbf_childs_own_parameters_reach_the_kernel_are_verified_and_undo_puts_the_old_ones_back(veth_lab, tmp_path):
    """`tbf ... children=bfifo child.limit=30k`: tc shows the child with that limit, the
    read-back carries it (so a kernel that stored something else is "not verified"), a
    second change of only the child's limit changes the live child, and undo restores it."""
    dev = veth_lab.host_if
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    shaper = {"rate": "20mbit", "burst": "15k"}
    res = t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": shaper, "children": "bfifo",
                                                  "child_params": {"limit": "30k"}})]), confirmed=True)
    assert res[0].verified, res[0].line()
    assert "children bfifo limit=30720" in res[0].line()
    kid = _tc_qdiscs(dev)[1]
    assert (kid["kind"], kid["options"]["limit"]) == ("bfifo", 30720)
    assert RootQdisc(dev).read()["child_params"] == {"limit": 30720}
    res = t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": shaper, "children": "bfifo",
                                                  "child_params": {"limit": 60000}})]), confirmed=True)
    assert res[0].verified and _tc_qdiscs(dev)[1]["options"]["limit"] == 60000
    t.undo()
    assert _tc_qdiscs(dev)[1]["options"]["limit"] == 30720
    t.undo()
    assert RootQdisc(dev).read()["kind"] == "noqueue"


@pytest.mark.parametrize("value,message", [
    ({"kind": "tbf", "params": {"rate": 1000, "burst": 1500}, "children": "bfifo", "child_params": {"quantum": 3}},
     r"bfifo has no parameter quantum \(it takes: child.limit\)"),
    ({"kind": "tbf", "params": {"rate": 1000, "burst": 1500}, "child_params": {"limit": 3}}, "tbf has no child"),
    ({"kind": "pfifo", "child_params": {"limit": 3}}, "pfifo has no child"),
    ({"kind": "mq", "children": "pfifo", "child_params": {"limit": 3}}, "mq takes its children's parameters as its own"),
    ({"kind": "tbf", "params": {"rate": 1000, "burst": 1500}, "children": "fq_codel",
      "child_params": {"target": "5 parsecs"}}, r"fq_codel target='5 parsecs': give microseconds"),
    ({"kind": "tbf", "params": {"rate": 1000, "burst": 1500}, "children": "pfifo",
      "child_params": {"limit": 2**40}}, r"pfifo child.limit=1099511627776: out of range"),
])
def test_child_parameters_only_for_a_tbf_child_that_takes_them(veth_lab, value, message):
    with pytest.raises(ActionError, match=message):
        RootQdisc(veth_lab.host_if).normalize(value)


def test_a_set_line_splits_child_dot_keys_into_the_childs_parameters():
    from nettop.experiment.plan import changes_of

    (ch,) = changes_of("nettop set qdisc lo tbf rate=10mbit burst=15k children=fq_codel child.quantum=300 "
                       "child.target=5ms")
    assert ch.value == {"kind": "tbf", "params": {"rate": "10mbit", "burst": "15k"}, "children": "fq_codel",
                        "child_params": {"quantum": "300", "target": "5ms"}}


def test_a_journal_from_before_child_parameters_were_read_back_still_undoes_and_shows_no_drift(veth_lab, tmp_path):
    """A nettop from before child_params wrote `after` without them. After an upgrade its
    tbf-with-a-child entry is not "changed by someone else": undo goes ahead and the drift
    check stays quiet. A change of what that journal does hold (the child's kind, by hand
    with tc) still counts; with today's journal, so does the child's limit."""
    import json

    from lab import run

    dev = veth_lab.host_if
    path = tmp_path / "j.jsonl"
    t = Tuner(Journal(str(path)), read_only=None)
    t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": {"rate": "20mbit", "burst": "15k"},
                                            "children": "bfifo", "child_params": {"limit": 30000}})]), confirmed=True)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in lines:
        if rec.get("op") == "end":
            assert rec["after"].pop("child_params") == {"limit": 30000}  # as the older nettop wrote it
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    t = Tuner(Journal(str(path)), read_only=None)
    assert t.drift() == []
    parent = _tc_qdiscs(dev)[1]["parent"]
    run(["tc", "qdisc", "replace", "dev", dev, "parent", parent, "pfifo", "limit", "100"])
    (d,) = t.drift()
    assert "children pfifo" in d.line() and "changed by someone else" in d.line()
    run(["tc", "qdisc", "replace", "dev", dev, "parent", parent, "bfifo", "limit", "30000"])
    assert t.drift() == []
    t.undo()
    assert RootQdisc(dev).read()["kind"] == "noqueue"

    # today's journal holds the child's limit: a hand-made change of it is drift
    t = Tuner(Journal(str(tmp_path / "new.jsonl")), read_only=None)
    t.apply(t.plan([Change(RootQdisc(dev), {"kind": "tbf", "params": {"rate": "20mbit", "burst": "15k"},
                                            "children": "bfifo", "child_params": {"limit": 30000}})]), confirmed=True)
    run(["tc", "qdisc", "change", "dev", dev, "parent", _tc_qdiscs(dev)[1]["parent"], "bfifo", "limit", "40000"])
    (d,) = t.drift()
    assert "limit=40000" in d.line(), d.line()
    t.undo(force=True)
    assert RootQdisc(dev).read()["kind"] == "noqueue"


def test_unchanged_compares_only_what_the_journal_holds():
    s = RootQdisc("lo")
    left = {"kind": "fq_codel", "params": {"limit": 10240, "target": 4999, "interval": 99999}, "default": False}
    now = {**left, "params": {**left["params"], "quantum": 1514, "ecn": 1}}
    assert s.unchanged(left, now)  # an older journal: quantum and ecn were not read back then
    assert not s.unchanged(left, {**now, "params": {**now["params"], "target": 20000}})
    assert not s.unchanged(left, {**now, "kind": "pfifo_fast"})
    assert not s.unchanged({**left, "child_params": {"limit": 3}}, now)  # the child went away
    assert s.unchanged(left, left)
