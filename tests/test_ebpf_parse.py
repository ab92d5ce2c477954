"""Pure parts of the eBPF probes: BTF, histograms, fdinfo, map decoding, JSON rates.

The BTF reader is checked on a hand-built blob (anonymous unions, bitfields, ENUM64,
a tracepoint typedef) and on this machine's own /sys/kernel/btf/vmlinux.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from nettop.ebpf import btf as btfmod
from nettop.ebpf.btf import BtfError, parse_btf
from nettop.ebpf.cost import parse_fdinfo
from nettop.ebpf.hist import diff, percentile, percentiles, slot_bounds
from nettop.ebpf.maps import (DROP_KEY, DROP_VAL, NAPI_KEY, NAPI_VAL, SIRQ_WORDS,
                              decode_pairs, decode_percpu_pairs, decode_sirq, ifname)
from nettop.ebpf.preflight import headers_problem, parse_cap_eff
from nettop.ebpf.deltas import drop_rows, hardirq_rows, irq_handler_names, napi_rows, sample_mask
from nettop.ebpf.duty import Window, duty_for, events_in
from nettop.ebpf.program import (EXPECTED_ARGS, HIST_SLOTS, PROBES, layout_from_btf,
                                 render, signature_problem)
from nettop.ebpf.sample import (DropCounts, EbpfSample, IrqCounts, NapiCounts, NapiMode,
                                ProbeCost, SoftirqCounts, device_label, napi_mode, to_json)

DATA = Path(__file__).parent / "data" / "ebpf"


# --- a hand-built BTF blob ------------------------------------------------------------

def _blob() -> bytes:
    strs = b"\0"
    names: dict[str, int] = {}

    def s(name: str) -> int:
        nonlocal strs
        if name not in names:
            names[name] = len(strs)
            strs += name.encode() + b"\0"
        return names[name]

    def t(name: str, kind: int, vlen: int, size_or_type: int, kflag: int = 0) -> bytes:
        info = (kflag << 31) | (kind << 24) | vlen
        return struct.pack("<III", s(name) if name else 0, info, size_or_type)

    types = b"".join([
        t("int", 1, 0, 4) + struct.pack("<I", 32),                      # 1
        t("", 2, 0, 0),                                                # 2 void *
        t("", 4, 1, 16) + struct.pack("<III", s("dev"), 2, 64),        # 3 anon struct
        t("", 5, 2, 16) + struct.pack("<III", 0, 3, 0)                 # 4 anon union
        + struct.pack("<III", s("scratch"), 1, 0),
        t("sk_buff", 4, 2, 40, kflag=1) + struct.pack("<III", 0, 4, 0)  # 5
        + struct.pack("<III", s("flags"), 1, (3 << 24) | 192),
        t("skb_drop_reason", 6, 2, 4)                                  # 6
        + struct.pack("<Ii", s("SKB_NOT_DROPPED_YET"), 0)
        + struct.pack("<Ii", s("SKB_DROP_REASON_NO_SOCKET"), 3),
        t("", 2, 0, 5),                                                # 7 struct sk_buff *
        t("", 13, 3, 0) + struct.pack("<II", 0, 2) + struct.pack("<II", 0, 7)  # 8 proto
        + struct.pack("<II", 0, 6),
        t("", 2, 0, 8),                                                # 9 ptr to proto
        t("btf_trace_kfree_skb", 8, 0, 9),                             # 10 typedef
        t("big", 19, 1, 8) + struct.pack("<III", s("HUGE"), 1, 2),     # 11 enum64
        t("possible", 4, 1, 8) + struct.pack("<III", s("net"), 2, 0),   # 12
        t("net_device", 4, 1, 24) + struct.pack("<III", s("nd_net"), 12, 128),  # 13
    ])
    hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strs))
    return hdr + types + strs


def test_btf_member_offsets_look_inside_anonymous_unions_and_embedded_structs():
    b = parse_btf(_blob())
    assert b.member_offset("sk_buff", "dev") == 8
    assert b.member_offset("sk_buff", "scratch") == 0
    assert b.member_offset("sk_buff", "flags") == 24  # bitfield: kind_flag offset decoding
    assert b.member_offset("net_device", "nd_net.net") == 16
    assert b.member_offset("sk_buff", "nope") is None
    assert b.member_offset("no_such_struct", "dev") is None
    assert b.member_offset("net_device", "nd_net.net.deeper") is None


def test_btf_enums_and_tracepoint_arguments():
    b = parse_btf(_blob())
    assert b.enum_values("skb_drop_reason") == {0: "SKB_NOT_DROPPED_YET",
                                                3: "SKB_DROP_REASON_NO_SOCKET"}
    assert b.enum_values("big") == {(2 << 32) | 1: "HUGE"}
    assert b.enum_values("missing") == {}
    assert b.tracepoint_args("kfree_skb") == ["struct sk_buff *", "enum skb_drop_reason"]
    assert b.tracepoint_args("napi_poll") is None


def test_btf_rejects_bad_magic_and_truncated_sections():
    blob = _blob()
    with pytest.raises(BtfError):
        parse_btf(b"\0\0" + blob[2:])
    with pytest.raises(BtfError):
        parse_btf(blob[:40])
    with pytest.raises(BtfError):
        parse_btf(b"\x9f\xeb")


@pytest.mark.live
def test_live_vmlinux_btf_has_every_probed_tracepoint_with_the_expected_arguments():
    if not os.path.exists(btfmod.VMLINUX):
        pytest.skip("kernel has no BTF")
    b = btfmod.read_vmlinux_btf()
    for group, tps in PROBES.items():
        for tp in tps:
            args = b.tracepoint_args(tp.partition(":")[2])
            assert signature_problem(tp, args) is None, (group, tp, args)
    assert b.tracepoint_args("napi_poll") == EXPECTED_ARGS["napi_poll"]
    assert b.tracepoint_args("no_such_tracepoint_here") is None
    reasons = set(b.enum_values("skb_drop_reason").values())
    assert {"SKB_DROP_REASON_NO_SOCKET", "SKB_DROP_REASON_QDISC_DROP"} <= reasons
    lay = layout_from_btf(b)
    assert lay.drop_reason_arg == 2  # (skb, location, reason[, rx_sk]) since 5.17
    assert min(lay.napi_id, lay.napi_dev, lay.dev_name, lay.dev_ifindex, lay.skb_dev,
               lay.dev_net, lay.net_inum) >= 0


def test_render_emits_only_enabled_groups():
    b = parse_btf(_blob())
    text = render(("softirq",), layout_from_btf(b))
    assert "PROBE(softirq_entry)" in text and "PROBE(napi_poll)" not in text
    assert "PROBE(kfree_skb)" not in text and "irq_handler_entry" not in text
    # Offsets the blob lacks become -1 and their reads are compiled out.
    assert "#define OFF_NAPI_ID (-1)" in text


def test_signature_problem_names_the_tracepoint_and_the_mismatch():
    assert signature_problem("napi:napi_poll", None) == \
        "tracepoint napi:napi_poll missing on this kernel"
    msg = signature_problem("napi:napi_poll", ["int"])
    assert msg is not None and "(int)" in msg and "struct napi_struct *" in msg
    assert signature_problem("skb:kfree_skb", ["struct sk_buff *", "void *"]) is None


# --- histograms -------------------------------------------------------------------

def test_log2_histogram_percentiles_interpolate_inside_the_slot():
    assert slot_bounds(1) == (1.0, 2.0) and slot_bounds(11) == (1024.0, 2048.0)
    hist = [0] * HIST_SLOTS
    hist[11] = 100  # 100 durations in [1024, 2048) ns
    assert percentile(hist, 0.5) == pytest.approx(1536.0)
    hist[21] = 1  # one ~1 ms outlier
    p50, p90, p99 = percentiles(hist)
    assert 1024 <= p50 < 2048 and 1024 <= p90 < 2048 and 1024 <= p99 < 2048
    assert percentile(hist, 1.0) >= 1 << 20
    assert percentile([0] * HIST_SLOTS, 0.5) is None
    assert diff((5, 7), (2, 3)) == (3, 4) and diff((5, 7), None) == (5, 7)


# --- fdinfo, capabilities, headers ----------------------------------------------------

def test_prog_fdinfo_of_this_kernel_gives_run_time_and_count():
    run = parse_fdinfo((DATA / "prog_fdinfo_6.18.txt").read_text())
    assert (run.run_time_ns, run.run_cnt, run.recursion_misses) == (2864, 29, 0)
    assert parse_fdinfo("pos:\t0\nflags:\t02\n").run_cnt == 0  # statistics off / old kernel


def test_cap_eff_mask_is_read_from_status_text():
    assert parse_cap_eff("Name:\tx\nCapEff:\t000001fffeffffff\n") == 0x1FFFEFFFFFF
    assert parse_cap_eff("CapEff:\tzz\n") == 0 and parse_cap_eff("") == 0


def test_headers_problem_names_the_release_and_the_package(tmp_path):
    msg = headers_problem("9.9.9-test", modules=str(tmp_path))
    assert msg is not None and "9.9.9-test" in msg and "linux-headers" in msg
    (tmp_path / "9.9.9-test" / "build" / "include").mkdir(parents=True)
    assert headers_problem("9.9.9-test", modules=str(tmp_path)) is None


# --- map decoding ---------------------------------------------------------------------

def test_decode_percpu_pairs_splits_values_per_possible_cpu():
    v0 = NAPI_VAL.pack(10, 640, 10, 0, 64, 300, 7, -1, 4026531840, 1, b"eth0")
    v1 = NAPI_VAL.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"")
    keys = NAPI_KEY.pack(0xFFFF888001234000)
    rows = list(decode_percpu_pairs(keys, v0 + v1, 1, NAPI_KEY, NAPI_VAL, 2))
    assert rows[0][0] == (0xFFFF888001234000,)
    assert rows[0][1][0][:6] == (10, 640, 10, 0, 64, 300) and rows[0][1][1][9] == 0
    assert NAPI_VAL.size % 8 == 0 and DROP_VAL.size % 8 == 0 and DROP_KEY.size == 24


def test_decode_pairs_and_sirq_words():
    k = struct.pack("<II", 38, 1)
    v = struct.pack("<QQ", 5, 9000)
    assert list(decode_pairs(k, v, 1, struct.Struct("<II"), struct.Struct("<QQ"))) == \
        [((38, 1), (5, 9000))]
    words = list(range(SIRQ_WORDS)) + [0] * SIRQ_WORDS
    recs = decode_sirq(words, [0, 3])
    assert recs[0]["raised"] == (4, 5) and recs[0]["timed"] == (14, 15)
    assert recs[0]["wait_hist"][0][0] == 16 and len(recs[0]["run_hist"][1]) == HIST_SLOTS
    assert recs[3]["runs"] == (0, 0)


def test_ifname_rejects_garbage_bytes():
    assert ifname(b"eth0\0\0\0") == "eth0" and ifname(b"\0" * 16) == ""
    assert ifname(b"\x01\xff\x80x") == "?"


def test_irq_handler_names_come_from_proc_irq_directories(tmp_path):
    (tmp_path / "38" / "virtio2-input.0").mkdir(parents=True)
    (tmp_path / "38" / "smp_affinity").write_text("3\n")
    assert irq_handler_names(38, proc=str(tmp_path)) == "virtio2-input.0"
    assert irq_handler_names(99, proc=str(tmp_path)) == ""


def test_sample_mask_times_about_ten_thousand_runs_per_second():
    assert sample_mask(0) == 0 and sample_mask(9000) == 0
    assert sample_mask(20001) == 3
    assert sample_mask(180000) == 31 and sample_mask(1e12) == 1023


# --- the sample and its JSON --------------------------------------------------------

def _sample() -> EbpfSample:
    hist = [0] * HIST_SLOTS
    hist[12] = 10
    return EbpfSample(
        elapsed_s=2.0, probes=("napi", "hardirq", "softirq", "drops"),
        napi=(NapiCounts("eth0", 2, 0, 8193, 38, 0, 100, 6400, 90, 0, 64),
              NapiCounts("eth0", 2, 0, 8193, 38, 1, 100, 100, 0, 10, 64),
              NapiCounts("", 0, 0, 0, None, 1, 0, 0, 0, 0, 64)),
        hardirq=(IrqCounts(38, "virtio2-input.0", 1, 200, 2_000_000),),
        softirq=(SoftirqCounts(1, "NET_RX", 20, 20, 10, 40_000, 10, 30_000,
                               tuple(hist), tuple(hist)),),
        drops=(DropCounts("NO_SOCKET", 3, "eth1", 5, 4026532000, "__udp4_lib_rcv+0x1", 8),
               DropCounts("QDISC_DROP", 37, "eth0", 2, 0, "__dev_queue_xmit+0x2", 2)),
        cost=(ProbeCost("napi_poll", 1_000_000, 200),), netns_self=4026531840)


def test_to_json_turns_counts_into_per_second_rates():
    j = to_json(_sample())
    assert set(j) >= {"napi", "hardirq", "softirq", "drops", "cost"}
    eth0 = [n for n in j["napi"] if n["ifname"] == "eth0"][0]
    assert eth0["polls_per_s"] == 100.0 and eth0["packets_per_s"] == 3250.0
    assert eth0["full_budget_share"] == 0.45 and eth0["mode"] == "interrupt"
    assert eth0["cpus"] == {"0": 50.0, "1": 50.0} and eth0["irq"] == 38
    idle = [n for n in j["napi"] if n["ifname"] == ""][0]
    assert idle["mode"] == "idle" and idle["polls_per_s"] == 0.0
    assert j["hardirq"] == [{"irq": 38, "name": "virtio2-input.0", "count_per_s": 100.0,
                             "us_per_s": 1000.0, "cpus": {"1": 1000.0}}]
    rx = j["softirq"][0]
    assert rx["runs_per_s"] == 10.0 and rx["timed_share"] == 0.5
    assert rx["run_us_per_s"] == pytest.approx(40.0)  # 4 µs per timed run x 20 runs / 2 s
    assert 2.048 <= rx["wait_us"]["p50"] < 4.096  # slot 12 holds [2048, 4096) ns
    assert j["drops"]["per_s"] == 5.0
    assert j["drops"]["by_reason"] == {"NO_SOCKET": 4.0, "QDISC_DROP": 1.0}
    assert j["drops"]["by_device"] == {"eth0": 1.0, "eth1@netns:4026532000": 4.0}
    assert j["cost"]["cpu_us_per_s"] == 500.0 and j["cost"]["events_per_s"] == 100.0


def test_napi_mode_splits_interrupt_from_polling():
    assert napi_mode(0, 0) is NapiMode.IDLE
    assert napi_mode(100, 10) is NapiMode.INTERRUPT
    assert napi_mode(100, 80) is NapiMode.POLLING
    assert device_label("eth0", 0, 5) == "eth0" and device_label("eth1", 7, 5) == "eth1@netns:7"


def test_sample_with_no_time_gives_zero_rates_not_errors():
    j = to_json(EbpfSample(elapsed_s=0.0, errors=("needs root",)))
    assert j["napi"] == [] and j["drops"]["per_s"] == 0.0 and j["errors"] == ["needs root"]


# --- duty cycling and interval deltas ---------------------------------------------------

def test_duty_halves_attached_time_per_doubling_of_the_event_rate_over_budget():
    assert duty_for(0) == 1 and duty_for(100_000) == 1
    assert duty_for(100_001) == 2 and duty_for(800_000) == 8 and duty_for(850_000) == 16
    assert duty_for(1e12) == 32


def test_events_in_counts_probe_runs_behind_a_sample():
    s = _sample()
    # napi polls 200, softirq raised 20 + 2 x 20 runs, hardirq 2 x 200, drops 10
    assert events_in(s) == 200 + 60 + 400 + 10


def test_window_accumulates_attached_time_between_takes():
    w = Window()
    w.opened(10.0)
    w.closed(10.25)
    assert not w.open and w.take(11.0) == 0.25
    w.opened(11.0)
    assert w.take(12.0) == 1.0 and w.open and w.take(12.5) == 0.5


def test_napi_rows_restart_when_an_address_gets_a_new_napi_id():
    cpus = [0, 1]
    zero = NAPI_VAL.unpack(bytes(NAPI_VAL.size))
    def val(polls, napi_id, name):
        return (polls, polls * 2, 0, 0, 64, napi_id, 3, -1, 99, 1, name)
    prev = [((0xA,), [val(100, 7, b"eth1"), zero])]
    cur = [((0xA,), [val(150, 7, b"eth1"), val(5, 8, b"eth2")])]
    rows = {(r.cpu, r.napi_id): r for r in napi_rows(cur, prev, cpus)}
    assert rows[(0, 7)].polls == 50 and rows[(0, 7)].work == 100
    assert rows[(1, 8)].polls == 5 and rows[(1, 8)].ifname == "eth2"  # new: counted whole
    restarted = [((0xA,), [val(3, 9, b"eth3"), zero])]
    assert [r.polls for r in napi_rows(restarted, cur, cpus)] == [3]


def test_drop_and_irq_deltas_sum_cpus_and_skip_quiet_rows():
    cpus = [0, 1]
    prev = [((3, 0, 0xD, 0x10), [(5, 2, 99, 1, 0, b"eth1"), (0, 0, 0, 0, 0, b"")])]
    cur = [((3, 0, 0xD, 0x10), [(9, 2, 99, 1, 0, b"eth1"), (6, 2, 99, 1, 0, b"eth1")]),
           ((37, 0, 0xE, 0x20), [(0, 0, 0, 0, 0, b""), (0, 0, 0, 0, 0, b"")])]
    rows = drop_rows(cur, prev, cpus, lambda c: {3: "NO_SOCKET"}.get(c, str(c)),
                     lambda a: f"fn+{a:#x}")
    assert [(d.reason, d.ifname, d.netns, d.location, d.count) for d in rows] == \
        [("NO_SOCKET", "eth1", 99, "fn+0x10", 10)]
    irqs = hardirq_rows([((38, 1), (7, 700)), ((40, 0), (2, 20))],
                        [((38, 1), (5, 500)), ((40, 0), (2, 20))], lambda i: f"irq{i}")
    assert [(r.irq, r.cpu, r.count, r.time_ns, r.name) for r in irqs] == \
        [(38, 1, 2, 200, "irq38")]
