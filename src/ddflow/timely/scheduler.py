"""The scheduler: the only thing that drives execution.

A :class:`Worker` owns the operators of one dataflow, the message queues on their edges and the
progress :class:`~ddflow.timely.progress.Tracker`. It repeatedly activates the operator with pending
work that comes first in the plan's topological order, then takes that operator's consumed
messages off the books and propagates the pointstamp changes, activating every operator whose
input frontier moved. (``run()`` propagates only before an operator that reads frontiers, or
when none is active: the changes of steps of operators that do not, a select or an arrange,
then cancel before they are pushed anywhere. Before a join, whose frontiers are computed on
demand from the pointstamps' counts, the changes are only counted, not pushed.) Invariants:

* a message is counted at its target from the moment it is sent until the operator that pulled it
  returns from ``schedule`` (so an operator may send at the times of messages it is handling),
  or until it *settles* (:meth:`Operator.settle`, after holding capabilities for the times at
  which it will send);
* ``run()`` returns only when no operator has queued messages or pending activations, at which
  point every frontier reflects exactly the capabilities still held (by inputs, and by operators
  with work for times not yet complete).
"""

from __future__ import annotations

import heapq
import time as _time
from collections.abc import Callable, Sequence
from typing import Any

from ddflow.timely.lattice import Time
from ddflow.timely.operator import Operator
from ddflow.timely.progress import ProgressGraph, Tracker

__all__ = ["Stepping", "Worker", "propagate_before"]


def propagate_before(tracker: Any, after: Operator | None, activate: Callable[[int], None]) -> None:
    """Bring the frontiers up to date before ``after`` runs (None: before going idle), as far
    as it needs them (see :meth:`Worker._step`): pushed to every target before an operator that
    reads frontiers kept up to date, or when none is to run; only counted before one whose
    frontiers are all computed on demand (a join); left pending before one that reads none.
    Operators whose frontiers moved are activated."""
    if after is None or (after.watches_frontier and not after.frontier_on_demand):
        for n in tracker.propagate():
            activate(n)
    elif after.watches_frontier:  # (on demand: its frontiers read only the counts)
        tracker.count_pending()


class Stepping:
    """``step``, ``run`` and ``idle`` of a scheduler (:class:`Worker`, and the
    :class:`~ddflow.timely.cluster.Cluster` of several workers), from its ``_step``."""

    tracker: Any
    _active: list[int]
    #: what the builder says of the dataflow besides its operators (``explain()``)
    notes: Sequence[str] = ()

    def start(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _step(self, defer: bool) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self) -> bool:
        """Run one operator; return whether there was one to run."""
        return self._step(defer=False)

    def run(self) -> None:
        """Run until no operator has work left (propagating as :meth:`_step` defers)."""
        if self.tracker is None:
            self.start()
        while self._step(defer=True):
            pass

    def idle(self) -> bool:
        return not self._active


