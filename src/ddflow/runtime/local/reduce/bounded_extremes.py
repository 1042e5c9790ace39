"""Bounded extremes: a single ``min`` (``max``) evaluated from each key's values only up to
(down to) a bound, its current output.

:func:`_extreme_by_bound` gives the same desired output as the general evaluation (which sums
every value of a key's history up to the query time), where it applies: an aggregate of one
``min`` or ``max`` of an integer column without nulls, keyed by one ``Int64`` column, in a
product order, with one query per key; elsewhere it gives None. It is exact because a min is
the least value of positive multiplicity: when some value up to the bound has one, every
smaller value's rows were summed too; otherwise the key is evaluated again without a bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY, time_columns
from ddflow.differential.batch import QUERY_PREFIX as QPREFIX
from ddflow.runtime.local.columnar import run_starts
from ddflow.runtime.local.index import IndexedHistory, indexed_sums, positions
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import TimeType

if TYPE_CHECKING:
    from ddflow.differential.kernel import ReduceSpec

#: integer types whose values are exact as int64 (not UInt64)
_SIGNED_SAFE = frozenset({pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32})


def _extreme_by_bound(
    spec: ReduceSpec,
    q_all: pl.DataFrame,
    history: Any,
    current: pl.DataFrame,
    tt: TimeType,
    settings: LocalSettings,
) -> pl.DataFrame | None:
    """The desired output of a single ``min`` (``max``) at one query per key, reading the
    values of each key's history only up to (down to) a bound; None where it does not apply.

    A key's min at a query time ``q`` is the least value whose multiplicity accumulated at
    ``q`` is positive, and the group has an output row when its count (every multiplicity
    summed) is positive. The bound is the key's current output at ``q`` (``current``, the
    output accumulated there, when it is one row of multiplicity 1): only the history rows at
    times ``<= q`` with values ``<=`` the bound are summed by value; the count is a sum of
    diffs per query (no grouping). If a value up to the bound has a positive multiplicity, the
    least such is the min (every smaller value's rows were summed). Otherwise the min is above
    the bound, and those queries are evaluated by the general path. In label propagation a
    node's new proposals rarely move its label, and the rows at or below it are a few of its
    history. From an :class:`~ddflow.runtime.local.index.IndexedHistory` the rows above the
    bounds are not even read (the counts come from the indexes' summaries).

    It applies to an aggregate of one ``min`` or ``max`` of an integer column without nulls,
    keyed by one ``Int64`` column without nulls (so that the key code is the key), in a
    product order. A history read whole is tried from ``settings.reduce.bounded_rows``
    updates, and given up where more than ``bounded_share`` of them are below the bounds
    (grouping every row then costs about as much)."""
    if (
        spec.kind != "agg"
        or len(spec.aggs) != 1
        or len(spec.keys) != 1
        or not tt.is_product
        or q_all.height == 0
    ):
        return None
    ((name, kind, c),) = spec.aggs
    key = spec.keys[0]
    indexed = isinstance(history, IndexedHistory)
    schema = history.schema
    if (
        kind not in ("min", "max")
        or c is None
        or spec.values != (c,)
        or schema[c] not in _SIGNED_SAFE
        or schema[key] != pl.Int64
    ):
        return None
    if not indexed and history.height < settings.reduce.bounded_rows:
        return None
    frames = [history] if not indexed else [history.light, *(b for b, _, _ in history.indexed)]
    for f in frames:
        if f.get_column(key).null_count() or f.get_column(c).null_count():
            return None
        if kind == "max" and f.height and f.get_column(c).min() == np.iinfo(np.int64).min:
            return None  # (its negation below would overflow)
    tcols, qcols = tt.columns(), time_columns(tt, QPREFIX)
    qk = q_all.get_column(KEY).to_numpy()
    qt = [q_all.get_column(qc).to_numpy() for qc in qcols]
    if len(qk) > 1 and not bool(np.all(qk[1:] > qk[:-1])):
        order = np.argsort(qk, kind="stable")
        qk, qt = qk[order], [t[order] for t in qt]
    # the bound of each query: the current output, where it is one row of multiplicity 1
    run_search_rows = settings.index.run_search_rows
    sign = 1 if kind == "min" else -1
    bounded, bound = _single_rows(current, qk, name, sign)
    if indexed:
        count, (pos, value, diff) = indexed_sums(history, qk, qt, c, bound, bounded, sign)
    else:
        pos, value, diff = _query_rows(history, qk, qt, c, sign, tcols, run_search_rows)
        if len(diff) and max(-int(diff.min()), int(diff.max())) * len(diff) >= 2**53:
            return None  # (float sums below would not be exact)
        count = np.bincount(pos, weights=diff, minlength=len(qk))
        below = ~bounded[pos] | (value <= bound[pos])
        if np.count_nonzero(below) > settings.reduce.bounded_share * len(below):
            return None
        pos, value, diff = pos[below], value[below], diff[below]
    found, extreme = _least_positive(pos, value, diff, len(qk))
    # a bounded query without a positive value up to its bound: the min is above it, and
    # its key's rows are read again, all of them up to the query time
    again = np.flatnonzero(bounded & ~found)
    if len(again):
        ak, at = qk[again], [t[again] for t in qt]
        unbounded, zeros = np.zeros(len(again), dtype=bool), np.zeros(len(again), dtype=np.int64)
        if indexed:
            _, (pos, value, diff) = indexed_sums(
                history.subset(ak), ak, at, c, zeros, unbounded, sign
            )
        else:
            pos, value, diff = _query_rows(history, ak, at, c, sign, tcols, run_search_rows)
        found[again], extreme[again] = _least_positive(pos, value, diff, len(again))
    present = found & (count > 0)
    codes = qk[present]
    return pl.DataFrame(
        [
            pl.Series(KEY, codes, dtype=pl.Int64),
            pl.Series(key, codes, dtype=pl.Int64),
            *(pl.Series(qc, t[present], dtype=pl.Int64) for qc, t in zip(qcols, qt, strict=True)),
            pl.Series(name, extreme[present] * sign, dtype=pl.Int64).cast(spec.out_types[name]),
            pl.Series(DIFF, np.ones(len(codes), dtype=np.int64), dtype=pl.Int64),
        ]
    )


def _query_rows(
    history: pl.DataFrame,
    qk: np.ndarray,
    qt: Sequence[np.ndarray],
    column: str,
    sign: int,
    tcols: Sequence[str],
    run_search_rows: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The history rows at or before their key's query (``qk`` sorted, at times ``qt``): the
    query's position, the value of ``column`` times ``sign``, and the diff."""
    pos, valid = positions(
        qk,
        qt,
        history.get_column(KEY).to_numpy(),
        [history.get_column(tc).to_numpy() for tc in tcols],
        run_search_rows,
    )
    value = history.get_column(column).cast(pl.Int64).to_numpy()[valid] * sign
    return pos, value, history.get_column(DIFF).to_numpy()[valid]


def _single_rows(
    current: pl.DataFrame, qk: np.ndarray, name: str, sign: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each of the query codes ``qk`` (sorted, unique), whether the accumulated output
    ``current`` (one query per key) is one row of multiplicity 1 with a value, and that
    value times ``sign``."""
    bounded = np.zeros(len(qk), dtype=bool)
    bound = np.zeros(len(qk), dtype=np.int64)
    if current.height == 0:
        return bounded, bound
    ck = current.get_column(KEY).to_numpy()
    values = current.get_column(name)
    ok = current.get_column(DIFF).to_numpy() == 1
    if values.null_count():
        ok &= values.is_not_null().to_numpy()
        values = values.fill_null(0)
    v = values.cast(pl.Int64).to_numpy()
    if len(ck) > 1 and not bool(np.all(ck[1:] >= ck[:-1])):
        order = np.argsort(ck, kind="stable")
        ck, v, ok = ck[order], v[order], ok[order]
    # a key's rows are a run: a run one row long, of multiplicity 1 with a value
    starts = run_starts(ck)
    single = starts[np.diff(starts, append=len(ck)) == 1]
    single = single[ok[single]]
    at = np.searchsorted(qk, ck[single])
    bounded[at] = True
    bound[at] = v[single] * sign
    return bounded, bound


def _least_positive(
    pos: np.ndarray, value: np.ndarray, diff: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """For ``n`` queries and rows ``(query position, value, diff)``: whether some value of
    each query sums to a positive multiplicity, and the least such."""
    found = np.zeros(n, dtype=bool)
    extreme = np.zeros(n, dtype=np.int64)
    if len(pos):
        order = np.lexsort((value, pos))
        pos, value, diff = pos[order], value[order], diff[order]
        starts = run_starts(pos, value)
        positive = np.add.reduceat(diff, starts) > 0
        gpos, gval = pos[starts][positive], value[starts][positive]
        if len(gpos):
            first = run_starts(gpos)
            found[gpos[first]] = True
            extreme[gpos[first]] = gval[first]
    return found, extreme
