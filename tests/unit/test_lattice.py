"""Lattice laws of :class:`ddflow.timely.lattice.TimeType` for random mixes of product and
lexicographic coordinates.

The order is checked against a reference written from the definition (split a time into its
coordinates; compare each coordinate as a Python tuple), joins and meets against brute force over
a small grid, and every vectorized method row by row against its scalar version. Integers are
drawn from ``0..4`` so that ties (the interesting case inside a lexicographic pair) happen often.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.timely.lattice import EPOCHS, Time, TimeType

HI = 4  # times are drawn from 0..HI in every integer


@st.composite
def time_types(draw: st.DrawFn, max_width: int = 5) -> TimeType:
    """A random time type whose flat width is at most ``max_width``."""
    coordinates: list[str] = []
    width = 0
    n = draw(st.integers(1, max_width))
    for _ in range(n):
        options = ["product"] if width + 2 > max_width else ["product", "lexicographic"]
        c = draw(st.sampled_from(options))
        if width + (2 if c == "lexicographic" else 1) > max_width:
            break
        coordinates.append(c)
        width += 2 if c == "lexicographic" else 1
    return TimeType(tuple(coordinates))  # type: ignore[arg-type]


def times(tt: TimeType, hi: int = HI) -> st.SearchStrategy[Time]:
    return st.tuples(*[st.integers(0, hi)] * tt.width)


def chunks(tt: TimeType, t: Sequence[int]) -> list[tuple[int, ...]]:
    """Split a flat time into its coordinates: one integer, or a (priority, iteration) pair."""
    out, i = [], 0
    for c in tt.coordinates:
        n = 2 if c == "lexicographic" else 1
        out.append(tuple(t[i : i + n]))
        i += n
    return out


def ref_le(tt: TimeType, a: Sequence[int], b: Sequence[int]) -> bool:
    """The order by definition: the product of the coordinates' chains."""
    return all(x <= y for x, y in zip(chunks(tt, a), chunks(tt, b), strict=True))


def grid(tt: TimeType, hi: int) -> list[Time]:
    return list(itertools.product(range(hi + 1), repeat=tt.width))


def ref_advance_by(tt: TimeType, t: Time, frontier: Sequence[Time]) -> Time:
    result: Time | None = None
    for f in frontier:
        j = tt.join(t, f)
        result = j if result is None else tt.meet(result, j)
    return t if result is None else result


@st.composite
def tt_and_times(draw: st.DrawFn, n: int, max_width: int = 5, hi: int = HI):
    tt = draw(time_types(max_width))
    return (tt, *(draw(times(tt, hi)) for _ in range(n)))


@st.composite
def tt_time_frontier(draw: st.DrawFn, max_width: int = 5, hi: int = HI, min_size: int = 0):
    tt = draw(time_types(max_width))
    t = draw(times(tt, hi))
    frontier = draw(st.lists(times(tt, hi), min_size=min_size, max_size=4))
    return tt, t, frontier


# --------------------------------------------------------------------------- examples


def test_lexicographic_pair_orders_priority_first():
    tt = TimeType(("lexicographic",))
    assert tt.less_equal((0, 9), (1, 0))
    assert not tt.less_equal((1, 0), (0, 9))
    assert tt.join((0, 9), (1, 0)) == (1, 0)
    assert tt.meet((0, 9), (1, 0)) == (0, 9)
    assert tt.join((1, 2), (1, 5)) == (1, 5)
    assert tt.meet((1, 2), (1, 5)) == (1, 2)


def test_product_then_lexicographic():
    tt = TimeType(("product", "lexicographic"))
    assert tt.width == 3
    assert tt.less_equal((0, 0, 9), (0, 1, 0))
    assert not tt.less_equal((1, 0, 9), (0, 1, 0))
    # the epoch joins by max, the pair by lexicographic max
    assert tt.join((1, 0, 9), (0, 1, 0)) == (1, 1, 0)
    assert tt.meet((1, 0, 9), (0, 1, 0)) == (0, 0, 9)


def test_lexicographic_then_product_keeps_the_pair_together():
    tt = TimeType(("lexicographic", "product"))
    assert tt.join((0, 9, 0), (1, 0, 3)) == (1, 0, 3)
    assert tt.join((1, 0, 5), (0, 9, 3)) == (1, 0, 5)
    assert tt.meet((1, 0, 5), (0, 9, 3)) == (0, 9, 3)
    assert tt.meet((1, 0, 1), (0, 9, 3)) == (0, 9, 1)


def test_structure():
    assert EPOCHS.is_total and EPOCHS.is_product
    assert TimeType(("lexicographic",)).is_total
    assert not TimeType(("product", "lexicographic")).is_product
    assert not TimeType(("product", "product")).is_total
    tt = TimeType(("product", "lexicographic", "product"))
    assert tt.minimum() == (0, 0, 0, 0)
    assert tt.columns() == ["__t0", "__t1", "__t2", "__t3"]
    assert EPOCHS.extend("lexicographic") == TimeType(("product", "lexicographic"))


