"""The graph applications of cbp-socc2010 §3.1 (``ddflow.cbp.apps.graphs``) against NetworkX
recomputed from scratch after every increment, at the epoch the documented lag makes the
result due: clustering coefficients (Figures 6, 7) equal to ``networkx.clustering`` one epoch
behind the edges, and the approximate incremental PageRank (Figures 8, 9) within a tolerance
of ``networkx.pagerank`` at the epoch its ``increments`` report gives; on one worker, three
threads, two worker processes, and two workers hosted by Spark. Also what the stages read:
translate called only for the nodes with new edges or messages, and an affected subgraph far
smaller than the graph for a small change to a larger graph."""

from __future__ import annotations

import collections
import random

import networkx as nx
import pytest
from cbp_runtimes import RUNTIMES, new_flow
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.cbp.apps.graphs import (
    CONTROL,
    clustering_coefficients,
    clustering_coefficients_stage,
    incremental_pagerank,
)


def examples(runtime, embedded, threads, processes):
    """Hypothesis examples per runtime (worker processes are slow to start)."""
    return {"embedded": embedded, (3, False): threads, (2, True): processes}[runtime]


def edge_lists(nodes, max_size=6):
    return st.lists(
        st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1)), max_size=max_size
    )


def coefficients(out, epoch):
    snap = out.snapshot(epoch)
    assert (snap["count"] == 1).all(), "one row per node"
    return dict(zip(snap["node"], snap["coefficient"], strict=True))


def ranks_at(out, epoch):
    snap = out.snapshot(epoch)
    assert (snap["count"] == 1).all(), "one row per node"
    return dict(zip(snap["node"], snap["rank"], strict=True))


def assert_close_to_pagerank(got, graph, what):
    want = nx.pagerank(graph)
    assert set(got) == set(want), what
    errors = [abs(got[v] - want[v]) for v in want]
    assert max(errors) < 0.01, (what, max(errors))
    assert sum(errors) < 0.05, (what, sum(errors))


# ---------------------------------------------------------------------- clustering coefficients


def check_clustering(runtime, increments):
    """Insert an increment per epoch, run after each, and compare the snapshot at every epoch
    as it completes with networkx.clustering of the graph of the epochs before it."""
    flow = new_flow(runtime)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = clustering_coefficients(edges).output()
    graphs = []  # graphs[e]: the graph of the edges inserted at epochs <= e
    graph = nx.Graph()
    with flow:
        for e, inc in enumerate(increments):
            edges.insert(inc)
            graph.add_edges_from(inc)
            graphs.append(graph.copy())
            edges.advance_to(e + 1)
            flow.run()
            assert out.complete_through >= e
            # due at epoch e: the graph of the epochs up to e - 1
            want = nx.clustering(graphs[e - 1]) if e else {}
            assert coefficients(out, e) == want, f"epoch {e}"
        edges.close()
        flow.run()
        last = len(increments)
        assert coefficients(out, last) == nx.clustering(graphs[-1]), f"epoch {last}"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_clustering_coefficients_match_networkx_after_every_increment(runtime):
    @settings(max_examples=examples(runtime, 15, 8, 4), deadline=None)
    @given(increments=st.lists(edge_lists(10), min_size=1, max_size=5))
    def check(increments):
        check_clustering(runtime, increments)

    check()


def test_clustering_coefficients_treat_self_loops_and_duplicates_as_networkx_does():
    """A self-loop adds its node alone; an edge inserted again, either way round, in the same
    epoch or later, changes nothing."""
    check_clustering(
        "embedded",
        [
            [(7, 7)],  # a node with a self-loop alone: coefficient 0 from epoch 1
            [(1, 2), (2, 1), (2, 3), (1, 3), (1, 1)],
            [(3, 1), (3, 4), (7, 7)],
            [(4, 1), (2, 1)],
        ],
    )


