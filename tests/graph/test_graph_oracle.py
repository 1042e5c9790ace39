"""Every algorithm of :mod:`ddflow.graph` against NetworkX, after every epoch of a stream.

Each test draws a random small graph (Hypothesis), loads it in epoch 0 and then applies epochs
of mixed insertions and deletions (deleting edges splits components, breaks paths and cycles;
the input is a multiset, so an edge may be present more than once and still counts once).
After every epoch the maintained result must equal the algorithm recomputed from scratch by
NetworkX (or, for PageRank, by the same integer arithmetic in plain Python) on the edges
present at that epoch; where a test passes ``reference_inputs``, so must the reference
interpreter (:func:`ddflow.testing.reference`) evaluating the same dataflow on the inputs
accumulated so far, which checks the reference's loops (nested in SCC, prioritized in
components and shortest paths, ``max_iterations`` in PageRank) against NetworkX too. The
graphs are small because every epoch costs ddflow a few hundred milliseconds of per-operator
overhead; the number of epochs is what finds bugs (``DDFLOW_GRAPH_EXAMPLES=10`` runs ten
times as many examples).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings
from ddflow.testing import reference

Edge = tuple[int, ...]
# (records to remove: a position in the sorted live records, or the record itself; records to
# insert)
Step = tuple[list[Any], list[Edge]]


#: the numbers of workers the main algorithms run on (every operator runs on 1, 2 and 3 in
#: tests/semantics); "2p": two workers in processes, 2: two workers in this process (the same
#: routes and progress tracking, without a round trip per step); "1native": one worker with
#: the reduces the native core covers run there
WORKERS = [1, 2, "1native"]


def make_flow(workers: int | str) -> dd.Dataflow:
    if workers == "2p":
        return dd.Dataflow(workers=2)
    if workers == "1native":
        return dd.Dataflow(
            runtime=dd.LocalRuntime(LocalSettings(reduce=ReduceSettings(native=True)))
        )
    return dd.Dataflow(workers=int(workers), processes=False)


#: multiply the number of examples, e.g. DDFLOW_GRAPH_EXAMPLES=10 for a long soak run
EXAMPLES = float(os.environ.get("DDFLOW_GRAPH_EXAMPLES", "1"))


def graph_settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, round(examples * EXAMPLES)),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---------------------------------------------------------------------- streams


@st.composite
def edge_streams(
    draw: st.DrawFn,
    nodes: tuple[int, int] = (10, 40),
    epochs: tuple[int, int] = (4, 8),
    weights: bool = False,
    max_changes: int = 4,
) -> tuple[int, list[Edge], list[Step]]:
    """``(n, initial edges, steps)``: a random graph on nodes ``0..n-1`` (about one edge per
    node, so it has several components and long paths) and epochs of changes."""
    n = draw(st.integers(*nodes))
    node = st.integers(0, n - 1)
    edge = st.tuples(node, node, st.integers(1, 9)) if weights else st.tuples(node, node)
    initial = draw(st.lists(edge, min_size=n // 2, max_size=n + n // 2))
    steps = [
        (
            draw(st.lists(st.integers(0, 10**6), max_size=max_changes)),
            draw(st.lists(edge, max_size=max_changes)),
        )
        for _ in range(draw(st.integers(*epochs)))
    ]
    return n, initial, steps


def apply_step(present: Counter, step: Step) -> tuple[list[Edge], list[Edge]]:
    """Apply a step to the multiset of records; returns what to insert and what to remove."""
    positions, inserts = step
    removes = []
    for p in positions:
        live = sorted(present)
        if not live:
            break
        r = p if isinstance(p, tuple) else live[p % len(live)]
        removes.append(r)
        present[r] -= 1
        if present[r] == 0:
            del present[r]
    present.update(inserts)
    return inserts, removes


def rows(out: dd.Output) -> set[tuple[Any, ...]]:
    """A snapshot as a set of records, checking that every multiplicity is 1."""
    snap = out.snapshot()
    assert (snap["count"] == 1).all(), snap[snap["count"] != 1]
    return set(snap.drop(columns="count").itertuples(index=False, name=None))


def run_stream(
    build: Callable[[dd.Dataflow, dd.InputCollection], dd.Collection],
    schema: dict[str, str],
    initial: Sequence[Edge],
    steps: Sequence[Step],
    oracle: Callable[[set[Edge], int], set[tuple[Any, ...]]],
    before_epoch: Callable[[int], None] | None = None,
    make_flow: Callable[[], dd.Dataflow] = dd.Dataflow,
    reference_inputs: Callable[[Counter], Mapping[str, Counter]] | None = None,
) -> int:
    """Drive ``build``'s result through the stream, comparing with ``oracle(edges, epoch)``
    after every epoch; returns the number of epochs checked. With ``reference_inputs`` (the
    accumulated inputs, given the multiset of edge records present), the reference
    interpreter's value of the output must equal the oracle's too."""
    flow = make_flow()
    edges = flow.input("edges", schema=schema)
    out = build(flow, edges).output()
    present: Counter = Counter()
    for epoch, step in enumerate([([], list(initial)), *steps]):
        inserts, removes = apply_step(present, step)
        edges.insert(inserts)
        edges.remove(removes)
        if before_epoch is not None:
            before_epoch(epoch)
        flow.advance_to(epoch + 1)
        flow.run()
        expected = oracle(set(present), epoch)
        got = rows(out)
        assert got == expected, (
            f"epoch {epoch}: missing {sorted(expected - got)}, extra {sorted(got - expected)}"
        )
        if reference_inputs is not None:
            ref = reference(flow, reference_inputs(present))[out]
            assert ref == Counter(dict.fromkeys(expected, 1)), (
                f"epoch {epoch}: the reference interpreter differs from the oracle: missing "
                f"{sorted(set(expected) - set(ref))}, other {sorted(set(ref) - set(expected))}"
            )
    return len(steps) + 1


def edges_only(present: Counter) -> dict[str, Counter]:
    """The accumulated inputs of a dataflow whose only input is ``edges``."""
    return {"edges": Counter(present)}


# ---------------------------------------------------------------------- oracles


def digraph(edges: Iterable[Edge]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_edges_from((e[0], e[1]) for e in edges)
    return g


def nx_components(edges: set[Edge], _: int = 0) -> set[tuple[int, int]]:
    g = digraph(edges).to_undirected()
    return {(v, min(c)) for c in nx.connected_components(g) for v in c}


def nx_reachability(edges: set[Edge], _: int = 0) -> set[tuple[int, int]]:
    g = digraph(edges)
    return {(v, min(nx.ancestors(g, v) | {v})) for v in g}


def nx_scc(edges: set[Edge], _: int = 0) -> set[tuple[int, int]]:
    g = digraph(edges)
    return {(v, min(c)) for c in nx.strongly_connected_components(g) for v in c}


def nx_multi_source(edges: set[Edge], sources: dict[int, int]) -> set[tuple[int, int]]:
    """Least ``offset(s) + path weight`` over sources, by Dijkstra from a virtual
    super-source joined to every source ``s`` by an edge of weight ``offset(s)``; parallel
    edges keep their least weight."""
    g = nx.DiGraph()
    for e in edges:
        w = e[2] if len(e) > 2 else 1
        if not g.has_edge(e[0], e[1]) or g[e[0]][e[1]]["weight"] > w:
            g.add_edge(e[0], e[1], weight=w)
    root = "super-source"
    for s, offset in sources.items():
        g.add_edge(root, s, weight=offset)
    dist = nx.single_source_dijkstra_path_length(g, root) if sources else {}
    return {(v, d) for v, d in dist.items() if v != root}


# ---------------------------------------------------------------------- components


@pytest.mark.parametrize("workers", [1, "2p", "1native"])
@graph_settings(14)
@given(edge_streams())
def test_connected_components_matches_networkx(workers, stream):
    _, initial, steps = stream
    run_stream(
        lambda flow, e: dd.graph.connected_components(e),
        {"src": "int64", "dst": "int64"},
        initial,
        steps,
        nx_components,
        reference_inputs=edges_only,
        make_flow=lambda: make_flow(workers),
    )


@pytest.mark.parametrize("workers", WORKERS)
@graph_settings(7)
@given(edge_streams(nodes=(10, 30), epochs=(3, 6)))
def test_prioritized_connected_components_matches_networkx(workers, stream):
    _, initial, steps = stream
    run_stream(
        lambda flow, e: dd.graph.connected_components(e, prioritized=True),
        {"src": "int64", "dst": "int64"},
        initial,
        steps,
        nx_components,
        reference_inputs=edges_only,
        make_flow=lambda: make_flow(workers),
    )


@graph_settings(8)
@given(edge_streams(nodes=(10, 30), epochs=(3, 6)))
def test_reachability_labels_match_networkx_ancestors(stream):
    _, initial, steps = stream
    run_stream(
        lambda flow, e: dd.graph.reachability_labels(e),
        {"src": "int64", "dst": "int64"},
        initial,
        steps,
        nx_reachability,
        reference_inputs=edges_only,
    )


@pytest.mark.parametrize("prioritized", [False, True])
def test_cutting_a_path_splits_its_component_and_rejoining_merges_it(prioritized):
    """A path 0 - 1 - ... - 11, cut in the middle, cut again, then rejoined: the labels of
    every piece follow each cut (a split must raise labels, which min-propagation alone never
    does: the retraction has to flow through the loop's history)."""
    path = [(i, i + 1) for i in range(11)]
    steps: list[Step] = [
        ([(5, 6)], []),
        ([(2, 3)], []),
        ([], [(2, 3), (5, 6)]),
        ([(0, 1)], [(11, 0)]),
    ]
    run_stream(
        lambda flow, e: dd.graph.connected_components(e, prioritized=prioritized),
        {"src": "int64", "dst": "int64"},
        path,
        steps,
        nx_components,
        reference_inputs=edges_only,
    )


@pytest.mark.spark
def test_connected_components_on_spark_match_networkx(spark):
    """The workers hosted by Spark run the library's loop to the same fixed points: a short
    path cut and rejoined (labels must rise after a cut), checked against NetworkX at every
    epoch."""
    path = [(0, 1), (1, 2), (2, 3)]
    steps: list[Step] = [([(1, 2)], []), ([], [(1, 2), (3, 0)])]
    run_stream(
        lambda flow, e: dd.graph.connected_components(e),
        {"src": "int64", "dst": "int64"},
        path,
        steps,
        nx_components,
        make_flow=lambda: dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2)),
    )


