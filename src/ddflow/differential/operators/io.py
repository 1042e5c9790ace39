"""The edges of a dataflow: inputs, outputs and probes.

* An input holds a capability at its current epoch; updates inserted are sent as a message at
  that epoch; ``advance_to(e)`` sends what is buffered and downgrades the capability to ``e``;
  ``close()`` drops it. Invariant: every update an input accepted is sent exactly once, at the
  epoch that was current when it was accepted.
* With several workers, the input has a copy on every worker; the copy on worker 0 reads the
  handle. Data the workers read themselves (a share of an epoch's files each: *splits*, see
  :class:`Split`) is handed by worker 0's copy to the copies' *feed* (input port 0) at the
  split's epoch, while it holds the capability for that epoch; each copy reads its splits and
  sends their updates on from the worker it runs on.
* An output collects the updates that reach it; once an epoch is complete at its input (no time
  ``<= epoch`` can still arrive) it consolidates that epoch's updates and hands them on, in epoch
  order, exactly once.
* A probe only watches the frontier of its input.
* A sink written by the workers in parallel is two operators: a :class:`PartSinkOp` on every
  worker, fed by an exchange on the whole record (a record's updates meet on one worker),
  writes its part of each complete epoch and sends the part's description to a
  :class:`CommitOp` on worker 0, which commits an epoch once every part of it is written (its
  frontier passed the epoch: no part sink still holds the epoch's capability).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ddflow.errors import TimelyError
from ddflow.timely.lattice import EPOCHS, Time
from ddflow.timely.operator import Operator, OperatorState

__all__ = ["CommitOp", "InputOp", "InputSource", "OutputOp", "PartSinkOp", "ProbeOp", "Split"]


class InputSource(Protocol):
    """What an input operator needs from its handle."""

    def take_messages(self) -> list[tuple[int, Any]]:
        """The batches accepted since the last call, with their epochs."""
        ...

    def current_epoch(self) -> int | None:
        """The epoch at which new updates will arrive; ``None`` once closed."""
        ...

    def earliest_epoch(self) -> int | None:
        """The earliest epoch of an update not taken yet, or of updates still to come."""
        ...

    def take_splits(self) -> list[tuple[int, list[Any]]]:
        """The splits (:class:`Split`) accepted since the last call, with their epochs."""
        ...

    def attach(self, op: InputOp) -> None:
        """The input operator that reads this source (to activate it when fed)."""
        ...


class Split(Protocol):
    """A share of an epoch's updates that the worker given it reads itself (a few row groups
    of a Parquet file, say): picklable, small, and read where it lands."""

    #: the share's weight (bytes, rows: what balances the workers' shares)
    size: int

    def read(self, epoch: int) -> Any:
        """The share's updates as a Polars frame: the input's columns, then the epoch and the
        diff (the columns of an input batch)."""
        ...


class InputOp(Operator):
    """An input's copy on one worker: with a ``source`` (worker 0's), it sends what the handle
    accepted and holds the capability of its current epoch; on every worker, it reads the
    splits its feed receives (see the module)."""

    name = "input"
    watches_frontier = False

    def __init__(self, source: InputSource | None, kernels: Any) -> None:
        super().__init__([EPOCHS], [EPOCHS])
        self.source = source
        self.kernels = kernels
        #: the rows this copy read from splits (for tests and statistics)
        self.rows_read = 0

    def on_start(self) -> None:
        e = None if self.source is None else self.source.earliest_epoch()
        if e is not None:
            self.hold((e,))

    def schedule(self) -> None:
        for time, split in self.pull(0):
            batch = self.kernels.from_polars(split.read(time[0]))
            self.rows_read += self.kernels.height(batch)
            if not self.kernels.is_empty(batch):
                self.send(0, time, batch)
        if self.source is None:
            return
        for epoch, batch in self.source.take_messages():
            self.send(0, (epoch,), batch)
        for epoch, splits in self.source.take_splits():
            self._spread(epoch, splits)
        e = self.source.current_epoch()
        self.set_capabilities([] if e is None else [(e,)])

    def _spread(self, epoch: int, splits: list[Split]) -> None:
        """Hand the splits of an epoch to the workers' copies, the largest first, each to the
        worker with the least so far (this copy holds the epoch's capability meanwhile)."""
        worker: Any = self.worker
        cluster = getattr(worker, "cluster", None)
        workers = [worker] if cluster is None else cluster.shards
        load = [0] * len(workers)
        for split in sorted(splits, key=lambda s: -s.size):
            w = load.index(min(load))
            load[w] += max(1, split.size)
            workers[w].deliver(self.index, 0, (epoch,), split)


class OutputOp(Operator):
    """Collects updates and releases each epoch's consolidated changes once it is complete."""

    name = "output"

    def __init__(
        self, kernels: Any, on_epoch: Callable[[int, Any], None], last_epoch: Callable[[], int]
    ) -> None:
        super().__init__([EPOCHS], [])
        self.kernels = kernels
        self.on_epoch = on_epoch
        # the latest epoch any input reached; all epochs up to it are complete once the
        # frontier is empty
        self.last_epoch = last_epoch
        self.pending: list[Any] = []
        self.complete_through = -1

    def schedule(self) -> None:
        for _, batch in self.pull(0):
            self.pending.append(batch)
        self.settle()  # (no outputs: nothing to hold)
        last = _last_complete(
            self.frontier(0), self.complete_through, self.last_epoch, self._epochs_pending
        )
        if last <= self.complete_through:
            return
        ready, keep = self.kernels.split_complete(self.pending, last)
        self.pending = keep
        by_epoch: dict[Time, Any] = {}
        if ready is not None:
            by_epoch = dict(self.kernels.split_by_time(self.kernels.consolidate(ready), EPOCHS))
        for e in range(self.complete_through + 1, last + 1):
            changes = by_epoch.get((e,))
            self.on_epoch(e, None if changes is None else self.kernels.to_log(changes))
        self.complete_through = last

    def save_state(self) -> OperatorState:
        if self.pending:
            raise TimelyError("an output holds changes of an epoch not complete")
        return OperatorState(values={"complete_through": self.complete_through})

    def load_state(self, state: OperatorState) -> None:
        self.complete_through = state.values["complete_through"]

    def _epochs_pending(self) -> list[int]:
        out: set[int] = set()
        for b in self.pending:
            out.update(t[0] for t in self.kernels.distinct_times(b, EPOCHS))
        return sorted(out)


def _last_complete(
    frontier: list[Time],
    done: int,
    last_epoch: Callable[[], int],
    pending: Callable[[], list[int]],
) -> int:
    """The last epoch complete at an input whose ``frontier`` is given: the one before the
    frontier's, or once it is empty (every input closed), the latest epoch any input reached
    or any update ``pending`` is at (and at least ``done``, those already complete)."""
    if frontier:
        return int(frontier[0][0]) - 1
    return max([done, last_epoch(), *pending()])


class ProbeOp(Operator):
    """Discards its input; its frontier tells which epochs are complete there."""

    name = "probe"

    def __init__(self) -> None:
        super().__init__([EPOCHS], [])

    def schedule(self) -> None:
        self.pull(0)

    def frontier_now(self) -> list[Time]:
        return self.frontier(0)


class PartWriter(Protocol):
    """What writes a worker's parts of a sink (see :class:`PartSinkOp`): it is copied to
    every worker."""

    def write_part(self, epoch: int, changes: Any, worker: int, state: Any) -> tuple[Any, Any]:
        """Write this worker's part of a complete ``epoch`` (``changes``: its consolidated
        changes, a Polars frame of the columns, the epoch and the diff); returns the part's
        description for :meth:`Committer.commit` (None: nothing written) and the worker's new state
        (``state``: what the last call returned, None at first)."""
        ...


class Committer(Protocol):
    """What commits a sink's epochs, on worker 0 (see :class:`CommitOp`)."""

    def commit(self, epoch: int, parts: list[Any]) -> None:
        """Every part of a complete ``epoch`` is written (``parts``: their descriptions)."""
        ...


class PartSinkOp(Operator):
    """A worker's part of a sink: buffers the updates routed to it by epoch, holding each
    epoch's capability until the epoch is complete here and its part is written and sent on
    (to :class:`CommitOp`)."""

    name = "sink"

    def __init__(self, kernels: Any, writer: PartWriter, worker: int) -> None:
        super().__init__([EPOCHS], [EPOCHS])
        self.kernels = kernels
        self.writer = writer
        self.shard = worker
        self.pending: dict[int, list[Any]] = {}
        self.state: Any = None
        #: the description of the last part written (see :meth:`load_state`)
        self.last_part: Any = None

    def schedule(self) -> None:
        k = self.kernels
        for _, batch in self.pull(0):
            for (e, *_), part in k.split_by_time(batch, EPOCHS):
                if e not in self.pending:
                    self.pending[e] = []
                    self.hold((e,))
                self.pending[e].append(part)
        frontier = self.frontier(0)
        bound = frontier[0][0] if frontier else None  # epochs < bound are complete
        for e in sorted(self.pending):
            if bound is not None and e >= bound:
                break
            changes = k.to_polars(k.consolidate(k.concat(self.pending.pop(e))))
            part, self.state = self.writer.write_part(e, changes, self.shard, self.state)
            if part is not None:
                self.send(0, (e,), part)
                self.last_part = part
            self.release((e,))

    def save_state(self) -> OperatorState:
        if self.pending:
            raise TimelyError("a sink holds changes of an epoch not complete")
        frames = {} if self.state is None else {"state": self.state}
        return OperatorState(frames, {"last_part": self.last_part})

    def load_state(self, state: OperatorState) -> None:
        """The worker's state, and its last part written again if it is gone (a later epoch's
        commit removed it before the failure that led to this restore)."""
        self.state = state.frames.get("state")
        self.last_part = state.values["last_part"]
        rewrite = getattr(self.writer, "rewrite_part", None)
        if rewrite is not None and self.last_part is not None:
            rewrite(self.last_part, self.state)


class CommitOp(Operator):
    """Worker 0's end of a sink (see :class:`PartSinkOp`): commits each complete epoch, in
    order, exactly once, with the parts written for it (none for an epoch without changes)."""

    name = "commit"

    def __init__(self, committer: Committer, last_epoch: Callable[[], int]) -> None:
        super().__init__([EPOCHS], [])
        self.committer = committer
        self.last_epoch = last_epoch
        self.parts: dict[int, list[Any]] = {}
        self.complete_through = -1

    def schedule(self) -> None:
        for (e, *_), part in self.pull(0):
            self.parts.setdefault(e, []).append(part)
        self.settle()  # (no outputs: nothing to hold)
        last = _last_complete(
            self.frontier(0), self.complete_through, self.last_epoch, lambda: list(self.parts)
        )
        for e in range(self.complete_through + 1, last + 1):
            self.committer.commit(e, self.parts.pop(e, []))
            self.complete_through = e

    def save_state(self) -> OperatorState:
        if self.parts:
            raise TimelyError("a sink's commit holds parts of an epoch not complete")
        save = getattr(self.committer, "checkpoint_values", None)
        values = {"complete_through": self.complete_through}
        return OperatorState(values={**values, "committer": None if save is None else save()})

    def load_state(self, state: OperatorState) -> None:
        self.complete_through = state.values["complete_through"]
        if state.values["committer"] is not None:
            getattr(self.committer, "restore_values")(state.values["committer"])  # noqa: B009