@settings(max_examples=10, deadline=None)
@given(increments=st.lists(edge_lists(12, 8), min_size=1, max_size=5))
def test_clustering_inner_grouping_calls_only_nodes_with_new_edges_or_messages(increments):
    """The stage's metrics at each epoch: translate calls for the ends of the epoch's edges and
    the receivers of messages alone (a node's neighbours after it gained neighbours in the
    epoch before, and a node new in the epoch before), reading exactly their state records
    (a row per node and per neighbour)."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    metrics = clustering_coefficients_stage(edges).metrics.output()
    with flow:
        for e, inc in enumerate(increments):
            edges.insert(inc)
            edges.advance_to(e + 1)
        edges.close()
        flow.run()
        m = metrics.changes().groupby("time")[["calls", "state_read", "state_size"]].sum()
    adj: dict[int, set[int]] = collections.defaultdict(set)  # the graph after each epoch
    grown: set[int] = set()  # nodes whose adjacency grew in the epoch before
    new: set[int] = set()  # nodes new in the epoch before
    for e in range(len(increments) + 1):
        inc = increments[e] if e < len(increments) else []
        ends = {v for edge in inc for v in edge}
        called = ends | new | {n for w in grown for n in adj[w]}
        state_before = sum(1 + len(adj[v]) for v in adj)
        read = sum(1 + len(adj[v]) for v in called if v in adj)
        if called:
            assert m.loc[e].tolist() == [len(called), read, state_before], f"epoch {e}"
        else:
            assert e not in m.index
        new = ends - set(adj)
        grown = set()
        for u, v in inc:
            for a, b in ((u, v), (v, u)):
                if a != b and b not in adj[a]:
                    grown.add(a)
            adj[u], adj[v]
        for u, v in inc:
            if u != v:
                adj[u].add(v)
                adj[v].add(u)


def test_clustering_a_chord_on_a_large_ring_touches_a_handful_of_nodes():
    """Inner grouping on a ring of 300 nodes: a chord calls its two ends, then the five nodes
    its news reaches; the state read is theirs, not the ring's."""
    n = 300
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    stage = clustering_coefficients_stage(edges)
    metrics = stage.metrics.output()
    out = clustering_coefficients(edges).output()
    with flow:
        edges.insert([(i, (i + 1) % n) for i in range(n)])
        edges.advance_to(2)
        edges.insert([(0, 2)])
        edges.close()
        flow.run()
        m = metrics.changes().groupby("time")[["calls", "state_read", "state_size"]].sum()
        assert m.loc[2].tolist() == [2, 2 * 3, 3 * n]
        assert m.loc[3].tolist() == [5, 3 + 4 + 4 + 3 + 3, 3 * n + 2]
        graph = nx.cycle_graph(n)
        graph.add_edge(0, 2)
        assert coefficients(out, 3) == nx.clustering(graph)


# ---------------------------------------------------------------------- incremental PageRank


@st.composite
def link_increments(draw):
    """A first increment reaching every node of ``range(n)``, then increments of links among
    them and up to two new nodes (each may leave the graph's size as it is, or not)."""
    n = draw(st.integers(3, 10))
    first = [(v, draw(st.integers(0, n - 1))) for v in range(n)]
    first += draw(edge_lists(n, 4))
    later = draw(st.lists(edge_lists(n + 2, 4), max_size=2))
    return [first, *later]


def check_pagerank(runtime, increments, interactive):
    """Either insert the increments at consecutive epochs and close the input (they wait for
    each other), or insert one, advance the input ``max_epochs`` epochs past it and run; then
    compare the ranks at the epoch each increment's report gives with networkx.pagerank."""
    flow = new_flow(runtime)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    pr = incremental_pagerank(edges)
    ranks = pr.ranks.output()
    report = pr.increments.output()
    nonempty = [inc for inc in increments if inc]
    with flow:
        epoch = 0
        for i, inc in enumerate(increments):
            edges.insert(inc)
            epoch += pr.max_epochs + 1 if interactive else 1
            edges.advance_to(epoch)
            if interactive:
                flow.run()
                # done within max_epochs: the latest snapshot has the increment's ranks
                graph = nx.DiGraph([link for done in increments[: i + 1] for link in done])
                assert_close_to_pagerank(ranks_at(ranks, epoch - 1), graph, f"after {i}")
        edges.close()
        flow.run()
        rows = report.changes().sort_values("increment").to_dict("records")
        assert [r["increment"] for r in rows] == list(range(len(nonempty)))
        graph = nx.DiGraph()
        before: dict[int, float] = {}
        last_epoch = -1
        for row, inc in zip(rows, nonempty, strict=True):
            known = all(graph.has_edge(*link) for link in inc)
            graph.add_edges_from(inc)
            what = f"increment {row['increment']}: {row}"
            assert row["time"] == row["epoch"] > row["read"] > last_epoch, what
            assert row["epoch"] - row["read"] <= pr.max_epochs, what
            assert row["nodes"] == graph.number_of_nodes(), what
            assert (row["mode"] == "none") == known, what
            if row["nodes"] > len(before):
                # the first increment, or new nodes in a graph of a dozen: the teleport share
                # of every node changes by more than the threshold, G is the whole graph
                assert row["mode"] == "global", what
            if row["mode"] == "global":
                assert row["affected"] == row["nodes"], what
            elif row["mode"] == "local":
                assert 0 < row["affected"] <= row["nodes"], what
            else:
                assert row["affected"] == 0, what
            got = ranks_at(ranks, row["epoch"])
            assert_close_to_pagerank(got, graph, what)
            assert abs(sum(got.values()) - 1) < 1e-3, what
            # until the increment is done, the ranks are the last increment's
            assert ranks_at(ranks, row["epoch"] - 1) == before, what
            before, last_epoch = got, row["epoch"]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_incremental_pagerank_is_close_to_networkx_after_every_increment(runtime):
    @settings(max_examples=examples(runtime, 10, 5, 3), deadline=None)
    @given(increments=link_increments(), interactive=st.booleans())
    def check(increments, interactive):
        check_pagerank(runtime, increments, interactive)

    check()


