"""Graph algorithms, written only with ddflow's public collection operators.

Every algorithm here is a query over an ``edges`` collection (one record per directed edge; a
record present with multiplicity ``k > 1`` counts as one edge, and the node set is every
endpoint of an edge). An edge's multiplicity must never go below zero (an edge removed more
times than it was inserted): the label and distance loops take the edges as they are, without a
``distinct`` first, and a negative edge would cancel what another edge sends. Each returns a
collection that ddflow keeps exact as ``edges`` (and the other inputs) change: the result at
every epoch equals the algorithm run from scratch on the inputs at that epoch. The loops are
``iterate`` / ``prioritized_iterate``, so each result is the loop's fixed point (its limit),
and a change of input revisits only the iterations and nodes whose values it changes
(naiad-tech-report §2.4, Figure 7).

Algorithms and the invariant each result satisfies at its fixed point:

* :func:`connected_components` (naiad-tech-report Figure 3, ``LocalMin`` in a ``FixedPoint``):
  ``label(v) = min{u : u and v are connected, ignoring direction}``. Each round replaces a
  node's label by the least of its own and its neighbours' labels:
  ``x[i+1](v) = min(x[i](v), min{x[i](u) : u -- v})``, from ``x[0](v) = v``. Labels only fall
  and are bounded below, so the loop converges after at most ``diameter + 1`` rounds.
  ``prioritized=True`` introduces the initial labels in order of ``floor(log2(label + 1))``
  (Figure 10; naiad-tech-report §2.6, differential-dataflow-cidr2013 §3.3): small labels flood
  the graph first and larger ones then stop at the first node that already holds a smaller one.
  It pays on sparse graphs of long chains and costs on graphs of short paths (the function
  says when to choose it); the plain loop is the default.
* :func:`reachability_labels`: the same propagation along directed edges only:
  ``label(v) = min{u : u = v or there is a directed path u -> ... -> v}``.
* :func:`strongly_connected_components` (naiad-tech-report Figure 8,
  differential-dataflow-cidr2013 appendix): an outer ``iterate`` over the edge set applies
  ``TrimAndReverse`` twice per round. ``TrimAndReverse(E)`` computes reachability labels on
  ``E`` (an inner ``iterate``: a loop nested in a loop), keeps the edges ``(u, v)`` with
  ``label(u) == label(v)`` and reverses them. An edge between two SCCs is eventually trimmed
  (its endpoints are reached by different least nodes in one of the two directions), an edge
  inside an SCC never is, so the fixed point is exactly the set of intra-SCC edges. Then
  ``component(v) = min{u : u in the SCC of v}``: the reachability label on the intra-SCC
  edges, and ``v`` itself for a node on no cycle.
* :func:`bfs`: ``distance(v) = min over roots r of the number of edges of a directed path
  r -> ... -> v``, for the nodes reachable from a root.
* :func:`shortest_paths` (naiad-tech-report Figure 19, Bellman-Ford):
  ``distance(v) = min over sources s of (offset(s) + weight of a lightest path s -> v)``,
  with ``x[i+1](v) = min(x[i](v), min{x[i](u) + w(u, v)})``. Weights must not allow a
  negative cycle (the loop would not converge). ``prioritized=True`` introduces the sources in
  order of ``floor(log2(offset + 1))``.
* :func:`pagerank`: exact, deterministic PageRank in fixed-point arithmetic. Ranks are int64
  *mass*, ``rank = mass / scale`` (``scale = 2**30`` by default); every node starts with
  ``scale // n``, and each round is
  ``mass'(v) = teleport + sum over edges u -> v of (mass(u) * d // D) // outdeg(u)``, with
  ``teleport = (scale * (D - d) // D) // n`` and ``damping = d / D``. All arithmetic is integer
  (floor division), so the result is the same for every evaluation order and every epoch.

Each algorithm checks that precondition. An input checks its own multiplicities (it refuses a
removal of a record that is not there), and most operators keep multiplicities non-negative,
so the algorithm first decides from the plan whether ``edges`` can go below zero at all. Only
when they can (edges from a ``signed=True`` input, a ``negate``, a ``threshold``, a vertex) does
it check them while running (a ``threshold`` on the edges), and ``run()`` then raises
:class:`~ddflow.errors.InputError` naming the algorithm, the multiplicity and the line that
called the algorithm when an edge goes below zero.

The functions take column names (``src``, ``dst``, ``weight``) so that any edge collection can
be used as it is, and they do not require a particular node type except where they say so.

>>> import ddflow as dd
>>> flow = dd.Dataflow()
>>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
>>> cc = dd.graph.connected_components(edges).output()
>>> edges.insert([(1, 2), (2, 3), (7, 8)]); flow.advance_to(1); flow.run()
>>> cc.snapshot().to_dict("list")
{'node': [1, 2, 3, 7, 8], 'label': [1, 1, 1, 7, 7], 'count': [1, 1, 1, 1, 1]}
"""

