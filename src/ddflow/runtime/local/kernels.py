"""The local runtime's data plane: batches of updates as Polars DataFrames.

A *batch* is a ``polars.DataFrame`` whose columns are the collection's data columns, then one
``int64`` column per time integer (``__t0``, ``__t1``, ...; see :meth:`TimeType.columns`), then
``__diff`` (``int64``). Every row is one update ``(data, time, diff)``. An *arranged* batch adds
``__key``: an ``int64`` code of the arrangement's key columns (the key itself for a single integer
key, otherwise a row hash), and is sorted by it, so that a lookup of ``k`` keys in a batch of
``n`` rows costs ``O(k log n)`` (``numpy.searchsorted``), or ``O(k)`` where a large batch's codes
are dense enough for a direct index (:func:`~ddflow.runtime.local.rows.dense_offsets`), never a
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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY, NULL_CODE
from ddflow.differential.kernel import Capabilities
from ddflow.errors import SchemaError, function_text
from ddflow.runtime.local import rows as R
from ddflow.runtime.local.changelog import ChangeLog
from ddflow.runtime.local.columnar import (
    accumulate,
    any_nonzero,
    batch_codes,
    evaluated_rows,
    grouped_sums,
    join_exprs,
    merge_arrays,
    one_time,
    scans,
    share_key,
    shares_key,
    slice_batch,
    sorted_by_key,
)
from ddflow.runtime.local.exprs import Overflow, row_builder
from ddflow.runtime.local.native_reducer import NativeReducer, native_applies
from ddflow.runtime.local.reads import CachedReads
from ddflow.runtime.local.reduce_kernels import ReduceKernels
from ddflow.runtime.local.reducer import KernelReducer
from ddflow.runtime.local.region import LocalRegion
from ddflow.runtime.local.rows import Batch, Rows, as_rows, frame, partition_frame
from ddflow.runtime.local.settings import LocalSettings
from ddflow.runtime.native.progress import CheckedTracker, native_tracker
from ddflow.schema.types import show
from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.progress import ProgressGraph, Tracker

if TYPE_CHECKING:
    from ddflow.differential.kernel import ReduceSpec
    from ddflow.differential.operators.join import Arranger
    from ddflow.plan.regions import RegionPlan
    from ddflow.runtime.local.trace import Spine

__all__ = ["LocalKernels"]


class LocalKernels(ReduceKernels):
    """Bulk operations on Polars batches, and on small batches held as Python rows
    (:mod:`ddflow.runtime.local.rows`); one instance per dataflow, stateless.

    ``settings`` (:class:`~ddflow.runtime.local.settings.LocalSettings`) choose each kernel's
    path: the kernels read them, and pass them to the functions they call. Their
    ``small_batch_rows``: batches of at most this many rows are held as rows, and the reduce
    works row by row on steps of up to ``settings.reduce.small_rows`` rows; ``0`` keeps every
    batch columnar (Polars) and every kernel on its columnar path.

    >>> LocalKernels(LocalSettings(small_batch_rows=0)).small_rows
    -1
    """

    name = "local"
    capabilities = Capabilities(
        stepped_merges=True,
        small_tail=True,
        row_batches=True,
        distinct_skips=True,
        partitions=True,
        loop_regions=True,
    )

    def __init__(self, settings: LocalSettings | None = None) -> None:
        self.settings = LocalSettings() if settings is None else settings
        self.trace_settings = self.settings.trace
        self._held_as_rows()

    def set_small_rows(self, small_rows: int) -> None:
        """Hold batches of at most ``small_rows`` rows as rows from now on (``0``: none; the
        settings' ``small_batch_rows``); batches already held either way stay valid."""
        self.settings = replace(self.settings, small_batch_rows=small_rows)
        self._held_as_rows()

    def _held_as_rows(self) -> None:
        small_rows = self.settings.small_batch_rows
        #: batches of at most this many rows are held as rows (-1: none)
        self.small_rows = small_rows if small_rows > 0 else -1
        #: a lookup in a large columnar batch gives rows up to this many (the reduce reads a
        #: key's whole group row by row, and a gather from NumPy views beats Polars' here)
        self.lookup_rows = (
            max(self.small_rows, self.settings.lookups.rows) if small_rows > 0 else -1
        )

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
        from ddflow.expr.nodes import compile_polars

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
            evaluated = evaluated_rows(batch, compiled, tt)
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
        try:
            data = schema.rows_to_frame(rows)
        except SchemaError as e:
            kind, records = "flat_map" if flat else "map", batch.select(src_names)
            raise _returned_error(e, kind, fn, schema, rows, index, records) from None
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
        held = [b for b in nonempty if type(b) is Rows]
        if held:  # (as one batch: beside frames, one frame, not one each)
            names = held[0].names
            rows = held[0].like([r for b in held for r in b.project(names).rows])
            if len(held) == len(nonempty):
                return rows
            nonempty = [rows, *(b for b in nonempty if type(b) is not Rows)]
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
            return batch.filter(any_nonzero(sums))
        # the key code first: a packed sum then leaves an arranged batch sorted by it
        keys = sorted((c for c in batch.columns if c not in sums), key=lambda c: c != KEY)
        out = grouped_sums(batch, keys, sums, self.settings.sums, drop_zero=True)
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
        if total <= self.settings.sums.merge_array_rows:
            merged = merge_arrays(batches, tt, since, sums)
            if merged is not None:
                small: Batch = self._small(share_key(merged, keys))
                return small
        merged = frame(self.advance(self.concat([frame(b) for b in batches]), tt, since))
        if keys and shares_key(merged, keys):
            # the key code is a copy of the key column: summed without it (a column less to
            # pack and gather), then put back
            group = [keys[0], *(c for c in merged.columns if c not in (*sums, KEY, keys[0]))]
            merged = (
                grouped_sums(merged.drop(KEY), group, sums, self.settings.sums, drop_zero=True)
                .with_columns(pl.col(keys[0]).alias(KEY))
                .select(merged.columns)
            )
        else:
            merged = self.consolidate(merged, sums)
        return self._small(share_key(sorted_by_key(merged), keys))

    def merge_cut(
        self, batches: Sequence[Batch], start: int | None, rows: int
    ) -> tuple[list[Batch], int | None]:
        """The next range of keys of a merge in steps
        (:class:`~ddflow.runtime.local.trace.Merging`): the updates of each of ``batches``
        (arranged) with key codes from ``start`` (None: the first) on, about ``rows`` of the
        one with most left and the others' in the same range, never splitting a key; and the
        first code after the range (None: it reached the end)."""
        codes = [batch_codes(b) for b in batches]
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
        return [slice_batch(b, lo, hi) for b, lo, hi in zip(batches, at, ends, strict=True)], cut

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
        return batch if scans(batch, codes, self.settings.lookups) else self.lookup(batch, codes)

    def lookup_parts(self, parts: Sequence[Any], codes: Any, within: bool = False) -> Any:
        """:meth:`lookup` in each batch of a trace, concatenated: as rows when few match in
        all of them (at most ``lookup_rows``), else one frame gathered from NumPy views of the
        batches' columns (no frame per batch, and no rows turned into a frame when
        concatenated with frames). At most ``settings.lookups.few_codes`` keys are searched
        key by key into one list of rows (:func:`~ddflow.runtime.local.rows.lookup_few`).
        ``within``: as :meth:`lookup_within` where a batch would be scanned."""
        from ddflow.runtime.local.index import gather_found

        lookups = self.settings.lookups
        few_codes = lookups.few_codes
        if (
            len(codes) <= few_codes
            and self.lookup_rows >= 0
            and not (within and few_codes * lookups.scan_rows_per_key >= lookups.scan_rows)
        ):
            # (no batch is scanned for so few codes: within changes nothing)
            few = R.lookup_few(parts, codes, self.lookup_rows, lookups)
            if few is not None:
                return few
        if (
            len(codes) <= few_codes
            or self.lookup_rows < 0
            or any(type(p) is not Rows and scans(p, codes, lookups) for p in parts)
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
                got = R.batch_ranges(p, codes, lookups)
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
        lookups = self.settings.lookups
        if scans(batch, codes, lookups):
            # keys by the tens of thousands (a first epoch's reduce reads every key): one
            # hashed pass over the batch costs less than a binary search and a gather per key
            return batch.filter(pl.col(KEY).is_in(pl.Series(codes, dtype=pl.Int64).implode()))
        return self._found_rows(batch, *R.batch_ranges(batch, codes, lookups))

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
        return accumulate(history, queries, tt, keys, values, self.settings.sums, weights)

    # ------------------------------------------------------------------ reduce

    def progress_tracker(
        self,
        graph: ProgressGraph,
        watched: set[int] | None,
        on_demand: set[int],
        merged: set[int],
    ) -> Any:
        """The tracker the settings' ``progress`` names: the core's by default."""
        if self.settings.progress == "native":
            return native_tracker(graph, watched, on_demand, merged)
        if self.settings.progress == "checked":
            return CheckedTracker(graph, watched, on_demand, merged)
        return Tracker(graph, watched, on_demand, merged)

    @property
    def runs_regions(self) -> bool:
        """Whether the settings ask for loops to run whole in the core (``regions``)."""
        return self.settings.regions

    def loop_region(self, plan: RegionPlan) -> LocalRegion:
        """The loop of ``plan`` run whole in the core."""
        return LocalRegion(self, plan)

    def change_log(self) -> ChangeLog:
        """An output's log, holding small epochs' changes as rows until read."""
        return ChangeLog(self.settings.held_epochs)

    def reducer(
        self, spec: ReduceSpec, tt: TimeType, arranger: Arranger, output_empty: Batch
    ) -> KernelReducer | NativeReducer:
        """The native reducer where the settings ask for it and the core covers ``spec``
        (:mod:`~ddflow.runtime.local.native_reducer`), else the Python one over these kernels
        (:mod:`~ddflow.runtime.local.reducer`)."""
        source = dict(self.to_polars(arranger.source_empty).schema)
        if self.settings.reduce.native and native_applies(spec, source):
            return NativeReducer(self, spec, tt, arranger, output_empty)
        return KernelReducer(self, spec, tt, arranger, output_empty)

    def trace(
        self, tt: TimeType, keys: Sequence[str], empty: Any, sums: Sequence[str] = (DIFF,)
    ) -> Spine:
        """A spine of arranged Polars (or row) batches (:mod:`ddflow.runtime.local.trace`)."""
        from ddflow.runtime.local.trace import Spine

        return Spine(self, tt, keys, empty, sums=sums)

    def reduce_reads(
        self, input: Spine, output: Spine, spec: ReduceSpec, tt: TimeType
    ) -> CachedReads:
        """Reads kept between a step's reads (:mod:`ddflow.runtime.local.reads`)."""
        return CachedReads(self, input, output, spec, tt, self.settings.reads)

    def read_holds(self, read: Any, parts: Sequence[Any]) -> bool:
        """Whether the batches a read reads through their indexes (an indexed history's)
        are all among ``parts``; true of a read of rows it holds itself."""
        from ddflow.runtime.local.index import IndexedHistory

        if not isinstance(read, IndexedHistory):
            return True
        return all(any(b is p for p in parts) for b, _, _ in read.indexed)

    def trace_before(self, parts: Sequence[Any], batch: Any, tt: TimeType) -> bool:
        """Is every time of the trace ``parts`` ``<=`` every time of ``batch``?
        (:func:`~ddflow.runtime.local.reduce.times.trace_before`)"""
        from ddflow.runtime.local.reduce.times import trace_before

        return trace_before(parts, batch, tt)

    def key_set(self, batch: Any) -> Any:
        """The distinct key codes of an arranged batch (sorted), for lookups."""
        if type(batch) is Rows:
            return R.key_set(batch)
        # (polars' unique + sort is much faster than numpy.unique on large int64 arrays)
        return batch.get_column(KEY).unique().sort().to_numpy()

    def height(self, batch: Any) -> int:
        return batch.height

    def partition(self, batch: Any, keys: Sequence[str], workers: int) -> list[tuple[int, Any]]:
        """The updates of ``batch`` by the worker that owns their key (the worker of each
        key code, :func:`~ddflow.runtime.local.rows.owner`): non-empty parts only, equal for
        rows and frames."""
        if type(batch) is Rows:
            return R.partition(batch, keys, workers)
        return partition_frame(batch, self.key_codes(batch, keys), workers)

    def drop_key(self, batch: Any) -> Any:
        if type(batch) is Rows:
            return batch.project([n for n in batch.names if n != KEY])
        return batch.drop(KEY)

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


def _returned_error(
    error: SchemaError,
    kind: str,
    fn: Any,
    schema: Any,
    rows: list[Any],
    index: list[int],
    records: pl.DataFrame,
) -> SchemaError:
    """A row function's results that do not fit its schema: the first that does not (each
    checked alone), the function, and the record it was given, rather than the rows'
    positions in a batch."""
    for i, row in enumerate(rows):
        try:
            schema.rows_to_frame([row])
        except SchemaError as alone:
            detail = alone.message.replace(" at row 0", "").replace("row 0 has", "it has")
            return SchemaError(
                f"{function_text(kind, fn)} returned {show(row)} for the record "
                f"{show(records.row(index[i]))}, which does not fit its schema {schema}: "
                f"{detail}"
            )
    return SchemaError(f"{function_text(kind, fn)} returned rows that do not fit: {error.message}")
