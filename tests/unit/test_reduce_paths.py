"""Special paths of the reduce operator, checked against the reference interpreter."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.differential.operators.reduce import ReduceOp
from ddflow.runtime.local.settings import IndexSettings, LocalSettings, LookupSettings
from ddflow.testing import frame_to_counter, reference


def python_reduces(settings: LocalSettings | None = None) -> LocalSettings:
    """``settings`` with every reduce in Python: these tests look into the Python reducer's
    paths (the native one is compared with it in tests/native)."""
    s = LocalSettings() if settings is None else settings
    return replace(s, reduce=replace(s.reduce, native=False))


def reduces(flow):
    return [op for op in flow.worker.operators if isinstance(op, ReduceOp)]


def test_min_max_skip_groups_an_insertion_cannot_change_and_stay_exact():
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces()))
    xs = flow.input("xs", schema={"k": "int64", "v": "int64"})
    out = xs.group_by("k").agg(lo=dd.min("v"), hi=dd.max("v")).output()
    rng = random.Random(3)
    live: Counter = Counter()
    for epoch in range(40):
        for _ in range(5):
            k, v = rng.randrange(4), rng.randrange(100)
            if live and rng.random() < 0.3:
                rec = rng.choice(sorted(live))
                xs.remove([rec])
                live[rec] -= 1
                live += Counter()
            else:
                xs.insert([(k, v)])
                live[(k, v)] += 1
        flow.advance_to(epoch + 1)
        flow.run()
        assert frame_to_counter(out.snapshot()) == reference(flow, {"xs": live})[out]
    (op,) = reduces(flow)
    assert op.skipped > 0  # the fast path ran


def test_min_inside_a_loop_skips_proposals_above_the_label():
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces()))
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    labels = (
        dd.graph.connected_components(edges) if hasattr(dd.graph, "connected_components") else None
    )
    if labels is None:
        sym = edges.concat(edges.select(src=dd.col("dst"), dst=dd.col("src")))
        nodes = sym.select(node=dd.col("src")).distinct().with_columns(label=dd.col("node"))
        labels = nodes.iterate(
            lambda x: (
                x.join(sym, left_on="node", right_on="src")
                .select(node=dd.col("dst"), label=dd.col("label"))
                .concat(nodes)
                .group_by("node")
                .agg(label=dd.min("label"))
            )
        )
    out = labels.output()
    rng = random.Random(5)
    live: Counter = Counter()
    for epoch in range(6):
        for _ in range(12 if epoch == 0 else 2):
            e = (rng.randrange(15), rng.randrange(15))
            edges.insert([e])
            live[e] += 1
        flow.advance_to(epoch + 1)
        flow.run()
        assert frame_to_counter(out.snapshot()) == reference(flow, {"edges": live})[out]
    assert any(op.skipped for op in reduces(flow))


@pytest.mark.parametrize("rows", [256, 0], ids=["rows", "columnar"])
def test_min_max_skip_takes_retractions_strictly_inside_the_bounds(rows):
    """A value moving between two values above the min and below the max (a neighbour's
    label changing, in label propagation) cannot change the output: skipped. Retracting the
    min itself, or more than is inserted at a time (the count could reach zero, as it does
    here for a record that was never inserted), is evaluated. Each epoch against the
    reference."""
    flow = dd.Dataflow(dd.LocalRuntime(python_reduces(), small_batch_rows=rows))
    xs = flow.input("xs", schema={"k": "int64", "v": "int64?"}, signed=True)
    out = xs.group_by("k").agg(lo=dd.min("v"), hi=dd.max("v")).output()
    live: Counter = Counter()
    seen = 0
    steps = [
        ([(1, 1, 1), (1, 5, 1), (1, 9, 1), (2, 3, 1), (2, 9, 1)], False),
        ([(1, 5, -1), (1, 6, 1)], True),  # 5 -> 6, inside [1, 9]
        ([(1, 6, -1), (1, 7, 1), (1, None, 1), (1, None, -1)], True),
        ([(1, 1, -1), (1, 4, 1)], False),  # the min itself leaves: min 4
        ([(1, 9, -1), (1, 8, 1)], False),  # the max itself leaves: max 8
        ([(2, 5, -2)], False),  # never inserted: count 0, the group goes
        ([(2, 5, 2)], False),
    ]
    for epoch, (updates, skipped) in enumerate(steps):
        xs.update(updates)
        for k, v, d in updates:
            live[(k, v)] += d
        flow.advance_to(epoch + 1)
        flow.run()
        assert frame_to_counter(out.snapshot()) == reference(flow, {"xs": live})[out], epoch
        (op,) = reduces(flow)
        assert (op.skipped > seen) == skipped, epoch
        seen = op.skipped
    assert frame_to_counter(out.snapshot(epoch=5)) == Counter({(1, 4, 8): 1})
    assert frame_to_counter(out.snapshot(epoch=6)) == Counter({(1, 4, 8): 1, (2, 3, 9): 1})


def test_reference_select_of_only_literals_keeps_every_record():
    """Regression: the reference evaluated ``select(one=lit(1))`` to a single row."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces()))
    xs = flow.input("xs", schema={"x": "int64"})
    out = xs.select(one=dd.lit(1)).output()
    assert reference(flow, {"xs": Counter({(1,): 1, (2,): 1})})[out] == Counter({(1,): 2})
    xs.insert([1, 2])
    flow.advance_to(1)
    flow.run()
    assert frame_to_counter(out.snapshot()) == Counter({(1,): 2})


