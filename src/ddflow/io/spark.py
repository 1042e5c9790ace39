"""The Spark data pipeline: sources that turn Spark data into input changes, sinks that turn
output changes back into Spark data. Used by both runtimes (on the local runtime the rows are
moved through Arrow; on the Spark runtime they stay Spark DataFrames).

Sources

* :func:`insert_dataframe`: a DataFrame (or :func:`insert_table`: a table) as one epoch's
  insertions, or, with ``diff=``, a DataFrame of changes;
* :class:`FolderSource`: a folder of Parquet/CSV/JSON files where each new file or sub-folder
  (in name order) is one epoch;
* :class:`StreamingSource`: a Structured Streaming query whose micro-batches become epochs,
  through ``foreachBatch``; a replayed micro-batch (same batch id) is ignored;
* :class:`EventTimeWindow`: a sliding or tumbling window over an event-time column; records
  whose window has expired are retracted.

Sinks

* :class:`ParquetChangeLog`: each completed epoch's changes (columns + ``time`` + ``diff``)
  written to ``path/epoch=N``;
* :class:`ParquetSnapshot`: the output's current contents kept in ``path``.

Invariant of both sinks: an epoch is written whole or not at all (write to a temporary
directory, then rename over the epoch's directory); writing an epoch again replaces it, so a
restart after a failure never duplicates changes. ``pyspark`` is imported only here and in the
Spark kernels.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import uuid
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.errors import InputError, SchemaError, call_site
from ddflow.schema import Schema
from ddflow.timely.lattice import EPOCHS

if TYPE_CHECKING:
    from ddflow.api.dataflow import Dataflow
    from ddflow.api.inputs import InputCollection
    from ddflow.api.outputs import Output

(TIME,) = EPOCHS.columns()

__all__ = [
    "EventTimeWindow",
    "FolderSource",
    "ParquetChangeLog",
    "ParquetSnapshot",
    "StreamingSource",
    "insert_dataframe",
    "insert_table",
    "read_change_log",
    "spark_schema",
]


def spark_schema(input: InputCollection) -> Any:
    """The Spark ``StructType`` of an input's schema (for readers of files and streams)."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    fields = [
        StructField(n, _parse_datatype_string(dt.spark_type_name), dt.nullable)
        for n, dt in input.schema.items()
    ]
    return StructType(fields)


def _check_columns(input: InputCollection, df: Any, diff: str | None) -> None:
    want = list(input.schema.names)
    have = [c for c in df.columns if c != diff]
    missing = [c for c in want if c not in have]
    extra = [c for c in have if c not in want]
    if missing or extra:
        raise SchemaError(
            f"Spark DataFrame for input {input.name!r} does not fit its schema: "
            + (f"missing {missing} " if missing else "")
            + (f"unexpected {extra}" if extra else ""),
            site=call_site(),
        )


def insert_dataframe(
    input: InputCollection, df: Any, diff: str | None = None, *, staging: str | None = None
) -> None:
    """Insert a Spark DataFrame's rows into ``input`` at its current epoch; with ``diff=name``
    that integer column holds each row's change of multiplicity (a DataFrame of changes).

    On an input made with ``signed=True``, Spark can write the DataFrame as Parquet, its
    partitions in parallel, for the workers to read a share each
    (:meth:`~ddflow.api.inputs.InputCollection.read_parquet`): in ``staging`` if given (a
    directory every worker reaches), else where the runtime stages DataFrames
    (``dd.SparkRuntime``'s ``staging``). The files are removed once the flow has run them.
    Otherwise the rows are collected through the driver."""
    _check_columns(input, df, diff)
    if diff is not None and diff not in df.columns:
        raise InputError(f"no diff column {diff!r} in the DataFrame", site=call_site())
    if staging is not None and input.signed:
        from ddflow.runtime.spark.runtime import stage_dataframe

        try:
            path = stage_dataframe(df.select(*input._columns(diff)), staging)
        except Exception as e:
            raise InputError(f"cannot stage the DataFrame in {staging}: {root_cause(e)}") from e
        input._read_staged(path, diff)
        return
    input.insert_frame(df, diff=diff)