class Worker(Stepping):
    """Runs the operators of one dataflow to quiescence."""

    def __init__(self, tracker: Callable[..., Any] = Tracker) -> None:
        #: makes the progress tracker when the worker starts, from the graph and the sets of
        #: watched, on-demand and merged nodes (:class:`~ddflow.timely.progress.Tracker`, or
        #: the runtime's: :meth:`~ddflow.differential.kernel.Kernels.progress_tracker`)
        self.make_tracker = tracker
        self.operators: list[Operator] = []
        self.graph = ProgressGraph()
        self.edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self.queues: list[list[list[tuple[Time, Any]]]] = []
        self._consumed: list[tuple[int, int, Time]] = []
        self._active: list[int] = []
        self._is_active: list[bool] = []
        self.tracker: Tracker | Any = None
        self.steps = 0
        self.step_seconds: dict[int, float] = {}
        #: (with ``profile``) the steps of each operator
        self.step_counts: dict[int, int] = {}
        self.profile = False
        self.on_step: Callable[[Operator], None] | None = None
        self.notes: list[str] = []

    # ------------------------------------------------------------------ building

    def add(self, op: Operator) -> int:
        if self.tracker is not None:
            raise RuntimeError("cannot add operators to a running worker")
        op.index = len(self.operators)
        op.worker = self
        self.operators.append(op)
        self.graph.add_node(op.input_types, op.output_types, op.summaries)
        self.queues.append([[] for _ in op.input_types])
        self._is_active.append(False)
        return op.index

    def connect(self, source: Operator, port: int, target: Operator, target_port: int) -> None:
        self.graph.add_edge((source.index, port), (target.index, target_port))
        self.edges.setdefault((source.index, port), []).append((target.index, target_port))

    def start(self) -> None:
        """Freeze the graph and start progress tracking."""
        watched = {op.index for op in self.operators if op.watches_frontier}
        on_demand = {op.index for op in self.operators if op.frontier_on_demand}
        merged = {op.index for op in self.operators if op.frontier_merged}
        self.tracker = self.make_tracker(self.graph, watched, on_demand, merged)
        for op in self.operators:
            op.on_start()
        for n in self.tracker.propagate():
            self.activate(n)
        for op in self.operators:
            self.activate(op.index)

    # ------------------------------------------------------------------ messages

    def send(self, source: int, port: int, time: Time, batch: Any) -> None:
        for target, tport in self.edges.get((source, port), ()):
            self.queues[target][tport].append((time, batch))
            self.tracker.update_target(target, tport, time, 1)
            self.activate(target)

    def deliver(self, target: int, port: int, time: Time, batch: Any) -> None:
        """Queue a message at an operator from outside the graph's edges (an input's
        splits, see :class:`~ddflow.differential.operators.io.InputOp`), counted from now on."""
        self.queues[target][port].append((time, batch))
        self.tracker.update_target(target, port, time, 1)
        self.activate(target)

    def pull(self, op: int, port: int) -> list[tuple[Time, Any]]:
        q = self.queues[op][port]
        if not q:
            return []
        self.queues[op][port] = []
        for t, _ in q:
            self._consumed.append((op, port, t))
        return q

    def settle(self, op: int, propagate: bool = False) -> None:
        """Take the messages pulled in this step off the books now, and propagate (with
        ``propagate``, also when none was pulled). Operators whose frontiers moved are
        activated, except ``op`` itself (running, it reads its frontiers after this)."""
        if not self._consumed and not propagate:
            return
        for o, p, t in self._consumed:
            self.tracker.update_target(o, p, t, -1)
        self._consumed.clear()
        for n in self.tracker.propagate():
            if n != op:
                self.activate(n)

    def activate(self, op: int) -> None:
        if not self._is_active[op]:
            self._is_active[op] = True
            heapq.heappush(self._active, op)

    # ------------------------------------------------------------------ running

    def _step(self, defer: bool) -> bool:
        """:meth:`step`; with ``defer``, the pointstamp changes of a step are propagated only
        before an operator that reads frontiers runs, or when no operator is active, not after
        every step: a message passing through operators that do not (a select, an arrange)
        is counted at each of their inputs and taken off again, and those changes then cancel
        before reaching any frontier, instead of being pushed to every input they reach, twice
        per operator. An operator that reads frontiers still runs with them up to date, and
        none misses an activation: the changes are all propagated before the worker is idle.
        Before an operator whose frontiers are all computed on demand (a join) the changes
        are only counted (:meth:`~ddflow.timely.progress.Tracker.count_pending`): a message sent to
        it and taken by it then cancels too."""
        if defer:
            after = self.operators[self._active[0]] if self._active else None
            propagate_before(self.tracker, after, self.activate)
        if not self._active:
            return False
        index = heapq.heappop(self._active)
        self._is_active[index] = False
        op = self.operators[index]
        if self.profile:
            t0 = _time.perf_counter()
            op.schedule()
            self.step_seconds[index] = self.step_seconds.get(index, 0.0) + _time.perf_counter() - t0
            self.step_counts[index] = self.step_counts.get(index, 0) + 1
        else:
            op.schedule()
        self.steps += 1
        if self._consumed:
            for o, p, t in self._consumed:
                self.tracker.update_target(o, p, t, -1)
            self._consumed.clear()
        if not defer:
            for n in self.tracker.propagate():
                self.activate(n)
        if self.on_step is not None:
            self.on_step(op)
        return True
