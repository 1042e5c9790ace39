"""Multiplicities: what an input has accepted, kept to refuse a record removed more than it was
inserted.

A collection may hold negative multiplicities (DESIGN §1), but a table never does: removing a
record that is not there is a mistake, which a ``group_by`` would then hide. An input therefore
keeps, for every record ``r``, its accumulated multiplicity

    m(r) = sum of the diffs of r that the input accepted (every epoch, the open one included)

and refuses, before accepting it, a call whose changes would take some ``m(r)`` below zero. A
call's changes to one record are summed first (``n(r)``), so a call that inserts and removes a
record is fine. Invariants:

* ``m(r) >= 0`` for every record, always: :meth:`Multiplicities.apply` either applies every
  change of a call or, when some ``m(r) + n(r) < 0``, applies none and returns the first such
  record of the call (a :class:`Shortfall`);
* records are equal as the engine consolidates them (Polars' equality): NaN equals NaN, -0.0
  equals 0.0, null equals null;
* the state is columnar and bounded by the live records: a frame of the records with
  ``m(r) > 0`` (each once), a NumPy array of their counts and one of 32-bit keys; a dict of
  the records changed since that frame was made, holding at most ``max(MIN_RECENT, n //
  RECENT_FRACTION)`` records for a frame of ``n``; and the frames of large insertions not
  indexed yet (rows inserted, so live).

The frame (``base``) is sorted by key, the high 32 bits of Polars' row hash: the records of a
small call are found by a binary search of the keys (``numpy.searchsorted``) and compared exactly
with every row of that key, so hash collisions cost a comparison, never a wrong answer. A record
is ``base``'s count plus its change in ``recent`` (a removal that ``recent`` covers alone needs
no search: ``base`` holds no negative count). A call too large for ``recent``'s room is merged
with ``base`` and ``recent`` into a new ``base`` (one hash, one sort of packed keys, one pass);
as ``recent``'s room grows with ``base``, a merge follows at least ``n / RECENT_FRACTION``
changed records, so a small change costs ``O(log n)`` plus an amortized constant. A large call
that only inserts cannot fail, so it is kept as it came (``pending``) and merged only when a
later call needs to look a record up: loading a table costs nothing until something is removed.

>>> import polars as pl
>>> m = Multiplicities({"x": pl.Int64()})
>>> m.apply(pl.DataFrame({"x": [1, 1, 2]}), 1) is None
True
>>> m.apply(pl.DataFrame({"x": [2, 2]}), -1)
Shortfall(record=(2,), multiplicity=1, change=-2)
>>> m.count((2,)), m.count((1,))
(1, 2)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

__all__ = ["MIN_RECENT", "RECENT_FRACTION", "Multiplicities", "Shortfall"]

#: ``recent`` holds at least this many records before a merge, whatever the size of ``base``
MIN_RECENT = 1024
#: and at most ``len(base) // RECENT_FRACTION`` beyond that
RECENT_FRACTION = 32

_COUNT = "__count"
_NAN = float("nan")  # the one NaN of the records in ``recent`` (a dict key equals itself)
_HIGH32 = np.uint64(0xFFFFFFFF00000000)
_SHIFT = np.uint64(32)

Record = tuple[Any, ...]


@dataclass(frozen=True)
class Shortfall:
    """A record that a call would take below zero: its multiplicity before the call and the
    call's (summed) change of it."""

    record: Record
    multiplicity: int
    change: int


