"""Progress tracking: pointstamps, path summaries and frontiers (naiad-timely-dataflow §2.3).

Every port of every operator is a *location*: an operator's inputs are *targets*, its outputs
are *sources*. A *pointstamp* ``(location, time)`` is something that may still produce data:
a message queued at a target (counted when sent, uncounted when consumed), or a capability held by
an operator at one of its sources. The tracker keeps an *occurrence count* for every pointstamp.

A *path summary* says how a time changes along a path: edges leave times alone; an operator
summarises each input-output pair (identity for most, ``+1`` in the loop coordinate for a loop's
feedback, append a coordinate for a loop's ingress, drop it at its egress). Summaries compose
along paths and are partially ordered; between two locations the tracker keeps the antichain of
minimal summaries (the *could-result-in* relation).

The invariant the tracker maintains, for every target ``T``::

    frontier(T) = minimal { s(t) : count(L, t) > 0, s in summaries(L -> T) }

so a time is complete at ``T`` exactly when no pointstamp could still result in it. Changes of
counts are pushed through the precomputed summaries into one :class:`MutableAntichain` per target,
so the cost of an update is proportional to the targets it reaches, not to the graph. A target
whose frontier is read only now and then (a join's) can instead have it computed when read,
from the counts held at each location and the summaries into it (``on_demand``).

A worked example: an input (node 0) feeding a loop whose body is node 2, with ingress (node 1),
feedback (node 3, ``+1`` in the loop coordinate) and egress (node 4).

>>> from ddflow.timely.lattice import EPOCHS
>>> inner = EPOCHS.extend("product")
>>> g = ProgressGraph()
>>> inp = g.add_node([], [EPOCHS])
>>> ingress = g.add_node([EPOCHS], [inner], {(0, 0): Summary.enter(EPOCHS, "product")})
>>> body = g.add_node([inner, inner], [inner])
>>> feedback = g.add_node([inner], [inner], {(0, 0): Summary.increment(inner, 1)})
>>> egress = g.add_node([inner], [EPOCHS], {(0, 0): Summary.leave(inner)})
>>> g.add_edge((inp, 0), (ingress, 0)); g.add_edge((ingress, 0), (body, 0))
>>> g.add_edge((body, 0), (feedback, 0)); g.add_edge((feedback, 0), (body, 1))
>>> g.add_edge((body, 0), (egress, 0))
>>> tracker = Tracker(g)
>>> tracker.update_source(inp, 0, (0,), +1)      # the input holds a capability at epoch 0
>>> _ = tracker.propagate()
>>> tracker.frontier(body, 0), tracker.frontier(body, 1), tracker.frontier(egress, 0)
([(0, 0)], [(0, 1)], [(0, 0)])

A message the body sends to itself at iteration 3 holds back only that iteration onwards:

>>> tracker.update_source(inp, 0, (0,), -1); tracker.update_source(inp, 0, (1,), +1)
>>> tracker.update_target(feedback, 0, (0, 3), +1)
>>> _ = tracker.propagate()
>>> tracker.frontier(body, 1), tracker.frontier(egress, 0)
([(0, 4), (1, 1)], [(0, 4), (1, 0)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import add as _add
from typing import Any

from ddflow.timely.frontier import MutableAntichain, minimal_sorted
from ddflow.timely.lattice import Coordinate, Time, TimeType

__all__ = ["ProgressGraph", "Summary", "Tracker"]

Port = tuple[int, int]  # (node, port)


@dataclass(frozen=True)
class Summary:
    """A path summary: keep the first ``keep`` integers of a time, add ``adds`` to them, then
    append ``append``. The result is a time of ``out_type``.

    >>> from ddflow.timely.lattice import EPOCHS
    >>> inner = EPOCHS.extend("product")
    >>> s = Summary.enter(EPOCHS, "product").then(Summary.increment(inner, 2))
    >>> s.apply((5,)), s.then(Summary.leave(inner)).apply((5,))
    ((5, 2), (5,))
    """

    keep: int
    adds: tuple[int, ...]
    append: tuple[int, ...]
    out_type: TimeType

    @staticmethod
    def identity(tt: TimeType) -> Summary:
        return Summary(tt.width, (0,) * tt.width, (), tt)

    @staticmethod
    def enter(outer: TimeType, coordinate: Coordinate) -> Summary:
        """Ingress into a loop: append the least value of the new coordinate."""
        inner = outer.extend(coordinate)
        return Summary(outer.width, (0,) * outer.width, (0,) * (inner.width - outer.width), inner)

    @staticmethod
    def leave(inner: TimeType) -> Summary:
        """Egress from a loop: drop the loop's coordinate."""
        outer = TimeType(inner.coordinates[:-1])
        return Summary(outer.width, (0,) * outer.width, (), outer)

    @staticmethod
    def increment(tt: TimeType, amount: int = 1) -> Summary:
        """A loop's feedback: add ``amount`` to the last integer (the innermost iteration)."""
        adds = (0,) * (tt.width - 1) + (amount,)
        return Summary(tt.width, adds, (), tt)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_shifts", any(self.adds))

    def apply(self, t: Sequence[int]) -> Time:
        k = self.keep
        shifts = self._shifts  # type: ignore[attr-defined]
        head = tuple(map(_add, t[:k], self.adds)) if shifts else tuple(t[:k])
        return head + self.append if self.append else head

    def then(self, other: Summary) -> Summary:
        """This summary followed by ``other``."""
        k1, k2 = self.keep, other.keep
        if k2 <= k1:
            adds = tuple(self.adds[i] + other.adds[i] for i in range(k2))
            return Summary(k2, adds, other.append, other.out_type)
        adds = tuple(self.adds[i] + other.adds[i] for i in range(k1))
        middle = tuple(self.append[j] + other.adds[k1 + j] for j in range(k2 - k1))
        return Summary(k1, adds, middle + other.append, other.out_type)

    def less_equal(self, other: Summary) -> bool:
        """``self(t) <= other(t)`` for every time ``t``."""
        if self.keep != other.keep:
            return False
        return self.out_type.less_equal(self.adds + self.append, other.adds + other.append)


