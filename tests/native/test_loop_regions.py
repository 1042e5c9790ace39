"""Loop regions (``LocalSettings(regions=True)``): loops of built-in operators over integers run
whole in the native core, as one operator.

While the Python loops exist beside them, a differential test runs each graph algorithm both
ways on the same streams (retractions, several epochs in flight, nested loops) and compares the
outputs row for row at every run, and with NetworkX recomputing from scratch. The semantics
suite's ``local`` runtime also runs with regions (tests/semantics/harness.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.plan.regions import find_regions
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings

REGIONS = LocalSettings(reduce=ReduceSettings(native=True), regions=True)
LOOPS = LocalSettings(reduce=ReduceSettings(native=True))

Algorithm = Callable[[dd.Collection, dd.Collection], dd.Collection]

ALGORITHMS: dict[str, Algorithm] = {
    "cc": lambda e, _: dd.graph.connected_components(e),
    "scc": lambda e, _: dd.graph.strongly_connected_components(e),
    "reach": lambda e, _: dd.graph.reachability_labels(e),
    "bfs": lambda e, roots: dd.graph.bfs(e, roots),
    "sssp": lambda e, roots: dd.graph.shortest_paths(e, roots, weight="w"),
}


def _flow(settings: LocalSettings, algorithm: Algorithm) -> tuple[dd.Dataflow, Any, Any, Any]:
    flow = dd.Dataflow(runtime=dd.LocalRuntime(settings))
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "w": "int64"})
    roots = flow.input("roots", schema={"node": "int64"})
    out = algorithm(edges, roots).output()
    return flow, edges, roots, out


def _rows(out: Any) -> list[tuple[Any, ...]]:
    return sorted(out.snapshot(polars=True).rows())


def _networkx(name: str, live: dict[tuple[int, int], int], roots: set[int]) -> Any:
    g = nx.DiGraph()
    g.add_weighted_edges_from((s, d, w) for (s, d), w in live.items())
    if name == "cc":
        u = g.to_undirected()
        return {n: min(c) for c in nx.connected_components(u) for n in c}
    if name == "scc":
        return {n: min(c) for c in nx.strongly_connected_components(g) for n in c}
    return None


changes = st.lists(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.booleans()), max_size=6),
    min_size=1,
    max_size=5,
)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@given(stream=changes, in_flight=st.integers(1, 3))
@settings(max_examples=25, deadline=None)
def test_regions_give_the_python_loops_results_at_every_run(
    name: str, stream: list[list[tuple[int, int, bool]]], in_flight: int
) -> None:
    """Both flows see the same edge changes (insertions and retractions of edges present),
    epochs advanced ``in_flight`` at a time before each run; their outputs are equal row for
    row after every run, and equal to NetworkX's components where it has them."""
    algorithm = ALGORITHMS[name]
    flows = [_flow(REGIONS, algorithm), _flow(LOOPS, algorithm)]
    assert "loop region" in flows[0][0].explain()
    assert "loop region" not in flows[1][0].explain()
    live: dict[tuple[int, int], int] = {}
    roots = {0, 3}
    for _, _, r, _ in flows:
        r.insert([(n,) for n in sorted(roots)])
    for epoch, batch in enumerate(stream, start=1):
        rows: list[tuple[int, int, int]] = []
        gone: list[tuple[int, int, int]] = []
        for s, d, add in batch:
            if s == d:
                continue
            if add and (s, d) not in live:
                live[(s, d)] = 1 + (s * 7 + d) % 5
                rows.append((s, d, live[(s, d)]))
            elif not add and (s, d) in live:
                gone.append((s, d, live.pop((s, d))))
        for flow, edges, _, _ in flows:
            if rows:
                edges.insert(rows)
            if gone:
                edges.remove(gone)
            flow.advance_to(epoch)
        if epoch % in_flight == 0 or epoch == len(stream):
            for flow, *_ in flows:
                flow.run()
            got, want = (_rows(out) for *_, out in flows)
            assert got == want, f"{name} after epoch {epoch}"
            labels = _networkx(name, live, roots)
            if labels is not None:
                assert dict((r[0], r[1]) for r in got) == labels