from __future__ import annotations

from typing import Any

from ddflow.api.aggregates import count as dd_count
from ddflow.api.aggregates import min as dd_min
from ddflow.api.aggregates import sum as dd_sum
from ddflow.api.collection import Collection
from ddflow.errors import CallSite, GraphError, InputError, SchemaError, call_site
from ddflow.expr.nodes import Expr, col, lit
from ddflow.plan.nodes import Node

__all__ = [
    "bfs",
    "connected_components",
    "pagerank",
    "reachability_labels",
    "shortest_paths",
    "strongly_connected_components",
]

# ---------------------------------------------------------------------- the precondition

#: operations whose output is non-negative when their inputs are: sums, products, records
#: mapped one to many, and the loop plumbing
_KEEP_NON_NEGATIVE = frozenset(
    {
        "select",
        "with_columns",
        "filter",
        "map",
        "flat_map",
        "concat",
        "join",
        "consolidate",
        "inspect",
        "arrange",
        "enter",
        "leave",
        "feedback",
    }
)
#: reduces whose output records are emitted with positive multiplicity, whatever their input
_NON_NEGATIVE_REDUCES = frozenset({"distinct", "agg", "reduce"})


def _may_go_negative(collection: Collection) -> bool:
    """Whether the plan allows a record of ``collection`` a multiplicity below zero at some
    time.

    Non-negative: a checked input (every input not made with ``signed=True``), ``distinct``
    and the other reduces but ``threshold``, and ``select``, ``with_columns``, ``filter``,
    ``map``, ``flat_map``, ``join``, ``concat``, ``consolidate``, ``inspect`` and ``arrange``
    of non-negative collections; a loop's variable and result when what enters the loop and
    what its body returns are (by induction on the iterations, every iterate is). Anything
    else may go negative: a ``signed=True`` input, ``negate``, ``threshold``, a vertex's
    output, a loop still being built.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> xs = flow.input("xs", schema={"x": "int64"})
    >>> _may_go_negative(xs.join(xs, on="x").distinct())
    False
    >>> _may_go_negative(xs.concat(xs.negate()))
    True
    """
    negative: set[int] = set()
    inputs = collection.flow.inputs
    nodes = collection.flow.plan.nodes
    changed = True
    while changed:  # the least set closed under the rules: loops are assumed non-negative
        changed = False
        for node in nodes:
            if node.id not in negative and _node_may_go_negative(node, negative, inputs):
                negative.add(node.id)
                changed = True
    return collection._node.id in negative


def _node_may_go_negative(node: Node, negative: set[int], inputs: dict[str, Any]) -> bool:
    if node.op == "input":
        handle = inputs.get(node.params["name"])
        return handle is None or bool(handle.signed)
    if node.op in _KEEP_NON_NEGATIVE:
        return any(i.id in negative for i in node.inputs)
    if node.op == "reduce":
        return node.params.get("kind") not in _NON_NEGATIVE_REDUCES
    if node.op == "variable":
        feedback = node.scope.feedback
        return (
            feedback is None or node.inputs[0].id in negative or feedback.inputs[0].id in negative
        )
    return True


class _NonNegative:
    """The ``threshold`` function that checks an algorithm's edges while running: a
    multiplicity below zero is an error naming the algorithm and the line that called it; others
    stay as they are (or become one, for a set of edges)."""

    def __init__(self, algorithm: str, site: CallSite | None, as_set: bool) -> None:
        self.algorithm, self.site, self.as_set = algorithm, site, as_set

    def __call__(self, m: int) -> int:
        if m < 0:
            raise InputError(
                f"{self.algorithm}: an edge has multiplicity {m} (removed more times than it "
                "was inserted); the edges of a graph algorithm must never go below zero",
                site=self.site,
            )
        return min(m, 1) if self.as_set else m


def _checked(e: Collection, edges: Collection, algorithm: str, as_set: bool) -> Collection:
    """``e`` (the algorithm's view of ``edges``), checked while running if its multiplicities
    may go below zero, and made a set of edges if ``as_set``."""
    if _may_go_negative(edges):
        return e.threshold(_NonNegative(algorithm, call_site(), as_set))
    return e.distinct() if as_set else e


