"""Evaluation: a reduce's output corrections at its ready ``(key, time)`` queries.

:func:`reduce_evaluate` gives, for each query, the desired output ``f(input accumulated at
time)`` minus the output accumulated at that time, as rows ``KEY, keys, outputs, __t*,
__diff``. A key's several queried times are evaluated in rounds (ranked in a linear extension
of the order) so that each round sees the corrections of the earlier ones. Its paths agree:
small steps go row by row in Python (never with a float column: a float sum depends on the
order of its terms, so floats always take the columnar path), a single min or max may read each
key's history only up to its current output (:mod:`~ddflow.runtime.local.reduce.bounded_extremes`),
and a large history is evaluated in slices of keys (``reduce.evaluate_slice_rows`` of the
:class:`~ddflow.runtime.local.settings.LocalSettings`; keys are independent).
:func:`time_queries` makes the queries of the pending times, and :func:`reduce_prepare` shapes
an input batch for the reduce's input arrangement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import le as _le
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY, time_columns
from ddflow.differential.batch import QUERY_PREFIX as QPREFIX
from ddflow.runtime.local import rows as R
from ddflow.runtime.local.columnar import (
    accumulate,
    balanced_cuts,
    batch_codes,
    run_starts,
    shares_key,
)
from ddflow.runtime.local.exprs import wrap_int64
from ddflow.runtime.local.index import IndexedHistory, positions, updates_at_most
from ddflow.runtime.local.reduce.bounded_extremes import _extreme_by_bound
from ddflow.runtime.local.reduce.groups import _ROW_GROUP_FUNCTIONS, GROUP_FUNCTIONS
from ddflow.runtime.local.reduce.small_steps import _hold, _limit
from ddflow.runtime.local.rows import Rows, frame, iter_rows, rowable
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.differential.kernel import ReduceSpec

__all__ = ["reduce_evaluate", "reduce_prepare", "time_queries"]


def time_queries(pending: dict[Time, list[Any]], tt: TimeType, settings: LocalSettings) -> Any:
    """``(KEY, keys, __t*)`` rows, one per distinct pending ``(key, time)``. (Each frame
    holds distinct keys, as :func:`interesting_times` gives them: only the keys of a time
    pending in several frames are made unique.)"""
    frames = [f for fs in pending.values() for f in fs]
    if sum(f.height for f in frames) <= _limit(settings):
        rows = {
            (*key, *t)
            for t, fs in pending.items()
            for f in fs
            for key in (f.rows if type(f) is Rows else f.iter_rows())
        }
        schema = {**frames[0].schema, **{c: pl.Int64 for c in tt.columns()}}
        return Rows(schema, list(rows))
    parts = []
    for t, frames in pending.items():
        frames = [frame(f) for f in frames]
        keys = pl.concat(frames) if len(frames) > 1 else frames[0]
        if len(frames) > 1:
            keys = keys.unique()
        parts.append(
            keys.with_columns(
                [pl.lit(v, dtype=pl.Int64).alias(c) for c, v in zip(tt.columns(), t, strict=True)]
            )
        )
    return pl.concat(parts) if len(parts) > 1 else parts[0]


def reduce_prepare(spec: ReduceSpec, batch: Any, tt: TimeType) -> Any:
    """Shape an input batch for the reduce's input arrangement."""
    if type(batch) is Rows:
        if spec.kind != "agg_weights":
            return batch.project([*spec.keys, *spec.values, *tt.columns(), DIFF])
        g = batch.getter([*spec.keys, *tt.columns(), DIFF])
        d = batch.index(DIFF)
        wi = [batch.index(w[4:]) for w in spec.weights]
        schema = {n: batch.schema[n] for n in [*spec.keys, *tt.columns(), DIFF]}
        schema.update({w: batch.schema[w[4:]] for w in spec.weights})
        return Rows(
            schema,
            [
                (*g(r), *[None if r[i] is None else wrap_int64(r[i] * r[d]) for i in wi])
                for r in batch.rows
            ],
        )
    if spec.kind == "agg_weights":
        ws = [(pl.col(w[4:]) * pl.col(DIFF)).alias(w) for w in spec.weights]
        return batch.select([*spec.keys, *tt.columns(), DIFF, *ws])
    return batch.select([*spec.keys, *spec.values, *tt.columns(), DIFF])


