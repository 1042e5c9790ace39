"""Loops against the reference at every epoch: ``iterate`` (reachability, transitive closure,
label propagation, shortest paths), nested ``iterate``, ``max_iterations`` and
``prioritized_iterate``.

Inside a loop, times are ``(epoch, iteration)`` (and ``(epoch, i, j)`` two loops deep) under the
product order, so when several epochs are in flight the reductions in the body see times that
are not comparable, e.g. ``(0, 2)`` and ``(1, 0)``. Inputs are made sets (``distinct``) before
they enter a loop, so that every body is monotone on sets and the fixed point exists for any
stream, negative input multiplicities included.

Reference semantics of ``max_iterations=k``: the body is applied ``k`` times to the loop's
input (or fewer, if the fixed point comes first).
"""

from __future__ import annotations

import pytest
from harness import (
    SETTINGS,
    Run,
    changes_table,
    check_run,
    check_stream,
    feed_and_run,
    make_flow,
    streams_and_run_points,
)
from hypothesis import example, given
from hypothesis import strategies as st

import ddflow as dd

nodes = st.integers(0, 4)
GRAPH = {"edges": {"src": "int64", "dst": "int64"}, "roots": {"n": "int64"}}
graph_records = {"edges": st.tuples(nodes, nodes), "roots": st.tuples(nodes)}
WEIGHTED = {"edges": {"src": "int64", "dst": "int64", "w": "int64"}, "roots": {"n": "int64"}}
weighted_records = {"edges": st.tuples(nodes, nodes, st.integers(1, 3)), "roots": st.tuples(nodes)}


def reach(roots: dd.Collection, edges: dd.Collection, **loop) -> dd.Collection:
    """Nodes reachable from ``roots``; ``edges`` is used inside the body (entered)."""
    e = edges.distinct()  # with negative edges the iterates could oscillate forever

    def body(x: dd.Collection) -> dd.Collection:
        step = x.join(e, left_on="n", right_on="src").select(n="dst")
        return x.concat(step).distinct()

    return roots.distinct().iterate(body, **loop)


def closure(edges: dd.Collection) -> dd.Collection:
    """The transitive closure of ``edges``."""
    e = edges.distinct()

    def body(p: dd.Collection) -> dd.Collection:
        longer = p.join(e, left_on="dst", right_on="src").select("src", dst="dst_right")
        return longer.concat(e).distinct()

    return e.iterate(body)


def components(edges: dd.Collection) -> dd.Collection:
    """Label propagation: each node of the undirected graph gets its component's least node."""
    e = edges.distinct()
    sym = e.concat(e.select(src="dst", dst="src")).distinct()
    labels = sym.select(node="src", label="src").distinct()

    def body(lab: dd.Collection) -> dd.Collection:
        sent = lab.join(sym, left_on="node", right_on="src").select(node="dst", label="label")
        return sent.concat(lab).group_by("node").agg(label=dd.min("label"))

    return labels.iterate(body)


def distances(roots: dd.Collection, edges: dd.Collection) -> dd.Collection:
    """Weighted shortest distances from ``roots`` (a non-monotone min inside the loop)."""
    e = edges.distinct()
    start = roots.distinct().select("n", d=dd.lit(0))

    def body(x: dd.Collection) -> dd.Collection:
        step = x.join(e, left_on="n", right_on="src").select(n="dst", d=dd.col("d") + dd.col("w"))
        return x.concat(step).group_by("n").agg(d=dd.min("d"))

    return start.iterate(body)


# ---------------------------------------------------------------------- worked streams


def test_reachability_stream_table(runtime):
    stream = [
        [("roots", (0,), 1), ("edges", (0, 1), 1), ("edges", (1, 2), 1)],
        [("edges", (2, 3), 1), ("edges", (1, 2), -1)],  # 2 and 3 now unreachable
        [("edges", (0, 3), 1)],
        [("roots", (0,), -1), ("roots", (2,), 1), ("edges", (1, 2), 1)],
    ]
    run = check_stream(
        lambda flow, i: reach(i["roots"], i["edges"]), GRAPH, stream, runtime, run_points=[]
    )
    #                                      n time diff
    assert changes_table(run.outputs[0]) == [
        (0, 0, 1),
        (0, 3, -1),
        (1, 0, 1),
        (1, 3, -1),
        (2, 0, 1),
        (2, 1, -1),
        (2, 3, 1),
        (3, 2, 1),
    ]


def test_max_iterations_applies_the_body_k_times(runtime):
    stream = [[("roots", (0,), 1), ("roots", (10,), 1)], [("roots", (10,), -1)]]

    def build(flow, i):
        r = i["roots"]
        bump = r.iterate(lambda x: x.select(n=dd.col("n") + 1), max_iterations=3)
        capped = r.iterate(
            lambda x: x.select(n=dd.least(dd.col("n") + 1, dd.lit(2))), max_iterations=5
        )  # converges at 2 before the limit
        return [bump, capped]

    run = check_stream(build, GRAPH, stream, runtime)
    bump, capped = run.outputs
    #                              n time diff
    assert changes_table(bump) == [(3, 0, 1), (13, 0, 1), (13, 1, -1)]
    assert changes_table(capped) == [(2, 0, 2), (2, 1, -1)]


