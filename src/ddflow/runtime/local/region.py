"""The local runtime's loop regions: ``ddflow._native.Region`` behind the local batches.

:class:`LocalRegion` is the :class:`~ddflow.differential.operators.region.RegionHandle` of a
:class:`~ddflow.plan.regions.RegionPlan`: it hands the core the updates of a batch (a batch
held as rows as its tuples, with the positions of the data, the time and the diff; a frame as
Arrow ``int64`` columns) and makes the
core's output rows batches again, held as rows where they are few, else a frame.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.runtime.local.native_reducer import arrow_int64
from ddflow.runtime.local.rows import Rows
from ddflow.runtime.native.build import native
from ddflow.timely.lattice import EPOCHS, Time

if TYPE_CHECKING:
    from ddflow.plan.regions import RegionPlan
    from ddflow.runtime.local.kernels import LocalKernels

__all__ = ["LocalRegion"]


class LocalRegion:
    """A loop region in the core, for the local runtime's batches (see the module)."""

    def __init__(self, kernels: LocalKernels, plan: RegionPlan) -> None:
        self.kernels = kernels
        self.core = native().Region(plan.nodes, plan.booleans)
        self.tcols = list(EPOCHS.columns())
        self.inputs = [list(n.schema.names) for n in plan.sources]
        self.out_schemas: list[dict[str, Any]] = [
            {
                **{c: dt.polars for c, dt in n.schema.items()},
                **{c: pl.Int64 for c in self.tcols},
                DIFF: pl.Int64,
            }
            for n in plan.leaves
        ]

    @property
    def steps(self) -> int:
        return int(self.core.steps)

    def push(self, port: int, batch: Any) -> None:
        if type(batch) is not Rows:
            frame = self.kernels.to_polars(batch)
            if frame.height:
                self.core.push_columns(
                    port,
                    [arrow_int64(frame.get_column(c)) for c in self.inputs[port]],
                    [arrow_int64(frame.get_column(c)) for c in self.tcols],
                    arrow_int64(frame.get_column(DIFF)),
                )
            return
        names, rows = batch.names, batch.rows
        if not rows:
            return
        self.core.push_rows(
            port,
            rows,
            [names.index(c) for c in self.inputs[port]],
            [names.index(c) for c in self.tcols],
            names.index(DIFF),
        )

    def set_input_frontier(self, port: int, frontier: Sequence[Time]) -> None:
        self.core.set_input_frontier(port, [list(t) for t in frontier])

    def run(self) -> None:
        self.core.run()

    def take_output(self, port: int) -> list[tuple[Time, Any]]:
        k, schema = self.kernels, self.out_schemas[port]
        out: list[tuple[Time, Any]] = []
        for t, rows in self.core.take_output(port):
            batch = None
            if len(rows) <= max(k.small_rows, 0):
                batch = k.from_rows(schema, functools.partial(list, rows))
            if batch is None:
                batch = k.from_polars(pl.DataFrame(rows, schema=schema, orient="row"))
            out.append((tuple(t), batch))
        return out

    def capabilities(self) -> list[Time]:
        return [tuple(t) for t in self.core.capabilities()]

    def take_variable_counts(self) -> list[tuple[int, Time, int]]:
        return [(n, tuple(t), c) for n, t, c in self.core.take_variable_counts()]