@pytest.mark.parametrize("rows", [256, 0], ids=["rows", "columnar"])
def test_min_skip_waits_for_a_key_with_a_time_still_to_evaluate(rows):
    """Regression: an insertion above the min was skipped while the key still had a time to
    evaluate (epoch 1, held open by ``b``); evaluating it later moved the min above the
    skipped value, and epoch 2 kept the stale min 10 instead of 7."""
    flow = dd.Dataflow(dd.LocalRuntime(python_reduces(), small_batch_rows=rows))
    a = flow.input("a", schema={"k": "int64", "v": "int64"})
    b = flow.input("b", schema={"k": "int64", "v": "int64"})
    out = _min_max(a, b).output()
    a.insert([(1, 5)])
    a.advance_to(1)
    b.advance_to(1)
    flow.run()
    a.remove([(1, 5)])
    a.insert([(1, 10)])
    a.advance_to(2)
    flow.run()  # epoch 1 is not complete: b is still open at it
    a.insert([(1, 7)])
    a.advance_to(3)
    flow.run()
    b.advance_to(3)
    flow.run()
    assert frame_to_counter(out.snapshot(epoch=1)) == Counter({(1, 10, 10): 1})
    assert frame_to_counter(out.snapshot(epoch=2)) == Counter({(1, 7, 10): 1})


_update = st.tuples(st.integers(0, 1), st.integers(0, 2), st.sampled_from([1, 1, -1]))


def _min_max(a, b):
    return a.concat(b).group_by("k").agg(lo=dd.min("v"), hi=dd.max("v"))


def _count_and_distinct(a, b):
    return a.concat(b).distinct().group_by("k").agg(n=dd.count(), s=dd.sum("v"))


def _join_then_min(a, b):
    return a.join(b, on="k").group_by("k").agg(lo=dd.min("v"), hi=dd.max("v_right"))


def _reach(a, b):
    """Nodes reachable from ``a``'s ``v`` over ``b``'s edges ``k -> v`` (a loop). The edges
    are made a set first: over edges of negative multiplicity the body is not monotone and
    the iterates may cycle for ever."""
    roots = a.select(node=dd.col("v")).distinct()
    edges = b.distinct().select(src=dd.col("k"), dst=dd.col("v"))
    return roots.iterate(
        lambda r: (
            r.join(edges, left_on="node", right_on="src")
            .select(node=dd.col("dst"))
            .concat(roots)
            .distinct()
        )
    )


def _scc(a, b):
    """Strongly connected components of the edge set of both inputs: loops nested two deep."""
    return dd.graph.strongly_connected_components(a.concat(b).distinct(), "k", "v")


def _cc_prioritized(a, b):
    """Connected components in a prioritized loop (records enter by priority)."""
    return dd.graph.connected_components(a.concat(b).distinct(), "k", "v", prioritized=True)


