"""Property tests (hypothesis, fixed seed) of the pure parts the fuzzer leans on: CPU
lists and masks, strict kernel numbers, and rates of arbitrary counters."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nettop.collectors.cpus import MAX_CPUS, format_cpu_list, format_cpu_mask, parse_cpu_list, parse_cpu_mask
from nettop.collectors.numbers import decimal, hexadecimal
from nettop.model.rates import compute_rates
from nettop.model.snapshot import CpuTimes, InterruptTable, Irq, SoftirqCounts, SoftnetRow, Snapshot

FIXED = settings(derandomize=True, max_examples=400, deadline=None)
cpu_sets = st.frozensets(st.integers(0, MAX_CPUS - 1), max_size=64)


@FIXED
@given(cpu_sets)
def test_a_cpu_list_round_trips(cpus):
    assert parse_cpu_list(format_cpu_list(cpus)) == tuple(sorted(cpus))


@FIXED
@given(cpu_sets)
def test_a_cpu_mask_round_trips(cpus):
    n = max(cpus, default=0) + 1
    assert parse_cpu_mask(format_cpu_mask(cpus, n)) == tuple(sorted(cpus))


@FIXED
@given(st.text(alphabet="0123456789-,:/ x²٣+_\n", max_size=40))
def test_any_typed_cpu_list_gives_cpus_below_the_bound_or_value_error(text):
    try:
        cpus = parse_cpu_list(text)
    except ValueError:
        return
    assert all(0 <= c < MAX_CPUS for c in cpus)


@pytest.mark.parametrize("text", ["0-4294967295", "0-400000000:1/2", "0-99999999999", "8192",
                                  "0-8192", "1" + "0" * 5000])
def test_absurd_cpu_ranges_are_refused_before_any_list_is_built(text):
    with pytest.raises(ValueError, match="beyond the highest possible CPU"):
        parse_cpu_list(text)


@pytest.mark.parametrize("text", ["1" + "0" * 2048, "ffffffff," * 300 + "1"])
def test_masks_wider_than_any_kernel_are_refused(text):
    with pytest.raises(ValueError):
        parse_cpu_mask(text)


@pytest.mark.parametrize("text", ["²", "²⁹", "٣", "+1", " +1", "-1", "1_000", "0x10", "", "18446744073709551616"])
def test_numbers_the_kernel_never_prints_are_refused(text):
    with pytest.raises(ValueError):
        decimal(text, 64)


def test_counters_of_their_width_are_taken():
    assert decimal("18446744073709551615", 64) == (1 << 64) - 1
    assert decimal("0004294967295", 32) == (1 << 32) - 1
    assert hexadecimal("ffffffff", 32) == (1 << 32) - 1
    with pytest.raises(ValueError):
        hexadecimal("100000000", 32)
    with pytest.raises(ValueError):
        hexadecimal("+f", 32)


counters = st.one_of(st.integers(0, (1 << 32) - 1), st.integers(-(1 << 70), 1 << 70),
                     st.sampled_from([0, 1, (1 << 32) - 1, 1 << 32, (1 << 64) - 1, 1 << 64, -1, 10 ** 400]))


def _snap(t, c, cpus=(0, 1)):
    return Snapshot(
        t_mono=t, t_wall=1e9 + t, host="h", kernel="k", online_cpus=cpus,
        interrupts=InterruptTable(cpus, {24: Irq(24, "PCI-MSI", "1-edge", "eth0-rx-0", (c[0], c[1]), c[0] + c[1])}),
        softirqs={i: SoftirqCounts(i, c[2], c[3]) for i in cpus},
        cpu_times={i: CpuTimes(i, c[4], c[5], c[6], c[7], 0, c[8], c[9], 0) for i in cpus},
        softnet={i: SoftnetRow(i, c[10], c[11], c[0], 0, 0) for i in cpus},
    )


@settings(derandomize=True, max_examples=600, deadline=None)
@given(st.lists(counters, min_size=12, max_size=12), st.lists(counters, min_size=12, max_size=12),
       st.floats(1e-3, 1e4))
def test_rates_of_any_counters_never_raise_and_are_never_negative_or_absurd(a, b, elapsed):
    rates = compute_rates(_snap(0.0, a), _snap(elapsed, b))
    limit = float(1 << 64) / elapsed
    for c in rates.cpus.values():
        for f in dataclasses.fields(c):
            v = getattr(c, f.name)
            if isinstance(v, float):
                assert not math.isnan(v) and v >= 0.0, (f.name, v)
                if f.name.endswith("_pct"):
                    assert v <= 100.0 + 1e-6, (f.name, v)
                else:
                    assert v <= limit, (f.name, v)
    for r in rates.irqs.values():
        assert r.per_s is None or 0.0 <= r.per_s <= limit
    # slots 0-3 and 10-11 are 32-bit kernel counters, 4-9 are 64-bit CPU times
    wide = [v for c in (a, b) for i, v in enumerate(c)
            if not 0 <= v < (1 << 64 if 4 <= i <= 9 else 1 << 32)]
    if wide:
        assert rates.problems, "a counter outside its width must be reported"


# -- experiment plans: typed by people, so any text is a plan or one PlanError line -------

_PLAN = (Path(__file__).resolve().parent.parent / "docs" / "examples" / "lab-queues.toml").read_text()
_PLAN_VALUES = st.one_of(st.integers(-2**70, 2**70).map(str), st.floats(allow_nan=True).map(repr),
                         st.sampled_from(["true", "false", "nan", "inf", "-inf", "1e400", "0x7fffffff"]),
                         st.text(max_size=12).map(lambda s: '"' + s.replace("\\", "").replace('"', "") + '"'),
                         st.just("[]"), st.just("{}"), st.just('["nettop set"]'), st.just('"nettop set rps lo 0 1"'))


@FIXED
@given(st.integers(0, 10_000), st.integers(0, 40), _PLAN_VALUES, st.binary(max_size=8))
def test_any_damaged_experiment_plan_parses_or_gives_one_plan_error(pos, cut, value, junk):
    """A plan with a value swapped, bytes cut or junk spliced in: an ExperimentPlan with
    values in range, or a PlanError of one line; never another exception."""
    from nettop.experiment.plan import PlanError, parse

    lines = _PLAN.splitlines()
    i = pos % len(lines)
    if "=" in lines[i]:
        lines[i] = lines[i].split("=", 1)[0] + "= " + value
    text = "\n".join(lines)
    j = pos % (len(text) + 1)
    text = text[:j] + junk.decode("latin-1") + text[j + cut:]
    try:
        plan = parse(text, "fuzz.toml")
    except PlanError as exc:
        assert "\n" not in str(exc).strip()
        return
    assert plan.variants and plan.timing.repeats >= 1
    assert 0 < plan.load.flows <= 10_000
