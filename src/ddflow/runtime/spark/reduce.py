"""The Spark runtime's reduce kernels: :mod:`ddflow.runtime.local.reduce`, step for step, on
Spark DataFrames (see :mod:`ddflow.differential.operators.reduce` for the algorithm).

* ``interesting_times``: the closure of each key's new times under least upper bounds with
  its other input times (a loop of joins on the driver's command, one emptiness check per
  round, for partially ordered times); grouped by time with one collect of the distinct times;
* ``reduce_evaluate``: the accumulations at the queried ``(key, time)`` pairs, the group
  function, and the difference with the output accumulated there, in rounds (the levels of
  the ready times: antichains, each after its predecessors; planned on the driver), each
  round's corrections checkpointed and visible to the next;
* the group functions ``agg_weights``, ``agg``, ``distinct`` and ``threshold`` as Spark
  aggregations; ``reduce(fn)`` calls ``fn`` on the executors, through the local runtime's own
  group function, on the groups of one partition at a time (``mapInArrow`` after
  partitioning by the group), so that ``fn`` sees exactly the groups, in exactly the order,
  the local runtime gives it.

Grouping compares keys with null-safe equality (a null key is a group, as in the reference
interpreter; every join here is :func:`join_on`). ``min``/``max`` of floats skip NaN unless
every value is NaN, as Polars' do.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ddflow.differential.batch import DIFF, KEY
from ddflow.differential.batch import QUERY_PREFIX as QPREFIX
from ddflow.runtime.local.reduce import GROUP_FUNCTIONS as LOCAL_GROUP_FUNCTIONS
from ddflow.runtime.local.reduce import reduce_prepare as local_reduce_prepare
from ddflow.runtime.spark.exprs import arrow_type, spark_type_name
from ddflow.runtime.spark.lattice import at_times, join_columns, le_column, time_columns
from ddflow.runtime.spark.session import ship_by_value
from ddflow.timely.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.differential.operators.reduce import ReduceSpec
    from ddflow.runtime.spark.kernels import SparkKernels

__all__ = [
    "accumulate",
    "interesting_times",
    "join_on",
    "minmax_unchanged",
    "reduce_evaluate",
    "reduce_prepare",
    "time_queries",
    "without_keys",
]


def _rename(df: DataFrame, mapping: dict[str, str]) -> DataFrame:
    return df.withColumnsRenamed(mapping) if mapping else df


def join_on(left: DataFrame, right: DataFrame, on: Sequence[str], how: str = "inner") -> DataFrame:
    """Join on equal ``on`` columns, nulls equal to nulls (as grouping treats them); the ``on``
    columns appear once, from ``left``. With the key code among them, the code leads the
    condition. Spark makes each null-safe equality ``a <=> b`` a join key too (also when
    wrapped in ``coalesce(..., false)``, which it simplifies away), so both sides are
    shuffled on every key column. A form it leaves alone
    (``coalesce(a = b, a is null and b is null)``) removes those exchanges, but then one
    stage holds so many hash joins that a task runs out of execution memory (connected
    components on a driver of Spark's default size)."""
    on = list(on)
    renamed = right.select(
        [F.col(c).alias(f"__j_{c}") if c in on else F.col(c) for c in right.columns]
    )
    if KEY in on:
        cond = F.col(KEY) == F.col(f"__j_{KEY}")
        for c in on:
            if c != KEY:
                cond = cond & F.col(c).eqNullSafe(F.col(f"__j_{c}"))
        renamed = renamed.hint("shuffle_hash")
    else:
        cond = functools.reduce(operator.and_, [F.col(c).eqNullSafe(F.col(f"__j_{c}")) for c in on])
    joined = left.join(renamed, on=cond, how=how)
    if how in ("left_semi", "left_anti"):
        return joined
    return joined.drop(*[f"__j_{c}" for c in on])


def without_keys(k: SparkKernels, batch: DataFrame, keys: DataFrame) -> DataFrame:
    """The rows of ``batch`` whose ``(KEY, keys)`` are not among ``keys``' rows."""
    if k._empty_known(keys) or k._empty_known(batch):
        return batch
    out = join_on(batch, keys, keys.columns, "left_anti")
    rows_of = k.facts(keys).extra.get("rows_of")  # set by minmax_unchanged
    count = k.facts(batch).count
    if rows_of is not None and rows_of[0] is batch and count is not None:
        k._known(out, count=count - rows_of[1])
    return out


# ---------------------------------------------------------------------- interesting times


def interesting_times(
    k: SparkKernels, new: DataFrame, history: DataFrame, tt: TimeType, keys: Sequence[str]
) -> list[tuple[Time, DataFrame]]:
    """Least upper bounds of subsets of each key's times that contain a new time."""
    jkeys = [KEY, *keys]
    tcols = tt.columns()
    cols = [*jkeys, *tcols]
    fresh = new.select(*cols).distinct()
    ecols = [f"__e{i}" for i in range(tt.width)]
    rename = dict(zip(tcols, ecols, strict=True))
    if tt.is_total:
        # lub(n, e) = max(n, e): the closure adds exactly the key's later times
        firsts = fresh.groupBy(*jkeys).agg(F.min(tcols[0]).alias(tcols[0]))
        later = (
            join_on(_rename(history.select(*cols).distinct(), rename), firsts, jkeys)
            .filter(F.col(ecols[0]) > F.col(tcols[0]))
            .select(*jkeys, F.col(ecols[0]).alias(tcols[0]))
        )
        closed = fresh.union(later).distinct()
    else:
        closed = fresh
        others = _rename(history.select(*cols).union(fresh).distinct(), rename)
        delta = closed
        while True:
            lubs = (
                join_on(delta, others, jkeys)
                .select(
                    *jkeys,
                    *join_columns(tt, [F.col(c) for c in tcols], [F.col(c) for c in ecols], tcols),
                )
                .distinct()
            )
            delta = k._materialize(join_on(lubs, closed, cols, "left_anti"))
            if k.is_empty(delta):
                break
            closed = closed.union(delta)
            others = others.union(_rename(delta, rename))
    closed = k._materialize(closed)
    return [
        (t, k._known(closed.filter(at_times(tcols, [t])).select(*jkeys), count=n))
        for t, n in k.count_by_time(closed, tt)
    ]


# ---------------------------------------------------------------------- min/max fast path


def _float_extreme(c: str, kind: str, dtype: str) -> Column:
    """Polars' ``min``/``max`` of a column: nulls skipped, NaN skipped unless all are NaN."""
    col = F.col(c)
    if dtype not in ("double", "float"):
        return (F.min if kind == "min" else F.max)(col)
    plain = F.when(~F.isnan(col), col)
    best = (F.min if kind == "min" else F.max)(plain)
    any_nan = F.max(F.when(F.isnan(col), F.lit(1)))
    return F.coalesce(best, F.when(any_nan == 1, F.lit(float("nan")).cast(dtype)))


def minmax_unchanged(
    k: SparkKernels, spec: ReduceSpec, new: DataFrame, out_history: DataFrame, tt: TimeType
) -> DataFrame:
    """New updates of a min/max-only aggregate that cannot change its output (see the local
    kernel): the returned ``(KEY, keys)`` are skipped."""
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    if not tt.is_product or k._empty_known(out_history) or k._empty_known(new):
        return k._known(new.select(*jkeys).limit(0), count=0)
    types = dict(new.dtypes)
    mins = [(name, c) for name, kind, c in spec.aggs if kind == "min"]
    maxs = [(name, c) for name, kind, c in spec.aggs if kind == "max"]
    mcols = [f"__m{i}" for i in range(tt.width)]
    g = (
        new.groupBy(*jkeys)
        .agg(
            F.count(F.lit(1)).alias("__n"),
            F.min((F.col(DIFF) > 0).cast("int")).alias("__pos"),
            *[F.min(t).alias(m) for t, m in zip(tcols, mcols, strict=True)],
            *[_float_extreme(c, "min", types[c]).alias(f"__lo_{name}") for name, c in mins],
            *[_float_extreme(c, "max", types[c]).alias(f"__hi_{name}") for name, c in maxs],
        )
        .filter(F.col("__pos") == 1)
    )
    outs = list(spec.outputs)
    o = join_on(out_history, g.select(*jkeys, *mcols), jkeys)
    before = functools.reduce(
        operator.and_, [F.col(t) <= F.col(m) for t, m in zip(tcols, mcols, strict=True)]
    )
    o = (
        o.groupBy(*jkeys, *outs)
        .agg(F.sum(DIFF).alias(DIFF), F.min(before.cast("int")).alias("__before"))
        .filter((F.col(DIFF) != 0) | (F.col("__before") == 0))
    )
    single = (
        o.groupBy(*jkeys)
        .agg(
            F.count(F.lit(1)).alias("__rows"),
            F.first(DIFF).alias("__first"),
            F.min("__before").alias("__before"),
            *[F.first(name).alias(name) for name, _ in mins + maxs],
        )
        .filter((F.col("__rows") == 1) & (F.col("__first") == 1) & (F.col("__before") == 1))
    )
    ok = join_on(single, g, jkeys)
    cond = F.lit(True)
    for name, _ in mins:
        cond = cond & (F.col(f"__lo_{name}") >= F.col(name))
    for name, _ in maxs:
        cond = cond & (F.col(f"__hi_{name}") <= F.col(name))
    # one job: the skipped keys computed and kept, their number, and how many rows of
    # ``new`` they have (so that ``without_keys`` knows its result's size)
    skip = ok.filter(cond).select(*jkeys, "__n").localCheckpoint(eager=False)
    k.jobs += 1
    keys, rows = skip.agg(F.count(F.lit(1)), F.sum("__n")).collect()[0]
    out = k._known(skip.select(*jkeys), count=int(keys))
    k.facts(out).extra["rows_of"] = (new, int(rows or 0))
    return out


# ---------------------------------------------------------------------- queries


def time_queries(k: SparkKernels, pending: dict[Time, list[DataFrame]], tt: TimeType) -> DataFrame:
    """``(KEY, keys, __t*)`` rows, one per distinct pending ``(key, time)``. The times are
    remembered with the queries (``reduce_evaluate`` plans its rounds from them); when every
    time's keys come from one closure, whose size is known, so is the number of queries."""
    parts = []
    counts: list[int | None] = []
    for t, frames in pending.items():
        keys = k.concat(frames)
        counts.append(k.facts(keys).count if len(frames) == 1 else None)
        parts.append(
            keys.select(
                "*",
                *[F.lit(v).cast("bigint").alias(c) for c, v in zip(tt.columns(), t, strict=True)],
            )
        )
    if all(n is not None for n in counts):  # distinct already: one distinct frame per time
        queries = k._known(k.concat(parts), count=sum(n for n in counts if n is not None))
    else:
        queries = k.concat(parts).distinct()
    k.facts(queries).extra["times"] = sorted(pending)
    return queries


def levels(times: Sequence[Time], tt: TimeType) -> list[list[Time]]:
    """The times in rounds: each round an antichain, each time after every smaller one.

    >>> from ddflow.timely.lattice import TimeType
    >>> levels([(0, 1), (1, 0), (1, 1), (2, 0)], TimeType(("product", "product")))
    [[(0, 1), (1, 0)], [(1, 1), (2, 0)]]
    """
    level: dict[Time, int] = {}
    for t in sorted(times):  # lexicographic: a linear extension of the order
        below = [level[s] for s in level if tt.less_equal(s, t)]
        level[t] = 1 + max(below, default=-1)
    rounds: list[list[Time]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for t, n in level.items():
        rounds[n].append(t)
    return rounds


def reduce_prepare(k: SparkKernels, spec: ReduceSpec, batch: DataFrame, tt: TimeType) -> DataFrame:
    """Shape an input batch for the reduce's input arrangement (types as the local kernel's)."""
    if spec.kind != "agg_weights":
        return k._derived(batch.select(*spec.keys, *spec.values, *tt.columns(), DIFF), batch)
    empty = pl.DataFrame(schema=k.polars_schema(batch))
    types = local_reduce_prepare(spec, empty, tt).schema
    ws = [
        (F.col(w[4:]) * F.col(DIFF)).cast(spark_type_name(types[w])).alias(w) for w in spec.weights
    ]
    return k._derived(batch.select(*spec.keys, *tt.columns(), DIFF, *ws), batch)


def accumulate(
    history: DataFrame,
    queries: DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    values: Sequence[str],
    weights: Sequence[str] = (),
) -> DataFrame:
    """For each query ``(keys, __q*)`` the accumulation of ``history`` at the query time:
    rows ``keys, __q*, values, __diff, weights`` without all-zero sums."""
    tcols = tt.columns()
    qcols = time_columns(tt, QPREFIX)
    types = dict(history.dtypes)
    h = history.select(*keys, *values, *tcols, DIFF, *weights)
    j = join_on(queries.select(*keys, *qcols), h, keys)
    j = j.filter(le_column(tt, tcols, qcols))
    sums = [F.sum(DIFF).alias(DIFF), *[F.sum(w).cast(types[w]).alias(w) for w in weights]]
    out = j.groupBy(*keys, *qcols, *values).agg(*sums)
    nonzero = functools.reduce(operator.or_, [F.col(c) != 0 for c in (DIFF, *weights)])
    return out.filter(nonzero)


# ---------------------------------------------------------------------- evaluation


def reduce_evaluate(
    k: SparkKernels,
    spec: ReduceSpec,
    queries: DataFrame,
    history: DataFrame,
    out_history: DataFrame,
    tt: TimeType,
) -> DataFrame:
    """Corrections to the output at the queried ``(key, time)`` pairs:
    rows ``KEY, keys, outputs, __t*, __diff``.

    The local kernel ranks each key's times and runs round ``r`` on every key's ``r``-th
    time. Here the rounds are the :func:`levels` of the queried times (each an antichain,
    after all its predecessors), planned on the driver without a job. The corrections are
    the same: the one at ``(k, t)`` is ``f(input at t)`` minus the output at ``t``, which
    includes the corrections at every queried time ``<= t``, processed in an earlier round
    under both schemes; incomparable times do not see each other's.
    """
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    qcols = time_columns(tt, QPREFIX)
    outs = list(spec.outputs)
    to_q = dict(zip(tcols, qcols, strict=True))
    to_t = dict(zip(qcols, tcols, strict=True))
    q_all = _rename(queries, to_q)
    acc = accumulate(history, q_all, tt, jkeys, spec.values, spec.weights)
    out_history = out_history.select(*jkeys, *outs, *tcols, DIFF)
    out_types = dict(out_history.dtypes)
    desired = GROUP_FUNCTIONS[spec.kind](k, spec, acc, jkeys, qcols, out_types)
    times = k.facts(queries).extra.get("times")
    if times is None:  # queries not made by time_queries: read their times
        times = k.distinct_times(queries, tt)
    rounds = levels(times, tt)
    group = [*jkeys, *qcols, *outs]
    emitted: list[DataFrame] = []
    for r, round_times in enumerate(rounds):
        q, want = q_all, desired
        if len(rounds) > 1:
            at = at_times(qcols, round_times)
            q, want = q_all.filter(at), desired.filter(at)
        current = accumulate(out_history, q, tt, jkeys, outs)
        negated = current.select(*group, (-F.col(DIFF)).alias(DIFF))
        change = (
            want.select(*group, DIFF)
            .union(negated)
            .groupBy(*group)
            .agg(F.sum(DIFF).alias(DIFF))
            .filter(F.col(DIFF) != 0)
        )
        change = _rename(change, to_t).select(*jkeys, *outs, *tcols, DIFF)
        change = k._materialize(change)
        if k.count_by_time(change, tt):
            emitted.append(change)
            if r + 1 < len(rounds):
                out_history = out_history.union(change)
    if not emitted:
        return k._known(out_history.limit(0), count=0)
    return k.concat(emitted)


# ---------------------------------------------------------------------- group functions
# Each takes accumulated rows (keys, __q*, values, __diff, weights) and returns the desired
# output rows (keys, __q*, outputs, __diff), outputs typed as the output arrangement.


def _one() -> Column:
    return F.lit(1).cast("bigint").alias(DIFF)


def _agg_weights(
    k: SparkKernels,
    spec: ReduceSpec,
    acc: DataFrame,
    keys: list[str],
    qcols: list[str],
    out_types: dict[str, str],
) -> DataFrame:
    acc = acc.filter(F.col(DIFF) > 0)
    exprs = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            e = F.col(DIFF)
        elif kind == "sum":
            e = F.col(f"__w_{c}")
        else:  # mean (the filter above leaves no zero count; ANSI mode would raise on one)
            e = F.when(F.col(DIFF) != 0, F.col(f"__w_{c}").cast("double") / F.col(DIFF))
        exprs.append(e.cast(out_types[name]).alias(name))
    return acc.select(*keys, *qcols, *exprs, _one())


def _agg(
    k: SparkKernels,
    spec: ReduceSpec,
    acc: DataFrame,
    keys: list[str],
    qcols: list[str],
    out_types: dict[str, str],
) -> DataFrame:
    """Aggregates that need values. ``count``/``sum``/``mean`` are linear in the rows; ``min``
    and ``max`` of a column range over that column's values whose multiplicity in the group,
    summed over every row holding the value, is positive (as the local kernel). With a
    ``top_k`` or ``arg_max``, the local group function runs on each partition's groups."""
    if spec.ranked:
        return _local_groups(k, spec, acc, keys, qcols, LOCAL_GROUP_FUNCTIONS["agg"])
    types = dict(acc.dtypes)
    group = [*keys, *qcols]
    count = F.sum(DIFF)
    linear = [count.alias("__count")]
    for name, kind, c in spec.aggs:
        if kind == "count":
            linear.append(count.cast(out_types[name]).alias(name))
        elif kind in ("sum", "mean"):
            assert c is not None
            value = F.col(c).cast("double") if types[c] in ("float", "double") else F.col(c)
            e = F.sum(value * F.col(DIFF))
            if kind == "mean":  # groups of count 0 are dropped below (ANSI mode would raise)
                e = F.when(count != 0, e.cast("double") / count.cast("double"))
            linear.append(e.cast(out_types[name]).alias(name))
    out = acc.groupBy(*group).agg(*linear).filter(F.col("__count") > 0)
    for name, kind, c in spec.aggs:
        if kind in ("min", "max"):
            assert c is not None
            present = acc.groupBy(*group, c).agg(F.sum(DIFF).alias(DIFF)).filter(F.col(DIFF) > 0)
            pick = _float_extreme(c, kind, types[c]).cast(out_types[name]).alias(name)
            out = join_on(out, present.groupBy(*group).agg(pick), group, "left")
    return out.select(*group, *spec.outputs, _one())


def _distinct(
    k: SparkKernels,
    spec: ReduceSpec,
    acc: DataFrame,
    keys: list[str],
    qcols: list[str],
    out_types: dict[str, str],
) -> DataFrame:
    return acc.filter(F.col(DIFF) > 0).select(*keys, *qcols, _one())


def _threshold(
    k: SparkKernels,
    spec: ReduceSpec,
    acc: DataFrame,
    keys: list[str],
    qcols: list[str],
    out_types: dict[str, str],
) -> DataFrame:
    assert spec.fn is not None
    k.jobs += 1
    counts = [int(r[0]) for r in acc.select(DIFF).distinct().collect()]
    if not counts:
        return acc.select(*keys, *qcols, DIFF)
    mapping = F.create_map(*[F.lit(x).cast("bigint") for c in counts for x in (c, int(spec.fn(c)))])
    out = acc.withColumn(DIFF, mapping[F.col(DIFF)].cast("bigint"))
    return out.filter(F.col(DIFF) != 0).select(*keys, *qcols, DIFF)


def _reduce(
    k: SparkKernels,
    spec: ReduceSpec,
    acc: DataFrame,
    keys: list[str],
    qcols: list[str],
    out_types: dict[str, str],
) -> DataFrame:
    """``fn(key, group)`` in Python on the executors (:func:`_local_groups`), on the rows of
    positive multiplicity."""
    assert spec.fn is not None
    ship_by_value(spec.fn)
    positive = acc.filter(F.col(DIFF) > 0)
    return _local_groups(k, spec, positive, keys, qcols, LOCAL_GROUP_FUNCTIONS["reduce"])


def _local_groups(
    k: SparkKernels,
    spec: ReduceSpec,
    acc: DataFrame,
    keys: list[str],
    qcols: list[str],
    local_group: Any,
) -> DataFrame:
    """A local group function on the executors, on the groups of each partition (all rows of
    a group are in one partition)."""
    gcols = [*keys, *qcols]
    in_schema = k.polars_schema(acc)
    out_schema = {
        **{c: in_schema[c] for c in gcols},
        **{n: spec.out_types[n] for n in spec.outputs},
        DIFF: pl.Int64(),
    }
    out_struct = k.struct(out_schema)
    target = pa.schema([(f.name, arrow_type(f.dataType.simpleString())) for f in out_struct])
    names = list(out_schema)

    def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tables = [pa.Table.from_batches([b]) for b in batches]
        if not tables:
            return
        frame = pl.from_arrow(pa.concat_tables(tables))
        assert isinstance(frame, pl.DataFrame)
        frame = frame.cast(in_schema)  # type: ignore[arg-type]
        out = local_group(spec, frame, keys, qcols).select(names)
        yield from out.to_arrow().cast(target).to_batches()

    return acc.repartition(k.partitions, *gcols).mapInArrow(apply, out_struct)


GROUP_FUNCTIONS: dict[str, Any] = {
    "agg_weights": _agg_weights,
    "agg": _agg,
    "distinct": _distinct,
    "threshold": _threshold,
    "reduce": _reduce,
}