class Multiplicities:
    """The accumulated multiplicity of every record of an input (see the module docstring).

    ``schema`` maps the input's columns to their Polars dtypes; every frame given to
    :meth:`apply` has exactly these columns and dtypes."""

    def __init__(self, schema: Mapping[str, pl.DataType]) -> None:
        self._schema = dict(schema)
        self._names = list(self._schema)
        self._floats = [i for i, dt in enumerate(self._schema.values()) if dt.is_float()]
        # (list values are kept as tuples, so that a record can be a dict key)
        self._lists = [i for i, dt in enumerate(self._schema.values()) if isinstance(dt, pl.List)]
        self._base = pl.DataFrame(schema=self._schema)
        self._keys = np.empty(0, dtype=np.uint32)
        self._counts: np.ndarray = np.empty(0, dtype=np.int64)
        self._recent: dict[Record, int] = {}
        #: insertions too large for ``recent``, not indexed yet: frames and their diffs
        self._pending: list[tuple[pl.DataFrame, int | pl.Series]] = []
        #: bits of the row hash in a key (fewer make collisions, which tests use)
        self.key_bits = 32

    # ------------------------------------------------------------------ reading

    def count(self, record: Record) -> int:
        """The multiplicity of ``record`` (a tuple of the columns' values)."""
        self._index()
        r = self._canonical(tuple(record))
        base = 0
        if self._base.height:
            frame = pl.DataFrame([r], schema=self._schema, orient="row")
            base = self._base_count(r, int(frame.hash_rows()[0]))
        return base + self._recent.get(r, 0)

    def __len__(self) -> int:
        """The number of records held (those of ``base``, those changed since, and the rows of
        insertions not indexed yet)."""
        return self._base.height + len(self._recent) + sum(f.height for f, _ in self._pending)

    @property
    def nbytes(self) -> int:
        """Bytes held: the frame, the keys, the counts, the dict of recent records and the
        insertions not indexed yet."""
        recent = sys.getsizeof(self._recent) + sum(
            sys.getsizeof(r) + sum(sys.getsizeof(v) for v in r) for r in self._recent
        )
        pending = sum(
            int(f.estimated_size()) + (0 if isinstance(d, int) else int(d.estimated_size()))
            for f, d in self._pending
        )
        return (
            int(self._base.estimated_size())
            + self._keys.nbytes
            + self._counts.nbytes
            + recent
            + pending
        )

    def records(self) -> tuple[pl.DataFrame, np.ndarray]:
        """Every record held with a non-zero multiplicity, and those multiplicities (for a
        checkpoint; :meth:`apply` of them to an empty one gives this one back)."""
        if self._recent or self._pending:
            self._merge(None, 0)
        return self._base, self._counts.astype(np.int64)

    # ------------------------------------------------------------------ changing

    def apply(self, data: pl.DataFrame, diff: int | pl.Series) -> Shortfall | None:
        """Add ``diff`` (one for every row, or one per row) to the multiplicity of each row of
        ``data``; if that would take a record below zero, change nothing and return the first
        such record of ``data``.

        A large call that only inserts cannot fail: it is kept as it is and indexed with
        ``base`` when a later call first needs to look a record up (a table loaded and never
        changed is never indexed)."""
        k = data.height
        if k == 0 or (isinstance(diff, int) and diff == 0):
            return None
        room = max(MIN_RECENT, self._base.height // RECENT_FRACTION) - len(self._recent)
        if k <= room:
            return self._apply_small(data, diff)
        if not _may_be_negative(diff):
            self._pending.append((data, diff))
            return None
        return self._merge(data, diff)

    def _apply_small(self, data: pl.DataFrame, diff: int | pl.Series) -> Shortfall | None:
        """A call that fits in ``recent``: each record summed in Python, each shortfall that
        ``recent`` does not cover looked up in ``base`` by binary search."""
        rows = data.rows()
        if self._floats or self._lists:
            rows = [self._canonical(r) for r in rows]
        net: dict[Record, int] = {}
        first: dict[Record, int] = {}
        if isinstance(diff, int):
            for i, r in enumerate(rows):
                if r in net:
                    net[r] += diff
                else:
                    net[r], first[r] = diff, i
        else:
            for i, (r, d) in enumerate(zip(rows, diff.to_list(), strict=True)):
                if r in net:
                    net[r] += d
                else:
                    net[r], first[r] = d, i
        short = [r for r, d in net.items() if d < 0 and self._recent.get(r, 0) + d < 0]
        if short:
            self._index()
            recent = self._recent
            hashes = data.hash_rows().to_numpy() if self._base.height else None
            for r in short:
                m = recent.get(r, 0)
                if hashes is not None:
                    m += self._base_count(r, int(hashes[first[r]]))
                if m + net[r] < 0:
                    return Shortfall(data.row(first[r]), m, net[r])
        recent = self._recent
        for r, d in net.items():
            v = recent.get(r, 0) + d
            if v:
                recent[r] = v
            else:
                recent.pop(r, None)
        return None

    def _base_count(self, r: Record, h: int) -> int:
        """The count in ``base`` of record ``r``, whose row hash is ``h``."""
        keys = self._keys
        key = keys.dtype.type(h >> (64 - self.key_bits))
        j = int(keys.searchsorted(key))
        total = 0
        while j < len(keys) and keys[j] == key:
            if _same(self._canonical(self._base.row(j)), r):
                total += int(self._counts[j])
            j += 1
        return total

    def _index(self) -> None:
        """Index the insertions kept as they came (merge them into ``base``)."""
        if self._pending:
            self._merge(None, 0)

    def _merge(self, data: pl.DataFrame | None, diff: int | pl.Series) -> Shortfall | None:
        """``base``, ``recent``, the insertions not indexed yet and the call (if any) made one
        new ``base`` (``recent`` emptied), unless the call would take a record below zero."""
        parts: list[tuple[pl.DataFrame, int | pl.Series | np.ndarray]] = []
        if self._base.height:
            parts.append((self._base, self._counts))
        if self._recent:
            parts.append(
                (
                    pl.DataFrame(list(self._recent), schema=self._schema, orient="row"),
                    np.fromiter(self._recent.values(), dtype=np.int64, count=len(self._recent)),
                )
            )
        parts += self._pending
        start = sum(f.height for f, _ in parts)  # the call's rows come after these
        if data is not None:
            parts.append((data, diff))
        frame = pl.concat([f for f, _ in parts]) if len(parts) > 1 else parts[0][0]
        order, keys = _sorted_by_key(frame, self.key_bits)
        order, starts = self._groups(frame, order, keys)
        n = len(order)
        sorted_counts = None
        uniform = parts[0][1] if len(parts) == 1 else None
        if isinstance(uniform, int):  # a load: every count is the call's diff
            totals = np.diff(starts, append=n) * uniform
        else:
            sorted_counts = np.concatenate(
                [
                    np.full(f.height, d, dtype=np.int64)
                    if isinstance(d, int)
                    else d.astype(np.int64)
                    if isinstance(d, np.ndarray)
                    else d.cast(pl.Int64).to_numpy()
                    for f, d in parts
                ]
            )[order]
            totals = _run_sums(sorted_counts, starts)
        if data is not None and _may_be_negative(diff) and totals.min() < 0:
            if sorted_counts is None:
                sorted_counts = np.full(n, diff, dtype=np.int64)
            from_call = order >= start
            net = _run_sums(np.where(from_call, sorted_counts, 0), starts)
            group = np.zeros(n, dtype=np.int64)
            group[starts[1:]] = 1
            np.cumsum(group, out=group)
            bad = from_call & (totals[group] < 0)
            i = int(order[bad].min())  # the call's first row that goes below zero
            g = int(group[np.flatnonzero(order == i)[0]])
            return Shortfall(data.row(i - start), int(totals[g] - net[g]), int(net[g]))
        if len(starts) == n and totals.min() > 0:  # every record once, none gone
            rows, self._keys, self._counts = order, keys.copy(), _narrow(totals)
        else:
            alive = totals != 0
            live = starts[alive]
            rows, self._keys, self._counts = order[live], keys[live], _narrow(totals[alive])
        self._base = frame[pl.Series(rows, dtype=pl.UInt32)]
        self._recent = {}
        self._pending = []
        return None

    def _groups(
        self, frame: pl.DataFrame, order: np.ndarray, keys: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``order`` (rows of ``frame`` sorted by key) with equal records made adjacent, and the
        positions at which each run of equal records starts."""
        same_key = np.flatnonzero(keys[1:] == keys[:-1]) + 1
        if not same_key.size:
            return order, np.arange(len(order))
        equal = _rows_equal(frame, order[same_key], order[same_key - 1])
        collided = same_key[~equal]
        if collided.size:  # two records share a key: order that key's rows by record
            order = order.copy()
            for lo in np.unique(np.searchsorted(keys, keys[collided])):
                hi = int(np.searchsorted(keys, keys[lo], side="right"))
                groups: dict[Record, list[int]] = {}
                for i in order[lo:hi].tolist():
                    groups.setdefault(self._canonical(frame.row(i)), []).append(i)
                order[lo:hi] = [i for g in groups.values() for i in g]
            equal = _rows_equal(frame, order[same_key], order[same_key - 1])
        new = np.ones(len(order), dtype=bool)
        new[same_key[equal]] = False
        return order, np.flatnonzero(new)

    def _canonical(self, r: Record) -> Record:
        """``r`` with every NaN the same object and lists as tuples, so that equal records are
        equal dict keys."""
        if not self._floats and not self._lists:
            return r
        out = list(r)
        for i in self._floats:
            x = out[i]
            if x is not None and x != x:
                out[i] = _NAN
        for i in self._lists:
            x = out[i]
            if x is not None:
                out[i] = tuple(x)
        return tuple(out)


def _same(a: Record, b: Record) -> bool:
    """Records equal as the engine consolidates them (NaN equals NaN)."""
    return a == b or all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


def _sorted_by_key(frame: pl.DataFrame, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``frame`` in order of key (the high ``bits`` bits of the row hash; rows of
    equal key in their order in ``frame``) and their keys, as ``uint32`` views of one array:
    one ``numpy.sort`` of the key packed with the row number (an argsort is several times
    slower)."""
    n = frame.height
    if n >= 2**32:
        raise ValueError("an input's multiplicities are kept for fewer than 2**32 records")
    packed = frame.hash_rows().to_numpy(writable=True)
    if bits == 32:
        packed &= _HIGH32
    else:
        packed >>= np.uint64(64 - bits)
        packed <<= _SHIFT
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    halves = packed.view(np.uint32)
    low, high = (0, 1) if sys.byteorder == "little" else (1, 0)
    return halves[low::2], halves[high::2]


def _run_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The sums of ``values`` over the runs that begin at ``starts`` (``starts[0] == 0``)."""
    if len(starts) == len(values):
        return values
    total = np.cumsum(values)
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:] - 1
    ends[-1] = len(values) - 1
    sums: np.ndarray = total[ends] - total[starts] + values[starts]
    return sums


def _may_be_negative(diff: int | pl.Series) -> bool:
    """Whether a call's diffs include a negative one."""
    return diff < 0 if isinstance(diff, int) else bool(diff.min() < 0)  # type: ignore[operator]


def _rows_equal(frame: pl.DataFrame, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether rows ``a[i]`` and ``b[i]`` of ``frame`` hold equal records (Polars' equality:
    NaN equals NaN, null equals null). A numeric column without nulls is compared in NumPy."""
    equal = np.ones(len(a), dtype=bool)
    if not len(a):
        return equal
    for column in frame.get_columns():
        if column.dtype.is_numeric() and not column.null_count():
            values = column.to_numpy()
            x, y = values[a], values[b]
            same = x == y
            if column.dtype.is_float():
                same |= np.isnan(x) & np.isnan(y)
            equal &= same
        else:
            x, y = column.gather(a), column.gather(b)
            equal &= x.eq_missing(y).to_numpy()
    return equal


def _narrow(counts: np.ndarray) -> np.ndarray:
    """Positive counts in the narrowest unsigned type that holds them (almost always one
    byte: a record is usually inserted once)."""
    top = int(counts.max()) if counts.size else 0
    for t in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(t).max:
            return counts.astype(t)
    return counts