def test_prioritized_components_with_negative_and_huge_ids():
    """Priorities are ``floor(log2(max(label, 0) + 1))``: negative ids share priority 0 and
    ids near 2**63 the last one; the labels are the same as without priorities."""
    big = 2**63 - 1
    edges = [(-5, 3), (3, big), (big - 1, 7), (-(2**63), -1), (10**12, 2**40)]
    steps: list[Step] = [([(3, big)], [(7, -5)]), ([(-5, 3)], [(big, 2**40)])]
    run_stream(
        lambda flow, e: dd.graph.connected_components(e, prioritized=True),
        {"src": "int64", "dst": "int64"},
        edges,
        steps,
        nx_components,
        reference_inputs=edges_only,
    )


@st.composite
def planted_cycle_streams(draw: st.DrawFn) -> tuple[int, list[Edge], list[Step]]:
    """Random digraphs with a few planted directed cycles (on random, possibly overlapping
    node sets, so SCCs merge) plus random edges; then epochs that delete edges (breaking
    cycles) and insert edges (closing new ones)."""
    n = draw(st.integers(8, 16))
    node = st.integers(0, n - 1)
    edges: list[Edge] = []
    for _ in range(draw(st.integers(1, 3))):
        cycle = draw(st.lists(node, min_size=2, max_size=6, unique=True))
        edges += [(cycle[i], cycle[(i + 1) % len(cycle)]) for i in range(len(cycle))]
    edges += draw(st.lists(st.tuples(node, node), max_size=n // 2))
    steps = [
        (
            draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=2)),
            draw(st.lists(st.tuples(node, node), max_size=2)),
        )
        for _ in range(draw(st.integers(2, 4)))
    ]
    return n, edges, steps