def test_incremental_pagerank_recomputes_a_small_subgraph_for_a_small_change():
    """200 nodes with three out-links each, then one link more between two of them: the
    supernode's search finds an affected subgraph G far smaller than the graph, the steps of
    PageRank on G call translate for G's nodes only (the inner grouping), and the ranks stay
    within the tolerance of networkx's."""
    rnd = random.Random(20100610)
    n = 200
    links = [(v, rnd.randrange(n)) for v in range(n) for _ in range(3)]
    graph = nx.DiGraph(links)
    new = next(
        (u, v)
        for u, v in ((rnd.randrange(n), rnd.randrange(n)) for _ in range(100))
        if not graph.has_edge(u, v)
    )
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    pr = incremental_pagerank(edges)
    ranks = pr.ranks.output()
    report = pr.increments.output()
    metrics = pr.stage.metrics.output()
    with flow:
        edges.insert(links)
        edges.advance_to(1)
        edges.insert([new])
        edges.close()
        flow.run()
        first, second = report.changes().sort_values("increment").to_dict("records")
        assert (first["mode"], first["affected"]) == ("global", n)
        assert second["mode"] == "local"
        assert 0 < second["affected"] < n // 4, second
        graph.add_edge(*new)
        assert_close_to_pagerank(ranks_at(ranks, second["epoch"]), graph, second)
        calls = metrics.changes().groupby("time")["calls"].sum()
        done, steps = second["epoch"], second["iterations"]
        # every epoch of the increment calls a part of the graph: the seeds, the nodes the
        # weight reaches, G's nodes and their in-neighbours
        during = calls.loc[second["read"] : done - 1]
        assert len(during) == done - second["read"] and during.max() < n, during.to_dict()
        # PageRank on G calls G's nodes and the supernode only, a step per epoch
        on_g = calls.loc[done - 1 - steps : done - 1]
        assert len(on_g) == steps + 1 and (on_g == second["affected"] + 1).all(), on_g
        assert calls.loc[done] == n + 1  # the reset: every node, and the supernode


def test_incremental_pagerank_refuses_the_supernodes_id_and_bad_parameters():
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    with pytest.raises(ValueError, match="damping"):
        incremental_pagerank(edges, damping=1.0)
    with pytest.raises(ValueError, match="threshold"):
        incremental_pagerank(edges, threshold=0.0)
    incremental_pagerank(edges)
    with flow:
        edges.insert([(1, CONTROL)])
        edges.advance_to(1)
        with pytest.raises(dd.CBPError, match="supernode"):
            flow.run()


# ---------------------------------------------------------------------- on Spark


@pytest.fixture
def spark_flow(spark):
    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
    yield flow
    flow.close()


def test_on_spark_both_applications_match_networkx(spark_flow):
    """Three epochs of random edges on two workers hosted by Spark: the coefficients one epoch
    behind, the ranks at each increment's epoch."""
    rnd = random.Random(2010)
    increments = [[(rnd.randrange(8), rnd.randrange(8)) for _ in range(6)] for _ in range(3)]
    flow = spark_flow
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    cc = clustering_coefficients(edges).output()
    pr = incremental_pagerank(edges)
    ranks = pr.ranks.output()
    report = pr.increments.output()
    for e, inc in enumerate(increments):
        edges.insert(inc)
        edges.advance_to(e + 1)
    edges.close()
    flow.run()
    undirected, directed = nx.Graph(), nx.DiGraph()
    rows = report.changes().sort_values("increment").to_dict("records")
    assert len(rows) == len(increments)
    for e, (inc, row) in enumerate(zip(increments, rows, strict=True)):
        undirected.add_edges_from(inc)
        directed.add_edges_from(inc)
        assert coefficients(cc, e + 1) == nx.clustering(undirected), f"epoch {e + 1}"
        assert_close_to_pagerank(ranks_at(ranks, row["epoch"]), directed, row)
