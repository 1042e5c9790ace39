"""One worker against two: connected components and the join + group-by stream, side by side.

Each configuration runs in a fresh Python process of its own (so that each reports its own peak
memory), one after another, on the same seeded data:

* ``cc``: connected components of an R-MAT graph (1M edges; 20k with ``--quick``): the first
  result, single edge changes (median of several), and batches of 1,000 changes;
* ``throughput``: the query of ``throughput`` (``orders ⋈ customers``, count and sum per
  region), updates per second in batches of 10,000 and 100,000 (smaller with ``--quick``).

It reports, per number of workers, the timings, the peak resident memory of the coordinator and
of each worker process, and the bytes that crossed between processes per update; then the
ratios of two workers to one. Every configuration's final result must be the same (checked:
the labels, the per-region totals). ``WORKERS_LIST=1,2,4`` adds configurations (four workers
on a two-core machine are oversubscribed: their times say nothing, their results must agree).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

from benchmarks.common import machine, peak_rss_mb


def _child_rss(flow: Any) -> list[float]:
    """Peak resident memory of each worker process of ``flow``, in MB."""
    out = []
    for proc in flow._processes.procs if flow._processes is not None else []:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    out.append(round(int(line.split()[1]) / 1024, 1))
    return out


def _digest(rows: Any) -> str:
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()


def _bytes(flow: Any) -> int:
    shards = getattr(flow.worker, "shards", [])
    return sum(s.bytes_in + s.bytes_out for s in shards if not s.local)


def cc(workers: int, quick: bool) -> dict[str, Any]:
    from benchmarks.cc import apply_changes, build_cc, load_edges, snapshot_labels
    from benchmarks.graphs import random_changes, rmat

    n_edges = 20_000 if quick else 1_000_000
    singles, thousands = (5, 2) if quick else (25, 5)
    edges = rmat(n_edges, 1)
    n_nodes = int(max(edges["src"].max(), edges["dst"].max())) + 1  # type: ignore[arg-type]
    flow, inp, out = build_cc(workers=workers)
    first = load_edges(flow, inp, edges)
    rng = np.random.default_rng(8)
    import polars as pl

    from benchmarks.cc import _remove_once

    live = edges
    lat: dict[int, list[float]] = {1: [], 1000: []}
    moved = 0
    changes = 0
    for b, n in ((1, singles), (1000, thousands)):
        for _ in range(n):
            gone, new = random_changes(live, n_nodes, b, rng)
            before = _bytes(flow)
            lat[b].append(apply_changes(flow, inp, gone, new))
            moved += _bytes(flow) - before
            changes += gone.height + new.height
            live = pl.concat([_remove_once(live, gone), new])
    labels = snapshot_labels(out)
    result = {
        "edges": n_edges,
        "first_result_s": round(first, 3),
        "single_change_median_ms": round(statistics.median(lat[1]) * 1e3, 3),
        "changes_1000_median_ms": round(statistics.median(lat[1000]) * 1e3, 1),
        "bytes_per_changed_edge": round(moved / changes, 1),
        "peak_rss_mb": {"coordinator": peak_rss_mb(), "workers": _child_rss(flow)},
        "labels_digest": _digest(sorted(labels.items())),
    }
    flow.close()
    return result


def throughput(workers: int, quick: bool) -> dict[str, Any]:
    from benchmarks.throughput import apply_batch, build_flow, current, make_customers, make_stream

    n_customers = 10_000 if quick else 100_000
    batches = [2_000, 10_000] if quick else [10_000, 100_000]
    n_updates = 40_000 if quick else 600_000
    customers = make_customers(n_customers, 3)
    stream = make_stream(n_updates, n_customers, 4)
    out: dict[str, Any] = {}
    for b in batches:
        flow, orders, cust, result = build_flow(workers=workers)
        cust.insert_frame(customers)
        flow.advance_to(1)
        flow.run()
        spent = 0.0
        moved_before = _bytes(flow)
        for start in range(0, n_updates, b):
            stop = min(start + b, n_updates)
            gone, new = stream.batch(start, stop)
            spent += apply_batch(flow, orders, gone, new)
        out[str(b)] = {
            "updates_per_s": round(n_updates / spent),
            "bytes_per_update": round((_bytes(flow) - moved_before) / n_updates, 1),
            "result_digest": _digest(current(result).rows()),
        }
        out["peak_rss_mb"] = {"coordinator": peak_rss_mb(), "workers": _child_rss(flow)}
        flow.close()
    return out


def one(kind: str, workers: int, quick: bool) -> None:
    """Run one configuration and print its JSON (in a process of its own)."""
    t0 = time.perf_counter()
    result = {"cc": cc, "throughput": throughput}[kind](workers, quick)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(result))


def _run_one(kind: str, workers: int, quick: bool) -> dict[str, Any]:
    code = f"from benchmarks.workers import one; one({kind!r}, {workers}, {quick})"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=3600
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict[str, Any]:
    counts = [int(x) for x in os.environ.get("WORKERS_LIST", "1,2").split(",")]
    results: dict[str, dict[str, Any]] = {"cc": {}, "throughput": {}}
    for kind in results:
        for w in counts:
            results[kind][str(w)] = _run_one(kind, w, quick)
    cc_digests = {r.pop("labels_digest") for r in results["cc"].values()}
    assert len(cc_digests) == 1, "the labels differ between numbers of workers"
    sizes = [k for k in results["throughput"]["1"] if k.isdigit()]
    for b in sizes:
        digests = {r[b].pop("result_digest") for r in results["throughput"].values()}
        assert len(digests) == 1, f"the results differ between numbers of workers (batch {b})"
    ratios: dict[str, Any] = {}
    if "2" in results["cc"]:
        one_, two = results["cc"]["1"], results["cc"]["2"]
        ratios["cc_first_result_2_over_1"] = round(
            two["first_result_s"] / one_["first_result_s"], 2
        )
        ratios["cc_single_change_2_over_1"] = round(
            two["single_change_median_ms"] / one_["single_change_median_ms"], 2
        )
        ratios["cc_changes_1000_2_over_1"] = round(
            two["changes_1000_median_ms"] / one_["changes_1000_median_ms"], 2
        )
        t1, t2 = results["throughput"]["1"], results["throughput"]["2"]
        for b in sizes:
            ratios[f"throughput_{b}_2_over_1"] = round(
                t2[b]["updates_per_s"] / t1[b]["updates_per_s"], 2
            )
    return {"benchmark": "workers", "machine": machine(), "results": results, "ratios": ratios}
