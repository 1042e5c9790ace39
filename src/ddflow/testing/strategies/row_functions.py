"""Row functions of random plans: record functions for ``map`` and ``flat_map``
(:class:`MapColumns`, :class:`FlatMapColumns`), group functions for ``reduce``
(:class:`GroupSize`, :class:`DistinctValues`, :class:`LeastValue`, :class:`OddValues`) and
multiplicity functions for ``threshold`` (:class:`Clamp`, :class:`Scale`, :class:`Halve`,
:class:`Abs`).

Plans use these instead of lambdas so that their code can be printed and run again, and pickled
for Spark's Python workers. Each is a deterministic function of its arguments, and a function of
records as equal records compare (the same for 0.0 and -0.0, and for NaNs); its ``repr`` is the
code that makes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "Abs",
    "Clamp",
    "DistinctValues",
    "FlatMapColumns",
    "GroupSize",
    "Halve",
    "LeastValue",
    "MapColumns",
    "OddValues",
    "Scale",
]


def _wrap(v: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


#: value operations of :class:`MapColumns`: name -> (function of a non-null value, finite)
#: where finite means that applying the operations again and again to a value reaches finitely
#: many values
_VALUE_OPS: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "id": (lambda v: v, True),
    "null": (lambda v: None, True),
    "neg64": (lambda v: _wrap(-v, 64), True),
    "neg32": (lambda v: _wrap(-v, 32), True),
    "abs64": (lambda v: _wrap(abs(v), 64), True),
    "mod3": (lambda v: v % 3, True),
    "clamp": (lambda v: max(-2, min(2, v)), True),
    "inc64": (lambda v: _wrap(v + 1, 64), False),
    "negf": (lambda v: -v, True),
    "absf": (lambda v: abs(v), True),
    "halff": (lambda v: v / 2, False),
    "not": (lambda v: not v, True),
    "upper": (lambda v: v.upper(), True),
    "rev": (lambda v: v[::-1], True),
    "head": (lambda v: v[:1], True),
    "twice": (lambda v: v + v, False),
    "jan1": (lambda v: v.replace(month=1, day=1), True),
    "midnight": (lambda v: v.replace(hour=0, minute=0, second=0, microsecond=0), True),
}
_OPS_BY_TYPE: dict[str, list[str]] = {
    "int64": ["id", "neg64", "abs64", "mod3", "clamp", "inc64"],
    "int32": ["id", "neg32", "mod3", "clamp"],
    "float64": ["id", "negf", "absf", "halff"],
    "float32": ["id", "negf", "absf"],
    "bool": ["id", "not"],
    "str": ["id", "upper", "rev", "head", "twice"],
    "date": ["id", "jan1"],
    "datetime": ["id", "midnight"],
}


class MapColumns:
    """A record function for ``map``: output column ``j`` is ``op_j(record[i_j])`` for
    ``ops = ((i_0, op_0), (i_1, op_1), ...)``; a null stays null.

    >>> MapColumns(((1, "upper"), (0, "mod3")))((7, "ab"))
    ('AB', 1)
    """

    def __init__(self, ops: tuple[tuple[int, str], ...]) -> None:
        self.ops = tuple(ops)
        self._fns = [(i, _VALUE_OPS[op][0]) for i, op in self.ops]

    def __call__(self, record: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(None if record[i] is None else fn(record[i]) for i, fn in self._fns)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ops!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.ops,))


class FlatMapColumns(MapColumns):
    """A record function for ``flat_map``: :class:`MapColumns`' record, yielded as ``mode``
    says: ``"one"`` once, ``"dup"`` twice, ``"some"`` once if the record's first value is
    truthy (a null, zero, false or empty value is not), ``"both"`` once and, with every
    operation replaced by ``"id"``, once more.

    >>> FlatMapColumns(((0, "neg64"),), "both")((5,))
    [(-5,), (5,)]
    >>> FlatMapColumns(((0, "neg64"),), "some")((0,))
    []
    """

    def __init__(self, ops: tuple[tuple[int, str], ...], mode: str) -> None:
        super().__init__(ops)
        self.mode = mode

    def __call__(self, record: tuple[Any, ...]) -> list[tuple[Any, ...]]:  # type: ignore[override]
        out = super().__call__(record)
        if self.mode == "dup":
            return [out, out]
        if self.mode == "some":
            return [out] if record[0] else []
        if self.mode == "both":
            return [out, tuple(record[i] for i, _ in self.ops)]
        return [out]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ops!r}, {self.mode!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.ops, self.mode))


def _order(v: Any) -> tuple[int, Any]:
    """A total order on a column's values: NaN above numbers, null last."""
    if v is None:
        return (2, 0)
    if isinstance(v, float) and math.isnan(v):
        return (1, 0)
    return (0, v)


