"""Several workers under one scheduler: data parallelism (naiad-timely-dataflow §2).

Every worker holds a copy of every operator (the same operator has the same index on each) and
the message queues of its own copies. An edge has a *route*: messages stay on the worker that
sent them (no route: a stateless operator runs where its input is), or go where the route
says, each part of a batch to the worker that owns its key (an exchange before a keyed
operator) or all of it to worker 0 (a gather before an output, a probe or a vertex that has
no key). An operator that exists on worker 0 alone (*pinned*: outputs, probes, vertices
without a key) is an inert placeholder on the others.

Progress is tracked on the *logical* graph, once for all workers: a pointstamp's count is the
sum over workers (a message sent to any worker is counted at its target when sent; a
capability held by any copy is counted at the operator's outputs), so a time is complete at an
operator only when no copy on any worker can still produce it. The :class:`Cluster` keeps the
one :class:`~ddflow.timely.progress.Tracker` and the scheduling order of
:class:`~ddflow.timely.scheduler.Worker`; a step runs one operator on every worker that has
work for it (messages queued there, or its frontier moved). A worker is a :class:`Shard`
here, in this process; :mod:`ddflow.runtime.workers` runs the same shards in processes of
their own.

>>> from ddflow.timely.lattice import EPOCHS
>>> cluster = Cluster(2)
>>> cluster.workers, [s.index for s in cluster.shards]
(2, [0, 1])
"""

from __future__ import annotations

import heapq
import time as _time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.operator import Operator
from ddflow.timely.progress import ProgressGraph, Summary, Tracker
from ddflow.timely.scheduler import Stepping, propagate_before

__all__ = [
    "Cluster",
    "Idle",
    "LoggedTracker",
    "ReplicaTracker",
    "Route",
    "Shard",
    "tracked_sets",
]

#: where the parts of a batch go: ``route(batch)`` gives ``(worker, part)`` pairs
Route = Callable[[Any], Iterable[tuple[int, Any]]]


class Idle(Operator):
    """The copy of a pinned operator on a worker other than 0: it has the operator's ports
    but no work (nothing is routed to it, and it holds no capability)."""

    name = "idle"
    watches_frontier = False
    pinned = True

    def __init__(
        self,
        inputs: Sequence[TimeType],
        outputs: Sequence[TimeType],
        summaries: dict[tuple[int, int], Summary] | None,
        name: str,
    ) -> None:
        super().__init__(inputs, outputs, summaries)
        self.name = name

    def schedule(self) -> None:
        for port in range(len(self.input_types)):
            if self.pull(port):  # (a route that sent here would lose data: never silently)
                raise RuntimeError(f"a message reached the placeholder of pinned {self.name}")


class _RecordingTracker(Tracker):
    """A tracker that also records each count change where it is sent from (``_change``)."""

    def update_source(self, node: int, port: int, time: Sequence[int], delta: int) -> None:
        self._change("s", node, port, time, delta)

    def update_target(self, node: int, port: int, time: Sequence[int], delta: int) -> None:
        self._change("t", node, port, time, delta)

    def _change(self, kind: str, node: int, port: int, time: Sequence[int], delta: int) -> None:
        raise NotImplementedError


