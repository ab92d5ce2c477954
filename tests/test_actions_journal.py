"""The journal replayed: undo/redo stacks, originals across groups, torn last lines, clean epochs."""

from __future__ import annotations

import json

from nettop.actions.journal import replay


def begin(i, g, key, before, value, action="set", ref=None):
    """A begin record of txqueuelen on interface `key` (originals() keys it "txqueuelen KEY")."""
    return json.dumps({"op": "begin", "id": i, "group": g, "action": action, "ref": ref, "t": 1.0,
                       "setting": {"kind": "txqueuelen", "params": {"ifname": key}},
                       "key": f"txqueuelen {key}", "before": before, "value": value})


def end(i, after, error=None):
    return json.dumps({"op": "end", "id": i, "after": after, "verified": error is None, "error": error})


def group(g, action="set", ref=None):
    return json.dumps({"op": "group", "group": g, "action": action, "ref": ref})


def test_originals_are_the_first_before_of_each_key_and_stacks_follow_groups():
    lines = [begin(1, 1, "a", 10, 20), end(1, 20), group(1),
             begin(2, 2, "a", 20, 30), end(2, 30), begin(3, 2, "b", 1, 2), end(3, 2), group(2),
             begin(4, 3, "a", 30, 20, "undo", 2), end(4, 20), group(3, "undo", 2)]
    st = replay(lines)
    assert {k: e.before for k, e in st.originals().items()} == {"txqueuelen a": 10, "txqueuelen b": 1}
    assert st.undo == [1] and st.redo == [2]
    assert st.next_id == 5 and st.next_group == 4


def test_torn_last_line_is_ignored_and_unfinished_write_is_pending():
    lines = [begin(1, 1, "a", 10, 20), end(1, 20), group(1), begin(2, 2, "a", 20, 30), '{"op": "end", "id"']
    st = replay(lines)
    assert st.torn == 1
    assert [e.id for e in st.pending()] == [2]
    assert st.originals()["txqueuelen a"].before == 10


def test_clean_starts_a_new_epoch_but_ids_keep_growing():
    lines = [begin(1, 1, "a", 10, 20), end(1, 20), group(1), json.dumps({"op": "clean"}),
             begin(2, 2, "a", 10, 40), end(2, 40), group(2)]
    st = replay(lines)
    assert [e.id for e in st.entries] == [2] and st.undo == [2]
    assert st.originals()["txqueuelen a"].before == 10


def test_new_set_clears_redo():
    lines = [begin(1, 1, "a", 1, 2), end(1, 2), group(1), begin(2, 2, "a", 2, 1, "undo", 1), end(2, 1),
             group(2, "undo", 1), begin(3, 3, "b", 1, 5), end(3, 5), group(3)]
    st = replay(lines)
    assert st.redo == [] and st.undo == [3]


def test_toggle_cpu_flips_one_bit_in_sysfs_form():
    from nettop.actions.rps_xps import toggle_cpu

    assert toggle_cpu("3", 1, 2) == "1"
    assert toggle_cpu("0", 0, 2) == "1"
    assert toggle_cpu("00000000,00000001", 33, 64) == "00000002,00000001"
