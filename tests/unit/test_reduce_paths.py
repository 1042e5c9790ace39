"""Special paths of the reduce operator, checked against the reference interpreter."""

from __future__ import annotations

import random
from collections import Counter

import ddflow as dd
from ddflow.operators.reduce import ReduceOp
from ddflow.testing import frame_to_counter, reference


def reduces(flow):
    return [op for op in flow.worker.operators if isinstance(op, ReduceOp)]


def test_min_max_skip_groups_an_insertion_cannot_change_and_stay_exact():
    flow = dd.Dataflow()
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
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    labels = dd.graph.connected_components(edges) if hasattr(dd.graph, "connected_components") else None
    if labels is None:
        sym = edges.concat(edges.select(src=dd.col("dst"), dst=dd.col("src")))
        nodes = sym.select(node=dd.col("src")).distinct().with_columns(label=dd.col("node"))
        labels = nodes.iterate(
            lambda x: x.join(sym, left_on="node", right_on="src")
            .select(node=dd.col("dst"), label=dd.col("label"))
            .concat(nodes)
            .group_by("node")
            .agg(label=dd.min("label"))
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


def test_reference_select_of_only_literals_keeps_every_record():
    """Regression: the reference evaluated ``select(one=lit(1))`` to a single row."""
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"x": "int64"})
    out = xs.select(one=dd.lit(1)).output()
    assert reference(flow, {"xs": Counter({(1,): 1, (2,): 1})})[out] == Counter({(1,): 2})
    xs.insert([1, 2])
    flow.advance_to(1)
    flow.run()
    assert frame_to_counter(out.snapshot()) == Counter({(1,): 2})