# ---------------------------------------------------------------------- helpers


def _edge_set(edges: Collection, src: str, dst: str, algorithm: str) -> Collection:
    """The edges as a set of ``(src, dst)`` records (duplicates count once)."""
    return _checked(edges.select(src=col(src), dst=col(dst)), edges, algorithm, as_set=True)


def _edges(edges: Collection, src: str, dst: str, algorithm: str) -> Collection:
    """The edges as ``(src, dst)`` records, each with its multiplicity, for a loop that only
    takes the least of what they carry (a label, a distance): an edge present twice sends
    the same value twice, and the least is the same as from a set of edges. No ``distinct``:
    it would keep two more arrangements of every edge and run a reduce at every change.
    (An edge's multiplicity must not go below zero: removed more times than inserted, it
    would cancel what another edge sends; :func:`_checked` makes sure.)"""
    return _checked(edges.select(src=col(src), dst=col(dst)), edges, algorithm, as_set=False)


def _node_set(e: Collection) -> Collection:
    """Every endpoint of ``e`` (a ``(src, dst)`` collection), once, as column ``node``."""
    return e.select(node=col("src")).concat(e.select(node=col("dst"))).distinct()


def _log2_bucket(value: Expr) -> Expr:
    """``floor(log2(max(value, 0) + 1))``, exactly, in integer arithmetic: the number of
    ``k >= 1`` with ``value >= 2**k - 1``. A non-negative priority that grows by one each time
    ``value`` doubles, so that a prioritized loop has few priorities (Figure 10 uses
    ``log(label + 1)`` for the same reason: too fine a priority leaves no parallelism).
    Integer comparisons, not a float logarithm, so every record gets the same priority in
    every batch."""
    bucket = (value >= 1).cast("int64")
    for k in range(2, 63):
        bucket = bucket + (value >= 2**k - 1).cast("int64")
    return bucket


def _min_label_propagation(
    labels: Collection, e: Collection, priority: Expr | None = None, name: str | None = None
) -> Collection:
    """The fixed point of ``LocalMin`` (naiad-tech-report Figure 3) along the directed edges
    ``e``: ``x[i+1](v) = min(x[i](v), min{x[i](u) : (u, v) in e})``, from ``x[0] = labels``.

    The body concatenates the loop variable (not the initial labels): in a prioritized loop,
    collections from outside enter at the first priority, while the variable's records enter
    at their own priority."""

    def local_min(x: Collection) -> Collection:
        sent = x.join(e, left_on="node", right_on="src").select(node=col("dst"), label=col("label"))
        return sent.concat(x).group_by("node").agg(label=dd_min("label"))

    if priority is None:
        return labels.iterate(local_min, name=name)
    return labels.prioritized_iterate(local_min, priority=priority, name=name)


def _require_int(c: Collection, column: str, what: str) -> None:
    if c.schema[column].kind != "int":
        raise SchemaError(
            f"{what} needs integer node ids; column {column!r} is {c.schema[column]}",
            site=call_site(),
        )


# ---------------------------------------------------------------------- components


def connected_components(
    edges: Collection, src: str = "src", dst: str = "dst", *, prioritized: bool = False
) -> Collection:
    """Undirected connected components: ``(node, label)`` with ``label`` the smallest node id
    of the node's component.

    Min-label propagation over the symmetric closure of the edges (naiad-tech-report Figure 3).
    ``prioritized=True`` runs it in a ``prioritized_iterate`` with priority
    ``floor(log2(label + 1))`` (Figure 10; node ids must then be integers, negative ids
    share the first priority). Both give the same result; they differ in the work done.

    Which to choose (``benchmarks run priorities``, 200k edges): on a sparse graph whose
    components are long chains (a uniform graph of average degree 2, a road network), the
    prioritized loop is about 5× faster per edge changed and 2× faster to the first result,
    because small labels settle first and larger ones stop where a smaller one is; on a
    graph with short paths (a power-law graph of 16 edges a node) the plain loop, the
    default, is about 2× faster per edge and 4× per batch of 100, since every priority costs
    rounds of its own.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"a": "int64", "b": "int64"})
    >>> cc = dd.graph.connected_components(edges, "a", "b", prioritized=True).output()
    >>> edges.insert([(3, 2), (5, 4), (4, 6)]); flow.advance_to(1); flow.run()
    >>> cc.snapshot().to_dict("list")
    {'node': [2, 3, 4, 5, 6], 'label': [2, 2, 4, 4, 4], 'count': [1, 1, 1, 1, 1]}
    >>> edges.insert([(2, 6)]); flow.advance_to(2); flow.run()
    >>> cc.snapshot()["label"].tolist()
    [2, 2, 2, 2, 2]
    """
    e = _edges(edges, src, dst, "connected_components")
    # both directions of each edge; an edge present both ways (or a self-loop) appears twice,
    # which only doubles the multiplicity of the labels it sends: the minimum is the same, and
    # no distinct (two more arrangements of every edge) is needed
    symmetric = e.concat(e.select(src=col("dst"), dst=col("src")))
    labels = _node_set(e).with_columns(label=col("node"))
    priority = None
    if prioritized:
        _require_int(e, "src", "connected_components(prioritized=True)")
        priority = _log2_bucket(col("label"))
    return _min_label_propagation(labels, symmetric, priority, name="component labels")


