"""A pipeline the crash harness (:mod:`benchmarks.crash`) kills and restarts: a folder of
Parquet files, one an epoch, into connected components and a per-node degree, with Parquet
change logs and a snapshot, checkpointed every ``EVERY`` epochs; on start it restores the latest
checkpoint and reads on from there. It prints ``restored E`` once restored and ``epoch E`` as
each epoch completes.

    python -m benchmarks.crash_child IN OUT CHECKPOINTS EVERY WORKERS

``WORKERS``: a number of workers in this process, ``Np`` for N worker processes, ``Nn`` for N
workers in this process with the reduces in the native core, or ``spark`` for two workers
hosted by Spark (``local[2]``).
"""

from __future__ import annotations

import os
import sys

import ddflow as dd
from ddflow.io import spark as io


def main(folder: str, out: str, checkpoints: str, every: int, workers: str) -> None:
    if workers == "spark":
        from ddflow.runtime.spark.session import local_session

        runtime = dd.SparkRuntime(local_session("ddflow-crash"), workers=2)
        flow = dd.Dataflow(runtime=runtime, checkpoint=checkpoints, checkpoint_every=every)
    elif workers.endswith("n"):
        from ddflow.runtime.local.settings import LocalSettings, ReduceSettings

        flow = dd.Dataflow(
            workers=int(workers[:-1]),
            runtime=dd.LocalRuntime(LocalSettings(reduce=ReduceSettings(native=True))),
            checkpoint=checkpoints,
            checkpoint_every=every,
        )
    else:
        flow = dd.Dataflow(
            workers=int(workers.rstrip("p")),
            processes=workers.endswith("p"),
            checkpoint=checkpoints,
            checkpoint_every=every,
        )
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    labels = dd.graph.connected_components(edges).output()
    degree = edges.group_by("src").agg(n=dd.count()).output()
    io.ParquetChangeLog(labels, os.path.join(out, "log"))
    io.ParquetSnapshot(labels, os.path.join(out, "snapshot"))
    io.ParquetChangeLog(degree, os.path.join(out, "degree-log"))
    source = io.FolderSource(None, edges, folder, diff="d")  # (Parquet: read without Spark)
    # (each complete epoch said on stdout, for the harness to choose when to kill)
    degree.subscribe(lambda changes: print("epoch", int(changes["time"].max()), flush=True))
    print("restored", flow.restore(), flush=True)
    source.poll()
    flow.close()
    with open(os.path.join(out, "DONE"), "w") as f:
        f.write(str(flow.epoch))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
