"""Aggregates for ``group_by(...).agg(name=...)``: what each computes over a group, and the
type of its column.

Every aggregate ranges over a group's records with their multiplicities: ``count`` and ``sum``
weight by them (so that a retraction subtracts), ``min``/``max`` and ``top_k``/``arg_max`` range
over the records whose multiplicity in the group is positive, and ``mean`` is ``sum / count``.
A group yields a row only while its count is positive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddflow.errors import GraphError, call_site
from ddflow.schema import Schema

__all__ = ["Agg", "arg_max", "count", "max", "mean", "min", "sum", "top_k"]


@dataclass(frozen=True)
class Agg:
    """An aggregate for ``group_by(...).agg(name=...)``: its kind, the column it reads, and
    for :func:`top_k` / :func:`arg_max` how many values (``k``) and the ordering column
    (``by``)."""

    kind: str
    column: str | None
    k: int | None = None
    by: str | None = None


def count() -> Agg:
    """The number of records in the group (the sum of their multiplicities).

    >>> count()
    Agg(kind='count', column=None, k=None, by=None)
    """
    return Agg("count", None)


def sum(column: str) -> Agg:
    """The sum of a numeric column over the group, weighted by multiplicity.

    >>> sum("w")
    Agg(kind='sum', column='w', k=None, by=None)
    """
    return Agg("sum", column)


def min(column: str) -> Agg:
    """The smallest value of a column among the group's records.

    >>> min("w").kind
    'min'
    """
    return Agg("min", column)


def max(column: str) -> Agg:
    """The largest value of a column among the group's records.

    >>> max("w").kind
    'max'
    """
    return Agg("max", column)


def top_k(column: str, k: int, by: str | None = None) -> Agg:
    """The values of ``column`` in the group's ``k`` top records, as a list: records ordered
    by ``by`` from the largest (by ``column`` itself when ``by`` is None), ties broken by
    the value, smallest first.

    A record counts as many times as its multiplicity (records of positive multiplicity
    only, as for :func:`min`); records with a null value or a null ``by`` are skipped; NaN
    is the largest float, ``-0.0`` equals ``0.0``. The result is a ``list[T]`` column (``T``
    the column's type), shorter than ``k`` when the group has fewer records, empty when it
    has none that count. It is maintained incrementally like every aggregate: a retraction
    of the leader promotes the runner-up.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> tags = flow.input("tags", schema={"team": "str", "tag": "str", "uses": "int64"})
    >>> top = tags.group_by("team").agg(top=dd.top_k("tag", 2, by="uses")).output()
    >>> tags.insert([("a", "#x", 5), ("a", "#y", 9), ("a", "#z", 5)])
    >>> flow.advance_to(1); flow.run()
    >>> top.snapshot()["top"].tolist()
    [['#y', '#x']]
    >>> tags.remove([("a", "#y", 9)]); flow.advance_to(2); flow.run()
    >>> top.snapshot()["top"].tolist()
    [['#x', '#z']]
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise GraphError(f"top_k needs a positive integer k, got {k!r}", site=call_site())
    return Agg("top_k", column, k, by)


def arg_max(column: str, by: str) -> Agg:
    """The value of ``column`` in the group's record with the largest ``by``, ties broken by
    the smallest value: the first element of :func:`top_k` ``(column, 1, by)``, or null when
    no record counts.

    >>> arg_max("tag", by="uses")
    Agg(kind='arg_max', column='tag', k=1, by='uses')
    """
    return Agg("arg_max", column, 1, by)


def mean(column: str) -> Agg:
    """The mean of a numeric column over the group (``sum / count``).

    >>> mean("w").column
    'w'
    """
    return Agg("mean", column)


def agg_type(a: Agg, schema: Schema) -> Any:
    if a.kind == "count":
        return "int64"
    assert a.column is not None
    dt = schema[a.column]
    if a.kind == "mean":
        return "float64"
    if a.kind == "sum":
        return "int64" if dt.kind in ("int", "bool") else "float64"
    if a.kind == "top_k":
        return f"list[{dt.name}]"
    if a.kind == "arg_max":
        assert a.by is not None
        return dt.with_nullable(dt.nullable or schema[a.by].nullable)
    # min/max skip nulls: a group whose values are all null has a null min and max
    return dt
