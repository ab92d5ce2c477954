"""Rows made column by column (nettop/model/rows.py) are the objects the class's own
`__init__` makes: equal, same fields, same hash and repr, still frozen; a class whose
`__init__` may do more than set its fields is called row by row, its checks kept."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nettop.model.rows import _setters, build
from nettop.model.snapshot import CpuTimes, SoftnetRow

_U64 = st.integers(0, (1 << 64) - 1)


def _same(made: list, want: list) -> None:
    assert made == want
    for a, b in zip(made, want):
        assert type(a) is type(b)
        assert dataclasses.astuple(a) == dataclasses.astuple(b)
        assert hash(a) == hash(b) and repr(a) == repr(b)
        assert pickle.loads(pickle.dumps(a)) == b
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.cpu = 1  # type: ignore[misc]


@given(st.lists(st.tuples(*[_U64] * 11), max_size=40))
def test_cpu_times_built_by_column_are_those_of_its_init(rows):
    cols = [list(c) for c in zip(*rows)] or [[] for _ in range(11)]
    assert _setters(CpuTimes) is not None  # made by column, not row by row
    _same(build(CpuTimes, *cols), [CpuTimes(*r) for r in rows])


@given(st.lists(st.tuples(*[st.integers(0, (1 << 32) - 1)] * 6, st.none() | st.integers(0, 99),
                          st.booleans()), max_size=40))
def test_softnet_rows_built_by_column_are_those_of_its_init(rows):
    cols = [list(c) for c in zip(*rows)] or [[] for _ in range(8)]
    assert _setters(SoftnetRow) is not None
    _same(build(SoftnetRow, *cols), [SoftnetRow(*r) for r in rows])


def test_every_field_must_be_given_in_columns_of_one_length():
    with pytest.raises(TypeError):
        build(CpuTimes, [0], [1])  # guest and the rest left to defaults: not this path
    with pytest.raises(ValueError):
        build(SoftnetRow, *[[1, 2]] * 7, [True])


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    a: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError(self.a)


@dataclasses.dataclass(frozen=True, slots=True)
class _Derived:
    a: int
    b: int = dataclasses.field(init=False, default=0)


@dataclasses.dataclass(slots=True)
class _Mutable:
    a: int


def test_a_class_whose_init_does_more_than_set_its_fields_is_called_row_by_row():
    with pytest.raises(ValueError):
        build(_Checked, [1, -1])  # its check runs
    assert build(_Derived, [1, 2]) == [_Derived(1), _Derived(2)]
    made = build(_Mutable, [3])
    assert made == [_Mutable(3)]
    made[0].a = 4  # a plain class's own objects
