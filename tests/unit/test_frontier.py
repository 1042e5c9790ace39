"""Antichains, change batches and mutable antichains against brute force.

Invariants checked:

* ``Antichain``: no element is ``<=`` another, every inserted time is in advance of some element,
  and the elements are among the inserted times (so the antichain is exactly the minimal inserted
  times);
* ``ChangeBatch``: the consolidated changes are the per-time sums with zeros removed;
* ``MutableAntichain``: after every update ``frontier() = minimal {t : count(t) > 0}``, even while
  some counts are negative, and the reported changes, accumulated, are ``+1`` per frontier element.
  ``apply_changes`` says exactly whether the frontier moved;
* ``minimal_sorted``: the minimal elements of sorted distinct times, in order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from ddflow.timely.frontier import Antichain, ChangeBatch, MutableAntichain, minimal_sorted
from ddflow.timely.lattice import EPOCHS, Time, TimeType

HI = 3


@st.composite
def time_types(draw: st.DrawFn, max_width: int = 4) -> TimeType:
    coordinates: list[str] = []
    width = 0
    for _ in range(draw(st.integers(1, max_width))):
        c = draw(st.sampled_from(["product", "lexicographic"]))
        n = 2 if c == "lexicographic" else 1
        if width + n > max_width:
            break
        coordinates.append(c)
        width += n
    return TimeType(tuple(coordinates))  # type: ignore[arg-type]


def times(tt: TimeType, hi: int = HI) -> st.SearchStrategy[Time]:
    return st.tuples(*[st.integers(0, hi)] * tt.width)


def minimal(tt: TimeType, ts: Sequence[Time]) -> set[Time]:
    """The minimal elements of a set of times, by brute force."""
    ts = set(ts)
    return {t for t in ts if not any(tt.less_than(s, t) for s in ts)}


@st.composite
def tt_and_times(draw: st.DrawFn, max_size: int = 12):
    tt = draw(time_types())
    return tt, draw(st.lists(times(tt), max_size=max_size))


# --------------------------------------------------------------------------- Antichain


@given(tt_and_times())
def test_antichain_is_the_minimal_inserted_times(args):
    tt, ts = args
    a = Antichain(tt)
    for t in ts:
        a.insert(t)
        elements = list(a)
        assert len(set(elements)) == len(elements)
        for x in elements:
            for y in elements:
                assert x == y or not tt.less_equal(x, y)
    assert set(a) <= set(ts)
    for t in ts:
        assert any(tt.less_equal(e, t) for e in a)
    assert set(a) == minimal(tt, ts)
    assert a == Antichain(tt, ts)
    assert a == Antichain(tt, reversed(ts))  # the result does not depend on insertion order


@given(tt_and_times(), st.data())
def test_antichain_queries(args, data):
    tt, ts = args
    a = Antichain(tt, ts)
    t = data.draw(times(tt))
    assert a.less_equal(t) == any(tt.less_equal(s, t) for s in ts)
    assert a.less_than(t) == any(tt.less_than(s, t) for s in ts)
    assert a.is_empty() == (len(a) == 0) == (not ts)
    assert a.insert(t) == (not any(tt.less_equal(s, t) for s in ts))
    assert not a.is_empty() and a.less_equal(t)
    other = Antichain(tt, data.draw(st.lists(times(tt), max_size=5)))
    assert a.dominates(other) == all(a.less_equal(o) for o in other)


def test_antichain_examples():
    tt = TimeType(("product", "product"))
    a = Antichain(tt, [(1, 1), (0, 2), (1, 3)])
    assert a == [(0, 2), (1, 1)]
    assert a == Antichain(tt, [(1, 1), (0, 2)])
    assert hash(a) == hash(Antichain(tt, [(0, 2), (1, 1)]))
    assert not a.insert((2, 2))
    assert a.insert((0, 0)) and a == [(0, 0)]
    assert Antichain(tt).is_empty()
    assert Antichain(tt).dominates(Antichain(tt))
    assert not Antichain(tt).dominates(a)
    assert a.dominates(Antichain(tt))
    lex = TimeType(("lexicographic",))
    assert Antichain(lex, [(1, 0), (0, 9)]) == [(0, 9)]  # a chain: one element
    assert Antichain(EPOCHS, [(3,), (1,), (2,)]) == [(1,)]


# --------------------------------------------------------------------------- ChangeBatch

changes = st.lists(
    st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)), st.integers(-3, 3)), max_size=20
)


@given(changes, changes)
def test_change_batch_consolidates(first, second):
    batch = ChangeBatch(first)
    batch.extend(second)
    expected = Counter()
    for t, d in first + second:
        expected[t] += d
    expected = {t: d for t, d in expected.items() if d}
    assert dict(batch.items()) == expected
    assert len(batch) == len(expected)
    assert batch.is_empty() == (not expected)
    assert all(d != 0 for _, d in batch.items())
    assert dict(batch.drain()) == expected
    assert batch.is_empty() and batch.drain() == []


def test_change_batch_cancellation():
    batch = ChangeBatch([((1,), 1), ((2,), 1)])
    batch.update((1,), -1)
    batch.update([2], 0)  # lists are times too
    assert batch.items() == [((2,), 1)]


# --------------------------------------------------------------------------- MutableAntichain


@st.composite
def update_sequences(draw: st.DrawFn):
    """Batches of count changes over a few times, some counts transiently negative."""
    tt = draw(time_types(max_width=3))
    pool = draw(st.lists(times(tt, 2), min_size=1, max_size=6, unique=True))
    batch = st.lists(st.tuples(st.sampled_from(pool), st.integers(-2, 2)), max_size=5)
    return tt, draw(st.lists(batch, min_size=1, max_size=12))


@given(update_sequences())
def test_mutable_antichain_tracks_minimal_positive_times(args):
    tt, batches = args
    m = MutableAntichain(tt)
    counts: Counter[Time] = Counter()
    reported: Counter[Time] = Counter()
    for batch in batches:
        out = m.update_iter(batch)
        for t, d in batch:
            counts[tuple(t)] += d
        positive = [t for t, c in counts.items() if c > 0]
        assert set(m.frontier()) == minimal(tt, positive)
        assert len(m.frontier()) == len(set(m.frontier()))
        # the changes are consolidated, and accumulate to the frontier
        assert len({t for t, _ in out}) == len(out)
        assert all(d in (1, -1) for _, d in out)
        for t, d in out:
            reported[t] += d
        assert {t: c for t, c in reported.items() if c} == {t: 1 for t in m.frontier()}
        for t in {tuple(t) for t, _ in batch}:
            assert m.count(t) == counts[t]
        assert m.is_empty() == (not positive)
        assert m.antichain() == minimal(tt, positive)


@given(update_sequences())
def test_mutable_antichain_apply_changes_says_whether_the_frontier_moved(args):
    """``apply_changes`` (what progress tracking calls for each target) keeps the frontier
    the minimal positive times, as ``update_iter`` does, and answers exactly whether it moved
    (a time that leaves and comes back in one batch moves nothing)."""
    tt, batches = args
    m = MutableAntichain(tt)
    counts: Counter[Time] = Counter()
    for batch in batches:
        before = set(m.frontier())
        moved = m.apply_changes([(tuple(t), d) for t, d in batch])
        for t, d in batch:
            counts[tuple(t)] += d
        assert set(m.frontier()) == minimal(tt, [t for t, c in counts.items() if c > 0])
        assert moved == (set(m.frontier()) != before)


@given(tt_and_times())
def test_minimal_sorted_is_the_minimal_times_in_order(args):
    tt, ts = args
    assert minimal_sorted(tt, sorted(set(ts))) == sorted(minimal(tt, ts))


@given(update_sequences(), st.data())
def test_mutable_antichain_queries(args, data):
    tt, batches = args
    m = MutableAntichain(tt)
    for batch in batches:
        m.update_iter(batch)
    t = data.draw(times(tt, 2))
    assert m.less_equal(t) == any(tt.less_equal(f, t) for f in m.frontier())
    assert m.less_than(t) == any(tt.less_than(f, t) for f in m.frontier())


@given(update_sequences())
def test_mutable_antichain_single_updates_match_batches(args):
    tt, batches = args
    one, many = MutableAntichain(tt), MutableAntichain(tt)
    for batch in batches:
        one.update_iter(batch)
        for t, d in batch:
            many.update(t, d)
        assert sorted(one.frontier()) == sorted(many.frontier())


def test_mutable_antichain_negative_counts_do_not_enter_the_frontier():
    m = MutableAntichain(EPOCHS)
    assert m.update((0,), -1) == []
    assert m.frontier() == [] and m.is_empty()
    assert m.update((1,), 1) == [((1,), 1)]
    assert sorted(m.update_iter([((0,), 1), ((0,), 1)])) == [((0,), 1), ((1,), -1)]
    assert m.frontier() == [(0,)] and m.count((0,)) == 1
    assert sorted(m.update((0,), -1)) == [((0,), -1), ((1,), 1)]


def test_mutable_antichain_removing_a_dominating_time_and_adding_in_one_batch():
    tt = TimeType(("product", "product"))
    m = MutableAntichain(tt)
    m.update_iter([((0, 0), 1)])
    # (1, 1) arrives while (0, 0) still dominates it, then (0, 0) leaves in the same batch
    out = m.update_iter([((1, 1), 1), ((0, 2), 1), ((0, 0), -1)])
    assert sorted(out) == [((0, 0), -1), ((0, 2), 1), ((1, 1), 1)]
    assert sorted(m.frontier()) == [(0, 2), (1, 1)]
    # a change that cancels within the batch reports nothing
    assert m.update_iter([((0, 1), 1), ((0, 1), -1)]) == []
