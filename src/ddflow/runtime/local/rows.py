"""Small batches as Python tuples: the local runtime's data plane for small steps.

A step of an incremental computation usually carries a handful of updates (a single changed
edge touches a few keys in each operator). A Polars call has a fixed cost whatever its size,
and an update runs dozens of operator steps, each with several calls, so small batches are held
as :class:`Rows` instead: a list of tuples with the column names and Polars types of the batch it
stands for. Each kernel of :class:`~ddflow.runtime.local.kernels.LocalKernels` has a row version for
them (in this module), and falls back to Polars (converting) where it has none; a result of at
most ``small_batch_rows`` rows (:class:`~ddflow.runtime.local.settings.LocalSettings`) is held as
rows again.

A batch is held as rows only when every column has a type whose Python values compare, hash
and add exactly as Polars' do (integers, booleans, strings, dates, datetimes): float columns
always stay columnar, so that sums and NaN handling never depend on the size of a step.

Invariant: ``Rows(schema, rows).to_frame()`` is a batch the columnar kernels accept, and every
row kernel returns what its columnar twin returns, as a multiset of rows (row order within a
batch carries no meaning, except that arranged batches are sorted by ``__key``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any, Union, cast

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY, NULL_CODE
from ddflow.runtime.local.exprs import wrap_int64
from ddflow.runtime.local.settings import LookupSettings
from ddflow.timely.lattice import Time, TimeType

__all__ = ["Batch", "Rows", "as_rows", "frame", "rowable"]


def _rowable_dtype(dtype: Any) -> bool:
    return bool(
        dtype.is_integer()
        or dtype == pl.Boolean
        or dtype == pl.String
        or dtype == pl.Date
        or isinstance(dtype, pl.Datetime)
    )


_ROWABLE: dict[tuple[tuple[str, Any], ...], bool] = {}


def rowable(schema: dict[str, Any]) -> bool:
    """Can a batch of this schema be held as rows? (No float, nested or exotic column.)"""
    items = tuple(schema.items())
    ok = _ROWABLE.get(items)
    if ok is None:
        ok = _ROWABLE[items] = all(_rowable_dtype(d) for d in schema.values())
    return ok


#: :meth:`Rows.getter`'s functions, by column order and the names asked for
_GETTERS: dict[tuple[tuple[str, ...], tuple[str, ...]], Any] = {}


class Rows:
    """A batch of updates as a list of tuples, in the column order of ``schema``."""

    __slots__ = ("__weakref__", "_codes", "_greatest", "names", "rows", "schema")

    def __init__(self, schema: dict[str, Any], rows: list[tuple[Any, ...]]) -> None:
        self.schema = schema
        self.names: tuple[str, ...] = tuple(schema)
        self.rows = rows
        #: the sorted ``__key`` codes of an arranged batch, built on its first lookup
        self._codes: list[int] | None = None
        #: the greatest value of each time column of a trace's batch (its time columns, and
        #: them), found on first use (:func:`~ddflow.runtime.local.kernels.greatest_times`)
        self._greatest: tuple[tuple[str, ...], tuple[int, ...] | None] | None = None

    @property
    def height(self) -> int:
        return len(self.rows)

    @property
    def columns(self) -> list[str]:
        return list(self.names)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def like(self, rows: list[tuple[Any, ...]]) -> Rows:
        """Other rows of the same schema."""
        return Rows(self.schema, rows)

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, schema=self.schema, orient="row")

    def getter(self, names: Sequence[str]) -> Any:
        """A function from a row to the tuple of the named columns (made once per column
        order and names: a step asks for the same few many times)."""
        key = (self.names, tuple(names))
        got = _GETTERS.get(key)
        if got is None:
            idx = [self.names.index(n) for n in names]
            if len(idx) == 1:
                i = idx[0]
                got = lambda r: (r[i],)  # noqa: E731
            else:
                got = itemgetter(*idx) if idx else (lambda r: ())
            if len(_GETTERS) >= 4096:  # (many flows of many schemas: begin again)
                _GETTERS.clear()
            _GETTERS[key] = got
        return got

    def project(self, names: Sequence[str]) -> Rows:
        """The named columns, in that order."""
        if tuple(names) == self.names:
            return self
        g = self.getter(names)
        return Rows({n: self.schema[n] for n in names}, [g(r) for r in self.rows])

    def __repr__(self) -> str:
        return f"Rows({list(self.names)}, {len(self.rows)} rows)"


#: a batch of the local runtime: a Polars frame, or (small) rows
Batch = Union[pl.DataFrame, "Rows"]


def as_rows(frame: pl.DataFrame, limit: int) -> Batch:
    """A frame of at most ``limit`` rows (the kernels' ``small_batch_rows``; negative: none)
    of a rowable schema as :class:`Rows`; any other frame as it is."""
    if frame.height > limit:
        return frame
    schema = dict(frame.schema)
    if not rowable(schema):
        return frame
    return Rows(schema, frame.rows())


def frame(batch: Batch) -> pl.DataFrame:
    """The batch as a Polars frame."""
    return batch.to_frame() if isinstance(batch, Rows) else batch


def iter_rows(batch: Rows | pl.DataFrame, names: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    """The named columns of every row, as tuples, for either representation. (A frame's
    columns are converted one by one: a Polars ``select`` has a fixed cost, whatever the size
    of the frame.)"""
    if type(batch) is Rows:
        g = batch.getter(names)
        return [g(r) for r in batch.rows]
    if batch.height == 0:
        return []
    return zip(*[batch.get_column(n).to_list() for n in names], strict=True)


# ---------------------------------------------------------------------- linear kernels


def negate(b: Rows) -> Rows:
    d = b.index(DIFF)
    return b.like([(*r[:d], -r[d], *r[d + 1 :]) for r in b.rows])


def consolidate(b: Rows, sums: Sequence[str]) -> Rows:
    """One row per distinct value of the other columns, with the summed weights; rows whose
    weights are all zero removed."""
    names = b.names
    si = [names.index(s) for s in sums]
    others = [i for i in range(len(names)) if i not in si]
    if len(si) == 1 and si[0] == len(names) - 1:  # the common case: one weight, last
        acc: dict[Any, int] = {}
        for r in b.rows:
            k = r[:-1]
            acc[k] = acc.get(k, 0) + r[-1]
        return b.like([(*k, w) for k, w in acc.items() if w])
    key = itemgetter(*others) if len(others) > 1 else (lambda r: (r[others[0]],))
    sums_of: dict[Any, list[Any]] = {}
    for r in b.rows:
        k = key(r)
        got = sums_of.get(k)
        if got is None:
            sums_of[k] = [r[i] for i in si]
        else:
            for j, i in enumerate(si):
                x = r[i]
                if x is not None:
                    # (int64 sums wrap, as the columnar kernels' and the native core's do)
                    got[j] = x if got[j] is None else wrap_int64(got[j] + x)
    order = others + si
    place = [order.index(i) for i in range(len(names))]
    out = []
    for k, ws in sums_of.items():
        if any(ws):
            flat = (*k, *ws)
            out.append(tuple(flat[p] for p in place))
    return b.like(out)


def enter(b: Rows, outer: TimeType, inner: TimeType) -> Rows:
    """Times extended by zeros; data columns kept (``__key`` dropped), as the columnar kernel."""
    data = [n for n in b.names if not n.startswith("__")]
    tcols = outer.columns()
    g = b.getter([*data, *tcols])
    d = b.index(DIFF)
    zeros = (0,) * (inner.width - outer.width)
    schema = {n: b.schema[n] for n in data}
    schema.update({c: pl.Int64 for c in inner.columns()})
    schema[DIFF] = pl.Int64
    return Rows(schema, [(*g(r), *zeros, r[d]) for r in b.rows])


def leave(b: Rows, inner: TimeType, outer: TimeType) -> Rows:
    drop = set(inner.columns()[outer.width :])
    keep = [n for n in b.names if n not in drop]
    return b.project(keep)


def increment(b: Rows, tt: TimeType, limit: int | None) -> Rows:
    i = b.index(tt.columns()[-1])
    out = [(*r[:i], r[i] + 1, *r[i + 1 :]) for r in b.rows]
    if limit is not None:
        out = [r for r in out if r[i] < limit]
    return b.like(out)


def advance(b: Rows, tt: TimeType, frontier: Sequence[Time]) -> Rows:
    if not frontier or not b.rows:
        return b
    tcols = tt.columns()
    idx = [b.index(c) for c in tcols]
    lo, hi = idx[0], idx[-1] + 1
    assert idx == list(range(lo, hi)), "time columns are adjacent"
    out = []
    if tt.is_total:
        f = frontier[0][0]
        for r in b.rows:
            out.append(r if r[lo] >= f else (*r[:lo], f, *r[hi:]))
        return b.like(out)
    if tt.is_product:  # a max with the frontier's floor (TimeType.advance_floor)
        floor = tt.advance_floor(frontier)
        for r in b.rows:
            t = r[lo:hi]
            a = tuple(map(max, t, floor))
            out.append(r if a == t else (*r[:lo], *a, *r[hi:]))
        return b.like(out)
    adv = tt.advance_by
    for r in b.rows:
        t = r[lo:hi]
        a = adv(t, frontier)
        out.append(r if a == t else (*r[:lo], *a, *r[hi:]))
    return b.like(out)


def merge(b: Rows, tt: TimeType, frontier: Sequence[Time], sums: Sequence[str]) -> Rows:
    """Arranged updates (batches concatenated) merged: times advanced by ``frontier``,
    updates consolidated, sorted by ``__key``. What :func:`advance`, :func:`consolidate` and
    :func:`arrange` give one after the other (the same rows in the same order), in one pass
    where the diff alone is summed in a product order: a trace's small batches are
    merged over and over, and the general consolidation rebuilds a key and a list of sums
    for every row."""
    names = b.names
    idx = [names.index(c) for c in tt.columns()]
    lo, hi = idx[0], idx[-1] + 1
    d = names.index(DIFF) if DIFF in names else -1
    if (
        tuple(sums) != (DIFF,)
        or not tt.is_product
        or not b.rows
        or len(names) < 3
        or idx != list(range(lo, hi))
        or d < hi
    ):  # (arranged updates: times, then diff)
        return arrange(consolidate(advance(b, tt, frontier), sums), ())
    floor = tt.advance_floor(frontier)
    acc: dict[tuple[Any, ...], int] = {}
    get = acc.get
    others = itemgetter(*(i for i in range(len(names)) if i != d))
    # a batch holds few distinct times: each is advanced once (None: already advanced)
    moved: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
    for r in b.rows:
        if floor is None:
            k = others(r)
        else:
            t = r[lo:hi]
            if t in moved:
                a = moved[t]
            else:
                a = tuple(map(max, t, floor))
                a = moved[t] = None if a == t else a
            k = others(r) if a is None else (*r[:lo], *a, *r[hi:d], *r[d + 1 :])
        acc[k] = get(k, 0) + r[d]
    out = [(*k[:d], w, *k[d:]) for k, w in acc.items() if w]
    if KEY in b.schema:
        out.sort(key=itemgetter(names.index(KEY)))
        return b.like(out)
    return arrange(b.like(out), ())


def times_getter(b: Rows, tt: TimeType) -> Any:
    idx = [b.index(c) for c in tt.columns()]
    lo, hi = idx[0], idx[-1] + 1
    return lambda r: r[lo:hi]


def split_by_time(b: Rows, tt: TimeType) -> list[tuple[Time, Rows]]:
    tg = times_getter(b, tt)
    parts: dict[Time, list[tuple[Any, ...]]] = {}
    for r in b.rows:
        t = tg(r)
        got = parts.get(t)
        if got is None:
            parts[t] = [r]
        else:
            got.append(r)
    return [(t, b.like(rs)) for t, rs in sorted(parts.items())]


def count_by_time(b: Rows, tt: TimeType) -> list[tuple[Time, int]]:
    tg = times_getter(b, tt)
    counts: dict[Time, int] = {}
    for r in b.rows:
        t = tg(r)
        counts[t] = counts.get(t, 0) + 1
    return list(counts.items())


def distinct_times(b: Rows, tt: TimeType) -> list[Time]:
    tg = times_getter(b, tt)
    return sorted({tg(r) for r in b.rows})


# ---------------------------------------------------------------------- arrangements


_MASK = (1 << 64) - 1
_MULT = 0x9E3779B97F4A7C15
_SEED = 0x5EED
_NULL_WORD = 0x6E756C6C  # the word a null integer mixes in


def mix_code(values: Iterable[int | None]) -> int:
    """The key code of a tuple of integers (a multiply-xorshift mix, wrapping at 64 bits),
    exactly as :func:`mix_codes` computes it for whole columns."""
    h = _SEED
    for x in values:
        h = ((h ^ ((_NULL_WORD if x is None else x) & _MASK)) * _MULT) & _MASK
        h ^= h >> 29
    return h - (1 << 64) if h >> 63 else h


def mix_codes(columns: Sequence[pl.Series]) -> np.ndarray:
    """:func:`mix_code` of every row of integer columns, vectorized."""
    h = np.full(len(columns[0]), _SEED, dtype=np.uint64)
    mult = np.uint64(_MULT)
    shift = np.uint64(29)
    for c in columns:
        x = c.cast(pl.Int64).fill_null(_NULL_WORD).to_numpy().view(np.uint64)
        h = (h ^ x) * mult
        h ^= h >> shift
    return h.view(np.int64)


def integer_keys(schema: dict[str, Any], keys: Sequence[str]) -> bool:
    return all(schema[k].is_integer() and schema[k] != pl.UInt64 for k in keys)


def key_codes(b: Rows, keys: Sequence[str]) -> list[int]:
    """The ``__key`` code of every row, equal to the columnar kernel's for the same key."""
    if len(keys) == 1 and b.schema[keys[0]].is_integer():
        i = b.index(keys[0])
        return [NULL_CODE if r[i] is None else r[i] for r in b.rows]
    if not keys:
        return [0] * len(b.rows)
    if integer_keys(b.schema, keys):
        g = b.getter(keys)
        return [mix_code(g(r)) for r in b.rows]
    # a row hash: Polars' own, so that codes agree with the columnar batches of the trace
    part = b.project(keys).to_frame()
    return part.hash_rows(seed=0x5EED).reinterpret(signed=True).to_list()


#: spreads key codes over workers (Fibonacci hashing: strided keys spread too)
_SPREAD = 0x9E3779B97F4A7C15


def owner(code: int, workers: int) -> int:
    """The worker that owns a key code, of ``workers``: as :func:`owners` computes it."""
    return ((((code & _MASK) * _SPREAD) & _MASK) >> 32) % workers


def owners(codes: np.ndarray, workers: int) -> np.ndarray:
    """:func:`owner` of every code (an int64 array), vectorized."""
    return ((codes.view(np.uint64) * np.uint64(_SPREAD)) >> np.uint64(32)) % np.uint64(workers)


def partition(b: Rows, keys: Sequence[str], workers: int) -> list[tuple[int, Rows]]:
    """The rows of ``b`` by the worker that owns their key (non-empty parts only)."""
    parts: list[list[tuple[Any, ...]]] = [[] for _ in range(workers)]
    for r, c in zip(b.rows, key_codes(b, keys), strict=True):
        parts[owner(c, workers)].append(r)
    return [(w, b.like(p)) for w, p in enumerate(parts) if p]


def partition_frame(f: pl.DataFrame, codes: pl.Series, workers: int) -> list[tuple[int, Any]]:
    """The rows of a frame by the worker that owns their key ``codes`` (as :func:`partition`
    does for rows)."""
    if f.height == 0:
        return []
    dest = owners(codes.to_numpy(), workers)
    out = []
    for w in range(workers):
        mask = dest == w
        n = int(mask.sum())
        if n == f.height:
            return [(w, f)]
        if n:
            out.append((w, f.filter(pl.Series(mask))))
    return out


def arrange(b: Rows, keys: Sequence[str]) -> Rows:
    """Rows with ``__key`` (last), sorted by it."""
    if KEY in b.schema:
        k = b.index(KEY)
        return b.like(sorted(b.rows, key=itemgetter(k)))
    codes = key_codes(b, keys)
    schema = {**b.schema, KEY: pl.Int64}
    rows = sorted(((*r, c) for r, c in zip(b.rows, codes, strict=True)), key=itemgetter(-1))
    return Rows(schema, rows)


def codes_of(b: Rows) -> list[int]:
    if b._codes is None:
        k = b.index(KEY)
        b._codes = [r[k] for r in b.rows]
    return b._codes


def lookup(b: Rows, codes: Any) -> Rows:
    """Rows of an arranged batch whose code is among ``codes`` (sorted, unique)."""
    keys = codes_of(b)
    out: list[tuple[Any, ...]] = []
    rows = b.rows
    for c in codes.tolist() if isinstance(codes, np.ndarray) else codes:
        lo = bisect_left(keys, c)
        if lo < len(keys) and keys[lo] == c:
            out.extend(rows[lo : bisect_right(keys, c, lo)])
    return b.like(out)


def key_set(b: Rows) -> list[int]:
    k = b.index(KEY)
    return sorted({r[k] for r in b.rows})


_MAX_CODE = np.iinfo(np.int64).max
_MIN_CODE = np.iinfo(np.int64).min


def key_ranges(
    keys: np.ndarray,
    codes: np.ndarray,
    fence: np.ndarray | None = None,
    every: int = 1,
    fenced_codes: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``codes``, the positions ``lo, hi`` of its rows in ``keys`` (sorted), as
    ``numpy.searchsorted`` left and right gives them.

    A binary search of a large batch misses the cache at nearly every level below the first
    few: a lookup of many codes in a batch of millions of rows spends most of its time waiting
    for memory. With ``fence`` (``keys[::every]``, small enough to stay in cache; ``every`` a
    power of two) and at least ``fenced_codes`` codes, each code is first placed between two
    fences, then searched within those ``every`` rows, a few cache lines, by one vectorized
    step per halving; the right end is the left end of the next code, ``code + 1``, found in
    the lines just read (:class:`~ddflow.runtime.local.settings.LookupSettings`)."""
    codes = np.asarray(codes, dtype=np.int64)
    if (
        fence is None
        or len(codes) < fenced_codes
        or len(keys) == 0
        or int(codes.max()) == _MAX_CODE
    ):
        return (
            np.searchsorted(keys, codes, side="left"),
            np.searchsorted(keys, codes, side="right"),
        )
    q = np.concatenate((codes, codes + 1))
    i = np.searchsorted(fence, q, side="left")
    # fence i - 1 (row (i - 1) * every) is below the code and fence i is not: the first row at
    # or above it is among the ``every`` rows after fence i - 1 (row 0 when i is 0)
    pos = np.maximum(i - 1, 0) * every + (i > 0)
    last = len(keys) - 1
    for s in range(1, every.bit_length()):  # every / 2, every / 4, ..., 1
        step = every >> s  # invariant: every row before pos is below the code
        idx = pos + (step - 1)
        np.minimum(idx, last, out=idx)
        np.add(pos, step, out=pos, where=keys[idx] < q)
    np.minimum(pos, len(keys), out=pos)
    return pos[: len(codes)], pos[len(codes) :]


def dense_offsets(keys: np.ndarray, lookups: LookupSettings) -> tuple[int, np.ndarray] | None:
    """A direct index of sorted key codes that span few values (node ids, say): ``(base,
    offsets)`` with ``offsets[j]`` the number of codes below ``base + j``, for ``j`` from 0
    to the span (the rows of code ``c`` are then ``offsets[c - base]`` up to
    ``offsets[c - base + 1]``: two reads, where a binary search of a large batch misses the
    cache at nearly every level). None for a batch under ``lookups.dense_rows`` rows, or
    whose codes span more than ``lookups.dense_span`` times its rows (hashed keys). (The
    offsets, 4 bytes per code of the span in a batch under 2**31 rows, then take at most
    the key column's 8 bytes per row.)"""
    if not is_dense(keys, lookups):
        return None
    n, base, last = len(keys), int(keys[0]), int(keys[-1])
    span = last - base + 1
    if n > lookups.dense_search * span:
        # many rows per code: a search of each code in order (each reads near the last)
        offsets = np.searchsorted(keys, np.arange(base, last + 2, dtype=np.int64))
    else:  # (one pass over the rows, counting each code's)
        offsets = np.empty(span + 1, dtype=np.int64)
        offsets[0] = 0
        np.cumsum(np.bincount(keys - base, minlength=span), out=offsets[1:])
    return base, offsets.astype(np.int32 if n < 2**31 else np.int64)


def is_dense(keys: np.ndarray, lookups: LookupSettings) -> bool:
    """Whether sorted key codes get a direct index (:func:`dense_offsets`)."""
    n = len(keys)
    if n < lookups.dense_rows:
        return False
    base, last = int(keys[0]), int(keys[-1])
    return base != _MIN_CODE and last != _MAX_CODE and last - base + 1 <= lookups.dense_span * n


def dense_ranges(
    base: int, offsets: np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_ranges` through a direct index (:func:`dense_offsets`): a code below the
    span gets the empty range at 0, one above it the empty range at the end."""
    span = len(offsets) - 1
    lo = offsets[np.clip(codes, base, base + span) - base]
    hi = offsets[np.clip(codes, base - 1, base + span - 1) - (base - 1)]
    return lo.astype(np.int64), hi.astype(np.int64)


class ColumnCache:
    """NumPy views of the columns of a large arranged frame, so that a lookup of a few keys
    gathers a few values per column instead of calling Polars (whose gather of a large frame
    has a fixed cost whatever the number of rows taken), and the direct index
    (:func:`dense_offsets`) or else the fences (:func:`key_ranges`) of its key codes, built on
    its first search, as that search's
    :class:`~ddflow.runtime.local.settings.LookupSettings` say."""

    __slots__ = ("_dense", "arrays", "copies", "fence", "fence_every", "keys", "schema")

    @staticmethod
    def of(f: pl.DataFrame) -> ColumnCache | None:
        """The frame's cache, made on first use and kept with the frame (an arranged batch
        never changes); None when its schema is not rowable."""
        cache: ColumnCache | bool | None = getattr(f, "_dd_columns", None)
        if cache is None:
            cache = ColumnCache(f) if rowable(dict(f.schema)) else False
            f._dd_columns = cache  # type: ignore[attr-defined]
        return cache or None

    def __init__(self, f: pl.DataFrame) -> None:
        self.schema = dict(f.schema)
        self.keys = f.get_column(KEY).to_numpy()
        #: the direct index of the key codes (:func:`dense_offsets`), built on the first
        #: search (None: not yet); False where there is none (then a large batch has fences)
        self._dense: tuple[int, np.ndarray] | bool | None = None
        #: every ``fence_every``-th key code, where the batch is searched through fences
        self.fence: np.ndarray | None = None
        self.fence_every = 1
        self.arrays: list[Any] = []
        #: column name -> the name of an earlier column viewing the same buffer (a key code
        #: that is its key column, :func:`~ddflow.runtime.local.kernels.share_key`): equal values
        self.copies: dict[str, str] = {}
        seen: dict[tuple[int, int, str], str] = {}
        for name in f.columns:
            s = f.get_column(name)
            if s.dtype.is_integer() and s.null_count() == 0:
                a = s.to_numpy()
                self.arrays.append(a)
                view = (a.ctypes.data, len(a), a.dtype.str)
                if len(a) and a.strides == (a.itemsize,) and view in seen:
                    self.copies[name] = seen[view]
                else:
                    seen.setdefault(view, name)
            else:
                self.arrays.append(s)  # gathered per lookup (nulls, strings, dates)

    def dense(self, lookups: LookupSettings) -> tuple[int, np.ndarray] | None:
        """The direct index of the key codes, if they are dense (:func:`dense_offsets`). The
        first call builds it, or else, for a batch of at least ``lookups.fenced_rows`` rows,
        the fences."""
        d = self._dense
        if d is None:
            built = dense_offsets(self.keys, lookups)
            self._dense = False if built is None else built
            if built is None and len(self.keys) >= lookups.fenced_rows:
                self.fence_every = lookups.fence_every
                self.fence = self.keys[:: self.fence_every].copy()
            return built
        return d if isinstance(d, tuple) else None

    def ranges(self, codes: Any, lookups: LookupSettings) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the rows of each of ``codes``: :func:`key_ranges`, or through
        the direct index where there is one."""
        d = self.dense(lookups)
        if d is not None:
            return dense_ranges(d[0], d[1], np.asarray(codes, dtype=np.int64))
        return key_ranges(self.keys, codes, self.fence, self.fence_every, lookups.fenced_codes)

    def key_span(self, code: int, lookups: LookupSettings) -> tuple[int, int]:
        """The rows ``lo`` to ``hi`` of one code (``lo == hi`` where it has none): two reads of
        the direct index where there is one, else binary searches. (One code at a time: a
        small update's lookup, where NumPy's vectorized calls cost more than the search.)"""
        d = self.dense(lookups)
        if d is not None:
            base, offsets = d
            j = code - base
            if 0 <= j < len(offsets) - 1:
                return int(offsets[j]), int(offsets[j + 1])
            return 0, 0
        ks = self.keys
        lo = int(ks.searchsorted(code))
        if lo == len(ks) or ks[lo] != code:
            return lo, lo
        return lo, int(ks.searchsorted(code, "right"))

    def take(self, idx: np.ndarray, names: Sequence[str] | None = None) -> Rows:
        """The rows at positions ``idx``: every column, or the named ones in that order."""
        arrays, schema = self.arrays, self.schema
        if names is not None and list(names) != list(schema):
            by_name = dict(zip(schema, arrays, strict=True))
            arrays = [by_name[n] for n in names]
            schema = {n: schema[n] for n in names}
        cols = [
            a[idx].tolist() if isinstance(a, np.ndarray) else a.gather(idx).to_list()
            for a in arrays
        ]
        return Rows(schema, list(zip(*cols, strict=True)))

    def take_range(self, lo: int, hi: int) -> Rows:
        """Rows ``lo`` to ``hi`` (a slice: cheaper than gathering the same positions)."""
        cols = [
            a[lo:hi].tolist() if isinstance(a, np.ndarray) else a.slice(lo, hi - lo).to_list()
            for a in self.arrays
        ]
        return Rows(self.schema, list(zip(*cols, strict=True)))


def ranges(lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The positions ``lo[i] .. lo[i] + counts[i] - 1``, concatenated."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.cumsum(np.concatenate(([0], counts[:-1]))), counts)
    return starts + np.arange(total)


def members(sorted_codes: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Which of ``codes`` are in ``sorted_codes`` (sorted, unique)."""
    if len(sorted_codes) == 0:
        return np.zeros(len(codes), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_codes, codes), len(sorted_codes) - 1)
    found: np.ndarray = sorted_codes[at] == codes
    return found


def batch_ranges(
    f: pl.DataFrame, codes: Any, lookups: LookupSettings
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_ranges` of the codes in an arranged frame: through its
    :class:`ColumnCache`'s direct index or fences where it has them."""
    cache = ColumnCache.of(f)
    if cache is None:
        return key_ranges(f.get_column(KEY).to_numpy(), codes)
    return cache.ranges(codes, lookups)


def lookup_few(
    parts: Sequence[Batch], codes: Any, limit: int, lookups: LookupSettings
) -> Rows | None:
    """The rows of a few keys (``codes``, sorted, unique) in every batch of a trace, in one
    pass and one list: rows batch by batch, each batch's keys in code order (what a lookup in
    each batch, concatenated, gives). ``None`` when more than ``limit`` rows match, or a
    batch has no row form or another schema (the caller reads batch by batch).

    A small update's step reads a key or two in every batch of a large trace, many times
    over: a lookup and a concatenation per batch cost more than the search itself."""
    cs = codes.tolist() if isinstance(codes, np.ndarray) else list(codes)
    out: list[tuple[Any, ...]] = []
    schema: dict[str, Any] | None = None
    names: tuple[str, ...] = ()
    for p in parts:
        if type(p) is Rows:
            if not p.rows:
                continue
            sch = p.schema
            out.extend(lookup(p, cs).rows)
        else:
            cache = ColumnCache.of(cast(pl.DataFrame, p))
            if cache is None:
                return None
            ks = cache.keys
            if len(ks) == 0:
                continue
            sch = cache.schema
            span = cache.key_span
            for c in cs:
                lo, hi = span(c, lookups)
                if hi > lo:
                    if len(out) + hi - lo > limit:
                        return None
                    out.extend(cache.take_range(lo, hi).rows)
        if schema is None:
            schema, names = sch, tuple(sch)
        elif tuple(sch) != names:
            return None
        if len(out) > limit:
            return None
    return None if schema is None else Rows(schema, out)


def lookup_frame(f: pl.DataFrame, lo: np.ndarray, hi: np.ndarray, limit: int) -> Rows | None:
    """The rows ``lo[i] .. hi[i] - 1`` of a large arranged frame (the ranges of a lookup's
    codes, :func:`batch_ranges`) as rows when at most ``limit``; ``None`` when more, or the
    schema has no row form (the caller gathers with Polars)."""
    if limit < 0:
        return None
    cache = ColumnCache.of(f)
    if cache is None:
        return None
    if len(lo) == 1:  # one key (a small update's usual lookup): its rows are one slice
        first, last = int(lo[0]), int(hi[0])
        if last - first > limit:
            return None
        return cache.take_range(first, last) if last > first else Rows(cache.schema, [])
    counts = hi - lo
    total = int(counts.sum())
    if total > limit:
        return None
    if total == 0:
        return Rows(cache.schema, [])
    return cache.take(ranges(lo, counts))


# ---------------------------------------------------------------------- joins


def join(
    left: Rows,
    right: Rows,
    tt: TimeType,
    left_on: Sequence[str],
    right_on: Sequence[str],
    output: Sequence[tuple[str, str, str]],
) -> Rows:
    """Every pair of rows with equal (non-null) keys: the output columns, the lub of the
    times and the product of the diffs."""
    lk, rk = left.getter(left_on), right.getter(right_on)
    index: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for r in right.rows:
        k = rk(r)
        if None in k:
            continue  # a null key matches nothing
        got = index.get(k)
        if got is None:
            index[k] = [r]
        else:
            got.append(r)
    lt, rt = times_getter(left, tt), times_getter(right, tt)
    ld, rd = left.index(DIFF), right.index(DIFF)
    picks = [(side == "l", (left if side == "l" else right).index(c)) for side, c, _ in output]
    lub = tt.join
    total = tt.is_total
    out: list[tuple[Any, ...]] = []
    for a in left.rows:
        matches = index.get(lk(a))
        if not matches:
            continue
        ta, da = lt(a), a[ld]
        for b in matches:
            tb = rt(b)
            t = (ta if ta >= tb else tb) if total else lub(ta, tb)
            out.append((*[a[i] if is_l else b[i] for is_l, i in picks], *t, da * b[rd]))
    schema = {name: (left if side == "l" else right).schema[c] for side, c, name in output}
    return Rows(updates_schema(schema, tt), out)


def updates_schema(data: dict[str, Any], tt: TimeType) -> dict[str, Any]:
    """The schema of updates whose data columns are ``data``: those, then ``tt``'s time
    columns and the diff (``Int64``)."""
    return {**data, **{c: pl.Int64 for c in tt.columns()}, DIFF: pl.Int64}


def without_keys(b: Rows, keys: Rows) -> Rows:
    """Rows of ``b`` whose values in ``keys``' columns are not among ``keys``' rows."""
    drop = set(keys.rows)
    g = b.getter(keys.names)
    return b.like([r for r in b.rows if g(r) not in drop])
