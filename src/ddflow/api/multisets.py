"""Naiad's multiset operators over two collections: ``union``, ``intersect`` and ``cogroup``
(naiad-tech-report, Appendix A), built from the differential operators.

For two collections ``A`` and ``B`` of one schema, at every time ``t`` and for every record
``r`` (``A_t(r)``: its multiplicity in ``A`` at ``t``, never negative for tables)::

    union(A, B)_t(r)     = max(A_t(r), B_t(r))
    intersect(A, B)_t(r) = min(A_t(r), B_t(r))

Both follow from one non-linear collection, the positive part of the difference,
``D = max(A - B, 0)`` (a ``threshold`` of ``A - B``): ``max(a, b) = b + max(a - b, 0)`` and
``min(a, b) = a - max(a - b, 0)``. So a change of ``A`` or ``B`` costs one reduce step over the
records it touches.

``cogroup(A, B, fn)`` calls ``fn(key, left, right)`` for every key whose group is non-empty on
either side (Naiad's CoGroupBy): ``left`` and ``right`` are the ``(values, multiplicity)`` of the
key's records of positive multiplicity on each side (values: the non-key columns), and ``fn``
returns the output rows. The two sides are tagged and concatenated, then grouped by key: a reduce
over the key's whole group, so its output is kept exact as either side changes.

>>> import ddflow as dd
>>> flow = dd.Dataflow()
>>> a = flow.input("a", schema={"x": "int64"})
>>> b = flow.input("b", schema={"x": "int64"})
>>> both, either = a.intersect(b).output(), a.union(b).output()
>>> a.insert([1, 1, 2]); b.insert([1, 3]); flow.advance_to(1); flow.run()
>>> both.snapshot().to_dict("list"), either.snapshot().to_dict("list")
({'x': [1], 'count': [1]}, {'x': [1, 2, 3], 'count': [2, 1, 1]})
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ddflow.api.collection import _base_types
from ddflow.errors import CallSite, GraphError, SchemaError
from ddflow.expr.nodes import col, lit

if TYPE_CHECKING:
    from ddflow.api.collection import Collection

__all__ = ["cogroup", "intersect", "union"]


def _prefix(taken: Iterable[str]) -> str:
    """A prefix for a cogroup's own columns that starts none of ``taken`` (the keys')."""
    prefix = "cogroup_"
    while any(n.startswith(prefix) for n in taken):
        prefix = "_" + prefix
    return prefix


def _positive_part(m: int) -> int:
    return m if m > 0 else 0


def _difference(a: Collection, b: Collection, what: str, site: CallSite | None) -> Collection:
    """``max(a - b, 0)``, record by record, after checking that the schemas agree."""
    if _base_types(a.schema) != _base_types(b.schema):
        raise SchemaError(f"{what} of different schemas: {a.schema} and {b.schema}", site=site)
    return a.concat(b.negate()).threshold(_positive_part)


def union(a: Collection, b: Collection, site: CallSite | None) -> Collection:
    """``max(a, b)`` record by record (see the module)."""
    return b.concat(_difference(a, b, "union", site))


def intersect(a: Collection, b: Collection, site: CallSite | None) -> Collection:
    """``min(a, b)`` record by record (see the module)."""
    return a.concat(_difference(a, b, "intersect", site).negate())


class _CoGroup:
    """The reduce function of a cogroup: splits a key's tagged group by side and calls the
    user's function with the two groups."""

    def __init__(self, fn: Callable[..., Iterable[Any]], n_left: int, n_right: int) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.n_left = n_left
        self.n_right = n_right

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> Iterable[Any]:
        left: list[tuple[tuple[Any, ...], int]] = []
        right: list[tuple[tuple[Any, ...], int]] = []
        nl = self.n_left
        for values, m in group:
            if values[0] == 0:
                left.append((values[1 : 1 + nl], m))
            else:
                right.append((values[1 + nl :], m))
        return self.fn(key, left, right)


def cogroup(
    a: Collection,
    b: Collection,
    fn: Callable[..., Iterable[Any]],
    schema: Mapping[str, Any],
    left_keys: Sequence[str],
    right_keys: Sequence[str],
    site: CallSite | None,
) -> Collection:
    """``fn(key, left, right)`` over the groups of both sides (see the module); the output
    has ``a``'s key columns, then ``schema``'s."""
    if not callable(fn):
        raise GraphError(f"cogroup needs a function, got {fn!r}", site=site)
    left_values = [n for n in a.schema.names if n not in left_keys]
    right_values = [n for n in b.schema.names if n not in right_keys]
    # one layout for both sides: the keys (typed as the left's), the side, the left's values
    # and the right's, each null on the other side
    keys = {k: a.schema[k] for k in left_keys}
    p = _prefix(left_keys)
    side = f"{p}side"  # 0: left, 1: right
    lv = {f"{p}l{i}": a.schema[n].with_nullable(True) for i, n in enumerate(left_values)}
    rv = {f"{p}r{i}": b.schema[n].with_nullable(True) for i, n in enumerate(right_values)}

    def null(dt: Any) -> Any:
        return lit(None, dtype=str(dt))

    left = a.select(
        **{k: col(k) for k in left_keys},
        **{side: lit(0, dtype="int64")},
        **{c: col(n) for c, n in zip(lv, left_values, strict=True)},
        **{c: null(dt) for c, dt in rv.items()},
    )
    right = b.select(
        **{k: col(r).cast(str(keys[k])) for k, r in zip(left_keys, right_keys, strict=True)},
        **{side: lit(1, dtype="int64")},
        **{c: null(dt) for c, dt in lv.items()},
        **{c: col(n) for c, n in zip(rv, right_values, strict=True)},
    )
    reducer = _CoGroup(fn, len(left_values), len(right_values))
    return left.concat(right).group_by(*left_keys).reduce(reducer, schema)