@pytest.mark.parametrize("workers", [1, "2p", "1native"])
@graph_settings(5)
@given(planted_cycle_streams())
def test_strongly_connected_components_match_networkx(workers, stream):
    _, initial, steps = stream
    run_stream(
        lambda flow, e: dd.graph.strongly_connected_components(e),
        {"src": "int64", "dst": "int64"},
        initial,
        steps,
        nx_scc,
        reference_inputs=edges_only,
        make_flow=lambda: make_flow(workers),
    )


def test_scc_of_two_cycles_joined_then_separated():
    """Two 3-cycles, joined into one SCC by a back edge, then separated by deleting it;
    a self-loop and a node on no cycle are singletons."""
    edges = [(1, 2), (2, 3), (3, 1), (4, 5), (5, 6), (6, 4), (3, 4), (7, 7), (6, 8)]
    steps: list[Step] = [([], [(5, 2)]), ([(5, 2)], []), ([(7, 7), (3, 4)], [(8, 6)])]
    run_stream(
        lambda flow, e: dd.graph.strongly_connected_components(e),
        {"src": "int64", "dst": "int64"},
        edges,
        steps,
        nx_scc,
        reference_inputs=edges_only,
    )


# ---------------------------------------------------------------------- distances


@st.composite
def source_changes(
    draw: st.DrawFn, n: int, epochs: int, offsets: bool
) -> list[list[tuple[int, int]]]:
    """Per epoch, sources to toggle (insert if absent, remove if present), with offsets."""
    offset = st.integers(0, 12) if offsets else st.just(0)
    return [
        draw(
            st.lists(
                st.tuples(st.integers(0, n - 1), offset), min_size=1 if e == 0 else 0, max_size=2
            )
        )
        for e in range(epochs)
    ]


