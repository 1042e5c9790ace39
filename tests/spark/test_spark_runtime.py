"""The Spark runtime against the local runtime and the reference interpreter.

Every scenario feeds the same seeded random stream (insertions and retractions, several epochs
in flight before ``run()``) to a dataflow on each runtime, then checks, for every output::

    spark snapshot(epoch=e)  ==  local snapshot(epoch=e)    row for row, dtypes included
    spark changes()          ==  local changes()
    snapshot(epoch=e)        ==  reference(flow, inputs accumulated at e)

Data is tiny: a Spark job costs a quarter to half a second here, and every operator step runs a
few.
"""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import ddflow as dd
from ddflow.testing import frame_to_counter, reference

pytestmark = pytest.mark.spark

Update = tuple[str, tuple[Any, ...], int]
Build = Callable[[dict[str, dd.InputCollection]], Sequence[dd.Collection]]


# ---------------------------------------------------------------------- driver


def random_stream(
    rng: random.Random,
    records: dict[str, Callable[[random.Random], tuple]],
    epochs: int,
    per_epoch: int,
) -> list[list[Update]]:
    """±1 updates; a retraction usually removes a record inserted earlier."""
    live: list[tuple[str, tuple]] = []
    stream = []
    names = sorted(records)
    for _ in range(epochs):
        updates: list[Update] = []
        for _ in range(per_epoch):
            if live and rng.random() < 0.3:
                name, rec = live.pop(rng.randrange(len(live)))
                updates.append((name, rec, -1))
            else:
                name = rng.choice(names)
                rec = records[name](rng)
                live.append((name, rec))
                updates.append((name, rec, 1))
        stream.append(updates)
    return stream


def run(
    flow: dd.Dataflow,
    schemas: dict[str, dict[str, str]],
    build: Build,
    stream: list[list[Update]],
    run_points: set[int],
) -> list[dd.Output]:
    inputs = {name: flow.input(name, schema=s) for name, s in schemas.items()}
    outputs = [c.output() for c in build(inputs)]
    for e, updates in enumerate(stream):
        rows: dict[str, list[tuple]] = {}
        for name, rec, diff in updates:
            rows.setdefault(name, []).append((*rec, diff))
        for name, batch in rows.items():
            inputs[name].update(batch)
        flow.advance_to(e + 1)
        if e in run_points:
            flow.run()
    flow.run()
    return outputs


def accumulated(stream: list[list[Update]], epoch: int, names: Sequence[str]) -> dict[str, Counter]:
    acc: dict[str, Counter] = {n: Counter() for n in names}
    for updates in stream[: epoch + 1]:
        for name, rec, diff in updates:
            acc[name][rec] += diff
    return {n: Counter({r: m for r, m in c.items() if m}) for n, c in acc.items()}


def same(got: pl.DataFrame, want: pl.DataFrame, what: str) -> None:
    """Equal row for row, dtypes included, floats exactly (NaN equal to NaN)."""
    try:
        assert_frame_equal(got, want, check_exact=True)
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}\nspark:\n{got}\nlocal:\n{want}") from None


def check_both(
    spark: Any,
    schemas: dict[str, dict[str, str]],
    build: Build,
    stream: list[list[Update]],
    run_points: set[int],
    against_reference: bool = True,
    spark_runtime: Any = None,
) -> tuple[dd.Dataflow, list[dd.Output]]:
    """Run on both runtimes (the Spark one ``spark_runtime``, default ``SparkRuntime(spark)``);
    compare every epoch's snapshot and the change logs."""
    local_flow = dd.Dataflow()
    local = run(local_flow, schemas, build, stream, run_points)
    spark_flow = dd.Dataflow(runtime=spark_runtime or dd.SparkRuntime(spark))
    remote = run(spark_flow, schemas, build, stream, run_points)
    for i, (lo, sp) in enumerate(zip(local, remote, strict=True)):
        assert sp.complete_through == lo.complete_through == len(stream) - 1
        for e in range(len(stream)):
            same(sp.snapshot_polars(e), lo.snapshot_polars(e), f"output {i} at epoch {e}")
        same(pl.from_pandas(sp.changes()), pl.from_pandas(lo.changes()), f"changes of output {i}")
    if against_reference:
        for e in range(len(stream)):
            want = reference(spark_flow, accumulated(stream, e, list(schemas)))
            for i, out in enumerate(remote):
                got = frame_to_counter(out.snapshot(epoch=e))
                assert got == want[out], f"output {i}, epoch {e}"
    spark_flow.runtime.release()
    return spark_flow, remote