class GroupSize:
    """A group function for ``reduce``: one row, the group's count (sum of multiplicities).

    >>> GroupSize()(1, [(("a",), 2), (("b",), 1)])
    [(3,)]
    """

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[int]]:
        return [(sum(m for _, m in group),)]

    def __repr__(self) -> str:
        return "GroupSize()"


class DistinctValues:
    """A group function for ``reduce``: one row, the number of distinct records in the group.

    >>> DistinctValues()(1, [(("a",), 2), (("b",), 1)])
    [(2,)]
    """

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[int]]:
        return [(len(group),)]

    def __repr__(self) -> str:
        return "DistinctValues()"


class LeastValue:
    """A group function for ``reduce``: one row, the least value of value column ``i`` (NaN
    above every number, null only if every value is null).

    >>> LeastValue(0)(1, [((2.0,), 1), ((float("nan"),), 1), ((None,), 3)])
    [(2.0,)]
    """

    def __init__(self, i: int) -> None:
        self.i = i

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[Any]]:
        return [(min((vals[self.i] for vals, _ in group), key=_order),)]

    def __repr__(self) -> str:
        return f"LeastValue({self.i})"


class OddValues:
    """A group function for ``reduce``: the group's records of odd multiplicity, one row each.

    >>> OddValues()(1, [(("a",), 2), (("b",), 3)])
    [('b',)]
    """

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[Any, ...]]:
        return [vals for vals, m in group if m % 2 == 1]

    def __repr__(self) -> str:
        return "OddValues()"


class Clamp:
    """A multiplicity function for ``threshold``: ``m`` limited to ``[lo, hi]`` (``lo <= 0 <=
    hi``, so that an absent record stays absent).

    >>> Clamp(0, 1)(5), Clamp(0, 1)(-2)
    (1, 0)
    """

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def __call__(self, m: int) -> int:
        return max(self.lo, min(self.hi, m))

    def __repr__(self) -> str:
        return f"Clamp({self.lo}, {self.hi})"


class Scale:
    """A multiplicity function for ``threshold``: ``k * m``.

    >>> Scale(2)(-3)
    -6
    """

    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, m: int) -> int:
        return self.k * m

    def __repr__(self) -> str:
        return f"Scale({self.k})"


class Halve:
    """A multiplicity function for ``threshold``: ``m // 2`` (rounded towards -inf).

    >>> Halve()(3), Halve()(-1)
    (1, -1)
    """

    def __call__(self, m: int) -> int:
        return m // 2

    def __repr__(self) -> str:
        return "Halve()"


class Abs:
    """A multiplicity function for ``threshold``: ``|m|``.

    >>> Abs()(-2)
    2
    """

    def __call__(self, m: int) -> int:
        return abs(m)

    def __repr__(self) -> str:
        return "Abs()"


_HELPERS: dict[str, Any] = {
    c.__name__: c
    for c in (
        MapColumns,
        FlatMapColumns,
        GroupSize,
        DistinctValues,
        LeastValue,
        OddValues,
        Clamp,
        Scale,
        Halve,
        Abs,
    )
}
