"""Antichains, mutable frontiers and change batches.

An :class:`Antichain` is a set of mutually incomparable times; as a *frontier* it stands for
every time in advance of one of its elements. Invariants:

* minimality: no element is ``<=`` another (``insert`` drops dominated times);
* a time ``t`` is *complete* at frontier ``F`` iff no ``f`` in ``F`` has ``f <= t``
  (the empty frontier completes every time).

A :class:`MutableAntichain` holds a multiset of times with integer counts (occurrence counts of
pointstamps, or capabilities) and maintains the antichain of minimal times with positive count:
``frontier = minimal {t : count(t) > 0}``. Updates report how the frontier changed, as a
:class:`ChangeBatch` of ``(time, +1 / -1)``.

A :class:`ChangeBatch` accumulates ``(time, delta)`` changes and consolidates them: equal times add
up and zero deltas vanish.

>>> from ddflow.timely.lattice import TimeType
>>> tt = TimeType(("product", "product"))
>>> a = Antichain(tt, [(0, 2), (1, 1), (1, 3)])
>>> sorted(a)
[(0, 2), (1, 1)]
>>> a.less_equal((1, 2)), a.less_equal((0, 1))
(True, False)
>>> m = MutableAntichain(tt)
>>> sorted(m.update_iter([((0, 1), 1), ((1, 0), 1)]))
[((0, 1), 1), ((1, 0), 1)]
>>> sorted(m.update_iter([((0, 1), -1)]))
[((0, 1), -1)]
>>> m.frontier()
[(1, 0)]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from ddflow.timely.lattice import Time, TimeType

__all__ = ["Antichain", "ChangeBatch", "MutableAntichain"]


class Antichain:
    """A set of mutually incomparable times."""

    __slots__ = ("elements", "time_type")

    def __init__(self, time_type: TimeType, times: Iterable[Sequence[int]] = ()) -> None:
        self.time_type = time_type
        self.elements: list[Time] = []
        for t in times:
            self.insert(t)

    def insert(self, t: Sequence[int]) -> bool:
        """Add ``t`` unless some element is ``<=`` it; drop the elements it dominates.
        Returns whether ``t`` was added."""
        t = tuple(t)
        le = self.time_type.less_equal
        if any(le(e, t) for e in self.elements):
            return False
        self.elements = [e for e in self.elements if not le(t, e)]
        self.elements.append(t)
        return True

    def less_equal(self, t: Sequence[int]) -> bool:
        """Is some element ``<= t``? (``t`` is in advance of this frontier, not complete.)"""
        le = self.time_type.less_equal
        return any(le(e, t) for e in self.elements)

    def less_than(self, t: Sequence[int]) -> bool:
        """Is some element strictly less than ``t``?"""
        lt = self.time_type.less_than
        return any(lt(e, t) for e in self.elements)

    def dominates(self, other: Antichain) -> bool:
        """Every element of ``other`` is in advance of this antichain."""
        return all(self.less_equal(t) for t in other.elements)

    def is_empty(self) -> bool:
        return not self.elements

    def __iter__(self) -> Iterator[Time]:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self.elements)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Antichain):
            return sorted(self.elements) == sorted(other.elements)
        if isinstance(other, (list, tuple, set, frozenset)):
            return sorted(self.elements) == sorted(tuple(t) for t in other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.elements)))

    def __repr__(self) -> str:
        return f"Antichain({sorted(self.elements)})"


class ChangeBatch:
    """Accumulated ``(time, delta)`` changes; equal times add up, zeros vanish."""

    __slots__ = ("_changes",)

    def __init__(self, changes: Iterable[tuple[Sequence[int], int]] = ()) -> None:
        self._changes: dict[Time, int] = {}
        for t, d in changes:
            self.update(t, d)

    def update(self, t: Sequence[int], delta: int) -> None:
        t = tuple(t)
        v = self._changes.get(t, 0) + delta
        if v:
            self._changes[t] = v
        else:
            self._changes.pop(t, None)

    def extend(self, changes: Iterable[tuple[Sequence[int], int]]) -> None:
        for t, d in changes:
            self.update(t, d)

    def drain(self) -> list[tuple[Time, int]]:
        """Return the consolidated changes and empty the batch."""
        out = list(self._changes.items())
        self._changes.clear()
        return out

    def is_empty(self) -> bool:
        return not self._changes

    def items(self) -> list[tuple[Time, int]]:
        return list(self._changes.items())

    def __len__(self) -> int:
        return len(self._changes)

    def __repr__(self) -> str:
        return f"ChangeBatch({sorted(self._changes.items())})"


class MutableAntichain:
    """A multiset of times with counts, maintaining the antichain of its minimal positive times.

    Counts may go negative transiently (progress updates from different operators arrive in any
    order); only times with positive count are in the frontier.
    """

    __slots__ = ("_counts", "_frontier", "time_type")

    def __init__(self, time_type: TimeType) -> None:
        self.time_type = time_type
        self._counts: dict[Time, int] = {}
        self._frontier: list[Time] = []

    def frontier(self) -> list[Time]:
        """The minimal times with positive count."""
        return self._frontier

    def antichain(self) -> Antichain:
        return Antichain(self.time_type, self._frontier)

    def count(self, t: Sequence[int]) -> int:
        return self._counts.get(tuple(t), 0)

    def is_empty(self) -> bool:
        """No time has a positive count: the frontier is empty and every time is complete."""
        return not self._frontier

    def less_equal(self, t: Sequence[int]) -> bool:
        """Is some frontier element ``<= t`` (``t`` is not yet complete)?"""
        le = self.time_type.less_equal
        return any(le(f, t) for f in self._frontier)

    def less_than(self, t: Sequence[int]) -> bool:
        lt = self.time_type.less_than
        return any(lt(f, t) for f in self._frontier)

    def update_iter(self, changes: Iterable[tuple[Sequence[int], int]]) -> list[tuple[Time, int]]:
        """Apply count changes and return the changes to the frontier (``+1`` for a time that
        joins it, ``-1`` for one that leaves it)."""
        old_frontier = self._frontier
        if not self.apply_changes((tuple(t), d) for t, d in changes):
            return []
        out = ChangeBatch()
        for t in old_frontier:
            out.update(t, -1)
        for t in self._frontier:
            out.update(t, 1)
        return out.drain()

    def apply_changes(self, changes: Iterable[tuple[Time, int]]) -> bool:
        """Apply count changes (times as tuples); whether the frontier changed. (What progress
        tracking asks of each target it pushes changes to, without the changes themselves.)"""
        counts = self._counts
        flipped: list[Time] = []  # the times that became positive or stopped being
        for t, d in changes:
            if not d:
                continue
            old = counts.get(t, 0)
            new = old + d
            if new:
                counts[t] = new
            else:
                del counts[t]
            if (old > 0) != (new > 0):
                flipped.append(t)
        if not flipped:
            return False
        # judged on the counts at the end: a time that left and came back (a message taken
        # at one location and sent at another, in one round) changes nothing
        frontier = self._frontier
        le = self.time_type.less_equal
        for t in flipped:
            if counts.get(t, 0) > 0:
                # a new positive time changes the frontier only if nothing in it is <= t
                # (and a time of the frontier still positive changes nothing)
                if not any(le(f, t) for f in frontier):
                    break
            elif t in frontier:
                break
        else:
            return False
        self._frontier = self._minimal()
        return frontier != self._frontier

    def update(self, t: Sequence[int], delta: int) -> list[tuple[Time, int]]:
        return self.update_iter(((t, delta),))

    def _minimal(self) -> list[Time]:
        return minimal_sorted(self.time_type, sorted(t for t, c in self._counts.items() if c > 0))

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self._frontier}, counts={self._counts})"


def minimal_sorted(time_type: TimeType, times: Iterable[Time]) -> list[Time]:
    """The minimal elements of distinct ``times`` given in lexicographic order.

    Sorted lexicographically (a linear extension of the order), a time can only be dominated
    by an earlier one, so one pass against the minimal times kept so far suffices.

    >>> from ddflow.timely.lattice import EPOCHS
    >>> minimal_sorted(EPOCHS.extend("product"), [(0, 3), (1, 0), (1, 4), (2, 1)])
    [(0, 3), (1, 0)]
    """
    le = time_type.less_equal
    minimal: list[Time] = []
    for t in times:
        if not any(le(m, t) for m in minimal):
            minimal.append(t)
    return minimal