class ProgressGraph:
    """The shape of a dataflow graph as progress tracking sees it: nodes with typed ports,
    internal summaries from inputs to outputs, and edges from outputs to inputs."""

    def __init__(self) -> None:
        self.inputs: list[list[TimeType]] = []
        self.outputs: list[list[TimeType]] = []
        self.internal: list[dict[tuple[int, int], Summary]] = []
        self.edges: dict[Port, list[Port]] = {}

    def add_node(
        self,
        inputs: Sequence[TimeType],
        outputs: Sequence[TimeType],
        internal: dict[tuple[int, int], Summary] | None = None,
    ) -> int:
        """Add a node; ``internal`` maps ``(input, output)`` to a summary. By default every input
        reaches every output unchanged (inputs and outputs then share one time type)."""
        if internal is None:
            internal = {}
            for i, ti in enumerate(inputs):
                for j, tj in enumerate(outputs):
                    if ti != tj:
                        raise ValueError("a node whose ports differ in time type needs summaries")
                    internal[(i, j)] = Summary.identity(ti)
        self.inputs.append(list(inputs))
        self.outputs.append(list(outputs))
        self.internal.append(dict(internal))
        return len(self.inputs) - 1

    def add_edge(self, source: Port, target: Port) -> None:
        if self.outputs[source[0]][source[1]] != self.inputs[target[0]][target[1]]:
            raise ValueError(f"edge {source} -> {target} joins ports of different time types")
        self.edges.setdefault(source, []).append(target)

    def plain(self) -> tuple[list[Any], list[Any], list[Any], list[tuple[int, int, int, int]]]:
        """The graph as plain values, for a tracker of another implementation (the native
        core's): each node's input and output time types as their coordinates, its summaries
        as ``(input, output, keep, adds, append, out coordinates)``, and the edges as
        ``(node, port, node, port)``.

        >>> from ddflow.timely.lattice import EPOCHS
        >>> g = ProgressGraph()
        >>> a, b = g.add_node([], [EPOCHS]), g.add_node([EPOCHS], [])
        >>> g.add_edge((a, 0), (b, 0))
        >>> g.plain()
        ([[], [['product']]], [[['product']], []], [[], []], [(0, 0, 1, 0)])
        """
        inputs = [[list(tt.coordinates) for tt in types] for types in self.inputs]
        outputs = [[list(tt.coordinates) for tt in types] for types in self.outputs]
        internal = [
            [
                (i, j, s.keep, list(s.adds), list(s.append), list(s.out_type.coordinates))
                for (i, j), s in summaries.items()
            ]
            for summaries in self.internal
        ]
        edges = [(n, p, m, q) for (n, p), targets in self.edges.items() for m, q in targets]
        return inputs, outputs, internal, edges