def test_nested_loops_stream_table(runtime):
    stream = [
        [("roots", (0,), 1), ("a", (0, 1), 1), ("a", (1, 2), 1), ("b", (2, 3), 1)],
        [("a", (3, 4), 1)],
        [("a", (1, 2), -1)],
    ]
    run = check_stream(lambda flow, i: nested_reach(i), NESTED, stream, runtime, run_points=[])
    #                                      n time diff
    assert changes_table(run.outputs[0]) == [
        (0, 0, 1),
        (1, 0, 1),
        (2, 0, 1),
        (2, 2, -1),
        (3, 0, 1),
        (3, 2, -1),
        (4, 1, 1),
        (4, 2, -1),
    ]


# ---------------------------------------------------------------------- properties


@SETTINGS
@given(case=streams_and_run_points(graph_records, max_updates=6))
def test_reachability_and_closure_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        edges = i["edges"]
        es = edges.distinct()

        def step(x: dd.Collection) -> dd.Collection:
            return x.concat(x.join(es, left_on="n", right_on="src").select(n="dst")).distinct()

        # roots enter as a multiset (negative multiplicities included); the body makes a set
        return [reach(i["roots"], edges), closure(edges), i["roots"].iterate(step)]

    check_stream(build, GRAPH, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(graph_records, max_updates=6))
def test_label_propagation_matches_reference(runtime, case):
    stream, run_points = case
    check_stream(lambda flow, i: components(i["edges"]), GRAPH, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(weighted_records, max_updates=6))
def test_shortest_distances_match_reference(runtime, case):
    stream, run_points = case
    check_stream(
        lambda flow, i: distances(i["roots"], i["edges"]), WEIGHTED, stream, runtime, run_points
    )


@SETTINGS
@given(case=streams_and_run_points(graph_records, max_updates=6), k=st.integers(1, 3))
def test_max_iterations_matches_reference(runtime, case, k):
    stream, run_points = case

    def build(flow, i):
        r = i["roots"]
        return [
            reach(r, i["edges"], max_iterations=k),
            # never converges: only the limit stops it
            r.iterate(lambda x: x.select(n=dd.col("n") + 1).concat(r), max_iterations=k),
        ]

    check_stream(build, GRAPH, stream, runtime, run_points)


NESTED = {
    "roots": {"n": "int64"},
    "a": {"src": "int64", "dst": "int64"},
    "b": {"src": "int64", "dst": "int64"},
}
nested_records = {
    "roots": st.tuples(nodes),
    "a": st.tuples(nodes, nodes),
    "b": st.tuples(nodes, nodes),
}


def nested_reach(i: dict[str, dd.Collection]) -> dd.Collection:
    """Reachability over ``a`` and ``b`` edges, two loops deep: each outer round closes the set
    under ``a`` edges (the inner loop), then takes one step along ``b`` edges."""
    a, b = i["a"].distinct(), i["b"].distinct()

    def outer(x: dd.Collection) -> dd.Collection:
        def inner(y: dd.Collection) -> dd.Collection:
            step = y.join(a, left_on="n", right_on="src").select(n="dst")
            return y.concat(step, x).distinct()  # x: the outer variable, entered

        closed = x.iterate(inner)
        return closed.concat(closed.join(b, left_on="n", right_on="src").select(n="dst")).distinct()

    return i["roots"].distinct().iterate(outer)


@SETTINGS
@given(case=streams_and_run_points(nested_records, max_updates=6))
def test_nested_loops_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        per_root_sizes = nested_reach(i).group_by("n").agg(c=dd.count())
        return [nested_reach(i), per_root_sizes]

    check_stream(build, NESTED, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(nested_records, max_updates=6))
@example(
    case=(
        [
            [("roots", (0,), 1)],
            [("a", (0, 0), -1), ("b", (0, 0), -1)],
            [("a", (0, 0), 1), ("b", (0, 0), 1)],
        ],
        {0, 1, 2},
    )
)
def test_operators_reading_frontiers_run_with_every_change_propagated(runtime, case):
    """``run()`` propagates pointstamp changes only before an operator that reads frontiers
    runs (or when none is active), not after every step (``Worker._step``): every such
    operator starts its step with no change left unpropagated, except a join, whose
    frontiers are computed on demand from the counts, which then hold every change; the run
    propagates less often than it steps, and the outputs are the reference's at every
    epoch."""
    stream, run_points = case
    flow = make_flow(runtime)
    inputs = {name: flow.input(name, schema=schema, signed=True) for name, schema in NESTED.items()}
    built = nested_reach(inputs)
    outputs = [built.output(), built.group_by("n").agg(c=dd.count()).output()]
    flow._ensure_built()
    worker = flow.worker
    late: list[str] = []
    running = [False]  # (a reduce propagates within its step, to evaluate a loop's next
    # iteration of a key in it: not the run's propagation, which this test counts)
    for op in worker.operators:
        if op.watches_frontier:

            def checked(op=op, schedule=op.schedule):
                tracker = worker.tracker
                if op.frontier_on_demand:
                    if tracker.uncounted_changes():
                        late.append(op.name)
                elif tracker.pending_changes():
                    late.append(op.name)
                running[0] = True
                try:
                    schedule()
                finally:
                    running[0] = False

            op.schedule = checked
    propagates = [0]
    tracker_propagate = worker.tracker.propagate

    def counted():
        propagates[0] += not running[0]
        return tracker_propagate()

    worker.tracker.propagate = counted
    steps = worker.steps
    feed_and_run(flow, inputs, stream, run_points)
    assert not late, f"operators ran with changes not propagated: {late}"
    if worker.steps - steps > 20:
        assert propagates[0] < worker.steps - steps
    check_run(Run(flow, inputs, outputs, stream))


