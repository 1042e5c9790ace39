"""Heavier randomized checks of times, frontiers and progress tracking.

* Compaction: advancing the times of a stream of ``(data, time, diff)`` updates by a frontier
  keeps every accumulation ``collection at u = sum of diffs with time <= u`` for ``u`` in advance
  of the frontier, for times with nested loop and priority coordinates and ±1 diffs that cancel.
* Progress tracking on random graphs *with cycles* (each through a feedback increment, loops
  nested two deep): the tracker's frontier at every target equals a fixpoint computed directly on
  times, without path summaries: push each pointstamp's time through edges and operator
  summaries, keeping at each location only the minimal times (sound because every summary is
  monotone, finite because times of a loop iteration only grow). Also after every round of a
  run in which pointstamps move (retired and added, some cancelling, before one propagate),
  with the nodes the tracker reports as changed exactly those whose frontiers changed, and
  with some nodes' frontiers computed on demand instead of kept up to date.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.timely.frontier import Antichain, MutableAntichain
from ddflow.timely.lattice import EPOCHS, Time, TimeType
from ddflow.timely.progress import ProgressGraph, Summary

coordinates = st.sampled_from(["product", "lexicographic"])


@st.composite
def time_types(draw: st.DrawFn, max_width: int = 5) -> TimeType:
    tt = EPOCHS
    for _ in range(draw(st.integers(0, 3))):
        c = draw(coordinates)
        if tt.width + (2 if c == "lexicographic" else 1) > max_width:
            break
        tt = tt.extend(c)
    return tt


def times(tt: TimeType, hi: int = 3) -> st.SearchStrategy[Time]:
    return st.tuples(*[st.integers(0, hi)] * tt.width)


def minimal(tt: TimeType, ts) -> set[Time]:
    ts = set(ts)
    return {t for t in ts if not any(tt.less_than(s, t) for s in ts)}


# --------------------------------------------------------------------------- compaction


@st.composite
def streams(draw: st.DrawFn):
    tt = draw(time_types(max_width=4))
    updates = draw(
        st.lists(
            st.tuples(st.sampled_from("abc"), times(tt), st.sampled_from([-1, 1])), max_size=25
        )
    )
    frontier = draw(st.lists(times(tt), min_size=1, max_size=3))
    return tt, updates, Antichain(tt, frontier)


def accumulate(tt: TimeType, updates, u: Time) -> dict[str, int]:
    acc: Counter[str] = Counter()
    for d, t, r in updates:
        if tt.less_equal(t, u):
            acc[d] += r
    return {d: r for d, r in acc.items() if r}


@given(streams())
@settings(max_examples=100, deadline=None)
def test_advancing_times_keeps_accumulations_beyond_the_frontier(args):
    tt, updates, frontier = args
    f = list(frontier)
    advanced = [(d, tt.advance_by(t, f), r) for d, t, r in updates]
    # the same with the vectorized kernel
    if updates:
        columns = np.asarray([t for _, t, _ in updates], dtype=np.int64)
        rows = tt.advance_by_array(columns, f).tolist()
        assert [tuple(r) for r in rows] == [t for _, t, _ in advanced]
    # every accumulation in advance of the frontier is unchanged
    for u in itertools.product(range(4), repeat=tt.width):
        if frontier.less_equal(u):
            assert accumulate(tt, advanced, u) == accumulate(tt, updates, u), u
    # advancing is idempotent, and advancing by a later frontier composes
    assert [(d, tt.advance_by(t, f), r) for d, t, r in advanced] == advanced


@given(streams(), st.data())
@settings(max_examples=100, deadline=None)
def test_advancing_by_a_later_frontier_after_an_earlier_one(args, data):
    tt, updates, first = args
    # a later frontier: every element in advance of the earlier one
    later = Antichain(tt, [tt.join(f, data.draw(times(tt))) for f in first])
    assert first.dominates(later)
    f1, f2 = list(first), list(later)
    for _, t, _ in updates:
        assert tt.advance_by(tt.advance_by(t, f1), f2) == tt.advance_by(t, f2)


# --------------------------------------------------------------------------- mutable antichains


@st.composite
def long_update_sequences(draw: st.DrawFn):
    tt = draw(time_types(max_width=4))
    pool = draw(st.lists(times(tt, 2), min_size=1, max_size=10, unique=True))
    batch = st.lists(st.tuples(st.sampled_from(pool), st.integers(-2, 2)), max_size=8)
    return tt, draw(st.lists(batch, min_size=1, max_size=40))


@given(long_update_sequences())
@settings(max_examples=60, deadline=None)
def test_mutable_antichain_long_sequences(args):
    tt, batches = args
    m = MutableAntichain(tt)
    counts: Counter[Time] = Counter()
    reported: Counter[Time] = Counter()
    for batch in batches:
        for t, d in m.update_iter(batch):
            reported[t] += d
        for t, d in batch:
            counts[t] += d
        frontier = minimal(tt, [t for t, c in counts.items() if c > 0])
        assert set(m.frontier()) == frontier
        assert +reported == Counter(frontier) and -reported == Counter()


# --------------------------------------------------------------------------- progress tracking


def scope_types(c1: str, c2: str) -> list[TimeType]:
    inner = EPOCHS.extend(c1)  # type: ignore[arg-type]
    return [EPOCHS, inner, inner.extend(c2)]  # type: ignore[arg-type]


@st.composite
def node_summary(draw: st.DrawFn, types: list[TimeType], din: int, dout: int) -> Summary:
    tt = types[din]
    adds = draw(st.tuples(*[st.integers(0, 1)] * tt.width))
    s = Summary(tt.width, adds, (), tt)
    if dout == din + 1:
        s = s.then(Summary.enter(tt, types[dout].coordinates[-1]))
    elif dout == din - 1:
        s = s.then(Summary.leave(tt))
    return s


@st.composite
def cyclic_graphs(draw: st.DrawFn):
    """Random nodes in nested scopes with forward edges, plus feedback nodes closing cycles.

    A feedback from node ``u`` (output depth ``d``) back to node ``v`` (input depth ``d``) is
    only added when every node from ``v`` to ``u`` stays at depth ``>= d``; then every cycle
    passes, at its shallowest depth, through a feedback that increments that depth's iteration,
    so every cycle advances time."""
    types = scope_types(draw(coordinates), draw(coordinates))
    g = ProgressGraph()
    depths: list[tuple[int, int]] = []
    dout = draw(st.integers(0, 2))
    for _ in range(draw(st.integers(1, 6))):
        # mostly continue in the scope the previous node left, so that ports connect
        din = dout if draw(st.integers(0, 2)) else draw(st.integers(0, 2))
        dout = draw(st.sampled_from([d for d in (din - 1, din, din + 1) if 0 <= d <= 2]))
        n_in, n_out = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        internal = {}
        for i in range(n_in):
            for j in range(n_out):
                if draw(st.integers(0, 3)):
                    internal[(i, j)] = draw(node_summary(types, din, dout))
        g.add_node([types[din]] * n_in, [types[dout]] * n_out, internal)
        depths.append((din, dout))
    n_nodes = len(depths)
    for n in range(n_nodes):
        for j, tt in enumerate(g.outputs[n]):
            for m in range(n + 1, n_nodes):
                for q, tq in enumerate(g.inputs[m]):
                    if tq == tt and draw(st.integers(0, 2)) == 0:
                        g.add_edge((n, j), (m, q))
    for u in range(n_nodes):
        d = depths[u][1]
        for v in range(u + 1):
            between = [min(depths[k]) for k in range(v + 1, u)]
            ok = depths[v][0] == d and depths[v][1] >= d and depths[u][0] >= d
            if ok and all(x >= d for x in between) and draw(st.integers(0, 2)) == 0:
                tt = types[d]
                fb = g.add_node(
                    [tt], [tt], {(0, 0): Summary.increment(tt, draw(st.integers(1, 2)))}
                )
                g.add_edge((u, draw(st.integers(0, len(g.outputs[u]) - 1))), (fb, 0))
                g.add_edge((fb, 0), (v, draw(st.integers(0, len(g.inputs[v]) - 1))))
    return g


def locations(g: ProgressGraph):
    out = [("s", n, j, tt) for n, outs in enumerate(g.outputs) for j, tt in enumerate(outs)]
    out += [("t", n, i, tt) for n, ins in enumerate(g.inputs) for i, tt in enumerate(ins)]
    return out


def fixpoint_frontiers(g: ProgressGraph, pointstamps: Sequence) -> dict:
    """Minimal times that can reach every target, by pushing times (not summaries) around."""
    types = {(k, n, p): tt for k, n, p, tt in locations(g)}
    best: dict = {loc: [] for loc in types}
    work: list = []

    def push(loc, t: Time) -> None:
        le = types[loc].less_equal
        current = best[loc]
        if any(le(c, t) for c in current):
            return
        current[:] = [c for c in current if not le(t, c)]
        current.append(t)
        work.append((loc, t))

    for loc, t in pointstamps:
        push(loc, t)
    steps = 0
    while work:
        steps += 1
        assert steps < 200_000, "the fixpoint does not converge"
        loc, t = work.pop()
        if t not in best[loc]:
            continue  # superseded by a smaller time, whose successors dominate its own
        kind, n, p = loc
        if kind == "t":
            for (i, j), s in g.internal[n].items():
                if i == p:
                    push(("s", n, j), s.apply(t))
        else:
            for m, q in g.edges.get((n, p), []):
                push(("t", m, q), t)
    return {(n, p): set(ts) for (kind, n, p), ts in best.items() if kind == "t"}


@st.composite
def cyclic_graphs_with_pointstamps(draw: st.DrawFn):
    g = draw(cyclic_graphs())
    locs = locations(g)
    pointstamps = []
    for _ in range(draw(st.integers(1, 8))):
        kind, n, p, tt = draw(st.sampled_from(locs))
        pointstamps.append(((kind, n, p), draw(times(tt, 2))))
    return g, pointstamps


@given(cyclic_graphs_with_pointstamps(), st.data())
@settings(max_examples=100, deadline=None)
def test_tracker_matches_fixpoint_on_random_cyclic_graphs(make_tracker, args, data):
    g, pointstamps = args
    tracker = make_tracker(g)
    for (kind, n, p), t in pointstamps:
        (tracker.update_target if kind == "t" else tracker.update_source)(n, p, t, +1)
    tracker.propagate()
    expected = fixpoint_frontiers(g, pointstamps)
    actual = {k: set(tracker.frontier(*k)) for k in expected}
    assert actual == expected
    # retire the pointstamps in a random order: everything completes
    for (kind, n, p), t in data.draw(st.permutations(pointstamps)):
        (tracker.update_target if kind == "t" else tracker.update_source)(n, p, t, -1)
        if data.draw(st.booleans()):
            tracker.propagate()
    tracker.propagate()
    assert tracker.all_complete()


@given(cyclic_graphs_with_pointstamps(), st.data())
@settings(max_examples=100, deadline=None)
def test_tracker_follows_pointstamps_that_move_between_propagates(make_tracker, args, data):
    """Rounds of changes as a scheduler makes them: in each, pointstamps are retired and others
    added (a message consumed and its output sent, a capability moved on), in any order, some
    cancelling within the round, before one ``propagate``. After every round the frontier at
    every target is the fixpoint of the pointstamps held, and ``propagate`` reports exactly
    the nodes with an input whose frontier changed. Some nodes' frontiers are computed on
    demand (``on_demand``): the same frontiers, and those nodes are never reported."""
    g, pointstamps = args
    locs = locations(g)
    on_demand = set(data.draw(st.lists(st.integers(0, len(g.inputs) - 1), max_size=3)))
    tracker = make_tracker(g, on_demand=on_demand)
    held: Counter = Counter()
    targets = [(n, i) for n, ins in enumerate(g.inputs) for i in range(len(ins))]
    before = {k: set(tracker.frontier(*k)) for k in targets}
    rounds = [pointstamps] + [
        [
            (loc, data.draw(times(tt, 2)))
            for (*loc, tt) in data.draw(st.lists(st.sampled_from(locs), max_size=4))
        ]
        for _ in range(data.draw(st.integers(1, 4)))
    ]
    for added in rounds:
        changes = [((kind, n, p), t, +1) for (kind, n, p), t in added]
        # retire some of what is held, and some of what this round adds (cancelling)
        for (loc, t), c in held.items():
            changes += [(loc, t, -1)] * data.draw(st.integers(0, c))
        changes += [
            (loc, t, -1) for loc, t, d in changes if d > 0 and data.draw(st.integers(0, 3)) == 0
        ]
        for loc, t, d in data.draw(st.permutations(changes)):
            kind, n, p = loc
            (tracker.update_target if kind == "t" else tracker.update_source)(n, p, t, d)
            held[(loc, t)] += d
        held = +held
        reported = tracker.propagate()
        expected = fixpoint_frontiers(g, [lt for lt, c in held.items() for _ in range(c)])
        now = {k: set(tracker.frontier(*k)) for k in targets}
        assert now == expected
        assert reported == {
            n for (n, i) in targets if now[(n, i)] != before[(n, i)] and n not in on_demand
        }
        before = now
    for ((kind, n, p), t), c in held.items():  # everything retired: everything completes
        (tracker.update_target if kind == "t" else tracker.update_source)(n, p, t, -c)
    tracker.propagate()
    assert tracker.all_complete()
