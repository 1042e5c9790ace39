"""The Spark runtime's data plane: batches of updates as Spark DataFrames.

A *batch* is a ``pyspark.sql.DataFrame`` with the columns of a local batch (see
:mod:`ddflow.runtime.local.kernels`): the data columns, ``__t0``, ``__t1``, ... (``bigint``) and
``__diff`` (``bigint``). The operators, the scheduler and progress tracking run on the driver
and are the same as the local runtime's; only these kernels differ. Invariants:

* every kernel returns, row for row, what the local kernel returns for the same updates (row
  order aside), so a dataflow's outputs are identical on both runtimes;
* an *arranged* batch has ``__key`` (the key itself for one integer key column, else
  ``xxhash64`` of the key columns, with integers widened so that ``int32`` and ``int64`` keys
  agree; never null) and is hash-partitioned on it into the settings' ``partitions``
  partitions and persisted; every join or lookup also compares the real key columns, so
  colliding codes only cost work;
* a lookup is a semi-join of a trace's batches with a small DataFrame of key codes, and a
  delta meets its trace slice in a join on the code; all of them are partitioned by the code
  into the same partitions, so these joins run where the data is: the trace is never
  reshuffled, and nothing is broadcast (a broadcast costs a Spark job of its own);
* with ``merge_parts`` above 2 (:class:`~ddflow.runtime.spark.settings.SparkSettings`), a
  merge of a few small batches of a trace is deferred (their union, with times advanced: the
  same accumulations, no job; by default every merge is done, which keeps the plans of lookups
  small); a real merge consolidates, partitions by the code and checkpoints
  (``localCheckpoint``) every ``checkpoint_every`` merges, so the lineage of a long-lived
  trace stays short however many epochs and iterations it has seen, and unpersists the
  batches it replaced;
* only small facts reach the driver: counts, emptiness and the distinct times of a batch.
  What a kernel learns about a DataFrame is remembered with it (a weak map), so the same
  question is never asked twice, and most are answered from what an earlier step counted;
  a batch whose rows are on the driver anyway (made from local data, or a projection or
  filter of such a batch, which Spark's optimizer evaluates there) is counted, consolidated
  and collected without a Spark job.

The cost of a step is mostly the number of Spark jobs it starts (each has a fixed cost,
however small the data); ``SparkKernels.jobs`` counts them.

``pyspark`` is imported only by the modules of :mod:`ddflow.runtime.spark`; ``import ddflow``
does not import it.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ddflow.differential.batch import DIFF, KEY, NULL_CODE
from ddflow.differential.kernel import Capabilities, SpineReads
from ddflow.differential.trace import Spine
from ddflow.runtime.local.changelog import ChangeLog
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.spark.exprs import SparkCompiled, arrow_type, compile_spark, spark_type_name
from ddflow.runtime.spark.lattice import (
    advance_columns,
    at_times,
    join_columns,
    time_columns_of,
)
from ddflow.runtime.spark.session import ship_by_value
from ddflow.runtime.spark.settings import SparkSettings
from ddflow.schema import Schema
from ddflow.timely.lattice import Time, TimeType

_HASH_SEED = 0x5EED

__all__ = ["DIFF", "KEY", "SparkKernels"]

_POLARS_TYPES: dict[str, pl.DataType] = {
    "bigint": pl.Int64(),
    "int": pl.Int32(),
    "double": pl.Float64(),
    "float": pl.Float32(),
    "boolean": pl.Boolean(),
    "string": pl.String(),
    "date": pl.Date(),
    "timestamp_ntz": pl.Datetime("us"),
}


def polars_type(spark_name: str) -> pl.DataType:
    """The Polars dtype of a Spark SQL type name of a ddflow type (``array<T>`` a list)."""
    if spark_name.startswith("array<") and spark_name.endswith(">"):
        return pl.List(polars_type(spark_name[6:-1]))
    return _POLARS_TYPES[spark_name]


# ---------------------------------------------------------------------- facts


@dataclass
class _Facts:
    """What the driver knows about a batch without looking at it again."""

    count: int | None = None
    #: rows per time, when known (then also the count and the distinct times)
    time_counts: dict[Time, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------- the kernels


class SparkKernels:
    """Bulk operations on Spark batches; one instance per dataflow, its knobs read from
    ``settings`` (:class:`~ddflow.runtime.spark.settings.SparkSettings`)."""

    name = "spark"
    #: no small tail, no merges in steps: a trace merges (or defers) every batch as it comes
    capabilities = Capabilities(native_frames=True)

    def __init__(self, spark: SparkSession, settings: SparkSettings | None = None) -> None:
        settings = SparkSettings() if settings is None else settings
        if settings.partitions is None:
            default = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
            settings = replace(settings, partitions=default)
        assert settings.partitions is not None
        self.spark = spark
        #: the settings in use (``partitions`` resolved)
        self.settings = settings
        #: the key partitions of every arrangement
        self.partitions: int = settings.partitions
        self.trace_settings = settings.trace
        self._facts: weakref.WeakKeyDictionary[DataFrame, _Facts] = weakref.WeakKeyDictionary()
        self._persisted: list[weakref.ref[DataFrame]] = []
        self._merges = 0
        self._local = LocalKernels(settings.local)
        #: Spark jobs the kernels started (counts, collects, checkpoints), for tests
        self.jobs = 0

    # ------------------------------------------------------------------ the contract's plain parts

    def change_log(self) -> ChangeLog:
        """An output's log (of Polars frames: :meth:`to_log` collects)."""
        return self._local.change_log()

    def lookup_parts(self, parts: Sequence[DataFrame], keys: Any, within: bool = False) -> Any:
        """:meth:`lookup` in every batch of a trace, together."""
        return self.concat([self.lookup(p, keys) for p in parts])

    def reduce_reads(self, input: Spine, output: Spine, spec: Any, tt: TimeType) -> SpineReads:
        """Reads looked up afresh each time (a read's result is a plan, not data)."""
        return SpineReads(self, input, output)

    def evaluation_slices(self, queries: DataFrame, keys: Any, parts: Sequence[Any]) -> None:
        """A reduce evaluates its queries at once (Spark partitions the work itself)."""
        return None

    # ------------------------------------------------------------------ facts

    def facts(self, df: DataFrame) -> _Facts:
        f = self._facts.get(df)
        if f is None:
            f = _Facts()
            self._facts[df] = f
        return f

    def _known(
        self,
        df: DataFrame,
        count: int | None = None,
        time_counts: Mapping[Time, int] | None = None,
        like: DataFrame | None = None,
        times: bool = True,
    ) -> DataFrame:
        """Record facts of ``df``: given ones, or the row facts of ``like`` (same rows)."""
        f = self.facts(df)
        if like is not None:
            src = self._facts.get(like)
            if src is not None:
                f.count = src.count
                if times:
                    f.time_counts = src.time_counts
        if count is not None:
            f.count = count
        if time_counts is not None:
            f.time_counts = dict(time_counts)
            f.count = sum(time_counts.values())
        return df

    def _empty_known(self, df: DataFrame) -> bool:
        f = self._facts.get(df)
        return f is not None and f.count == 0

    def _materialize(self, df: DataFrame) -> DataFrame:
        """``df`` computed once and kept, its lineage cut (a local checkpoint), in one job that
        also counts its rows (per time, when it has time columns)."""
        out = self._known(df.localCheckpoint(eager=False), like=df)
        self.height(out)  # the first action computes every partition and keeps it
        return out

    def _persist(self, df: DataFrame) -> DataFrame:
        out = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(weakref.ref(out))
        return out

    def _unpersist(self, df: DataFrame) -> None:
        if df.is_cached:
            df.unpersist(blocking=False)

    def release(self) -> None:
        for ref in self._persisted:
            df = ref()
            if df is not None:
                self._unpersist(df)
        self._persisted = []

    # ------------------------------------------------------------------ construction

    def struct(self, schema: Mapping[str, Any]) -> T.StructType:
        """The Spark schema of a Polars schema of ddflow types (bookkeeping columns bigint)."""
        fields = []
        for name, dtype in schema.items():
            type_name = spark_type_name(dtype() if isinstance(dtype, type) else dtype)
            fields.append(T.StructField(name, T._parse_datatype_string(type_name), True))
        return T.StructType(fields)

    def polars_schema(self, df: DataFrame) -> dict[str, pl.DataType]:
        return {name: polars_type(t) for name, t in df.dtypes}

    def empty(self, schema: Any, tt: TimeType) -> DataFrame:
        full = dict(schema)
        for c in tt.columns():
            full[c] = pl.Int64()
        full[DIFF] = pl.Int64()
        df = self.spark.createDataFrame([], self.struct(full))
        return self._known(df, time_counts={})

    def from_polars(self, frame: pl.DataFrame) -> DataFrame:
        """A Polars batch as a Spark batch (through Arrow, with the exact Spark types)."""
        struct = self.struct(frame.schema)
        target = pa.schema([(f.name, arrow_type(f.dataType.simpleString())) for f in struct])
        table = frame.to_arrow().cast(target)
        df = self.spark.createDataFrame(table, schema=struct)
        self._remember_local(df, frame)  # counting or collecting it needs no job
        return df

    def native_updates(
        self, df: DataFrame, schema: Schema, diff: str | None, epoch: int
    ) -> DataFrame:
        """A user's Spark DataFrame (the input's columns, and a ``diff`` column of changes of
        multiplicity if named) as a batch of updates at ``epoch``. Columns are cast to the
        schema's Spark types; a null in a column that does not admit one, or a null diff,
        fails the first job that reads it."""
        cols = []
        for name, dtype in schema.items():
            c = F.col(name).cast(dtype.spark_type_name)
            if not dtype.nullable:
                message = f"input column {name!r} ({dtype}) is not nullable, but holds a null"
                c = F.when(c.isNull(), F.raise_error(F.lit(message))).otherwise(c)
            cols.append(c.alias(name))
        if diff is None:
            d = F.lit(1).cast("bigint")
        else:
            d = F.col(diff).cast("bigint")
            d = F.when(d.isNull(), F.raise_error(F.lit(f"diff column {diff!r} holds a null")))
            d = d.otherwise(F.col(diff).cast("bigint"))
        return df.select(*cols, F.lit(epoch).cast("bigint").alias("__t0"), d.alias(DIFF))

    def to_log(self, batch: DataFrame) -> pl.DataFrame:
        """A batch an output keeps: collected (an output holds Polars frames)."""
        return self.to_polars(batch)

    def to_polars(self, batch: DataFrame) -> pl.DataFrame:
        local = self.local_frame(batch)
        if local is not None:
            return local
        f = self._facts.get(batch)
        if f is not None and f.count == 0:
            return pl.DataFrame(schema=self.polars_schema(batch))
        self.jobs += 1
        frame = pl.from_arrow(batch.toArrow())
        assert isinstance(frame, pl.DataFrame)
        return frame

    # ------------------------------------------------------------------ facts to the driver

    def height(self, batch: DataFrame) -> int:
        f = self.facts(batch)
        if f.count is None and self.local_frame(batch) is not None:
            return self.facts(batch).count  # type: ignore[return-value]
        if f.count is None:
            tcols = time_columns_of(batch.columns)
            if tcols:  # the same one job also tells the times
                self._count_times(batch, tcols)
            else:
                self.jobs += 1
                f.count = batch.count()
            if f.count == 0:
                f.time_counts = {}
                self._unpersist(batch)  # nothing to keep: every later use short-circuits
        return f.count  # type: ignore[return-value]

    def is_empty(self, batch: DataFrame) -> bool:
        # a count is one job; isEmpty() may take several (it scans partitions incrementally)
        return self.height(batch) == 0

    def count_by_time(self, batch: DataFrame, tt: TimeType) -> list[tuple[Time, int]]:
        """How many updates the batch holds at each time (one collect)."""
        f = self.facts(batch)
        if f.time_counts is None and self.local_frame(batch) is not None:
            return sorted((f.time_counts or {}).items())
        if f.time_counts is None:
            self._count_times(batch, tt.columns())
        return sorted((f.time_counts or {}).items())

    def _count_times(self, batch: DataFrame, tcols: Sequence[str]) -> None:
        self.jobs += 1
        rows = batch.groupBy(*tcols).count().collect()
        f = self.facts(batch)
        f.time_counts = {tuple(int(x) for x in r[:-1]): int(r[-1]) for r in rows}
        f.count = sum(f.time_counts.values())

    def distinct_times(self, batch: DataFrame, tt: TimeType) -> list[Time]:
        return [t for t, _ in self.count_by_time(batch, tt)]

    # ------------------------------------------------------------------ linear

    def compile(self, expr: Any, schema: Any, name: str | None) -> SparkCompiled:
        """A column expression compiled, once, to a Spark column (see spark_expr)."""
        return compile_spark(expr, schema, name)

    def select(
        self, batch: DataFrame, compiled: Sequence[SparkCompiled], tt: TimeType
    ) -> DataFrame:
        out = batch.select(*[c.column for c in compiled], *tt.columns(), DIFF)
        return self._derived(out, batch)

    def with_columns(
        self,
        batch: DataFrame,
        compiled: Sequence[SparkCompiled],
        names: Sequence[str],
        tt: TimeType,
    ) -> DataFrame:
        new = {c.name: c.column for c in compiled if c.name is not None}
        out = batch.withColumns(new).select(*names, *tt.columns(), DIFF)
        return self._derived(out, batch)

    def filter(self, batch: DataFrame, predicate: SparkCompiled) -> DataFrame:
        if self._empty_known(batch):
            return batch
        return self._derived(batch.filter(predicate.column), batch, rows=False)

    def map_rows(
        self,
        batch: DataFrame,
        fn: Callable[..., Any],
        schema: Any,
        src_names: Sequence[str],
        tt: TimeType,
        flat: bool,
    ) -> DataFrame:
        """The local ``map_rows`` on every Arrow batch of every partition, on the executors."""
        out_struct = self.struct(
            {
                **dict(schema.polars_schema()),
                **{c: pl.Int64() for c in tt.columns()},
                DIFF: pl.Int64(),
            }
        )
        if self._empty_known(batch):
            return self._known(self.spark.createDataFrame([], out_struct), count=0)
        target = pa.schema([(f.name, arrow_type(f.dataType.simpleString())) for f in out_struct])
        local = self._local
        names = list(src_names)
        # a Schema does not pickle: ship its columns and rebuild it on the executors
        columns = [(n, str(t)) for n, t in schema.items()]

        ship_by_value(fn)

        def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            out_schema = Schema(columns)
            for b in batches:
                frame = pl.from_arrow(b)
                assert isinstance(frame, pl.DataFrame)
                out = local.map_rows(frame, fn, out_schema, names, tt, flat)
                yield from out.to_arrow().cast(target).to_batches()

        out = batch.mapInArrow(apply, out_struct)
        return out if flat else self._known(out, like=batch)

    def inspect(
        self, batch: DataFrame, fn: Callable[[Any], None], names: Sequence[str], tt: TimeType
    ) -> DataFrame:
        """Call ``fn`` with the batch collected to a Polars frame (inspect is for debugging)."""
        self._local.inspect(self.to_polars(batch), fn, names, tt)
        return batch

    def concat(self, batches: Sequence[DataFrame]) -> DataFrame:
        if len(batches) == 1:
            return batches[0]
        nonempty = [b for b in batches if not self._empty_known(b)]
        if len(nonempty) <= 1:
            return nonempty[0] if nonempty else batches[0]
        locals_ = [self.local_frame(b) for b in nonempty]
        if all(f is not None for f in locals_):
            return self.from_polars(pl.concat(locals_, how="vertical"))  # type: ignore[arg-type]
        first = nonempty[0]
        columns = first.columns
        types = first.dtypes
        parts = [first]
        for b in nonempty[1:]:
            if b.dtypes != types:  # e.g. a Spark DataFrame inserted as it was given
                b = b.select(*[F.col(n).cast(t) for n, t in types])
            parts.append(b.select(*columns))
        out = functools.reduce(DataFrame.union, parts)
        facts = [self._facts.get(b) for b in nonempty]
        if all(f is not None and f.count is not None for f in facts):
            total: dict[Time, int] | None = {}
            for f in facts:
                assert f is not None
                if f.time_counts is None or total is None:
                    total = None
                    continue
                for t, n in f.time_counts.items():
                    total[t] = total.get(t, 0) + n
            self._known(
                out,
                count=sum(f.count for f in facts if f and f.count),  # type: ignore[misc]
                time_counts=total,
            )
        return out

    def negate(self, batch: DataFrame) -> DataFrame:
        return self._derived(batch.withColumn(DIFF, -F.col(DIFF)), batch)

    def local_frame(self, batch: DataFrame) -> pl.DataFrame | None:
        """The batch's rows as a Polars frame, when the driver holds them: the batch was made
        from local data, or collected for an output, or it is a projection or filter of such
        a batch, which Spark's optimizer evaluates on the driver (a local relation). Then
        counting, consolidating or collecting it needs no Spark job."""
        f = self._facts.get(batch)
        if f is None:
            return None
        if "polars" in f.extra:
            return f.extra["polars"]  # type: ignore[no-any-return]
        if not f.extra.pop("maybe_local", False):
            return None
        plan = batch._jdf.queryExecution().optimizedPlan()
        if plan.getClass().getSimpleName() != "LocalRelation":
            return None
        schema = self.polars_schema(batch)
        frame = pl.DataFrame([tuple(r) for r in batch.collect()], schema=schema, orient="row")
        self._remember_local(batch, frame)
        return frame

    def _remember_local(self, df: DataFrame, frame: pl.DataFrame) -> None:
        f = self.facts(df)
        f.extra["polars"] = frame
        f.count = frame.height
        tcols = time_columns_of(frame.columns)
        if not frame.height:
            f.time_counts = {}
        elif tcols:
            f.time_counts = {tuple(r[:-1]): r[-1] for r in frame.group_by(tcols).len().rows()}

    def _derived(
        self, out: DataFrame, src: DataFrame, rows: bool = True, times: bool = True
    ) -> DataFrame:
        """Facts of ``out``, computed from ``src`` by a projection or filter: the row facts
        if ``rows`` (same rows), and whether the driver may hold its rows."""
        if rows:
            self._known(out, like=src, times=times)
        f = self._facts.get(src)
        if f is not None and ("polars" in f.extra or f.extra.get("maybe_local")):
            self.facts(out).extra["maybe_local"] = True
        return out

    def consolidate(self, batch: DataFrame, sums: Sequence[str] = (DIFF,)) -> DataFrame:
        """One row per ``(data, time)`` with the summed diff (and weights); zero rows removed."""
        if self._empty_known(batch):
            return batch
        local = self.local_frame(batch)
        if local is not None:  # rows the driver holds anyway: consolidate them there
            return self.from_polars(self._local.consolidate(local, sums))
        nonzero = functools.reduce(operator.or_, [F.col(w) != 0 for w in sums])
        columns = batch.columns
        types = dict(batch.dtypes)
        keys = [c for c in columns if c not in sums]
        out = (
            batch.groupBy(*keys)
            .agg(*[F.sum(w).cast(types[w]).alias(w) for w in sums])
            .filter(nonzero)
            .select(*columns)
        )
        return out

    # ------------------------------------------------------------------ times

    def enter(
        self, batch: DataFrame, outer: TimeType, inner: TimeType, priority: Any = None
    ) -> DataFrame:
        """Extend the times by a loop's coordinate: ``0``, or ``(priority, 0)``."""
        data = [c for c in batch.columns if not c.startswith("__")]
        new = inner.columns()[outer.width :]
        if priority is None:
            extra = [F.lit(0).cast("bigint").alias(c) for c in new]
        elif isinstance(priority, SparkCompiled):
            extra = [
                priority.column.cast("bigint").alias(new[0]),
                F.lit(0).cast("bigint").alias(new[1]),
            ]
        else:
            return self._enter_polars(batch, data, outer, new, priority)
        out = batch.select(*data, *outer.columns(), *extra, DIFF)
        return self._derived(out, batch, times=False)

    def _enter_polars(
        self, batch: DataFrame, data: list[str], outer: TimeType, new: list[str], priority: pl.Expr
    ) -> DataFrame:
        # build.py hands over the Polars-compiled priority: evaluate it with Polars on the
        # executors, exactly as the local runtime does
        struct = self.polars_schema(batch)
        out_schema = {
            **{c: struct[c] for c in data},
            **{c: pl.Int64() for c in outer.columns()},
            new[0]: pl.Int64(),
            new[1]: pl.Int64(),
            DIFF: pl.Int64(),
        }
        out_struct = self.struct(out_schema)
        target = pa.schema([(f.name, arrow_type(f.dataType.simpleString())) for f in out_struct])
        inner_cols = list(out_schema)

        def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                frame = pl.from_arrow(b)
                assert isinstance(frame, pl.DataFrame)
                out = frame.select(
                    [
                        *data,
                        *outer.columns(),
                        priority.cast(pl.Int64).alias(new[0]),
                        pl.lit(0, dtype=pl.Int64).alias(new[1]),
                        DIFF,
                    ]
                )
                yield from out.select(inner_cols).to_arrow().cast(target).to_batches()

        out = batch.select(*data, *outer.columns(), DIFF).mapInArrow(apply, out_struct)
        return self._known(out, like=batch, times=False)

    def leave(self, batch: DataFrame, inner: TimeType, outer: TimeType) -> DataFrame:
        return self._derived(batch.drop(*inner.columns()[outer.width :]), batch, times=False)

    def increment(self, batch: DataFrame, tt: TimeType, limit: int | None) -> DataFrame:
        last = tt.columns()[-1]
        out = batch.withColumn(last, F.col(last) + 1)
        if limit is not None:
            return self._derived(out.filter(F.col(last) < limit), batch, rows=False)
        return self._derived(out, batch, times=False)

    def advance(self, batch: DataFrame, tt: TimeType, frontier: Sequence[Time]) -> DataFrame:
        """Advance every time by the frontier (compaction), without consolidating."""
        if not frontier or self._empty_known(batch):
            return batch
        cols = tt.columns()
        return batch.withColumns(dict(zip(cols, advance_columns(tt, cols, frontier), strict=True)))

    def split_by_time(self, batch: DataFrame, tt: TimeType) -> list[tuple[Time, DataFrame]]:
        """The batch's updates per time: its distinct times (one collect, unless known), then
        a filter per time; rows the driver holds are split there."""
        local = self.local_frame(batch)
        if local is not None:
            return [(t, self.from_polars(part)) for t, part in self._local.split_by_time(local, tt)]
        counts = self.count_by_time(batch, tt)
        if len(counts) == 1:
            return [(counts[0][0], batch)]
        cols = tt.columns()
        parts = []
        for t, n in counts:
            parts.append((t, self._known(batch.filter(at_times(cols, [t])), time_counts={t: n})))
        return parts

    def split_complete(
        self, batches: Sequence[DataFrame], last_epoch: int
    ) -> tuple[DataFrame | None, list[DataFrame]]:
        """Split top-level batches into the updates at epochs ``<= last_epoch`` and the rest."""
        if not batches:
            return None, []
        allb = self.concat(batches)
        if self.facts(allb).time_counts is None:
            # an output's updates: they go to the driver anyway, so collect them now, once
            local = self.local_frame(allb)
            frame = self.to_polars(allb) if local is None else local
            ready_l, rest_l = self._local.split_complete([frame], last_epoch)
            return (
                None if ready_l is None else self.from_polars(ready_l),
                [self.from_polars(r) for r in rest_l],
            )
        epochs = [t[0] for t, _ in self.count_by_time(allb, _EPOCHS)]
        if not epochs:
            return None, []
        if all(e <= last_epoch for e in epochs):
            return allb, []
        if all(e > last_epoch for e in epochs):
            return None, [allb]
        t0 = F.col("__t0")
        f = self.facts(allb).time_counts or {}
        ready = self._known(
            allb.filter(t0 <= last_epoch),
            time_counts={t: n for t, n in f.items() if t[0] <= last_epoch},
        )
        rest = self._known(
            allb.filter(t0 > last_epoch),
            time_counts={t: n for t, n in f.items() if t[0] > last_epoch},
        )
        return ready, [rest]

    # ------------------------------------------------------------------ arrangements

    def key_code(self, batch: DataFrame, keys: Sequence[str]) -> Column:
        """An int64 code per row of the key columns (equal keys, equal codes; never null)."""
        types = dict(batch.dtypes)
        if len(keys) == 1 and types[keys[0]] in ("bigint", "int"):
            return F.coalesce(F.col(keys[0]).cast("bigint"), F.lit(NULL_CODE).cast("bigint"))
        if not keys:
            return F.lit(0).cast("bigint")
        parts = []
        for k in keys:
            c, t = F.col(k), types[k]
            if t in ("bigint", "int"):
                c = c.cast("bigint")
            elif t in ("double", "float"):  # -0.0 == 0.0 and NaN == NaN, as equality says
                c = c.cast("double")
                c = F.when(c == 0.0, F.lit(0.0)).when(F.isnan(c), F.lit(float("nan"))).otherwise(c)
            parts.append(c)
        return F.xxhash64(F.lit(_HASH_SEED).cast("bigint"), *parts)

    def arrange(self, batch: DataFrame, keys: Sequence[str]) -> DataFrame:
        """Add the key code and partition by it; persisted (the trace and the joins read it)."""
        if KEY not in batch.columns:
            batch = self._known(batch.withColumn(KEY, self.key_code(batch, keys)), like=batch)
        out = self._known(batch.repartition(self.partitions, KEY), like=batch)
        if self._empty_known(out):
            return out
        return self._persist(out)

    def merge(
        self,
        batches: Sequence[DataFrame],
        tt: TimeType,
        since: Sequence[Time],
        sums: Sequence[str] = (DIFF,),
        keys: Sequence[str] = (),
    ) -> DataFrame:
        """Merge arranged batches, advancing times to ``since`` and consolidating.

        A merge of few, small batches is deferred: the result is their union with the times
        advanced (the same accumulations at every time in advance of ``since``; its height is
        the exact number of rows it holds), and needs no Spark job. Once a merge would hold
        ``merge_parts`` deferred parts or ``merge_rows`` rows, it is done: consolidated,
        partitioned by key, materialized (checkpointed every ``checkpoint_every`` merges, so
        lineage stays short), and the batches it replaced are unpersisted. (``keys``, the
        trace's key columns, is not needed here: the code column is always its own.)
        """
        parts: list[DataFrame] = []
        for b in batches:
            parts.extend(self.facts(b).extra.get("parts", [b]))
        rows = sum(self.height(b) for b in batches)
        merged = self.advance(self.concat(batches), tt, since)
        if len(parts) < self.settings.merge_parts and rows < self.settings.merge_rows:
            out = self._known(merged, count=rows)
            self.facts(out).extra["parts"] = parts
            return out
        merged = self.consolidate(merged, sums).repartition(self.partitions, KEY)
        self._merges += 1
        if self._merges % self.settings.checkpoint_every == 0:
            out = self._materialize(merged)
        else:
            out = self._persist(merged)
            self.height(out)
        for b in parts:
            self._unpersist(b)
        return out

    def key_set(self, batch: DataFrame) -> DataFrame:
        """The distinct key codes of an arranged batch: a small DataFrame for lookups."""
        keys = batch.select(KEY).distinct()
        return self._known(keys, count=0) if self._empty_known(batch) else keys

    def lookup(self, batch: DataFrame, keys: DataFrame) -> DataFrame:
        """The rows of an arranged batch whose key code is in ``keys``: a semi-join on the
        code, where the batch is (both sides are partitioned by the code)."""
        if self._empty_known(batch):
            return batch
        if self._empty_known(keys):
            return self._known(batch.limit(0), count=0)
        # both sides are partitioned by the code: the semi-join runs where they are
        return batch.join(keys.hint("shuffle_hash"), on=KEY, how="left_semi")

    # ------------------------------------------------------------------ joins

    def join_slice(
        self,
        delta: DataFrame,
        other: DataFrame,
        tt: TimeType,
        left_on: Sequence[str],
        right_on: Sequence[str],
        delta_is_left: bool,
        output: Sequence[tuple[str, str, str]],
    ) -> DataFrame:
        """Every pair of rows with equal keys: the output columns, the lub of the two times
        and the product of the diffs, joined where the data is (see the module docstring)."""
        left, right = (delta, other) if delta_is_left else (other, delta)
        empty = self._empty_known(left) or self._empty_known(right)
        lsel = left.select([F.col(c).alias(f"__l_{c}") for c in left.columns])
        rsel = right.select([F.col(c).alias(f"__r_{c}") for c in right.columns])
        # equal codes, then equal keys: only the code is an equi-join key (the key columns'
        # equality, wrapped, is a condition on the matched pairs), so that the delta and the
        # trace slice, both partitioned by the code, join where they are: no exchange, and no
        # broadcast (a broadcast is a Spark job of its own)
        cond = F.col(f"__l_{KEY}") == F.col(f"__r_{KEY}")
        for a, b in zip(left_on, right_on, strict=True):
            cond = cond & F.coalesce(F.col(f"__l_{a}") == F.col(f"__r_{b}"), F.lit(False))
        j = lsel.join(rsel.hint("shuffle_hash"), on=cond, how="inner")
        tcols = tt.columns()
        exprs = [F.col(f"__{side}_{c}").alias(name) for side, c, name in output]
        exprs += join_columns(
            tt, [F.col(f"__l_{c}") for c in tcols], [F.col(f"__r_{c}") for c in tcols], tcols
        )
        exprs.append((F.col(f"__l_{DIFF}") * F.col(f"__r_{DIFF}")).alias(DIFF))
        out = j.select(exprs)
        if empty:
            return self._known(out, count=0)
        # the join operator asks next whether it is empty; then its consumers read it
        return self._materialize(out)

    # ------------------------------------------------------------------ the reduce family

    def drop_key(self, batch: DataFrame) -> DataFrame:
        return self._derived(batch.drop(KEY), batch)

    def without_keys(self, batch: DataFrame, keys: DataFrame) -> DataFrame:
        from ddflow.runtime.spark import reduce as spark_reduce

        return spark_reduce.without_keys(self, batch, keys)

    def interesting_times(
        self, new: DataFrame, history: DataFrame, tt: TimeType, keys: Sequence[str]
    ) -> list[tuple[Time, DataFrame]]:
        from ddflow.runtime.spark import reduce as spark_reduce

        return spark_reduce.interesting_times(self, new, history, tt, keys)

    def time_queries(self, pending: dict[Time, list[DataFrame]], tt: TimeType) -> DataFrame:
        from ddflow.runtime.spark import reduce as spark_reduce

        return spark_reduce.time_queries(self, pending, tt)

    def reduce_prepare(self, spec: Any, batch: DataFrame, tt: TimeType) -> DataFrame:
        from ddflow.runtime.spark import reduce as spark_reduce

        return spark_reduce.reduce_prepare(self, spec, batch, tt)

    def reduce_evaluate(
        self,
        spec: Any,
        queries: DataFrame,
        history: DataFrame,
        out_history: DataFrame,
        tt: TimeType,
    ) -> DataFrame:
        from ddflow.runtime.spark import reduce as spark_reduce

        return spark_reduce.reduce_evaluate(self, spec, queries, history, out_history, tt)

    def minmax_unchanged(
        self, spec: Any, new: DataFrame, out_history: DataFrame, tt: TimeType
    ) -> DataFrame:
        from ddflow.runtime.spark import reduce as spark_reduce

        return spark_reduce.minmax_unchanged(self, spec, new, out_history, tt)


_EPOCHS = TimeType(("product",))
