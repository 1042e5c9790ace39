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
from typing import Any, NamedTuple

from ddflow import cbp
from ddflow.api.collection import Collection
from ddflow.errors import CBPError
from ddflow.expr.nodes import col as _col

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


def _cc_translate(node: int, state: list[tuple[Any, ...]], flows: dict[str, Any], out: Any) -> None:
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
    col = _col
    return stage.state.filter(col("nbr").is_null() & col("coefficient").is_not_null()).select(
        "node", "coefficient"
    )


# ------------------------------------------------------------------------------------------
# incremental PageRank (cbp-socc2010 §3.1.2, Figures 8 and 9)

#: the key of the supernode's group, which stands for Omega = W - G while the ranks of G are
#: computed and coordinates the phases (a node id no link may use)
CONTROL = -(2**63)

#: per node: its out-links and in-links, its ``rank`` (null until the increment that brought
#: the node has finished) and ``memo``, the JSON of its part in the increment under way ("" in
#: between); the supernode's row has ``node = CONTROL`` and its bookkeeping in ``memo``
_PR_STATE = {
    "node": "int64",
    "out": "list[int64]",
    "inn": "list[int64]",
    "rank": "float64?",
    "memo": "str",
}


class _Cast(NamedTuple):
    """A record the supernode (or a dangling node) casts to G's nodes (multicast) or to every
    node (``ALL_STATE``). ``kind``: ``grow`` (a seed starts the search for G), ``final`` (G is
    found), ``iterate`` (compute step ``step``: ``value`` scales the ranks before at step 0;
    ``a`` and ``b`` are the supernode's terms), ``dangling`` (node ``src`` has no out-link and
    value ``value``: spread over every node) or ``converged`` (the ranks are final; ``value``
    scales Omega's ranks). ``nodes`` is the number of nodes of the graph."""

    kind: str
    src: int
    step: int = 0
    value: float = 0.0
    a: float = 0.0
    b: float = 0.0
    nodes: int = 0


_CAST = {
    "kind": "str",
    "src": "int64",
    "step": "int64",
    "value": "float64",
    "a": "float64",
    "b": "float64",
    "nodes": "int64",
}
#: a node's report to the supernode, by ``kind``: ``seed`` or ``seen`` (the links touched the
#: node, a seed or not: its ``rank`` before, whether it ``was_dangling`` before and is
#: ``dangling`` now), ``joined`` (it joined G: its ``rank``, dangling or not), ``active`` (it
#: passed weight on), ``x`` (its value ``x`` at a step of PageRank on G, the change ``delta``
#: from the step before, the part ``flow`` its links carry into Omega, and at step 0 ``c``:
#: the rank Omega's links carried into it before, the sum of rank / outdeg over its
#: in-neighbours in Omega), ``tick`` (the supernode keeps itself running)
_REPORT = {
    "kind": "str",
    "src": "int64",
    "rank": "float64?",
    "x": "float64?",
    "delta": "float64?",
    "flow": "float64?",
    "c": "float64?",
    "was_dangling": "bool",
    "dangling": "bool",
}
_INCREMENTS = {
    "increment": "int64",
    "read": "int64",
    "epoch": "int64",
    "nodes": "int64",
    "affected": "int64",
    "iterations": "int64",
    "mode": "str",
}
#: the loopback flows (the messages of the phases)
_LOOPBACKS = ("omega", "weight", "member", "supernode", "group", "everyone", "rank")
#: the multicast address of G's nodes
_G = "G"


def _to_supernode(record: tuple[Any, ...]) -> int:
    """RouteBy of the reports: the supernode's group."""
    return CONTROL


def _one_increment_at_a_time(
    framing_keys: dict[str, list[int]], state: Any
) -> tuple[list[str], list[str], Any]:
    """Runnable of :func:`incremental_pagerank`: while an increment of links is under way (a
    loopback flow has messages), read and remove the messages and leave the next links
    waiting; when no message is left, read the next increment of links. Each phase thus reads
    what the phase before wrote, and the supernode keeps a message in flight (a ``tick``)
    until the increment is finished."""
    busy = [n for n in _LOOPBACKS if framing_keys.get(n)]
    if busy:
        return busy, busy, state
    if framing_keys.get("edges"):
        return ["edges"], ["edges"], state
    return [], [], state


