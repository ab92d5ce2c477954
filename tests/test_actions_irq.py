"""Moving a harmless real IRQ (virtio0-deflate, the balloon's deflate queue) and back."""

from __future__ import annotations

import errno
import json

import pytest

from nettop.actions import ActionError, Change, Journal, Plan, Tuner
from nettop.actions.tuner import KernelRefused
from nettop.actions.irq import IrqAffinity, parse_cpus, spread


def read(irq: int, name: str = "smp_affinity_list") -> str:
    with open(f"/proc/irq/{irq}/{name}") as f:
        return f.read().strip()


def test_move_irq_to_cpu1_shows_requested_and_effective_then_undo(deflate_irq, tmp_path):
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    before = read(deflate_irq)
    res = t.apply(t.plan([Change(IrqAffinity(deflate_irq), "1")]))
    assert read(deflate_irq) == "1" and res[0].verified
    assert res[0].effective == "effective " + read(deflate_irq, "effective_affinity_list")
    assert res[0].line().endswith(f"({res[0].effective})")
    t.undo()
    assert read(deflate_irq) == before


def test_irq_hex_mask_request(deflate_irq, tmp_path):
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    t.apply(t.plan([Change(IrqAffinity(deflate_irq), "0x1")]))
    assert read(deflate_irq) == "0"
    t.revert_all()


def test_offline_or_missing_cpu_is_refused(deflate_irq, tmp_path):
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    before = read(deflate_irq)
    with pytest.raises(ActionError, match=r"CPU 5 does not exist"):
        t.plan([Change(IrqAffinity(deflate_irq), "5")])
    assert read(deflate_irq) == before


def test_spread_assigns_one_cpu_per_irq_round_robin():
    changes = spread([30, 31, 32], "0-1")
    assert [(c.setting.irq, c.value) for c in changes] == [(30, "0"), (31, "1"), (32, "0")]


@pytest.mark.parametrize("text,cpus", [("0-3,8", (0, 1, 2, 3, 8)), ("f0", (4, 5, 6, 7)), ("0x3", (0, 1)),
                                       ("3", (3,)), ("1,00000000", (32,)), ("0,2", (0, 2))])
def test_parse_cpus_takes_lists_and_masks(text, cpus):
    assert parse_cpus(text, 64) == cpus


@pytest.mark.parametrize("value,err,text", [
    ("5", errno.ERANGE, "wider than this kernel's CPUs (ERANGE)"),
    ("", errno.EINVAL, "holds no online CPU"),
])
def test_kernel_refusal_is_journaled_as_failed_and_changes_nothing(deflate_irq, tmp_path, value, err, text):
    # GIVEN a plan that skipped validation, so the kernel itself answers
    t = Tuner(Journal(str(tmp_path / "j.jsonl")), read_only=None)
    s = IrqAffinity(deflate_irq)
    before = read(deflate_irq)
    plan = Plan(s, before, value, None, f"{s.key}: {before} → {value}")
    # WHEN it is applied
    with pytest.raises(KernelRefused) as exc:
        t.apply([plan])
    # THEN one line names the IRQ and the reason, and host and journal agree nothing changed
    assert str(exc.value).startswith(f"IRQ {deflate_irq}: ") and text in str(exc.value)
    assert read(deflate_irq) == before
    st = t.state()
    assert st.undo == [] and [(e.after, e.verified) for e in st.entries] == [(before, False)]
    assert t.revert_all() == []


def test_cli_set_irq_with_ban_and_no_irqbalance_moves_it_and_says_so(deflate_irq, tmp_path, capsys, monkeypatch):
    from nettop.cli import main

    monkeypatch.setenv("NETTOP_STATE_DIR", str(tmp_path))
    before = read(deflate_irq)
    assert main(["set", "irq", str(deflate_irq), "1", "--ban", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"][0]["after"] == "1"
    assert doc["results"][0]["effective"] == "effective " + read(deflate_irq, "effective_affinity_list")
    assert doc["irqbalance_ban"] is None
    assert any("no running irqbalance" in w for w in doc["warnings"])
    assert main(["revert"]) == 0
    assert read(deflate_irq) == before
