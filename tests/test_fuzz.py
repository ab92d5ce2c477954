"""The short fuzz pass CI runs: every parser, a fixed seed, a few seconds each.

Each parser gets `ci_inputs` mutated inputs from seed 0 (the same inputs on every run
and machine) and must keep the contract of docs/bad-input.md: no exception other than
its project error, no input slower than a few seconds, and no inconsistent result that
no Problem reports. Every input the long run (benchmarks/fuzz.py) ever found is kept in
tests/data/fuzz-regressions/PARSER/ and replayed here first.
"""

from __future__ import annotations

import pytest

from fuzzing.engine import REGRESSIONS, crash_key, fuzz, load, regressions, run_one
from fuzzing.targets import BY_NAME, TARGETS

def _params():
    for t in TARGETS:
        yield pytest.param(t.name, id=t.name)


@pytest.mark.parametrize("name", list(_params()))
def test_short_fixed_seed_pass_keeps_the_contract(name):
    target = BY_NAME[name]
    st = fuzz(target, target.ci_inputs, seed=0, hang_s=3.0)
    assert st.inputs == target.ci_inputs
    assert (st.crashes, st.hangs, st.silent) == (0, 0, 0), st.kinds
    assert st.flagged > 0, "no input was flagged: the mutations do not reach the parser"


@pytest.mark.parametrize("name", list(_params()))
def test_every_input_the_fuzzer_ever_found_is_handled(name):
    target = BY_NAME[name]
    paths = regressions(name)
    if not paths:
        pytest.skip(f"no regression inputs kept for {name}")
    if target.setup:
        target.setup()
    try:
        failures = []
        for path in paths:
            out, exc = run_one(target, load(path))
            if exc is not None:
                failures.append(f"{path.name}: {crash_key(exc)}: {exc!r}"[:300])
            elif out is not None and out.silent:
                failures.append(f"{path.name}: silent: {out.silent}")
    finally:
        if target.teardown:
            target.teardown()
    assert not failures, failures


def test_regression_inputs_belong_to_known_parsers():
    if REGRESSIONS.is_dir():
        unknown = [d.name for d in REGRESSIONS.iterdir() if d.is_dir() and d.name not in BY_NAME]
        assert not unknown


def test_the_same_seed_gives_the_same_inputs():
    from fuzzing.engine import make_input

    for t in TARGETS:
        if t.name in ("store", "tree"):
            continue  # their inputs depend on files made at setup (same content, new dirs)
        assert make_input(t, 0, 7) == make_input(t, 0, 7)
