"""The worked examples of naiad-tech-report §2.3-2.4: connected components on a six-node graph
(Figure 5), then a second epoch that removes the edge between nodes 1 and 3 (Figure 7).

The report draws the graph but does not list its edges. What the text fixes is: six nodes;
an edge between nodes 1 and 3; the fixed point "reached after four iterations, represented by
the times (0, 0), (0, 1), (0, 2), (0, 3)"; and, after the edge 1 - 3 is removed, nothing
changes at iteration (1, 0) and "in iteration (1, 1) the label for node 3 is 3, whereas it was
1 in iteration (0, 1)". The graph used here satisfies all of it::

    1 - 2 - 4 - 6
     \\
      3 - 5

Node 6 is three edges from node 1, so label 1 reaches it at iteration 3 and the labels stop
changing there (iterations 0..3, four in all). Node 3 is adjacent to 1 (label 1 at iteration 1)
and, once 1 - 3 is gone, its only neighbour is 5, so at iteration (1, 1) its label is
``min(3, 5) = 3``. Removing 1 - 3 splits off the component {3, 5}: exactly the labels of nodes 3
and 5 change, everything else done in epoch 0 is reused.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

import ddflow as dd

SIX_NODES = [(1, 2), (1, 3), (2, 4), (3, 5), (4, 6)]


def local_min_loop(edges: dd.Collection, seen: list[pl.DataFrame]) -> dd.Collection:
    """Figure 3 written with ddflow's public API, with the loop variable's updates recorded
    (``inspect``) so that the iterations of Figures 5 and 7 can be read off."""
    symmetric = edges.concat(edges.select(src=dd.col("dst"), dst=dd.col("src")))
    nodes = symmetric.select(node=dd.col("src")).distinct().with_columns(label=dd.col("node"))

    def local_min(x: dd.Collection) -> dd.Collection:
        x = x.inspect(seen.append)
        sent = x.join(symmetric, left_on="node", right_on="src").select(
            node=dd.col("dst"), label=dd.col("label")
        )
        return sent.concat(x).group_by("node").agg(label=dd.min("label"))

    return nodes.iterate(local_min)


def versions(seen: list[pl.DataFrame]) -> dict[tuple[int, int], Counter]:
    """The consolidated updates of the loop variable, by time (epoch, iteration)."""
    acc: Counter = Counter()
    for batch in seen:
        for node, label, time, diff in batch.iter_rows():
            acc[(tuple(time), node, label)] += diff
    out: dict[tuple[int, int], Counter] = {}
    for (time, node, label), diff in acc.items():
        if diff:
            out.setdefault(time, Counter())[(node, label)] += diff
    return out


def test_figure_5_fixed_point_at_iteration_3_and_figure_7_changes_only_nodes_3_and_5():
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    seen: list[pl.DataFrame] = []
    loop = local_min_loop(edges, seen).output()
    library = dd.graph.connected_components(edges).output()

    edges.insert(SIX_NODES)
    flow.advance_to(1)
    flow.run()
    final = {(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)}
    for out in (loop, library):
        assert set(out.snapshot()[["node", "label"]].itertuples(index=False, name=None)) == final

    # Figure 5: every node starts with its own id; labels change at iterations 1, 2 and 3 and
    # never after (the fixed point is reached at time (0, 3)).
    v = versions(seen)
    assert sorted(v) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert v[(0, 0)] == Counter({(n, n): 1 for n in range(1, 7)})
    assert v[(0, 1)] == Counter(
        {
            (2, 1): 1,
            (2, 2): -1,
            (3, 1): 1,
            (3, 3): -1,
            (4, 2): 1,
            (4, 4): -1,
            (5, 3): 1,
            (5, 5): -1,
            (6, 4): 1,
            (6, 6): -1,
        }
    )
    assert v[(0, 2)] == Counter(
        {(4, 1): 1, (4, 2): -1, (5, 1): 1, (5, 3): -1, (6, 2): 1, (6, 4): -1}
    )
    assert v[(0, 3)] == Counter({(6, 1): 1, (6, 2): -1})

    # Figure 7: remove the edge between nodes 1 and 3.
    seen.clear()
    edges.remove([(1, 3)])
    flow.advance_to(2)
    flow.run()
    v = versions(seen)
    # nothing at (1, 0); node 3 becomes 3 at (1, 1) (it was 1 at (0, 1)); node 5 follows at
    # (1, 2); no other node's history changes (the "unshaded circles" are these four updates)
    assert v == {(1, 1): Counter({(3, 1): -1, (3, 3): 1}), (1, 2): Counter({(5, 1): -1, (5, 3): 1})}

    # the output's changes of the second epoch: only the affected nodes' rows appear
    for out in (loop, library):
        changes = out.changes()
        second = changes[changes["time"] == 1]
        assert sorted(second[["node", "label", "diff"]].itertuples(index=False, name=None)) == [
            (3, 1, -1),
            (3, 3, 1),
            (5, 1, -1),
            (5, 3, 1),
        ]
        assert set(changes[changes["time"] == 0]["node"]) == set(range(1, 7))


def test_prioritized_six_node_components_agree_and_change_the_same_rows():
    """Figure 10's prioritized loop gives the same labels and the same second-epoch changes."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(edges, prioritized=True).output()
    edges.insert(SIX_NODES)
    flow.advance_to(1)
    flow.run()
    assert out.snapshot()["label"].tolist() == [1] * 6
    edges.remove([(1, 3)])
    flow.advance_to(2)
    flow.run()
    changes = out.changes()
    second = changes[changes["time"] == 1]
    assert sorted(second[["node", "label", "diff"]].itertuples(index=False, name=None)) == [
        (3, 1, -1),
        (3, 3, 1),
        (5, 1, -1),
        (5, 3, 1),
    ]