class Tracker:
    """Occurrence counts of pointstamps and the frontier they imply at every watched target.

    ``watched``: the nodes whose input frontiers are read (by default, all). A node that never
    asks for its frontier (a stateless operator) costs nothing here: no pointstamp change is
    pushed to its inputs, and it is never reported as changed.

    ``on_demand``: watched nodes whose input frontiers are computed when asked, from the
    pointstamps held now and the summaries to the node, instead of being kept up to date (a
    join, which reads them only to let its arrangements compact): no change is pushed to their
    inputs, and they are never reported as changed. In a dataflow of many joins (strongly
    connected components) much of the pushing would be to them.

    ``merged``: watched nodes that read only the frontier of all their inputs together (a
    reduce arranging several inputs itself, a consolidation): their ports share one frontier,
    that of port 0, holding the times that may still arrive at any of them; a change reaching
    several of them is pushed once.
    """

    def __init__(
        self,
        graph: ProgressGraph,
        watched: set[int] | None = None,
        on_demand: set[int] | frozenset[int] = frozenset(),
        merged: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        self.graph = graph
        tracked = [
            (n, i)
            for n in range(len(graph.inputs))
            for i in range(len(graph.inputs[n]))
            if watched is None or n in watched
        ]
        # (a merged node's ports share its port 0's frontier: the times that may still
        # arrive at any of them)
        self._targets: list[Port] = [
            p for p in tracked if p[0] not in on_demand and (p[1] == 0 or p[0] not in merged)
        ]
        self._target_index = {p: k for k, p in enumerate(self._targets)}
        for n, i in tracked:
            if i and n in merged and n not in on_demand:
                self._target_index[(n, i)] = self._target_index[(n, 0)]
        self._implied = [MutableAntichain(graph.inputs[n][i]) for n, i in self._targets]
        #: every location (a source or a target port): the targets it reaches (kept up to
        #: date from it), by their minimal summaries from it (a summary is applied once for
        #: all the targets it leads to: in nested loops a location reaches thirty targets by
        #: a few distinct summaries), and its pointstamps' counts when an on-demand frontier
        #: reads them
        self._reaches: list[list[tuple[Summary, list[int]]]] = []
        self._location: dict[tuple[str, int, int], int] = {}
        #: an on-demand target -> the locations that reach it -> their minimal summaries
        self._into: dict[Port, dict[int, list[Summary]]] = {
            p: {} for p in tracked if p[0] in on_demand
        }
        for kind, ports in (("s", graph.outputs), ("t", graph.inputs)):
            for n, types in enumerate(ports):
                for p, tt in enumerate(types):
                    loc = len(self._reaches)
                    self._location[(kind, n, p)] = loc
                    summaries = self._reach((kind, n, p), tt)
                    by_summary: dict[Summary, list[int]] = {}
                    for q, ss in summaries.items():
                        if q in self._target_index:
                            for one in ss:
                                ks = by_summary.setdefault(one, [])
                                if self._target_index[q] not in ks:  # (a merged node's)
                                    ks.append(self._target_index[q])
                    self._reaches.append(list(by_summary.items()))
                    for q, s in summaries.items():
                        if q in self._into:
                            self._into[q][loc] = s
        self._counts: list[dict[Time, int]] | None = (
            [{} for _ in self._reaches] if self._into else None
        )
        #: the locations whose counts an on-demand frontier reads (the others' are not kept)
        self._read = [False] * len(self._reaches)
        for into in self._into.values():
            for loc in into:
                self._read[loc] = True
        #: the locations holding counts now (a frontier read looks at these, not at every
        #: location reaching the target: in a dataflow of nested loops, a join is reached from
        #: many locations and few of them hold pointstamps)
        self._held: set[int] = set()
        #: count changes not propagated yet: (location, time, delta)
        self._pending: list[tuple[int, Time, int]] = []
        #: how many of them the counts hold already (:meth:`count_pending`)
        self._counted = 0
        #: the times a pointstamp reaches at each target, by (its location, its time): a
        #: step's changes are mostly at the few times in flight, again and again
        self._reached: dict[tuple[int, Time], list[tuple[int, Time]]] = {}

    # ----------------------------------------------------------------- reachability

    def _reach(self, start: tuple[str, int, int], tt: TimeType) -> dict[Port, list[Summary]]:
        """Minimal summaries from ``start`` to every target it can reach (Bellman-Ford over
        antichains of summaries; cycles terminate because each passes through an increment)."""
        g = self.graph
        best: dict[tuple[str, int, int], list[Summary]] = {start: [Summary.identity(tt)]}
        work = [(start, Summary.identity(tt))]
        steps = 0
        while work:
            steps += 1
            if steps > 1_000_000:  # pragma: no cover - defended by _check_cycles
                raise RuntimeError("progress graph has a cycle without an increment")
            loc, s = work.pop()
            kind, n, p = loc
            nxt: list[tuple[tuple[str, int, int], Summary]] = []
            if kind == "t":
                for (i, j), inner in g.internal[n].items():
                    if i == p:
                        nxt.append((("s", n, j), s.then(inner)))
            else:
                for m, q in g.edges.get((n, p), []):
                    nxt.append((("t", m, q), s))
            for loc2, s2 in nxt:
                if loc2 == start and s2.less_equal(Summary.identity(tt)):
                    raise ValueError(
                        f"the dataflow has a cycle through node {n} that does not advance "
                        "time: every cycle must pass through a loop's feedback"
                    )
                current = best.setdefault(loc2, [])
                if any(c.less_equal(s2) for c in current):
                    continue
                current[:] = [c for c in current if not s2.less_equal(c)]
                current.append(s2)
                work.append((loc2, s2))
        return {(n, p): summaries for (kind, n, p), summaries in best.items() if kind == "t"}

    # ----------------------------------------------------------------- updates

    def update_source(self, node: int, port: int, time: Sequence[int], delta: int) -> None:
        """A capability at an operator output changed count (not visible until propagate)."""
        if delta:
            self._pending.append((self._location[("s", node, port)], tuple(time), delta))

    def update_target(self, node: int, port: int, time: Sequence[int], delta: int) -> None:
        """A message at an operator input changed count (not visible until propagate)."""
        if delta:
            self._pending.append((self._location[("t", node, port)], tuple(time), delta))

    #: at most this many entries are kept in ``_reached`` (then it starts again)
    REACHED_CACHE = 4096

    def count_pending(self) -> None:
        """Bring the counts that on-demand frontiers read up to date with the pending
        changes, without pushing the changes to any target: enough before a node whose
        frontiers are all on demand runs. The changes stay pending, and may still cancel
        with later ones before they are pushed (a message sent to a join and taken by it)."""
        counts, read, held = self._counts, self._read, self._held
        if counts is None:
            return
        for loc, t, d in self._pending[self._counted :]:
            if not read[loc]:
                continue
            at = counts[loc]
            if not at:
                held.add(loc)
            c = at.get(t, 0) + d
            if c:
                at[t] = c
            else:
                del at[t]
                if not at:
                    held.discard(loc)
        self._counted = len(self._pending)

    def propagate(self) -> set[int]:
        """Apply pending count changes; return the nodes whose input frontiers changed."""
        changed: set[int] = set()
        if not self._pending:
            return changed
        self.count_pending()
        pending, self._pending, self._counted = self._pending, [], 0
        # consolidate per (location, time) so that +1/-1 pairs cost nothing downstream
        acc: dict[tuple[int, Time], int] = {}
        for loc, t, d in pending:
            key = (loc, t)
            acc[key] = acc.get(key, 0) + d
        per_target: dict[int, list[tuple[Time, int]]] = {}
        cache = self._reached
        if len(cache) > self.REACHED_CACHE:
            cache.clear()
        for key, d in acc.items():
            if not d:
                continue
            reached = cache.get(key)
            if reached is None:
                t = key[1]
                reached = cache[key] = [
                    (k, t2) for s, ks in self._reaches[key[0]] for t2 in (s.apply(t),) for k in ks
                ]
            for k, t2 in reached:
                lst = per_target.get(k)
                if lst is None:
                    per_target[k] = [(t2, d)]
                else:
                    lst.append((t2, d))
        for k, changes in per_target.items():
            if self._implied[k].apply_changes(changes):
                changed.add(self._targets[k][0])
        return changed

    def pending_changes(self) -> int:
        """How many count changes are not propagated yet."""
        return len(self._pending)

    def uncounted_changes(self) -> int:
        """How many of them the counts on-demand frontiers read do not hold yet."""
        return len(self._pending) - self._counted if self._counts is not None else 0

    def frontier(self, node: int, port: int) -> list[Time]:
        """The frontier at an operator input: the minimal times that may still arrive there."""
        index = self._target_index.get((node, port))
        if index is None:
            into = self._into.get((node, port))
            if into is not None:
                return self._frontier_now(self.graph.inputs[node][port], into)
            raise RuntimeError(
                f"the frontier of node {node} is not tracked: the node was "
                "declared not to watch its frontier"
            )
        return self._implied[index].frontier()

    def _frontier_now(self, tt: TimeType, into: dict[int, list[Summary]]) -> list[Time]:
        """An on-demand frontier: the minimal times the pointstamps held at the locations
        ``into`` (location -> summaries) imply through their summaries (as
        :class:`MutableAntichain` orders them). (A pointstamp's times are not cached as
        :meth:`propagate` caches them: a step's reads seldom find the same ones again.)"""
        counts = self._counts
        assert counts is not None
        times: set[Time] = set()
        for loc in self._held:
            summaries = into.get(loc)
            if summaries is not None:
                for t, c in counts[loc].items():
                    if c > 0:
                        times.update(s.apply(t) for s in summaries)
        return minimal_sorted(tt, sorted(times)) if len(times) > 1 else list(times)

    def implied(self, node: int, port: int) -> MutableAntichain:
        index = self._target_index.get((node, port))
        if index is None:
            raise RuntimeError(f"the frontier of node {node} is not tracked")
        return self._implied[index]

    def all_complete(self) -> bool:
        """No pointstamp is left anywhere."""
        return all(m.is_empty() for m in self._implied) and not any(
            self.frontier(n, p) for n, p in self._into
        )
