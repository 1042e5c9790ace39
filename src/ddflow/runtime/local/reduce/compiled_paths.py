"""Compiled paths: a reduce's batches as int64 arrays for the compiled kernels.

An aggregate of ``min``, ``max`` and ``count`` over integer columns, keyed by one integer
column, in a product order (label propagation, shortest paths, reachability: the iterative
graph algorithms) is evaluated, and its skips found, by the kernels of
:mod:`~ddflow.runtime.local.compiled` at every size: the same loops serve a one-record change and
a first epoch. Here the batches (rows or frames) become arrays sorted by key, and the kernels'
results a batch again. Where a column holds a null, or is not an integer (floats keep Polars'
semantics), or the history is read through indexes (only the rows up to each key's bound are
read there: :mod:`~ddflow.runtime.local.reduce.bounded_extremes`), these functions give None
and the caller takes the other paths.

Keys are grouped by the key column's value (exact: integers below 2**63), which is also the
key code the runtime gives such a key (:meth:`LocalKernels.key_codes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY
from ddflow.runtime.local.index import IndexedHistory
from ddflow.runtime.local.reduce.bounded_extremes import _SIGNED_SAFE
from ddflow.runtime.local.rows import Rows, rowable
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import TimeType

if TYPE_CHECKING:
    from ddflow.differential.operators.reduce import ReduceSpec

__all__ = ["evaluate_compiled", "unchanged_compiled"]

_CODES = {"min": 0, "max": 1, "count": 2}


def _applies(spec: ReduceSpec, kinds: Sequence[str], tt: TimeType) -> bool:
    return (
        spec.kind == "agg"
        and len(spec.keys) == 1
        and tt.is_product
        and all(kind in kinds and (c is not None or kind == "count") for _, kind, c in spec.aggs)
    )


def _columns(batch: Any, names: Sequence[str]) -> np.ndarray | None:
    """The named integer columns of ``batch`` as an ``(n, len(names))`` int64 array; None
    where one is not an integer type exact in int64, or holds a null."""
    schema = batch.schema
    if any(schema[n] not in _SIGNED_SAFE for n in names):
        return None
    if type(batch) is Rows:
        at = [batch.index(c) for c in names]
        try:
            if all(t in _SIGNED_SAFE for t in schema.values()):  # (one conversion of them all)
                n = len(batch.rows)
                whole = np.array(batch.rows, dtype=np.int64).reshape(n, len(schema))
                return np.ascontiguousarray(whole[:, at])
            rows, n = batch.rows, len(batch.rows)
            out = np.empty((n, len(names)), dtype=np.int64)
            for j, i in enumerate(at):
                out[:, j] = np.fromiter((r[i] for r in rows), dtype=np.int64, count=n)
        except TypeError:  # (a null)
            return None
        return out
    cols = []
    for name in names:
        s = batch.get_column(name)
        if s.null_count():
            return None
        cols.append(s.cast(pl.Int64).to_numpy())
    if not cols:
        return np.empty((batch.height, 0), dtype=np.int64)
    return np.ascontiguousarray(np.column_stack(cols)) if cols else None


def _by_key(
    batch: Any, key: str, tcols: Sequence[str], values: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(keys, times, values, diffs)`` of ``batch`` sorted by key; None where a column is
    not taken (see :func:`_columns`)."""
    got = _columns(batch, [key, DIFF, *tcols, *values])
    if got is None:
        return None
    order = np.argsort(got[:, 0], kind="stable")
    got = got[order]
    w = len(tcols)
    return (
        np.ascontiguousarray(got[:, 0]),
        np.ascontiguousarray(got[:, 2 : 2 + w]),
        np.ascontiguousarray(got[:, 2 + w :]),
        np.ascontiguousarray(got[:, 1]),
    )


def evaluate_compiled(
    spec: ReduceSpec,
    queries: Any,
    history: Any,
    out_history: Any,
    tt: TimeType,
    settings: LocalSettings,
) -> Any:
    """:func:`~ddflow.runtime.local.reduce.evaluation.reduce_evaluate` by the compiled kernel,
    for an aggregate of ``min``, ``max`` and ``count``; None where it does not apply."""
    if (
        not settings.reduce.compiled
        or not _applies(spec, ("min", "max", "count"), tt)
        or isinstance(history, IndexedHistory)
    ):
        return None
    key, tcols, outs = spec.keys[0], tt.columns(), list(spec.outputs)
    q = _columns(queries, [key, *tcols])
    h = _by_key(history, key, tcols, spec.values)
    o = _by_key(out_history, key, tcols, outs)
    if q is None or h is None or o is None:
        return None
    from ddflow.runtime.local import compiled

    q = q[np.lexsort(q.T[::-1])]
    kinds = np.array([_CODES[kind] for _, kind, _ in spec.aggs], dtype=np.int64)
    cols = np.array(
        [0 if c is None else spec.values.index(c) for _, _, c in spec.aggs], dtype=np.int64
    )
    ek, ev, et, ed = compiled.evaluate_extremes(
        (np.ascontiguousarray(q[:, 0]), np.ascontiguousarray(q[:, 1:])), h, o, kinds, cols
    )
    schema: dict[str, Any] = {KEY: pl.Int64, key: queries.schema[key]}
    schema.update({n: spec.out_types[n] for n in outs})
    schema.update({c: pl.Int64 for c in tcols})
    schema[DIFF] = pl.Int64
    columns = [ek, ek, *ev.T, *et.T, ed]
    return _batch(schema, columns, settings)


def _batch(schema: dict[str, Any], columns: Sequence[np.ndarray], settings: LocalSettings) -> Any:
    """The columns as a batch of ``schema``: rows when few (``small_batch_rows``)."""
    n = len(columns[0])
    if n <= settings.small_batch_rows and rowable(schema):
        return Rows(schema, list(zip(*(c.tolist() for c in columns), strict=True)))
    return pl.DataFrame(
        [
            pl.Series(name, c, dtype=pl.Int64).cast(dtype)
            for (name, dtype), c in zip(schema.items(), columns, strict=True)
        ]
    )


def unchanged_compiled(
    spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType, settings: LocalSettings
) -> Any:
    """:func:`~ddflow.runtime.local.reduce.skips.minmax_unchanged` by the compiled kernel, for
    mins and maxes of integer columns; None where it does not apply (nulls among the values
    or the outputs, other types)."""
    if not settings.reduce.compiled or not _applies(spec, ("min", "max"), tt):
        return None
    key, tcols, outs = spec.keys[0], tt.columns(), list(spec.outputs)
    n = _by_key(new, key, tcols, [c for _, _, c in spec.aggs])  # type: ignore[misc]
    o = _by_key(out_history, key, tcols, [name for name, _, _ in spec.aggs])
    if n is None or o is None:
        return None
    from ddflow.runtime.local import compiled

    signs = np.array([1 if kind == "min" else -1 for _, kind, _ in spec.aggs], dtype=np.int64)
    if (signs < 0).any():  # a max is the min of the negated values
        least = np.iinfo(np.int64).min
        if (n[2] == least).any() or (o[2] == least).any():
            return None
        n = (n[0], n[1], np.ascontiguousarray(n[2] * signs), n[3])
        o = (o[0], o[1], np.ascontiguousarray(o[2] * signs), o[3])
    if outs != [name for name, _, _ in spec.aggs]:
        return None
    skipped = compiled.extremes_unchanged(n, o, settings.reduce.exact_times)
    schema = {KEY: pl.Int64, key: new.schema[key]}
    return _batch(schema, [skipped, skipped], settings)