def reduce_evaluate(
    spec: ReduceSpec,
    queries: pl.DataFrame,
    history: pl.DataFrame,
    out_history: pl.DataFrame,
    tt: TimeType,
    settings: LocalSettings,
) -> pl.DataFrame:
    """Corrections to the output at the queried ``(key, time)`` pairs:
    rows ``KEY, keys, outputs, __t*, __diff``. Small inputs (at most the settings'
    ``reduce.small_rows``) take the row-by-row path when it applies. An evaluation reading
    more input history than ``reduce.evaluate_slice_rows`` is done in slices of keys of about
    that much history each: the same result (keys are independent), with the intermediate
    frames (the history paired with the queries, then summed) of one slice alive at a time,
    not of all keys at once (the first epoch of a large graph queries every key)."""
    if queries.height + history.height + out_history.height <= _limit(
        settings
    ) and _rows_path_applies(spec, history):
        rows = history.row_tuples() if isinstance(history, IndexedHistory) else history
        return _evaluate_rows(spec, queries, rows, out_history, tt, settings)
    queries, history, out_history = frame(queries), frame(history), frame(out_history)
    slice_rows = settings.reduce.evaluate_slice_rows
    if history.height <= slice_rows or queries.height == 0:
        return _hold(
            _evaluate_columnar(spec, queries, history, out_history, tt, settings), settings
        )
    parts = [
        _evaluate_columnar(spec, q, h, o, tt, settings)
        for q, h, o in _key_slices(queries, history, out_history, slice_rows)
    ]
    result = pl.concat([p for p in parts if p.height] or parts[:1], how="vertical_relaxed")
    return _hold(result, settings)


def _rows_of(history: Any) -> Any:
    """The updates themselves, of a history read through indexes or not."""
    return history.rows() if isinstance(history, IndexedHistory) else history


