"""The graph algorithms need edge multiplicities that never go below zero. Edges whose plan
cannot go negative (a checked input, and what operators keep non-negative) are taken as they
are, with no operator added; others are checked while running, and ``run()`` raises an
:class:`~ddflow.InputError` naming the algorithm, the multiplicity and the line that called the
algorithm.

Regression: ``dd.graph.connected_components`` of edges from which an absent edge was removed
ran on, silently, with an edge of multiplicity -1 cancelling what another edge sent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import ddflow as dd
from ddflow.testing import frame_to_counter, reference

EDGES = {"src": "int64", "dst": "int64"}
WEIGHTED = {"src": "int64", "dst": "int64", "weight": "int64"}


def _roots(flow: dd.Dataflow) -> dd.Collection:
    roots = flow.input("roots", schema={"node": "int64"})
    roots.insert([1])
    return roots


ALGORITHMS: dict[str, tuple[dict[str, str], Callable[[dd.Dataflow, Any], dd.Collection]]] = {
    "connected_components": (EDGES, lambda f, e: dd.graph.connected_components(e)),
    "reachability_labels": (EDGES, lambda f, e: dd.graph.reachability_labels(e)),
    "strongly_connected_components": (
        EDGES,
        lambda f, e: dd.graph.strongly_connected_components(e),
    ),
    "bfs": (EDGES, lambda f, e: dd.graph.bfs(e, _roots(f))),
    "shortest_paths": (WEIGHTED, lambda f, e: dd.graph.shortest_paths(e, _roots(f))),
    "pagerank": (EDGES, lambda f, e: dd.graph.pagerank(e, iterations=3)),
}


def _edge(schema: dict[str, str], a: int, b: int) -> tuple[int, ...]:
    return (a, b, 1) if "weight" in schema else (a, b)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_an_edge_below_zero_stops_the_run_naming_the_algorithm_and_the_callers_line(
    name: str,
) -> None:
    schema, algorithm = ALGORITHMS[name]
    flow = dd.Dataflow()
    edges = flow.input("edges", schema=schema, signed=True)
    out = algorithm(flow, edges).output()
    edges.insert([_edge(schema, 1, 2), _edge(schema, 2, 3)])
    flow.advance_to(1)
    flow.run()
    before = frame_to_counter(out.snapshot())
    edges.remove([_edge(schema, 3, 4)])  # never inserted: multiplicity -1
    flow.advance_to(2)
    with pytest.raises(dd.InputError, match=rf"{name}: an edge has multiplicity -1") as info:
        flow.run()
    assert info.value.site is not None
    # (the line of the lambda that called the algorithm)
    line = algorithm.__code__.co_firstlineno
    assert (info.value.site.filename, info.value.site.lineno) == (__file__, line)
    with pytest.raises(dd.DataflowFailedError, match=name):
        flow.run()
    assert frame_to_counter(out.snapshot(epoch=0)) == before


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_edges_from_a_checked_input_get_no_extra_operator(name: str) -> None:
    """The check is only where the plan allows a negative edge: edges from a checked input
    build the same operators as before, and from a signed input one ``threshold`` (a reduce)
    more, or in place of the ``distinct`` of an algorithm that takes a set of edges."""
    schema, algorithm = ALGORITHMS[name]

    def build(signed: bool) -> tuple[Counter, int]:
        flow = dd.Dataflow()
        algorithm(flow, flow.input("edges", schema=schema, signed=signed)).output()
        flow.run()
        return (
            Counter(n.params.get("kind", n.op) for n in flow.plan.nodes),
            sum(op.kind == "reduce" for op in flow.worker.operators),
        )

    (checked, checked_reduces), (signed, signed_reduces) = build(False), build(True)
    assert checked["threshold"] == 0
    assert signed - checked == Counter({"threshold": 1})
    as_set = checked["distinct"] - signed["distinct"]  # the distinct the threshold replaced
    assert as_set in (0, 1)
    assert signed_reduces - checked_reduces == 1 - as_set


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_signed_edges_that_stay_non_negative_give_the_same_result(name: str) -> None:
    schema, algorithm = ALGORITHMS[name]
    flow = dd.Dataflow()
    edges = flow.input("edges", schema=schema, signed=True)
    out = algorithm(flow, edges).output()
    live = Counter({_edge(schema, 1, 2): 2, _edge(schema, 2, 3): 1, _edge(schema, 3, 1): 1})
    edges.insert(list(live.elements()))
    flow.advance_to(1)
    flow.run()
    edges.remove([_edge(schema, 1, 2), _edge(schema, 3, 1)])
    live -= Counter([_edge(schema, 1, 2), _edge(schema, 3, 1)])
    flow.advance_to(2)
    flow.run()
    inputs = {"edges": live}
    if "roots" in flow.inputs:
        inputs["roots"] = Counter({(1,): 1})
    assert frame_to_counter(out.snapshot()) == reference(flow, inputs)[out]


def _edges_from(flow: dd.Dataflow, how: str) -> dd.Collection:
    xs = flow.input("xs", schema=EDGES)
    ys = flow.input("ys", schema=EDGES)
    zs = flow.input("zs", schema=EDGES, signed=True)
    return {
        "select": lambda: xs.select(src=dd.col("dst"), dst=dd.col("src")),
        "filter": lambda: xs.filter(dd.col("src") != dd.col("dst")),
        "concat": lambda: xs.concat(ys),
        "join": lambda: xs.join(ys.select(dst=dd.col("src"), far=dd.col("dst")), on="dst").select(
            src=dd.col("src"), dst=dd.col("far")
        ),
        "map": lambda: xs.map(lambda r: (r[1], r[0])),
        "distinct of signed": lambda: zs.distinct(),
        "agg of signed": lambda: zs.group_by("src").agg(dst=dd.max("dst")),
        "loop": lambda: xs.iterate(
            lambda x: x.concat(
                x.join(x.select(dst=dd.col("src"), far=dd.col("dst")), on="dst").select(
                    src=dd.col("src"), dst=dd.col("far")
                )
            ).distinct()
        ),
        "signed": lambda: zs,
        "negate": lambda: xs.concat(ys.negate()),
        "threshold": lambda: xs.threshold(lambda m: m),
        "concat with signed": lambda: xs.concat(zs),
        "loop with negate": lambda: xs.iterate(lambda x: x.concat(x.negate()).concat(xs)),
        "vertex": lambda: flow.vertex(dd.Vertex(), [xs], [EDGES])[0],
    }[how]()


@pytest.mark.parametrize(
    "how,checked",
    [
        ("select", False),
        ("filter", False),
        ("concat", False),
        ("join", False),
        ("map", False),
        ("distinct of signed", False),
        ("agg of signed", False),
        ("loop", False),
        ("signed", True),
        ("negate", True),
        ("threshold", True),
        ("concat with signed", True),
        ("loop with negate", True),
        ("vertex", True),
    ],
)
def test_the_check_is_added_only_where_the_plan_allows_a_negative_edge(
    how: str, checked: bool
) -> None:
    flow = dd.Dataflow()
    edges = _edges_from(flow, how)
    before = sum(1 for n in flow.plan.nodes if n.params.get("kind") == "threshold")
    dd.graph.connected_components(edges)
    after = sum(1 for n in flow.plan.nodes if n.params.get("kind") == "threshold")
    assert after - before == int(checked)
