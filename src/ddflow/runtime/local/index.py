"""Indexed reads of a min/max reduce's input history (local runtime; a single min or max
keyed by one column, in a product order: see ``ReduceOp._history``).

In label propagation a node receives a proposal from each neighbour at every iteration in
which the neighbour's label changes, so a well-connected node's history in the reduce's input
arrangement holds a great many updates, and every epoch that touches the node reads it again
at each iteration. Most of that reading is not needed:

* the interesting times of a key need its *times*, one row per ``(key, time)``, and whether its
  group exists at a time needs its *count* there, the diffs summed per time;
* a min that stays at or below a bound needs only the key's rows with values up to the bound,
  and a merged batch is sorted by its packed code, which orders a key's rows by value (the
  reduce's input columns are the key, the value, then the times).

A large batch (``indexed_rows`` updates or more,
:class:`~ddflow.runtime.local.settings.IndexSettings`) never changes once built, so for its
*heavy* keys (at least ``heavy_rows`` updates in it) a :class:`BatchIndex` sums the diffs per
``(key, time)`` once, when the batch is first read this way. An :class:`IndexedHistory` is the
input history of a set of keys: the rows of light keys and of small batches, gathered as by a
lookup, and the heavy keys of large batches read through their indexes: times and counts from
the summaries, values up to a bound from the front of the key's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY
from ddflow.runtime.local.columnar import grouped_sums, shares_key
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.rows import (
    ColumnCache,
    Rows,
    batch_ranges,
    frame,
    iter_rows,
    members,
    ranges,
    rowable,
)
from ddflow.runtime.local.rows import lookup as lookup_rows
from ddflow.runtime.local.settings import LocalSettings, LookupSettings
from ddflow.timely.lattice import TimeType

__all__ = ["BatchIndex", "IndexedHistory"]


def _shares_key(batch: pl.DataFrame, keys: Sequence[str]) -> bool:
    """:func:`shares_key`, remembered with the batch (a batch never changes, and a large
    one is asked at every read)."""
    known: tuple[tuple[str, ...], bool] | None = getattr(batch, "_dd_shares", None)
    if known is None or known[0] != tuple(keys):
        known = (tuple(keys), shares_key(batch, keys))
        batch._dd_shares = known  # type: ignore[attr-defined]
    return known[1]


def gather(
    requests: Sequence[tuple[Any, np.ndarray]], schema: dict[str, Any], lookups: LookupSettings
) -> pl.DataFrame:
    """The updates of the keys ``codes`` of each ``(batch, codes)`` of a trace, as one frame:
    gathered from NumPy views of a large frame's columns (:class:`ColumnCache`), taken from
    the tuples of a small batch, put in Polars once (a lookup per batch would give rows or
    frames, converted when concatenated)."""
    found: list[tuple[Any, Any]] = []
    for batch, codes in requests:
        if type(batch) is Rows:
            found.append((batch, lookup_rows(batch, codes)))
        elif batch.height:
            found.append((batch, batch_ranges(batch, codes, lookups)))
    return gather_found(found, schema)


def gather_found(found: Sequence[tuple[Any, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """:func:`gather` of what a lookup found in each batch: for a frame, the ranges ``(lo,
    hi)`` of its rows (:func:`~ddflow.runtime.local.rows.batch_ranges`); for rows, the rows
    themselves. Each column is gathered into one array (no pieces concatenated afterwards),
    and a column that views the same buffer as an earlier one (a key code that is its key
    column) is copied from that one's gathered values, not gathered again."""
    names = list(schema)
    rows: list[tuple[Any, ...]] = []
    frames: list[pl.DataFrame] = []
    takes: list[tuple[ColumnCache, np.ndarray]] = []
    for batch, got in found:
        if type(batch) is Rows:
            rows.extend(got.rows if got.names == tuple(names) else got.project(names).rows)
            continue
        lo, hi = got
        idx = ranges(lo, hi - lo)
        if len(idx) == 0:
            continue
        cache = ColumnCache.of(batch)  # (NumPy views of the columns, as a lookup uses)
        if cache is None:
            frames.append(batch[idx][names])
        else:
            takes.append((cache, idx))
    if takes:
        frames.append(pl.DataFrame(_gathered(takes, names, schema)))
    if rows:
        frames.append(pl.DataFrame(rows, schema=schema, orient="row"))
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames) if len(frames) > 1 else frames[0]