@SETTINGS
@given(case=streams_and_run_points(weighted_records, max_updates=6))
def test_nested_loops_with_reductions_match_reference(runtime, case):
    """Inner loop: shortest distances over the current edge set, from the roots that still
    have an out-edge; outer loop: drop the edges whose weight exceeds the number of nodes
    reached (the edge set only shrinks, so the outer loop converges)."""
    stream, run_points = case

    def build(flow, i):
        edges = i["edges"].distinct()
        roots = i["roots"]

        def outer(es: dd.Collection) -> dd.Collection:
            live_roots = roots.semijoin(es, left_on="n", right_on="src")  # in the outer loop
            dist = distances(live_roots, es)
            size = dist.select(one=dd.lit(1)).group_by("one").agg(c=dd.count())
            keep = es.with_columns(one=dd.lit(1)).join(size, on="one")
            # linear in the variable ``es``: the cancellations must meet in the feedback
            return keep.filter(dd.col("w") <= dd.col("c")).select("src", "dst", "w")

        return edges.iterate(outer)

    check_stream(build, WEIGHTED, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(graph_records, max_updates=6))
def test_prioritized_iterate_matches_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        e = i["edges"].distinct()
        sym = e.concat(e.select(src="dst", dst="src")).distinct()
        labels = sym.select(node="src", label="src").distinct()

        def propagate(lab: dd.Collection) -> dd.Collection:
            sent = lab.join(sym, left_on="node", right_on="src").select(node="dst", label="label")
            return sent.concat(lab).group_by("node").agg(label=dd.min("label"))

        def step(x: dd.Collection) -> dd.Collection:
            return x.concat(x.join(e, left_on="n", right_on="src").select(n="dst")).distinct()

        roots = i["roots"].distinct()
        return [
            labels.prioritized_iterate(propagate, priority=dd.col("label")),
            roots.prioritized_iterate(step, priority=dd.col("n") % 2),
            # with max_iterations: see test_prioritized_iterate_with_max_iterations
            roots.prioritized_iterate(step, priority=4 - dd.col("n")),
        ]

    check_stream(build, GRAPH, stream, runtime, run_points)


# ---------------------------------------------------------------------- regressions


@pytest.mark.parametrize("body", ["identity", "select", "consolidate", "join"])
def test_loop_with_a_body_linear_in_the_variable_terminates(runtime, body):
    """The feedback once sent ``result`` and ``-source`` in separate batches; at the fixed point
    they cancelled, but nothing in a linear cycle consolidated them, so the pair circulated with
    ever-growing iteration numbers and ``run()`` never returned."""
    bodies = {
        "identity": lambda x, ys: x,
        "select": lambda x, ys: x.select("x"),
        "consolidate": lambda x, ys: x.consolidate(),
        "join": lambda x, ys: x.join(ys, on="x"),
    }
    stream = [[("xs", (1,), 1), ("ys", (1,), 1)]]

    def build(flow, i):
        return i["xs"].iterate(lambda x: bodies[body](x, i["ys"]))

    run = check_stream(
        build, {"xs": {"x": "int64"}, "ys": {"x": "int64"}}, stream, runtime, budget=3.0
    )
    assert changes_table(run.outputs[0]) == [(1, 0, 1)]


def test_prioritized_iterate_with_max_iterations(runtime):
    # each priority runs at most two rounds: priority 0 applies the body to {0} twice (result
    # {2}, variable left at {1}); priority 1 starts from {1} + {10}, and the work priority 0
    # left undone ({1} -> {2}) is not resumed, so each record got exactly two applications
    stream = [[("xs", (0, 0), 1), ("xs", (10, 1), 1)]]

    def bump(x: dd.Collection) -> dd.Collection:  # never converges
        return x.select(n=dd.col("n") + 1, p="p")

    def build(flow, i):
        return i["xs"].prioritized_iterate(bump, priority=dd.col("p"), max_iterations=2)

    run = check_stream(build, {"xs": {"n": "int64", "p": "int64"}}, stream, runtime)
    #                                      n  p time diff
    assert changes_table(run.outputs[0]) == [(2, 0, 0, 1), (12, 1, 0, 1)]
