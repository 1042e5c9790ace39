"""Input collections: where updates enter a dataflow, at the input's current epoch.

Invariants: an input never loses an accepted update (a rejected call, for a bad schema, a closed
input or a record taken below zero, leaves what was accepted before untouched); every accepted
update is sent exactly once, at the epoch that was current when it was accepted; an input's
epochs only move forward.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from ddflow.api.collection import Collection
from ddflow.api.multiplicities import Multiplicities
from ddflow.differential.batch import DIFF
from ddflow.errors import (
    CallSite,
    CBPError,
    ClosedInputError,
    DDFlowError,
    InputError,
    TimeError,
    call_site,
)
from ddflow.plan.nodes import Node
from ddflow.timely.lattice import EPOCHS

if TYPE_CHECKING:
    from ddflow.api.dataflow import Dataflow
    from ddflow.api.files import ParquetSplit
    from ddflow.differential.kernel import RowBatches

__all__ = ["InputCollection"]

#: an input batch's one time column: the epoch
(TIME,) = EPOCHS.columns()


class InputCollection(Collection):
    """An input: a collection you change with ``insert``/``remove`` and move with
    ``advance_to``.

    An input is a table: no record's multiplicity goes below zero. It keeps the accumulated
    multiplicity of every record it has accepted (all epochs, the open one included; a columnar
    copy of its live records, see :mod:`ddflow.api.multiplicities`), and a ``remove``,
    ``remove_frame``, ``update`` or ``insert_frame(..., diff=...)`` that would take a record
    below zero raises :class:`~ddflow.errors.InputError` naming the first such record, its
    multiplicity and the caller's line. The call is then not accepted at all, and what was
    accepted before stays. A call's changes to one record are summed first, so a call that
    inserts a record and removes it is fine. An input made with ``signed=True``
    (``flow.input(name, schema, signed=True)``) holds signed changes: it checks nothing and
    keeps nothing. (A Spark DataFrame given to an input is collected through Arrow, unless the
    input is signed and the runtime stages DataFrames for its workers to read: see
    ``dd.SparkRuntime``'s ``staging``.)

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    >>> edges.insert([(1, 2), (2, 3)]); edges.remove([(1, 2)])
    >>> edges.advance_to(1); edges.epoch
    1
    >>> edges.remove([(1, 2)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ddflow.errors.InputError: remove on input 'edges' would take record (1, 2) below zero: ...
    """

    def __init__(
        self, flow: Dataflow, node: Node, name: str, epoch: int, *, signed: bool = False
    ) -> None:
        super().__init__(flow, node)
        self.name = name
        self._epoch = epoch
        self.closed = False
        #: whether the input's multiplicities may go below zero (then nothing is checked)
        self.signed = signed
        #: the accumulated multiplicity of every record accepted, for the check
        self._multiplicities: Multiplicities | None = (
            None if signed else Multiplicities(self.schema.polars_schema())
        )
        #: updates not sent yet: data frames, each with its diff (one for every row, or one
        #: per row); the columns of a diff are added when the epoch's batch is made
        self._buffer: list[tuple[pl.DataFrame, int | pl.Series]] = []
        self._messages: list[tuple[int, pl.DataFrame]] = []
        #: files the workers read (see :meth:`read_parquet`), by epoch, not handed out yet
        self._splits: list[tuple[int, list[ParquetSplit]]] = []
        self._op: Any = None
        #: the latest epoch of updates the dataflow has taken (see ddflow.api.checkpoints)
        self._entered = -1
        self._batch_columns: dict[str, Any] | None = None
        #: the CBP stages that read this input as a flow, ``(stage, flow)``: a flow carries
        #: records added, so a call that retracts a record of an earlier epoch is refused at
        #: its line (:meth:`_check_cbp`)
        self._cbp_readers: list[tuple[str, str]] = []
        #: with such readers, each record's net change in the current epoch (none at zero)
        self._epoch_net: dict[tuple[Any, ...], int] = {}

    @property
    def epoch(self) -> int:
        """The epoch at which inserted updates take effect."""
        return self._epoch

    def _check_open(self, site: CallSite | None, what: str) -> None:
        self._flow._check_usable(site)
        if self.closed:
            raise ClosedInputError(f"{what} on input {self.name!r}, which is closed", site=site)

    def insert(self, rows: Iterable[Any]) -> None:
        """Insert records (tuples in column order, dicts, or scalars for one column)."""
        site = call_site()
        self._check_open(site, "insert")
        self._accept(self._rows(rows, site), 1, site, "insert")

    def remove(self, rows: Iterable[Any]) -> None:
        """Remove records (one copy of each). On a checked input (the default), removing a
        record more times than it is present raises :class:`~ddflow.errors.InputError` and
        removes nothing."""
        site = call_site()
        self._check_open(site, "remove")
        self._accept(self._rows(rows, site), -1, site, "remove")

    def update(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Apply ``(record..., diff)`` tuples: each record's multiplicity changes by ``diff``."""
        site = call_site()
        self._check_open(site, "update")
        rows = list(rows)
        n = len(self.schema.names)
        for i, r in enumerate(rows):
            if not isinstance(r, (tuple, list)) or len(r) != n + 1:
                raise InputError(
                    f"update row {i} is {r!r}: expected {n} values and a diff", site=site
                )
        diffs = [r[-1] for r in rows]
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in diffs):
            raise InputError("update diffs must be integers", site=site)
        data = self._rows([r[:-1] for r in rows], site)
        self._accept(data, pl.Series(DIFF, diffs, dtype=pl.Int64), site, "update")

    def insert_frame(self, frame: Any, diff: str | None = None) -> None:
        """Insert the rows of a pandas, Polars or Arrow DataFrame (or a Spark DataFrame, which is
        collected). With ``diff=name``, that column holds each row's change of multiplicity."""
        site = call_site()
        self._check_open(site, "insert_frame")
        if self.signed and _is_spark(frame):  # (large: staged for the workers to read)
            stage = getattr(self._flow.runtime, "stage", None)
            columns = self._columns(diff)
            if stage is not None and all(c in frame.columns for c in columns):
                path = stage(frame.select(*columns))
                if path is not None:
                    self._read_staged(path, diff)
                    return
        frame = _to_local_frame(frame)
        diffs = None
        if diff is not None:
            frame = _as_polars(frame)
            if diff not in frame.columns:
                raise InputError(f"insert_frame: no diff column {diff!r}", site=site)
            diffs = frame.get_column(diff)
            if not diffs.dtype.is_integer() or diffs.null_count():
                raise InputError(
                    f"insert_frame: diff column {diff!r} must be non-null integers", site=site
                )
            frame = frame.drop(diff)
        try:
            data = self.schema.frame_to_frame(frame)
        except DDFlowError as e:  # re-raised pointing at the user's line
            raise type(e)(e.message, site=site) from None
        if diffs is None:
            self._accept(data, 1, site, "insert_frame")
        else:
            self._accept(data, diffs.cast(pl.Int64).alias(DIFF), site, "insert_frame")

    def remove_frame(self, frame: Any) -> None:
        """Remove the rows of a DataFrame (one copy each)."""
        site = call_site()
        self._check_open(site, "remove_frame")
        try:
            data = self.schema.frame_to_frame(_to_local_frame(frame))
        except DDFlowError as e:  # re-raised pointing at the user's line
            raise type(e)(e.message, site=site) from None
        self._accept(data, -1, site, "remove_frame")

    def read_parquet(self, paths: str | Iterable[str], diff: str | None = None) -> None:
        """Insert the rows of Parquet files (paths of files, or of folders read whole), read
        by the workers: each reads a share of the files' row groups, so that the data never
        passes through this process (on Spark, the driver). With ``diff=name``, that integer
        column holds each row's change of multiplicity.

        Only the files' footers are read here, to check them against the schema (a file that
        is not Parquet, a missing column, a column of another type, nulls where the schema
        allows none): a bad file raises at this line and nothing of the call is accepted.
        The files must stay in place until the epoch has run, and every worker must reach
        them (on a Spark cluster: a shared file system). On a checked input (the default)
        the rows are read here instead, because checking multiplicities needs every record
        in this process; make the input with ``signed=True`` to have the workers read them."""
        from ddflow.api.files import parquet_splits

        site = call_site()
        self._check_open(site, "read_parquet")
        if diff is not None and diff in self.schema.names:
            raise InputError(f"read_parquet: the diff column {diff!r} is in the schema", site=site)
        splits = parquet_splits(paths, self.schema, diff, site)
        if not splits:
            return
        if self._multiplicities is not None:
            try:
                data = pl.concat([s.read(self._epoch) for s in splits])
            except DDFlowError as e:
                raise type(e)(e.message, site=site) from None
            self._accept(data.drop(TIME, DIFF), data.get_column(DIFF), site, "read_parquet")
            return
        self._flush()  # (what was inserted before is sent before: the order of the calls)
        self._splits.append((self._epoch, splits))
        self._activate()

    def _columns(self, diff: str | None) -> list[str]:
        return [*self.schema.names, *([diff] if diff else [])]

    def _read_staged(self, path: str, diff: str | None) -> None:
        """:meth:`read_parquet` of files staged for the workers (by Spark), removed once the
        flow has run them (or at once if the call fails)."""
        try:
            self.read_parquet(path, diff=diff)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        self._flow._after_run.append(lambda: shutil.rmtree(path, ignore_errors=True))

    def _rows(self, rows: Iterable[Any], site: CallSite | None) -> pl.DataFrame:
        try:
            return self.schema.rows_to_frame(rows)
        except DDFlowError as e:  # re-raised pointing at the user's line
            raise type(e)(e.message, site=site) from None

    def _accept(
        self, data: pl.DataFrame, diff: int | pl.Series, site: CallSite | None, what: str
    ) -> None:
        """Buffer a call's updates, once checked."""
        if data.height:
            net = self._check_cbp(data, diff, site, what)
            self._check(data, diff, site, what)
            self._buffer.append((data, diff))
            for record, change in (net or {}).items():
                total = self._epoch_net.get(record, 0) + change
                if total:
                    self._epoch_net[record] = total
                else:
                    self._epoch_net.pop(record, None)

    def _check_cbp(
        self, data: pl.DataFrame, diff: int | pl.Series, site: CallSite | None, what: str
    ) -> dict[tuple[Any, ...], int] | None:
        """For an input a CBP stage reads: this call's net change of each record, or a
        :class:`~ddflow.errors.CBPError` at the user's line where the call retracts a record
        (a record inserted and removed in one epoch cancel)."""
        if not self._cbp_readers:
            return None
        changes = self._changes(data, diff)
        for record, change in changes.items():
            if self._epoch_net.get(record, 0) + change < 0:
                stage, flow = self._cbp_readers[0]
                raise CBPError(
                    f"{what} on input {self.name!r} retracts {record!r} in epoch "
                    f"{self._epoch}, which CBP stage {stage!r} reads as its flow {flow!r}: a "
                    "CBP flow carries records added, not retractions (feed it a "
                    "collection's insertions, or keep the change in state); nothing of this "
                    "call was accepted",
                    site=site,
                )
        return changes

    @staticmethod
    def _changes(data: pl.DataFrame, diff: int | pl.Series) -> dict[tuple[Any, ...], int]:
        changes: dict[tuple[Any, ...], int] = {}
        diffs = [diff] * data.height if isinstance(diff, int) else diff.to_list()
        for record, d in zip(data.iter_rows(), diffs, strict=True):
            changes[record] = changes.get(record, 0) + d
        return changes

    def _check(
        self, data: pl.DataFrame, diff: int | pl.Series, site: CallSite | None, what: str
    ) -> None:
        """Add a call's updates to the input's multiplicities, or raise (adding none of them)
        if they would take a record below zero."""
        if self._multiplicities is None:
            return
        short = self._multiplicities.apply(data, diff)
        if short is not None:
            raise InputError(
                f"{what} on input {self.name!r} would take record {short.record!r} below "
                f"zero: its multiplicity is {short.multiplicity} and this call changes it by "
                f"{short.change}; nothing of this call was accepted (an input whose "
                "multiplicities may go below zero is made with "
                "flow.input(name, schema, signed=True))",
                site=site,
            )

    def _flush(self) -> None:
        if not self._buffer:
            return
        buffer, self._buffer = self._buffer, []
        names = list(self.schema.names)
        k = self._flow.kernels
        batch = None
        if buffer and k.capabilities.row_batches:
            rk = cast("RowBatches", k)
            if sum(f.height for f, _ in buffer) <= rk.small_rows:
                # a few updates (a small epoch's) become the runtime's rows directly: building
                # the frame first costs a few Polars calls
                batch = rk.from_rows(
                    self._batch_schema(), lambda: _update_rows(buffer, self._epoch)
                )
        if batch is None:
            frames = [
                f.with_columns(
                    pl.lit(d, dtype=pl.Int64).alias(DIFF) if isinstance(d, int) else d.alias(DIFF)
                )
                for f, d in buffer
            ]
            if not frames:
                frames.append(pl.DataFrame(schema=self._batch_schema()).drop(TIME))
            data = pl.concat(frames) if len(frames) > 1 else frames[0]
            batch = k.from_polars(
                data.with_columns(pl.lit(self._epoch, dtype=pl.Int64).alias(TIME)).select(
                    [*names, TIME, DIFF]
                )
            )
        self._messages.append((self._epoch, batch))

    def _batch_schema(self) -> dict[str, Any]:
        """The columns of an input batch: the data's, its epoch and its diff (made once: a
        Polars schema costs more to build than to copy, at every epoch)."""
        if self._batch_columns is None:
            self._batch_columns = {
                **dict(self.schema.polars_schema()),
                TIME: pl.Int64,
                DIFF: pl.Int64,
            }
        return dict(self._batch_columns)

    def _advance(self, epoch: int, site: CallSite | None) -> None:
        self._flush()
        self._epoch = epoch
        self._epoch_net = {}
        self._activate()

    def advance_to(self, epoch: int) -> None:
        """Close the epochs before ``epoch`` on this input; later inserts belong to ``epoch``."""
        site = call_site()
        self._check_open(site, "advance_to")
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise TimeError(f"advance_to({epoch!r}): epochs are integers", site=site)
        if epoch < self._epoch:
            raise TimeError(
                f"advance_to({epoch}) on input {self.name!r} goes back: it is at epoch "
                f"{self._epoch}",
                site=site,
            )
        if epoch > self._epoch:
            self._advance(epoch, site)

    def close(self) -> None:
        """No more updates: every epoch of this input is closed."""
        if self.closed:
            return
        self._flush()
        self.closed = True
        self._multiplicities = None  # no more changes to check
        self._activate()

    def _activate(self) -> None:
        if (
            self._op is not None
            and self._op.worker is not None
            and self._op.worker.tracker is not None
        ):
            self._op.activate()

    def _pending_work(self) -> bool:
        """Messages to send, or a capability to downgrade or drop."""
        if self._messages or self._splits:
            return True
        if self._op is None:
            return False
        held: list[tuple[int, ...]] = self._op.held()
        return held != ([] if self.closed else [(self._epoch,)])

    # the InputSource protocol of ddflow.differential.operators.io.InputOp
    def take_messages(self) -> list[tuple[int, pl.DataFrame]]:
        out, self._messages = self._messages, []
        if out:
            self._entered = max(self._entered, *(e for e, _ in out))
        return out

    def take_splits(self) -> list[tuple[int, list[ParquetSplit]]]:
        out, self._splits = self._splits, []
        self._entered = max([self._entered, *(e for e, _ in out)])
        return out

    def current_epoch(self) -> int | None:
        return None if self.closed else self._epoch

    def earliest_epoch(self) -> int | None:
        epochs = [e for e, _ in self._messages] + [e for e, _ in self._splits]
        if not self.closed:
            epochs.append(self._epoch)
        return min(epochs) if epochs else None

    def attach(self, op: Any) -> None:
        self._op = op

    def _restore(self, epoch: int, closed: bool, counts: pl.DataFrame | None, count: str) -> None:
        """Be as a checkpoint recorded this input (:mod:`ddflow.api.checkpoints`): at
        ``epoch`` (or closed), with nothing buffered, and, checked, with the multiplicities
        ``counts`` (the records and their multiplicities in column ``count``)."""
        self._epoch = epoch
        self.closed = closed
        self._buffer, self._messages, self._splits = [], [], []
        self._entered = epoch - 1
        self._op = None
        if self.signed or closed:
            self._multiplicities = None
            return
        self._multiplicities = Multiplicities(self.schema.polars_schema())
        if counts is not None and counts.height:
            self._multiplicities.apply(counts.drop(count), counts.get_column(count))


def _update_rows(
    buffer: list[tuple[pl.DataFrame, int | pl.Series]], epoch: int
) -> list[tuple[Any, ...]]:
    """The rows of an input's buffered updates (the schema's columns, then epoch and diff).
    (The schema's conversions give every buffered frame its columns in that order.)"""
    rows: list[tuple[Any, ...]] = []
    for f, d in buffer:
        data = f.rows()
        if isinstance(d, int):
            rows += [(*r, epoch, d) for r in data]
        else:
            rows += [(*r, epoch, x) for r, x in zip(data, d.to_list(), strict=True)]
    return rows


def _as_polars(frame: Any) -> pl.DataFrame:
    if isinstance(frame, pl.LazyFrame):
        return frame.collect()
    if isinstance(frame, pl.DataFrame):
        return frame
    pd = sys.modules.get("pandas")  # if pandas was never imported, frame cannot be pandas
    if pd is not None and isinstance(frame, pd.DataFrame):
        return pl.from_pandas(frame)
    return pl.DataFrame(pl.from_arrow(frame))


def _is_spark(frame: Any) -> bool:
    return type(frame).__module__.startswith("pyspark")


def _to_local_frame(frame: Any) -> Any:
    """A Spark DataFrame is collected through Arrow; other frames pass through."""
    if _is_spark(frame):
        return pl.from_arrow(frame.toArrow())
    return frame
