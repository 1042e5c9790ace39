"""Linear operators: each output update depends on one input update alone.

For a linear ``f``, ``f(sum of updates) = sum of f(update)``, so these operators keep no state
and transform every message as it comes, at the message's time (or at the time the loop
boundary maps it to). Invariants:

* ``Linear``: output message at ``time_fn(t)`` for an input message at ``t``; with
  ``time_fn`` the identity unless the operator crosses a loop boundary;
* ``enter``: appends the loop coordinate (``0``, or ``(priority, 0)``);
* ``leave``: drops it; the sum over iterations happens downstream, where times are compared;
* ``feedback``: adds one to the innermost iteration of ``result - source`` (the loop variable at
  iteration ``i + 1`` is the body's result at iteration ``i``), dropping updates that would reach
  ``max_iterations``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ddflow.lattice import Time, TimeType
from ddflow.progress import Summary
from ddflow.timely import Operator

__all__ = ["Linear"]

BatchFn = Callable[[Any], Any]


class Linear(Operator):
    """A stateless operator: one function per input port, applied to every message."""

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