def _labels_from_a_over_b(a, b):
    """Min-label propagation whose initial labels come from ``a`` (node ``k``, label ``v``)
    and whose edges come from ``b``: a reduce inside a loop fed by both inputs, then a
    ``reduce(fn)`` over its result."""
    init = a.distinct().select(node=dd.col("k"), label=dd.col("v"))
    edges = b.distinct().select(src=dd.col("k"), dst=dd.col("v"))
    labels = init.iterate(
        lambda x: (
            x.join(edges, left_on="node", right_on="src")
            .select(node=dd.col("dst"), label=dd.col("label"))
            .concat(init)
            .group_by("node")
            .agg(label=dd.min("label"))
        )
    )
    return labels.group_by("label").reduce(
        lambda key, group: [(len(group), sum(m for _, m in group))],
        schema={"nodes": "int64", "total": "int64"},
    )


@pytest.mark.parametrize(
    "query",
    [
        _min_max,
        _count_and_distinct,
        _join_then_min,
        _reach,
        _scc,
        _cc_prioritized,
        _labels_from_a_over_b,
    ],
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    epochs=st.lists(
        st.tuples(st.lists(_update, max_size=4), st.lists(_update, max_size=4)),
        min_size=1,
        max_size=6,
    ),
    order=st.lists(st.sampled_from([True, True, False]), max_size=12),
    runs=st.lists(st.sampled_from([True, True, False]), max_size=12),
    rows=st.sampled_from([256, 0]),
)
def test_inputs_advancing_apart_match_reference(query, epochs, order, runs, rows):
    """Two inputs close their epochs in any interleaving, with ``run()`` at random points, so
    one input's later epochs reach the operators while the other still holds an earlier epoch
    open; every epoch is then checked against the reference. (The harness of the semantics
    suite advances all inputs together; this covers the skew.)"""
    flow = dd.Dataflow(dd.LocalRuntime(python_reduces(), small_batch_rows=rows))
    a = flow.input("a", schema={"k": "int64", "v": "int64"}, signed=True)
    b = flow.input("b", schema={"k": "int64", "v": "int64"}, signed=True)
    out = query(a, b).output()
    inputs = {"a": a, "b": b}
    next_epoch = {"a": 0, "b": 0}
    live = {"a": [Counter() for _ in epochs], "b": [Counter() for _ in epochs]}

    def feed(name):
        e = next_epoch[name]
        if e == len(epochs):
            return
        part = epochs[e][0 if name == "a" else 1]
        inputs[name].update([(k, v, d) for k, v, d in part])
        for k, v, d in part:
            live[name][e][(k, v)] += d
        next_epoch[name] = e + 1
        inputs[name].advance_to(e + 1)

    for i, pick_a in enumerate(order):
        feed("a" if pick_a else "b")
        if i < len(runs) and runs[i]:
            flow.run()
    while next_epoch["a"] < len(epochs) or next_epoch["b"] < len(epochs):
        feed("a" if next_epoch["a"] < len(epochs) else "b")
    flow.run()
    for e in range(len(epochs)):
        # (Counter addition would drop non-positive counts: accumulate explicitly)
        acc = {n: Counter() for n in ("a", "b")}
        for n in ("a", "b"):
            for c in live[n][: e + 1]:
                for rec, d in c.items():
                    acc[n][rec] += d
        assert frame_to_counter(out.snapshot(epoch=e)) == reference(flow, acc)[out], e


# ---------------------------------------------------------------- indexed reads of min/max


