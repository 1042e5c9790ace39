"""Reachability (BFS distances from one root): ddflow's incremental update against Spark SQL
``WITH RECURSIVE`` and plain Spark DataFrames recomputing, in the same run.

ddflow maintains ``dd.graph.bfs`` on the embedded runtime and absorbs single-edge changes
(one edge removed and one added per epoch). The baselines recompute the distances from
scratch on the final graph:

* Spark SQL ``WITH RECURSIVE``: Spark's recursive common table expressions accept only
  ``UNION ALL`` (``UNION`` is rejected), so a recursive step cannot drop nodes already
  reached: the query enumerates *walks* from the root, bounded by a depth, and takes the least
  depth per node. It is given the true eccentricity of the root as its bound (without a bound
  it never ends on a graph with a cycle); the number of walks grows with the branching factor
  to the power of the depth, so it is run on a sparse random graph;
* Spark DataFrames: level-synchronous BFS (join the frontier with the edges, anti-join the
  visited nodes), one round per level.

All three results are checked equal to NetworkX's.
"""

from __future__ import annotations

import time
from typing import Any

import networkx as nx
import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, summary


def sparse_graph(nodes: int, edges: int, seed: int) -> pl.DataFrame:
    """A seeded random directed graph (no self-loops, no duplicate edges)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges * 2, dtype=np.int64)
    dst = rng.integers(0, nodes, edges * 2, dtype=np.int64)
    g = pl.DataFrame({"src": src, "dst": dst}).filter(pl.col("src") != pl.col("dst"))
    return g.unique(maintain_order=True).head(edges)


def nx_distances(edges: pl.DataFrame, root: int) -> dict[int, int]:
    g = nx.DiGraph()
    g.add_edges_from(edges.iter_rows())
    g.add_node(root)
    return dict(nx.single_source_shortest_path_length(g, root))


def sql_distances(spark: Any, depth: int) -> tuple[dict[int, int], int]:
    """BFS distances by ``WITH RECURSIVE`` over walks of at most ``depth`` edges; also the
    number of walks the recursion produced."""
    walks = spark.sql(f"""
        WITH RECURSIVE walk(node, depth) AS (
            SELECT node, 0 FROM root
            UNION ALL
            SELECT e.dst, w.depth + 1 FROM walk w JOIN edges e ON w.node = e.src
            WHERE w.depth < {depth}
        )
        SELECT node, depth FROM walk""")
    walks.createOrReplaceTempView("walks")
    count = spark.sql("SELECT count(*) AS n FROM walks").collect()[0]["n"]
    rows = spark.sql("SELECT node, min(depth) AS d FROM walks GROUP BY node").collect()
    return {r["node"]: r["d"] for r in rows}, int(count)


def dataframe_distances(spark: Any, root: int) -> tuple[dict[int, int], int]:
    """Level-synchronous BFS with DataFrames; also the number of rounds."""
    from pyspark.sql import functions as F

    edges = spark.table("edges")
    visited = spark.createDataFrame([(root, 0)], "node long, d int").localCheckpoint(eager=True)
    frontier = visited
    level = 0
    while True:
        level += 1
        nxt = (
            frontier.join(edges, frontier.node == edges.src)
            .select(edges.dst.alias("node"))
            .distinct()
            .join(visited, "node", "left_anti")
            .withColumn("d", F.lit(level))
        ).localCheckpoint(eager=True)
        if nxt.limit(1).count() == 0:
            rows = visited.collect()
            return {r["node"]: r["d"] for r in rows}, level
        visited = visited.union(nxt).localCheckpoint(eager=True)
        frontier = nxt


def run(quick: bool = False) -> dict[str, Any]:
    from ddflow.runtime.spark.session import local_session

    nodes, n_edges, runs = (2_000, 3_200, 5) if quick else (20_000, 32_000, 11)
    edges = sparse_graph(nodes, n_edges, seed=4)
    # the root: the node with the most out-edges (in the giant out-component)
    root = int(edges.group_by("src").len().sort(["len", "src"], descending=True)["src"][0])
    flow = dd.Dataflow()
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    roots = flow.input("roots", schema={"node": "int64"})
    out = dd.graph.bfs(inp, roots).output()
    t0 = time.perf_counter()
    inp.insert_frame(edges)
    roots.insert([root])
    flow.advance_to(1)
    flow.run()
    first = time.perf_counter() - t0
    rng = np.random.default_rng(9)
    live = edges
    lat = []
    for _ in range(runs):
        i = int(rng.integers(0, live.height))
        gone = live[i]
        new = pl.DataFrame({"src": rng.integers(0, nodes, 1), "dst": rng.integers(0, nodes, 1)})
        t0 = time.perf_counter()
        inp.remove_frame(gone)
        inp.insert_frame(new)
        flow.advance_to(flow.epoch + 1)
        flow.run()
        lat.append(time.perf_counter() - t0)
        live = pl.concat([live[:i], live[i + 1 :], new])
    expected = nx_distances(live, root)
    snap = out.snapshot_polars()
    got = dict(zip(snap["node"].to_list(), snap["distance"].to_list(), strict=True))
    assert got == expected, "ddflow and NetworkX disagree"
    depth = max(expected.values())

    spark = local_session("ddflow-bench", partitions=4)
    spark.conf.set("spark.sql.cteRecursionLevelLimit", str(depth + 2))
    spark.conf.set("spark.sql.cteRecursionRowLimit", "-1")
    spark.createDataFrame(live.to_arrow()).createOrReplaceTempView("edges")
    spark.createDataFrame([(root,)], "node long").createOrReplaceTempView("root")
    sql_runs, frame_runs = [], []
    for _ in range(2):  # the first run of each also warms up the JVM; both are reported
        t0 = time.perf_counter()
        sql, walks = sql_distances(spark, depth)
        sql_runs.append(time.perf_counter() - t0)
        assert sql == expected, "Spark SQL and NetworkX disagree"
        t0 = time.perf_counter()
        frames, rounds = dataframe_distances(spark, root)
        frame_runs.append(time.perf_counter() - t0)
        assert frames == expected, "Spark DataFrames and NetworkX disagree"
    sql_s, frames_s = min(sql_runs), min(frame_runs)
    update = summary(lat)
    return {
        "benchmark": "spark_reach",
        "machine": machine(),
        "graph": {
            "nodes": nodes,
            "edges": live.height,
            "kind": "uniform random, directed",
            "reached_from_root": len(expected),
            "root_eccentricity": depth,
        },
        "ddflow_first_result_s": round(first, 3),
        "ddflow_update_single_edge": update,
        "spark_sql_with_recursive": {
            "seconds": [round(x, 2) for x in sql_runs],
            "walks_enumerated": walks,
            "note": "UNION ALL only: walks bounded by the eccentricity",
        },
        "spark_dataframes_bfs": {"seconds": [round(x, 2) for x in frame_runs], "rounds": rounds},
        # against the faster (warm) run of each baseline
        "speedup_update_vs_spark_sql": round(sql_s * 1e3 / update["median_ms"], 1),
        "speedup_update_vs_spark_dataframes": round(frames_s * 1e3 / update["median_ms"], 1),
    }