class LoggedTracker(_RecordingTracker):
    """The coordinator's tracker when workers run in other processes: it keeps every count
    change in :attr:`log` with the worker it came from (:attr:`origin`), so that each worker's
    replica (:class:`ReplicaTracker`) can be brought up to date with the others' changes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (location, time, delta, worker) of every change, from :attr:`log_start` on
        self.log: list[tuple[int, Time, int, int]] = []
        self.log_start = 0
        self.origin = 0

    def _change(self, kind: str, node: int, port: int, time: Sequence[int], delta: int) -> None:
        if delta:
            change = (self._location[(kind, node, port)], tuple(time), delta)
            self._pending.append(change)
            self.log.append((*change, self.origin))

    def apply(self, changes: Sequence[tuple[int, Time, int]], origin: int) -> None:
        """Count changes a worker made (its replica's :meth:`ReplicaTracker.take`)."""
        self._pending.extend(changes)
        self.log.extend((loc, t, d, origin) for loc, t, d in changes)

    def since(self, cursor: int, worker: int) -> tuple[list[tuple[int, Time, int]], int]:
        """The changes from position ``cursor`` of the log on that did not come from
        ``worker``, and the position after them."""
        end = self.log_start + len(self.log)
        out = [(loc, t, d) for loc, t, d, o in self.log[cursor - self.log_start :] if o != worker]
        return out, end

    def trim(self, cursor: int) -> None:
        """Forget the log before position ``cursor`` (every replica has read it)."""
        if cursor > self.log_start:
            del self.log[: cursor - self.log_start]
            self.log_start = cursor


class ReplicaTracker(_RecordingTracker):
    """A worker's copy of the coordinator's tracker, in the worker's process: the
    coordinator's counts as of its last command (:meth:`apply`) plus the worker's own changes
    since, which it keeps for the coordinator (:meth:`take`). Its frontiers lag the
    coordinator's, never lead them: a change it has not seen is a pointstamp retired (its
    frontier only waits longer) or one in advance of a pointstamp it still counts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changes: list[tuple[int, Time, int]] = []

    def _change(self, kind: str, node: int, port: int, time: Sequence[int], delta: int) -> None:
        if delta:
            change = (self._location[(kind, node, port)], tuple(time), delta)
            self._pending.append(change)
            self.changes.append(change)

    def apply(self, changes: Sequence[tuple[int, Time, int]]) -> None:
        """The other workers' changes, from the coordinator."""
        self._pending.extend(changes)

    def take(self) -> list[tuple[int, Time, int]]:
        """This worker's changes since the last call."""
        out, self.changes = self.changes, []
        return out


class Shard:
    """One worker: its copies of the operators, their queues, and where its sends go."""

    #: in this process (a worker in another process has a proxy of its own)
    local = True

    def __init__(self, cluster: Any, index: int) -> None:
        self.cluster = cluster
        self.index = index
        self.operators: list[Operator] = []
        self.edges: dict[tuple[int, int], list[tuple[int, int, Route | None]]] = {}
        self.queues: list[list[list[tuple[Time, Any]]]] = []
        self._consumed: list[tuple[int, int, Time]] = []

    @property
    def tracker(self) -> Tracker | Any:
        return self.cluster.tracker

    # ------------------------------------------------------------------ building

    def add(self, op: Operator) -> int:
        if self.cluster.tracker is not None:
            raise RuntimeError("cannot add operators to a running worker")
        op.index = len(self.operators)
        op.worker = self  # type: ignore[assignment]
        self.operators.append(op)
        self.queues.append([[] for _ in op.input_types])
        if self.index == 0:
            self.cluster._add(op)
        return op.index

    def connect(
        self,
        source: Operator,
        port: int,
        target: Operator,
        target_port: int,
        route: Route | None = None,
    ) -> None:
        self.edges.setdefault((source.index, port), []).append((target.index, target_port, route))
        if self.index == 0:
            self.cluster.graph.add_edge((source.index, port), (target.index, target_port))

    # ------------------------------------------------------------------ messages

    def send(self, source: int, port: int, time: Time, batch: Any) -> None:
        for target, tport, route in self.edges.get((source, port), ()):
            if route is None:
                self.deliver(target, tport, time, batch)
            else:
                shards = self.cluster.shards
                for w, part in route(batch):
                    shards[w].deliver(target, tport, time, part)

    def deliver(self, target: int, port: int, time: Time, batch: Any) -> None:
        """Queue a message at one of this worker's operators (counted from now on)."""
        self.queues[target][port].append((time, batch))
        self.cluster.tracker.update_target(target, port, time, 1)
        self.cluster.activate(target, self.index)

    def accept(self, target: int, port: int, time: Time, batch: Any) -> None:
        """Queue a message another worker sent (and counted when it sent it)."""
        self.queues[target][port].append((time, batch))
        self.cluster.activate(target, self.index)

    def pull(self, op: int, port: int) -> list[tuple[Time, Any]]:
        q = self.queues[op][port]
        if not q:
            return []
        self.queues[op][port] = []
        for t, _ in q:
            self._consumed.append((op, port, t))
        return q

    def take_consumed(self) -> None:
        if self._consumed:
            tracker = self.cluster.tracker
            for o, p, t in self._consumed:
                tracker.update_target(o, p, t, -1)
            self._consumed.clear()

    def settle(self, op: int, propagate: bool = False) -> None:
        """As :meth:`~ddflow.timely.scheduler.Worker.settle`: operators whose frontiers moved
        are activated on every worker, except ``op`` on this one (it is running)."""
        if not self._consumed and not propagate:
            return
        self.take_consumed()
        cluster = self.cluster
        for n in cluster.tracker.propagate():
            cluster.activate_all(n, None if n != op else self.index)

    def activate(self, op: int) -> None:
        self.cluster.activate(op, self.index)


def tracked_sets(ops: Sequence[Operator]) -> tuple[set[int], set[int], set[int]]:
    """The operators whose frontiers are kept (watched), computed when read (on demand),
    and one for all inputs (merged)."""
    return (
        {op.index for op in ops if op.watches_frontier},
        {op.index for op in ops if op.frontier_on_demand},
        {op.index for op in ops if op.frontier_merged},
    )


class Cluster(Stepping):
    """Runs the operators of one dataflow on several workers to quiescence (see the module):
    the interface of :class:`~ddflow.timely.scheduler.Worker` over :attr:`shards` (a step
    runs one operator on every worker with work for it)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.graph = ProgressGraph()
        #: the workers: a :class:`Shard` each, or a proxy of a worker in another process
        #: (``local`` False; :mod:`ddflow.runtime.workers`), put in place before :meth:`start`
        self.shards: list[Any] = [Shard(self, w) for w in range(workers)]
        self.tracker: Tracker | Any = None
        self._pinned: list[bool] = []
        self._active: list[int] = []
        self._is_active: list[bool] = []
        self._waiting: list[set[int]] = []
        #: the capabilities each worker in another process holds, per operator (from its
        #: pointstamp changes; a worker in this process is asked its operator's)
        self._holds: list[list[int]] = [[] for _ in range(workers)]
        #: the location of each operator's first output -> the operator
        self._first_output: dict[int, int] = {}
        self.steps = 0
        self.step_seconds: dict[int, float] = {}
        #: (with ``profile``) the steps of each operator
        self.step_counts: dict[int, int] = {}
        self.profile = False
        self.on_step: Callable[[Operator], None] | None = None

    @property
    def operators(self) -> list[Operator]:
        """Worker 0's copies of the operators (their names and kinds)."""
        ops: list[Operator] = self.shards[0].operators
        return ops

    def _add(self, op: Operator) -> None:
        self.graph.add_node(op.input_types, op.output_types, op.summaries)
        self._pinned.append(op.pinned)
        self._is_active.append(False)
        self._waiting.append(set())
        for holds in self._holds:
            holds.append(0)

    def start(self) -> None:
        """Freeze the graph and start progress tracking."""
        ops = self.operators
        local = [s for s in self.shards if s.local]
        if any(len(s.operators) != len(ops) for s in local):
            raise RuntimeError("the workers were built with different operators")
        watched, on_demand, merged = tracked_sets(ops)
        remote = len(local) < self.workers
        self.tracker = (LoggedTracker if remote else Tracker)(
            self.graph, watched, on_demand, merged
        )
        self._first_output = {
            self.tracker._location[("s", op.index, 0)]: op.index for op in ops if op.output_types
        }
        for shard in local:
            for op in shard.operators:
                op.on_start()
        for shard in self.shards:
            if not shard.local:
                shard.start()
        for n in self.tracker.propagate():
            self.activate_all(n)
        for op in ops:  # (every operator runs once on every worker)
            for w in [0] if self._pinned[op.index] else range(self.workers):
                self.activate(op.index, w)

    # ------------------------------------------------------------------ activation

    def activate(self, op: int, worker: int) -> None:
        self._waiting[op].add(worker)
        if not self._is_active[op]:
            self._is_active[op] = True
            heapq.heappush(self._active, op)

    def activate_all(self, op: int, skip: int | None = None) -> None:
        """Activate ``op`` where its frontier moved matters, but not on worker ``skip``: on
        worker 0 if it is pinned, else on every worker that holds a capability for it (work
        for a time not complete yet: a worker that holds none has nothing the move could let
        it do, and messages activate it when they arrive)."""
        waiting = self._waiting[op]
        if self._pinned[op]:
            if skip != 0:
                waiting.add(0)
        else:
            for w, shard in enumerate(self.shards):
                if w != skip and (
                    shard.operators[op]._held if shard.local else self._holds[w][op] > 0
                ):
                    waiting.add(w)
        if waiting and not self._is_active[op]:
            self._is_active[op] = True
            heapq.heappush(self._active, op)

    def count_holds(self, worker: int, changes: Iterable[tuple[int, Time, int]]) -> None:
        """Keep count of the capabilities a worker in another process holds, from its
        pointstamp changes."""
        first, holds = self._first_output, self._holds[worker]
        for loc, _, delta in changes:
            op = first.get(loc)
            if op is not None:
                holds[op] += delta

    # ------------------------------------------------------------------ running

    def _step(self, defer: bool) -> bool:
        """As :meth:`~ddflow.timely.scheduler.Worker._step`, on every waiting worker."""
        if defer:
            after = self.operators[self._active[0]] if self._active else None
            propagate_before(self.tracker, after, self.activate_all)
        if not self._active:
            return False
        index = heapq.heappop(self._active)
        self._is_active[index] = False
        waiting = sorted(self._waiting[index])
        self._waiting[index] = set()
        t0 = _time.perf_counter() if self.profile else 0.0
        shards = self.shards
        remote = [shards[w] for w in waiting if not shards[w].local]
        for shard in remote:  # (they run while this process runs its own)
            shard.begin(index)
        for w in waiting:
            shard = shards[w]
            if shard.local:
                shard.operators[index].schedule()
                shard.take_consumed()
        for shard in remote:
            shard.finish()
        if self.profile:
            self.step_seconds[index] = self.step_seconds.get(index, 0.0) + (
                _time.perf_counter() - t0
            )
            self.step_counts[index] = self.step_counts.get(index, 0) + 1
        self.steps += 1
        if not defer:
            for n in self.tracker.propagate():
                self.activate_all(n)
        if self.on_step is not None:
            self.on_step(self.operators[index])
        return True
