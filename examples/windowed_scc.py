"""Strongly connected components over a sliding window of edges, on Spark.

    spark-submit examples/windowed_scc.py IN OUT [--window 3600] [--workers 2]

``IN`` is a folder of Parquet files of edges (columns ``src``, ``dst``, ``ts``: integers, ``ts``
an event time), one file per batch, in name order. The job reads them as a Structured
Streaming file source, one file per micro-batch, each micro-batch an epoch. A sliding window
keeps the edges whose ``ts`` is within ``--window`` of the newest ``ts`` seen. The dataflow runs
on ``--workers`` workers hosted by Spark (worker 0 in the driver, the others the tasks of one
barrier stage). It computes the strongly connected components of the windowed graph (each
node with the smallest node id of its component), and writes:

* ``OUT/changes``: the change log of the components, a Parquet folder per epoch (``node``,
  ``component``, ``time``, ``diff``), replaced if an epoch is written again;
* ``OUT/snapshot``: the components after the last epoch, as Parquet;
* a line per epoch on standard output: the epoch, the live edges, the components of two
  nodes or more.

It stops when every file present at its start has been processed.
"""

from __future__ import annotations

import argparse
import os
import sys

import ddflow as dd
from ddflow.io import spark as io


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", help="a folder of Parquet files of edges: src, dst, ts")
    parser.add_argument("output", help="where the change log and the snapshot go")
    parser.add_argument("--window", type=int, default=3600, help="window size, in ts units")
    parser.add_argument("--workers", type=int, default=2, help="workers (one is the driver)")
    args = parser.parse_args(argv)
    files = sorted(
        n for n in os.listdir(args.input) if n.endswith(".parquet") and not n.startswith(".")
    )
    if not files:
        parser.error(f"no Parquet files in {args.input}")

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("ddflow windowed SCC").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    with dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=args.workers)) as flow:
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"})
        live = edges.select("src", "dst")
        scc = dd.graph.strongly_connected_components(live)
        out = scc.output()
        sizes = scc.group_by("component").agg(n=dd.count()).filter(dd.col("n") >= 2).output()
        io.ParquetChangeLog(out, os.path.join(args.output, "changes"), spark=spark)
        io.ParquetSnapshot(out, os.path.join(args.output, "snapshot"))
        window = io.EventTimeWindow(edges, "ts", size=args.window)
        stream = (
            spark.readStream.schema(io.spark_schema(edges))
            .option("maxFilesPerTrigger", 1)
            .parquet(args.input)
        )
        source = io.StreamingSource(
            stream, window, flow, checkpoint=os.path.join(args.output, "_checkpoint")
        )
        try:
            for i in range(len(files)):
                source.wait_for(i + 1, timeout=600)
                print(
                    f"epoch {i}: {len(window.live)} live edges, "
                    f"{sizes.snapshot().shape[0]} components of two nodes or more",
                    flush=True,
                )
        finally:
            source.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
