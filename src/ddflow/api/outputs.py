"""Outputs and probes: where a dataflow's results are read.

An :class:`Output` receives each epoch's consolidated changes once the epoch is complete at it,
in epoch order, exactly once; ``snapshot(e)`` is the accumulation of the changes at epochs
``<= e``. A :class:`Probe` only watches the frontier of its collection.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.api.collection import Collection
from ddflow.differential.batch import DIFF
from ddflow.errors import (
    CallSite,
    GraphError,
    TimeError,
    call_site,
)
from ddflow.schema import Schema

if TYPE_CHECKING:  # pandas is imported only when a frame is asked for as pandas (it is large)
    import pandas as pd

__all__ = ["Output", "Probe", "to_pandas"]


class Output:
    """The changes of a collection, kept for reading: ``snapshot``, ``changes``, ``subscribe``.

    Epoch ``e``'s changes become visible once ``e`` is complete here (after ``run()``). Every
    reader gives pandas DataFrames, and Polars ones with ``polars=True``. A snapshot's
    multiplicity column is :attr:`count_column`, the name ``output(count=...)`` gave
    (``count`` by default)."""

    def __init__(self, collection: Collection, site: CallSite | None, count: str = "count") -> None:
        self.collection = collection
        self.schema = collection.schema
        #: the name of a snapshot's multiplicity column
        self.count_column = count
        flow = collection.flow
        self.node = flow.plan.add(
            "output", (collection._node,), collection.schema, flow.plan.top, {"sink": self}, site
        )
        flow.outputs.append(self)
        #: the changes of the completed epochs, kept as the runtime keeps them
        self._log = flow.kernels.change_log()
        self._subscribers: list[tuple[Callable[[Any], None], bool]] = []
        self.complete_through = -1
        #: wall-clock time at which each epoch completed (for latency measurements)
        self.completed_at: dict[int, float] = {}
        #: called with every completed epoch, changed or not (sinks that keep state current)
        self._epoch_listeners: list[Callable[[int], None]] = []
        #: the epoch of the checkpoint restored: the changes before it are not kept
        self._restored: int | None = None

    def _restore(self, epoch: int, contents: pl.DataFrame) -> None:
        """Hold, as a checkpoint recorded them, the contents at ``epoch`` (columns and
        ``count``), as that epoch's changes (see :mod:`ddflow.api.checkpoints`)."""
        self._log = self.collection.flow.kernels.change_log()
        if contents.height:
            self._log.append(
                epoch,
                contents.rename({self.count_column: DIFF})
                .with_columns(pl.lit(epoch, dtype=pl.Int64).alias("__t0"))
                .select([*self.schema.names, "__t0", DIFF]),
            )
        self.complete_through = epoch
        self.completed_at = {}
        self._restored = epoch

    def _on_epoch(self, epoch: int, changes: Any) -> None:
        """Epoch ``epoch`` is complete, with ``changes`` (None, or as the runtime's ``to_log``
        gave them)."""
        self.complete_through = epoch
        self.completed_at[epoch] = _time.perf_counter()
        if changes is not None and changes.height:
            self._log.append(epoch, changes)
            if self._subscribers:
                frame = _changes_polars(self._log.frame(changes), self.schema)
                df = None
                for cb, polars in self._subscribers:
                    if polars:
                        cb(frame)
                        continue
                    if df is None:
                        df = to_pandas(frame, self.schema)
                    cb(df)
        for listener in self._epoch_listeners:
            listener(epoch)

    def _frames(self) -> list[tuple[int, int, pl.DataFrame]]:
        """The log: ``(first epoch, last epoch, their changes as a Polars frame)``."""
        return self._log.frames()

    def subscribe(self, callback: Callable[[Any], None], *, polars: bool = False) -> None:
        """Call ``callback`` with each completed epoch's non-empty changes, in epoch order: a
        pandas DataFrame of the columns plus ``time`` (the epoch, the same in every row) and
        ``diff``.

        Across a crash, callbacks are at-least-once: after ``restore()`` they are called with
        every epoch after the checkpoint, also those they had been given before the crash. A
        callback that writes somewhere keys what it writes by the epoch
        (``int(changes["time"].iloc[0])``) and overwrites what a redelivery brings again (the
        sinks of :mod:`ddflow.io` do, and are exactly-once). ``polars=True``: a Polars
        DataFrame."""
        self._subscribers.append((callback, polars))

    def changes(self, *, polars: bool = False) -> Any:
        """Every change so far: the columns plus ``time`` (epoch) and ``diff``, consolidated per
        epoch, in epoch order (a pandas DataFrame; ``polars=True``: a Polars one)."""
        log = pl.concat([c for _, _, c in self._frames()]) if self._log else self._empty()
        frame = _changes_polars(log, self.schema)
        return frame if polars else to_pandas(frame, self.schema)

    def snapshot(self, epoch: int | None = None, *, polars: bool = False) -> Any:
        """The collection at a complete epoch (default: the last complete one): the columns plus
        the multiplicity (:attr:`count_column`, ``count`` unless ``output(count=...)`` named it
        otherwise), one row per record with non-zero multiplicity. A pandas DataFrame;
        ``polars=True``: a Polars one (as :meth:`snapshot_polars`)."""
        site = call_site()
        if epoch is None:
            epoch = self.complete_through
        elif epoch > self.complete_through:
            raise TimeError(
                f"snapshot(epoch={epoch}): that epoch is not complete yet "
                f"(complete through {self.complete_through}); call run() after advance_to",
                site=site,
            )
        self._check_kept(epoch, site, "snapshot")
        frame = self.snapshot_polars(epoch)
        return frame if polars else to_pandas(frame, self.schema)

    def _check_kept(self, epoch: int, site: CallSite | None, what: str) -> None:
        if self._restored is not None and epoch < self._restored:
            raise TimeError(
                f"{what}(epoch={epoch}): this output was restored from a checkpoint of epoch "
                f"{self._restored}, which keeps no earlier epoch",
                site=site,
            )

    def to_spark(self, spark: Any = None, epoch: int | None = None) -> Any:
        """The snapshot (:meth:`snapshot`) as a Spark DataFrame, in ``spark`` (default: the
        session of the dataflow's Spark runtime)."""
        site = call_site()
        if spark is None:
            spark = getattr(self.collection.flow.runtime, "spark", None)
            if spark is None:
                raise GraphError(
                    "to_spark() needs a Spark session: give it, to_spark(spark), or run the "
                    "dataflow on dd.SparkRuntime(spark, ...)",
                    site=site,
                )
        if epoch is not None and epoch > self.complete_through:
            raise TimeError(
                f"to_spark(epoch={epoch}): that epoch is not complete yet "
                f"(complete through {self.complete_through}); call run() after advance_to",
                site=site,
            )
        if epoch is not None:
            self._check_kept(epoch, site, "to_spark")
        return spark.createDataFrame(self.snapshot_polars(epoch).to_arrow())

    def snapshot_polars(self, epoch: int | None = None) -> pl.DataFrame:
        if epoch is None:
            epoch = self.complete_through
        self._check_kept(epoch, call_site(), "snapshot_polars")
        names = list(self.schema.names)
        parts = [
            c if last <= epoch else c.filter(pl.col("__t0") <= epoch)
            for first, last, c in self._frames()
            if first <= epoch
        ]
        if not parts:
            return (
                self._empty()
                .select(names)
                .with_columns(pl.lit(0, dtype=pl.Int64).alias(self.count_column))
                .clear()
            )
        acc = (
            pl.concat(parts)
            .group_by(names)
            .agg(pl.col(DIFF).sum().alias(self.count_column))
            .filter(pl.col(self.count_column) != 0)
            .sort(names)
        )
        return acc

    def _empty(self) -> pl.DataFrame:
        return pl.DataFrame(
            schema={**dict(self.schema.polars_schema()), "__t0": pl.Int64, DIFF: pl.Int64}
        )


