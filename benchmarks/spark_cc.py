"""Connected components on Spark: an incremental update of 0.1% of the edges, against
recomputing components from scratch with plain Spark DataFrames.

ddflow loads an R-MAT graph, computes components, then applies one batch changing 0.1% of the
edges (half deletions, half insertions), then one single-edge change, on two workers hosted
by Spark (``dd.SparkRuntime(spark, workers=2)`` in ``local[2]``: worker 0 in the driver, worker
1 a barrier task). The baseline is iterative min-label propagation written
directly with Spark DataFrames (join, union, groupBy-min until no label changes,
checkpointing each round), run on the changed graph in the same Spark session. Both results
are checked equal. ``SPARK_CC_EDGES`` lists the graph sizes (default ``1000000,5000000``).
A one-edge change to a 6-edge graph is timed too, and the first result again with the edges
as Parquet files that the workers read themselves (``first_result_files_read_by_workers_s``:
an input made with ``signed=True`` and ``read_parquet``, against ``first_result_s``, where
the driver takes the rows and sends worker 1 its share).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, summary
from benchmarks.graphs import random_changes, rmat


def spark_components(spark: Any, edges: pl.DataFrame) -> tuple[Any, int]:
    """Min-label propagation with plain DataFrames; returns (labels DataFrame, rounds)."""
    from pyspark.sql import functions as F

    e = spark.createDataFrame(edges.to_arrow())
    sym = e.union(e.select(F.col("dst").alias("src"), F.col("src").alias("dst"))).distinct()
    sym = sym.localCheckpoint(eager=True)
    labels = sym.select(F.col("src").alias("node")).distinct().withColumn("label", F.col("node"))
    labels = labels.localCheckpoint(eager=True)
    rounds = 0
    while True:
        rounds += 1
        proposals = labels.join(sym, labels.node == sym.src).select(
            sym.dst.alias("node"), labels.label.alias("label")
        )
        new = proposals.union(labels).groupBy("node").agg(F.min("label").alias("label"))
        new = new.localCheckpoint(eager=True)
        changed = new.join(labels, "node").where(new.label != labels.label).limit(1).count()
        labels = new
        if changed == 0:
            return labels, rounds


class Progress:
    """``flow.run(progress=...)``'s reports for one phase of the benchmark: printed to stderr
    every 30 seconds (a full run takes many minutes); ``steps`` is the phase's operator steps
    once its run has ended."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.steps = 0

    def __call__(self, p: dd.RunProgress) -> None:
        self.steps = p.steps
        if not p.done:
            print(
                f"spark_cc: {self.phase}: {p.steps} operator steps, {p.seconds:.0f} s "
                f"(last: {p.operator})",
                file=sys.stderr,
                flush=True,
            )