def insert_table(input: InputCollection, spark: Any, table: str) -> None:
    """Insert the rows of a Spark table into ``input`` at its current epoch."""
    insert_dataframe(input, spark.table(table).select(*input.schema.names))


class FolderSource:
    """A folder whose new files (or sub-folders) are epochs.

    ``poll()`` reads every entry not seen before, in name order, each as the insertions of one
    epoch: it inserts, advances the flow by one epoch and runs it. Entries whose name starts
    with ``_`` or ``.`` are ignored (temporary files of writers). Parquet files (without
    reader ``options``) are read with Arrow by the workers, a share each, when the input is
    made with ``signed=True`` (see :meth:`~ddflow.api.inputs.InputCollection.read_parquet`);
    otherwise, and for CSV and JSON, Spark reads them and the rows pass through the driver.

    * ``spark``: the session that reads (None: Parquet only, read with Arrow);
    * ``input``: the input the entries are inserted into;
    * ``path``: the folder;
    * ``format``: ``"parquet"`` (the default), ``"csv"`` or ``"json"``, with Spark reader
      ``options``;
    * ``diff``: the name of an integer column that says by how much each record's count
      changes (removals too), instead of every row being an insertion.
    """

    def __init__(
        self,
        spark: Any,
        input: InputCollection,
        path: str,
        format: str = "parquet",
        options: dict[str, str] | None = None,
        diff: str | None = None,
    ) -> None:
        if format not in ("parquet", "csv", "json"):
            raise InputError(f"unknown format {format!r}: parquet, csv or json", site=call_site())
        self.spark = spark
        self.input = input
        self.path = path
        self.format = format
        self.options = dict(options or {})
        if format == "csv":
            self.options.setdefault("header", "true")
        self.diff = diff
        self.seen: set[str] = set()
        # (its position goes into the flow's checkpoints: restored, it reads on from there)
        input.flow._register_source(f"folder {input.name} {os.path.abspath(path)}", self)

    def checkpoint_values(self) -> Any:
        return {"seen": sorted(self.seen)}

    def restore_values(self, values: Any) -> None:
        self.seen = set(values["seen"])

    def pending(self) -> list[str]:
        if not os.path.isdir(self.path):
            return []
        names = sorted(n for n in os.listdir(self.path) if not n.startswith(("_", ".")))
        return [n for n in names if n not in self.seen]

    def poll(self) -> list[int]:
        """Load every new entry as an epoch; returns the epochs loaded. (An entry counts as
        read before its epoch runs: a checkpoint the run takes has it.)"""
        flow = self.input.flow
        loaded = []
        for name in self.pending():
            epoch = self.input.epoch
            path = os.path.join(self.path, name)
            if self.format == "parquet" and not self.options:
                # (read by the workers, each a share of the row groups: see
                # InputCollection.read_parquet)
                self.input.read_parquet(path, diff=self.diff)
            else:
                self.input.insert_frame(self._read_with_spark(path), diff=self.diff)
            self.seen.add(name)
            flow.advance_to(epoch + 1)
            flow.run()
            loaded.append(epoch)
        return loaded

    def _read_with_spark(self, path: str) -> pl.DataFrame:
        schema = spark_schema(self.input)
        if self.diff is not None:
            from pyspark.sql.types import LongType, StructField

            schema = schema.add(StructField(self.diff, LongType(), False))
        reader = self.spark.read.format(self.format).options(**self.options).schema(schema)
        try:
            df = reader.load(path).select(*schema.fieldNames())
            rows = df.toArrow()
        except Exception as e:  # a malformed file: name it, keep what was accepted
            raise InputError(f"cannot read {path}: {root_cause(e)}") from e
        return pl.DataFrame(pl.from_arrow(rows))


