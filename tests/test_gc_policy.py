"""The collector's pace for the sampling modes (nettop/pipeline/gc_policy.py)."""

from __future__ import annotations

import gc

import pytest

from nettop import cli
from nettop.pipeline import gc_policy


@pytest.fixture
def thresholds():
    was = gc.get_threshold()
    yield was
    gc.set_threshold(*was)


def test_long_runs_raise_the_young_threshold_and_keep_the_older_factors(thresholds):
    gc.set_threshold(700, 7, 9)
    gc_policy.for_long_runs()
    assert gc.get_threshold() == (gc_policy.YOUNG, 7, 9)
    gc.set_threshold(50_000, 10, 10)  # an embedder's higher one stays
    gc_policy.for_long_runs()
    assert gc.get_threshold() == (50_000, 10, 10)
    gc.set_threshold(0, 10, 10)  # collection switched off stays off
    gc_policy.for_long_runs()
    assert gc.get_threshold()[0] == 0


@pytest.mark.parametrize("argv, long", [([], True), (["record", "--output", "x.nettop"], True),
                                        (["replay", "x.nettop"], True), (["serve"], True),
                                        (["snapshot"], False), (["doctor"], False), (["journal"], False)])
def test_the_sampling_modes_take_the_policy_and_one_shot_commands_do_not(monkeypatch, thresholds, argv, long):
    gc.set_threshold(700, 10, 10)
    for name in ("cmd_live", "cmd_record", "cmd_recording", "cmd_snapshot", "cmd_snapshot_captured"):
        monkeypatch.setattr(cli, name, lambda *a, **k: 0)
    from nettop.serve import cli as serve_cli
    from nettop.doctor import cli as doctor_cli
    from nettop.actions import cli_set
    monkeypatch.setattr(serve_cli, "run", lambda *a, **k: 0)
    monkeypatch.setattr(doctor_cli, "run", lambda *a, **k: 0)
    monkeypatch.setattr(cli_set, "run", lambda *a, **k: 0)
    assert cli.main(argv) == 0
    assert (gc.get_threshold()[0] == gc_policy.YOUNG) == long
