"""The edges of a dataflow: inputs, outputs and probes.

* An input holds a capability at its current epoch; updates inserted are sent as a message at
  that epoch; ``advance_to(e)`` sends what is buffered and downgrades the capability to ``e``;
  ``close()`` drops it. Invariant: every update an input accepted is sent exactly once, at the
  epoch that was current when it was accepted.
* An output collects the updates that reach it; once an epoch is complete at its input (no time
  ``<= epoch`` can still arrive) it consolidates that epoch's updates and hands them on, in epoch
  order, exactly once.
* A probe only watches the frontier of its input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ddflow.timely.lattice import EPOCHS, Time
from ddflow.timely.operator import Operator

__all__ = ["InputOp", "OutputOp", "ProbeOp"]


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

    def attach(self, op: InputOp) -> None:
        """The input operator that reads this source (to activate it when fed)."""
        ...


class InputOp(Operator):
    name = "input"

    def __init__(self, source: InputSource) -> None:
        super().__init__([], [EPOCHS])
        self.source = source

    def on_start(self) -> None:
        e = self.source.earliest_epoch()
        if e is not None:
            self.hold((e,))

    def schedule(self) -> None:
        for epoch, batch in self.source.take_messages():
            self.send(0, (epoch,), batch)
        e = self.source.current_epoch()
        self.set_capabilities([] if e is None else [(e,)])


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
        frontier = self.frontier(0)
        bound = frontier[0][0] if frontier else None  # epochs < bound are complete
        last = (bound - 1) if bound is not None else None
        if last is None:
            last = max([self.complete_through, self.last_epoch(), *self._epochs_pending()])
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

    def _epochs_pending(self) -> list[int]:
        out: set[int] = set()
        for b in self.pending:
            out.update(t[0] for t in self.kernels.distinct_times(b, EPOCHS))
        return sorted(out)


class ProbeOp(Operator):
    """Discards its input; its frontier tells which epochs are complete there."""

    name = "probe"

    def __init__(self) -> None:
        super().__init__([EPOCHS], [])

    def schedule(self) -> None:
        self.pull(0)

    def frontier_now(self) -> list[Time]:
        return self.frontier(0)