def distance_stream(draw: st.DrawFn, weights: bool, offsets: bool):
    n, initial, steps = draw(edge_streams(nodes=(10, 30), epochs=(3, 6), weights=weights))
    toggles = draw(source_changes(n, len(steps) + 1, offsets))
    return initial, steps, toggles


def drive_distances(build, initial, steps, toggles, weights: bool, offsets: bool, workers: int = 1):
    sources_now: set[tuple[int, int]] = set()
    handle: dict[str, dd.InputCollection] = {}

    def make(flow, e):
        schema = {"node": "int64", "distance": "int64"} if offsets else {"node": "int64"}
        handle["sources"] = flow.input("sources", schema=schema)
        return build(e, handle["sources"])

    def before_epoch(epoch: int) -> None:
        for s in toggles[epoch]:
            if not offsets:
                s = (s[0], 0)
            record = s if offsets else s[0]
            if s in sources_now:
                sources_now.discard(s)
                handle["sources"].remove([record])
            else:
                sources_now.add(s)
                handle["sources"].insert([record])

    def oracle(edges: set[Edge], epoch: int) -> set[tuple[int, int]]:
        best: dict[int, int] = {}
        for s, off in sources_now:
            best[s] = min(best.get(s, off), off)
        return nx_multi_source(edges, best)

    schema = {"src": "int64", "dst": "int64", **({"weight": "int64"} if weights else {})}

    def accumulated(present: Counter) -> dict[str, Counter]:
        records = [s if offsets else (s[0],) for s in sources_now]
        return {"edges": Counter(present), "sources": Counter(dict.fromkeys(records, 1))}

    run_stream(
        make,
        schema,
        initial,
        steps,
        oracle,
        before_epoch,
        make_flow=lambda: make_flow(workers),
        reference_inputs=accumulated,
    )


@graph_settings(8)
@given(st.data())
def test_bfs_matches_networkx_from_changing_roots(data):
    initial, steps, toggles = distance_stream(data.draw, weights=False, offsets=False)
    drive_distances(
        lambda e, roots: dd.graph.bfs(e, roots),
        initial,
        steps,
        toggles,
        weights=False,
        offsets=False,
    )


@graph_settings(8)
@given(st.data())
def test_shortest_paths_match_networkx_dijkstra_multi_source(data):
    initial, steps, toggles = distance_stream(data.draw, weights=True, offsets=False)
    drive_distances(
        lambda e, s: dd.graph.shortest_paths(e, s),
        initial,
        steps,
        toggles,
        weights=True,
        offsets=False,
    )


@pytest.mark.parametrize("workers", WORKERS)
@graph_settings(5)
@given(st.data())
def test_prioritized_shortest_paths_with_source_offsets_match_networkx(workers, data):
    initial, steps, toggles = distance_stream(data.draw, weights=True, offsets=True)
    drive_distances(
        lambda e, s: dd.graph.shortest_paths(e, s, prioritized=True),
        initial,
        steps,
        toggles,
        weights=True,
        offsets=True,
        workers=workers,
    )


