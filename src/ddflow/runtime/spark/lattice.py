"""The lattice of times as Spark column expressions (the Spark twin of the Polars expressions
in :mod:`ddflow.runtime.local.kernels`, and of :class:`ddflow.timely.lattice.TimeType`'s
scalar order).

A time is stored in columns ``__t0 .. __t{w-1}``; a lexicographic coordinate is two adjacent
columns ``(priority, iteration)``. Every expression here is linear in the size of its inputs:
a lexicographic pair is compared as a Spark ``struct`` (structs order lexicographically), so
that a meet of many joins (``advance_by``) never repeats a subexpression.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from ddflow.timely.lattice import Time, TimeType

__all__ = [
    "advance_columns",
    "at_times",
    "join_columns",
    "le_column",
    "time_columns",
    "time_columns_of",
]


def time_columns(tt: TimeType, prefix: str = "__t") -> list[str]:
    """The names of a time's columns (``__q0 ..`` with ``prefix="__q"``).

    >>> from ddflow.timely.lattice import TimeType
    >>> time_columns(TimeType(("product", "lexicographic")), "__q")
    ['__q0', '__q1', '__q2']
    """
    return [f"{prefix}{i}" for i in range(tt.width)]


def time_columns_of(columns: Sequence[str]) -> list[str]:
    """The time columns among a batch's columns, in order.

    >>> time_columns_of(["x", "__t1", "__t0", "__diff"])
    ['__t0', '__t1']
    """
    found = [c for c in columns if c.startswith("__t") and c[3:].isdigit()]
    return sorted(found, key=lambda c: int(c[3:]))


def _coordinates(tt: TimeType, cols: Sequence[Column]) -> list[Column]:
    """One column per coordinate: the integer, or a ``struct`` of a lexicographic pair."""
    out: list[Column] = []
    i = 0
    while i < tt.width:
        if i in tt.pair_starts:
            out.append(F.struct(cols[i].alias("p"), cols[i + 1].alias("i")))
            i += 2
        else:
            out.append(cols[i])
            i += 1
    return out


def _flatten(tt: TimeType, coords: Sequence[Column], names: Sequence[str]) -> list[Column]:
    """Coordinate columns back to the time's integer columns, named ``names``."""
    out: list[Column] = []
    i = 0
    for c in coords:
        if i in tt.pair_starts:
            out += [c.getField("p").alias(names[i]), c.getField("i").alias(names[i + 1])]
            i += 2
        else:
            out.append(c.alias(names[i]))
            i += 1
    return out


def le_column(tt: TimeType, a: Sequence[str], b: Sequence[str]) -> Column:
    """The time in columns ``a`` is ``<=`` the time in columns ``b``."""
    ca = _coordinates(tt, [F.col(c) for c in a])
    cb = _coordinates(tt, [F.col(c) for c in b])
    return functools.reduce(operator.and_, [x <= y for x, y in zip(ca, cb, strict=True)])


def join_columns(
    tt: TimeType, a: Sequence[Column], b: Sequence[Column], out: Sequence[str]
) -> list[Column]:
    """The least upper bound of times ``a`` and ``b``, as columns named ``out``."""
    ca, cb = _coordinates(tt, a), _coordinates(tt, b)
    return _flatten(tt, [F.greatest(x, y) for x, y in zip(ca, cb, strict=True)], out)


def advance_columns(tt: TimeType, cols: Sequence[str], frontier: Sequence[Time]) -> list[Column]:
    """``advance_by(t, frontier)``: the meet over ``f`` in the frontier of ``join(t, f)``,
    coordinate by coordinate (the lattice is a product of chains), named ``cols``."""
    t = _coordinates(tt, [F.col(c) for c in cols])
    fs = [_coordinates(tt, [F.lit(v).cast("bigint") for v in f]) for f in frontier]
    coords = []
    for i, x in enumerate(t):
        joins = [F.greatest(x, f[i]) for f in fs]
        coords.append(joins[0] if len(joins) == 1 else F.least(*joins))
    return _flatten(tt, coords, cols)


def at_times(cols: Sequence[str], times: Sequence[Time]) -> Column:
    """The time in ``cols`` is one of ``times``."""
    return F.struct(*[F.col(c) for c in cols]).isin(
        [
            F.struct(*[F.lit(v).cast("bigint").alias(c) for c, v in zip(cols, t, strict=True)])
            for t in times
        ]
    )