@given(time_types(max_width=3))
@settings(max_examples=40, deadline=None)
def test_is_total_iff_all_pairs_comparable(tt):
    g = grid(tt, 2)
    total = all(tt.less_equal(a, b) or tt.less_equal(b, a) for a in g for b in g)
    assert tt.is_total == total


# --------------------------------------------------------------------------- partial order


@given(tt_and_times(2))
def test_less_equal_matches_definition(args):
    tt, a, b = args
    assert tt.less_equal(a, b) == ref_le(tt, a, b)
    assert tt.less_than(a, b) == (a != b and ref_le(tt, a, b))


@given(tt_and_times(3))
def test_partial_order(args):
    tt, a, b, c = args
    le = tt.less_equal
    assert le(a, a)
    if le(a, b) and le(b, a):
        assert a == b
    if le(a, b) and le(b, c):
        assert le(a, c)
    assert tt.less_equal(tt.minimum(), a)


@given(tt_and_times(2))
def test_sort_key_is_a_linear_extension(args):
    tt, a, b = args
    if tt.less_equal(a, b):
        assert tt.sort_key(a) <= tt.sort_key(b)
    if tt.less_than(a, b):
        assert tt.sort_key(a) < tt.sort_key(b)


# --------------------------------------------------------------------------- join and meet


@given(tt_and_times(2, max_width=4, hi=3))
@settings(max_examples=60, deadline=None)
def test_join_is_least_upper_bound(args):
    tt, a, b = args
    j = tt.join(a, b)
    assert ref_le(tt, a, j) and ref_le(tt, b, j)
    for u in grid(tt, 3):
        if ref_le(tt, a, u) and ref_le(tt, b, u):
            assert ref_le(tt, j, u), (j, u)


@given(tt_and_times(2, max_width=4, hi=3))
@settings(max_examples=60, deadline=None)
def test_meet_is_greatest_lower_bound(args):
    tt, a, b = args
    m = tt.meet(a, b)
    assert ref_le(tt, m, a) and ref_le(tt, m, b)
    for lo in grid(tt, 3):
        if ref_le(tt, lo, a) and ref_le(tt, lo, b):
            assert ref_le(tt, lo, m), (m, lo)


@given(tt_and_times(3))
def test_join_meet_algebra(args):
    tt, a, b, c = args
    join, meet = tt.join, tt.meet
    assert join(a, b) == join(b, a)
    assert meet(a, b) == meet(b, a)
    assert join(join(a, b), c) == join(a, join(b, c))
    assert meet(meet(a, b), c) == meet(a, meet(b, c))
    assert join(a, a) == a and meet(a, a) == a
    assert join(a, meet(a, b)) == a  # absorption
    assert meet(a, join(a, b)) == a
    assert (join(a, b) == b) == tt.less_equal(a, b)  # consistency with the order
    assert (meet(a, b) == a) == tt.less_equal(a, b)


@given(tt_and_times(3))
def test_distributive(args):
    tt, a, b, c = args
    join, meet = tt.join, tt.meet
    assert meet(a, join(b, c)) == join(meet(a, b), meet(a, c))
    assert join(a, meet(b, c)) == meet(join(a, b), join(a, c))


@given(tt_and_times(3))
def test_join_all(args):
    tt, a, b, c = args
    assert tt.join_all([a, b, c]) == tt.join(tt.join(a, b), c)
    assert tt.join_all(iter([a])) == a


def test_join_all_of_nothing_raises():
    with pytest.raises(StopIteration):
        EPOCHS.join_all([])


# --------------------------------------------------------------------------- advance_by


@given(tt_time_frontier())
def test_advance_by_matches_its_definition(args):
    tt, t, frontier = args
    assert tt.advance_by(t, frontier) == ref_advance_by(tt, t, frontier)


@given(tt_time_frontier(max_width=4, hi=3))
@settings(max_examples=80, deadline=None)
def test_advance_by_preserves_order_to_times_in_advance_of_the_frontier(args):
    # the property compaction relies on: t <= u iff advance_by(t, F) <= u, for u beyond F
    tt, t, frontier = args
    a = tt.advance_by(t, frontier)
    for u in grid(tt, 3):
        if any(ref_le(tt, f, u) for f in frontier):
            assert ref_le(tt, t, u) == ref_le(tt, a, u), (t, a, u)


@given(tt_time_frontier(max_width=4, hi=2, min_size=1))
@settings(max_examples=80, deadline=None)
def test_advance_by_is_the_greatest_equivalent_time(args):
    # any t2 that no time in advance of a nonempty F can tell apart from t is <= advance_by(t, F)
    # (the grid contains every join(t, f), so restricting u to the grid loses nothing)
    tt, t, frontier = args
    a = tt.advance_by(t, frontier)
    g = grid(tt, 2)
    beyond = [u for u in g if any(ref_le(tt, f, u) for f in frontier)]
    for t2 in g:
        if all(ref_le(tt, t, u) == ref_le(tt, t2, u) for u in beyond):
            assert ref_le(tt, t2, a), (t2, a)


