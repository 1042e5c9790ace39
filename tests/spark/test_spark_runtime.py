"""The Spark runtime (the workers hosted by Spark: ``SparkRuntime(spark, workers=2)`` in
``local[2]``) against the local runtime and the reference interpreter.

Every scenario feeds the same seeded random stream (insertions and retractions, several epochs
in flight before ``run()``) to a dataflow on each runtime, then checks, for every output::

    spark snapshot(epoch=e)  ==  local snapshot(epoch=e)    row for row, dtypes included
    spark changes()          ==  local changes()
    snapshot(epoch=e)        ==  reference(flow, inputs accumulated at e)
"""

from __future__ import annotations

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
) -> tuple[dd.Dataflow, list[dd.Output]]:
    """Run on both runtimes (on Spark, two workers hosted by Spark); compare every epoch's
    snapshot and the change logs."""
    local_flow = dd.Dataflow()
    local = run(local_flow, schemas, build, stream, run_points)
    spark_flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
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
    spark_flow.close()
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


def test_spark_dataframe_inputs_and_changes(spark):
    from ddflow.io.spark import insert_dataframe

    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
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

    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
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
