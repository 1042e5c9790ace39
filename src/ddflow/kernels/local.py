"""The local runtime's data plane: batches of updates as Polars DataFrames.

A *batch* is a ``polars.DataFrame`` whose columns are the collection's data columns, then one
``int64`` column per time integer (``__t0``, ``__t1``, ...; see :meth:`TimeType.columns`), then
``__diff`` (``int64``). Every row is one update ``(data, time, diff)``. An *arranged* batch adds
``__key``: an ``int64`` code of the arrangement's key columns (the key itself for a single integer
key, otherwise a row hash), and is sorted by it, so that a lookup of ``k`` keys in a batch of
``n`` rows costs ``O(k log n)`` (``numpy.searchsorted``), or ``O(k)`` where a large batch's codes
are dense enough for a direct index (:func:`~ddflow.kernels.local_rows.dense_offsets`), never a
scan.

Invariants of the kernels:

* ``consolidate`` leaves at most one row per ``(data, time)`` and no zero diff;
* ``join_slice`` returns, for every pair of rows with equal keys, the pair's data, the least upper
  bound of their times and the product of their diffs;
* ``accumulate`` returns, for every query ``(key, time)``, the sum of the diffs of the rows with
  that key and a time ``<=`` the query time, per data value, without zeros.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, cast

import numpy as np
import polars as pl

from ddflow.kernels import local_rows as R
from ddflow.kernels.local_exprs import KIND_TYPES, Overflow, row_builder
from ddflow.kernels.local_rows import Batch, Rows, as_rows, frame
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


def join_exprs(
    tt: TimeType, a: Sequence[str], b: Sequence[str], out: Sequence[str]
) -> list[pl.Expr]:
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
    """Bulk operations on Polars batches, and on small batches held as Python rows
    (:mod:`ddflow.kernels.local_rows`); one instance per dataflow, stateless.

    ``small_rows``: batches of at most this many rows are held as rows, and the reduce works
    row by row on steps of up to :data:`~ddflow.kernels.local_reduce.SMALL_REDUCE_ROWS` rows;
    ``0`` keeps every batch columnar (Polars) and every kernel on its columnar path.
    """

    name = "local"
    #: a spine leaves its last few small batches unmerged (:data:`ddflow.trace.TAIL_BATCHES`)
    small_tail = True

    def __init__(self, small_rows: int = R.SMALL_ROWS) -> None:
        self.set_small_rows(small_rows)

    def set_small_rows(self, small_rows: int) -> None:
        """Hold batches of at most ``small_rows`` rows as rows from now on (``0``: none);
        batches already held either way stay valid."""
        if small_rows < 0:
            raise ValueError(f"small_rows must be >= 0, got {small_rows}")
        self.small_rows = small_rows if small_rows > 0 else -1
        #: a lookup in a large columnar batch gives rows up to this many (the reduce reads a
        #: key's whole group row by row, and a gather from NumPy views beats Polars' here)
        self.lookup_rows = max(self.small_rows, R.LOOKUP_ROWS) if small_rows > 0 else -1
        #: the reduce kernels' row-path limit (None: their default)
        self.reduce_rows: int | None = None if small_rows > 0 else -1

    def _small(self, data: pl.DataFrame) -> Any:
        """A small result as rows (see :func:`local_rows.as_rows`)."""
        return as_rows(data, self.small_rows)

    # ------------------------------------------------------------------ construction

    def with_time(
        self, data: pl.DataFrame, tt: TimeType, time: Time, diff: int = 1
    ) -> pl.DataFrame:
        """Updates at one time: the data rows, each with the given diff."""
        cols = [pl.lit(v, dtype=pl.Int64).alias(c) for c, v in zip(tt.columns(), time, strict=True)]
        return data.with_columns([*cols, pl.lit(diff, dtype=pl.Int64).alias(DIFF)])

    def empty(self, schema: pl.Schema | dict[str, pl.DataType], tt: TimeType) -> pl.DataFrame:
        full = dict(schema)
        for c in tt.columns():
            full[c] = pl.Int64
        full[DIFF] = pl.Int64
        return pl.DataFrame(schema=full)

    # ------------------------------------------------------------------ linear

    def compile(self, expr: Any, schema: Any, name: str | None) -> pl.Expr:
        """A column expression compiled, once, to a Polars expression. A plain column
        reference also records ``(source column, output name)`` (``_dd_column``): rows are then
        projected without Polars. So does a cast of a column to its own Polars type, which
        leaves every value (null included) as it is: a graph algorithm's cast of its input's
        weights to int64, say, of weights that are int64 already."""
        from ddflow.expr import compile_polars

        compiled = compile_polars(expr, schema)
        if name is not None:
            compiled = compiled.alias(name)
        source = expr
        while source.kind == "alias" or (
            source.kind == "cast"
            and source.args[0].kind == "col"
            and schema[source.args[0].params[0]].polars == source.params[0].polars
        ):
            source = source.args[0]
        if source.kind == "col":
            compiled._dd_column = (source.params[0], compiled.meta.output_name())  # type: ignore[attr-defined]
        else:
            built = row_builder(expr, schema)
            if built is not None:  # (name, kind, builder): rows evaluated without Polars
                compiled._dd_row = (compiled.meta.output_name(), *built)  # type: ignore[attr-defined]
        return compiled

    def select(self, batch: Any, compiled: Sequence[pl.Expr], tt: TimeType) -> Any:
        if type(batch) is Rows:
            columns = [getattr(c, "_dd_column", None) for c in compiled]
            if None not in columns:
                sources, names = zip(*columns, strict=True)
                return self._project(batch, sources, names, tt)
            evaluated = _evaluated(batch, compiled, tt)
            if evaluated is not None:
                return evaluated
            return self._small(self.select(batch.to_frame(), compiled, tt))
        return batch.select([*compiled, *tt.columns(), DIFF])

    def _project(
        self, batch: Rows, sources: Sequence[str], names: Sequence[str], tt: TimeType
    ) -> Rows:
        g = batch.getter([*sources, *tt.columns(), DIFF])
        schema = {n: batch.schema[s] for n, s in zip(names, sources, strict=True)}
        return Rows(R.updates_schema(schema, tt), [g(r) for r in batch.rows])

    def with_columns(
        self, batch: Any, compiled: Sequence[pl.Expr], names: Sequence[str], tt: TimeType
    ) -> Any:
        if type(batch) is Rows:
            columns = [getattr(c, "_dd_column", None) for c in compiled]
            if None not in columns:
                renamed = {name: src for src, name in columns}  # type: ignore[misc]
                return self._project(batch, [renamed.get(n, n) for n in names], names, tt)
            return self._small(self.with_columns(batch.to_frame(), compiled, names, tt))
        return batch.with_columns(compiled).select([*names, *tt.columns(), DIFF])

    def filter(self, batch: Any, predicate: pl.Expr) -> Any:
        if type(batch) is Rows:
            built = getattr(predicate, "_dd_row", None)
            if built is not None and built[1] == "bool":
                test = built[2](batch.index)
                with contextlib.suppress(Overflow):  # (else Polars says what it makes)
                    return batch.like([r for r in batch.rows if test(r) is True])
            return self._small(batch.to_frame().filter(predicate))
        return batch.filter(predicate)

    def map_rows(
        self, batch: Batch, fn: Any, schema: Any, src_names: Sequence[str], tt: TimeType, flat: bool
    ) -> Batch:
        """Apply a Python row function (``flat``: returning any number of rows) to every row."""
        if type(batch) is Rows:
            return self._small(self.map_rows(batch.to_frame(), fn, schema, src_names, tt, flat))
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

    def inspect(self, batch: Batch, fn: Any, names: Sequence[str], tt: TimeType) -> Batch:
        tcols = tt.columns()
        time = pl.col(tcols[0]) if tt.width == 1 else pl.concat_list(tcols)
        fn(frame(batch).select([*names, time.alias("time"), pl.col(DIFF).alias("diff")]))
        return batch

    def is_empty(self, batch: Any) -> bool:
        return batch.height == 0

    def to_polars(self, batch: Any) -> pl.DataFrame:
        return frame(batch)

    def to_log(self, batch: Any) -> Any:
        """A batch an output keeps: as it is (a frame, or rows the output makes a frame when
        read)."""
        return batch

    def from_rows(self, schema: dict[str, Any], rows: Callable[[], list[tuple[Any, ...]]]) -> Any:
        """A few updates given as rows (``rows()``, in the column order of ``schema``) as a
        batch: rows where the schema has a row form, else None (the caller builds a frame)."""
        if self.small_rows < 0 or not R.rowable(schema):
            return None
        return Rows(schema, rows())

    def from_polars(self, data: pl.DataFrame) -> Any:
        """A frame of updates as a batch: small ones as rows (:mod:`local_rows`)."""
        return self._small(data)

    def concat(self, batches: Sequence[Any]) -> Any:
        if len(batches) == 1:
            return batches[0]
        nonempty = [b for b in batches if b.height]
        if len(nonempty) <= 1:
            return nonempty[0] if nonempty else batches[0]
        if all(type(b) is Rows for b in nonempty):
            first = nonempty[0]
            if all(b.names == first.names for b in nonempty):
                return first.like([r for b in nonempty for r in b.rows])
            names = first.names
            return first.like([r for b in nonempty for r in b.project(names).rows])
        frames = [frame(b) for b in nonempty]
        if any(f.columns != frames[0].columns for f in frames):
            frames = [f.select(frames[0].columns) for f in frames]
        return pl.concat(frames, how="vertical")

    def negate(self, batch: Any) -> Any:
        if type(batch) is Rows:
            return R.negate(batch)
        return batch.with_columns(-pl.col(DIFF))

    def consolidate(self, batch: Any, sums: Sequence[str] = (DIFF,)) -> Any:
        """One row per ``(data, time)`` with the summed diff (and any other summed weight
        columns); rows whose sums are all zero removed."""
        if type(batch) is Rows:
            return R.consolidate(batch, sums)
        if batch.height <= 1:
            return batch.filter(_any_nonzero(sums))
        # the key code first: a packed sum then leaves an arranged batch sorted by it
        keys = sorted((c for c in batch.columns if c not in sums), key=lambda c: c != KEY)
        out = grouped_sums(batch, keys, sums, drop_zero=True)
        return out if out.columns == batch.columns else out.select(batch.columns)

    def enter(
        self, batch: Batch, outer: TimeType, inner: TimeType, priority: pl.Expr | None = None
    ) -> Batch:
        """Extend the times by a loop's coordinate: ``0`` for ``iterate``; the record's
        ``(priority, 0)`` for ``prioritized_iterate``."""
        if type(batch) is Rows:
            if priority is None:
                return R.enter(batch, outer, inner)
            return self._small(self.enter(batch.to_frame(), outer, inner, priority))
        data = [c for c in batch.columns if not c.startswith("__")]
        new = inner.columns()[outer.width :]
        if priority is None:
            extra = [pl.lit(0, dtype=pl.Int64).alias(c) for c in new]
        else:
            extra = [priority.cast(pl.Int64).alias(new[0]), pl.lit(0, dtype=pl.Int64).alias(new[1])]
        return batch.select([*data, *outer.columns(), *extra, DIFF])

    def leave(self, batch: Batch, inner: TimeType, outer: TimeType) -> Batch:
        """Drop the loop's coordinate from the times."""
        if type(batch) is Rows:
            return R.leave(batch, inner, outer)
        return batch.drop(inner.columns()[outer.width :])

    def increment(self, batch: Batch, tt: TimeType, limit: int | None) -> Batch:
        """Add one to the innermost iteration; drop updates that would reach ``limit``."""
        if type(batch) is Rows:
            return R.increment(batch, tt, limit)
        last = tt.columns()[-1]
        out = batch.with_columns(pl.col(last) + 1)
        if limit is not None:
            out = out.filter(pl.col(last) < limit)
        return out

    def advance(self, batch: Batch, tt: TimeType, frontier: Sequence[Time]) -> Batch:
        """Advance every time by the frontier (compaction), without consolidating."""
        if type(batch) is Rows:
            return R.advance(batch, tt, frontier)
        if not frontier or batch.height == 0:
            return batch
        cols = tt.columns()
        if tt.is_product:  # a max with the frontier's floor, column by column
            floor = tt.advance_floor(frontier)
            assert floor is not None
            return batch.with_columns(
                [
                    pl.col(c).clip(lower_bound=pl.lit(f, dtype=pl.Int64))
                    for c, f in zip(cols, floor, strict=True)
                ]
            )
        times = batch.select(cols).to_numpy().astype(np.int64, copy=False)
        adv = tt.advance_by_array(times, frontier)
        return batch.with_columns([pl.Series(c, adv[:, i]) for i, c in enumerate(cols)])

    # ------------------------------------------------------------------ times

    def distinct_times(self, batch: Any, tt: TimeType) -> list[Time]:
        if type(batch) is Rows:
            return R.distinct_times(batch, tt)
        if batch.height == 0:
            return []
        cols = tt.columns()
        return [tuple(r) for r in batch.select(cols).unique().sort(cols).iter_rows()]

    def split_by_time(self, batch: Any, tt: TimeType) -> list[tuple[Time, Any]]:
        if type(batch) is Rows:
            return R.split_by_time(batch, tt)
        cols = tt.columns()
        if batch.height == 0:
            return []
        one = one_time(batch, cols)
        if one is not None:  # (a step's output is mostly at one time: no partition)
            return [(one, batch)]
        parts = batch.partition_by(cols, as_dict=True, maintain_order=True)
        return sorted(((tuple(k), v) for k, v in parts.items()), key=lambda kv: kv[0])  # type: ignore[arg-type]

    def count_by_time(self, batch: Batch, tt: TimeType) -> list[tuple[Time, int]]:
        """How many updates the batch holds at each time."""
        if type(batch) is Rows:
            return R.count_by_time(batch, tt)
        cols = tt.columns()
        if batch.height == 0:
            return []
        counts = batch.group_by(cols).len()
        return [(tuple(r[:-1]), int(r[-1])) for r in counts.iter_rows()]

    def split_complete(
        self, batches: Sequence[Batch], last_epoch: int
    ) -> tuple[Batch | None, list[Batch]]:
        """Split top-level batches into the updates at epochs ``<= last_epoch`` and the rest."""
        if not batches:
            return None, []
        allb = self.concat(batches)
        if type(allb) is Rows:
            i = allb.index("__t0")
            ready_rows = [r for r in allb.rows if r[i] <= last_epoch]
            rest_rows = [r for r in allb.rows if r[i] > last_epoch]
            return (
                (allb.like(ready_rows) if ready_rows else None),
                ([allb.like(rest_rows)] if rest_rows else []),
            )
        t0 = pl.col("__t0")
        ready = allb.filter(t0 <= last_epoch)
        rest = allb.filter(t0 > last_epoch)
        return (ready if ready.height else None), ([rest] if rest.height else [])

    # ------------------------------------------------------------------ arrangements

    def key_codes(self, frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
        """An int64 code per row for the key columns: the key for one integer column, a
        multiply-xorshift mix for several integer columns, else Polars' row hash (equal keys
        have equal codes; unequal keys rarely share one, and lookups re-check)."""
        if len(keys) == 1 and frame.schema[keys[0]].is_integer():
            return frame.get_column(keys[0]).cast(pl.Int64).fill_null(NULL_CODE).alias(KEY)
        if not keys:
            return pl.Series(KEY, np.zeros(frame.height, dtype=np.int64))
        if R.integer_keys(dict(frame.schema), keys):  # a mix row kernels compute alike
            return pl.Series(KEY, R.mix_codes([frame.get_column(k) for k in keys]))
        return frame.select(keys).hash_rows(seed=0x5EED).reinterpret(signed=True).alias(KEY)

    def arrange(self, batch: Any, keys: Sequence[str]) -> Any:
        """Add the key code column and sort by it."""
        if type(batch) is Rows:
            return R.arrange(batch, keys)
        if KEY not in batch.columns:
            batch = batch.with_columns(self.key_codes(batch, keys))
        # (a consolidated batch whose first column is its integer key comes sorted by it)
        return share_key(sorted_by_key(batch), keys)

    def merge(
        self,
        batches: Sequence[Batch],
        tt: TimeType,
        since: Sequence[Time],
        sums: Sequence[str] = (DIFF,),
        keys: Sequence[str] = (),
    ) -> Batch:
        """Merge arranged batches, advancing times to ``since`` and consolidating."""
        total = sum(b.height for b in batches)
        if all(type(b) is Rows for b in batches) and total <= self.small_rows:
            return R.merge(self.concat(batches), tt, since, sums)
        if total <= MERGE_ARRAY_ROWS:
            merged = _merge_arrays(batches, tt, since, sums)
            if merged is not None:
                small: Batch = self._small(share_key(merged, keys))
                return small
        merged = frame(self.advance(self.concat([frame(b) for b in batches]), tt, since))
        if keys and shares_key(merged, keys):
            # the key code is a copy of the key column: summed without it (a column less to
            # pack and gather), then put back
            group = [keys[0], *(c for c in merged.columns if c not in (*sums, KEY, keys[0]))]
            merged = (
                grouped_sums(merged.drop(KEY), group, sums, drop_zero=True)
                .with_columns(pl.col(keys[0]).alias(KEY))
                .select(merged.columns)
            )
        else:
            merged = self.consolidate(merged, sums)
        return self._small(share_key(sorted_by_key(merged), keys))

    def merge_cut(
        self, batches: Sequence[Batch], start: int | None, rows: int
    ) -> tuple[list[Batch], int | None]:
        """The next range of keys of a merge in steps (:class:`~ddflow.trace.Merging`): the
        updates of each of ``batches`` (arranged) with key codes from ``start`` (None: the
        first) on, about ``rows`` of the one with most left and the others' in the same range,
        never splitting a key; and the first code after the range (None: it reached the
        end)."""
        codes = [_codes(b) for b in batches]
        at = [0 if start is None else int(np.searchsorted(c, start, side="left")) for c in codes]
        # cut in the one with most updates left, at a key boundary
        j = max(range(len(codes)), key=lambda n: len(codes[n]) - at[n])
        big, i = codes[j], at[j]
        end = i + max(rows, 1)
        cut: int | None = None
        if end < len(big):
            cut = int(big[end])
            if int(np.searchsorted(big, cut, side="left")) == i:  # one key holds them all
                after = int(np.searchsorted(big, cut, side="right"))
                cut = int(big[after]) if after < len(big) else None
        ends = [len(c) if cut is None else int(np.searchsorted(c, cut, side="left")) for c in codes]
        return [_slice(b, lo, hi) for b, lo, hi in zip(batches, at, ends, strict=True)], cut

    def merge_pieces(self, pieces: list[Batch], keys: Sequence[str]) -> Any:
        """The ranges a merge in steps produced, in order, as one arranged batch (contiguous:
        its columns are read as NumPy views). Takes the pieces out of ``pieces``, and copies
        one column at a time, letting the pieces' copy of each go as it is done: the pieces
        and the batch are never both alive whole (a first epoch's largest merge is a few
        hundred MB)."""
        if not pieces:
            return self._small(pl.DataFrame())
        if len(pieces) == 1:
            merged = pieces.pop()
            if isinstance(merged, Rows):
                return merged
            return self._small(share_key(merged.rechunk(), keys))
        frames = [frame(p) for p in pieces]
        pieces.clear()
        names = frames[0].columns
        frames = [f if f.columns == names else f.select(names) for f in frames]
        shared = all(shares_key(f, keys) for f in frames)  # (the code is put back below)
        columns: dict[str, pl.Series] = {}
        for name in names:
            if not (shared and name == KEY):
                columns[name] = pl.concat([f.get_column(name) for f in frames]).rechunk()
            frames = [f.drop(name) for f in frames]
        return self._small(share_key(pl.DataFrame(columns), keys).select(names))

    def lookup_within(self, batch: Any, codes: Any) -> Any:
        """Rows of an arranged batch among which are those whose key code is in ``codes``,
        for a reader that matches keys itself (a join): the batch itself where
        :meth:`lookup` would scan it, else the same rows. (A first epoch's join asks for most
        keys: the rows it would copy are most of the batch.)"""
        return batch if _scanned(batch, codes) else self.lookup(batch, codes)

    def lookup_parts(self, parts: Sequence[Any], codes: Any, within: bool = False) -> Any:
        """:meth:`lookup` in each batch of a trace, concatenated: as rows when few match in
        all of them (at most ``lookup_rows``), else one frame gathered from NumPy views of the
        batches' columns (no frame per batch, and no rows turned into a frame when
        concatenated with frames). At most :data:`FEW_CODES` keys are searched key by key
        into one list of rows (:func:`local_rows.lookup_few`). ``within``: as
        :meth:`lookup_within` where a batch would be scanned."""
        from ddflow.kernels.local_index import gather_found

        if (
            len(codes) <= FEW_CODES
            and self.lookup_rows >= 0
            and not (within and FEW_CODES * LOOKUP_SCAN >= LOOKUP_SCAN_ROWS)
        ):
            # (no batch is scanned for so few codes: within changes nothing)
            few = R.lookup_few(parts, codes, self.lookup_rows)
            if few is not None:
                return few
        if (
            len(codes) <= FEW_CODES
            or self.lookup_rows < 0
            or any(type(p) is not Rows and _scanned(p, codes) for p in parts)
        ):
            read = self.lookup_within if within else self.lookup
            return self.concat([read(p, codes) for p in parts])
        found: list[tuple[Any, Any]] = []
        total = 0
        for p in parts:
            if type(p) is Rows:
                got = R.lookup(p, codes)
                total += got.height
            elif p.height:
                got = R.batch_ranges(p, codes)
                total += int((got[1] - got[0]).sum())
            else:
                continue
            found.append((p, got))
        if not found:
            return self.lookup(parts[0], codes)  # (empty)
        if total > self.lookup_rows:
            return gather_found(found, dict(parts[0].schema))
        return self.concat(
            [got if type(p) is Rows else self._found_rows(p, *got) for p, got in found]
        )

    def _found_rows(self, batch: pl.DataFrame, lo: np.ndarray, hi: np.ndarray) -> Any:
        """The rows ``lo[i] .. hi[i] - 1`` of a columnar batch (the ranges of a lookup's
        keys): as rows when few and the schema has a row form, else gathered by Polars."""
        small = R.lookup_frame(batch, lo, hi, self.lookup_rows)
        if small is not None:
            return small
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return batch.clear()
        if total == batch.height:
            return batch
        return batch[R.ranges(lo, counts)]

    def lookup(self, batch: Any, codes: Any) -> Any:
        """Rows of an arranged batch whose key code is in ``codes`` (sorted, unique): rows
        when few match (:mod:`local_rows`)."""
        if type(batch) is Rows:
            return R.lookup(batch, codes)
        if batch.height == 0 or len(codes) == 0:
            return batch.clear()
        if _scanned(batch, codes):
            # keys by the tens of thousands (a first epoch's reduce reads every key): one
            # hashed pass over the batch costs less than a binary search and a gather per key
            return batch.filter(pl.col(KEY).is_in(pl.Series(codes, dtype=pl.Int64).implode()))
        return self._found_rows(batch, *R.batch_ranges(batch, codes))

    # ------------------------------------------------------------------ join and reduce

    def join_slice(
        self,
        delta: Batch,
        other: Batch,
        tt: TimeType,
        left_on: Sequence[str],
        right_on: Sequence[str],
        delta_is_left: bool,
        output: Sequence[tuple[str, str, str]],
    ) -> Batch:
        """Join a batch with a trace slice: every pair with equal keys gives the output
        columns, the lub of the two times and the product of the diffs.

        ``output`` lists ``(side, column, output name)`` with side ``"l"`` or ``"r"``.
        """
        left, right = (delta, other) if delta_is_left else (other, delta)
        if type(left) is Rows and type(right) is Rows:
            return R.join(left, right, tt, left_on, right_on, output)
        if left.height == 0 or right.height == 0:
            return pl.DataFrame(schema=self._join_schema(left, right, tt, output))
        left, right = frame(left), frame(right)
        tcols = tt.columns()
        lsel = [pl.col(c).alias(f"__l_{c}") for c in left.columns if c != KEY]
        rsel = [pl.col(c).alias(f"__r_{c}") for c in right.columns if c != KEY]
        j = (
            left.lazy()
            .select(lsel)
            .join(
                right.lazy().select(rsel),
                left_on=[f"__l_{c}" for c in left_on],
                right_on=[f"__r_{c}" for c in right_on],
                how="inner",
                coalesce=False,
            )
        )
        exprs = [pl.col(f"__{side}_{c}").alias(name) for side, c, name in output]
        exprs += join_exprs(tt, [f"__l_{c}" for c in tcols], [f"__r_{c}" for c in tcols], tcols)
        exprs.append((pl.col(f"__l_{DIFF}") * pl.col(f"__r_{DIFF}")).alias(DIFF))
        # (one query: the pairs' columns that no output needs, such as the keys, are not
        # gathered, and the pairs are not held beside the output)
        return self._small(j.select(exprs).collect())

    def _join_schema(
        self,
        left: pl.DataFrame,
        right: pl.DataFrame,
        tt: TimeType,
        output: Sequence[tuple[str, str, str]],
    ) -> dict[str, pl.DataType]:
        schema: dict[str, pl.DataType] = {}
        for side, c, name in output:
            schema[name] = (left if side == "l" else right).schema[c]
        for c in tt.columns():
            schema[c] = pl.Int64
        schema[DIFF] = pl.Int64
        return schema

    def accumulate(
        self,
        history: pl.DataFrame,
        queries: pl.DataFrame,
        tt: TimeType,
        keys: Sequence[str],
        values: Sequence[str],
        weights: Sequence[str] = (),
    ) -> Batch:
        return accumulate(history, queries, tt, keys, values, weights)

    # ------------------------------------------------------------------ reduce

    def trace_before(self, parts: Sequence[Any], batch: Any, tt: TimeType) -> bool:
        """Is every time of the trace ``parts`` ``<=`` every time of ``batch``? (The cheap
        sufficient test of :func:`all_before`, coordinate by coordinate in a product order,
        with each part's greatest times remembered: a part never changes.) Then no update
        of the trace lifts a time of ``batch`` to a later one, and a reduce need not read its
        history for the interesting times."""
        if not tt.is_product or self.height(batch) == 0:
            return False
        tcols = tt.columns()
        least = _time_bounds(batch, tcols, least=True)
        if least is None:
            return False
        for part in parts:
            greatest = _greatest_times(part, tcols)
            if greatest is not None and any(g > q for g, q in zip(greatest, least, strict=True)):
                return False
        return True

    def key_set(self, batch: Any) -> Any:
        """The distinct key codes of an arranged batch (sorted), for lookups."""
        if type(batch) is Rows:
            return R.key_set(batch)
        # (polars' unique + sort is much faster than numpy.unique on large int64 arrays)
        return batch.get_column(KEY).unique().sort().to_numpy()

    def height(self, batch: Any) -> int:
        return batch.height

    def drop_key(self, batch: Any) -> Any:
        if type(batch) is Rows:
            return batch.project([n for n in batch.names if n != KEY])
        return batch.drop(KEY)

    def interesting_times(
        self, new: pl.DataFrame, history: pl.DataFrame, tt: TimeType, keys: Sequence[str]
    ) -> list[tuple[Time, Batch]]:
        from ddflow.kernels.local_reduce import interesting_times

        return interesting_times(new, history, tt, keys, self.reduce_rows)

    def indexed_history(
        self, parts: Sequence[Any], codes: Any, keys: Sequence[str], tt: TimeType
    ) -> Any:
        """The updates of the keys ``codes`` in the batches ``parts`` of a min/max reduce's
        input, read through the indexes of large batches (:mod:`local_index`); None where
        no batch is worth it (then the caller looks up as usual)."""
        from ddflow.kernels.local_index import IndexedHistory

        return IndexedHistory.read(self, parts, codes, keys, tt)

    def minmax_unchanged(
        self, spec: Any, new: pl.DataFrame, out_history: pl.DataFrame, tt: TimeType
    ) -> Batch:
        from ddflow.kernels.local_reduce import minmax_unchanged

        return minmax_unchanged(spec, new, out_history, tt, self.reduce_rows)

    def distinct_unchanged(self, spec: Any, new: Batch, out_history: Batch, tt: TimeType) -> Any:
        """The ``(KEY, keys)`` of records whose new insertions leave a distinct's output
        as it is (:func:`~ddflow.kernels.local_reduce.distinct_unchanged`)."""
        from ddflow.kernels.local_reduce import distinct_unchanged

        return distinct_unchanged(spec, new, out_history, tt, self.reduce_rows)

    def without_keys(self, batch: Batch, keys: pl.DataFrame) -> Batch:
        """The rows of ``batch`` whose ``(KEY, keys)`` are not among ``keys``' rows."""
        if keys.height == 0:
            return batch
        if type(batch) is Rows:
            drop = keys if type(keys) is Rows else Rows(dict(keys.schema), keys.rows())
            return R.without_keys(batch, drop)
        keys = frame(keys)
        rest = [c for c in keys.columns if c != KEY]
        if (
            len(rest) == 1
            and KEY in keys.columns
            and KEY in batch.columns
            and shares_key(keys, rest)
            and shares_key(batch, rest)
        ):
            # (the codes are the keys: the rows whose code is not among the keys', in NumPy)
            codes = np.unique(keys.get_column(KEY).to_numpy())
            kept = batch.filter(pl.Series(~R.members(codes, batch.get_column(KEY).to_numpy())))
        else:
            kept = batch.join(
                keys, on=keys.columns, how="anti", nulls_equal=True, maintain_order="left"
            )
        if KEY in batch.columns and batch.get_column(KEY).flags["SORTED_ASC"]:
            return kept.with_columns(kept.get_column(KEY).set_sorted())  # (still sorted)
        return kept

    def held_rows(self, batch: Any) -> int:
        """The rows a read holds of its own: an indexed history's light part (its heavy keys'
        rows stay in the trace's batches, read through their indexes)."""
        return int(batch.light.height) if hasattr(batch, "subset") else int(batch.height)

    def union_reads(self, a: Any, b: Any, codes: Any) -> Any:
        """Two reads of one trace for disjoint sets of keys, as one read of their union
        ``codes`` (sorted): concatenated, or an indexed history with the other read's
        updates (or history) added. (``b`` may also be updates of ``a``'s keys inserted in
        the trace since ``a`` was read, a batch: added the same way.)"""
        if hasattr(a, "union"):
            return a.union(b, codes)
        if hasattr(b, "union"):
            return b.union(a, codes)
        return self.concat([a, b])

    def keys_in(self, batch: Any, codes: Any) -> Any:
        """The updates of ``batch`` (a lookup's result, in any order, or an indexed history)
        whose key code is among ``codes`` (sorted, unique)."""
        if hasattr(batch, "subset"):  # (an IndexedHistory: its keys narrowed)
            return batch.subset(np.asarray(codes, dtype=np.int64))
        if type(batch) is Rows:
            wanted = set(codes.tolist() if isinstance(codes, np.ndarray) else codes)
            k = batch.index(KEY)
            return batch.like([r for r in batch.rows if r[k] in wanted])
        if batch.height == 0:
            return batch
        codes = np.asarray(codes, dtype=np.int64)
        return batch.filter(pl.Series(R.members(codes, batch.get_column(KEY).to_numpy())))

    def time_queries(self, pending: dict[Time, list[pl.DataFrame]], tt: TimeType) -> Batch:
        from ddflow.kernels.local_reduce import time_queries

        return time_queries(pending, tt, self.reduce_rows)

    def reduce_prepare(self, spec: Any, batch: Batch, tt: TimeType) -> Batch:
        from ddflow.kernels.local_reduce import reduce_prepare

        return reduce_prepare(spec, batch, tt)

    def evaluation_slices(
        self, queries: Batch, codes: Any, parts: Sequence[Any]
    ) -> list[tuple[Batch, np.ndarray]] | None:
        """The queries and their key codes ``codes`` (sorted, unique) cut into ranges of keys
        whose updates in the input batches ``parts`` are about
        :data:`~ddflow.kernels.local_reduce.EVALUATE_SLICE_ROWS` each; None when they are
        fewer (one evaluation). A reduce evaluates the ranges one at a time, reading the
        history of each alone: a first epoch queries every key, and its history, read whole,
        would be a copy of the whole trace alive through the evaluation."""
        from ddflow.kernels.local_index import updates_at_most
        from ddflow.kernels.local_reduce import EVALUATE_SLICE_ROWS

        if isinstance(queries, Rows) or len(codes) < 2:
            return None
        codes = np.asarray(codes, dtype=np.int64)
        if updates_at_most(parts, codes) <= EVALUATE_SLICE_ROWS:
            return None  # (a small trace, or a small step's keys: no large batch searched)
        reach = np.zeros(len(codes), dtype=np.int64)
        for p in parts:
            lo, hi = (
                R.batch_ranges(p, codes)
                if type(p) is pl.DataFrame
                else R.key_ranges(_codes(p), codes)
            )
            reach += hi - lo
        np.cumsum(reach, out=reach)
        total = int(reach[-1])
        if total <= EVALUATE_SLICE_ROWS:
            return None
        # the first code of each range: past the one at which the range's share is reached
        cuts = np.unique(balanced_cuts(reach, EVALUATE_SLICE_ROWS) + 1)
        cuts = cuts[cuts < len(codes)]
        key = queries.get_column(KEY).to_numpy()
        at = np.searchsorted(codes[cuts], key, side="right")  # each query's range
        return [
            (queries.filter(pl.Series(at == i)), part)
            for i, part in enumerate(np.split(codes, cuts))
            if len(part)
        ]

    def reduce_evaluate(
        self,
        spec: Any,
        queries: pl.DataFrame,
        history: pl.DataFrame,
        out_history: pl.DataFrame,
        tt: TimeType,
    ) -> Batch:
        from ddflow.kernels.local_reduce import reduce_evaluate

        return reduce_evaluate(spec, queries, history, out_history, tt, self.reduce_rows)


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
    q = queries.select([*keys, *qcols])
    summed = [DIFF, *weights]
    if all_before(h, q, tt, tcols, qcols):
        # every history time is <= every query time: consolidate first, then pair with queries
        acc = grouped_sums(h, [*keys, *values], summed, drop_zero=True)
        return join_on_key(q, acc, keys).select([*keys, *qcols, *values, DIFF, *weights])
    j = join_on_key(q, h, keys)
    j = j.filter(le_expr(tt, tcols, qcols))
    return grouped_sums(j, [*keys, *qcols, *values], summed, drop_zero=True)


#: a trace's lookup of at most this many keys reads its batches in one pass of searches per
#: key (:func:`local_rows.lookup_few`): the counting pass of :meth:`LocalKernels.lookup_parts`
#: would only add to a small step's fixed cost
FEW_CODES = 16

#: frames of at least this many rows are summed by sorting a packed code (:func:`grouped_sums`)
PACKED_SUM_ROWS = 50_000

#: a lookup of at least one key per this many rows of a batch of at least LOOKUP_SCAN_ROWS
#: rows filters the whole batch (one hashed pass) instead of searching key by key
LOOKUP_SCAN = 64
LOOKUP_SCAN_ROWS = 65_536

#: packed codes falling at most this many times from one row to the next are a few sorted runs
#: (a merge of arranged batches): a stable sort merges the runs in about linear time, where a
#: general sort costs several times more; codes with more falls take Polars' parallel sort
SORTED_RUNS = 64


def grouped_sums(
    frame: pl.DataFrame, group: Sequence[str], sums: Sequence[str], drop_zero: bool = False
) -> pl.DataFrame:
    """``frame.group_by(group).agg(sums summed)``, rows in no particular order (but sorted
    by ``group``, first column most significant, when packed); with ``drop_zero``, without
    the groups whose sums are all zero.

    A large frame whose group and sum columns are all integers without nulls, and whose group
    columns' ranges multiply to less than ``2**62``, is summed without hashing: each row's
    group is packed into one int64 (mixed radix over the columns' ranges, so that the codes
    sort as the groups do), the codes are sorted, and each run of equal codes is summed (NumPy
    ``add.reduceat``). The groups' columns are then decoded from their codes, not gathered
    from the frame. With one summed column whose range fits in the code too (a diff of +1
    and -1), it is the code's last digit: the codes are sorted themselves, with no permutation
    to gather by. This is two to three times as fast as Polars' hash group-by on the reduce's
    histories and the trace merges; anything else takes the group-by. Arranged batches are
    sorted this way, so a merge of several is a few sorted runs (:data:`SORTED_RUNS`): a
    frame already sorted is not reordered at all, and one without repeated groups is not
    summed."""
    if frame.height >= PACKED_SUM_ROWS and group:
        packing = _pack(frame, group, sums)
        if packing is not None:
            return _packed_sums(frame, packing, group, sums, drop_zero)
    elif 0 < frame.height <= ARRAY_SUM_ROWS and group:
        summed = _array_sums(frame, group, sums, drop_zero)
        if summed is not None:
            return summed
    out = frame.group_by(list(group)).agg([pl.col(w).sum() for w in sums])
    return out.filter(_any_nonzero(sums)) if drop_zero else out


#: frames of at most this many rows are summed in NumPy alone (:func:`_array_sums`)
ARRAY_SUM_ROWS = 20_000


def _array_sums(
    frame: pl.DataFrame, group: Sequence[str], sums: Sequence[str], drop_zero: bool
) -> pl.DataFrame | None:
    """:func:`grouped_sums` of a small frame in NumPy: the groups packed as by
    :func:`_pack`, but with NumPy's bounds and a sort of the codes (or, where the ranges do
    not fit in a code, as a hashed key code's do not, the columns sorted together), the rows
    of each group's first taken and the sums put beside them. A Polars group-by of a few
    thousand rows costs two to five times as much, mostly its fixed cost. Sorted by
    ``group``. None unless every column is an integer column without nulls (the sums
    ``Int64``)."""
    if not _packable(frame, group, sums):
        return None
    columns = [frame.get_column(c).to_numpy() for c in group]
    rows, totals = _sorted_sums(columns, [frame.get_column(w).to_numpy() for w in sums], drop_zero)
    return pl.DataFrame(
        {
            **{n: c[rows] for n, c in zip(group, columns, strict=True)},
            **dict(zip(sums, totals, strict=True)),
        },
        schema={n: frame.schema[n] for n in (*group, *sums)},
    )


def _sorted_sums(
    columns: list[np.ndarray], weights: list[np.ndarray], drop_zero: bool
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The groups of the rows' ``columns`` (integers), in order of the columns (the first
    most significant), and the ``weights`` summed per group: the position of a row of each
    group, and the sums. The groups are packed as by :func:`_pack` and their codes sorted
    (or, where the ranges do not fit in a code, as a hashed key code's do not, the columns
    sorted together); with ``drop_zero``, without the groups whose sums are all zero."""
    packing = _radix(
        [(int(c.min()), int(c.max())) for c in columns], columns.__getitem__, len(columns[0])
    )
    if packing is not None:
        order = np.argsort(packing.code, kind="stable")
        starts = run_starts(packing.code[order])
    else:  # (ranges too wide to pack: the columns sorted together, the last key first)
        order = np.lexsort(columns[::-1])
        starts = run_starts(*(c[order] for c in columns))
    totals = [np.add.reduceat(w[order], starts) for w in weights]
    rows = order[starts]
    keep = _kept(totals, drop_zero)
    if keep is not None:
        rows, totals = rows[keep], [t[keep] for t in totals]
    return rows, totals


#: merges of at most this many updates are done in NumPy where they can be
#: (:func:`_merge_arrays`)
MERGE_ARRAY_ROWS = 20_000

#: column types a merge in NumPy holds exactly as int64
_INT64_EXACT = frozenset({pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32})


def _merge_arrays(
    batches: Sequence[Batch], tt: TimeType, since: Sequence[Time], sums: Sequence[str]
) -> pl.DataFrame | None:
    """:meth:`LocalKernels.merge` of a few thousand updates in NumPy: the columns of every
    batch (a frame's through its :class:`~ddflow.kernels.local_rows.ColumnCache`, rows
    converted at once), the times advanced to the frontier's floor, the rows sorted by key
    code and then by the other columns, and each run of equal rows' diffs summed. A trace's
    merges of a few hundred to a few thousand updates otherwise cost a millisecond or more
    in Polars' fixed costs (a frame made of each small batch, the concatenation, the
    advance, the sums, the sort), whatever their size. None unless every column is an
    integer column without nulls, the diff alone is summed, and the order is a product
    one."""
    first = next((b for b in batches if b.height), None)
    if first is None or tuple(sums) != (DIFF,) or not tt.is_product:
        return None
    schema = dict(first.schema)
    names = list(schema)
    if KEY not in schema or any(t not in _INT64_EXACT for t in schema.values()):
        return None
    columns: list[list[np.ndarray]] = [[] for _ in names]
    for b in batches:
        if not b.height:
            continue
        if type(b) is Rows:
            if b.schema != schema:
                return None
            try:
                block = np.array(b.rows, dtype=np.int64)
            except (TypeError, ValueError, OverflowError):  # (a null)
                return None
            for i in range(len(names)):
                columns[i].append(block[:, i])
        else:
            cache = R.ColumnCache.of(cast(pl.DataFrame, b))
            if cache is None or cache.schema != schema:
                return None
            for i, a in enumerate(cache.arrays):
                if not isinstance(a, np.ndarray):
                    return None  # (a column with nulls)
                columns[i].append(a)
    arrays = [np.concatenate(c) if len(c) > 1 else c[0] for c in columns]
    if since:
        floor = tt.advance_floor(since)
        assert floor is not None
        for c, f in zip(tt.columns(), floor, strict=True):
            i = names.index(c)
            arrays[i] = np.maximum(arrays[i], f)
    d, k = names.index(DIFF), names.index(KEY)
    # (grouped by every column but the diff, the key code first: sorted by it)
    rows, (diff,) = _sorted_sums(
        [arrays[k], *(a for i, a in enumerate(arrays) if i not in (d, k))], [arrays[d]], True
    )
    return pl.DataFrame(
        [
            pl.Series(n, diff if i == d else arrays[i][rows], dtype=schema[n])
            for i, n in enumerate(names)
        ]
    ).with_columns(pl.col(KEY).set_sorted())


def run_starts(*columns: np.ndarray) -> np.ndarray:
    """The first position of each run of equal rows of ``columns`` (sorted together)."""
    change = np.zeros(len(columns[0]), dtype=bool)
    change[:1] = True
    for c in columns:
        change[1:] |= c[1:] != c[:-1]
    starts: np.ndarray = np.flatnonzero(change)
    return starts


class _Packing:
    """The group of each row packed in one int64: ``code``, the sum over the group's columns
    of ``(value - low) * stride`` (the last column's stride 1); ``digits`` the ``(low,
    stride, span)`` of each column; every code below ``width``."""

    __slots__ = ("code", "digits", "width")

    def __init__(self, code: np.ndarray, digits: list[tuple[int, int, int]], width: int) -> None:
        self.code, self.digits, self.width = code, digits, width

    def decode(
        self,
        frame: pl.DataFrame,
        group: Sequence[str],
        codes: np.ndarray,
        sums: Sequence[str],
        totals: list[np.ndarray],
    ) -> pl.DataFrame:
        """The frame of the groups of ``codes`` (``frame``'s names and types) with their
        ``totals`` of ``sums``. Computed by Polars, into buffers of its own: a frame built on
        NumPy arrays keeps them (no copy), and arrays NumPy allocated and held in a trace's
        batches fragment the C heap (the peak RSS of a first epoch rose by 150 MB)."""
        code = pl.col("__code")
        columns = []
        for name, (low, stride, span) in zip(group, self.digits, strict=True):
            value = code // stride if stride > 1 else code + 0  # (+ 0: a copy)
            if stride * span < self.width:  # (the first column's digit needs no modulo)
                value = value % span
            if low:
                value = value + low
            columns.append(value.cast(frame.schema[name]).alias(name))
        columns.extend((pl.col(w) + 0).cast(frame.schema[w]) for w in sums)
        data = {"__code": codes, **dict(zip(sums, totals, strict=True))}
        return pl.DataFrame(data).select(columns)


def _packed_sums(
    frame: pl.DataFrame,
    packing: _Packing,
    group: Sequence[str],
    sums: Sequence[str],
    drop_zero: bool,
) -> pl.DataFrame:
    """:func:`grouped_sums` of a frame whose groups are packed."""
    code = packing.code
    falls = int(np.count_nonzero(code[1:] < code[:-1]))
    if falls and len(sums) == 1:
        folded = _folded_sums(frame, packing, sums[0], falls)
        if folded is not None:
            codes, total = folded
            return _decoded(frame, packing, group, codes, sums, [total], _kept([total], drop_zero))
    order: np.ndarray | None = None  # the rows in code order (None: as they are)
    if falls > SORTED_RUNS:
        order = pl.Series(code).arg_sort().to_numpy()
    elif falls:
        order = np.argsort(code, kind="stable")
    ordered = code if order is None else code[order]
    repeated = ordered[1:] == ordered[:-1]
    starts = None if not repeated.any() else np.flatnonzero(~np.concatenate(([False], repeated)))
    totals = []
    for w in sums:
        values = frame.get_column(w).to_numpy()
        if order is not None:
            values = values[order]
        totals.append(values if starts is None else np.add.reduceat(values, starts))
    keep = _kept(totals, drop_zero)
    if order is None and starts is None and keep is None:
        return frame.select([*group, *sums])  # sorted, no group repeated, none dropped
    codes = ordered if starts is None else ordered[starts]
    return _decoded(frame, packing, group, codes, sums, totals, keep)


def _folded_sums(
    frame: pl.DataFrame, packing: _Packing, w: str, falls: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct codes (sorted) and the sum of ``w`` at each, by sorting the codes with
    ``w`` folded in as their last digit; None when its range does not fit."""
    values = frame.get_column(w).to_numpy()
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if packing.width * span >= 2**62:
        return None
    # (in place where it can be: the frames summed are the largest a step handles)
    codes = packing.code
    packing.code = np.empty(0, dtype=np.int64)  # (not needed after: not held twice)
    codes *= span
    codes += values
    if low:
        codes -= low
    if falls > SORTED_RUNS:
        series = pl.Series(codes)
        del codes
        codes = series.sort().to_numpy()
        del series
    else:
        codes.sort(kind="stable")  # (merges the sorted runs)
    groups = codes // span  # (a new array: a sorted series' array is read-only)
    repeated = groups[1:] == groups[:-1]
    if not repeated.any():
        digit = groups * span
        np.subtract(codes, digit, out=digit)
        if low:
            digit += low
        return groups, digit
    starts = np.flatnonzero(~np.concatenate(([False], repeated)))
    del repeated
    heads = groups[starts]
    del groups
    # each group's sum without an array of the digits (a third array the size of the frame):
    # the sum of its codes less its count times its own code's part. Integer arithmetic
    # wraps modulo 2**64, so the result is exact whenever the sum itself fits in an int64
    # (as a sum of the digits would be)
    counts = np.diff(starts, append=len(codes))
    total = np.add.reduceat(codes, starts)
    total -= heads * span * counts
    if low:
        total += low * counts
    return heads, total


def _decoded(
    frame: pl.DataFrame,
    packing: _Packing,
    group: Sequence[str],
    codes: np.ndarray,
    sums: Sequence[str],
    totals: list[np.ndarray],
    keep: np.ndarray | None,
) -> pl.DataFrame:
    """The frame of the groups ``codes`` with their ``totals``, only those in ``keep`` (a
    mask; None: all)."""
    if keep is not None:
        codes, totals = codes[keep], [t[keep] for t in totals]
    return packing.decode(frame, group, codes, sums, totals)


def _kept(totals: list[np.ndarray], drop_zero: bool) -> np.ndarray | None:
    """With ``drop_zero``, the mask of the groups whose sums are not all zero; None when
    every group stays."""
    if not drop_zero:
        return None
    keep = totals[0] != 0
    for t in totals[1:]:
        keep |= t != 0
    return None if keep.all() else keep


def _any_nonzero(sums: Sequence[str]) -> pl.Expr:
    return pl.any_horizontal([pl.col(w) != 0 for w in sums])


def _pack(frame: pl.DataFrame, group: Sequence[str], sums: Sequence[str]) -> _Packing | None:
    """The groups of the rows packed (:class:`_Packing`): codes equal exactly when the rows'
    ``group`` values are equal; None when a column is not an integer column without nulls or
    the ranges do not fit."""
    if not _packable(frame, group, sums):
        return None
    bounds = frame.select(
        [pl.col(c).min().alias(f"lo{i}") for i, c in enumerate(group)]
        + [pl.col(c).max().alias(f"hi{i}") for i, c in enumerate(group)]
    ).row(0)
    n = len(group)
    return _radix(
        [(int(bounds[i]), int(bounds[n + i])) for i in range(n)],
        lambda i: frame.get_column(group[i]).to_numpy(),
        frame.height,
    )


def _packable(frame: pl.DataFrame, group: Sequence[str], sums: Sequence[str]) -> bool:
    """Are the group columns integers without nulls, and the summed ones ``Int64`` without
    nulls?"""
    schema = frame.schema
    return all(
        schema[c].is_integer() and frame.get_column(c).null_count() == 0 for c in group
    ) and all(schema[w] == pl.Int64 and frame.get_column(w).null_count() == 0 for w in sums)


def _radix(
    bounds: list[tuple[int, int]], column: Callable[[int], np.ndarray], n: int
) -> _Packing | None:
    """The ``n`` rows' groups packed in one int64 (:class:`_Packing`), from each group
    column's ``(low, high)`` and its values (``column(i)``, read only when it varies); None
    when a value is beyond int64 or the ranges multiply to ``2**62`` or more."""
    code = np.zeros(n, dtype=np.int64)
    term = np.empty(n, dtype=np.int64)
    digits: list[tuple[int, int, int]] = [(0, 0, 0)] * len(bounds)
    stride = 1
    for i in range(len(bounds) - 1, -1, -1):
        lo, hi = bounds[i]
        span = hi - lo + 1
        if hi >= 2**63 or stride * span >= 2**62:  # (a uint64 beyond int64 or too wide)
            return None
        if span > 1:  # code += (column - lo) * stride, in place
            np.subtract(column(i), lo, out=term, casting="unsafe")
            np.multiply(term, stride, out=term)
            np.add(code, term, out=code)
        digits[i] = (lo, stride, span)
        stride *= span
    return _Packing(code, digits, stride)


def _evaluated(batch: Rows, compiled: Sequence[pl.Expr], tt: TimeType) -> Rows | None:
    """``select`` of a small batch in Python (:mod:`~ddflow.kernels.local_exprs`): each
    expression a plain column or one evaluated row by row; None when one is neither, or an
    ``Int64`` result overflows (Polars then computes the batch)."""
    schema: dict[str, Any] = {}
    fns = []
    for c in compiled:
        column = getattr(c, "_dd_column", None)
        if column is not None:
            source, name = column
            schema[name] = batch.schema[source]
            fns.append(itemgetter(batch.index(source)))
            continue
        built = getattr(c, "_dd_row", None)
        if built is None:
            return None
        name, kind, builder = built
        schema[name] = KIND_TYPES[kind]
        fns.append(builder(batch.index))
    rest = batch.getter([*tt.columns(), DIFF])
    try:
        return Rows(
            R.updates_schema(schema, tt), [(*[f(r) for f in fns], *rest(r)) for r in batch.rows]
        )
    except Overflow:
        return None


def share_key(batch: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """An arranged batch whose key code is its one ``Int64`` key column (no nulls) holds the
    code as that column itself (one buffer, not two equal copies): a trace keyed by a node id
    takes a column less memory."""
    if shares_key(batch, keys):
        return batch.with_columns(batch.get_column(keys[0]).alias(KEY).set_sorted())
    return batch


def _codes(batch: Batch) -> np.ndarray:
    """The key codes of an arranged batch (sorted)."""
    if isinstance(batch, Rows):
        return np.asarray(R.codes_of(batch), dtype=np.int64)
    return batch.get_column(KEY).to_numpy()


def _slice(batch: Batch, lo: int, hi: int) -> Batch:
    if isinstance(batch, Rows):
        return batch.like(batch.rows[lo:hi])
    return batch.slice(lo, hi - lo)


def shares_key(batch: pl.DataFrame, keys: Sequence[str]) -> bool:
    """Is the key code of ``batch`` a copy of its one ``Int64`` key column (as
    :meth:`LocalKernels.key_codes` makes it when the column has no nulls)?"""
    return (
        len(keys) == 1
        and batch.schema[keys[0]] == pl.Int64
        and batch.get_column(keys[0]).null_count() == 0
    )


def one_time(batch: Batch, tcols: Sequence[str]) -> Time | None:
    """The time of every row of ``batch`` when they all have the same one, else None (also
    for no row): its least and greatest times (:func:`_time_bounds`) when they are equal."""
    least = _time_bounds(batch, tcols, least=True)
    if least is None or least != _time_bounds(batch, tcols, least=False):
        return None
    return least


def sorted_by_key(batch: pl.DataFrame) -> pl.DataFrame:
    """``batch`` sorted by its key code: as it is when a packed sum left it so (checked, one
    pass), else sorted."""
    key = batch.get_column(KEY)
    if key.is_sorted():
        return batch.with_columns(key.set_sorted())
    return batch.sort(KEY)


def _scanned(batch: Batch, codes: Any) -> bool:
    """Does a lookup of ``codes`` in ``batch`` scan it (keys by the tens of thousands, at
    least one per :data:`LOOKUP_SCAN` rows of a large batch) rather than search it?"""
    return type(batch) is not Rows and len(codes) * LOOKUP_SCAN >= batch.height >= LOOKUP_SCAN_ROWS


def balanced_cuts(reach: np.ndarray, rows: int) -> np.ndarray:
    """Cutting a sequence of weights into ranges of about ``rows`` each (``reach``: their
    running total, ``reach[-1] > 0``): the index at which each range but the last reaches its
    share of the total (as many ranges as ``rows`` divides the total into, rounded up)."""
    total = int(reach[-1])
    n = -(-total // rows)
    return np.searchsorted(reach, total * np.arange(1, n) / n, side="left")


def join_on_key(left: pl.DataFrame, right: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Inner join on ``keys`` (``KEY`` first, then the key columns it codes; nulls equal):
    joined on the one ``KEY`` column, then checked on the others (codes can collide), which is
    several times cheaper than a join on every key column."""
    rest = [k for k in keys if k != KEY]
    if KEY not in keys or not rest:
        return left.join(right, on=list(keys), how="inner", nulls_equal=True)
    j = left.join(right, on=KEY, how="inner", suffix="__r")
    same = [pl.col(k).eq_missing(pl.col(f"{k}__r")) for k in rest]
    return j.filter(pl.all_horizontal(same)).drop([f"{k}__r" for k in rest])


def _time_bounds(batch: Batch, tcols: Sequence[str], least: bool) -> tuple[int, ...] | None:
    """The least (else greatest) value of each time column of ``batch``; None when empty (a
    time column has no null)."""
    if isinstance(batch, Rows):
        if not batch.rows:
            return None
        pick = min if least else max
        at = [batch.index(c) for c in tcols]
        return tuple(pick(r[i] for r in batch.rows) for i in at)
    if batch.height == 0:
        return None
    # (each column's own min or max: a few microseconds, where a select costs a hundred)
    return tuple(
        int(
            batch.get_column(c).min()
            if least  # type: ignore[arg-type]
            else batch.get_column(c).max()
        )
        for c in tcols
    )


def _greatest_times(part: Batch, tcols: Sequence[str]) -> tuple[int, ...] | None:
    """:func:`_time_bounds` (greatest) of a trace's batch, remembered with it (a batch of a
    trace never changes)."""
    if type(part) is Rows:
        got = part._greatest
        if got is None or got[0] != tuple(tcols):
            got = part._greatest = (tuple(tcols), _time_bounds(part, tcols, least=False))
        return got[1]
    known = getattr(part, "_dd_greatest", None)
    if known is None or known[0] != tuple(tcols):
        known = (tuple(tcols), _time_bounds(part, tcols, least=False))
        part._dd_greatest = known  # type: ignore[attr-defined]
    return known[1]


def all_before(
    history: pl.DataFrame,
    queries: pl.DataFrame,
    tt: TimeType,
    tcols: Sequence[str],
    qcols: Sequence[str],
) -> bool:
    """Is every time of ``history`` ``<=`` every time of ``queries``? (A cheap sufficient
    test: the coordinate-wise max of one below the coordinate-wise min of the other, for
    product orders; for lexicographic pairs, compared as pairs.)"""
    if not tt.is_product:
        return False
    if history.height == 0:
        return True
    hi = history.select([pl.col(c).max() for c in tcols]).row(0)
    lo = queries.select([pl.col(c).min() for c in qcols]).row(0)
    return all(a is not None and b is not None and a <= b for a, b in zip(hi, lo, strict=True))