@given(tt_time_frontier())
def test_advance_by_is_idempotent_and_advances(args):
    tt, t, frontier = args
    a = tt.advance_by(t, frontier)
    assert tt.advance_by(a, frontier) == a
    assert tt.less_equal(t, a)
    if not frontier:
        assert a == t


@given(tt_time_frontier())
def test_advance_by_depends_only_on_the_frontier_it_describes(args):
    # dominated elements of F do not change the result, nor does their order
    tt, t, frontier = args
    minimal = [f for f in frontier if not any(tt.less_than(g, f) for g in frontier)]
    assert tt.advance_by(t, frontier) == tt.advance_by(t, minimal)
    assert tt.advance_by(t, frontier) == tt.advance_by(t, list(reversed(frontier)))


@given(st.integers(0, HI), st.lists(st.integers(0, HI), min_size=1, max_size=4))
def test_advance_by_a_total_order_lands_in_advance_of_the_frontier(t, frontier):
    # in a total order advance_by(t, F) = max(t, min F); in a partial order it may fall below F
    assert EPOCHS.advance_by((t,), [(f,) for f in frontier]) == (max(t, min(frontier)),)


def test_advance_by_partial_order_can_fall_below_the_frontier():
    tt = TimeType(("product", "product"))
    frontier = [(0, 1), (1, 0)]
    assert tt.advance_by((0, 0), frontier) == (0, 0)
    assert tt.advance_by((0, 5), [(2, 0), (1, 3)]) == (1, 5)
    lex = TimeType(("lexicographic",))
    assert lex.advance_by((0, 9), [(1, 0)]) == (1, 0)
    assert lex.advance_by((2, 0), [(1, 7)]) == (2, 0)


# --------------------------------------------------------------------------- vectorized


def as_array(rows: Sequence[Sequence[int]], width: int) -> np.ndarray:
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), width)


@st.composite
def tt_and_columns(draw: st.DrawFn):
    tt = draw(time_types())
    n = draw(st.integers(1, 12))
    a = draw(st.lists(times(tt), min_size=n, max_size=n))
    b = draw(st.lists(times(tt), min_size=n, max_size=n))
    frontier = draw(st.lists(times(tt), max_size=4))
    return tt, a, b, frontier


@given(tt_and_columns())
def test_vectorized_agree_with_scalar(args):
    tt, a, b, frontier = args
    A, B = as_array(a, tt.width), as_array(b, tt.width)
    le = tt.less_equal_array(A, B)
    join = tt.join_array(A, B)
    meet = tt.meet_array(A, B)
    adv = tt.advance_by_array(A, frontier)
    beyond = tt.in_advance_of_array(A, frontier)
    assert le.dtype == np.bool_ and le.shape == (len(a),)
    assert join.shape == meet.shape == adv.shape == A.shape
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert bool(le[i]) == tt.less_equal(x, y)
        assert tuple(join[i].tolist()) == tt.join(x, y)
        assert tuple(meet[i].tolist()) == tt.meet(x, y)
        assert tuple(adv[i].tolist()) == tt.advance_by(x, frontier)
        assert bool(beyond[i]) == any(tt.less_equal(f, x) for f in frontier)


@given(tt_and_columns())
def test_vectorized_broadcast_a_single_time(args):
    tt, a, b, _ = args
    A = as_array(a, tt.width)
    one = np.asarray(b[0], dtype=np.int64)  # 1-d: one time against every row
    left = tt.less_equal_array(one, A)
    right = tt.less_equal_array(A, one)
    join = tt.join_array(A, one)
    meet = tt.meet_array(one, A)
    for i, x in enumerate(a):
        assert bool(left[i]) == tt.less_equal(b[0], x)
        assert bool(right[i]) == tt.less_equal(x, b[0])
        assert tuple(join[i].tolist()) == tt.join(x, b[0])
        assert tuple(meet[i].tolist()) == tt.meet(b[0], x)


def test_vectorized_do_not_modify_their_inputs():
    tt = TimeType(("product", "lexicographic"))
    A = np.array([[0, 1, 5], [2, 0, 0]], dtype=np.int64)
    B = np.array([[1, 0, 9], [1, 2, 0]], dtype=np.int64)
    A0, B0 = A.copy(), B.copy()
    tt.join_array(A, B)
    tt.meet_array(A, B)
    tt.advance_by_array(A, [(1, 1, 0)])
    assert (A == A0).all() and (B == B0).all()
    assert tt.join_array(A, B).tolist() == [[1, 1, 5], [2, 2, 0]]
    assert tt.meet_array(A, B).tolist() == [[0, 0, 9], [1, 0, 0]]
