"""Checkpoints of connected components: their size and the time to write and to restore one,
against rebuilding the result from the input.

ddflow computes ``dd.graph.connected_components`` of an R-MAT graph (1M edges; 20k with
``--quick``) and applies a few epochs of changes; then ``flow.checkpoint()`` is timed (and the
checkpoint's bytes counted), a new dataflow built the same way is restored from it
(``flow.restore()``), and, as the baseline, another one is fed the graph as it now is and run to
its first result (rebuilding from the input). The restored and the rebuilt flows' results are
checked equal, then one more change is applied to both and checked again. Each timing is the
median of ``CHECKPOINT_RUNS`` runs (default 3), each in a fresh directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb, summary
from benchmarks.graphs import random_changes, rmat


def _flow(directory: str | None) -> tuple[dd.Dataflow, Any, Any]:
    flow = dd.Dataflow(checkpoint=directory)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    return flow, edges, dd.graph.connected_components(edges).output()


def _labels(out: Any) -> dict[int, int]:
    snap = out.snapshot_polars()
    return dict(zip(snap["node"].to_list(), snap["label"].to_list(), strict=True))


def _bytes(directory: str) -> int:
    return sum(
        os.path.getsize(os.path.join(root, f))
        for root, _, files in os.walk(directory)
        for f in files
    )


def run(quick: bool = False) -> dict[str, Any]:
    from benchmarks.cc import _remove_once

    n_edges = 20_000 if quick else 1_000_000
    runs = int(os.environ.get("CHECKPOINT_RUNS", "3"))
    graph = rmat(n_edges, seed=3)
    n_nodes = int(max(graph["src"].max(), graph["dst"].max())) + 1  # type: ignore[arg-type]
    rng = np.random.default_rng(7)
    changes = [random_changes(graph, n_nodes, 100, rng) for _ in range(3)]
    current = graph
    for gone, new in changes:
        current = pl.concat([_remove_once(current, gone), new])
    last_gone, last_new = random_changes(current, n_nodes, 1, rng)

    writes, restores, rebuilds, sizes = [], [], [], []
    for _ in range(runs):
        directory = tempfile.mkdtemp(prefix="ddflow-checkpoint-bench-")
        try:
            flow, edges, out = _flow(directory)
            edges.insert_frame(graph)
            flow.advance_to(1)
            flow.run()
            for e, (gone, new) in enumerate(changes, start=1):
                edges.remove_frame(gone)
                edges.insert_frame(new)
                flow.advance_to(e + 1)
                flow.run()
            t0 = time.perf_counter()
            epoch = flow.checkpoint()
            writes.append(time.perf_counter() - t0)
            sizes.append(_bytes(directory))
            expected = _labels(out)
            del flow, edges, out

            restored, r_edges, r_out = _flow(directory)
            t0 = time.perf_counter()
            assert restored.restore() == epoch
            restores.append(time.perf_counter() - t0)

            rebuilt, b_edges, b_out = _flow(None)
            t0 = time.perf_counter()
            b_edges.insert_frame(current)
            rebuilt.advance_to(1)
            rebuilt.run()
            rebuilds.append(time.perf_counter() - t0)
            assert _labels(r_out) == _labels(b_out) == expected
            for flow, edges in ((restored, r_edges), (rebuilt, b_edges)):
                edges.remove_frame(last_gone)
                edges.insert_frame(last_new)
                flow.advance_to(flow.epoch + 1)
                flow.run()
            assert _labels(r_out) == _labels(b_out)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    write_ms = summary(writes)["median_ms"]
    restore_ms = summary(restores)["median_ms"]
    rebuild_ms = summary(rebuilds)["median_ms"]
    return {
        "benchmark": "checkpoint",
        "machine": machine(),
        "edges": n_edges,
        "checkpoint_bytes": int(np.median(sizes)),
        "write": summary(writes),
        "restore": summary(restores),
        "rebuild_from_input": summary(rebuilds),
        "restore_speedup_vs_rebuild": round(rebuild_ms / restore_ms, 2),
        "write_over_rebuild": round(write_ms / rebuild_ms, 3),
        "peak_rss_mb": peak_rss_mb(),
    }