# ---------------------------------------------------------------------- linear operators

XS = {"xs": {"k": "int64", "v": "int64", "f": "float64?", "s": "str?"}}


def xs_record(rng: random.Random) -> tuple:
    return (
        rng.randrange(3),
        rng.randrange(-3, 6),
        rng.choice([None, -1.5, 0.0, 0.25, 2.0]),
        rng.choice([None, "", "ab", "Ba", "abc"]),
    )


def test_linear_operators_and_expressions(spark):
    def build(i):
        xs = i["xs"]
        k, v, f, s = dd.col("k"), dd.col("v"), dd.col("f"), dd.col("s")
        exprs = xs.select(
            "k",
            arith=(v * 3 - k) // 2 + v % 3,
            ratio=v / 4,
            pw=(v**2).cast("int64"),
            cmp=(v > k) & ~(f <= 0.25) | s.is_null(),
            txt=dd.concat_str(s.str.upper(), k, separator="-"),
            has=s.str.contains("b") ^ s.str.starts_with("a"),
            n=s.str.len().fill_null(-1),
            cls=dd.when(v < 0)
            .then(dd.lit("neg"))
            .when(v == 0)
            .then(dd.lit("zero"))
            .otherwise(dd.lit("pos")),
            g=dd.greatest(f, v, dd.lit(0.5)),
            r=(f * 3 + 0.125).round(1),
            fl=f.floor(),
            inset=v.is_in([0, 2, 4]),
            c32=v.cast("int32") + 1,
            fs=f.cast("str"),
        )
        kept = xs.filter((v >= 0) & s.is_not_null()).with_columns(v=v * 10, w=dd.coalesce(f, 9.0))
        mapped = xs.map(lambda r: (r[0] + r[1], r[3] or "-"), schema={"sum": "int64", "s": "str"})
        flat = xs.flat_map(lambda r: [(r[0],)] * (r[1] % 3), schema={"k": "int64"})
        both = xs.select("k", "v").concat(xs.select("k", v=dd.col("v") + 1).negate())
        return [
            exprs,
            kept,
            mapped,
            flat,
            both,
            xs.select("k", "v").distinct(),
            xs.select("k").threshold(lambda m: 1 if m >= 2 else 0),
        ]

    rng = random.Random(1)
    stream = random_stream(rng, {"xs": xs_record}, epochs=3, per_epoch=5)
    check_both(spark, XS, build, stream, run_points={0})


# ---------------------------------------------------------------------- joins and reductions

JOINS = {
    "a": {"k": "int64", "j": "int32", "x": "int64"},
    "b": {"k": "int64", "j": "int64", "y": "str"},
}


def test_joins_and_group_by(spark):
    def build(i):
        a, b = i["a"], i["b"]
        return [
            a.join(b, on=["k", "j"]),  # two keys, int32 with int64
            a.join(b, left_on="x", right_on="j"),
            a.semijoin(b, on="k"),
            a.antijoin(b, on="k"),
            a.group_by("k").agg(
                n=dd.count(), total=dd.sum("x"), lo=dd.min("x"), hi=dd.max("x"), avg=dd.mean("x")
            ),
            b.group_by("k", "y").reduce(
                lambda key, group: [(len(group), sum(j * m for (j,), m in group))],
                schema={"distinct_rows": "int64", "weighted": "int64"},
            ),
        ]

    rng = random.Random(2)
    records = {
        "a": lambda r: (r.randrange(3), r.randrange(2), r.randrange(4)),
        "b": lambda r: (r.randrange(3), r.randrange(4), r.choice(["p", "q"])),
    }
    stream = random_stream(rng, records, epochs=3, per_epoch=6)
    check_both(spark, JOINS, build, stream, run_points={0})


# ---------------------------------------------------------------------- loops

EDGES = {"edges": {"src": "int64", "dst": "int64"}}


def edge(rng: random.Random) -> tuple:
    return (rng.randrange(5), rng.randrange(5))


NESTED = {
    "roots": {"n": "int64"},
    "a": {"src": "int64", "dst": "int64"},
    "b": {"src": "int64", "dst": "int64"},
}


