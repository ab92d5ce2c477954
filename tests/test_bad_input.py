"""The crashes and silent errors of issue 18, one test each (docs/bad-input.md)."""

from __future__ import annotations

from nettop.collectors.cpustat import cpu_percentages, parse_stat
from nettop.collectors.interrupts import parse_interrupts
from nettop.collectors.softirqs import parse_softirqs
from nettop.collectors.softnet import parse_softnet
from nettop.model.rates import compute_rates
from nettop.model.snapshot import CpuTimes, InterruptTable, Irq, Snapshot

HEAD = "           CPU0       CPU1\n"
LINE = " 24:        100        200   PCI-MSI 524288-edge      eth0-rx-0\n"


def _messages(problems):
    return " | ".join(p.message for p in problems)


def test_interrupts_header_with_a_superscript_digit_is_a_problem_not_a_value_error():
    table, problems = parse_interrupts(HEAD.replace("CPU1", "CPU\xb2") + LINE)
    assert table.cpus == () and "no CPU header line" in _messages(problems)


def test_interrupts_counts_and_labels_int_would_refuse_or_wrongly_take_are_problems():
    for bad in ("\xb2", "+5", "1_0", "-5"):
        table, problems = parse_interrupts(HEAD + LINE.replace("200", bad.rjust(3)))
        assert 24 not in table.irqs and "does not have 2 per-CPU counts" in _messages(problems), bad
    table, problems = parse_interrupts(HEAD + LINE.replace(" 24:", "\xb2\xb9:"))
    assert table.irqs == {} and problems


def test_interrupt_counts_wider_than_32_bits_are_corrupt():
    table, problems = parse_interrupts(HEAD + LINE.replace("       200", "4294967296"))
    assert 24 not in table.irqs and "wider than 32 bits" in _messages(problems)


def test_duplicate_cpu_columns_and_irq_lines_are_problems():
    table, problems = parse_interrupts(HEAD.replace("CPU1", "CPU0") + LINE)
    assert table.irqs == {} and "names a CPU twice" in _messages(problems)
    table, problems = parse_interrupts(HEAD + LINE + LINE.replace("100", "999"))
    assert table.irqs[24].counts == (100, 200) and "IRQ 24 is listed twice" in _messages(problems)


def test_interrupts_holding_softirqs_is_a_problem():
    text = "                    CPU0       CPU1\n          HI:          1          0\n      NET_RX:         5          7\n"
    table, problems = parse_interrupts(text)
    assert table.irqs == {} and "holds no numbered IRQ line" in _messages(problems)


def test_a_long_blank_run_in_an_irq_name_keeps_the_name():
    table, problems = parse_interrupts(HEAD + LINE.replace("eth0-rx-0", "eth0" + " " * 50_000 + "rx-0"))
    assert not problems and table.irqs[24].name == "eth0" + " " * 50_000 + "rx-0"
    assert table.irqs[24].chip == "PCI-MSI" and table.irqs[24].hwirq == "524288-edge"


def test_softnet_truncated_last_line_is_a_problem_not_an_index_error():
    full = "00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 0000000{}\n"
    text = full.format(0) + full.format(1)[:100] + "\n"  # 11 of 13 columns
    rows, problems = parse_softnet(text)
    assert list(rows) == [0] and "truncated" in _messages(problems)


def test_softnet_fields_wider_than_32_bits_or_signed_are_refused():
    line = "100000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n"
    rows, problems = parse_softnet(line + line.replace("100000000", "-0000001"))
    assert rows == {} and len(problems) == 2


def test_softirqs_superscript_values_and_huge_counts_are_problems_not_value_errors():
    head = "                    CPU0       CPU1\n"
    rows, problems = parse_softirqs(head + "      NET_TX:    \xb2   3\n      NET_RX:    1   2\n")
    assert rows == {} and "non-number" in _messages(problems)
    rows, problems = parse_softirqs(head + "      NET_TX: 4294967296 3\n      NET_RX:    1   2\n")
    assert rows == {} and "wider than 32 bits" in _messages(problems)
    rows, problems = parse_softirqs(head.replace("CPU1", "CPU0") + "      NET_TX: 1 3\n      NET_RX: 1 2\n")
    assert rows == {} and "names a CPU twice" in _messages(problems)