class _PageRankTranslator:
    """The translate function of :func:`incremental_pagerank` (Figure 9): each call is a
    node's step (:class:`_NodeStep`) or the supernode's (:class:`_SupernodeStep`), an event
    handler doing what the messages it got ask for."""

    def __init__(
        self, damping: float, threshold: float, tolerance: float, max_iterations: int, radius: int
    ) -> None:
        self.damping = damping
        self.threshold = threshold
        self.tolerance = tolerance
        self.max_iterations = max_iterations
        self.radius = radius

    def __call__(
        self, key: int, state: list[tuple[Any, ...]], flows: dict[str, Any], out: Any
    ) -> None:
        if key == CONTROL:
            if flows["edges"]:
                raise CBPError(
                    f"incremental_pagerank: the node id {CONTROL} is the supernode's; a link "
                    f"may not use it (links {list(flows['edges'])[:3]})"
                )
            _SupernodeStep(self, state, flows, out).run()
        else:
            _NodeStep(self, key, state, flows, out).run()


class _NodeStep:
    """A node's step in an epoch. Its ``memo`` during an increment: ``g`` (it is in G), ``w``
    (the weight it received), ``n`` (the number of nodes), ``gout`` (its out-links in G),
    ``c`` (the rank Omega's links carried into it, before), ``via`` (the flow of the casts:
    ``group`` or ``everyone``), ``x`` (its value at the last step)."""

    def __init__(
        self,
        pr: _PageRankTranslator,
        node: int,
        state: list[tuple[Any, ...]],
        flows: dict[str, Any],
        out: Any,
    ) -> None:
        self.pr, self.node, self.flows, self.out = pr, node, flows, out
        self.new = not state
        if state:
            _, outs, inns, self.rank, memo = state[0]
        else:
            outs, inns, self.rank, memo = [], [], None, ""
        self.outs: set[int] = set(outs)
        self.inns: set[int] = set(inns)
        self.memo: dict[str, Any] = json.loads(memo) if memo else {}
        self.casts = [("group", _Cast(*r[1:])) for r in flows["group"]]
        self.casts += [("everyone", _Cast(*r)) for r in flows["everyone"]]

    def run(self) -> None:
        if self.flows["edges"]:
            self.make_graph()
        elif any(c.kind == "converged" for _, c in self.casts):
            self.reset_rank_state()
        else:
            self.send_weight_to_neighbors()
            self.update_supernode()
            self.page_rank_on_g()
        memo = json.dumps(self.memo) if self.memo else ""
        self.out.state((self.node, sorted(self.outs), sorted(self.inns), self.rank, memo))

    def report(self, kind: str, **values: Any) -> None:
        row = dict.fromkeys(_REPORT)
        row.update(kind=kind, src=self.node, was_dangling=False, dangling=not self.outs)
        row.update(values)
        self.out.write("omega", row)

    def make_graph(self) -> None:
        """Phase 1, in the epoch the stage reads the links: add them. A node that is new, or
        whose out-links changed, is a seed of G."""
        before = len(self.outs)
        for src, dst in self.flows["edges"]:
            if src == self.node:
                self.outs.add(dst)
            if dst == self.node:
                self.inns.add(src)
        seed = self.new or len(self.outs) != before
        was_dangling = self.rank is not None and before == 0
        self.report("seed" if seed else "seen", rank=self.rank, was_dangling=was_dangling)

    def send_weight_to_neighbors(self) -> None:
        """Phase 2, searching G: a seed sends its rank as weight along its out-links (times
        damping / out-degree); a node whose weight adds up over the threshold joins G, and a
        node of G passes on the weight of a round that is over the threshold, up to ``radius``
        links from the seeds."""
        memo, pr = self.memo, self.pr
        for _, c in self.casts:
            if c.kind == "grow":
                memo.update(g=True, n=c.nodes)
                self.forward(self.rank if self.rank is not None else 1.0 / c.nodes, 1)
        weights = self.flows["weight"]
        if weights:
            got = sum(w for _, w, _ in weights)
            hop = weights[0][2]  # (the weights of a round have come as many links)
            memo["w"] = memo.get("w", 0.0) + got
            if not memo.get("g") and memo["w"] > pr.threshold:
                memo["g"] = True
                self.report("joined", rank=self.rank, was_dangling=not self.outs)
            if memo.get("g") and got > pr.threshold:
                self.forward(got, hop + 1)

    def forward(self, weight: float, hop: int) -> None:
        if self.outs and hop <= self.pr.radius:
            share = self.pr.damping * weight / len(self.outs)
            for nbr in sorted(self.outs):
                self.out.write("weight", (nbr, share, hop))
            self.report("active")

    def update_supernode(self) -> None:
        """Phase 3, once G is found: G's nodes tell their in-neighbours; a node of G learns
        which of its out-links stay in G, a node of Omega answers with the rank its link
        carries (rank / out-degree), which the node of G adds up."""
        memo = self.memo
        if any(c.kind == "final" for _, c in self.casts):
            for nbr in sorted(self.inns):
                self.out.write("member", (nbr, self.node))
        for _, member in self.flows["member"]:
            if memo.get("g"):
                memo["gout"] = sorted({*memo.get("gout", []), member})
            else:
                self.out.write("supernode", (member, self.rank / len(self.outs)))
        if self.flows["supernode"]:
            memo["c"] = memo.get("c", 0.0) + sum(f for _, f in self.flows["supernode"])

    def page_rank_on_g(self) -> None:
        """Phase 4, a step of PageRank on G and the supernode: the node's value is what G's
        links carried to it, plus Omega's part (``a * c``, ``b``) and the dangling nodes'
        share (both with the teleport); it sends its share along its links in G, or casts its
        value if it is dangling, and reports to the supernode."""
        memo, d = self.memo, self.pr.damping
        for via, c in self.casts:
            if c.kind != "iterate":
                continue
            if c.step == 0:
                if via == "everyone":  # G is the whole graph
                    memo.update(g=True, gout=sorted(self.outs), c=0.0)
                memo.update(n=c.nodes, via=via)
                # start from the rank before, scaled to make room for the new nodes
                x = self.rank * c.value if self.rank is not None else 1.0 / c.nodes
                delta = None
            else:
                carried = sum(share for _, share in self.flows["rank"])
                dangling = sum(o.value for w, o in self.casts if w == via and o.kind == "dangling")
                x = carried + c.a * memo.get("c", 0.0) + c.b + d * dangling / c.nodes
                delta = abs(x - memo["x"])
            memo["x"] = x
            gout = memo.get("gout", [])
            flow = 0.0
            if self.outs:
                share = d * x / len(self.outs)
                for nbr in gout:
                    self.out.write("rank", (nbr, share))
                flow = share * (len(self.outs) - len(gout))
            elif via == "group":
                self.out.write("group", (_G, *_Cast("dangling", self.node, c.step, x)))
            else:
                self.out.write("everyone", _Cast("dangling", self.node, c.step, x))
            c_total = memo.get("c", 0.0) if c.step == 0 else None
            self.report("x", x=x, delta=delta, flow=flow, c=c_total)

    def reset_rank_state(self) -> None:
        """Phase 5: G's nodes take their new rank, Omega's scale theirs; the memo is done."""
        scale = next(c.value for _, c in self.casts if c.kind == "converged")
        if self.memo.get("g"):
            self.rank = self.memo["x"]
        elif self.rank is not None:
            self.rank *= scale
        self.memo = {}


