"""``Dataflow.loop_stats``: the differences each loop processed, by loop name, epoch and
iteration; ``epoch=`` keeps one epoch; loops named twice stay apart."""

from __future__ import annotations

import ddflow as dd


def test_loops_are_named_and_counted_per_epoch() -> None:
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    dd.graph.strongly_connected_components(edges).output()
    dd.graph.connected_components(edges).output()
    dd.graph.connected_components(edges.select(src=dd.col("dst"), dst=dd.col("src"))).output()
    edges.insert([(1, 2), (2, 1), (2, 3)])
    flow.advance_to(1)
    flow.run()
    edges.insert([(3, 1)])
    flow.advance_to(2)
    flow.run()
    stats = flow.loop_stats()
    names = set(stats["loop"])
    assert {
        "scc trims",
        "scc forward labels",
        "scc backward labels",
        "scc component labels",
        "component labels",
    } <= names
    twice = [n for n in names if n.startswith("component labels (")]
    assert len(twice) == 1, names  # the second call's loop keeps its own counts
    assert set(stats["epoch"]) == {0, 1}
    one = flow.loop_stats(epoch=1)
    assert set(one["epoch"]) == {1}
    assert one.reset_index(drop=True).equals(stats[stats["epoch"] == 1].reset_index(drop=True))
    assert (one["differences"] > 0).all()