class IndexedReads:
    """Settings with the thresholds of indexed reads (:mod:`ddflow.runtime.local.index`)
    lowered so that small flows use them (:meth:`runtime`), and, within, a count of the
    histories and batch indexes made."""

    #: batches of 6 updates or more indexed for their keys of 2 or more, whatever the keys read
    SETTINGS = LocalSettings(
        index=IndexSettings(indexed_rows=6, heavy_rows=2),
        lookups=LookupSettings(scan_rows_per_key=1),
    )

    def __init__(self) -> None:
        self.histories = 0
        self.indexes = 0

    @staticmethod
    def runtime(small_batch_rows: int) -> dd.LocalRuntime:
        """The local runtime with these settings."""
        return dd.LocalRuntime(
            python_reduces(IndexedReads.SETTINGS), small_batch_rows=small_batch_rows
        )

    def __enter__(self) -> IndexedReads:
        from ddflow.runtime.local import index as local_index

        self.saved = (local_index.IndexedHistory.__init__, local_index.BatchIndex.__init__)
        history_init, index_init = self.saved

        def count_history(obj, *args, **kw):
            self.histories += 1
            history_init(obj, *args, **kw)

        def count_index(obj, *args, **kw):
            self.indexes += 1
            index_init(obj, *args, **kw)

        local_index.IndexedHistory.__init__ = count_history
        local_index.BatchIndex.__init__ = count_index
        return self

    def __exit__(self, *exc: object) -> None:
        from ddflow.runtime.local import index as local_index

        local_index.IndexedHistory.__init__, local_index.BatchIndex.__init__ = self.saved


def _run_against_reference(flow, inp, out, batches, name):
    live: Counter = Counter()
    for epoch, updates in enumerate(batches):
        inp.update(updates)
        for *rec, d in updates:
            live[tuple(rec)] += d  # (multiplicities may go negative: kept)
        flow.advance_to(epoch + 1)
        flow.run()
        assert frame_to_counter(out.snapshot()) == reference(flow, {name: live})[out], epoch


@pytest.mark.parametrize("rows", [1, 0], ids=["row-path", "columnar"])
def test_indexed_reads_of_connected_components_match_the_reference(rows):
    """Label propagation on a small graph whose nodes have many updates per batch, with the
    indexed reads' thresholds lowered: every epoch (insertions and deletions of edges)
    against the reference, and the indexes were used. (``rows=1``: batches are frames, as
    the indexes need, and small evaluations take the reduce's row path.)"""
    rng = random.Random(11)
    with IndexedReads() as reads:
        flow = dd.Dataflow(IndexedReads.runtime(rows))
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
        out = dd.graph.connected_components(edges).output()
        live: list[tuple[int, int]] = []
        batches = []
        for epoch in range(14):
            updates = []
            # (more keys than a reduce keeps a read of through merges: later reads are
            # of keys not read yet, through the indexes)
            for _ in range(150 if epoch == 0 else 3):
                e = (rng.randrange(80), rng.randrange(80))
                live.append(e)
                updates.append((*e, 1))
            for _ in range(0 if epoch == 0 else 2):
                e = live.pop(rng.randrange(len(live)))
                updates.append((*e, -1))
            batches.append(updates)
        _run_against_reference(flow, edges, out, batches, "edges")
    assert reads.histories > 0 and reads.indexes > 0


_kv_update = st.tuples(st.integers(0, 3), st.integers(-4, 4), st.sampled_from([1, 1, 2, -1]))


@pytest.mark.parametrize("agg", ["min", "max"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(_kv_update, min_size=1, max_size=12), min_size=2, max_size=8))
def test_indexed_reads_of_a_min_or_max_with_retractions_match_the_reference(agg, batches):
    """A keyed min (max) over random updates with retractions (multiplicities can go
    negative), read through indexes: each epoch against the reference."""
    with IndexedReads():
        flow = dd.Dataflow(IndexedReads.runtime(0))
        xs = flow.input("xs", schema={"k": "int64", "v": "int64"}, signed=True)
        pick = dd.min("v") if agg == "min" else dd.max("v")
        out = xs.group_by("k").agg(m=pick).output()
        _run_against_reference(flow, xs, out, batches, "xs")


def test_a_prioritized_loop_reads_its_min_without_indexes():
    """Lexicographic (prioritized) times take no bounded evaluation, so the reduce looks up
    its histories as usual (indexes there only cost time); the result against the
    reference."""
    rng = random.Random(4)
    with IndexedReads() as reads:
        flow = dd.Dataflow(IndexedReads.runtime(0))
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
        out = dd.graph.connected_components(edges, prioritized=True).output()
        batches = [[(rng.randrange(12), rng.randrange(12), 1) for _ in range(25)]]
        batches += [[(rng.randrange(12), rng.randrange(12), 1)] for _ in range(4)]
        _run_against_reference(flow, edges, out, batches, "edges")
    assert reads.histories == 0