def reachability_labels(
    edges: Collection, src: str = "src", dst: str = "dst", *, prioritized: bool = False
) -> Collection:
    """Directed reachability labels: ``(node, label)`` with ``label`` the smallest node id from
    which the node can be reached (the node itself included).

    ``prioritized=True`` runs it in a ``prioritized_iterate`` with priority
    ``floor(log2(label + 1))``, as :func:`connected_components` does. The plain loop, the
    default, was as fast or faster on both graphs measured (``benchmarks run priorities``:
    1.2× on a sparse graph's single-edge changes, 2.3× on a power-law graph's).

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    >>> labels = dd.graph.reachability_labels(edges).output()
    >>> edges.insert([(2, 3), (3, 1), (4, 3)]); flow.advance_to(1); flow.run()
    >>> labels.snapshot().to_dict("list")
    {'node': [1, 2, 3, 4], 'label': [1, 2, 2, 4], 'count': [1, 1, 1, 1]}
    """
    e = _edges(edges, src, dst, "reachability_labels")
    priority = None
    if prioritized:
        _require_int(e, "src", "reachability_labels(prioritized=True)")
        priority = _log2_bucket(col("label"))
    return _min_label_propagation(
        _node_set(e).with_columns(label=col("node")), e, priority, name="reachability labels"
    )


def _trim_and_reverse(e: Collection, name: str) -> Collection:
    """The edges of ``e`` whose endpoints have equal reachability labels on ``e``, reversed
    (the papers' ``TrimAndReverse``; its label propagation is a loop inside the caller's)."""
    labels = _min_label_propagation(_node_set(e).with_columns(label=col("node")), e, name=name)
    src_labels = labels.select(src=col("node"), src_label=col("label"))
    dst_labels = labels.select(dst=col("node"), dst_label=col("label"))
    labelled = e.join(src_labels, on="src").join(dst_labels, on="dst")
    kept = labelled.filter(col("src_label") == col("dst_label"))
    return kept.select(src=col("dst"), dst=col("src"))


def strongly_connected_components(
    edges: Collection, src: str = "src", dst: str = "dst"
) -> Collection:
    """Strongly connected components: ``(node, component)`` with ``component`` the smallest
    node id of the node's SCC, for every endpoint of an edge (a node on no cycle is its own
    component).

    A doubly nested loop (naiad-tech-report Figure 8): the outer ``iterate`` trims the edge
    set with ``TrimAndReverse`` twice per round until no edge changes; each trim runs a
    reachability-label ``iterate`` inside it.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    >>> scc = dd.graph.strongly_connected_components(edges).output()
    >>> edges.insert([(1, 2), (2, 1), (2, 3), (3, 4), (4, 3)]); flow.advance_to(1); flow.run()
    >>> scc.snapshot().to_dict("list")
    {'node': [1, 2, 3, 4], 'component': [1, 1, 3, 3], 'count': [1, 1, 1, 1]}
    >>> edges.insert([(4, 1)]); flow.advance_to(2); flow.run()
    >>> scc.snapshot()["component"].tolist()
    [1, 1, 1, 1]
    """
    # (a set of edges: starting the loop from the edges as given, its first round would take
    # a doubled edge's second copy off, and was no faster: docs/performance.md)
    e = _edge_set(edges, src, dst, "strongly_connected_components")
    # the body ends in a reduce (distinct): it emits only real changes of the edge set, so the
    # loop sees no differences (and stops) once the set stops changing
    intra = e.iterate(
        lambda y: _trim_and_reverse(
            _trim_and_reverse(y, "scc forward labels"), "scc backward labels"
        ).distinct(),
        name="scc trims",
    )
    on_cycle = _min_label_propagation(
        _node_set(intra).with_columns(label=col("node")), intra, name="scc component labels"
    )
    nodes = _node_set(e)
    alone = nodes.antijoin(on_cycle, on="node").with_columns(label=col("node"))
    return on_cycle.concat(alone).select(node=col("node"), component=col("label"))


