"""Fusion: the rewrite pass that decides which plan nodes are no operator of their own.

A stateless one-input node that keeps its input's times (``select``, ``with_columns``,
``filter``, ``map``, ``flat_map``, ``negate``, ``inspect``) whose output has one consumer, and
that consumer a stateless operator too (another of these, a ``concat``, a loop's ``enter``,
``variable`` or ``leave``) or an arrangement (``arrange``, either input of a ``join``, the input
of a ``reduce``), is *fused*: its function is applied by the consumer, before the consumer's
own, to the messages arriving on that input. A chain of them is one function. Likewise a
``concat`` whose output has one consumer, and that consumer an arrangement (the input of a
reduce, as in every loop body that ends in a group-by): the arrangement takes each of the
concat's inputs on a port of its own, with that input's function, and arranges what arrives on
all of them together, as it would the concat's messages.

Invariant: fusion changes no message's data, time or order of arrival at a stateful operator,
and no output: every node's function is applied exactly once to every message, as with an
operator each. It saves a scheduling step, a message and its progress updates per fused node
and message.

>>> import ddflow as dd
>>> flow = dd.Dataflow()
>>> xs = flow.input("xs", schema={"k": "int64"})
>>> out = xs.filter(dd.col("k") > 0).select(k=dd.col("k") + 1).distinct().output()
>>> sorted(flow.plan.nodes[i].op for i in fused_nodes(flow.plan))
['filter', 'select']
"""

from __future__ import annotations

from collections import Counter

from ddflow.plan.nodes import Node, Plan

__all__ = ["ARRANGING", "STATELESS", "fused_nodes"]

#: stateless one-input nodes that keep their input's times: fusable into their consumer
STATELESS = frozenset({"select", "with_columns", "filter", "map", "flat_map", "negate", "inspect"})
#: nodes built as operators that apply a function to each input's messages
APPLYING = STATELESS | {"concat", "enter", "variable", "leave"}
#: nodes that arrange their inputs (and take each on a port of its own, with its function)
ARRANGING = frozenset({"arrange", "join", "reduce"})


def fused_nodes(plan: Plan, workers: int = 1) -> frozenset[int]:
    """The ids of the nodes of ``plan`` that are applied by their one consumer (see the
    module). With several ``workers``, an ``inspect`` neither is nor takes up its input: it runs
    on worker 0 alone, where the user's function is."""
    consumers: dict[int, list[Node]] = {}
    count: Counter[int] = Counter()
    for node in plan.nodes:
        for i in node.inputs:
            count[i.id] += 1
            consumers.setdefault(i.id, []).append(node)
    fused = set()
    for node in plan.nodes:
        if count[node.id] != 1:
            continue
        (consumer,) = consumers[node.id]
        if workers > 1 and "inspect" in (node.op, consumer.op):
            continue
        if (node.op in STATELESS and consumer.op in APPLYING | ARRANGING) or (
            node.op == "concat" and consumer.op in ARRANGING
        ):
            fused.add(node.id)
    return frozenset(fused)