def nested_reach(i: dict[str, dd.Collection]) -> dd.Collection:
    """Reachability two loops deep: the inner loop closes the set under ``a`` edges, each
    outer round then takes one step along ``b`` edges."""
    a, b = i["a"].distinct(), i["b"].distinct()

    def outer(x: dd.Collection) -> dd.Collection:
        def inner(y: dd.Collection) -> dd.Collection:
            step = y.join(a, left_on="n", right_on="src").select(n="dst")
            return y.concat(step, x).distinct()

        closed = x.iterate(inner)
        return closed.concat(closed.join(b, left_on="n", right_on="src").select(n="dst")).distinct()

    return i["roots"].distinct().iterate(outer)


def test_nested_iterate(spark):
    stream = [
        [("roots", (0,), 1), ("a", (0, 1), 1), ("a", (1, 2), 1), ("b", (2, 3), 1)],
        [("a", (3, 4), 1), ("roots", (4,), 1)],
        [("a", (1, 2), -1), ("b", (4, 0), 1)],
    ]
    check_both(spark, NESTED, lambda i: [nested_reach(i)], stream, run_points=set())


def test_deferred_merges_give_the_same_results(spark):
    """With ``merge_parts`` above 2, merges of few small batches are deferred (unions with
    advanced times, no Spark job): results stay exact, and some merges were deferred."""
    runtime = dd.SparkRuntime(spark, merge_parts=8)
    kernels = runtime.kernels
    deferred = []
    merge = kernels.merge

    def counting_merge(*args, **kwargs):
        out = merge(*args, **kwargs)
        if "parts" in kernels.facts(out).extra:
            deferred.append(out)
        return out

    kernels.merge = counting_merge

    def build(i):
        a, b = i["a"], i["b"]
        return [a.join(b, on="k"), a.group_by("k").agg(n=dd.count(), lo=dd.min("x"))]

    rng = random.Random(5)
    records = {
        "a": lambda r: (r.randrange(3), r.randrange(2), r.randrange(4)),
        "b": lambda r: (r.randrange(3), r.randrange(4), r.choice(["p", "q"])),
    }
    stream = random_stream(rng, records, epochs=5, per_epoch=4)
    check_both(spark, JOINS, build, stream, run_points=set(range(5)), spark_runtime=runtime)
    assert deferred, "no merge was deferred: the test does not exercise the deferred path"


def test_prioritized_iterate(spark):
    def build(i):
        e = i["edges"].distinct()
        sym = e.concat(e.select(src="dst", dst="src")).distinct()
        labels = sym.select(node="src", label="src").distinct()

        def propagate(lab: dd.Collection) -> dd.Collection:
            sent = lab.join(sym, left_on="node", right_on="src").select(node="dst", label="label")
            return sent.concat(lab).group_by("node").agg(label=dd.min("label"))

        return [labels.prioritized_iterate(propagate, priority=dd.col("label") % 3)]

    rng = random.Random(4)
    stream = random_stream(rng, {"edges": edge}, epochs=2, per_epoch=3)
    check_both(spark, EDGES, build, stream, run_points={0})


# ---------------------------------------------------------------------- Spark inputs


def test_spark_dataframe_inputs_stay_on_spark(spark):
    from ddflow.io.spark import insert_dataframe

    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark))
    xs = flow.input("xs", schema={"k": "int64", "v": "int32"})
    out = xs.group_by("k").agg(n=dd.count(), total=dd.sum("v")).output()
    insert_dataframe(xs, spark.createDataFrame([(1, 2), (1, 3), (2, 5)], "k bigint, v int"))
    xs.insert([(2, 1)])
    flow.advance_to(1)
    flow.run()
    changes = spark.createDataFrame([(1, 2, -1), (3, 7, 2)], "k bigint, v bigint, d int")
    insert_dataframe(xs, changes, diff="d")
    flow.advance_to(2)
    flow.run()
    rows = sorted(tuple(r) for r in out.changes().itertuples(index=False))
    #               k  n total time diff
    assert rows == [
        (1, 1, 3, 1, 1),
        (1, 2, 5, 0, 1),
        (1, 2, 5, 1, -1),
        (2, 2, 6, 0, 1),
        (3, 2, 14, 1, 1),
    ]


def test_the_runtime_sets_its_session_settings(spark):
    """A runtime turns Spark's runtime bloom filters off on its session: every trace lookup
    would otherwise get a subquery job and a 1 MiB filter shipped with each task."""
    from ddflow.runtime.spark.settings import SparkSettings

    key = "spark.sql.optimizer.runtime.bloomFilter.enabled"
    assert SparkSettings().session[key] == "false"
    spark.conf.set(key, "true")
    dd.SparkRuntime(spark)
    assert spark.conf.get(key) == "false"


