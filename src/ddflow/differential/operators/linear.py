"""Linear operators: each output update depends on one input update alone.

For a linear ``f``, ``f(sum of updates) = sum of f(update)``, so these operators keep no state
and transform every message as it comes, at the message's time (or at the time the loop
boundary maps it to). Invariants:

* ``Linear``: output message at ``time_fn(t)`` for an input message at ``t``; with
  ``time_fn`` the identity unless the operator crosses a loop boundary;
* ``enter``: appends the loop coordinate (``0``, or ``(priority, 0)``);
* ``leave``: drops it; the sum over iterations happens downstream, where times are compared;
* ``feedback`` (:class:`ConsolidateOp` with ``increment``): adds one to the innermost iteration
  of ``result - source`` (the loop variable at iteration ``i + 1`` is the body's result at
  iteration ``i``), once that iteration is complete and consolidated, dropping updates that
  would reach ``max_iterations``. ``consolidate()`` is the same operator without the increment:
  the only one here that holds updates back, until their time is complete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ddflow.errors import TimelyError
from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.operator import Operator, OperatorState
from ddflow.timely.progress import Summary

__all__ = ["ConsolidateOp", "Linear"]

BatchFn = Callable[[Any], Any]


class Linear(Operator):
    """A stateless operator: one function per input port, applied to every message."""

    watches_frontier = False

    def __init__(
        self,
        name: str,
        input_types: Sequence[TimeType],
        output_type: TimeType,
        fns: Sequence[BatchFn | None],
        kernels: Any,
        time_fn: Callable[[Time], Time | None] | None = None,
        summary: Summary | None = None,
    ) -> None:
        summaries = None
        if summary is not None:
            summaries = {(i, 0): summary for i in range(len(input_types))}
        super().__init__(input_types, [output_type], summaries)
        self.name = name
        self.fns = list(fns)
        self.kernels = kernels
        self.time_fn = time_fn

    def schedule(self) -> None:
        for port, fn in enumerate(self.fns):
            for t, batch in self.pull(port):
                out = batch if fn is None else fn(batch)
                if out is None or (fn is not None and self.kernels.is_empty(out)):
                    continue
                if self.time_fn is not None:
                    t2 = self.time_fn(t)
                    if t2 is None:
                        continue
                    t = t2
                self.send(0, t, out)


class ConsolidateOp(Operator):
    """Holds updates until their time is complete at its input, then sends each time's updates
    consolidated, so that an update and its cancellation arriving in different messages meet.

    As a loop's feedback (``increment=True``) it sends a complete iteration's differences to the
    next iteration: ``result - source`` at ``(..., i)`` becomes the variable's change at
    ``(..., i + 1)``; updates reaching ``limit`` are dropped. Without the consolidation, a body
    whose result cancels (``+r`` from one path, ``-r`` from another) would circulate the pair
    forever. Invariant: the capability held for each buffered time is at its output time.
    """

    frontier_merged = True  # (it reads input_frontier alone)

    def __init__(
        self,
        name: str,
        tt: TimeType,
        kernels: Any,
        ports: int,
        negate: Sequence[int] = (),
        increment: bool = False,
        limit: int | None = None,
    ) -> None:
        summary = Summary.increment(tt, 1) if increment else Summary.identity(tt)
        super().__init__([tt] * ports, [tt], {(i, 0): summary for i in range(ports)})
        self.name = name
        self.tt = tt
        self.kernels = kernels
        self.negate = set(negate)
        self.increment = increment
        self.limit = limit
        self.buffer: dict[Time, list[Any]] = {}

    def save_state(self) -> OperatorState | None:
        if self.buffer:  # (a checkpoint is taken with nothing left to do)
            raise TimelyError(f"{self.name} holds updates at {sorted(self.buffer)}")
        return None

    def _out_time(self, t: Time) -> Time:
        return (*t[:-1], t[-1] + 1) if self.increment else t

    def schedule(self) -> None:
        k, tt = self.kernels, self.tt
        for port in range(len(self.input_types)):
            for _, batch in self.pull(port):
                if port in self.negate:
                    batch = k.negate(batch)
                for t, part in k.split_by_time(batch, tt):
                    parts = self.buffer.get(t)
                    if parts is None:
                        self.buffer[t] = [part]
                        self.hold(self._out_time(t))
                    else:
                        parts.append(part)
        if not self.buffer:
            return
        self.settle()  # (a capability is held at each buffered time's output time)
        frontier = self.input_frontier()
        ready = sorted(t for t in self.buffer if not any(tt.less_equal(f, t) for f in frontier))
        for t in ready:
            batch = k.consolidate(k.concat(self.buffer.pop(t)))
            out_t = self._out_time(t)
            if not k.is_empty(batch) and (self.limit is None or out_t[-1] < self.limit):
                if self.increment:
                    batch = k.increment(batch, tt, None)
                self.send(0, out_t, batch)
            self.release(out_t)