class EventTimeWindow:
    """A window over an event-time column in front of an input: records enter the input when
    they arrive and are retracted when their window expires.

    * ``slide=None``: a sliding window of ``size``; a record is live while
      ``time > watermark - size``;
    * ``slide=size``: tumbling windows; a record is live while its window
      ``[k*size, (k+1)*size)`` is the current one (the one holding the watermark).

    The watermark is the largest event time seen, less ``lateness``. Records arriving at or
    below the expiry bound are dropped (and counted in ``dropped``). The live records are kept
    here, so that their retractions can be sent. ``input`` is the input the window feeds and
    ``time_column`` its integer column of event times.
    """

    def __init__(
        self,
        input: InputCollection,
        time_column: str,
        size: int,
        slide: int | None = None,
        lateness: int = 0,
    ) -> None:
        if time_column not in input.schema.names:
            raise SchemaError(
                f"no event-time column {time_column!r} in the input's schema", site=call_site()
            )
        if slide is not None and slide != size:
            raise InputError(
                "slide must be None (sliding) or equal to size (tumbling)", site=call_site()
            )
        self.input = input
        self.column = time_column
        self.size = size
        self.slide = slide
        self.lateness = lateness
        self.watermark: int | None = None
        self.live = pl.DataFrame(schema=dict(input.schema.polars_schema()))
        self.dropped = 0
        input.flow._register_source(f"window {input.name}", self)

    def checkpoint_values(self) -> Any:
        """(The live records and the watermark go into the flow's checkpoints.)"""
        return {"watermark": self.watermark, "dropped": self.dropped, "live": self.live}

    def restore_values(self, values: Any) -> None:
        self.watermark, self.dropped, self.live = (
            values["watermark"],
            values["dropped"],
            values["live"],
        )

    def _bound(self) -> int | None:
        """Records with event time <= bound have expired."""
        if self.watermark is None:
            return None
        if self.slide is None:
            return self.watermark - self.size
        return (self.watermark // self.size) * self.size - 1

    def add(self, frame: Any) -> None:
        """Insert new records and retract those whose window has expired (at the input's
        current epoch)."""
        data = self.input.schema.frame_to_frame(frame)
        times = data.get_column(self.column)
        if data.height:
            top = int(times.max()) - self.lateness  # type: ignore[arg-type]
            self.watermark = top if self.watermark is None else max(self.watermark, top)
        bound = self._bound()
        if bound is not None:
            late = data.filter(pl.col(self.column) <= bound)
            self.dropped += late.height
            data = data.filter(pl.col(self.column) > bound)
            expired = self.live.filter(pl.col(self.column) <= bound)
            if expired.height:
                self.input.remove_frame(expired)
            self.live = self.live.filter(pl.col(self.column) > bound)
        if data.height:
            self.input.insert_frame(data)
            self.live = pl.concat([self.live, data])

    def add_spark(self, df: Any) -> None:
        self.add(pl.from_arrow(df.toArrow()))


class StreamingSource:
    """Feeds a Structured Streaming DataFrame into a flow: each micro-batch is one epoch.

    ``foreachBatch`` calls back on the driver; the callback inserts the batch (through ``into``:
    an input, or an :class:`EventTimeWindow`), advances the flow one epoch and runs it. A
    micro-batch id at or below the last one processed is a replay after a failure and is
    skipped, so each micro-batch lands in exactly one epoch. With ``staging`` (a directory
    every worker can reach) and an input made with ``signed=True``, each micro-batch is
    written there by Spark and read by the workers, as :func:`insert_dataframe` does.

    * ``stream``: the streaming DataFrame (``spark.readStream...``);
    * ``into``, ``flow``: where its rows go, and the flow that input belongs to;
    * ``trigger``: the stream's trigger (``{"processingTime": "1 second"}``...; default:
      Spark's);
    * ``checkpoint``: Spark's checkpoint location for the stream (where it records which
      micro-batches were committed);
    * ``staging``: see above.
    """

    def __init__(
        self,
        stream: Any,
        into: InputCollection | EventTimeWindow,
        flow: Dataflow,
        trigger: dict[str, Any] | None = None,
        checkpoint: str | None = None,
        staging: str | None = None,
    ) -> None:
        if flow.checkpoint_every not in (None, 1):
            raise InputError(
                "a StreamingSource needs Dataflow(checkpoint_every=1) on a flow that takes "
                "checkpoints: Spark commits a micro-batch once it has run, so each must be in a "
                "checkpoint before the next",
                site=call_site(),
            )
        self.flow = flow
        self.into = into
        self.staging = staging
        self.last_batch = -1
        flow._register_source(f"stream {self._input().name}", self)
        self.batches = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        writer = stream.writeStream.foreachBatch(self._on_batch)
        if trigger:
            writer = writer.trigger(**trigger)
        if checkpoint:
            writer = writer.option("checkpointLocation", checkpoint)
        self.query = writer.start()

    def checkpoint_values(self) -> Any:
        return {"last_batch": self.last_batch}

    def restore_values(self, values: Any) -> None:
        self.last_batch = int(values["last_batch"])

    def _input(self) -> InputCollection:
        return self.into.input if isinstance(self.into, EventTimeWindow) else self.into

    def _on_batch(self, df: Any, batch_id: int) -> None:
        with self._lock:
            try:
                if batch_id <= self.last_batch:
                    return
                inp = self._input()
                if isinstance(self.into, EventTimeWindow):  # (it keeps the live records)
                    self.into.add(pl.DataFrame(pl.from_arrow(df.toArrow())))
                else:
                    insert_dataframe(inp, df.select(*inp.schema.names), staging=self.staging)
                self.flow.advance_to(inp.epoch + 1)
                # (counted before the run: a checkpoint the run takes has it)
                self.last_batch = batch_id
                self.flow.run()
                self.batches += 1
            except BaseException as e:
                self.error = e
                raise
            finally:
                self._done.notify_all()

    def wait_for(self, batches: int, timeout: float = 120.0) -> None:
        """Block until ``batches`` micro-batches have been processed (or fail)."""
        with self._lock:
            ok = self._done.wait_for(
                lambda: self.batches >= batches or self.error is not None, timeout=timeout
            )
        if self.error is not None:
            raise self.error
        if not ok:
            raise TimeoutError(f"only {self.batches} of {batches} micro-batches arrived")

    def process_available(self) -> None:
        """Process what the source has now (``processAllAvailable``)."""
        self.query.processAllAvailable()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        """Stop the query, and let go of the flow: Spark's callback server keeps this source
        (its ``foreachBatch`` function) for the session's life, and a flow kept alive keeps
        its workers (on Spark, their task slots)."""
        self.query.stop()
        self.flow = None  # type: ignore[assignment]
        self.into = None  # type: ignore[assignment]


# ---------------------------------------------------------------------- sinks


_CAUSED_BY = re.compile(r"^\s*Caused by: (?:[\w$.]+(?:Exception|Error)): (.+)$", re.MULTILINE)
_JAVA_PREFIX = re.compile(r"^(?:\[[A-Z_.]+\] )?(?:[a-z]+\.)+[\w$]+(?:Exception|Error): ")


def root_cause(error: BaseException) -> str:
    """The innermost cause of a Spark error, in one line: the message of the last ``Caused
    by:`` of the Java stack trace a Spark exception carries (``... is not a Parquet file``),
    or the first line of the error's own message, without Java class names.

    >>> root_cause(RuntimeError("Job aborted.\\n\\tat org.x.Y(Y.java:1)\\nCaused by: "
    ...     "java.lang.RuntimeException: f.parquet is not a Parquet file\\n\\tat a.b(c)"))
    'f.parquet is not a Parquet file'
    """
    text = str(error)
    causes = _CAUSED_BY.findall(text)
    line = causes[-1] if causes else next((ln for ln in text.splitlines() if ln.strip()), "")
    return _JAVA_PREFIX.sub("", line.strip()) or type(error).__name__


def _replace_dir(tmp: str, final: str) -> None:
    """Move a finished temporary directory over ``final`` (replacing an earlier attempt)."""
    if os.path.exists(final):
        shutil.rmtree(final)
    os.replace(tmp, final)


def _write_parquet(frame: pl.DataFrame, directory: str, spark: Any) -> None:
    parent = os.path.dirname(directory.rstrip("/")) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f"_tmp-{uuid.uuid4().hex}")
    if spark is not None:
        spark.createDataFrame(frame.to_arrow()).write.mode("overwrite").parquet(tmp)
    else:
        os.makedirs(tmp)
        frame.write_parquet(os.path.join(tmp, "part-0.parquet"))
    _replace_dir(tmp, directory)


