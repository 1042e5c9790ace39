"""The local runtime's data plane: batches of updates as Polars DataFrames.

A *batch* is a ``polars.DataFrame`` whose columns are the collection's data columns, then one
``int64`` column per time integer (``__t0``, ``__t1``, ...; see :meth:`TimeType.columns`), then
``__diff`` (``int64``). Every row is one update ``(data, time, diff)``. An *arranged* batch adds
``__key``: an ``int64`` code of the arrangement's key columns (the key itself for a single integer
key, otherwise a row hash), and is sorted by it, so that a lookup of ``k`` keys in a batch of
``n`` rows costs ``O(k log n)`` (``numpy.searchsorted``), never a scan.

Invariants of the kernels:

* ``consolidate`` leaves at most one row per ``(data, time)`` and no zero diff;
* ``join_slice`` returns, for every pair of rows with equal keys, the pair's data, the least upper
  bound of their times and the product of their diffs;
* ``accumulate`` returns, for every query ``(key, time)``, the sum of the diffs of the rows with
  that key and a time ``<=`` the query time, per data value, without zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ddflow.lattice import Time, TimeType

#: the key code of a null single integer key (codes are never null; lookups re-check keys)
NULL_CODE = -(2**63)
DIFF = "__diff"
KEY = "__key"
QPREFIX = "__q"  # query-time columns in accumulate

__all__ = ["DIFF", "KEY", "LocalKernels"]


def time_columns(tt: TimeType, prefix: str = "__t") -> list[str]:
    return [f"{prefix}{i}" for i in range(tt.width)]


def le_expr(tt: TimeType, a: Sequence[str], b: Sequence[str]) -> pl.Expr:
    """Polars expression: the time in columns ``a`` is ``<=`` the time in columns ``b``."""
    parts: list[pl.Expr] = []
    i = 0
    pairs = tt.pair_starts
    while i < tt.width:
        if i in pairs:
            pa, ia, pb, ib = pl.col(a[i]), pl.col(a[i + 1]), pl.col(b[i]), pl.col(b[i + 1])
            parts.append((pa < pb) | ((pa == pb) & (ia <= ib)))
            i += 2
        else:
            parts.append(pl.col(a[i]) <= pl.col(b[i]))
            i += 1
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def join_exprs(tt: TimeType, a: Sequence[str], b: Sequence[str], out: Sequence[str]) -> list[pl.Expr]:
    """Polars expressions for the least upper bound of times ``a`` and ``b``, named ``out``."""
    exprs: list[pl.Expr] = []
    i = 0
    pairs = tt.pair_starts
    while i < tt.width:
        if i in pairs:
            pa, ia, pb, ib = pl.col(a[i]), pl.col(a[i + 1]), pl.col(b[i]), pl.col(b[i + 1])
            take_b = (pb > pa) | ((pb == pa) & (ib > ia))
            exprs.append(pl.when(take_b).then(pb).otherwise(pa).alias(out[i]))
            exprs.append(pl.when(take_b).then(ib).otherwise(ia).alias(out[i + 1]))
            i += 2
        else:
            exprs.append(pl.max_horizontal(pl.col(a[i]), pl.col(b[i])).alias(out[i]))
            i += 1
    return exprs


class LocalKernels:
    """Bulk operations on Polars batches; one instance per dataflow, stateless."""

    name = "local"

    # ------------------------------------------------------------------ construction

    def with_time(self, data: pl.DataFrame, tt: TimeType, time: Time, diff: int = 1) -> pl.DataFrame:
        """Updates at one time: the data rows, each with the given diff."""
        cols = [pl.lit(v, dtype=pl.Int64).alias(c) for c, v in zip(tt.columns(), time)]
        return data.with_columns([*cols, pl.lit(diff, dtype=pl.Int64).alias(DIFF)])

    def empty(self, schema: pl.Schema | dict[str, pl.DataType], tt: TimeType) -> pl.DataFrame:
        full = dict(schema)
        for c in tt.columns():
            full[c] = pl.Int64
        full[DIFF] = pl.Int64
        return pl.DataFrame(schema=full)

    # ------------------------------------------------------------------ linear

    def compile(self, expr: Any, schema: Any, name: str | None) -> pl.Expr:
        """A column expression compiled, once, to a Polars expression."""
        from ddflow.expr import compile_polars

        compiled = compile_polars(expr, schema)
        return compiled.alias(name) if name is not None else compiled

    def select(self, batch: pl.DataFrame, compiled: Sequence[pl.Expr], tt: TimeType) -> pl.DataFrame:
        return batch.select([*compiled, *tt.columns(), DIFF])

    def with_columns(self, batch: pl.DataFrame, compiled: Sequence[pl.Expr], names: Sequence[str],
                     tt: TimeType) -> pl.DataFrame:
        return batch.with_columns(compiled).select([*names, *tt.columns(), DIFF])

    def filter(self, batch: pl.DataFrame, predicate: pl.Expr) -> pl.DataFrame:
        return batch.filter(predicate)

    def map_rows(self, batch: pl.DataFrame, fn: Any, schema: Any, src_names: Sequence[str],
                 tt: TimeType, flat: bool) -> pl.DataFrame:
        """Apply a Python row function (``flat``: returning any number of rows) to every row."""
        single = len(schema.names) == 1
        rows: list[Any] = []
        index: list[int] = []
        for i, row in enumerate(batch.select(src_names).iter_rows()):
            outs = fn(row) if flat else (fn(row),)
            for out in outs:
                rows.append(out if not single or isinstance(out, tuple) else (out,))
                index.append(i)
        data = schema.rows_to_frame(rows)
        rest = batch.select([*tt.columns(), DIFF])
        rest = rest[index] if index else rest.clear()
        return pl.concat([data, rest], how="horizontal")

    def inspect(self, batch: pl.DataFrame, fn: Any, names: Sequence[str], tt: TimeType) -> pl.DataFrame:
        tcols = tt.columns()
        time = pl.col(tcols[0]) if tt.width == 1 else pl.concat_list(tcols)
        fn(batch.select([*names, time.alias("time"), pl.col(DIFF).alias("diff")]))
        return batch

    def is_empty(self, batch: pl.DataFrame) -> bool:
        return batch.height == 0

    def to_polars(self, batch: pl.DataFrame) -> pl.DataFrame:
        return batch

    def from_polars(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame

    def concat(self, batches: Sequence[pl.DataFrame]) -> pl.DataFrame:
        if len(batches) == 1:
            return batches[0]
        nonempty = [b for b in batches if b.height]
        if len(nonempty) <= 1:
            return nonempty[0] if nonempty else batches[0]
        return pl.concat(nonempty, how="vertical")

    def negate(self, batch: pl.DataFrame) -> pl.DataFrame:
        return batch.with_columns(-pl.col(DIFF))

    def consolidate(self, batch: pl.DataFrame, sums: Sequence[str] = (DIFF,)) -> pl.DataFrame:
        """One row per ``(data, time)`` with the summed diff (and any other summed weight
        columns); rows whose sums are all zero removed."""
        nonzero = pl.col(sums[0]) != 0
        for w in sums[1:]:
            nonzero = nonzero | (pl.col(w) != 0)
        if batch.height <= 1:
            return batch.filter(nonzero)
        keys = [c for c in batch.columns if c not in sums]
        return (
            batch.group_by(keys)
            .agg([pl.col(w).sum() for w in sums])
            .filter(nonzero)
            .select(batch.columns)
        )

    def enter(self, batch: pl.DataFrame, outer: TimeType, inner: TimeType,
              priority: pl.Expr | None = None) -> pl.DataFrame:
        """Extend the times by a loop's coordinate: ``0`` for ``iterate``; the record's
        ``(priority, 0)`` for ``prioritized_iterate``."""
        data = [c for c in batch.columns if not c.startswith("__")]
        new = inner.columns()[outer.width:]
        if priority is None:
            extra = [pl.lit(0, dtype=pl.Int64).alias(c) for c in new]
        else:
            extra = [priority.cast(pl.Int64).alias(new[0]), pl.lit(0, dtype=pl.Int64).alias(new[1])]
        return batch.select([*data, *outer.columns(), *extra, DIFF])

    def leave(self, batch: pl.DataFrame, inner: TimeType, outer: TimeType) -> pl.DataFrame:
        """Drop the loop's coordinate from the times."""
        return batch.drop(inner.columns()[outer.width:])

    def increment(self, batch: pl.DataFrame, tt: TimeType, limit: int | None) -> pl.DataFrame:
        """Add one to the innermost iteration; drop updates that would reach ``limit``."""
        last = tt.columns()[-1]
        out = batch.with_columns(pl.col(last) + 1)
        if limit is not None:
            out = out.filter(pl.col(last) < limit)
        return out

    def advance(self, batch: pl.DataFrame, tt: TimeType, frontier: Sequence[Time]) -> pl.DataFrame:
        """Advance every time by the frontier (compaction), without consolidating."""
        if not frontier or batch.height == 0:
            return batch
        cols = tt.columns()
        if tt.is_total:
            (f,) = frontier
            return batch.with_columns(pl.max_horizontal(pl.col(cols[0]), pl.lit(f[0])).alias(cols[0]))
        times = batch.select(cols).to_numpy().astype(np.int64, copy=False)
        adv = tt.advance_by_array(times, frontier)
        return batch.with_columns([pl.Series(c, adv[:, i]) for i, c in enumerate(cols)])

    # ------------------------------------------------------------------ times

    def distinct_times(self, batch: pl.DataFrame, tt: TimeType) -> list[Time]:
        if batch.height == 0:
            return []
        cols = tt.columns()
        return [tuple(r) for r in batch.select(cols).unique().sort(cols).iter_rows()]

    def split_by_time(self, batch: pl.DataFrame, tt: TimeType) -> list[tuple[Time, pl.DataFrame]]:
        cols = tt.columns()
        if batch.height == 0:
            return []
        parts = batch.partition_by(cols, as_dict=True, maintain_order=True)
        return sorted(((tuple(k), v) for k, v in parts.items()), key=lambda kv: kv[0])  # type: ignore[arg-type]

    def count_by_time(self, batch: pl.DataFrame, tt: TimeType) -> list[tuple[Time, int]]:
        """How many updates the batch holds at each time."""
        cols = tt.columns()
        if batch.height == 0:
            return []
        counts = batch.group_by(cols).len()
        return [(tuple(r[:-1]), int(r[-1])) for r in counts.iter_rows()]

    def split_complete(self, batches: Sequence[pl.DataFrame], last_epoch: int
                       ) -> tuple[pl.DataFrame | None, list[pl.DataFrame]]:
        """Split top-level batches into the updates at epochs ``<= last_epoch`` and the rest."""
        if not batches:
            return None, []
        allb = self.concat(batches)
        t0 = pl.col("__t0")
        ready = allb.filter(t0 <= last_epoch)
        rest = allb.filter(t0 > last_epoch)
        return (ready if ready.height else None), ([rest] if rest.height else [])

    # ------------------------------------------------------------------ arrangements

    def key_codes(self, frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
        """An int64 code per row for the key columns: the key for one integer column, else a
        hash (equal keys have equal codes; unequal keys rarely share one, and lookups re-check)."""
        if len(keys) == 1 and frame.schema[keys[0]].is_integer():
            return frame.get_column(keys[0]).cast(pl.Int64).fill_null(NULL_CODE).alias(KEY)
        if not keys:
            return pl.Series(KEY, np.zeros(frame.height, dtype=np.int64))
        return frame.select(keys).hash_rows(seed=0x5EED).reinterpret(signed=True).alias(KEY)

    def arrange(self, batch: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
        """Add the key code column and sort by it."""
        if KEY not in batch.columns:
            batch = batch.with_columns(self.key_codes(batch, keys))
        return batch.sort(KEY)

    def merge(self, batches: Sequence[pl.DataFrame], tt: TimeType, since: Sequence[Time],
              sums: Sequence[str] = (DIFF,)) -> pl.DataFrame:
        """Merge arranged batches, advancing times to ``since`` and consolidating."""
        merged = self.concat(batches)
        merged = self.advance(merged, tt, since)
        return self.consolidate(merged, sums).sort(KEY)

    def lookup(self, batch: pl.DataFrame, codes: np.ndarray) -> pl.DataFrame:
        """Rows of an arranged batch whose key code is in ``codes`` (sorted, unique)."""
        if batch.height == 0 or codes.size == 0:
            return batch.clear()
        col = batch.get_column(KEY).to_numpy()
        lo = np.searchsorted(col, codes, side="left")
        hi = np.searchsorted(col, codes, side="right")
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return batch.clear()
        if total == batch.height:
            return batch
        nz = counts > 0
        lo, counts = lo[nz], counts[nz]
        # indices lo[i] .. lo[i] + counts[i] - 1, concatenated
        starts = np.repeat(lo - np.cumsum(np.concatenate(([0], counts[:-1]))), counts)
        idx = starts + np.arange(total)
        return batch[idx]

    # ------------------------------------------------------------------ join and reduce

    def join_slice(
        self,
        delta: pl.DataFrame,
        other: pl.DataFrame,
        tt: TimeType,
        left_on: Sequence[str],
        right_on: Sequence[str],
        delta_is_left: bool,
        output: Sequence[tuple[str, str, str]],
    ) -> pl.DataFrame:
        """Join a batch with a trace slice: every pair with equal keys gives the output
        columns, the lub of the two times and the product of the diffs.

        ``output`` lists ``(side, column, output name)`` with side ``"l"`` or ``"r"``.
        """
        left, right = (delta, other) if delta_is_left else (other, delta)
        if left.height == 0 or right.height == 0:
            return pl.DataFrame(schema=self._join_schema(left, right, tt, output))
        tcols = tt.columns()
        lsel = [pl.col(c).alias(f"__l_{c}") for c in left.columns if c != KEY]
        rsel = [pl.col(c).alias(f"__r_{c}") for c in right.columns if c != KEY]
        j = left.select(lsel).join(
            right.select(rsel),
            left_on=[f"__l_{c}" for c in left_on],
            right_on=[f"__r_{c}" for c in right_on],
            how="inner",
            coalesce=False,
        )
        exprs = [pl.col(f"__{side}_{c}").alias(name) for side, c, name in output]
        exprs += join_exprs(tt, [f"__l_{c}" for c in tcols], [f"__r_{c}" for c in tcols], tcols)
        exprs.append((pl.col(f"__l_{DIFF}") * pl.col(f"__r_{DIFF}")).alias(DIFF))
        return j.select(exprs)

    def _join_schema(self, left: pl.DataFrame, right: pl.DataFrame, tt: TimeType,
                     output: Sequence[tuple[str, str, str]]) -> dict[str, pl.DataType]:
        schema: dict[str, pl.DataType] = {}
        for side, c, name in output:
            schema[name] = (left if side == "l" else right).schema[c]
        for c in tt.columns():
            schema[c] = pl.Int64
        schema[DIFF] = pl.Int64
        return schema

    def accumulate(self, history: pl.DataFrame, queries: pl.DataFrame, tt: TimeType,
                   keys: Sequence[str], values: Sequence[str],
                   weights: Sequence[str] = ()) -> pl.DataFrame:
        return accumulate(history, queries, tt, keys, values, weights)

    # ------------------------------------------------------------------ reduce

    def key_set(self, batch: pl.DataFrame) -> np.ndarray:
        """The distinct key codes of an arranged batch (sorted), for lookups."""
        # (polars' unique + sort is much faster than numpy.unique on large int64 arrays)
        return batch.get_column(KEY).unique().sort().to_numpy()

    def height(self, batch: pl.DataFrame) -> int:
        return batch.height

    def drop_key(self, batch: pl.DataFrame) -> pl.DataFrame:
        return batch.drop(KEY)

    def interesting_times(self, new: pl.DataFrame, history: pl.DataFrame, tt: TimeType,
                          keys: Sequence[str]) -> list[tuple[Time, pl.DataFrame]]:
        from ddflow.kernels.local_reduce import interesting_times

        return interesting_times(new, history, tt, keys)

    def minmax_unchanged(self, spec: Any, new: pl.DataFrame, out_history: pl.DataFrame,
                         tt: TimeType) -> pl.DataFrame:
        from ddflow.kernels.local_reduce import minmax_unchanged

        return minmax_unchanged(spec, new, out_history, tt)

    def without_keys(self, batch: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``batch`` whose ``(KEY, keys)`` are not among ``keys``' rows."""
        if keys.height == 0:
            return batch
        return batch.join(keys, on=keys.columns, how="anti", nulls_equal=True)

    def time_queries(self, pending: dict[Time, list[pl.DataFrame]], tt: TimeType) -> pl.DataFrame:
        from ddflow.kernels.local_reduce import time_queries

        return time_queries(pending, tt)

    def reduce_prepare(self, spec: Any, batch: pl.DataFrame, tt: TimeType) -> pl.DataFrame:
        from ddflow.kernels.local_reduce import reduce_prepare

        return reduce_prepare(spec, batch, tt)

    def reduce_evaluate(self, spec: Any, queries: pl.DataFrame, history: pl.DataFrame,
                        out_history: pl.DataFrame, tt: TimeType) -> pl.DataFrame:
        from ddflow.kernels.local_reduce import reduce_evaluate

        return reduce_evaluate(spec, queries, history, out_history, tt)


def accumulate(
    history: pl.DataFrame,
    queries: pl.DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    values: Sequence[str],
    weights: Sequence[str] = (),
) -> pl.DataFrame:
    """For each query ``(keys, __q0.., )`` the accumulation of ``history`` at the query time:
    rows ``keys, __q*, values, __diff, weights`` summed over history rows with equal keys and
    a time ``<=`` the query time; rows whose diff and weights are all zero are dropped."""
    tcols = tt.columns()
    qcols = time_columns(tt, QPREFIX)
    if history.height == 0 or queries.height == 0:
        schema = {**{k: queries.schema[k] for k in keys}, **{q: pl.Int64 for q in qcols}}
        schema.update({v: history.schema[v] for v in values})
        schema[DIFF] = pl.Int64
        schema.update({w: history.schema[w] for w in weights})
        return pl.DataFrame(schema=schema)
    h = history.select([*keys, *values, *tcols, DIFF, *weights])
    sums = [pl.col(DIFF).sum(), *[pl.col(w).sum() for w in weights]]
    nonzero = pl.col(DIFF) != 0
    for w in weights:
        nonzero = nonzero | (pl.col(w) != 0)
    q = queries.select([*keys, *qcols])
    if all_before(h, q, tt, tcols, qcols):
        # every history time is <= every query time: consolidate first, then pair with queries
        acc = h.group_by([*keys, *values]).agg(sums).filter(nonzero)
        return q.join(acc, on=list(keys), how="inner", nulls_equal=True).select([*keys, *qcols, *values, DIFF, *weights])
    j = q.join(h, on=list(keys), how="inner", nulls_equal=True)
    j = j.filter(le_expr(tt, tcols, qcols))
    out = j.group_by([*keys, *qcols, *values]).agg(sums)
    return out.filter(nonzero)


def all_before(history: pl.DataFrame, queries: pl.DataFrame, tt: TimeType,
               tcols: Sequence[str], qcols: Sequence[str]) -> bool:
    """Is every time of ``history`` ``<=`` every time of ``queries``? (A cheap sufficient
    test: the coordinate-wise max of one below the coordinate-wise min of the other, for
    product orders; for lexicographic pairs, compared as pairs.)"""
    if not tt.is_product:
        return False
    hi = history.select([pl.col(c).max() for c in tcols]).row(0)
    lo = queries.select([pl.col(c).min() for c in qcols]).row(0)
    return all(a is not None and b is not None and a <= b for a, b in zip(hi, lo))