def _gathered(
    takes: Sequence[tuple[ColumnCache, np.ndarray]], names: Sequence[str], schema: dict[str, Any]
) -> list[pl.Series]:
    """The rows at positions ``idx`` of each ``(cache, idx)``, in order, column by column."""
    bounds = np.cumsum([0, *(len(idx) for _, idx in takes)])
    columns = [dict(zip(cache.schema, cache.arrays, strict=True)) for cache, _ in takes]
    out: dict[str, Any] = {}
    for name in names:
        arrays = [c[name] for c in columns]
        if not all(isinstance(a, np.ndarray) and a.dtype == arrays[0].dtype for a in arrays):
            out[name] = _joined(
                name,
                [
                    a[idx] if isinstance(a, np.ndarray) else a.gather(idx)
                    for a, (_, idx) in zip(arrays, takes, strict=True)
                ],
                schema[name],
            )
            continue
        into = np.empty(int(bounds[-1]), dtype=arrays[0].dtype)
        for i, (a, (cache, idx)) in enumerate(zip(arrays, takes, strict=True)):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            same = cache.copies.get(name)
            done = out.get(same) if same is not None else None
            if isinstance(done, np.ndarray):
                into[lo:hi] = done[lo:hi]  # (the same values, gathered already)
            else:
                np.take(a, idx, out=into[lo:hi])
        out[name] = into
    return [
        pl.Series(name, v, dtype=schema[name]) if isinstance(v, np.ndarray) else v
        for name, v in out.items()
    ]


def _joined(name: str, pieces: list[Any], dtype: Any) -> pl.Series:
    if all(isinstance(p, np.ndarray) for p in pieces):
        return pl.Series(
            name, np.concatenate(pieces) if len(pieces) > 1 else pieces[0], dtype=dtype
        )
    return pl.concat(
        [
            p.alias(name) if isinstance(p, pl.Series) else pl.Series(name, p, dtype=dtype)
            for p in pieces
        ]
    )