def _changes_polars(batch: pl.DataFrame, schema: Schema) -> pl.DataFrame:
    names = list(schema.names)
    frame = batch.select([*names, pl.col("__t0").alias("time"), pl.col(DIFF).alias("diff")])
    return frame.sort(["time", *names])


#: pandas' nullable dtypes for ddflow's nullable integer and boolean columns
_PANDAS_NULLABLE = {
    "int8": "Int8",
    "int16": "Int16",
    "int32": "Int32",
    "int64": "Int64",
    "uint8": "UInt8",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "bool": "boolean",
}


def to_pandas(frame: pl.DataFrame, schema: Schema) -> pd.DataFrame:
    """``frame`` as pandas, with a nullable integer or boolean column (``"int64?"``) in
    pandas' nullable dtype (``Int64``, ``boolean``), so that a null stays a null (``pd.NA``)
    instead of turning the column into floats; a list column (``"list[str]"``) holds Python
    lists."""
    import pandas as pd

    out = frame.to_pandas()
    for name, dtype in schema.items():
        if name not in out.columns:
            continue
        target = _PANDAS_NULLABLE.get(dtype.name)
        if dtype.nullable and target is not None:
            out[name] = pd.array(frame.get_column(name).to_list(), dtype=target)
        elif dtype.kind == "list":
            out[name] = pd.Series(frame.get_column(name).to_list(), index=out.index, dtype=object)
    return out


class Probe:
    """Watches the progress of a collection: which epochs are complete there."""

    def __init__(self, collection: Collection, site: CallSite | None) -> None:
        flow = collection.flow
        self.flow = flow
        self.node = flow.plan.add(
            "probe", (collection._node,), collection.schema, flow.plan.top, {"probe": self}, site
        )
        flow.probes.append(self)
        self.op: Any = None

    @property
    def frontier(self) -> list[int]:
        """The epochs that may still change here (empty once everything is complete)."""
        if self.op is None:
            return [0]
        return [t[0] for t in self.op.frontier_now()]

    def done(self, epoch: int) -> bool:
        """Is ``epoch`` complete here?"""
        return all(f > epoch for f in self.frontier)