def test_keywords_override_the_settings(spark):
    from ddflow.runtime.spark.settings import SparkSettings

    runtime = dd.SparkRuntime(spark, SparkSettings(merge_parts=8), partitions=2)
    assert (runtime.settings.partitions, runtime.settings.merge_parts) == (2, 8)
    assert runtime.kernels.settings is runtime.settings
    # partitions=None (the default): the session's shuffle partitions
    assert dd.SparkRuntime(spark).kernels.partitions == int(
        spark.conf.get("spark.sql.shuffle.partitions")
    )
    with pytest.raises(TypeError, match=r"no setting 'partition'.*partitions, checkpoint_every"):
        dd.SparkRuntime(spark, partition=2)
    with pytest.raises(TypeError, match=r"partitions=2"):
        dd.SparkRuntime(spark, 2)


def test_settings_out_of_range_are_named():
    from ddflow.runtime.spark.settings import SparkSettings

    for name in ("partitions", "checkpoint_every", "merge_parts"):
        with pytest.raises(ValueError, match=f"{name} must be at least 1, got 0"):
            SparkSettings(**{name: 0})
    with pytest.raises(ValueError, match="merge_rows"):
        SparkSettings(merge_rows=-1)
    given = {"spark.sql.shuffle.partitions": "3"}
    settings = SparkSettings(session=given)
    given["spark.sql.shuffle.partitions"] = "5"  # the settings hold a copy
    assert settings.session == {"spark.sql.shuffle.partitions": "3"}


# ---------------------------------------------------------------------- null keys


def test_null_keys_group_as_in_the_reference(spark):
    """A null key is a group (reference semantics); joins never match null keys (SQL)."""
    schemas = {"xs": {"k": "int64?", "s": "str?", "v": "int64"}}
    stream = [
        [("xs", (None, None, 1), 1), ("xs", (None, "a", 2), 1), ("xs", (1, None, 3), 1)],
        [("xs", (None, None, 1), -1), ("xs", (2, "a", 5), 1)],
    ]

    def build(i):
        xs = i["xs"]
        return [
            xs.group_by("k").agg(n=dd.count(), lo=dd.min("v")),
            xs.group_by("s").agg(n=dd.count()),
            xs.distinct(),
        ]

    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark))
    outs = run(flow, schemas, build, stream, run_points=set())
    for e in range(len(stream)):
        want = reference(flow, accumulated(stream, e, ["xs"]))
        for out in outs:
            assert frame_to_counter(out.snapshot(epoch=e)) == want[out]


def test_local_null_keys_group_as_in_the_reference():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64?", "v": "int64"})
    out = xs.group_by("k").agg(n=dd.count()).output()
    xs.insert([(None, 1)])
    flow.advance_to(1)
    flow.run()
    assert frame_to_counter(out.snapshot()) == Counter({(None, 1): 1})


# ---------------------------------------------------------------------- expressions, exactly

EDGE = {
    "a": "int64?",
    "b": "int64?",
    "i": "int32?",
    "x": "float64?",
    "y": "float64?",
    "f": "float32?",
    "s": "str?",
    "p": "bool?",
    "d": "date?",
    "t": "datetime?",
}
NAN, INF = float("nan"), float("inf")
EDGE_ROWS = [
    (7, 2, 7, 7.5, 2.0, 1.5, "abc", True, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5, 6)),
    (
        -7,
        2,
        -7,
        -7.5,
        -2.0,
        -0.1,
        "ABC",
        False,
        dt.date(1900, 3, 1),
        dt.datetime(1969, 12, 31, 23, 59, 59, 500000),
    ),
    (7, -2, 100, 1.0, 0.0, 2.675, "", None, None, None),
    (-7, -2, -3, -1.0, -0.0, 0.285, " 12", True, dt.date(2000, 2, 29), None),
    (0, 0, 0, 0.0, 0.0, 1e30, "1.5", False, None, dt.datetime(2000, 1, 1)),
    (5, 0, 2**31 - 1, NAN, 1.0, NAN, "1e3", None, None, None),
    (None, 3, None, INF, 2.0, -INF, None, None, None, None),
    (3, None, 1, -INF, NAN, 0.0, "inf", True, None, None),
    (2**40, 7, -(2**31), 2.5, 0.5, -2.5, "ßtraße", False, None, None),
    (-(2**40), -3, 5, -0.0, -3.0, 1e-7, "ΣΑΣ", True, None, None),
    (1, 1, 1, 1e-7, 3.0, 0.125, "-0", None, None, None),
    (10, 4, 3, 1.005, 7.0, 3e9, "12", False, None, None),
    (-1, 5, 4, 123456789.123, 100.0, -0.0, "x1", None, None, None),
    (None, None, None, None, None, None, None, None, None, None),
]


