"""The columnar building blocks of the local kernels: consolidation by grouped sums, merges
of sorted batches as NumPy arrays, accumulation at query times, key codes and time bounds.

Functions of Polars frames and NumPy arrays (and, where they say so, of rows), without state.
Invariants: :func:`grouped_sums` returns one row per distinct group with the sums of its rows
(without the all-zero ones where asked), whichever of its paths it takes (Polars' group-by,
sorting a packed code, NumPy over small arrays): the paths differ in cost, never in result;
:func:`accumulate` returns, for each query ``(key, time)``, the sums of the key's updates at
times ``<=`` the query time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, cast

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY, QUERY_PREFIX, time_columns
from ddflow.runtime.local import rows as R
from ddflow.runtime.local.exprs import KIND_TYPES, Overflow
from ddflow.runtime.local.rows import Batch, Rows
from ddflow.runtime.local.settings import LookupSettings, SumSettings
from ddflow.timely.lattice import Time, TimeType

__all__ = ["accumulate", "grouped_sums", "merge_arrays", "run_starts"]


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


def accumulate(
    history: pl.DataFrame,
    queries: pl.DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    values: Sequence[str],
    settings: SumSettings,
    weights: Sequence[str] = (),
) -> pl.DataFrame:
    """For each query ``(keys, __q0.., )`` the accumulation of ``history`` at the query time:
    rows ``keys, __q*, values, __diff, weights`` summed over history rows with equal keys and
    a time ``<=`` the query time; rows whose diff and weights are all zero are dropped.
    (``settings``: how the rows are summed, :func:`grouped_sums`.)"""
    tcols = tt.columns()
    qcols = time_columns(tt, QUERY_PREFIX)
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
        acc = grouped_sums(h, [*keys, *values], summed, settings, drop_zero=True)
        return join_on_key(q, acc, keys).select([*keys, *qcols, *values, DIFF, *weights])
    j = join_on_key(q, h, keys)
    j = j.filter(le_expr(tt, tcols, qcols))
    return grouped_sums(j, [*keys, *qcols, *values], summed, settings, drop_zero=True)


def grouped_sums(
    frame: pl.DataFrame,
    group: Sequence[str],
    sums: Sequence[str],
    settings: SumSettings,
    drop_zero: bool = False,
) -> pl.DataFrame:
    """``frame.group_by(group).agg(sums summed)``, rows in no particular order (but sorted
    by ``group``, first column most significant, when packed); with ``drop_zero``, without
    the groups whose sums are all zero. ``settings`` choose the path
    (:class:`~ddflow.runtime.local.settings.SumSettings`): a packed sort from
    ``packed_rows`` rows, NumPy alone up to ``array_rows``, else Polars' group-by.

    A large frame whose group and sum columns are all integers without nulls, and whose group
    columns' ranges multiply to less than ``2**62``, is summed without hashing: each row's
    group is packed into one int64 (mixed radix over the columns' ranges, so that the codes
    sort as the groups do), the codes are sorted, and each run of equal codes is summed (NumPy
    ``add.reduceat``). The groups' columns are then decoded from their codes, not gathered
    from the frame. With one summed column whose range fits in the code too (a diff of +1
    and -1), it is the code's last digit: the codes are sorted themselves, with no permutation
    to gather by. This is two to three times as fast as Polars' hash group-by on the reduce's
    histories and the trace merges; anything else takes the group-by. Arranged batches are
    sorted this way, so a merge of several is a few sorted runs (``settings.sorted_runs``: a
    stable sort merges them in about linear time): a frame already sorted is not reordered at
    all, and one without repeated groups is not summed."""
    if frame.height >= settings.packed_rows and group:
        packing = _pack(frame, group, sums)
        if packing is not None:
            return _packed_sums(frame, packing, group, sums, drop_zero, settings.sorted_runs)
    elif 0 < frame.height <= settings.array_rows and group:
        summed = _array_sums(frame, group, sums, drop_zero)
        if summed is not None:
            return summed
    out = frame.group_by(list(group)).agg([pl.col(w).sum() for w in sums])
    return out.filter(any_nonzero(sums)) if drop_zero else out


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


#: column types a merge in NumPy holds exactly as int64
_INT64_EXACT = frozenset({pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32})


def merge_arrays(
    batches: Sequence[Batch], tt: TimeType, since: Sequence[Time], sums: Sequence[str]
) -> pl.DataFrame | None:
    """:meth:`LocalKernels.merge` of a few thousand updates in NumPy: the columns of every
    batch (a frame's through its :class:`~ddflow.runtime.local.rows.ColumnCache`, rows
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
        batches fragment the C heap (a first epoch's peak memory rises)."""
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
    sorted_runs: int,
) -> pl.DataFrame:
    """:func:`grouped_sums` of a frame whose groups are packed: codes that fall at most
    ``sorted_runs`` times are merged by a stable sort, others sorted by Polars."""
    code = packing.code
    falls = int(np.count_nonzero(code[1:] < code[:-1]))
    if falls and len(sums) == 1:
        folded = _folded_sums(frame, packing, sums[0], falls > sorted_runs)
        if folded is not None:
            codes, total = folded
            return _decoded(frame, packing, group, codes, sums, [total], _kept([total], drop_zero))
    order: np.ndarray | None = None  # the rows in code order (None: as they are)
    if falls > sorted_runs:
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
    frame: pl.DataFrame, packing: _Packing, w: str, unsorted: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct codes (sorted) and the sum of ``w`` at each, by sorting the codes with
    ``w`` folded in as their last digit (``unsorted``: by Polars' sort, else by merging the
    few sorted runs); None when its range does not fit."""
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
    if unsorted:
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


def any_nonzero(sums: Sequence[str]) -> pl.Expr:
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


def evaluated_rows(batch: Rows, compiled: Sequence[pl.Expr], tt: TimeType) -> Rows | None:
    """``select`` of a small batch in Python (:mod:`~ddflow.runtime.local.exprs`): each
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


def batch_codes(batch: Batch) -> np.ndarray:
    """The key codes of an arranged batch (sorted)."""
    if isinstance(batch, Rows):
        return np.asarray(R.codes_of(batch), dtype=np.int64)
    return batch.get_column(KEY).to_numpy()


def slice_batch(batch: Batch, lo: int, hi: int) -> Batch:
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
    for no row): its least and greatest times (:func:`time_bounds`) when they are equal."""
    least = time_bounds(batch, tcols, least=True)
    if least is None or least != time_bounds(batch, tcols, least=False):
        return None
    return least


def sorted_by_key(batch: pl.DataFrame) -> pl.DataFrame:
    """``batch`` sorted by its key code: as it is when a packed sum left it so (checked, one
    pass), else sorted."""
    key = batch.get_column(KEY)
    if key.is_sorted():
        return batch.with_columns(key.set_sorted())
    return batch.sort(KEY)


def scans(batch: Batch, codes: Any, lookups: LookupSettings) -> bool:
    """Does a lookup of ``codes`` in ``batch`` scan it (keys by the tens of thousands, at
    least one per ``lookups.scan_rows_per_key`` rows of a batch of ``lookups.scan_rows`` or
    more) rather than search it?"""
    return (
        type(batch) is not Rows
        and len(codes) * lookups.scan_rows_per_key >= batch.height >= lookups.scan_rows
    )


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


def time_bounds(batch: Batch, tcols: Sequence[str], least: bool) -> tuple[int, ...] | None:
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


def greatest_times(part: Batch, tcols: Sequence[str]) -> tuple[int, ...] | None:
    """:func:`time_bounds` (greatest) of a trace's batch, remembered with it (a batch of a
    trace never changes)."""
    if type(part) is Rows:
        got = part._greatest
        if got is None or got[0] != tuple(tcols):
            got = part._greatest = (tuple(tcols), time_bounds(part, tcols, least=False))
        return got[1]
    known = getattr(part, "_dd_greatest", None)
    if known is None or known[0] != tuple(tcols):
        known = (tuple(tcols), time_bounds(part, tcols, least=False))
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