def _sink_node(output: Output, writer: Any, committer: Any) -> bool:
    """Add a sink the workers write in parallel (a plan node reading the output's collection,
    see :class:`~ddflow.differential.operators.io.PartSinkOp`); False if the flow has started
    (its plan is fixed: the driver writes the sink then)."""
    collection = output.collection
    plan = collection.flow.plan
    if plan.frozen:
        return False
    plan.add(
        "sink",
        (collection._node,),
        collection.schema,
        plan.top,
        {"writer": writer, "committer": committer},
        call_site(),
    )
    return True


def _write_file(frame: pl.DataFrame, path: str) -> str:
    """Write ``frame`` as the Parquet file ``path`` (a temporary file renamed: whole or
    absent); the path."""
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{name}-{uuid.uuid4().hex}.tmp")
    frame.write_parquet(tmp)
    os.replace(tmp, path)
    return path


class _ChangeLogParts:
    """A worker's parts of a change log: an epoch's changes it owns, in a directory of the
    epoch's attempt that the commit renames into place."""

    def __init__(self, path: str, attempt: str) -> None:
        self.path, self.attempt = path, attempt

    def staged(self, epoch: int) -> str:
        return os.path.join(self.path, f"_tmp-epoch={epoch:09d}-{self.attempt}")

    def write_part(
        self, epoch: int, changes: pl.DataFrame, worker: int, state: Any
    ) -> tuple[Any, Any]:
        if not changes.height:
            return None, state
        frame = changes.rename({TIME: "time", DIFF: "diff"})
        path = os.path.join(self.staged(epoch), f"part-{worker:05d}.parquet")
        return _write_file(frame, path), state


