"""Graph mining on evolving graphs with CBP stages (cbp-socc2010 §3.1).

Two applications, each a function from a collection of edge insertions to collections whose
snapshots are the application's result. Both keep one group per node, the graph in the
groups' state (an *inner* grouping: an epoch reads the state of the nodes it touches only), and
let nodes exchange messages on loopback flows, read one epoch after they are written.

* :func:`clustering_coefficients` (Figures 6 and 7): the clustering coefficient of every node
  of an undirected graph, one epoch behind the edges (the friends-of-friends messages take an
  epoch). :func:`clustering_coefficients_stage` gives its stage, for its ``metrics``.
* :func:`incremental_pagerank` (Figures 8 and 9): the approximate incremental PageRank of
  Chien, Dwork, Kumar, Simon and Sivakumar ("Link evolution: analysis and algorithms",
  Internet Mathematics 1(3), 2004) over link insertions: each increment of links recomputes
  the ranks of the affected subgraph only, the rest of the graph collapsed into a supernode;
  a run of several phases over many epochs, which Runnable sequences.

Edges are insertions only (a CBP flow carries records added; a removal raises
:class:`~ddflow.errors.CBPError`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, NamedTuple

import ddflow as dd
from ddflow import cbp
from ddflow.api.collection import Collection

__all__ = [
    "CONTROL",
    "PageRank",
    "clustering_coefficients",
    "clustering_coefficients_stage",
    "incremental_pagerank",
]

# ------------------------------------------------------------------------------------------
# clustering coefficients (cbp-socc2010 §3.1.1, Figures 6 and 7)

#: the stage's state: per node, a row per neighbour (``nbr``: the epoch ``since`` which the
#: edge exists, and ``fof``, that neighbour's neighbours as last heard: the friends-of-friends
#: relation), and one row with ``nbr`` null: the epoch ``since`` which the node exists and its
#: ``coefficient`` (null while it is not due yet)
_CC_STATE = {
    "node": "int64",
    "nbr": "int64?",
    "since": "int64",
    "fof": "list[int64]",
    "coefficient": "float64?",
}
#: a friends-of-friends message: node ``src`` has neighbour ``dst``, multicast to ``addr``
_FOF = {"addr": "str", "src": "int64", "dst": "int64"}


def _ends(edge: tuple[Any, ...]) -> int | list[int]:
    """RouteBy of an undirected edge: both of its ends (a self-loop's node once)."""
    src, dst = edge[0], edge[1]
    return src if src == dst else [src, dst]


def _cc_translate(
    node: int, state: list[tuple[Any, ...]], flows: dict[str, Any], out: Any
) -> None:
    """One node's step (Figure 7): add its new edges, tell its neighbours, take in what its
    neighbours told it, and recompute its coefficient over the graph of the epochs before."""
    now = out.epoch
    since: dict[int, int] = {}  # neighbour -> the epoch its edge arrived
    fof: dict[int, set[int]] = {}  # neighbour -> that neighbour's neighbours
    born = now  # the epoch the node was first seen
    for _, nbr, at, nbrs, _ in state:
        if nbr is None:
            born = at
        else:
            since[nbr] = at
            fof[nbr] = set(nbrs)
    # new edges (lines 2-3 of Figure 7): a self-loop or an edge known already adds nothing
    added: list[int] = []
    for src, dst in flows["edges"]:
        other = dst if src == node else src
        if other != node and other not in since:
            since[other] = now
            fof[other] = set()
            added.append(other)
    # the neighbours' news (lines 7-8): ``src`` has (gained) neighbour ``dst``
    for _, src, dst in flows["fof"]:
        fof.setdefault(src, set()).add(dst)
    # tell the neighbours (lines 4-6), by multicast: the old neighbours learn the new edges,
    # the new neighbours learn the whole adjacency
    if added:
        for nbr in since:
            if since[nbr] < now:
                out.associate(nbr, f"+{node}")
        for nbr in added:
            out.write("fof", (f"+{node}", node, nbr))
            out.associate(nbr, f"*{node}")
        for nbr in since:
            out.write("fof", (f"*{node}", node, nbr))
    if not state:
        out.write("due", (node,))  # a new node's coefficient is due in the next epoch
    # the coefficient over the graph of the epochs before this one (lines 9-10)
    coefficient = None
    if born < now:
        before = {n for n, at in since.items() if at < now}
        k = len(before)
        links = sum(len(fof[n] & before) for n in before)  # each edge among them twice
        coefficient = links / (k * (k - 1)) if links else 0.0
    out.state((node, None, born, [], coefficient))
    for nbr in sorted(since):
        out.state((node, nbr, since[nbr], sorted(fof[nbr]), None))


def clustering_coefficients_stage(edges: Collection, name: str = "clustering") -> cbp.Stage:
    """The CBP stage of :func:`clustering_coefficients` (its ``state`` and ``metrics``).

    One group per node, an *inner* grouping: an epoch calls translate only for the nodes with
    new edges or messages, and reads only their state. Flows:

    * ``edges`` (input): each edge ``(src, dst)`` reaches both of its ends;
    * ``fof`` (loopback, routed by :class:`cbp.Multicast` on ``addr``): a node that gained
      neighbours in epoch ``e`` associates its earlier neighbours with the address ``+node``
      and sends them the new edges, and associates the new neighbours with ``*node`` and sends
      them its whole adjacency; one record per edge reaches every worker, whatever the number
      of neighbours (the paper's multicast, §4.5.3);
    * ``due`` (loopback, keyed by node): a node seen for the first time in ``e`` asks to be
      called in ``e + 1``, when its coefficient is due (a node with a self-loop alone gets no
      other message).

    The stage runs when any flow has an increment (``cbp.RunnableANY``): an epoch can both add
    new edges and take in the messages about the epoch before.
    """
    return cbp.stage(
        name,
        _cc_translate,
        key={"node": "int64"},
        inputs={"edges": cbp.Flow(edges.select("src", "dst"), route_by=_ends)},
        loopbacks={
            "fof": cbp.Loopback(_FOF, route_by=cbp.Multicast("addr")),
            "due": cbp.Loopback({"node": "int64"}),
        },
        state=_CC_STATE,
        grouping="inner",
        runnable=cbp.RunnableANY,
    )


def clustering_coefficients(edges: Collection, name: str = "clustering") -> Collection:
    """The local clustering coefficient of every node of an undirected graph:
    ``(node, coefficient)``, ``coefficient = 2 E / (k (k - 1))`` for a node with ``k``
    neighbours and ``E`` edges among them (0 below two neighbours), as
    ``networkx.clustering`` computes it.

    ``edges`` has int64 columns ``src`` and ``dst``; each record inserts the undirected edge
    between them. The graph is simple, as a ``networkx.Graph`` built from the same edges: an
    edge inserted again (in either direction, in the same epoch or later) changes nothing, and
    a self-loop ``(v, v)`` adds the node ``v`` but counts neither as a neighbour nor towards
    ``E``.

    **Lag**: the snapshot at epoch ``e + 1`` is the coefficients of the graph of the edges
    inserted at epochs up to ``e`` (every node of that graph, and only those). A node learns
    its neighbours' new edges by messages read an epoch after they are written (Figure 7), so
    the epoch that brings an edge recomputes the coefficients over the edges of the epochs
    before it, and the next epoch brings the news of it. The snapshot at ``e + 1`` is due when
    the dataflow is complete through ``e + 1``: advance the input to ``e + 2``, or close it
    (the stage then runs the one epoch more it needs).

    The result is the stage's state (:func:`clustering_coefficients_stage`) projected on each
    node's coefficient row: it changes only for the nodes that translate was called for.
    """
    stage = clustering_coefficients_stage(edges, name)
    col = dd.col
    return stage.state.filter(col("nbr").is_null() & col("coefficient").is_not_null()).select(
        "node", "coefficient"
    )
