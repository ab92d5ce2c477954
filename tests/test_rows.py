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


def _reference(cls: type) -> type:
    """The same fields as `cls` in a frozen slotted dataclass of dataclasses' own making."""
    import dataclasses as dc

    return dc.make_dataclass(f"Ref{cls.__name__}", [(f.name, object, f) for f in dc.fields(cls)],
                             frozen=True, slots=True)


def test_quick_init_makes_every_snapshot_class_as_its_dataclass_init_would():
    """Each snapshot class's quick `__init__` (model/rows.py) takes the same arguments,
    positional or by name, with the same defaults, a fresh value from each factory, and
    refuses what the dataclass's would; the objects are equal field for field."""
    import dataclasses as dc
    import inspect

    import nettop.model.snapshot as snapshot

    classes = [c for c in vars(snapshot).values()
               if isinstance(c, type) and dc.is_dataclass(c) and c.__module__ == snapshot.__name__]
    assert len(classes) >= 19
    for cls in classes:
        ref = _reference(cls)
        fields = dc.fields(cls)
        assert cls.__init__.__code__.co_filename == "<string>" and "_s0" in cls.__init__.__code__.co_names
        assert [(p.name, p.kind) for p in inspect.signature(cls.__init__).parameters.values()][1:] == \
            [(p.name, p.kind) for p in inspect.signature(ref.__init__).parameters.values()][1:]
        values = [object() for _ in fields]
        by_position, by_name = cls(*values), cls(**{f.name: v for f, v in zip(fields, values)})
        for obj in (by_position, by_name):
            assert [getattr(obj, f.name) for f in fields] == values
        required = [f for f in fields if f.default is dc.MISSING and f.default_factory is dc.MISSING]
        bare, other, want = cls(*values[:len(required)]), cls(*values[:len(required)]), ref(*values[:len(required)])
        for f in fields[len(required):]:
            assert getattr(bare, f.name) == getattr(want, f.name)
            if f.default_factory is not dc.MISSING:
                assert getattr(bare, f.name) is not getattr(other, f.name)  # a fresh one each
        with pytest.raises(TypeError):
            cls(*values, object())
        if required:
            with pytest.raises(TypeError):
                cls(*values[:len(required) - 1])
        with pytest.raises(dc.FrozenInstanceError):
            setattr(by_position, fields[0].name, 1)
        assert by_position == by_name and repr(by_position) == repr(by_name)
