"""The core's lattice agrees with Python's (:class:`ddflow.timely.lattice.TimeType`) on random
times of widths 1 to 4, product and lexicographic coordinates: ``less_equal``, ``join``,
``meet`` and ``advance_by``. While both exist, progress tracking (Python) and the native data
plane must order times the same way."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ddflow import _native
from ddflow.timely.lattice import TimeType


@st.composite
def typed_times(draw: st.DrawFn, n: int) -> tuple[TimeType, list[tuple[int, ...]]]:
    coords = draw(st.lists(st.sampled_from(["product", "lexicographic"]), min_size=1, max_size=3))
    tt = TimeType(tuple(coords))
    times = draw(st.lists(st.tuples(*[st.integers(0, 3)] * tt.width), min_size=n, max_size=n))
    return tt, times


@given(typed_times(2))
def test_the_order_join_and_meet_agree(drawn: tuple[TimeType, list[tuple[int, ...]]]) -> None:
    tt, (s, t) = drawn
    coords = list(tt.coordinates)
    assert _native.time_less_equal(coords, list(s), list(t)) == tt.less_equal(s, t)
    join, meet = _native.time_join_meet(coords, list(s), list(t))
    assert (tuple(join), tuple(meet)) == (tt.join(s, t), tt.meet(s, t))


@given(typed_times(4))
def test_advance_by_agrees(drawn: tuple[TimeType, list[tuple[int, ...]]]) -> None:
    tt, (t, *frontier) = drawn
    native = _native.time_advance_by(list(tt.coordinates), list(t), [list(f) for f in frontier])
    assert tuple(native) == tt.advance_by(t, frontier)
