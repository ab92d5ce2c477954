"""summarize(), percentiles, the JSON keys and the reply bookkeeping, by hand.

Values are computed by hand in the comments, so the maths is checked against arithmetic
and not against itself.
"""

from __future__ import annotations

import math

import pytest

from nettop.ping import JSON_KEYS, LatencyStats, percentile, summarize, to_json
from nettop.ping.tracker import Tracker


def test_summarize_min_avg_max_mdev_and_percentiles_of_ten_samples():
    rtts = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 6.0, 9.0, 7.0, 8.0]
    s = summarize(rtts, sent=12, target="gw", address="192.0.2.1")
    assert (s.sent, s.received) == (12, 10)
    assert s.loss_pct == pytest.approx(100 * 2 / 12)
    assert (s.rtt_min_ms, s.rtt_max_ms) == (1.0, 10.0)
    assert s.rtt_avg_ms == pytest.approx(5.5)
    # mean of squares = 385 / 10 = 38.5; 38.5 - 5.5^2 = 8.25
    assert s.rtt_mdev_ms == pytest.approx(math.sqrt(8.25))
    # sorted 1..10, rank h = 9p: p50 -> 4.5 -> 5.5; p90 -> 8.1 -> 9.1; p99 -> 8.91 -> 9.91
    assert s.rtt_p50_ms == pytest.approx(5.5)
    assert s.rtt_p90_ms == pytest.approx(9.1)
    assert s.rtt_p99_ms == pytest.approx(9.91)
    assert s.target == "gw" and s.address == "192.0.2.1" and s.error is None


def test_summarize_mdev_matches_iputils_formula_on_uneven_samples():
    rtts = [0.040, 0.050, 0.120]
    s = summarize(rtts, sent=3)
    # mean 0.07; mean of squares (0.0016 + 0.0025 + 0.0144) / 3 = 0.00616667
    assert s.rtt_mdev_ms == pytest.approx(math.sqrt(0.0185 / 3 - 0.07 ** 2))
    assert s.rtt_p50_ms == pytest.approx(0.050)
    assert s.rtt_p90_ms == pytest.approx(0.050 + 0.8 * 0.070)  # h = 1.8


def test_summarize_one_sample_and_no_sample():
    one = summarize([2.5], sent=1)
    assert one.rtt_p50_ms == one.rtt_p99_ms == one.rtt_min_ms == 2.5
    assert one.rtt_mdev_ms == 0.0 and one.loss_pct == 0.0
    none = summarize([], sent=4, error="x: host unreachable")
    assert none.loss_pct == 100.0 and none.received == 0
    assert none.rtt_min_ms is None and none.rtt_p99_ms is None and none.rtt_mdev_ms is None
    nothing = summarize([], sent=0)
    assert nothing.loss_pct is None


def test_summarize_refuses_more_replies_than_probes():
    with pytest.raises(ValueError):
        summarize([1.0, 2.0], sent=1)


def test_percentile_inclusive_interpolation():
    assert percentile([1.0, 3.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 100.0], 99) == pytest.approx(4 + 0.96 * 96)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_to_json_has_exactly_the_documented_keys():
    s = summarize([1.0, 2.0], sent=2, address="10.0.0.1")
    doc = to_json(s)
    assert tuple(doc) == JSON_KEYS
    assert {"sent", "received", "loss_pct", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms",
            "rtt_mdev_ms", "rtt_p99_ms", "rtt_p50_ms", "rtt_p90_ms", "address",
            "error"} == set(doc)
    assert doc["rtt_avg_ms"] == 1.5 and doc["address"] == "10.0.0.1" and doc["error"] is None


def test_latency_stats_is_frozen():
    s = summarize([1.0], sent=1)
    assert isinstance(s, LatencyStats)
    with pytest.raises(AttributeError):
        s.sent = 3  # type: ignore[misc]


def test_tracker_counts_a_duplicate_once_and_a_late_reply_never():
    t = Tracker("t", timeout_ns=1_000_000_000)
    t.sent(1, user_ns=1_000_000, mono_ns=0)
    t.sent(2, user_ns=2_000_000, mono_ns=0)
    t.tx_stamp(1, 1_100_000)  # 100 µs after the clock read: the stack, not a stall
    assert t.reply(1, rx_ns=1_600_000) is True
    assert t.reply(1, rx_ns=1_700_000) is False  # the same reply again
    assert t.duplicates == 1
    assert t.reply(2, rx_ns=2_000_000 + 2_000_000_000) is False  # 2 s after a 1 s timeout
    assert t.late == 1
    s = t.take()
    assert (s.sent, s.received) == (2, 1)
    assert s.rtt_min_ms == pytest.approx(0.6)  # from the clock read, as ping measures
    assert t.take().sent == 0  # take() resets the window


def test_tracker_expires_in_send_order_and_ignores_foreign_replies():
    t = Tracker("t", timeout_ns=100)
    for probe, mono in ((1, 0), (2, 50), (3, 200)):
        t.sent(probe, user_ns=mono, mono_ns=mono)
    gone, nxt = t.expire(now_mono_ns=160)
    assert gone == [1, 2] and nxt == 300
    assert t.reply(99, rx_ns=10) is False and t.foreign == 1
    assert t.reply(1, rx_ns=10) is False and t.late == 1
    t.lost(3, "t: host unreachable")
    s = t.take()
    assert (s.sent, s.received, s.loss_pct) == (3, 0, 100.0)
    assert s.error == "t: host unreachable"


def test_tracker_starts_the_rtt_at_the_kernel_stamp_after_a_stall():
    t = Tracker("t", timeout_ns=1_000_000_000)
    t.sent(1, user_ns=1_000_000, mono_ns=0)
    t.tx_stamp(1, 6_000_000)  # 5 ms between the clock read and the qdisc: a stall
    t.sent(2, user_ns=10_000_000, mono_ns=0)
    t.tx_stamp(2, 9_000_000)  # before the send: impossible, ignored
    assert t.reply(1, rx_ns=6_250_000) and t.reply(2, rx_ns=10_300_000)
    s = t.take()
    assert (s.rtt_min_ms, s.rtt_max_ms) == (pytest.approx(0.25), pytest.approx(0.3))