def one_size(spark: Any, n_edges: int) -> dict[str, Any]:
    from ddflow.runtime.spark.runtime import SparkRuntime

    edges = rmat(n_edges, seed=3)
    n_nodes = int(max(edges["src"].max(), edges["dst"].max())) + 1  # type: ignore[arg-type]
    flow = dd.Dataflow(runtime=SparkRuntime(spark, workers=2))
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(inp).output()
    t0 = time.perf_counter()
    inp.insert_frame(edges)
    flow.advance_to(1)
    flow.run(progress=(first_progress := Progress("first result")), every=30)
    first = time.perf_counter() - t0
    snap = out.snapshot_polars(0)
    first_labels = dict(zip(snap["node"].to_list(), snap["label"].to_list(), strict=True))
    rng = np.random.default_rng(5)
    gone, new = random_changes(edges, n_nodes, max(2, n_edges // 1000), rng)
    t0 = time.perf_counter()
    inp.remove_frame(gone)
    inp.insert_frame(new)
    flow.advance_to(2)
    flow.run(progress=(update_progress := Progress("update")), every=30)
    update = time.perf_counter() - t0
    from benchmarks.cc import _remove_once

    changed = pl.concat([_remove_once(edges, gone), new])
    one_gone, one_new = random_changes(changed, n_nodes, 1, rng)
    t0 = time.perf_counter()
    inp.remove_frame(one_gone)
    inp.insert_frame(one_new)
    flow.advance_to(3)
    flow.run()
    single = time.perf_counter() - t0
    changed = pl.concat([_remove_once(changed, one_gone), one_new])
    t0 = time.perf_counter()
    labels, rounds = spark_components(spark, changed)
    expected = dict(labels.toPandas().itertuples(index=False, name=None))
    recompute = time.perf_counter() - t0
    snap = out.snapshot_polars()
    assert dict(zip(snap["node"].to_list(), snap["label"].to_list(), strict=True)) == expected
    flow.close()
    read_by_workers = first_result_read_by_workers(spark, edges, first_labels)
    return {
        "edges": n_edges,
        "changed_edges": gone.height + new.height,
        "first_result_s": round(first, 2),
        "first_result_files_read_by_workers_s": read_by_workers,
        "operator_steps": {"first_result": first_progress.steps, "update": update_progress.steps},
        "update_0_1_percent": summary([update]),
        "single_change_ms": round(single * 1e3, 2),
        "spark_dataframes_recompute": {**summary([recompute]), "rounds": rounds},
        "first_result_over_recompute": round(first / recompute, 2),
        "speedup_update_vs_recompute": round(recompute / update, 2),
    }


def first_result_read_by_workers(spark: Any, edges: pl.DataFrame, labels: dict[Any, Any]) -> float:
    """Seconds to the first result when the edges are Parquet files the workers read
    themselves (a signed input, ``read_parquet``), not rows passed through the driver."""
    import shutil
    import tempfile

    from ddflow.runtime.spark.runtime import SparkRuntime

    folder = tempfile.mkdtemp(prefix="spark-cc-edges-")
    try:
        parts = 4
        step = -(-edges.height // parts)
        for i in range(parts):
            edges[i * step : (i + 1) * step].write_parquet(f"{folder}/part-{i}.parquet")
        with dd.Dataflow(runtime=SparkRuntime(spark, workers=2)) as flow:
            inp = flow.input("edges", schema={"src": "int64", "dst": "int64"}, signed=True)
            out = dd.graph.connected_components(inp).output()
            t0 = time.perf_counter()
            inp.read_parquet(folder)
            flow.advance_to(1)
            flow.run()
            spent = time.perf_counter() - t0
            snap = out.snapshot_polars()
            got = dict(zip(snap["node"].to_list(), snap["label"].to_list(), strict=True))
            assert got == labels
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return round(spent, 2)


def small_graph_change(spark: Any) -> float:
    """Milliseconds for a one-edge change to a 6-edge graph (after its first result)."""
    from ddflow.runtime.spark.runtime import SparkRuntime

    with dd.Dataflow(runtime=SparkRuntime(spark, workers=2)) as flow:
        inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
        out = dd.graph.connected_components(inp).output()
        inp.insert([(1, 2), (2, 3), (3, 4), (5, 6), (6, 7), (8, 9)])
        flow.advance_to(1)
        flow.run()
        t0 = time.perf_counter()
        inp.insert([(4, 5)])
        flow.advance_to(2)
        flow.run()
        spent = time.perf_counter() - t0
        assert out.snapshot_polars().get_column("label").to_list().count(1) == 7
    return round(spent * 1e3, 2)


def run(quick: bool = False) -> dict[str, Any]:
    from ddflow.runtime.spark.session import local_session

    sizes = (
        [20_000]
        if quick
        else [int(n) for n in os.environ.get("SPARK_CC_EDGES", "1000000,5000000").split(",")]
    )
    spark = local_session("ddflow-bench", partitions=2, driver_memory="8g")
    return {
        "benchmark": "spark_cc",
        "machine": machine(),
        "runtime": "SparkRuntime(spark, workers=2)",
        "sizes": [one_size(spark, n) for n in sizes],
        "small_graph_single_change_ms": small_graph_change(spark),
    }
