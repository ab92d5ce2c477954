"""A short fixed-seed fuzz pass over every typed parser of nettop/actions and the journal's
replay: each returns a value of the promised shape or raises the project's one-line
error (ActionError, or CpuSetError from the CPU-set parser), never another exception,
never a hang, and never memory that grows with the numbers inside the input — the
address space is capped while the pass runs, so an expanded `0-4294967295` fails here
instead of taking the machine down."""

from __future__ import annotations

import json
import resource

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nettop.actions import ActionError, Journal, Tuner
from nettop.actions.base import from_record, need_iface, parse_int
from nettop.actions.ethtool import _parse as ethtool_parse
from nettop.actions.irq import check_cpus, nr_cpu_ids
from nettop.actions.journal import replay
from nettop.actions.qdisc import PARAMS, parse_param
from nettop.actions.sysctl import CURATED, Sysctl
from nettop.actions.typed import CpuSetError, ifname_problem, parse_cpu_spec, whole

FUZZ = settings(derandomize=True, max_examples=400, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.fixture(autouse=True)
def capped_memory():
    """1 GiB more address space than the process has now, for the length of one test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


HOSTILE = "0123456789abcdefABCDEFxX-,:/ +_.\t\n\x00²³¹١２ｆ٣\u2028\udcff"
NUMBER = st.one_of(st.integers(0, 70), st.integers(0, 2**70), st.integers(-2**40, 2**40)).map(str) | \
    st.sampled_from(["9" * 400, "9" * 5000, "0" * 300 + "1", "4294967295", "4294967296"])


@st.composite
def cpu_texts(draw) -> str:
    """A CPU list or mask, well-formed or not: ranges with huge ends, strides, mask groups."""
    kind = draw(st.sampled_from(["list", "mask", "raw", "mutated"]))
    if kind == "raw":
        return draw(st.text(alphabet=HOSTILE, max_size=60))
    if kind == "mask":
        groups = draw(st.lists(st.text(alphabet="0123456789abcdefg+ _", min_size=0, max_size=9), min_size=1, max_size=5))
        return draw(st.sampled_from(["", "0x", "0X"])) + ",".join(groups)
    items = []
    for _ in range(draw(st.integers(1, 4))):
        lo = draw(NUMBER)
        item = lo
        if draw(st.booleans()):
            item += "-" + draw(NUMBER)
            if draw(st.booleans()):
                item += ":" + draw(NUMBER) + "/" + draw(NUMBER)
        items.append(item)
    text = ",".join(items)
    if kind == "mutated" and text:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.text(alphabet=HOSTILE, max_size=3)) + text[i + 1:]
    return text


@FUZZ
@given(cpu_texts(), st.sampled_from([1, 2, 64, 8192]))
def test_cpu_sets_parse_within_the_host_or_refuse(text, ncpus):
    try:
        spec = parse_cpu_spec(text)
        cpus = spec.expand(ncpus)
    except CpuSetError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    assert list(cpus) == sorted(set(cpus)) and all(0 <= c < ncpus for c in cpus)


@FUZZ
@given(cpu_texts())
def test_check_cpus_against_the_live_host_is_a_value_or_one_line(text):
    try:
        cpus = check_cpus("fuzz", text)
    except ActionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    assert cpus and all(0 <= c < nr_cpu_ids() for c in cpus)


@FUZZ
@given(st.one_of(NUMBER, st.text(alphabet=HOSTILE, max_size=30), st.integers(-2**80, 2**80)))
def test_whole_numbers(value):
    text = value if isinstance(value, str) else str(value)
    n = whole(text)
    assert n is None or text.strip(" \t\n").isascii()
    try:
        got = parse_int("fuzz", value, 0, 2**32 - 1)
    except ActionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert 0 <= got <= 2**32 - 1


UNITS = st.sampled_from(["", "ms", "us", "s", "sec", "kbit", "mbit", "gbit", "tbit", "kbps", "k", "m", "g",
                         "kb", "b", "bit", "e400", "x", "²"])


@FUZZ
@given(st.sampled_from([(k, p) for k, ps in PARAMS.items() for p in ps]),
       st.one_of(st.tuples(NUMBER, st.sampled_from(["", ".5", ".", "." + "9" * 40]), UNITS).map("".join),
                 st.text(alphabet=HOSTILE + "kmgsbitp", max_size=30)))
def test_qdisc_parameters(kind_key, text):
    kind, key = kind_key
    try:
        n = parse_param(kind, key, text)
    except ActionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert isinstance(n, int)


@FUZZ
@given(st.sampled_from(["rx-usecs", "adaptive-rx", "combined", "gro"]), st.booleans(),
       st.one_of(NUMBER, st.text(alphabet=HOSTILE + "onfyestru", max_size=20)))
def test_ethtool_values(key, boolean, text):
    try:
        v = ethtool_parse(key, text, boolean)
    except ActionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert isinstance(v, bool) if boolean else 0 <= v <= 2**32 - 1


@FUZZ
@given(st.sampled_from(CURATED), st.lists(st.one_of(NUMBER, st.text(alphabet=HOSTILE, max_size=8)), max_size=4))
def test_sysctl_values(name, words):
    try:
        v = Sysctl(name).normalize(" ".join(words))
    except ActionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    assert isinstance(v, str) and v.isascii()


@FUZZ
@given(st.one_of(st.text(max_size=20), st.text(alphabet="./: \tlo0eth", max_size=18)))
def test_interface_names_never_reach_a_path_unchecked(name):
    why = ifname_problem(name)
    if why is None:
        assert name not in (".", "..") and "/" not in name and len(name.encode()) <= 15
    try:
        need_iface(name)
    except ActionError as exc:
        assert "\n" not in str(exc)


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=10),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                       max_leaves=8)
KINDS = ["irq_affinity", "rps_cpus", "xps_cpus", "rps_flow_cnt", "sysctl", "txqueuelen", "mtu", "bql", "qdisc",
         "coalesce", "rings", "channels", "features", "nope"]
PARAM_NAMES = ["irq", "ifname", "queue", "name", "which", "keys", "evil"]


@FUZZ
@given(st.one_of(JSONISH, st.fixed_dictionaries({"kind": st.sampled_from(KINDS),
                                                 "params": st.dictionaries(st.sampled_from(PARAM_NAMES),
                                                                           JSONISH, max_size=4)})))
def test_journal_settings_rebuild_or_refuse(record):
    try:
        s = from_record(record)
    except ActionError as exc:
        assert "\n" not in str(exc)
        return
    assert ifname_problem(getattr(s, "ifname", "lo")) is None
    assert getattr(s, "name", "net.core.netdev_budget") in CURATED


VALID = [
    {"op": "begin", "id": 1, "group": 1, "action": "set", "ref": None, "t": 1.0,
     "setting": {"kind": "rps_cpus", "params": {"ifname": "lo", "queue": 0}}, "key": "rps_cpus lo rx-0",
     "before": "0", "value": "1", "text": "rps_cpus lo rx-0: 0 → 1"},
    {"op": "end", "id": 1, "t": 1.0, "after": "1", "verified": True, "error": None},
    {"op": "group", "group": 1, "action": "set", "ref": None, "t": 1.0},
    {"op": "begin", "id": 2, "group": 2, "action": "undo", "ref": 1, "t": 2.0,
     "setting": {"kind": "rps_cpus", "params": {"ifname": "lo", "queue": 0}}, "key": "rps_cpus lo rx-0",
     "before": "1", "value": "0", "text": "x"},
    {"op": "end", "id": 2, "t": 2.0, "after": "0", "verified": True, "error": None},
    {"op": "group", "group": 2, "action": "undo", "ref": 1, "t": 2.0},
    {"op": "clean", "t": 3.0, "reason": "revert"},
]


@st.composite
def journal_lines(draw) -> list[str]:
    """The valid journal above with fields replaced, lines cut, duplicated and dropped."""
    lines = []
    for rec in VALID:
        rec = dict(rec)
        for _ in range(draw(st.integers(0, 2))):
            key = draw(st.sampled_from(sorted(rec) + ["extra"]))
            rec[key] = draw(JSONISH)
        line = json.dumps(rec)
        how = draw(st.sampled_from(["keep", "keep", "cut", "twice", "drop", "nul"]))
        if how == "cut":
            line = line[:draw(st.integers(0, len(line)))]
        elif how == "twice":
            lines.append(line)
        elif how == "drop":
            continue
        elif how == "nul":
            line = "\0" * draw(st.integers(1, 20))
        lines.append(line)
    return lines


@FUZZ
@given(journal_lines())
def test_journal_replay_never_fails_and_keeps_its_invariants(lines):
    state = replay(lines)
    ids = [e.id for e in state.entries]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    assert all(g in state.groups for g in state.undo + state.redo)
    assert state.next_id > max(ids, default=0)
    assert all("\n" not in p for p in state.problems)


ARGV_WORDS = ["irq", "rps", "xps", "rfs", "qdisc", "txqueuelen", "mtu", "bql", "sysctl", "coalesce", "lo", "eth0",
              ".", "..", "0", "1", "all", "spread", "hint", "numa", "-5", "²", "0-4294967295", "0x0", "none", "",
              "limit_max", "pfifo", "limit=5", "tbf", "rate=1e400", "net.core.netdev_budget", "9" * 400, "1_000"]


@settings(derandomize=True, max_examples=300, deadline=None, database=None)
@given(st.lists(st.sampled_from(ARGV_WORDS) | st.text(alphabet=HOSTILE, max_size=6), min_size=1, max_size=5))
def test_set_lines_are_planned_or_refused_in_one_line(words):
    """The TUI's set line and the CLI share this path; plan() only reads the host."""
    from nettop.tui.tuning import parse_set  # noqa: F401  (the TUI's entry, same parser)

    t = Tuner(Journal("/nonexistent/never-written.jsonl"), read_only="fuzz: never applies")
    try:
        plans = t.plan(parse_set(" ".join(_quote(w) for w in words)))
    except ActionError as exc:
        assert "\n" not in str(exc).strip()
        return
    assert all(p.text for p in plans)


def _quote(w: str) -> str:
    import shlex

    return shlex.quote(w)