def test_proc_stat_overflowing_times_are_refused_and_percentages_never_overflow():
    times, problems = parse_stat("cpu  1 1 1 1\ncpu0 " + "9" * 400 + " 1 1 1\ncpu1 1 2 3 4\n")
    assert list(times) == [1] and "wider than 64 bits" in _messages(problems)
    big = CpuTimes(0, 10 ** 400, 0, 0, 0, 0, 0, 0, 0)
    assert set(cpu_percentages(CpuTimes(0, 0, 0, 0, 0, 0, 0, 0, 0), big).values()) == {0.0}


def test_proc_stat_duplicate_cpu_lines_are_a_problem():
    times, problems = parse_stat("cpu  1 1 1 1\ncpu0 1 2 3 4\ncpu0 5 6 7 8\n")
    assert times[0].user == 1 and "cpu0 has two lines" in _messages(problems)


def _snap(t, counts, times=None):
    return Snapshot(t_mono=t, t_wall=t, host="h", kernel="k", online_cpus=(0, 1),
                    interrupts=InterruptTable((0, 1), {24: Irq(24, "c", "", "eth0-rx-0", counts, sum(counts))}),
                    cpu_times=times or {})


def test_rates_of_counters_outside_their_width_give_no_rate_and_a_problem():
    rates = compute_rates(_snap(0.0, (10 ** 400, -5)), _snap(1.0, (1, 2)))
    assert rates.irqs[24].per_cpu_per_s == {} and rates.problems
    assert "outside 32 bits" in _messages(rates.problems)


def test_a_nice_field_going_backwards_cannot_give_200_percent_user():
    a = {0: CpuTimes(0, 0, 1000, 0, 0, 0, 0, 0, 0)}
    b = {0: CpuTimes(0, 200, 900, 0, 0, 0, 0, 0, 0)}
    rates = compute_rates(_snap(0.0, (1, 1), a), _snap(1.0, (1, 1), b))
    assert rates.cpus[0].user_pct == 0.0


def test_more_cpu_ticks_than_the_wall_clock_allows_is_a_problem():
    a = {0: CpuTimes(0, 0, 0, 0, 0, 0, 0, 0, 0)}
    b = {0: CpuTimes(0, 300, 0, 100, 0, 0, 0, 0, 0)}
    rates = compute_rates(_snap(0.0, (1, 1), a), _snap(1.0, (1, 1), b))
    assert rates.cpus[0].user_pct == 75.0 and "more than 100% of one CPU" in _messages(rates.problems)


def test_an_irq_count_going_backwards_is_reported():
    rates = compute_rates(_snap(0.0, (900, 10)), _snap(1.0, (5, 20)))
    assert rates.irqs[24].reset and "went backwards (900 -> 5)" in _messages(rates.problems)


def test_a_new_problem_becomes_one_timeline_event_where_the_screen_marks_events():
    from dataclasses import replace

    from nettop.model.problems import Problem
    from nettop.model.timeline import Timeline

    tl = Timeline()
    first = _snap(0.0, (1, 1))
    tl.append(replace(first, problems=(Problem("x", "old problem"),)))
    tl.append(replace(_snap(1.0, (2, 2)), problems=(Problem("x", "old problem"),)))
    tl.append(_snap(2.0, (1, 3)))  # IRQ 24 on CPU 0 went backwards
    tl.append(_snap(3.0, (2, 4)))
    texts = [e.text for e in tl.events() if e.kind == "problem"]
    assert len(texts) == 1 and "went backwards (2 -> 1)" in texts[0]