def _key_slices(
    queries: pl.DataFrame, history: Any, out_history: pl.DataFrame, slice_rows: int
) -> Iterator[tuple[pl.DataFrame, Any, pl.DataFrame]]:
    """The three cut into ranges of key code holding about ``slice_rows`` history rows each,
    one range at a time. A history read through indexes is cut into histories read through
    the same indexes (its heavy keys' rows are not gathered)."""
    if isinstance(history, IndexedHistory):
        codes, weights = history.key_weights()
        order = np.argsort(codes, kind="stable")
        codes, reach = codes[order], np.cumsum(weights[order])
        bounds = np.unique(codes[balanced_cuts(reach, slice_rows)])
    else:
        codes = history.get_column(KEY).to_numpy()
        n = -(-len(codes) // slice_rows)
        bounds = np.unique(np.quantile(codes, np.arange(1, n) / n, method="lower"))

    def slice_ids(frame: pl.DataFrame) -> np.ndarray:
        return np.searchsorted(bounds, frame.get_column(KEY).to_numpy(), side="right")

    ids = [slice_ids(queries), slice_ids(out_history)]
    hids = None if isinstance(history, IndexedHistory) else slice_ids(history)
    for i in range(len(bounds) + 1):
        q = queries.filter(pl.Series(ids[0] == i))
        if q.height:
            h = history.sliced(bounds, i) if hids is None else history.filter(pl.Series(hids == i))
            yield q, h, out_history.filter(pl.Series(ids[1] == i))


def _evaluate_columnar(
    spec: ReduceSpec,
    queries: pl.DataFrame,
    history: pl.DataFrame,
    out_history: pl.DataFrame,
    tt: TimeType,
    settings: LocalSettings,
) -> pl.DataFrame:
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    qcols = time_columns(tt, QPREFIX)
    outs = list(spec.outputs)
    q_all = queries.rename(dict(zip(tcols, qcols, strict=True)))
    out_history = out_history.select([*jkeys, *outs, *tcols, DIFF])
    sums = settings.sums
    current: pl.DataFrame | None = None
    if q_all.get_column(KEY).n_unique() == q_all.height:
        ranked, rounds = q_all, 1  # one query per key: a single round
        run_search_rows = settings.index.run_search_rows
        current = _accumulate_by_key(out_history, q_all, tt, jkeys, outs, run_search_rows)
        if current is None:
            current = accumulate(out_history, q_all, tt, jkeys, outs, sums)
        desired = _extreme_by_bound(spec, q_all, history, current, tt, settings)
    else:
        ranked = _ranked(q_all, qcols)
        rounds = int(ranked.get_column("__rank").max() or 0) + 1  # type: ignore[arg-type]
        desired = None
    if desired is None:
        history = frame(_rows_of(history))
        acc = accumulate(history, q_all, tt, jkeys, spec.values, sums, spec.weights)
        desired = GROUP_FUNCTIONS[spec.kind](spec, acc, jkeys, qcols)
    group = [*jkeys, *qcols, *outs]
    emitted: list[pl.DataFrame] = []
    for r in range(rounds):
        q = q_all if rounds == 1 else ranked.filter(pl.col("__rank") == r).drop("__rank")
        if current is None or r:
            current = accumulate(out_history, q, tt, jkeys, outs, sums)
        want = (
            desired
            if rounds == 1
            else desired.join(q, on=[*jkeys, *qcols], how="semi", nulls_equal=True)
        )
        change = _change_rows(
            want, current, group, [*jkeys, *outs, *qcols], tcols, settings.reduce.change_rows
        )
        if change is None:
            if current.height:
                summed = (
                    pl.concat([want, current.with_columns(-pl.col(DIFF))], how="vertical_relaxed")
                    .group_by(group)
                    .agg(pl.col(DIFF).sum())
                )
            else:  # (no output yet, as in a first epoch: the desired rows, one per group)
                summed = want.select([*group, DIFF])
            change = (
                summed.filter(pl.col(DIFF) != 0)
                .rename(dict(zip(qcols, tcols, strict=True)))
                .select([*jkeys, *outs, *tcols, DIFF])
            )
        if change.height:
            emitted.append(change)
            if r + 1 < rounds:
                out_history = pl.concat([out_history, change], how="vertical_relaxed")
    if not emitted:
        return out_history.clear()
    return pl.concat(emitted, how="vertical_relaxed")


def _change_rows(
    want: pl.DataFrame,
    current: pl.DataFrame,
    group: list[str],
    names: list[str],
    tcols: list[str],
    change_rows: int,
) -> pl.DataFrame | None:
    """The output change ``want - current`` (both rows ``group`` and a diff), its nonzero
    rows as ``names`` (``group`` reordered: keys, outputs, query times) and a diff, the query
    times named ``tcols``: summed in a dict when the rows are few (at most ``change_rows``)
    and both have the same types (a small update's evaluation: a Polars concat, group-by and
    select each have a fixed cost, whatever the size). None where it does not apply: many
    rows, other types (left to Polars' casts), float columns."""
    if want.height + current.height > change_rows:
        return None
    types = [want.schema[c] for c in group]
    if current.height and [current.schema[c] for c in group] != types:
        return None  # (a relaxed concat would cast: left to Polars)
    if any(t.is_float() or t.is_nested() for t in types):
        return None  # (NaN is not equal to itself in a dict, but one group in Polars; a list
        # is no dict key)
    sums: dict[tuple[Any, ...], int] = {}
    cols = [*group, DIFF]
    for r in iter_rows(want, cols):
        sums[r[:-1]] = sums.get(r[:-1], 0) + r[-1]
    for r in iter_rows(current, cols):
        sums[r[:-1]] = sums.get(r[:-1], 0) - r[-1]
    at = [group.index(n) for n in names]
    rows = [(*(k[i] for i in at), d) for k, d in sums.items() if d]
    out = [*names[: len(names) - len(tcols)], *tcols]  # (the query times renamed)
    schema: dict[str, Any] = {o: types[i] for o, i in zip(out, at, strict=True)}
    schema[DIFF] = pl.Int64
    return pl.DataFrame(rows, schema=schema, orient="row")


def _accumulate_by_key(
    history: pl.DataFrame,
    queries: pl.DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    values: Sequence[str],
    run_search_rows: int,
) -> pl.DataFrame | None:
    """:func:`accumulate` (no weights) where each key has one query, keyed by one ``Int64``
    column that the key code copies, with integer values without nulls, in a product order:
    each history row is matched to its key's query by a binary search of the sorted query
    codes, and the rows at or below their query's time are summed by ``(query, values)`` over
    runs of sorted rows (NumPy), instead of a join, a filter and a group-by in Polars. None
    where it does not apply."""
    if (
        not tt.is_product
        or len(keys) != 2
        or history.height == 0
        or queries.height == 0
        or not shares_key(history, keys[1:])
        or not shares_key(queries, keys[1:])
    ):
        return None
    columns = []
    for v in values:
        s = history.get_column(v)
        if not s.dtype.is_integer() or s.null_count():
            return None
        columns.append(s.to_numpy())
    tcols, qcols = tt.columns(), time_columns(tt, QPREFIX)
    qk = queries.get_column(KEY).to_numpy()
    order = np.argsort(qk, kind="stable")
    qk = qk[order]
    qt = [queries.get_column(c).to_numpy()[order] for c in qcols]
    pos, valid = positions(
        qk,
        qt,
        history.get_column(KEY).to_numpy(),
        [history.get_column(c).to_numpy() for c in tcols],
        run_search_rows,
    )
    diff = history.get_column(DIFF).to_numpy()[valid]
    columns = [c[valid] for c in columns]
    by = np.lexsort((*columns[::-1], pos))
    pos, diff, columns = pos[by], diff[by], [c[by] for c in columns]
    if len(pos) == 0:
        return None  # (nothing at or below the queries: accumulate's typed empty frame)
    starts = run_starts(pos, *columns)
    sums = np.add.reduceat(diff, starts)
    live = sums != 0
    starts, sums = starts[live], sums[live]
    at = pos[starts]
    key = pl.Series(keys[0], qk[at], dtype=queries.schema[keys[0]])
    return pl.DataFrame(
        [
            key,
            key.alias(keys[1]).cast(queries.schema[keys[1]]),
            *[pl.Series(c, t[at], dtype=pl.Int64) for c, t in zip(qcols, qt, strict=True)],
            *[
                pl.Series(v, col[starts], dtype=history.schema[v])
                for v, col in zip(values, columns, strict=True)
            ],
            pl.Series(DIFF, sums, dtype=pl.Int64),
        ]
    )


def _ranked(queries: pl.DataFrame, qcols: list[str]) -> pl.DataFrame:
    """Queries sorted by key and time with ``__rank``, the position of each among its key's
    queries (a linear extension of the order within the key). Computed from the runs of the
    sorted keys, not with a window over every key (which costs a group per key)."""
    q = queries.sort([KEY, *qcols])
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    starts = pl.col(KEY) != pl.col(KEY).shift(1)
    first = pl.when(starts.fill_null(True)).then(row).otherwise(None).forward_fill()
    return q.with_columns((row - first).alias("__rank"))


# ---------------------------------------------------------------------- the row-by-row path


def _rows_path_applies(spec: ReduceSpec, history: pl.DataFrame) -> bool:
    """The row path adds, compares and sorts in Python. It takes no float column: a float sum
    depends on the order of its terms, and NaN (and -0.0) compare and group differently in
    Python and Polars, so that floats always take the columnar path (and results never depend
    on batch sizes). Nor a list output (``top_k``): a Python list is no dict key."""
    if any(isinstance(t, pl.List) for t in spec.out_types.values()):
        return False
    cols = [*spec.keys, *spec.values, *spec.weights]
    return not any(history.schema[c].is_float() for c in cols)


def _evaluate_rows(
    spec: ReduceSpec,
    queries: Any,
    history: Any,
    out_history: Any,
    tt: TimeType,
    settings: LocalSettings,
) -> Any:
    """:func:`reduce_evaluate` row by row: for each key, its queried times in lexicographic
    order (a linear extension of the partial order), each seeing the corrections emitted at
    the earlier ones; the group functions as :data:`GROUP_FUNCTIONS` compute them. The
    result is held as rows when at most ``small_batch_rows``."""
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    width = tt.width
    nk = len(jkeys)
    nv = len(spec.values)
    outs = list(spec.outputs)

    # key -> [(time, values, diff, weights)]
    inputs: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    at_t, at_v, at_d = nk, nk + width, nk + width + nv  # where each part of a row starts
    weighted = bool(spec.weights)
    for row in iter_rows(history, [*jkeys, *tcols, *spec.values, DIFF, *spec.weights]):
        # (a null weight counts as 0, as sum() takes it)
        weights = tuple(0 if w is None else w for w in row[at_d + 1 :]) if weighted else ()
        key = row[:at_t]
        rows_k = inputs.get(key)
        if rows_k is None:
            inputs[key] = rows_k = []
        rows_k.append((row[at_t:at_v], row[at_v:at_d], row[at_d], weights))
    # key -> [(time, outputs, diff)]
    outputs: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    no = len(outs)
    for row in iter_rows(out_history, [*jkeys, *tcols, *outs, DIFF]):
        outputs.setdefault(row[:nk], []).append(
            (row[nk : nk + width], row[nk + width : nk + width + no], row[-1])
        )
    asked: dict[tuple[Any, ...], set[tuple[int, ...]]] = {}
    for row in iter_rows(queries, [*jkeys, *tcols]):
        asked.setdefault(row[:nk], set()).add(row[nk:])

    group_fn = _ROW_GROUP_FUNCTIONS[spec.kind]
    upto = _rows_up_to(tt)
    emitted: list[tuple[Any, ...]] = []
    for key, times in asked.items():
        history_k = inputs.get(key, ())
        out_k = outputs.setdefault(key, [])
        for q in sorted(times):
            if weighted:
                values: dict[tuple[Any, ...], list[Any]] = {}
                for _, v, d, w in upto(history_k, q):
                    acc = values.get(v)
                    if acc is None:
                        values[v] = [d, *w]
                    else:
                        acc[0] += d
                        for i, x in enumerate(w, 1):
                            acc[i] += x
                group = [(v, acc) for v, acc in values.items() if any(acc)]
            else:  # (a count per value alone: most reduces, and every min/max)
                counts: dict[tuple[Any, ...], int] = {}
                for _, v, d, _ in upto(history_k, q):
                    counts[v] = counts.get(v, 0) + d
                group = [(v, [m]) for v, m in counts.items() if m]
            want: dict[tuple[Any, ...], int] = {}
            if group:
                for o, m in group_fn(spec, key, group):
                    want[o] = want.get(o, 0) + m
            for _, o, d in upto(out_k, q):
                want[o] = want.get(o, 0) - d
            for o, d in want.items():
                if d:
                    emitted.append((*key, *o, *q, d))
                    out_k.append((q, o, d))
    schema: dict[str, Any] = {c: queries.schema[c] for c in jkeys}
    schema.update({n: _out_dtype(spec, n, history) for n in outs})
    schema.update({c: pl.Int64 for c in tcols})
    schema[DIFF] = pl.Int64
    if len(emitted) > settings.small_batch_rows or not rowable(schema):
        return pl.DataFrame(emitted, schema=schema, orient="row")
    return Rows(schema, emitted)


def _rows_up_to(
    tt: TimeType,
) -> Callable[[Sequence[tuple[Any, ...]], tuple[int, ...]], list[tuple[Any, ...]]]:
    """``upto(rows, q)``: the rows (time first) at times ``<= q``; for a product order one
    comprehension comparing coordinates, not a call of ``less_equal`` per row (the row path
    of a small update reads a few hundred rows per key)."""
    if not tt.is_product:
        le = tt.less_equal
        return lambda rows, q: [r for r in rows if le(r[0], q)]
    if tt.width == 1:
        return lambda rows, q: [r for r in rows if r[0][0] <= q[0]]
    if tt.width == 2:

        def upto2(rows: Sequence[tuple[Any, ...]], q: tuple[int, ...]) -> list[tuple[Any, ...]]:
            q0, q1 = q
            return [r for r in rows if r[0][0] <= q0 and r[0][1] <= q1]

        return upto2
    return lambda rows, q: [r for r in rows if all(map(_le, r[0], q))]


def _out_dtype(spec: ReduceSpec, name: str, history: pl.DataFrame) -> Any:
    if name in spec.out_types:
        return spec.out_types[name]
    return history.schema[name]  # distinct's and threshold's "outputs" are its columns


def evaluation_slices(
    queries: Any, codes: Any, parts: Sequence[Any], settings: LocalSettings
) -> list[tuple[Any, np.ndarray]] | None:
    """The queries and their key codes ``codes`` (sorted, unique) cut into ranges of keys
    whose updates in the input batches ``parts`` are about
    ``settings.reduce.evaluate_slice_rows`` each; None when they are fewer (one
    evaluation). A reduce evaluates the ranges one at a time, reading the history of each
    alone: a first epoch queries every key, and its history, read whole, would be a copy
    of the whole trace alive through the evaluation."""
    if isinstance(queries, Rows) or len(codes) < 2:
        return None
    limit = settings.reduce.evaluate_slice_rows
    codes = np.asarray(codes, dtype=np.int64)
    if updates_at_most(parts, codes) <= limit:
        return None  # (a small trace, or a small step's keys: no large batch searched)
    reach = np.zeros(len(codes), dtype=np.int64)
    for p in parts:
        lo, hi = (
            R.batch_ranges(p, codes, settings.lookups)
            if type(p) is pl.DataFrame
            else R.key_ranges(batch_codes(p), codes)
        )
        reach += hi - lo
    np.cumsum(reach, out=reach)
    total = int(reach[-1])
    if total <= limit:
        return None
    # the first code of each range: past the one at which the range's share is reached
    cuts = np.unique(balanced_cuts(reach, limit) + 1)
    cuts = cuts[cuts < len(codes)]
    key = queries.get_column(KEY).to_numpy()
    at = np.searchsorted(codes[cuts], key, side="right")  # each query's range
    return [
        (queries.filter(pl.Series(at == i)), part)
        for i, part in enumerate(np.split(codes, cuts))
        if len(part)
    ]
