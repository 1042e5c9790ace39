"""The group functions: a reduce's desired output from its groups' accumulated input.

:data:`GROUP_FUNCTIONS` (one per reduce kind: ``agg_weights``, ``agg``, ``distinct``,
``threshold``, ``reduce``) take the accumulated rows ``keys, __q*, values, __diff, weights`` of
many groups and return the desired output rows ``keys, __q*, outputs, __diff``;
``_ROW_GROUP_FUNCTIONS`` compute the same for one group in Python, for the row path. Both follow
the semantics of the group (:mod:`ddflow.differential.operators.reduce`): a group yields a row
only when its count is positive, ``min``/``max`` range over the values whose multiplicity in the
group is positive, ``top_k``/``arg_max`` order the ``(value, by)`` pairs of positive
multiplicity (each counted that many times) by ``by`` descending then value ascending (NaN the
largest float, ``-0.0`` equal to ``0.0``, nulls skipped), ``distinct`` keeps the records of
positive multiplicity once,
``threshold(fn)`` gives each record the multiplicity ``fn(m)`` and ``reduce(fn)`` sees the rows
of positive multiplicity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.runtime.local.exprs import wrap_int64

if TYPE_CHECKING:
    from ddflow.differential.kernel import ReduceSpec

__all__ = ["GROUP_FUNCTIONS"]


def _cast(value: Any, dtype: Any) -> Any:
    """A Python value as Polars' ``cast`` to ``dtype`` gives it (ints and bools here)."""
    if value is None:
        return None
    if dtype is not None and pl.datatypes.is_polars_dtype(dtype):
        if dtype.is_float():
            return float(value)
        if dtype.is_integer() and not isinstance(value, bool):
            return wrap_int64(int(value)) if dtype == pl.Int64 else int(value)
    return value


def _present(group: Sequence[tuple[tuple[Any, ...], list[Any]]], i: int) -> list[Any]:
    """The non-null values of column ``i`` whose multiplicity, over the rows holding them, is
    positive."""
    per_value: dict[Any, int] = {}
    for v, acc in group:
        x = v[i]
        if x is not None:
            per_value[x] = per_value.get(x, 0) + acc[0]
    return [x for x, m in per_value.items() if m > 0]


def _order_key(x: Any) -> tuple[bool, Any]:
    """A sort key that puts NaN after every other float (Python's ``<`` is false for NaN)."""
    return (isinstance(x, float) and x != x, x)


def _ranked(
    group: Sequence[tuple[tuple[Any, ...], list[Any]]], i: int, j: int, k: int
) -> list[Any]:
    """The values of column ``i`` of the ``k`` top pairs ``(value i, by j)``: each pair
    counted as many times as its multiplicity when that is positive, ordered by ``by``
    descending then value ascending, nulls skipped."""
    per_pair: dict[tuple[Any, Any], int] = {}
    for v, acc in group:
        if v[i] is not None and v[j] is not None:
            pair = (v[i], v[j])
            per_pair[pair] = per_pair.get(pair, 0) + acc[0]
    pairs = sorted(
        ((p, m) for p, m in per_pair.items() if m > 0), key=lambda pm: _order_key(pm[0][0])
    )
    pairs.sort(key=lambda pm: _order_key(pm[0][1]), reverse=True)  # stable: ties keep value order
    out: list[Any] = []
    for (x, _), m in pairs:
        out.extend([x] * min(m, k - len(out)))
        if len(out) >= k:
            break
    return out