# ---------------------------------------------------------------------- distances


def _relax(distances: Collection, e: Collection, step: Expr) -> Collection:
    """One Bellman-Ford round (naiad-tech-report Figure 19's ``Broadcast``): every node's
    distance offered to its out-neighbours (``step`` is the length added by an edge), then the
    least offer per node, the node's own distance included."""
    offered = distances.join(e, left_on="node", right_on="src")
    sent = offered.select(
        node=col("dst"), distance=(col("distance") + step).cast(distances.schema["distance"])
    )
    return sent.concat(distances).group_by("node").agg(distance=dd_min("distance"))


def bfs(edges: Collection, roots: Collection, src: str = "src", dst: str = "dst") -> Collection:
    """Breadth-first distances along directed edges: ``(node, distance)`` with ``distance``
    the least number of edges on a path from any root (column ``node`` of ``roots``), for every
    node reachable from a root (the roots at 0). For an undirected graph, pass both directions.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    >>> roots = flow.input("roots", schema={"node": "int64"})
    >>> dist = dd.graph.bfs(edges, roots).output()
    >>> edges.insert([(1, 2), (2, 3), (3, 4), (9, 4)]); roots.insert([1])
    >>> flow.advance_to(1); flow.run()
    >>> dist.snapshot().to_dict("list")
    {'node': [1, 2, 3, 4], 'distance': [0, 1, 2, 3], 'count': [1, 1, 1, 1]}
    >>> roots.insert([3]); flow.advance_to(2); flow.run()
    >>> dist.snapshot()["distance"].tolist()
    [0, 1, 0, 1]
    """
    e = _edges(edges, src, dst, "bfs")
    start = roots.select(node=col("node")).distinct().with_columns(distance=lit(0, "int64"))
    return start.iterate(lambda x: _relax(x, e, lit(1, "int64")))


def shortest_paths(
    edges: Collection,
    sources: Collection,
    src: str = "src",
    dst: str = "dst",
    weight: str = "weight",
    *,
    prioritized: bool = False,
) -> Collection:
    """Single- or multi-source shortest paths (Bellman-Ford, naiad-tech-report Figure 19):
    ``(node, distance)`` for every node reachable from a source, ``distance`` the least
    ``offset(s) + path weight`` over sources ``s``.

    ``sources`` has a column ``node`` and optionally ``distance`` (the source's offset, 0 if
    absent; several offsets of one source count as the least). Weights are the edge column
    ``weight`` (integers give int64 distances, floats float64); parallel edges count with
    their least weight. No negative cycle may be reachable (the loop would not converge).

    ``prioritized=True`` runs the loop as a ``prioritized_iterate`` whose records enter in
    order of ``floor(log2(offset + 1))`` (offsets must then be integers): sources far away are
    introduced only once the distances below theirs have settled, so they propagate only
    where they improve, as in Δ-stepping's buckets. Only the records entering the loop are
    prioritized (the loop's own records keep the priority they entered with), so with all
    offsets 0 it is the plain loop.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "weight": "int64"})
    >>> sources = flow.input("sources", schema={"node": "int64"})
    >>> dist = dd.graph.shortest_paths(edges, sources).output()
    >>> edges.insert([(1, 2, 5), (1, 3, 1), (3, 2, 1), (2, 4, 1)]); sources.insert([1])
    >>> flow.advance_to(1); flow.run()
    >>> dist.snapshot().to_dict("list")
    {'node': [1, 2, 3, 4], 'distance': [0, 2, 1, 3], 'count': [1, 1, 1, 1]}
    >>> edges.remove([(3, 2, 1)]); flow.advance_to(2); flow.run()
    >>> dist.snapshot()["distance"].tolist()
    [0, 5, 1, 6]
    """
    site = call_site()
    wtype = edges.schema[weight]
    if not wtype.is_numeric:
        raise SchemaError(
            f"shortest_paths: weight column {weight!r} is {wtype}, not numeric", site=site
        )
    dtype = "int64" if wtype.kind == "int" else "float64"
    # parallel edges are not reduced to their least weight first: the loop's least offer per
    # node is the same (see _edges), without a reduce over every edge at each change
    e = _checked(
        edges.select(src=col(src), dst=col(dst), weight=col(weight).cast(dtype)),
        edges,
        "shortest_paths",
        as_set=False,
    )
    if "distance" in sources.schema:
        start = sources.select(node=col("node"), distance=col("distance").cast(dtype))
    else:
        start = sources.select(node=col("node")).with_columns(distance=lit(0, dtype))
    start = start.group_by("node").agg(distance=dd_min("distance"))

    def body(x: Collection) -> Collection:
        return _relax(x, e, col("weight"))

    if not prioritized:
        return start.iterate(body)
    if dtype != "int64":
        raise SchemaError(
            "shortest_paths(prioritized=True) needs integer weights and offsets", site=site
        )
    return start.prioritized_iterate(body, priority=_log2_bucket(col("distance")))