class ParquetChangeLog:
    """Appends each completed epoch's changes to a Parquet change log at ``path/epoch=N``.

    Made before the flow first runs, the log is written by the workers in parallel: each
    writes the changes of the records it owns as a part of the epoch's directory, and the
    driver renames the directory into place once every part is written. Made later, the
    driver writes each epoch (with Spark if ``spark`` is given, else Arrow). Spark reads the
    log with ``spark.read.parquet(path)``, ``epoch`` a partition column. ``output`` is the
    output (``collection.output()``) whose changes it writes."""

    def __init__(self, output: Output, path: str, spark: Any = None) -> None:
        self.path = path
        self.spark = spark
        self.schema = output.schema
        self.written: list[int] = []
        self._parts = _ChangeLogParts(path, uuid.uuid4().hex)
        if not _sink_node(output, self._parts, self):
            output.subscribe(self.write, polars=True)

    def commit(self, epoch: int, parts: list[Any]) -> None:
        """(Every part of ``epoch`` is written: see the class.)"""
        if parts:
            _replace_dir(self._parts.staged(epoch), self._epoch_dir(epoch))
            self.written.append(epoch)

    def checkpoint_values(self) -> Any:
        return {"written": self.written}

    def restore_values(self, values: Any) -> None:
        self.written = list(values["written"])

    def _epoch_dir(self, epoch: int) -> str:
        return os.path.join(self.path, f"epoch={epoch:09d}")

    def write(self, changes: Any, epoch: int | None = None) -> None:
        """Write changes (columns, ``time``, ``diff``) from here, each epoch's replacing what
        was written for it before."""
        frame = changes if isinstance(changes, pl.DataFrame) else pl.from_pandas(changes)
        if epoch is None:
            epochs = frame.get_column("time").unique().to_list()
            for e in sorted(epochs):
                self.write(frame.filter(pl.col("time") == e), int(e))
            return
        _write_parquet(frame, self._epoch_dir(epoch), self.spark)
        self.written.append(epoch)


