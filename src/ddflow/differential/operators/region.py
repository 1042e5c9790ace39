"""A loop region as one operator of the graph around it.

:class:`RegionOp` stands for a loop the runtime runs whole (:mod:`ddflow.plan.regions`): its
inputs are the outer collections the loop reads, its outputs the loop's results. A step hands
the region the messages that arrived and the frontier of each input, lets it run until it has
no work left, and sends what its outputs received. Invariant: the operator holds a capability
at each time at which the region may still send by itself (work pending inside it that does
not wait on its inputs): :meth:`RegionHandle.capabilities`. While it hands the region messages
it holds capabilities at their times, so that the frontiers around it never pass what they may
still cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ddflow.errors import TimelyError
from ddflow.timely.lattice import EPOCHS, Time
from ddflow.timely.operator import Operator, OperatorState

__all__ = ["RegionHandle", "RegionOp"]


class RegionHandle(Protocol):
    """A region of the runtime (``Kernels.loop_region``), in the runtime's batches."""

    def push(self, port: int, batch: Any) -> None: ...
    def set_input_frontier(self, port: int, frontier: Sequence[Time]) -> None: ...
    def run(self) -> None: ...
    def take_output(self, port: int) -> list[tuple[Time, Any]]: ...
    def capabilities(self) -> list[Time]: ...
    def take_variable_counts(self) -> list[tuple[int, Time, int]]: ...
    @property
    def steps(self) -> int: ...


class RegionOp(Operator):
    """The loop named ``name``, run by ``region`` (see the module). ``fns``: per input, a
    function the messages go through first (an outer select fused into the loop's enter), or
    None; ``counts``: where each variable's updates per time are counted (by the index of its
    node in the region, the loop's stats)."""

    def __init__(
        self,
        name: str,
        region: RegionHandle,
        inputs: int,
        outputs: int,
        fns: Sequence[Any],
        counts: dict[int, dict[Time, int]],
        kernels: Any,
    ) -> None:
        super().__init__([EPOCHS] * inputs, [EPOCHS] * outputs)
        self.name = f"loop region ({name}): native"
        self.region = region
        self.fns = list(fns)
        self.counts = counts
        self.kernels = kernels

    @property
    def region_steps(self) -> int:
        """The operator steps run inside the region so far."""
        return int(self.region.steps)

    def schedule(self) -> None:
        region, k = self.region, self.kernels
        times: set[Time] = set()
        for port, fn in enumerate(self.fns):
            for t, batch in self.pull(port):
                if fn is not None:
                    batch = fn(batch)
                    if batch is None or k.is_empty(batch):
                        continue
                times.add(t)
                region.push(port, batch)
        # (capabilities at the messages' times, until what the region does with them is sent)
        for t in times - set(self.held()):
            self.hold(t)
        self.settle(propagate=True)
        for port in range(len(self.input_types)):
            region.set_input_frontier(port, self.frontier(port))
        region.run()
        for port in range(len(self.output_types)):
            for t, batch in region.take_output(port):
                self.send(port, t, batch)
        for node, t, n in region.take_variable_counts():
            stats = self.counts.get(node)
            if stats is not None:
                stats[t] = stats.get(t, 0) + n
        self.set_capabilities(region.capabilities())

    def save_state(self) -> OperatorState | None:
        raise TimelyError(
            f"{self.name} keeps its state in the core, which a checkpoint cannot hold yet: "
            "a dataflow with checkpoints runs its loops as Python operators"
        )
