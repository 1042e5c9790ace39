"""Times and their lattices.

A time is a tuple of non-negative integers ``(epoch, c1, c2, ...)``: the epoch, then the
coordinates that the enclosing loops add. Every scope has a :class:`TimeType`, a sequence of
*coordinates*, each either

* ``"product"``: one integer, ordered with the product order against the other coordinates
  (the epoch and the coordinate of an ordinary ``iterate`` loop), or
* ``"lexicographic"``: a pair ``(priority, iteration)`` stored as two adjacent integers and
  ordered lexicographically within the pair (the coordinate of a ``prioritized_iterate``).

The order of a time type is the product of its coordinates' orders, so for times ``s, t``::

    less_equal(s, t)  iff  every coordinate of s <= the same coordinate of t
    join(s, t)        the least upper bound: coordinate-wise max (lexicographic max in a pair)
    meet(s, t)        the greatest lower bound: coordinate-wise min (lexicographic min in a pair)
    advance_by(t, F)  = meet over f in F of join(t, f)

Every coordinate is a chain, so the lattice is distributive and ``advance_by`` has the property
compaction relies on: for every ``u`` in advance of the frontier ``F`` (some ``f <= u``),
``t <= u  iff  advance_by(t, F) <= u``.

Scalar versions serve progress tracking (a few times at a time); the vectorized versions work on
time columns (``n x width`` integer arrays) for the data plane. (The local runtime's Polars
expressions for the same order live in :mod:`ddflow.runtime.local.kernels`.)

>>> tt = TimeType(("product", "product"))
>>> tt.less_equal((0, 1), (1, 1)), tt.less_equal((0, 2), (1, 1))
(True, False)
>>> tt.join((0, 2), (1, 1)), tt.meet((0, 2), (1, 1))
((1, 2), (0, 1))
>>> TimeType(("product", "lexicographic")).less_equal((0, 0, 9), (0, 1, 0))
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import le as _le
from typing import Literal

import numpy as np
import numpy.typing as npt

#: the prefix of a batch's time columns: ``__t0 .. __t{width-1}`` (:meth:`TimeType.columns`)
TIME_PREFIX = "__t"

Time = tuple[int, ...]
Coordinate = Literal["product", "lexicographic"]
IntArray = npt.NDArray[np.int64]

__all__ = ["EPOCHS", "Coordinate", "IntArray", "Time", "TimeType"]


@dataclass(frozen=True)
class TimeType:
    """The lattice of times of one scope: the epoch plus one coordinate per enclosing loop.

    >>> TimeType(("product",)).width
    1
    >>> TimeType(("product", "lexicographic", "product")).width
    4
    """

    coordinates: tuple[Coordinate, ...]
    width: int = field(init=False, compare=False, repr=False)
    # flat positions of the first integer of every lexicographic pair
    _pairs: tuple[int, ...] = field(init=False, compare=False, repr=False)
    # the time columns' names (asked for at every step of every operator)
    _columns: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        pairs: list[int] = []
        width = 0
        for c in self.coordinates:
            if c == "lexicographic":
                pairs.append(width)
                width += 2
            elif c == "product":
                width += 1
            else:  # pragma: no cover - guarded by the type
                raise ValueError(f"unknown time coordinate {c!r}")
        object.__setattr__(self, "width", width)
        object.__setattr__(self, "_pairs", tuple(pairs))
        object.__setattr__(self, "_columns", tuple(f"{TIME_PREFIX}{i}" for i in range(width)))

    # ----------------------------------------------------------------- structure

    @property
    def is_product(self) -> bool:
        """True when every coordinate is ordered by the product order."""
        return not self._pairs

    @property
    def pair_starts(self) -> tuple[int, ...]:
        """Flat positions where a lexicographic pair begins."""
        return self._pairs

    @property
    def is_total(self) -> bool:
        """True when the order is total (a single chain), as for the epochs of the top scope."""
        return len(self.coordinates) == 1

    def extend(self, coordinate: Coordinate) -> TimeType:
        """The time type of a loop nested in this scope.

        >>> EPOCHS.extend("product")
        TimeType(coordinates=('product', 'product'))
        """
        return TimeType((*self.coordinates, coordinate))

    def minimum(self) -> Time:
        """The least time: all zeros."""
        return (0,) * self.width

    def columns(self) -> list[str]:
        """Names of the time columns of a batch in this scope (a new list: the caller's)."""
        return list(self._columns)

    # ----------------------------------------------------------------- scalar order

    def less_equal(self, a: Sequence[int], b: Sequence[int]) -> bool:
        """The partial order of this time type."""
        if not self._pairs:
            return all(map(_le, a, b))
        i = 0
        n = self.width
        pairs = self._pairs
        while i < n:
            if i in pairs:
                if (a[i], a[i + 1]) > (b[i], b[i + 1]):
                    return False
                i += 2
            else:
                if a[i] > b[i]:
                    return False
                i += 1
        return True

    def less_than(self, a: Sequence[int], b: Sequence[int]) -> bool:
        """Strictly less: ``a <= b`` and ``a != b``."""
        return tuple(a) != tuple(b) and self.less_equal(a, b)

    def join(self, a: Sequence[int], b: Sequence[int]) -> Time:
        """Least upper bound of two times."""
        if not self._pairs:
            return tuple(map(max, a, b))
        out = list(a)
        for i in range(self.width):
            if i not in self._pairs and (i - 1) not in self._pairs:
                out[i] = max(a[i], b[i])
        for p in self._pairs:
            if (b[p], b[p + 1]) > (a[p], a[p + 1]):
                out[p], out[p + 1] = b[p], b[p + 1]
        return tuple(out)

    def meet(self, a: Sequence[int], b: Sequence[int]) -> Time:
        """Greatest lower bound of two times."""
        if not self._pairs:
            return tuple(map(min, a, b))
        out = list(a)
        for i in range(self.width):
            if i not in self._pairs and (i - 1) not in self._pairs:
                out[i] = min(a[i], b[i])
        for p in self._pairs:
            if (b[p], b[p + 1]) < (a[p], a[p + 1]):
                out[p], out[p + 1] = b[p], b[p + 1]
        return tuple(out)

    def join_all(self, times: Iterable[Sequence[int]]) -> Time:
        """Least upper bound of a non-empty collection of times."""
        it = iter(times)
        acc = tuple(next(it))
        for t in it:
            acc = self.join(acc, t)
        return acc

    def advance_by(self, t: Sequence[int], frontier: Iterable[Sequence[int]]) -> Time:
        """Advance ``t`` by a frontier: the meet, over ``f`` in the frontier, of ``join(t, f)``.

        The result is indistinguishable from ``t`` for every time in advance of the frontier.
        An empty frontier (nothing can happen any more) leaves ``t`` as it is.

        >>> TimeType(("product", "product")).advance_by((0, 5), [(2, 0), (1, 3)])
        (1, 5)
        """
        if not self._pairs:
            floor = self.advance_floor(frontier)
            return tuple(t) if floor is None else tuple(map(max, t, floor))
        result: Time | None = None
        for f in frontier:
            j = self.join(t, f)
            result = j if result is None else self.meet(result, j)
        return tuple(t) if result is None else result

    def advance_floor(self, frontier: Iterable[Sequence[int]]) -> Time | None:
        """For a product order, the coordinate-wise least of the frontier's times (None for
        an empty frontier): advancing by the frontier is then the coordinate-wise max with it.
        Join and meet are coordinate-wise max and min, so the meet over ``f`` of
        ``join(t, f)`` is, in each coordinate, ``min_f max(t_i, f_i) = max(t_i, min_f f_i)``.

        >>> TimeType(("product", "product")).advance_floor([(2, 0), (1, 3)])
        (1, 0)
        """
        assert not self._pairs, "a product order"
        floor: Time | None = None
        for f in frontier:
            floor = tuple(f) if floor is None else tuple(map(min, floor, f))
        return floor

    def sort_key(self, t: Sequence[int]) -> Time:
        """A key whose order (lexicographic on the flat tuple) is a linear extension of this
        partial order: if ``a <= b`` then ``sort_key(a) <= sort_key(b)``."""
        return tuple(t)

    # ----------------------------------------------------------------- vectorized

    def less_equal_array(self, a: IntArray, b: IntArray) -> npt.NDArray[np.bool_]:
        """Row-wise ``a[i] <= b[i]`` (or against a single time broadcast as one row)."""
        a = np.atleast_2d(a)
        b = np.atleast_2d(b)
        result = np.ones(max(a.shape[0], b.shape[0]), dtype=bool)
        i = 0
        while i < self.width:
            if i in self._pairs:
                result &= (a[:, i] < b[:, i]) | (
                    (a[:, i] == b[:, i]) & (a[:, i + 1] <= b[:, i + 1])
                )
                i += 2
            else:
                result &= a[:, i] <= b[:, i]
                i += 1
        return result

    def join_array(self, a: IntArray, b: IntArray) -> IntArray:
        """Row-wise least upper bound of two time arrays of equal length (or one broadcast)."""
        a = np.atleast_2d(a)
        b = np.atleast_2d(b)
        out = np.maximum(a, b)
        for p in self._pairs:
            take_b = (b[:, p] > a[:, p]) | ((b[:, p] == a[:, p]) & (b[:, p + 1] > a[:, p + 1]))
            out[:, p] = np.where(take_b, b[:, p], a[:, p])
            out[:, p + 1] = np.where(take_b, b[:, p + 1], a[:, p + 1])
        return out

    def meet_array(self, a: IntArray, b: IntArray) -> IntArray:
        """Row-wise greatest lower bound of two time arrays."""
        a = np.atleast_2d(a)
        b = np.atleast_2d(b)
        out = np.minimum(a, b)
        for p in self._pairs:
            take_b = (b[:, p] < a[:, p]) | ((b[:, p] == a[:, p]) & (b[:, p + 1] < a[:, p + 1]))
            out[:, p] = np.where(take_b, b[:, p], a[:, p])
            out[:, p + 1] = np.where(take_b, b[:, p + 1], a[:, p + 1])
        return out

    def advance_by_array(self, times: IntArray, frontier: Sequence[Sequence[int]]) -> IntArray:
        """Advance every row of ``times`` by the frontier (see :meth:`advance_by`)."""
        times = np.atleast_2d(times)
        if not frontier:
            return times
        if not self._pairs:
            floor = self.advance_floor(frontier)
            return np.maximum(times, np.asarray(floor, dtype=np.int64).reshape(1, -1))
        result: IntArray | None = None
        for f in frontier:
            j = self.join_array(times, np.asarray(f, dtype=np.int64).reshape(1, -1))
            result = j if result is None else self.meet_array(result, j)
        assert result is not None
        return result

    def in_advance_of_array(
        self, times: IntArray, frontier: Sequence[Sequence[int]]
    ) -> npt.NDArray[np.bool_]:
        """Row-wise: is some element of the frontier ``<=`` the time (the time is not complete)?"""
        times = np.atleast_2d(times)
        result = np.zeros(times.shape[0], dtype=bool)
        for f in frontier:
            result |= self.less_equal_array(np.asarray(f, dtype=np.int64).reshape(1, -1), times)
        return result


#: The time type of the top scope: epochs only, totally ordered.
EPOCHS = TimeType(("product",))