class _SupernodeStep:
    """The supernode's step in an epoch. Its ``memo`` keeps, between increments, ``nodes``
    (of the graph), ``mass`` (the ranks' sum), ``dangling`` (the dangling nodes' ranks' sum),
    ``count`` (increments done) and ``phase`` (``idle``); during an increment, ``phase``
    (``grow``, ``final``, ``iterate``, ``reset``), ``since`` (the epoch it began), ``read``,
    ``n`` (nodes with the new ones), ``mode`` (``global``: G is the whole graph, ``local``),
    ``members`` (G's nodes: their rank and whether they were dangling, before), ``omega``,
    ``omega_dangling``, ``omega_size`` (Omega's rank, dangling rank and nodes, before), ``c``
    (the rank Omega's links carry into G, before), ``step``, ``x`` and ``dx`` (Omega's value
    at the step and its change), ``iterations``, ``scale``."""

    def __init__(
        self, pr: _PageRankTranslator, state: list[tuple[Any, ...]], flows: dict[str, Any], out: Any
    ) -> None:
        self.pr, self.out, self.now = pr, out, out.epoch
        self.memo: dict[str, Any] = (
            json.loads(state[0][4])
            if state
            else {"nodes": 0, "mass": 0.0, "dangling": 0.0, "count": 0, "phase": "idle"}
        )
        self.reports = [dict(zip(_REPORT, r, strict=True)) for r in flows["omega"]]

    def run(self) -> None:
        memo = self.memo
        phase = memo["phase"]
        if phase == "idle":
            self.plan()
        elif phase == "grow":
            self.grow()
        elif phase == "final" and self.now == memo["since"] + 2:
            # G's nodes know their out-links in G and what Omega's links carry into them
            start = memo["nodes"] / memo["n"]  # (room for the new nodes)
            memo.update(phase="iterate", step=0, x=memo["omega"] * start, dx=None)
            self.cast(_Cast("iterate", CONTROL, 0, start))
        elif phase == "iterate":
            self.iterate()
        elif phase == "reset":
            self.reset()
        if memo["phase"] != "idle":
            self.out.write("omega", ("tick", CONTROL, *[None] * 5, False, False))
        self.out.state((CONTROL, [], [], None, json.dumps(memo)))

    def cast(self, record: _Cast) -> None:
        """Cast to G's nodes: a multicast to the address G, with which the supernode
        associates G's nodes; to every node (``ALL_STATE``) when G is the whole graph."""
        memo = self.memo
        record = record._replace(nodes=memo["n"])
        if memo["mode"] == "global":
            self.out.write("everyone", record)
        else:
            for m in memo["members"]:
                self.out.associate(int(m), _G)
            self.out.write("group", (_G, *record))

    def plan(self) -> None:
        """The epoch after the stage read links: how far may the change reach?"""
        memo, pr = self.memo, self.pr
        d, n_before = pr.damping, memo["nodes"]
        seeds = [r for r in self.reports if r["kind"] == "seed"]
        n = n_before + sum(1 for r in seeds if r["rank"] is None)
        memo.update(read=self.now - 1, n=n, members={}, mode="none", iterations=0)
        if not seeds:  # links known already: nothing changes
            self.finish(0)
            return
        # the change every node sees alike: the teleport share 1/n, and the rank of the seeds
        # that became, or stopped being, dangling (spread over every node)
        moved = sum(
            r["rank"] if r["rank"] is not None else 1.0 / n
            for r in seeds
            if r["was_dangling"] != r["dangling"]
        )
        uniform = d * moved / n
        if n_before:
            uniform += (1 - d) * (1.0 / n_before - 1.0 / n)
        memo["since"] = self.now
        if not n_before or uniform > pr.threshold:
            # every node's rank may change by more than the threshold: G is the whole graph
            # (for the first increment, PageRank from scratch)
            memo.update(mode="global", phase="iterate", step=0, omega_size=0)
            memo.update(omega=0.0, omega_dangling=0.0, x=0.0, dx=None)
            self.cast(_Cast("iterate", CONTROL, 0, n_before / n))
        else:
            memo.update(mode="local", phase="grow")
            memo["members"] = {str(r["src"]): [r["rank"], r["was_dangling"]] for r in seeds}
            self.cast(_Cast("grow", CONTROL))

    def grow(self) -> None:
        """Searching G: the nodes that joined; when no weight is in flight, G is found, and
        Omega is the rest of the graph, with its rank and dangling rank before."""
        memo = self.memo
        for r in self.reports:
            if r["kind"] == "joined":
                memo["members"][str(r["src"])] = [r["rank"], r["was_dangling"]]
        if self.now < memo["since"] + 2 or any(r["kind"] == "active" for r in self.reports):
            return
        before = memo["members"].values()
        memo["omega_size"] = memo["n"] - len(memo["members"])
        if memo["omega_size"]:
            memo["omega"] = memo["mass"] - sum(r for r, _ in before if r is not None)
            memo["omega_dangling"] = memo["dangling"] - sum(
                r for r, dangling in before if r is not None and dangling
            )
        else:
            memo["omega"] = memo["omega_dangling"] = 0.0
        memo.update(phase="final", since=self.now)
        self.cast(_Cast("final", CONTROL))

    def iterate(self) -> None:
        """A step of PageRank on G and the supernode. The chain: from Omega, a unit of rank
        goes to a node ``j`` of G with probability ``damping * c_j / omega`` (``c_j``: the
        rank Omega's links carried into ``j``, before), is spread over every node for the
        part ``omega_dangling / omega`` on dangling nodes, stays in Omega otherwise; plus the
        teleport. The supernode computes its value at the step G's nodes compute now from
        their reports on the step before, tests convergence (the L1 change of the step before
        under ``tolerance``, or ``max_iterations`` steps), and casts the next step's terms."""
        memo, pr = self.memo, self.pr
        d, n, step = pr.damping, memo["n"], memo["step"]
        omega, x_omega = memo["omega"], memo["x"]
        xs = [r for r in self.reports if r["kind"] == "x"]
        if step >= 1:  # the reports are of step - 1: Omega's value at ``step``
            if step == 1:
                memo["c"] = sum(r["c"] for r in xs)
            x_new = 0.0
            if memo["omega_size"]:
                into_g = memo["c"] / omega
                dangling = memo["omega_dangling"] / omega
                spread = d * (sum(r["x"] for r in xs if r["dangling"]) + x_omega * dangling)
                x_new = (
                    sum(r["flow"] for r in xs)
                    + d * x_omega * (1 - into_g - dangling)
                    + memo["omega_size"] * (spread + 1 - d) / n
                )
            change = sum(r["delta"] for r in xs if r["delta"] is not None) + (memo["dx"] or 0.0)
            memo.update(x=x_new, dx=abs(x_new - x_omega))
            x_omega = x_new
            if (step >= 2 and change < pr.tolerance) or step >= pr.max_iterations:
                scale = x_new / omega if memo["omega_size"] and omega > 0 else 1.0
                memo.update(phase="reset", iterations=step, scale=scale)
                self.out.write("everyone", _Cast("converged", CONTROL, step, scale, nodes=n))
                return
        a, b = 0.0, (1 - d) / n
        if memo["omega_size"] and omega > 0:
            a = d * x_omega / omega
            b += d * x_omega * memo["omega_dangling"] / omega / n
        memo["step"] = step + 1
        self.cast(_Cast("iterate", CONTROL, step + 1, 0.0, a, b))

    def reset(self) -> None:
        """The epoch the ranks change: G's final values (their reports) and Omega's scaled
        ranks are the graph's rank and dangling rank now."""
        memo = self.memo
        xs = [r for r in self.reports if r["kind"] == "x"]
        memo["mass"] = memo["scale"] * memo["omega"] + sum(r["x"] for r in xs)
        memo["dangling"] = memo["scale"] * memo["omega_dangling"] + sum(
            r["x"] for r in xs if r["dangling"]
        )
        memo["nodes"] = memo["n"]
        self.finish(len(xs))

    def finish(self, affected: int) -> None:
        """The increment is done: its row of ``increments``, and the supernode idle again."""
        memo = self.memo
        row = (memo["count"], memo["read"], self.now, memo["n"], affected)
        self.out.write("increments", (*row, memo["iterations"], memo["mode"]))
        keep = {"nodes": memo["nodes"], "mass": memo["mass"], "dangling": memo["dangling"]}
        memo.clear()
        memo.update(keep, count=row[0] + 1, phase="idle")


