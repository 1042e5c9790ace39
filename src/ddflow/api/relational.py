"""Outer joins and a collection-wide sort and limit, built from the differential operators.

*Outer joins.* For collections ``L`` and ``R`` joined on keys, with ``L ⋈ R`` the inner join
(each pair of records with equal non-null keys, of multiplicity the product of theirs)::

    left join  = L ⋈ R  +  (L ▷ R) × nulls(R's other columns)
    outer join = left join  +  (R ▷ L) × nulls(L's other columns), keys from R's

where ``L ▷ R`` is the antijoin: the records of ``L`` whose key has no record of positive
multiplicity in ``R``. So a record without a match appears once per copy, its other side's
columns null, as in pandas and Polars; a null key matches nothing (as in SQL, and as
``join`` does), so a record with a null key is always unmatched. An outer join's key columns
hold the key of whichever side has it (Polars' ``coalesce=True``; pandas' ``on=``). Each part
is maintained differentially: a change costs the inner join's, the semijoin's distinct and
the antijoin's work for the keys it touches.

*Sort and limit.* ``order_by(*columns).limit(n)`` is the ``n`` first records of the collection
in that order, counting each record as many times as its multiplicity (records of positive
multiplicity only), ties broken by the other columns in ascending order, so the result is one
multiset. Nulls come last in either direction; a float NaN is the largest value, after every
number ascending and before them descending. It is maintained as a two-level tournament (as
differential dataflow's hierarchical aggregations): each record is hashed to one of
:data:`BUCKETS` buckets, a reduce keeps each bucket's first ``n``, and a second reduce keeps the
first ``n`` of those (a record's bucket is a checksum of its values, computed in Python: the
same in every process, runtime and version). A change re-sorts its bucket and the candidates
(at most ``BUCKETS * n`` records), not the collection.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ddflow.errors import CallSite, GraphError, SchemaError
from ddflow.expr.nodes import Expr, col, lit

if TYPE_CHECKING:
    from ddflow.api.collection import Collection

__all__ = ["BUCKETS", "Ordered", "outer_join"]

#: how many buckets the first level of a sort and limit splits a collection into
BUCKETS = 256
#: the columns of a sort and limit's levels: a record's bucket, and the one group of all
_BUCKET, _ALL = "_ddflow_bucket", "_ddflow_all"


def outer_join(
    left: Collection,
    right: Collection,
    inner: Collection,
    lk: list[str],
    rk: list[str],
    output: Sequence[tuple[str, str, str]],
    how: str,
) -> Collection:
    """The left (``how="left"``) or full outer (``"outer"``) join of ``left`` and ``right``
    on ``lk``/``rk``, from their inner join ``inner`` (whose columns ``output`` lists: side,
    source column, output name; see the module)."""
    right_only = {name: lit(None, right.schema[c]) for side, c, name in output if side == "r"}
    unmatched = left.antijoin(right, left_on=lk, right_on=rk)
    if right_only:  # (none where the right side has only its keys)
        unmatched = unmatched.with_columns(**right_only)
    result = inner.concat(unmatched)
    if how == "left":
        return result
    columns: dict[str, Expr] = {}
    for c in left.schema.names:
        if c in lk:  # (the key: the right record's, in the left column's type)
            columns[c] = col(rk[lk.index(c)]).cast(left.schema[c].with_nullable(True))
        else:
            columns[c] = lit(None, left.schema[c])
    for side, c, name in output:
        if side == "r":
            columns[name] = col(c)
    return result.concat(right.antijoin(left, left_on=rk, right_on=lk).select(**columns))


class Ordered:
    """A collection and an order of its records (``collection.order_by(...)``), waiting for
    :meth:`limit`."""

    def __init__(
        self,
        collection: Collection,
        by: list[str],
        descending: list[bool],
        site: CallSite | None,
    ) -> None:
        self.collection, self.by, self.descending, self.site = collection, by, descending, site

    def limit(self, n: int) -> Collection:
        """The ``n`` first records in this order (see the module), as a collection of the
        same schema, kept exact as the collection changes.

        >>> import ddflow as dd
        >>> flow = dd.Dataflow()
        >>> scores = flow.input("scores", schema={"name": "str", "points": "int64"})
        >>> best = scores.order_by("points", descending=True).limit(2).output()
        >>> scores.insert([("ann", 5), ("bob", 9), ("cy", 7), ("dee", 7)])
        >>> flow.advance_to(1); flow.run()
        >>> best.snapshot().sort_values("points").to_dict("list")
        {'name': ['cy', 'bob'], 'points': [7, 9], 'count': [1, 1]}
        >>> scores.remove([("bob", 9)]); flow.advance_to(2); flow.run()
        >>> best.snapshot().sort_values("name").to_dict("list")
        {'name': ['cy', 'dee'], 'points': [7, 7], 'count': [1, 1]}
        """
        site = self.site
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise GraphError(f"limit(n) needs a positive integer n, got {n!r}", site=site)
        c = self.collection
        names = list(c.schema.names)
        for reserved in (_BUCKET, _ALL):
            if reserved in names:
                raise SchemaError(
                    f"order_by(...).limit: column {reserved!r} is a name it uses itself",
                    site=site,
                )
        first = _FirstN(names, self.by, self.descending, n)
        schema = {name: c.schema[name] for name in names}
        bucketed = c.map(_bucket, schema={**schema, _BUCKET: "int64"})
        level = bucketed.group_by(_BUCKET).reduce(first, schema)
        top = level.select(*names).with_columns(**{_ALL: lit(0, "int64")})
        top = top.group_by(_ALL).reduce(first, schema)
        return top.select(*names)


def _bucket(record: tuple[Any, ...]) -> tuple[Any, ...]:
    """The record and its bucket: a checksum of its values, the same in every process and
    runtime (Python's ``hash`` of a string is not), -0.0 as 0.0 (the same record)."""
    values = tuple(v + 0.0 if isinstance(v, float) else v for v in record)
    return (*record, zlib.crc32(repr(values).encode()) % BUCKETS)


class _FirstN:
    """The reduce function of a level: a group's ``n`` first records (each as many times as
    its multiplicity, up to ``n``), in the order of ``by``, then of every column ascending.
    (An object, not a closure: it is sent to worker processes.)"""

    def __init__(self, names: list[str], by: list[str], descending: list[bool], n: int) -> None:
        self.order = [(names.index(b), d) for b, d in zip(by, descending, strict=True)]
        self.n = n

    def __call__(self, _key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[Any]:
        # stable sorts, the last decisive: every column ascending (the ties' order), then the
        # order's columns from the last to the first
        ranked = sorted(group, key=lambda vc: tuple(map(_ascending, vc[0])))
        for p, desc in reversed(self.order):
            if desc:
                ranked.sort(key=lambda vc: _descending(vc[0][p]), reverse=True)
            else:
                ranked.sort(key=lambda vc: _ascending(vc[0][p]))
        out: list[tuple[Any, ...]] = []
        for values, count in ranked:
            out += [values] * min(count, self.n - len(out))
            if len(out) >= self.n:
                break
        return out


def _ascending(v: Any) -> tuple[Any, ...]:
    """A value's sort key, ascending: values, then NaN, then nulls; a list element by element,
    a prefix first."""
    if v is None:
        return (2,)
    if isinstance(v, float) and math.isnan(v):
        return (1,)
    if isinstance(v, list):
        return (0, tuple(map(_ascending, v)))
    return (0, v)


def _descending(v: Any) -> tuple[Any, ...]:
    """A value's sort key for a reversed sort: NaN first, then values from the largest, then
    nulls (the order's columns are never lists)."""
    if v is None:
        return (0,)
    if isinstance(v, float) and math.isnan(v):
        return (2,)
    return (1, v)