def edge_expressions() -> dict[str, dd.Expr]:
    a, b, i, x, y = dd.col("a"), dd.col("b"), dd.col("i"), dd.col("x"), dd.col("y")
    f, s, p, d, t = dd.col("f"), dd.col("s"), dd.col("p"), dd.col("d"), dd.col("t")
    return {
        "add": a + b,
        "sub": i - 1,
        "mul": a * b,
        "i32": i * 2 + 1,
        "div": a / b,
        "fdiv": x / y,
        "f32div": f / (f + 1),
        "floordiv": a // b,
        "mod": a % b,
        "ffloordiv": x // y,
        "fmod": x % y,
        "f32mod": f % (f - 1),
        "pow": b**a,
        "fpow": y**x,
        "f32pow": f**f,
        "eq": x == y,
        "lt": x < y,
        "ge": f >= x,
        "ne": a != i,
        "nan_eq": x == NAN,
        "f32cmp": f > 0.1,
        "icmp": i > 1.5,
        "str_lt": s < "b",
        "and": p & (a > 0),
        "or": p | (a > 0),
        "xor": p ^ (b > 0),
        "not": ~p,
        "neg": -x,
        "abs": x.abs(),
        "iabs": i.abs(),
        "to_i": x.cast("int64"),
        "to_i32": a.cast("int32"),
        "to_f32": x.cast("float32"),
        "f_to_s": x.cast("str"),
        "f32_to_s": f.cast("str"),
        "i_to_s": a.cast("str"),
        "s_to_i": s.cast("int64"),
        "s_to_f": s.cast("float64"),
        "b_to_i": p.cast("int64"),
        "t_to_s": t.cast("str"),
        "d_to_s": d.cast("str"),
        "t_to_d": t.cast("date"),
        "d_to_t": d.cast("datetime"),
        "i_to_b": a.cast("bool"),
        "when": dd.when(a > 0).then(x).when(b > 0).then(y),
        "when_f32": dd.when(p).then(f).otherwise(0.1),
        "is_null": x.is_null(),
        "not_null": s.is_not_null(),
        "fill": x.fill_null(y),
        "in": a.is_in([0, 2**40, 7]),
        "fin": x.is_in([NAN, 1.0, 2.5]),
        "sin": s.is_in(["", "x1"]),
        "round0": x.round(),
        "round2": x.round(2),
        "f32round": f.round(2),
        "floor": x.floor(),
        "ceil": y.ceil(),
        "f32floor": f.floor(),
        "sqrt": x.sqrt(),
        "log": y.log(),
        "log1p": y.log1p(),
        "exp": y.exp(),
        "f32exp": f.exp(),
        "clip": x.clip(-1.0, y),
        "iclip": a.clip(lower=0),
        "clipnan": y.clip(upper=x),
        "lower": s.str.lower(),
        "upper": s.str.upper(),
        "len": s.str.len(),
        "contains": s.str.contains("b"),
        "starts": s.str.starts_with("a"),
        "ends": s.str.ends_with("c"),
        "year": d.dt.year(),
        "tyear": t.dt.year(),
        "least": dd.least(x, y, 1.0),
        "greatest": dd.greatest(x, y),
        "igreatest": dd.greatest(a, i),
        "coalesce": dd.coalesce(x, y, 0.0),
        "concat": dd.concat_str(s, a, separator="/"),
        "concat_f": dd.concat_str(s, x),
    }


def test_expressions_match_polars_exactly(spark):
    from ddflow.expr.nodes import compile_polars
    from ddflow.runtime.spark.kernels import SparkKernels
    from ddflow.runtime.spark.settings import SparkSettings
    from ddflow.schema import Schema

    schema = Schema(EDGE)
    frame = schema.rows_to_frame(EDGE_ROWS)
    exprs = edge_expressions()
    want = frame.select([compile_polars(e, schema).alias(n) for n, e in exprs.items()])
    k = SparkKernels(spark, SparkSettings(partitions=4))
    df = k.from_polars(frame)
    got = pl.from_arrow(
        df.select(*[k.compile(e, schema, n).column for n, e in exprs.items()]).toArrow()
    )
    wrong = []
    for n in exprs:
        try:
            assert_frame_equal(got.select(n), want.select(n), check_exact=True)
        except AssertionError:
            rows = list(zip(got[n].to_list(), want[n].to_list(), strict=True))
            wrong.append(
                f"{n} {exprs[n]!r}: {got[n].dtype} vs {want[n].dtype}, (spark, local) "
                f"{[r for r in rows if repr(r[0]) != repr(r[1])]}"
            )
    assert not wrong, "\n".join(wrong)