# ---------------------------------------------------------------------- pagerank


def pagerank(
    edges: Collection,
    iterations: int = 20,
    damping: float = 0.85,
    src: str = "src",
    dst: str = "dst",
    *,
    scale: int = 2**30,
    damping_denominator: int = 10**6,
) -> Collection:
    """PageRank by ``iterations`` rounds of power iteration, in exact integer arithmetic:
    ``(node, rank)`` for every endpoint of an edge, ``rank = mass / scale`` (a float64).

    The damping factor is the fraction ``d / D`` with ``D = damping_denominator`` and
    ``d = round(damping * D)``; with ``n`` nodes, every node starts with ``scale // n`` units
    of mass and each round computes::

        share(u)  = (mass(u) * d // D) // outdeg(u)          sent along each edge u -> v
        mass'(v)  = (scale * (D - d) // D) // n  +  sum of share(u) over edges u -> v

    Integer floor division makes every round exact and independent of evaluation order, so
    the result is deterministic, incrementally maintained exactly, and equal to the same
    arithmetic done in plain Python. It approximates ``networkx.pagerank`` (ranks summing to
    1) up to rounding (at most a few units of mass per node per round) and two differences:
    the mass of a node with no out-edge is dropped, not spread over all nodes as networkx
    does, so ranks sum to less than 1 when there are dangling nodes; and the result is the
    iterate after exactly ``iterations`` rounds, not after a convergence test. Parallel edges
    count once. ``mass * d`` must fit in int64: ``scale * D < 2**63``. ``scale`` must be a
    power of two, so that ``mass / scale`` is exact in float64 (a division by another constant
    is not exact, and Polars rounds it differently in batches of different sizes, which would
    keep a retracted rank from cancelling the inserted one).

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    >>> pr = dd.graph.pagerank(edges, iterations=30).output()
    >>> edges.insert([(1, 2), (2, 1), (2, 3), (3, 1)]); flow.advance_to(1); flow.run()
    >>> [round(r, 4) for r in pr.snapshot()["rank"]]
    [0.3974, 0.3878, 0.2148]
    """
    site = call_site()
    if iterations < 1:
        raise GraphError(f"pagerank: iterations must be at least 1, got {iterations}", site=site)
    d = round(damping * damping_denominator)
    big = damping_denominator
    if not 0 <= d <= big or scale * big >= 2**63 or scale < 1 or scale & (scale - 1):
        raise GraphError(
            "pagerank: damping must be in [0, 1], scale a power of two, and "
            "scale * damping_denominator < 2**63",
            site=site,
        )
    e = _edge_set(edges, src, dst, "pagerank")
    nodes = _node_set(e).with_columns(one=lit(0, "int64"))
    count = nodes.group_by("one").agg(n=dd_count())
    sized = nodes.join(count, on="one")
    start = sized.select(node=col("node"), mass=lit(scale, "int64") // col("n"))
    teleport = sized.select(
        node=col("node"), mass=lit(scale * (big - d) // big, "int64") // col("n")
    )
    outdeg = e.group_by("src").agg(deg=dd_count())

    def power_step(x: Collection) -> Collection:
        shares = x.join(outdeg, left_on="node", right_on="src").select(
            src=col("node"), share=(col("mass") * d // big) // col("deg")
        )
        sent = shares.join(e, on="src").select(node=col("dst"), mass=col("share"))
        return sent.concat(teleport).group_by("node").agg(mass=dd_sum("mass"))

    masses = start.iterate(power_step, max_iterations=iterations)
    return masses.select(node=col("node"), rank=col("mass").cast("float64") / scale)
