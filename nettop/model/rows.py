"""Many frozen slotted rows at once: one per CPU, from the columns of a parsed file.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__`
(frozen forbids plain assignment), about 1 us for an 11-field `CpuTimes`: at 1,024 CPUs
the rows of /proc/stat cost more than reading and converting its numbers. `build` makes
the same objects column by column instead: the empty objects with one C-level `map` of
`object.__new__`, then each field with one `map` of its slot's own setter over the
whole column (the slot descriptor's `__set__`, which is what `object.__setattr__` ends
in), ~3x less. The objects are the ones the class's `__init__` would make, field for
field: `build` goes by column only for classes whose `__init__` is the generated one
and sets every field and nothing else (every field an init field, every slot a field, no
`__post_init__`); any other class is called row by row, as before, so a check added to a
model class later is never skipped.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from typing import Any, Callable, Sequence, TypeVar, cast

T = TypeVar("T")

_SETTERS: dict[type, tuple[Callable[[Any, Any], None], ...] | None] = {}


def _setters(cls: type) -> tuple[Callable[[Any, Any], None], ...] | None:
    """The slot setters of `cls`'s fields, in `__init__`'s order; None when the class's
    `__init__` may do more than set its fields."""
    if cls in _SETTERS:
        return _SETTERS[cls]
    got: tuple[Callable[[Any, Any], None], ...] | None = None
    if dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        fields = dataclasses.fields(cls)
        names = tuple(f.name for f in fields)
        code = getattr(cls.__init__, "__code__", None)
        if (getattr(cls, "__slots__", None) == names and not hasattr(cls, "__post_init__")
                and all(f.init for f in fields) and getattr(code, "co_filename", None) == "<string>"
                and not any(getattr(base, "__slots__", ()) for base in cls.__mro__[1:])):
            got = tuple(getattr(cls, name).__set__ for name in names)
    _SETTERS[cls] = got
    return got


def build(cls: type[T], *columns: Sequence[Any]) -> list[T]:
    """[cls(*row) for row in zip(*columns)], every field given and every column as long:
    the same objects, made column by column where the class allows (see above)."""
    n = len(columns[0])
    if any(len(col) != n for col in columns):
        raise ValueError("columns of different lengths")
    setters = _setters(cls)
    if setters is None:
        return list(map(cls, *columns))
    if len(columns) != len(setters):
        raise TypeError(f"{cls.__name__} has {len(setters)} fields, {len(columns)} columns given")
    objs: list[T] = list(map(object.__new__, itertools.repeat(cls, n)))
    for setter, col in zip(setters, columns):
        deque(map(setter, objs, col), maxlen=0)
    return objs


def quick_init(cls: type[T]) -> type[T]:
    """Give a frozen slotted dataclass an `__init__` that sets each field with its slot's
    setter (bound where the function finds it at once) instead of `object.__setattr__`,
    which looks the attribute up on the class each time: the same signature (defaults and
    factories included), the same object, ~40 % fewer instructions (a sampler tick makes
    some forty: each setting read again is stamped anew, 8,000 instructions for a
    7-field `QueueConfig`). Only where `build` would go by column (its `__init__` sets
    every field and nothing else, no keyword-only field); any other class is left as is.
    Use after `@dataclass`; the class is returned."""
    setters = _setters(cls)
    fields = dataclasses.fields(cast(Any, cls)) if setters is not None else ()
    if setters is None or any(f.kw_only for f in fields):
        return cls
    ns: dict[str, Any] = {"_FACTORY": _FACTORY}
    params, body = [], []
    for i, f in enumerate(fields):
        ns[f"_s{i}"] = setters[i]
        if f.default_factory is not dataclasses.MISSING:
            ns[f"_f{i}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"    _s{i}(self, _f{i}() if {f.name} is _FACTORY else {f.name})")
        elif f.default is not dataclasses.MISSING:
            ns[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
            body.append(f"    _s{i}(self, {f.name})")
        else:
            params.append(f.name)
            body.append(f"    _s{i}(self, {f.name})")
    exec(f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"]) + "\n", ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)
    _SETTERS.pop(cls, None)  # looked at again with the new __init__ (the same answer)
    return cls


class _Factory:
    """The default of a field made by its factory (`quick_init`)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = _Factory()