def random_edge_rows(rng: random.Random, n: int) -> list[tuple]:
    def num() -> float:
        return rng.choice(
            [
                rng.uniform(-10, 10),
                rng.uniform(-1e6, 1e6),
                rng.uniform(-1, 1),
                float(rng.randrange(-5, 6)) / 4,
                rng.expovariate(0.1),
            ]
        )

    return [
        (
            rng.randrange(-50, 50),
            rng.randrange(-7, 8),
            rng.randrange(-100, 100),
            num(),
            num(),
            num(),
            rng.choice(["a", "b", "ab", "12", "-3", "x"]),
            rng.random() < 0.5,
            None,
            None,
        )
        for _ in range(n)
    ]


def test_expressions_match_polars_on_random_values(spark):
    from ddflow.expr.nodes import compile_polars
    from ddflow.runtime.spark.kernels import SparkKernels
    from ddflow.runtime.spark.settings import SparkSettings
    from ddflow.schema import Schema

    schema = Schema(EDGE)
    frame = schema.rows_to_frame(random_edge_rows(random.Random(7), 400))
    exprs = edge_expressions()
    want = frame.select([compile_polars(e, schema).alias(n) for n, e in exprs.items()])
    k = SparkKernels(spark, SparkSettings(partitions=4))
    got = pl.from_arrow(
        k.from_polars(frame)
        .select(*[k.compile(e, schema, n).column for n, e in exprs.items()])
        .toArrow()
    )
    wrong = [n for n in exprs if not got.select(n).equals(want.select(n), null_equal=True)]
    assert not wrong, wrong


def test_every_function_compiles_and_a_missing_one_is_named(spark, monkeypatch):
    from ddflow.errors import ExpressionError
    from ddflow.expr.nodes import FUNCTIONS
    from ddflow.runtime.spark import exprs as spark_expr
    from ddflow.schema import Schema

    assert set(FUNCTIONS) <= set(spark_expr._FUNCTIONS)
    monkeypatch.delitem(spark_expr._FUNCTIONS, "str.upper")
    with pytest.raises(ExpressionError, match=r"'str\.upper'"):
        spark_expr.compile_spark(dd.col("s").str.upper(), Schema({"s": "str"}))


def test_lattice_columns_match_the_scalar_lattice(spark):
    from ddflow.runtime.spark.lattice import advance_columns, join_columns, le_column
    from ddflow.timely.lattice import TimeType

    tt = TimeType(("product", "lexicographic", "product"))
    rng = random.Random(5)
    rows = [tuple(rng.randrange(3) for _ in range(2 * tt.width)) for _ in range(60)]
    frontier = [(1, 0, 2, 1), (0, 2, 0, 2), (2, 1, 1, 0)]
    a, b = ["a0", "a1", "a2", "a3"], ["b0", "b1", "b2", "b3"]
    df = spark.createDataFrame(rows, [*a, *b])
    got = df.select(
        le_column(tt, a, b).alias("le"),
        *join_columns(tt, [dd_col(c) for c in a], [dd_col(c) for c in b], ["j0", "j1", "j2", "j3"]),
        *advance_columns(tt, a, frontier),
    ).collect()
    for row, out in zip(rows, got, strict=True):
        s, t = row[:4], row[4:]
        assert out["le"] == tt.less_equal(s, t)
        assert tuple(out[f"j{i}"] for i in range(4)) == tt.join(s, t)
        assert tuple(out[c] for c in a) == tt.advance_by(s, frontier)


def dd_col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col(name)


# ---------------------------------------------------------------------- environment


def test_missing_java_is_a_clear_error(monkeypatch, tmp_path):
    from ddflow.runtime.spark.session import SparkUnavailableError, require_java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkUnavailableError, match="JAVA_HOME"):
        require_java()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailableError, match="no java on PATH"):
        require_java()


def test_importing_ddflow_does_not_import_pyspark():
    code = "import sys, ddflow; assert 'pyspark' not in sys.modules; ddflow.SparkRuntime"
    subprocess.run([sys.executable, "-c", code], check=True)