def test_shortest_paths_figure_19_on_a_small_weighted_graph():
    """Bellman-Ford (Figure 19): a heavier direct edge loses to a lighter two-hop path until
    the path breaks; only the nodes whose distance changes appear in the second epoch."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "weight": "int64"})
    sources = flow.input("sources", schema={"node": "int64"})
    out = dd.graph.shortest_paths(edges, sources).output()
    edges.insert([(0, 1, 10), (0, 2, 3), (2, 1, 4), (1, 3, 1), (2, 4, 2)])
    sources.insert([0])
    flow.advance_to(1)
    flow.run()
    assert dict(out.snapshot()[["node", "distance"]].itertuples(index=False, name=None)) == {
        0: 0,
        1: 7,
        2: 3,
        3: 8,
        4: 5,
    }
    edges.remove([(2, 1, 4)])
    flow.advance_to(2)
    flow.run()
    changes = out.changes()
    second = changes[changes["time"] == 1]
    assert sorted(second[["node", "distance", "diff"]].itertuples(index=False, name=None)) == [
        (1, 7, -1),
        (1, 10, 1),
        (3, 8, -1),
        (3, 11, 1),
    ]


def test_repeated_and_parallel_edges_count_once_in_every_label_and_distance_loop():
    """The loops join the edges as given, without a ``distinct`` (or a least weight per
    pair) first: an edge present twice sends the same label or distance twice, and only the
    least counts. Removing one copy of a doubled edge changes no result; removing the last
    copy does; a parallel edge's least weight counts, and the next least once it is gone.
    Every output row has multiplicity 1."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    weighted = flow.input("weighted", schema={"src": "int64", "dst": "int64", "weight": "int64"})
    roots = flow.input("roots", schema={"node": "int64"})
    outs = {
        "cc": dd.graph.connected_components(edges).output(),
        "cc_prioritized": dd.graph.connected_components(edges, prioritized=True).output(),
        "reach": dd.graph.reachability_labels(edges).output(),
        "bfs": dd.graph.bfs(edges, roots).output(),
        "sssp": dd.graph.shortest_paths(weighted, roots).output(),
        "scc": dd.graph.strongly_connected_components(edges).output(),
    }

    def results() -> dict[str, dict[int, int]]:
        got = {}
        for name, out in outs.items():
            snap = out.snapshot()
            assert (snap["count"] == 1).all(), (name, snap)
            got[name] = dict(snap.drop(columns="count").itertuples(index=False, name=None))
        return got

    def epoch(insert=(), remove=(), insert_w=(), remove_w=()) -> dict[str, dict[int, int]]:
        edges.insert(list(insert))
        edges.remove(list(remove))
        weighted.insert(list(insert_w))
        weighted.remove(list(remove_w))
        flow.advance_to(flow.epoch + 1)
        flow.run()
        return results()

    roots.insert([1])
    first = epoch(
        insert=[(1, 2), (1, 2), (2, 3), (3, 2), (4, 5)],
        insert_w=[(1, 2, 5), (1, 2, 3), (1, 2, 3), (2, 3, 1)],
    )
    assert first == {
        "cc": {1: 1, 2: 1, 3: 1, 4: 4, 5: 4},
        "cc_prioritized": {1: 1, 2: 1, 3: 1, 4: 4, 5: 4},
        "reach": {1: 1, 2: 1, 3: 1, 4: 4, 5: 4},
        "bfs": {1: 0, 2: 1, 3: 2},
        "sssp": {1: 0, 2: 3, 3: 4},
        "scc": {1: 1, 2: 2, 3: 2, 4: 4, 5: 5},
    }
    # one copy of each doubled edge gone: the other still counts, nothing changes
    before = len(outs["cc"].changes()), len(outs["sssp"].changes())
    assert epoch(remove=[(1, 2)], remove_w=[(1, 2, 3)]) == first
    assert (len(outs["cc"].changes()), len(outs["sssp"].changes())) == before
    # the last copies gone: 1 is cut off; the parallel edge of weight 5 counts now
    second = epoch(remove=[(1, 2)], remove_w=[(1, 2, 3)])
    assert second == {
        "cc": {2: 2, 3: 2, 4: 4, 5: 4},
        "cc_prioritized": {2: 2, 3: 2, 4: 4, 5: 4},
        "reach": {2: 2, 3: 2, 4: 4, 5: 4},
        "bfs": {1: 0},
        "sssp": {1: 0, 2: 5, 3: 6},
        "scc": {2: 2, 3: 2, 4: 4, 5: 5},
    }
    # the same edge inserted three times, then removed twice: present once
    assert epoch(insert=[(5, 2)] * 3)["cc"] == {2: 2, 3: 2, 4: 2, 5: 2}
    third = epoch(remove=[(5, 2)] * 2)
    assert third["cc"] == {2: 2, 3: 2, 4: 2, 5: 2}
    assert third["reach"] == {2: 2, 3: 2, 4: 4, 5: 4}
    assert third["scc"] == {2: 2, 3: 2, 4: 4, 5: 5}
    # a cycle through a doubled edge: 2 -> 5 (twice) -> 2, and 4 <-> 5
    assert epoch(insert=[(2, 5), (2, 5), (5, 4)])["scc"] == {2: 2, 3: 2, 4: 2, 5: 2}
    assert epoch(remove=[(2, 5)])["scc"] == {2: 2, 3: 2, 4: 2, 5: 2}
    assert epoch(remove=[(2, 5)])["scc"] == {2: 2, 3: 2, 4: 4, 5: 4}


def test_the_label_and_distance_loops_arrange_the_edges_once():
    """Connected components, reachability, BFS and shortest paths run no reduce over the
    edges before their loop (a distinct, or a least weight per pair, keeps two more
    arrangements of every edge and runs at every change): their reduces are the node set's
    or the roots' ``distinct`` and the loop's least."""

    def reduces(build) -> list[str]:
        flow = dd.Dataflow()
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "weight": "int64"})
        roots = flow.input("roots", schema={"node": "int64"})
        build(edges, roots).output()
        return [n.op for n in flow.plan.nodes if n.op == "reduce"]  # (distinct and group_by)

    assert len(reduces(lambda e, r: dd.graph.connected_components(e))) == 2
    assert len(reduces(lambda e, r: dd.graph.reachability_labels(e))) == 2
    assert len(reduces(lambda e, r: dd.graph.bfs(e, r))) == 2
    assert len(reduces(lambda e, r: dd.graph.shortest_paths(e, r))) == 2