class _SnapshotParts:
    """A worker's part of a snapshot: the output's records it owns (state: their counts),
    rewritten at each epoch that changes them, beside the snapshot's directory."""

    def __init__(self, parts: str, names: list[str]) -> None:
        self.parts, self.names = parts, names

    def write_part(
        self, epoch: int, changes: pl.DataFrame, worker: int, state: Any
    ) -> tuple[Any, Any]:
        if not changes.height:
            return None, state
        delta = changes.select([*self.names, pl.col(DIFF).alias("count")])
        live = delta if state is None else pl.concat([state, delta])
        live = (
            live.group_by(self.names, maintain_order=True)
            .agg(pl.col("count").sum())
            .filter(pl.col("count") != 0)
        )
        path = os.path.join(self.parts, f"part-{worker:05d}-{epoch:09d}.parquet")
        return (worker, _write_file(live, path)), live

    def rewrite_part(self, part: Any, state: Any) -> None:
        """(After a restore: the part a worker last wrote, from its state, if it is gone.)"""
        _, path = part
        if not os.path.exists(path):
            _write_file(state, path)


class ParquetSnapshot:
    """Keeps ``path`` holding the output's contents (columns + ``count``) as of the last
    completed epoch (every ``every`` epochs); ``path/_EPOCH`` names that epoch.

    Made before the flow first runs, it is written by the workers in parallel: each keeps
    the records it owns and rewrites its part when they change; at each epoch the driver
    links the latest parts into a new directory and renames it over ``path``. Made later,
    the driver writes it (with ``spark``'s session if given, else Arrow)."""

    def __init__(self, output: Output, path: str, spark: Any = None, every: int = 1) -> None:
        self.output = output
        self.path = path
        self.spark = spark
        self.every = every
        self.epoch: int | None = None
        parent, name = os.path.split(os.path.abspath(path))
        self._parts = _SnapshotParts(
            os.path.join(parent, f".{name}.parts"), list(output.schema.names)
        )
        self._latest: dict[int, str] = {}
        if not _sink_node(output, self._parts, self):
            output._epoch_listeners.append(self._on_epoch)

    def checkpoint_values(self) -> Any:
        return {"latest": sorted(self._latest.items()), "epoch": self.epoch}

    def restore_values(self, values: Any) -> None:
        self._latest = {int(w): f for w, f in values["latest"]}
        self.epoch = values["epoch"]

    def commit(self, epoch: int, parts: list[Any]) -> None:
        """(Every part of ``epoch`` is written: see the class.)"""
        for worker, file in parts:
            old = self._latest.get(worker)
            self._latest[worker] = file
            if old is not None and old != file:
                os.remove(old)
        if epoch % self.every:
            return
        parent = os.path.dirname(os.path.abspath(self.path))
        tmp = os.path.join(parent, f"_tmp-{uuid.uuid4().hex}")
        os.makedirs(tmp)
        for worker, file in sorted(self._latest.items()):
            os.link(file, os.path.join(tmp, f"part-{worker:05d}.parquet"))
        if not self._latest:  # (an empty snapshot still has the output's columns)
            count = self.output.count_column
            empty = pl.DataFrame(schema={**self.output.schema.polars_schema(), count: pl.Int64})
            empty.write_parquet(os.path.join(tmp, "part-00000.parquet"))
        with open(os.path.join(tmp, "_EPOCH"), "w") as f:
            f.write(str(epoch))
        _replace_dir(tmp, self.path)
        self.epoch = epoch

    def _on_epoch(self, epoch: int) -> None:
        if epoch % self.every:
            return
        frame = self.output.snapshot_polars(epoch)
        _write_parquet(frame, self.path, self.spark)
        with open(os.path.join(self.path, "_EPOCH"), "w") as f:
            f.write(str(epoch))
        self.epoch = epoch


def read_change_log(path: str, *, polars: bool = False) -> Any:
    """The change log written by :class:`ParquetChangeLog`: the columns, ``time`` (the epoch)
    and ``diff``, as one pandas DataFrame, as an output's readers give (``polars=True``: a
    Polars one)."""
    from ddflow.api.outputs import to_pandas

    parts: list[pl.DataFrame] = []
    for name in sorted(os.listdir(path)):
        if not name.startswith("epoch="):
            continue
        d = os.path.join(path, name)
        files = [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".parquet")]
        parts.extend(pl.read_parquet(f) for f in files)
    frame = pl.concat(parts) if parts else pl.DataFrame()
    if polars:
        return frame
    nullable = [c for c in frame.columns if frame.get_column(c).null_count()]
    return to_pandas(frame, Schema.from_polars(frame.schema, nullable=nullable))