class BatchIndex:
    """The heavy keys of a large arranged batch (sorted by key code), with the positions of
    their rows, and their diffs summed per ``(key, time)``; ``settings.index`` say which keys
    are heavy (``heavy_rows``) and how many rows are summed at a time (``summary_rows``)."""

    __slots__ = (
        "_by_value",
        "_values",
        "codes",
        "heavy",
        "hi",
        "light_max",
        "lo",
        "s_codes",
        "s_diff",
        "s_times",
    )

    def __init__(self, batch: pl.DataFrame, tt: TimeType, settings: LocalSettings) -> None:
        tcols = tt.columns()
        heavy_rows, summary_rows = settings.index.heavy_rows, settings.index.summary_rows
        codes = batch.get_column(KEY).to_numpy()
        self.codes = codes
        n = len(codes)
        starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
        lengths = np.diff(np.append(starts, n))
        heavy = lengths >= heavy_rows
        self.light_max = heavy_rows - 1  # (the most updates a key not heavy has)
        self.heavy = codes[starts[heavy]]
        self.lo = starts[heavy]
        self.hi = self.lo + lengths[heavy]
        # the summary, a range of heavy keys at a time (about summary_rows rows each: the
        # rows gathered and their sort are the largest temporaries of a first epoch's read)
        columns = batch.select([KEY, *tcols, DIFF])
        reach = np.cumsum(lengths[heavy])
        cuts = (
            np.searchsorted(
                reach, np.arange(summary_rows, int(reach[-1]), summary_rows), side="right"
            )
            if len(reach)
            else np.zeros(0, dtype=np.int64)
        )
        parts = []
        for a, b in zip(np.concatenate(([0], cuts)), np.append(cuts, len(self.lo)), strict=True):
            if b <= a:
                continue
            rows = columns[ranges(self.lo[a:b], lengths[heavy][a:b])]
            # (zero sums kept: still times)
            summary = grouped_sums(rows, [KEY, *tcols], [DIFF], settings.sums)
            del rows
            if not summary.get_column(KEY).is_sorted():
                summary = summary.sort(KEY)
            parts.append([summary.get_column(c).to_numpy() for c in (KEY, *tcols, DIFF)])
        if not parts:
            parts = [[np.zeros(0, dtype=np.int64) for _ in (KEY, *tcols, DIFF)]]
        joined = [np.concatenate(c) if len(parts) > 1 else c[0] for c in zip(*parts, strict=True)]
        self.s_codes, self.s_times, self.s_diff = joined[0], joined[1:-1], joined[-1]
        self._by_value: dict[str, bool] = {}
        self._values: dict[str, np.ndarray] = {}

    @staticmethod
    def of(batch: pl.DataFrame, tt: TimeType, settings: LocalSettings) -> BatchIndex:
        """The batch's index, built on first use (with these settings) and kept with the
        batch."""
        index = BatchIndex.built(batch)
        if index is None:
            index = BatchIndex(batch, tt, settings)
            batch._dd_index = index  # type: ignore[attr-defined]
        return index

    @staticmethod
    def built(batch: Any) -> BatchIndex | None:
        """The batch's index if one was built, else None (none is built)."""
        index: BatchIndex | None = getattr(batch, "_dd_index", None)
        return index

    def values(self, batch: pl.DataFrame, column: str) -> np.ndarray | None:
        """The column as int64 if each key's rows are sorted by it (else None)."""
        if column not in self._by_value:
            s = batch.get_column(column)
            ok = s.dtype.is_integer() and s.dtype != pl.UInt64 and s.null_count() == 0
            if ok:
                v = s.cast(pl.Int64).to_numpy()
                c = self.codes
                ok = bool(np.all((c[1:] != c[:-1]) | (v[1:] >= v[:-1])))
                if ok:
                    self._values[column] = v
            self._by_value[column] = ok
        return self._values.get(column)

    def summary_rows(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The summary rows of ``codes`` (heavy keys of this batch): their positions in the
        summary, and for each the index of its code in ``codes``."""
        lo = np.searchsorted(self.s_codes, codes, side="left")
        hi = np.searchsorted(self.s_codes, codes, side="right")
        counts = hi - lo
        return ranges(lo, counts), np.repeat(np.arange(len(codes)), counts)

    def rows_at_most(self, codes: np.ndarray) -> int:
        """A bound on the updates of ``codes`` (sorted, unique) in the batch, from the index
        alone: the heavy ones' rows, and the most a key not heavy has for each other code."""
        if len(self.heavy) == 0:
            return len(codes) * self.light_max
        at = np.minimum(np.searchsorted(self.heavy, codes), len(self.heavy) - 1)
        found = self.heavy[at] == codes
        heavy_rows = int((self.hi[at[found]] - self.lo[at[found]]).sum())
        return heavy_rows + int(len(codes) - np.count_nonzero(found)) * self.light_max

    def holds_heavy(self, codes: np.ndarray) -> bool:
        """Whether any of ``codes`` (a few) is a heavy key of this batch: a search per code
        (the arrays :func:`members` makes cost more than the search for one or two)."""
        heavy = self.heavy
        n = len(heavy)
        for c in codes.tolist():
            at = int(heavy.searchsorted(c))
            if at < n and heavy[at] == c:
                return True
        return False

    def key_rows(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and one-past-last row of each of ``codes`` (heavy keys of this batch)."""
        at = np.searchsorted(self.heavy, codes)
        return self.lo[at], self.hi[at]


def updates_at_most(parts: Sequence[Any], codes: np.ndarray) -> int:
    """A bound on the updates of ``codes`` (sorted, unique) in the batches ``parts``, with no
    search of a large batch: each batch's size, or less where the batch's index was built
    (:meth:`BatchIndex.rows_at_most`, a search in its heavy keys)."""
    bound = 0
    for p in parts:
        index = BatchIndex.built(p) if type(p) is pl.DataFrame else None
        bound += p.height if index is None else min(p.height, index.rows_at_most(codes))
    return bound


class IndexedHistory:
    """The input history of the keys ``codes`` (sorted, unique) in the trace ``parts``, read
    through the indexes of large batches where the keys are heavy (see the module)."""

    def __init__(
        self,
        kernels: LocalKernels,
        tt: TimeType,
        keys: Sequence[str],
        codes: np.ndarray,
        light: pl.DataFrame,
        indexed: list[tuple[pl.DataFrame, BatchIndex, np.ndarray]],
        schema: dict[str, Any],
    ) -> None:
        self.kernels = kernels
        self.tt = tt
        self.keys = list(keys)
        self.codes = codes
        #: the updates read whole: of small batches, and of the keys light in large ones
        self.light = light
        #: (batch, its index, the keys of this history heavy in it)
        self.indexed = indexed
        self.schema = schema

    @staticmethod
    def read(
        kernels: LocalKernels, parts: Sequence[Any], codes: Any, keys: Sequence[str], tt: TimeType
    ) -> IndexedHistory | None:
        """The history of ``codes`` (sorted, unique) in the trace ``parts``; None when no key
        is heavy in a large batch, or the keys are many (a first epoch reads every key, and
        every row anyway): then a lookup does as well. The kernels' settings say which
        batches are large and which keys heavy (``index``), and how many keys are many (those
        a lookup would scan a batch for: ``lookups.scan_rows_per_key``)."""
        s = kernels.settings
        indexed_rows, per_key = s.index.indexed_rows, s.lookups.scan_rows_per_key
        codes = np.asarray(codes, dtype=np.int64)
        large = [
            type(p) is pl.DataFrame
            and p.height >= indexed_rows
            and len(codes) * per_key < p.height
            and _shares_key(p, keys)
            for p in parts
        ]
        if not any(large):
            return None
        if len(codes) <= s.index.few_heavy_codes and not any(
            BatchIndex.of(p, tt, s).holds_heavy(codes)
            for p, big in zip(parts, large, strict=True)
            if big
        ):
            return None  # (a small step's keys, light everywhere: as members below, say)
        hits = [
            members(BatchIndex.of(p, tt, s).heavy, codes) if big else None
            for p, big in zip(parts, large, strict=True)
        ]
        if not any(h is not None and h.any() for h in hits):
            return None
        light: list[tuple[Any, np.ndarray]] = []
        indexed = []
        for p, hit in zip(parts, hits, strict=True):
            if hit is None or not hit.any():
                light.append((p, codes))
                continue
            indexed.append((p, BatchIndex.of(p, tt, s), codes[hit]))
            if not hit.all():
                light.append((p, codes[~hit]))
        schema = dict(parts[0].schema)
        light_rows = gather(light, schema, s.lookups)
        return IndexedHistory(kernels, tt, keys, codes, light_rows, indexed, schema)

    @property
    def height(self) -> int:
        """The number of updates of these keys."""
        n = self.light.height
        for _, index, codes in self.indexed:
            lo, hi = index.key_rows(codes)
            n += int((hi - lo).sum())
        return n

    def rows(self, codes: np.ndarray | None = None) -> pl.DataFrame:
        """Every update of the keys (of ``codes``, a sorted subset, if given)."""
        light = self.light
        if codes is not None:
            light = light.filter(pl.col(KEY).is_in(pl.Series(codes, dtype=pl.Int64).implode()))
        heavy = [
            (batch, want)
            for batch, _, keys in self.indexed
            if len(want := keys if codes is None else keys[members(codes, keys)])
        ]
        if not heavy:
            return light
        gathered = gather(heavy, self.schema, self.kernels.settings.lookups)
        return pl.concat([light, gathered[light.columns]])

    def row_tuples(self) -> Rows | pl.DataFrame:
        """:meth:`rows` as :class:`Rows` (for the row path of a small evaluation): the heavy
        keys' rows taken from the NumPy views of their batches' columns straight into tuples,
        without a frame in between; a frame if the schema has no row form."""
        names = list(self.schema)
        if not rowable(self.schema):
            return self.rows()
        rows = list(iter_rows(self.light, names))
        for batch, index, codes in self.indexed:
            lo, hi = index.key_rows(codes)
            idx = ranges(lo, hi - lo)
            cache = ColumnCache.of(batch)
            rows.extend(batch[idx][names].rows() if cache is None else cache.take(idx, names).rows)
        return Rows(self.schema, rows)

    def key_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Key codes and the number of updates each stands for (a code may repeat): every row
        of the light part once, and each heavy key of a batch with its rows there."""
        codes = [self.light.get_column(KEY).to_numpy()]
        weights = [np.ones(len(codes[0]), dtype=np.int64)]
        for _, index, heavy in self.indexed:
            lo, hi = index.key_rows(heavy)
            codes.append(heavy)
            weights.append(hi - lo)
        return np.concatenate(codes), np.concatenate(weights)

    def sliced(self, bounds: np.ndarray, i: int) -> IndexedHistory:
        """The keys of this history with ``i`` of ``bounds`` (sorted) at or below their code,
        read through the same indexes."""

        def within(codes: np.ndarray) -> np.ndarray:
            at: np.ndarray = np.searchsorted(bounds, codes, side="right") == i
            return at

        indexed = [
            (batch, index, heavy[at])
            for batch, index, heavy in self.indexed
            if (at := within(heavy)).any()
        ]
        light = self.light.filter(pl.Series(within(self.light.get_column(KEY).to_numpy())))
        return IndexedHistory(
            self.kernels,
            self.tt,
            self.keys,
            self.codes[within(self.codes)],
            light,
            indexed,
            self.schema,
        )

    def subset(self, codes: np.ndarray) -> IndexedHistory:
        """The history of ``codes`` (a sorted subset of these keys), through the same
        indexes."""
        light = self.light
        if light.height:
            light = light.filter(pl.Series(members(codes, light.get_column(KEY).to_numpy())))
        indexed = [
            (batch, index, heavy[at])
            for batch, index, heavy in self.indexed
            if (at := members(codes, heavy)).any()
        ]
        return IndexedHistory(self.kernels, self.tt, self.keys, codes, light, indexed, self.schema)

    def union(self, other: Any, codes: Any) -> IndexedHistory:
        """This history and that of other keys (an indexed history of the same trace, or
        their updates read whole, all light) as one history of ``codes`` (both sets of
        keys, sorted)."""
        codes = np.asarray(codes, dtype=np.int64)
        if not isinstance(other, IndexedHistory):
            rows = frame(other)
            light = (
                self.light
                if rows.height == 0
                else pl.concat([self.light, rows.select(self.light.columns)])
            )
            return IndexedHistory(
                self.kernels, self.tt, self.keys, codes, light, self.indexed, self.schema
            )
        indexed = list(self.indexed)
        for batch, index, heavy in other.indexed:
            at = next((i for i, (b, _, _) in enumerate(indexed) if b is batch), None)
            if at is None:
                indexed.append((batch, index, heavy))
            else:
                indexed[at] = (batch, index, np.union1d(indexed[at][2], heavy))
        return IndexedHistory(
            self.kernels,
            self.tt,
            self.keys,
            codes,
            pl.concat([self.light, other.light.select(self.light.columns)]),
            indexed,
            self.schema,
        )

    def time_arrays(self) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """The key and the time columns of every update of the keys, one entry per ``(key,
        time)`` at least, as int64 arrays (for interesting times); None when the light part's
        key column is not an ``Int64`` column without nulls."""
        key = self.keys[0]
        light = self.light
        if not shares_key(light, [key]):
            return None
        tcols = self.tt.columns()
        codes = [light.get_column(key).to_numpy()]
        times = [[light.get_column(c).to_numpy()] for c in tcols]
        for _, index, heavy in self.indexed:
            at, _ = index.summary_rows(heavy)
            codes.append(index.s_codes[at])
            for got, t in zip(times, index.s_times, strict=True):
                got.append(t[at])
        return np.concatenate(codes), [np.concatenate(t) for t in times]

    def times(self, cols: Sequence[str]) -> Any:
        """``cols`` (the key code, the key, the times) of every update of the keys, one row per
        ``(key, time)`` at least (for interesting times); rows when few (at most the
        settings' ``index.small_times``)."""
        tcols = self.tt.columns()
        key = self.keys[0]
        heavy = []
        for _, index, codes in self.indexed:
            at, _ = index.summary_rows(codes)
            heavy.append((index.s_codes[at], [t[at] for t in index.s_times]))
        schema = {c: self.schema[c] for c in cols}
        light = self.light[list(cols)]
        small = self.kernels.settings.index.small_times
        if sum(len(c) for c, _ in heavy) + light.height <= small and list(cols) == [
            KEY,
            key,
            *tcols,
        ]:
            rows = light.rows()
            for codes, times in heavy:
                c = codes.tolist()
                rows.extend(zip(c, c, *(t.tolist() for t in times), strict=True))
            return Rows(schema, rows)
        parts = [light]
        for codes, times in heavy:
            data = {KEY: codes, key: codes}
            data.update(dict(zip(tcols, times, strict=True)))
            parts.append(pl.DataFrame(data, schema=schema)[list(cols)])
        return pl.concat(parts) if len(parts) > 1 else parts[0]


def indexed_sums(
    history: IndexedHistory,
    qk: np.ndarray,
    qt: Sequence[np.ndarray],
    column: str,
    bound: np.ndarray,
    bounded: np.ndarray,
    sign: int,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """For queries ``qk`` (sorted key codes) at times ``qt`` with bounds (``bound``, of the
    values times ``sign``, where ``bounded``): each query's count (every diff at a time
    ``<=`` the query's) and the rows to sum by value (query position, value times
    ``sign``, diff): at times ``<=`` the query's, and up to the bound where bounded."""
    count = np.zeros(len(qk), dtype=np.int64)
    pos_parts, val_parts, diff_parts = [], [], []
    light = history.light
    tcols = history.tt.columns()
    if light.height:
        pos, valid = positions(
            qk,
            qt,
            light.get_column(KEY).to_numpy(),
            [light.get_column(c).to_numpy() for c in tcols],
            history.kernels.settings.index.run_search_rows,
        )
        diff = light.get_column(DIFF).to_numpy()[valid]
        np.add.at(count, pos, diff)
        value = light.get_column(column).cast(pl.Int64).to_numpy()[valid] * sign
        below = ~bounded[pos] | (value <= bound[pos])
        pos_parts.append(pos[below])
        val_parts.append(value[below])
        diff_parts.append(diff[below])
    for batch, index, heavy in history.indexed:
        qpos = np.searchsorted(qk, heavy)
        # the count, from the summary
        at, owner = index.summary_rows(heavy)
        p = qpos[owner]
        ok = np.ones(len(at), dtype=bool)
        for t, q in zip(index.s_times, qt, strict=True):
            ok &= t[at] <= q[p]
        np.add.at(count, p[ok], index.s_diff[at][ok])
        # the rows up to each bound: a prefix of the key's rows (a suffix for a max)
        lo, hi = index.key_rows(heavy)
        values = index.values(batch, column)
        if values is not None:
            b = bounded[qpos]
            cut = _cut(values, lo, hi, bound[qpos] * sign, sign)
            if sign > 0:
                hi = np.where(b, cut, hi)
            else:
                lo = np.where(b, cut, lo)
        else:
            values = batch.get_column(column).cast(pl.Int64).to_numpy()
        rows = ranges(lo, hi - lo)
        owner = np.repeat(np.arange(len(heavy)), hi - lo)
        p = qpos[owner]
        ok = np.ones(len(rows), dtype=bool)
        for c, q in zip(tcols, qt, strict=True):
            ok &= batch.get_column(c).to_numpy()[rows] <= q[p]
        value = values[rows][ok] * sign
        p = p[ok]
        below = ~bounded[p] | (value <= bound[p])
        pos_parts.append(p[below])
        val_parts.append(value[below])
        diff_parts.append(batch.get_column(DIFF).to_numpy()[rows][ok][below])
    return count, (
        np.concatenate(pos_parts) if pos_parts else np.zeros(0, dtype=np.int64),
        np.concatenate(val_parts) if val_parts else np.zeros(0, dtype=np.int64),
        np.concatenate(diff_parts) if diff_parts else np.zeros(0, dtype=np.int64),
    )


def positions(
    qk: np.ndarray,
    qt: Sequence[np.ndarray],
    codes: np.ndarray,
    times: Sequence[np.ndarray],
    run_search_rows: int,
) -> tuple[np.ndarray, np.ndarray]:
    """For rows of key ``codes`` at ``times``: the position of each row's query in ``qk``
    (sorted), for the rows whose key is queried at a time ``>=`` the row's; and that mask.
    (``run_search_rows``: as :func:`_found`.)"""
    pos, valid = _found(qk, codes, run_search_rows)
    for t, q in zip(times, qt, strict=True):
        valid &= t <= q[pos]
    return pos[valid], valid


def _found(
    qk: np.ndarray, codes: np.ndarray, run_search_rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """The position of each of ``codes`` in ``qk`` (sorted, unique; clipped to its last),
    and whether it is there. A history comes as a few sorted runs of each key's rows: where
    equal codes follow each other in long runs (a first epoch's histories), one search per
    run, not per code (tried on at least ``run_search_rows`` codes)."""
    last = len(qk) - 1
    if len(codes) >= run_search_rows:
        moved = codes[1:] != codes[:-1]
        if np.count_nonzero(moved) * 4 < len(codes):
            starts = np.flatnonzero(np.concatenate(([True], moved)))
            lengths = np.diff(starts, append=len(codes))
            at = np.minimum(np.searchsorted(qk, codes[starts]), last)
            return np.repeat(at, lengths), np.repeat(qk[at] == codes[starts], lengths)
    at = np.minimum(np.searchsorted(qk, codes), last)
    return at, qk[at] == codes


def _cut(
    values: np.ndarray, lo: np.ndarray, hi: np.ndarray, bound: np.ndarray, sign: int
) -> np.ndarray:
    """In each range ``lo..hi`` of ``values`` (sorted ascending in the range): the first
    position whose value is above ``bound`` (``sign`` 1), or the first not below it (-1)."""
    a, b = lo.copy(), hi.copy()
    last = len(values) - 1
    while True:
        open_ = a < b
        if not open_.any():
            return a
        m = (a + b) // 2
        v = values[np.minimum(m, last)]
        right = open_ & ((v <= bound) if sign > 0 else (v < bound))
        a = np.where(right, m + 1, a)
        b = np.where(open_ & ~right, m, b)