def _rows_agg_weights(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    ((_, acc),) = group  # no value columns: one accumulated row
    count = acc[0]
    if count <= 0:
        return []
    weights = dict(zip(spec.weights, acc[1:], strict=True))
    row = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            value: Any = count
        elif kind == "sum":
            value = weights[f"__w_{c}"]
        else:
            value = weights[f"__w_{c}"] / count
        row.append(_cast(value, spec.out_types[name]))
    return [(tuple(row), 1)]


def _rows_agg(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    count = sum(acc[0] for _, acc in group)
    if count <= 0:
        return []
    index = {c: i for i, c in enumerate(spec.values)}
    row = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            value: Any = count
        elif kind in ("sum", "mean"):
            i = index[c]  # type: ignore[index]
            total = sum(v[i] * acc[0] for v, acc in group if v[i] is not None)
            value = total if kind == "sum" else total / count
        elif kind in ("top_k", "arg_max"):
            k, by = spec.rank_of(name)
            top = _ranked(group, index[c], index[by], k)  # type: ignore[index]
            value = top if kind == "top_k" else (top[0] if top else None)
        else:
            present = _present(group, index[c])  # type: ignore[index]
            value = (min if kind == "min" else max)(present) if present else None
        row.append(_cast(value, spec.out_types[name]))
    return [(tuple(row), 1)]


def _rows_distinct(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    return [(v, 1) for v, acc in group if acc[0] > 0]


def _rows_threshold(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    assert spec.fn is not None
    return [(v, int(spec.fn(acc[0]))) for v, acc in group]


def _rows_reduce(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    fn = spec.fn
    assert fn is not None
    rows = sorted(
        ((v, acc[0]) for v, acc in group if acc[0] > 0),
        key=lambda vm: tuple((x is not None, x) for x in vm[0]),
    )
    if not rows:
        return []
    user_key = key[1:]
    out = []
    for o in fn(user_key if len(user_key) != 1 else user_key[0], rows):
        o_t = tuple(o) if isinstance(o, (tuple, list)) else (o,)
        if len(o_t) != len(spec.outputs):
            raise ValueError(
                f"reduce function returned {o_t!r}: expected {len(spec.outputs)} values "
                f"({', '.join(spec.outputs)})"
            )
        out.append(
            (tuple(_cast(x, spec.out_types[n]) for x, n in zip(o_t, spec.outputs, strict=True)), 1)
        )
    return out


# ---------------------------------------------------------------------- group functions
# Each takes accumulated rows (keys, __q*, values, __diff, weights) and returns the desired
# output rows (keys, __q*, outputs, __diff).


def _one() -> pl.Expr:
    return pl.lit(1, dtype=pl.Int64).alias(DIFF)


def _agg_weights(
    spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]
) -> pl.DataFrame:
    acc = acc.filter(pl.col(DIFF) > 0)
    exprs = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            e = pl.col(DIFF)
        elif kind == "sum":
            e = pl.col(f"__w_{c}")
        else:  # mean
            e = pl.col(f"__w_{c}") / pl.col(DIFF)
        exprs.append(e.cast(spec.out_types[name]).alias(name))
    return acc.select([*keys, *qcols, *exprs, _one()])


def _agg(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    """Aggregates that need values. ``count``/``sum``/``mean`` are linear in the rows; ``min``
    and ``max`` of a column range over that column's values whose multiplicity in the group,
    summed over every row holding the value, is positive."""
    group = [*keys, *qcols]
    if len(spec.values) == 1 and not spec.ranked:
        return _agg_one_value(spec, acc, group)
    linear = [pl.col(DIFF).sum().alias("__count")]
    for name, kind, c in spec.aggs:
        if kind in ("count", "sum", "mean"):
            linear.append(_linear(kind, c).cast(spec.out_types[name]).alias(name))
    out = acc.group_by(group).agg(linear).filter(pl.col("__count") > 0)
    for name, kind, c in spec.aggs:
        if kind in ("min", "max"):
            present = acc.group_by([*group, c]).agg(pl.col(DIFF).sum()).filter(pl.col(DIFF) > 0)
            pick = pl.col(c).min() if kind == "min" else pl.col(c).max()
            ext = present.group_by(group).agg(pick.cast(spec.out_types[name]).alias(name))
            out = out.join(ext, on=group, how="left", nulls_equal=True)
        elif kind in ("top_k", "arg_max"):
            out = _with_ranked(spec, acc, group, out, name, kind, c)  # type: ignore[arg-type]
    return out.select([*group, *spec.outputs, _one()])


def _with_ranked(
    spec: ReduceSpec,
    acc: pl.DataFrame,
    group: list[str],
    out: pl.DataFrame,
    name: str,
    kind: str,
    c: str,
) -> pl.DataFrame:
    """``out`` with the ``top_k`` or ``arg_max`` column ``name``: the ``(c, by)`` pairs of
    positive multiplicity, each repeated that many times (at most ``k``), ordered by ``by``
    descending then ``c`` ascending, the first ``k`` values of each group."""
    k, by = spec.rank_of(name)
    pair = [c] if by == c else [c, by]
    present = (
        acc.filter(pl.col(c).is_not_null() & pl.col(by).is_not_null())
        .group_by([*group, *pair])
        .agg(pl.col(DIFF).sum())
        .filter(pl.col(DIFF) > 0)
    )
    copies = present.with_columns(pl.col(c).repeat_by(pl.col(DIFF).clip(upper_bound=k))).explode(c)
    ordered = copies.sort([by, c], descending=[True, False], nulls_last=True, maintain_order=True)
    dtype = spec.out_types[name]
    if kind == "top_k":
        pick = pl.col(c).head(k).cast(dtype.inner)  # each group's values become its list
        filler: Any = pl.lit(pl.Series([[]], dtype=dtype))
    else:
        pick = pl.col(c).first().cast(dtype)
        filler = None
    top = ordered.group_by(group, maintain_order=True).agg(pick.alias(name))
    joined = out.join(top, on=group, how="left", nulls_equal=True)
    return joined if filler is None else joined.with_columns(pl.col(name).fill_null(filler))


def _linear(kind: str, c: str | None) -> pl.Expr:
    """A ``count``, ``sum`` or ``mean`` over accumulated rows (each row's value times its
    multiplicity)."""
    count = pl.col(DIFF).sum()
    if kind == "count":
        return count
    total = (pl.col(c) * pl.col(DIFF)).sum()
    return total if kind == "sum" else total / count


def _agg_one_value(spec: ReduceSpec, acc: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    """:func:`_agg` when the aggregates read one column: ``acc`` (an accumulation) holds one
    row per group and value, so a value's multiplicity is its row's and every aggregate comes
    from one group-by (``min``/``max`` over the rows of positive multiplicity)."""
    (c,) = spec.values
    positive = pl.col(c).filter(pl.col(DIFF) > 0)
    exprs = [pl.col(DIFF).sum().alias("__count")]
    for name, kind, _ in spec.aggs:
        if kind in ("min", "max"):
            e = positive.min() if kind == "min" else positive.max()
        else:
            e = _linear(kind, c)
        exprs.append(e.cast(spec.out_types[name]).alias(name))
    out = acc.group_by(group).agg(exprs).filter(pl.col("__count") > 0)
    return out.select([*group, *spec.outputs, _one()])


def _distinct(
    spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]
) -> pl.DataFrame:
    return acc.filter(pl.col(DIFF) > 0).select([*keys, *qcols, _one()])


def _threshold(
    spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]
) -> pl.DataFrame:
    assert spec.fn is not None
    counts = acc.get_column(DIFF).unique().to_list()
    mapping = {c: int(spec.fn(c)) for c in counts}
    out = acc.with_columns(pl.col(DIFF).replace_strict(mapping, return_dtype=pl.Int64))
    return out.filter(pl.col(DIFF) != 0).select([*keys, *qcols, DIFF])


def _reduce(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    """``fn(key, group)`` in Python, group by group."""
    fn = spec.fn
    assert fn is not None
    values = list(spec.values)
    gcols = [*keys, *qcols]
    acc = acc.filter(pl.col(DIFF) > 0).sort([*gcols, *values])
    nk = len(gcols)
    nkey = len(spec.keys)
    rows: list[tuple[Any, ...]] = []
    current: tuple[Any, ...] | None = None
    group: list[tuple[tuple[Any, ...], int]] = []

    def flush() -> None:
        if current is None or not group:
            return
        user_key = current[1 : 1 + nkey]
        for out in fn(user_key if nkey != 1 else user_key[0], group):
            out_t = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out_t) != len(spec.outputs):
                raise ValueError(
                    f"reduce function returned {out_t!r}: expected {len(spec.outputs)} values "
                    f"({', '.join(spec.outputs)})"
                )
            rows.append((*current, *out_t, 1))

    for row in acc.select([*gcols, *values, DIFF]).iter_rows():
        head = row[:nk]
        if head != current:
            flush()
            current, group = head, []
        group.append((row[nk:-1], row[-1]))
    flush()
    schema = {
        **{c: acc.schema[c] for c in gcols},
        **{n: spec.out_types[n] for n in spec.outputs},
        DIFF: pl.Int64,
    }
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame.group_by([*gcols, *spec.outputs]).agg(pl.col(DIFF).sum())


GROUP_FUNCTIONS = {
    "agg_weights": _agg_weights,
    "agg": _agg,
    "distinct": _distinct,
    "threshold": _threshold,
    "reduce": _reduce,
}

_ROW_GROUP_FUNCTIONS = {
    "agg_weights": _rows_agg_weights,
    "agg": _rows_agg,
    "distinct": _rows_distinct,
    "threshold": _rows_threshold,
    "reduce": _rows_reduce,
}