def test_nested_loops_run_in_one_region() -> None:
    """Strongly connected components: the outer loop and the label propagations inside it
    are one region; the component labels after it are another."""
    flow, *_ = _flow(REGIONS, ALGORITHMS["scc"])
    regions = [line for line in flow.explain().splitlines() if "loop region" in line]
    assert [r.split(" ", 1)[1] for r in regions] == [
        "loop region (scc trims): native",
        "loop region (scc component labels): native",
    ]


def test_loops_a_region_cannot_hold_say_why() -> None:
    flow = dd.Dataflow(runtime=dd.LocalRuntime(REGIONS))
    xs = flow.input("xs", schema={"k": "int64", "s": "str"})
    ys = flow.input("ys", schema={"k": "int64"})
    ys.iterate(lambda y: y.concat(y).distinct(), name="ints").output()
    xs.iterate(lambda x: x.distinct(), name="strings").output()
    ys.prioritized_iterate(lambda y: y.distinct(), priority=dd.col("k"), name="ranked").output()
    ys.iterate(lambda y: y.threshold(lambda m: 1), name="threshold").output()
    regions, refused = find_regions(flow.plan)
    assert [r.name for r in regions] == ["ints"]
    assert refused == {
        "strings": "the loop's input input has column 's' of type str; a region holds integers",
        "ranked": "a prioritized loop",
        "threshold": "a reduce of kind 'threshold'",
    }
    lines = flow.explain().splitlines()
    assert "loop region (ints): native" in lines[2]
    assert lines[-3:] == [
        "loop 'strings' runs as Python operators: the loop's input input has column 's' of "
        "type str; a region holds integers",
        "loop 'ranked' runs as Python operators: a prioritized loop",
        "loop 'threshold' runs as Python operators: a reduce of kind 'threshold'",
    ]


def test_a_checkpointed_dataflow_keeps_its_loops_in_python(tmp_path: Any) -> None:
    """A region's state lives in the core, which a checkpoint does not hold yet: with
    checkpoints the loops are Python operators, and the checkpoint restores."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(REGIONS), checkpoint=tmp_path / "ckpt")
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(edges).output()
    assert "loop region" not in flow.explain()
    edges.insert([(1, 2), (2, 3)])
    flow.advance_to(1)
    flow.run()
    flow.checkpoint()
    assert _rows(out) == [(1, 1, 1), (2, 1, 1), (3, 1, 1)]


def test_outer_chains_fused_into_the_loop_run_before_it() -> None:
    """A select on the loop's input, fused into its enter, is applied by the region's
    operator before the updates cross."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(REGIONS))
    xs = flow.input("xs", schema={"a": "int64", "b": "int64"})
    loop = xs.select(n=dd.col("a") + dd.col("b")).iterate(
        lambda x: x.select(n=(dd.col("n") - 1).abs()).concat(x).distinct(), name="down"
    )
    out = loop.output()
    assert "loop region" not in flow.explain()  # (abs is not native: the loop stays Python)
    flow2 = dd.Dataflow(runtime=dd.LocalRuntime(REGIONS))
    xs2 = flow2.input("xs", schema={"a": "int64", "b": "int64"})
    loop2 = xs2.select(n=dd.col("a") + dd.col("b")).iterate(
        lambda x: x.filter(dd.col("n") > 0).select(n=dd.col("n") - 1).concat(x).distinct(),
        name="counting down",
    )
    out2 = loop2.output()
    assert "loop region (counting down): native" in flow2.explain()
    for f, inp in ((flow, xs), (flow2, xs2)):
        inp.insert([(2, 1)])
        f.advance_to(1)
        f.run()
    assert _rows(out) == _rows(out2) == [(0, 1), (1, 1), (2, 1), (3, 1)]
    stats = flow2.loop_stats()
    assert set(stats["loop"]) == {"counting down"} and stats["differences"].sum() > 0


def test_a_frame_and_rows_cross_alike() -> None:
    """A frame of 300 edges and single rows cross alike (a chain: 300 iterations)."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(REGIONS))
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(edges).output()
    chain = pl.DataFrame({"src": list(range(300)), "dst": list(range(1, 301))})
    edges.insert_frame(chain)
    flow.advance_to(1)
    flow.run()
    assert {r[1] for r in _rows(out)} == {0}
    edges.remove([(150, 151)])
    flow.advance_to(2)
    flow.run()
    labels = dict((r[0], r[1]) for r in _rows(out))
    assert labels[150] == 0 and labels[151] == 151 and labels[300] == 151
