"""Timely dataflow vertices: the layer every ddflow operator stands on.

An operator (a *vertex*) has typed input and output ports. Messages are ``(time, batch)`` pairs;
a message at time ``t`` carries updates at times ``>= t``. A vertex may send at time ``t`` only
while it can vouch that nothing earlier is still to come from it: while it handles a message or a
notification at a time ``<= t``, or while it holds a *capability* at a time ``<= t``. Pending
messages and held capabilities are the pointstamps of progress tracking
(:mod:`ddflow.timely.progress`), so the frontier at every input says exactly which times may still
arrive there.

Two interfaces share this machinery:

* :class:`Operator`, used by ddflow's own differential operators: it drains its inputs in bulk,
  reads its input frontiers and manages capabilities itself;
* :class:`Vertex`, the public API of naiad-timely-dataflow §2.2: ``on_recv(edge, batch, time)``
  and ``on_notify(time)`` callbacks, calling ``send_by(edge, batch, time)`` and
  ``notify_at(time)``. Sending or notifying at a time earlier than the event being handled raises
  :class:`~ddflow.errors.TimelyError`.

A vertex built on the public API, the papers' DistinctCount (distinct records at once, counts
when the time is complete)::

    class DistinctCount(dd.Vertex):
        def __init__(self):
            self.counts = {}

        def on_recv(self, edge, batch, time):
            counts = self.counts.setdefault(time, {})
            fresh = [r for r in batch.iter_rows() if r[:-1] not in counts]
            for *record, diff in batch.iter_rows():
                counts[tuple(record)] = counts.get(tuple(record), 0) + diff
            if fresh:
                self.send_by(0, [r[:-1] for r in fresh], time)
            self.notify_at(time)

        def on_notify(self, time):
            rows = [(*r, c) for r, c in self.counts.pop(time).items()]
            self.send_by(1, rows, time)

    distinct, counts = flow.vertex(DistinctCount(), inputs=[words],
                                   outputs=[words.schema, {"word": "str", "n": "int64"}])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddflow.errors import TimelyError
from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.progress import Summary

if TYPE_CHECKING:
    from ddflow.timely.scheduler import Worker

__all__ = ["Operator", "OperatorState", "Vertex"]


class Operator:
    """Base of every operator the scheduler runs.

    Subclasses implement :meth:`schedule`, called when messages arrived or an input frontier
    changed. The worker takes the consumed messages off the books after ``schedule`` returns, so
    during ``schedule`` the operator may send at any time in advance of a message it pulled;
    an operator that calls :meth:`settle` has them taken off at that point instead.
    """

    name = "operator"
    #: what the operator is (``reduce``, ``join``, ``enter``...) where its ``name`` also
    #: names the stateless nodes it takes up (``concat(select, -)+reduce``: see
    #: :mod:`ddflow.plan.build`); empty where the name says only that
    kind = ""
    #: whether :meth:`schedule` reads input frontiers: an operator that never does (a stateless
    #: one) is not activated when they move, and progress tracking skips its inputs
    watches_frontier = True
    #: whether its input frontiers are computed when read rather than kept up to date: for an
    #: operator that reads them only when it runs anyway (for messages), and need not run
    #: when they move (see :class:`~ddflow.timely.progress.Tracker`)
    frontier_on_demand = False
    #: whether it reads only the frontier of all its inputs together (:meth:`input_frontier`):
    #: progress tracking then keeps one frontier for them, not one per input
    frontier_merged = False
    #: whether the operator runs on worker 0 alone (with several workers: an output, a probe,
    #: a vertex without a key); everything routed to it goes to worker 0
    pinned = False

    def __init__(
        self,
        inputs: Sequence[TimeType],
        outputs: Sequence[TimeType],
        summaries: dict[tuple[int, int], Summary] | None = None,
    ) -> None:
        self.input_types = list(inputs)
        self.output_types = list(outputs)
        self.summaries = summaries
        self.index = -1
        self.worker: Worker | None = None
        self._held: dict[Time, int] = {}

    # ------------------------------------------------------------------ to implement

    def schedule(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_start(self) -> None:
        """Called once when the dataflow starts, before any message moves."""

    # ------------------------------------------------------------------ messages

    def pull(self, port: int) -> list[tuple[Time, Any]]:
        """Take every message queued at an input port."""
        assert self.worker is not None
        return self.worker.pull(self.index, port)

    def send(self, port: int, time: Time, batch: Any) -> None:
        """Send a batch of updates, all at times in advance of ``time``."""
        assert self.worker is not None
        self.worker.send(self.index, port, time, batch)

    def settle(self, propagate: bool = False) -> None:
        """Take the messages pulled so far in this step off the books now, not when
        ``schedule`` returns: the input frontiers read next no longer wait for them, so that
        work they bring for a time that is then complete is done in this same step, not in
        another one after it. Before settling, the operator must hold a capability for every
        time at which it may still send in this step (or later) because of them.
        ``propagate``: bring the frontiers up to date even when no message was pulled (after
        the operator changed its capabilities in this step)."""
        assert self.worker is not None
        self.worker.settle(self.index, propagate)

    def frontier(self, port: int = 0) -> list[Time]:
        """The times that may still arrive at an input (its frontier)."""
        assert self.worker is not None
        return self.worker.tracker.frontier(self.index, port)

    def input_frontier(self) -> list[Time]:
        """The frontier of all inputs together: the minimal times that may arrive at any."""
        if len(self.input_types) == 1 or self.frontier_merged:
            return self.frontier(0)
        tt = self.input_types[0]
        out: list[Time] = []
        for p in range(len(self.input_types)):
            for t in self.frontier(p):
                if not any(tt.less_equal(x, t) for x in out):
                    out = [x for x in out if not tt.less_equal(t, x)]
                    out.append(t)
        return sorted(out)

    def complete(self, time: Time) -> bool:
        """Is ``time`` complete at every input (nothing at or before it may still arrive)?"""
        tt = self.input_types[0]
        return not any(tt.less_equal(f, time) for f in self.input_frontier())

    # ------------------------------------------------------------------ capabilities

    def hold(self, time: Time, count: int = 1) -> None:
        """Acquire a capability at ``time`` on every output."""
        assert self.worker is not None
        self._held[time] = self._held.get(time, 0) + count
        for port in range(len(self.output_types)):
            self.worker.tracker.update_source(self.index, port, time, count)

    def release(self, time: Time, count: int = 1) -> None:
        """Drop a capability acquired with :meth:`hold`."""
        assert self.worker is not None
        left = self._held.get(time, 0) - count
        if left < 0:
            raise TimelyError(f"released a capability at {time} that was not held")
        if left:
            self._held[time] = left
        else:
            del self._held[time]
        for port in range(len(self.output_types)):
            self.worker.tracker.update_source(self.index, port, time, -count)

    def held(self) -> list[Time]:
        return sorted(self._held)

    def set_capabilities(self, times: Sequence[Time]) -> None:
        """Hold exactly one capability at each of ``times``, releasing the others."""
        want = set(times)
        for t in [t for t in self._held if t not in want]:
            self.release(t, self._held[t])
        for t in want:
            if t not in self._held:
                self.hold(t)

    # ------------------------------------------------------------------ checkpoints

    def save_state(self) -> OperatorState | None:
        """The operator's state for a checkpoint, taken when the dataflow is idle at a
        complete epoch (see :mod:`ddflow.api.checkpoints`); None: it keeps none."""
        return None

    def load_state(self, state: OperatorState) -> None:
        """Take the state :meth:`save_state` gave, in a copy of the operator just started."""
        raise TimelyError(f"{self.name} keeps no state to restore")

    def activate(self) -> None:
        """Ask to be scheduled again."""
        assert self.worker is not None
        self.worker.activate(self.index)

    def __repr__(self) -> str:
        return f"{type(self).__name__}#{self.index}({self.name})"


@dataclass
class OperatorState:
    """An operator's state in a checkpoint: named frames (Polars, written as Parquet) and
    named values that JSON holds (times as lists)."""

    frames: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


class Vertex:
    """The public timely vertex: subclass it and implement ``on_recv`` and ``on_notify``.

    ``on_recv(edge, batch, time)`` receives, on input ``edge``, a Polars DataFrame of the input's
    columns plus ``diff`` (all its updates at ``time``). ``send_by(edge, rows, time)`` sends rows
    (a pandas/Polars DataFrame or a list of tuples, with an optional trailing ``diff`` column,
    default 1) on output ``edge`` at ``time``; ``notify_at(time)`` asks for ``on_notify(time)``
    once no message at a time ``<= time`` can still arrive. Both must be called with a time at or
    after the event being handled.

    >>> class Echo(Vertex):
    ...     def on_recv(self, edge, batch, time):
    ...         self.send_by(0, batch, time)
    >>> Echo().outputs_connected
    False
    """

    _runner: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """(A copy, or a vertex sent to a worker process, is not bound to any operator.)"""
        state = dict(self.__dict__)
        state.pop("_runner", None)
        return state

    @property
    def outputs_connected(self) -> bool:
        return self._runner is not None

    def checkpoint(self) -> dict[str, Any]:
        """The vertex's state, for a checkpoint of the dataflow: a dict of DataFrames (Polars
        or pandas) and values JSON can hold. A vertex with no attributes has none; any other
        must implement this and :meth:`restore`."""
        state = sorted(k for k in vars(self) if k != "_runner")
        if state:
            raise NotImplementedError(
                f"{type(self).__name__} keeps state ({', '.join(state)}): "
                "implement checkpoint() and restore() to checkpoint its dataflow"
            )
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back the state :meth:`checkpoint` gave (DataFrames come back as Polars)."""
        if state:
            raise NotImplementedError(f"{type(self).__name__} does not implement restore()")

    def on_recv(self, edge: int, batch: Any, time: Time) -> None:
        """Handle a batch that arrived on input ``edge`` at ``time``."""

    def on_notify(self, time: Time) -> None:
        """Handle the completion of ``time`` (requested with :meth:`notify_at`)."""

    def send_by(self, edge: int, batch: Any, time: Sequence[int]) -> None:
        """Send a batch on output ``edge`` at ``time``."""
        if self._runner is None:
            raise TimelyError("send_by called on a vertex that is not part of a running dataflow")
        self._runner.vertex_send(edge, batch, tuple(time))

    def notify_at(self, time: Sequence[int]) -> None:
        """Request ``on_notify(time)`` once ``time`` is complete at this vertex's inputs."""
        if self._runner is None:
            raise TimelyError("notify_at called on a vertex that is not part of a running dataflow")
        self._runner.vertex_notify(tuple(time))