class PageRank(NamedTuple):
    """What :func:`incremental_pagerank` builds."""

    #: ``node``, ``rank``: the ranks of the last increment finished
    ranks: Collection
    #: a row per increment of links, inserted at the epoch its ranks appear: ``increment``
    #: (0, 1, ...: the increments in the order of their epochs), ``read`` (the epoch the
    #: stage read the links), ``epoch`` (the epoch from which the snapshot of ``ranks`` holds
    #: them), ``nodes`` (of the graph), ``affected`` (the size of G: the nodes whose rank was
    #: recomputed), ``iterations`` (steps of PageRank on G) and ``mode`` (``global``: G was the
    #: whole graph, ``local``, or ``none``: the links were known already)
    increments: Collection
    #: the stage (its ``state``, ``metrics``)
    stage: cbp.Stage
    #: the most epochs an increment takes, from its ``read`` to its ``epoch``
    max_epochs: int


def incremental_pagerank(
    edges: Collection,
    damping: float = 0.85,
    threshold: float = 1e-4,
    tolerance: float = 1e-5,
    max_iterations: int = 100,
    radius: int = 10,
    name: str = "pagerank",
) -> PageRank:
    """Approximate incremental PageRank over link insertions (Chien, Dwork, Kumar, Simon and
    Sivakumar, "Link evolution: analysis and algorithms", 2004), as the CBP stage of
    cbp-socc2010 Figures 8 and 9.

    ``edges`` has int64 columns ``src`` and ``dst``; each record inserts the link ``src ->
    dst`` of a directed graph ``W``. The ranks approximate ``networkx.pagerank(W,
    alpha=damping)`` of the ``networkx.DiGraph`` of the links: with ``n`` nodes, ``rank(v) =
    (1 - damping) / n + damping * (sum of rank(u) / outdeg(u) over the links u -> v + the
    rank of the dangling nodes / n)``, summing to 1, where a *dangling* node (no out-link)
    spreads its rank over every node (networkx's default). A link inserted again counts once;
    a self-loop is a link. Node ids are any int64 but :data:`CONTROL`.

    **Increments.** The stage takes the links of an epoch (an increment) one increment at a
    time, in epoch order, over several epochs (increments arriving meanwhile wait: the
    Runnable reads the next links only when no message of the last is left). The stage has
    a group per node (an *inner* grouping) and the supernode's group :data:`CONTROL`, which
    coordinates; each phase is one or more epochs of messages on loopback flows:

    1. *makeGraph* (epoch ``e``, the stage reads the links): each end adds the link to its
       out- or in-links. A node that is new, or whose out-links changed, is a *seed* of the
       affected subgraph G. The nodes tell the supernode.
    2. *plan* (``e + 1``): the supernode estimates the change that every node sees alike (the
       teleport share going from ``1/n`` to ``1/n'`` with the new nodes, and the rank of the
       seeds that became or stopped being dangling, spread over every node). If it is over
       ``threshold``, which it is for the first increment, G is the whole graph (``global``:
       PageRank from scratch, started from the ranks before); else the search for G starts
       (``local``).
    3. *sendWeightToNeighbors* (local; a round per epoch): the seeds send their rank as
       weight along their out-links, times ``damping / outdeg``; a node whose weight adds up
       over ``threshold`` joins G (its rank may change by that much), and a node of G passes
       on the weight of a round over the threshold, up to ``radius`` links from the seeds.
       G is found when no weight is in flight. Omega = W - G collapses into the supernode,
       with the rank and dangling rank its nodes had before.
    4. *updateSupernode* (local; 2 epochs): G's nodes tell their in-neighbours, so that each
       learns its out-links in G, and the in-neighbours in Omega answer with the rank their
       link carries (``rank / outdeg``): Omega's transition probabilities into G.
    5. *doPageRankOnG* (a step per epoch): power iteration on the chain G + {Omega}. A node
       of G sends ``damping * x / outdeg`` along its links in G; a dangling node casts its
       value: a multicast to G's nodes (``cbp.Multicast``, the supernode associating them
       with the address), or a broadcast to every node (``cbp.ALL_STATE``) when G is the
       whole graph; the supernode computes Omega's value from what flows into it and casts
       Omega's terms. It stops when a step changes the values by less than ``tolerance``
       (L1), or after ``max_iterations`` steps.
    6. *resetRankState* (1 epoch): the supernode broadcasts (``cbp.ALL_STATE``) that it
       converged: G's nodes take their new rank, Omega's nodes keep theirs scaled by Omega's
       new value over its value before (the ranks sum to 1), every node forgets the
       increment; the row of ``increments`` is written.

    **Epochs and lag.** With ``S`` steps of PageRank and ``R <= radius`` rounds of weight,
    the increment read at epoch ``e`` has its ranks at epoch ``e + 3 + S`` (global) or at
    most ``e + 7 + R + S`` (local); ``max_epochs = 7 + radius + max_iterations`` bounds both.
    An increment whose links were all known changes nothing and is done at ``e + 1``. The
    snapshot of ``ranks`` at a complete epoch is the ranks of the last increment finished by
    then: they change at the reset epochs only (the nodes an increment brings appear then).
    The stage runs at an epoch when the dataflow gets there: to wait for an increment, close
    the input, or advance it ``max_epochs`` epochs past the epoch the increment was read, and
    run; its row in ``increments`` gives the ``epoch`` whose snapshot holds its ranks.

    **Approximation.** When G is the whole graph the ranks are PageRank up to the power
    iteration's tolerance (an L1 error of about ``tolerance * damping / (1 - damping)``); in
    local mode the nodes outside G keep their rank, scaled, and each may be off by about the
    change its rank should have had, below the threshold (the weight is an estimate of it).
    On graphs of tens of nodes, the defaults keep every rank within about 1e-4 of networkx
    across increments.
    """
    if not 0 < damping < 1:
        raise ValueError(f"incremental_pagerank: damping is in (0, 1), got {damping!r}")
    if not (threshold > 0 and tolerance > 0 and max_iterations >= 2 and radius >= 1):
        raise ValueError(
            "incremental_pagerank: threshold and tolerance are positive, max_iterations at "
            f"least 2 and radius at least 1; got {threshold!r}, {tolerance!r}, "
            f"{max_iterations!r}, {radius!r}"
        )
    stage = cbp.stage(
        name,
        _PageRankTranslator(damping, threshold, tolerance, max_iterations, radius),
        key={"node": "int64"},
        inputs={"edges": cbp.Flow(edges.select("src", "dst"), route_by=_ends)},
        loopbacks={
            # reports to the supernode (Figure 8's F_Omega)
            "omega": cbp.Loopback(_REPORT, route_by=_to_supernode),
            # the search for G (F_W)
            "weight": cbp.Loopback({"node": "int64", "weight": "float64", "hop": "int64"}),
            # Omega's links into G (F_Q): G's node ``member`` to its in-neighbour ``node``,
            # and the in-neighbour's answer, the rank its link carries to ``node``
            "member": cbp.Loopback({"node": "int64", "member": "int64"}),
            "supernode": cbp.Loopback({"node": "int64", "flow": "float64"}),
            # PageRank on G (F_R): rank along the links in G
            "rank": cbp.Loopback({"node": "int64", "share": "float64"}),
            # the casts: to G's nodes, and to every node (with F_Cvg, ``converged``)
            "group": cbp.Loopback({"addr": "str", **_CAST}, route_by=cbp.Multicast("addr")),
            "everyone": cbp.Loopback(_CAST, route_by=cbp.ALL_STATE),
        },
        outputs={"increments": _INCREMENTS},
        state=_PR_STATE,
        grouping="inner",
        runnable=_one_increment_at_a_time,
    )
    col = _col
    ranks = stage.state.filter((col("node") != CONTROL) & col("rank").is_not_null())
    return PageRank(
        ranks.select("node", "rank"),
        stage["increments"],
        stage,
        7 + radius + max_iterations,
    )
