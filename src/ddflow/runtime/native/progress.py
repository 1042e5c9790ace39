"""Progress tracking in the native core, and a tracker that checks it against Python's.

:func:`native_tracker` makes the core's tracker (``native/core/src/progress.rs``) of a
:class:`~ddflow.timely.progress.ProgressGraph`: the same rules as the Python
:class:`~ddflow.timely.progress.Tracker` (pointstamp counts pushed through the minimal path
summaries into one frontier per watched input, on-demand and merged frontiers), with the
methods a scheduler calls. The graph crosses once; then every count change is one call, and
the work of a propagation (consolidating the changes, applying the summaries, keeping the
antichains) stays in the core.

:class:`CheckedTracker` runs both, and raises :class:`TrackerMismatch` at the first call where
they disagree: the differential test of the two implementations at every step of real
dataflows (``LocalSettings(progress="checked")``).

>>> from ddflow.timely.lattice import EPOCHS
>>> from ddflow.timely.progress import ProgressGraph
>>> g = ProgressGraph()
>>> source, sink = g.add_node([], [EPOCHS]), g.add_node([EPOCHS], [])
>>> g.add_edge((source, 0), (sink, 0))
>>> tracker = native_tracker(g)
>>> tracker.update_source(source, 0, (3,), 1)
>>> tracker.propagate(), tracker.frontier(sink, 0)
({1}, [(3,)])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ddflow.runtime.native.build import native
from ddflow.timely.lattice import Time
from ddflow.timely.progress import ProgressGraph, Tracker

__all__ = ["CheckedTracker", "TrackerMismatch", "native_tracker"]


def native_tracker(
    graph: ProgressGraph,
    watched: Iterable[int] | None = None,
    on_demand: Iterable[int] = (),
    merged: Iterable[int] = (),
) -> Any:
    """The core's tracker of ``graph`` (arguments as :class:`~ddflow.timely.progress.Tracker`'s;
    a cycle that does not advance time is the same ``ValueError``)."""
    inputs, outputs, internal, edges = graph.plain()
    return native().Tracker(
        inputs,
        outputs,
        internal,
        edges,
        None if watched is None else sorted(watched),
        sorted(on_demand),
        sorted(merged),
    )


class TrackerMismatch(AssertionError):
    """The native tracker and the Python tracker disagree."""


class CheckedTracker:
    """Both trackers of one graph, fed the same calls and compared on every answer."""

    def __init__(
        self,
        graph: ProgressGraph,
        watched: set[int] | None = None,
        on_demand: set[int] | frozenset[int] = frozenset(),
        merged: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        self.python = Tracker(graph, watched, on_demand, merged)
        self.native = native_tracker(graph, watched, on_demand, merged)
        #: how many answers were compared
        self.compared = 0

    def _same(self, what: str, a: Any, b: Any) -> Any:
        self.compared += 1
        if a != b:
            raise TrackerMismatch(f"{what}: the Python tracker says {a!r}, the native one {b!r}")
        return a

    def update_source(self, node: int, port: int, time: Sequence[int], delta: int) -> None:
        self.python.update_source(node, port, time, delta)
        self.native.update_source(node, port, tuple(time), delta)

    def update_target(self, node: int, port: int, time: Sequence[int], delta: int) -> None:
        self.python.update_target(node, port, time, delta)
        self.native.update_target(node, port, tuple(time), delta)

    def count_pending(self) -> None:
        self.python.count_pending()
        self.native.count_pending()

    def pending_changes(self) -> int:
        return self._same(
            "pending changes", self.python.pending_changes(), self.native.pending_changes()
        )

    def uncounted_changes(self) -> int:
        # (the Python tracker keeps no counts where no frontier is on demand)
        return self.python.uncounted_changes()

    def propagate(self) -> set[int]:
        changed = self.python.propagate()
        self._same("the nodes whose frontiers changed", changed, self.native.propagate())
        return changed

    def frontier(self, node: int, port: int) -> list[Time]:
        return self._same(
            f"the frontier of node {node}'s input {port}",
            self.python.frontier(node, port),
            self.native.frontier(node, port),
        )

    def all_complete(self) -> bool:
        return self._same(
            "whether all is complete", self.python.all_complete(), self.native.all_complete()
        )