# ---------------------------------------------------------------------- pagerank

SCALE = 2**30


def reference_pagerank(
    edges: set[Edge], iterations: int, damping: float = 0.85, scale: int = SCALE, den: int = 10**6
) -> dict[int, int]:
    """The documented integer arithmetic of :func:`ddflow.graph.pagerank`, in plain Python:
    the mass of every node after ``iterations`` rounds."""
    d = round(damping * den)
    nodes = sorted({v for e in edges for v in e[:2]})
    out: dict[int, list[int]] = {v: [] for v in nodes}
    for u, v in {e[:2] for e in edges}:
        out[u].append(v)
    n = len(nodes)
    if n == 0:
        return {}  # every edge deleted: no node, no mass
    mass = {v: scale // n for v in nodes}
    for _ in range(iterations):
        new = dict.fromkeys(nodes, (scale * (den - d) // den) // n)
        for u in nodes:
            if out[u]:
                share = (mass[u] * d // den) // len(out[u])
                for v in out[u]:
                    new[v] += share
        mass = new
    return mass


@pytest.mark.parametrize("workers", WORKERS)
@graph_settings(5)
@given(edge_streams(nodes=(10, 25), epochs=(3, 6)))
def test_pagerank_equals_integer_reference_exactly(workers, stream):
    _, initial, steps = stream
    iterations = 8

    def oracle(edges: set[Edge], _: int) -> set[tuple[int, float]]:
        # mass / 2**30 is exact in float64, so the ranks compare exactly
        return {(v, m / SCALE) for v, m in reference_pagerank(edges, iterations).items()}

    run_stream(
        lambda flow, e: dd.graph.pagerank(e, iterations=iterations),
        {"src": "int64", "dst": "int64"},
        initial,
        steps,
        oracle,
        reference_inputs=edges_only,
        make_flow=lambda: make_flow(workers),
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_pagerank_approximates_networkx_without_dangling_nodes(seed):
    """With no dangling node, 60 rounds approximate networkx (which iterates to convergence)
    to about 0.85**60 ~ 6e-5 plus rounding; with dangling nodes the two differ by design
    (networkx spreads a dangling node's rank over all nodes, ddflow drops it)."""
    g = nx.gnm_random_graph(20, 50, seed=seed, directed=True)
    g.add_edges_from((v, (v + 1) % 20) for v in range(20))  # every node has an out-edge
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.pagerank(edges, iterations=60).output()
    edges.insert(list(g.edges))
    flow.advance_to(1)
    flow.run()
    got = dict(rows(out))
    expected = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=1000)
    assert got.keys() == expected.keys()
    assert max(abs(got[v] - expected[v]) for v in got) < 1e-3
    assert abs(sum(got.values()) - 1) < 1e-6


def test_pagerank_loses_the_rank_of_dangling_nodes():
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.pagerank(edges, iterations=10).output()
    edges.insert([(1, 2), (2, 3)])  # 3 is dangling
    flow.advance_to(1)
    flow.run()
    got = dict(rows(out))
    assert got == {v: m / SCALE for v, m in reference_pagerank({(1, 2), (2, 3)}, 10).items()}
    assert sum(got.values()) < 0.9


# ---------------------------------------------------------------------- errors


def test_mistakes_are_reported_at_the_callers_line():
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "weight": "float64"})
    sources = flow.input("sources", schema={"node": "int64"})
    names = flow.input("names", schema={"src": "str", "dst": "str"})
    with pytest.raises(dd.GraphError, match="power of two") as e:
        dd.graph.pagerank(edges, scale=10**9)
    assert e.value.site is not None and e.value.site.filename == __file__
    with pytest.raises(dd.GraphError, match="iterations"):
        dd.graph.pagerank(edges, iterations=0)
    with pytest.raises(dd.SchemaError, match="integer weights"):
        dd.graph.shortest_paths(edges, sources, prioritized=True)
    with pytest.raises(dd.SchemaError, match="integer node ids"):
        dd.graph.connected_components(names, prioritized=True)
    # string node ids are fine where no priority is needed
    out = dd.graph.connected_components(names).output()
    names.insert([("b", "a"), ("c", "d")])
    flow.advance_to(1)
    flow.run()
    assert rows(out) == {("a", "a"), ("b", "a"), ("c", "c"), ("d", "c")}
