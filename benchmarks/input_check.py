"""The cost of an input's multiplicity check: memory, a 1M-row load, one-record changes.

An input checks by default that no record goes below zero (``ddflow.api.multiplicities``); a
``signed=True`` input checks and keeps nothing. On an R-MAT edge list (int64 ``src, dst``,
with its duplicate edges) this reports:

* the check's state after the load, indexed: its bytes (the kept frame, keys and counts), next
  to a columnar copy of the live records (the distinct edges) and of the loaded frame, the
  growth of the process's resident memory while the state was built (the state kept alive),
  and the time to build it;
* the load: ``insert_frame`` of every edge, alone and followed by ``advance_to`` and ``run()``
  of a flow that keeps the input's out-degrees (``group_by("src").agg(n=count())``), checked and
  signed, the median of a few alternated runs (a checked input indexes a large insertion at
  its first look-up, not at the load);
* one-record changes on the loaded input: the first ``remove`` (which indexes the load), then
  the median time of an ``insert`` of a new edge and of a ``remove`` of a live one (distinct
  edges, interleaved), checked and signed, and the extra time of the check; and the mean over
  enough changes to include a merge of the recent changes into the kept frame.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb
from benchmarks.graphs import rmat
from ddflow.api.multiplicities import MIN_RECENT, RECENT_FRACTION, Multiplicities

SCHEMA = {"src": "int64", "dst": "int64"}


def rss_mb() -> float:
    """The resident memory of this process now, in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def state(edges: pl.DataFrame) -> dict[str, Any]:
    """The check's state for ``edges``, and what building it added to resident memory."""
    gc.collect()
    before = rss_mb()
    m = Multiplicities(dict(edges.schema))
    t0 = time.perf_counter()
    m.apply(edges, 1)
    m.count(edges.row(0))  # (a look-up indexes the load)
    seconds = time.perf_counter() - t0
    gc.collect()
    grown = rss_mb() - before
    live = edges.unique()
    return {
        "records_kept": len(m),
        "state_mb": round(m.nbytes / 2**20, 2),
        "state_frame_mb": round(m._base.estimated_size() / 2**20, 2),
        "state_keys_and_counts_mb": round((m._keys.nbytes + m._counts.nbytes) / 2**20, 2),
        "live_records_columnar_mb": round(live.estimated_size() / 2**20, 2),
        "loaded_frame_mb": round(edges.estimated_size() / 2**20, 2),
        "rss_growth_mb": round(grown, 1),
        "build_ms": round(seconds * 1e3, 1),
    }


def load(edges: pl.DataFrame, signed: bool) -> tuple[float, float]:
    """Seconds of ``insert_frame`` alone, and of the whole load (insert, advance, run)."""
    flow = dd.Dataflow()
    inp = flow.input("edges", schema=SCHEMA, signed=signed)
    inp.group_by("src").agg(n=dd.count()).output()
    gc.collect()
    t0 = time.perf_counter()
    inp.insert_frame(edges)
    t1 = time.perf_counter()
    flow.advance_to(1)
    flow.run()
    return t1 - t0, time.perf_counter() - t0


def changes(edges: pl.DataFrame, signed: bool, n: int, seed: int) -> dict[str, float]:
    """One-record inserts of new edges and removes of live ones on the loaded input: the
    median of each (microseconds) and the mean of both over ``n`` changes each."""
    flow = dd.Dataflow()
    inp = flow.input("edges", schema=SCHEMA, signed=signed)
    inp.insert_frame(edges)
    rng = np.random.default_rng(seed)
    live = edges.unique()
    gone = live[rng.choice(live.height, size=n, replace=False)].rows()
    top = int(edges.select(pl.max_horizontal("src", "dst")).max().item())
    new = [(top + 1 + i, int(x)) for i, x in enumerate(rng.integers(0, top, n))]
    ins, rem = [], []
    gc.collect()
    t0 = time.perf_counter()
    inp.remove([gone.pop()])  # (a checked input indexes the load at its first look-up)
    first = time.perf_counter() - t0
    new.pop()
    gc.disable()
    try:
        for a, b in zip(new, gone, strict=True):
            t0 = time.perf_counter()
            inp.insert([a])
            t1 = time.perf_counter()
            inp.remove([b])
            t2 = time.perf_counter()
            ins.append(t1 - t0)
            rem.append(t2 - t1)
    finally:
        gc.enable()
    return {
        "first_remove_after_load_ms": round(first * 1e3, 1),
        "insert_median_us": round(statistics.median(ins) * 1e6, 1),
        "remove_median_us": round(statistics.median(rem) * 1e6, 1),
        "insert_mean_us": round(statistics.fmean(ins) * 1e6, 1),
        "remove_mean_us": round(statistics.fmean(rem) * 1e6, 1),
        "max_ms": round(max(max(ins), max(rem)) * 1e3, 2),
    }


def run(quick: bool = False) -> dict[str, Any]:
    n_edges = 20_000 if quick else 1_000_000
    repeats = 1 if quick else 3
    edges = rmat(n_edges, seed=3)
    memory = state(edges)
    loads: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(repeats):
        for signed in (True, False):
            loads[signed].append(load(edges, signed))

    def median(signed: bool, i: int) -> float:
        return round(statistics.median(x[i] for x in loads[signed]) * 1e3, 1)

    # enough changes to merge the recent ones into the kept frame at least once
    n_changes = max(MIN_RECENT, n_edges // RECENT_FRACTION) // 2 + 1000
    per_change = {
        name: changes(edges, signed, n_changes, seed=5)
        for name, signed in (("signed", True), ("checked", False))
    }
    return {
        "benchmark": "input_check",
        "machine": machine(),
        "edges": n_edges,
        "distinct_edges": memory["records_kept"],
        "state": memory,
        "load_ms": {
            "insert_frame_signed": median(True, 0),
            "insert_frame_checked": median(False, 0),
            "load_and_run_signed": median(True, 1),
            "load_and_run_checked": median(False, 1),
            "extra_of_check": round(median(False, 1) - median(True, 1), 1),
            "runs": repeats,
            "consumer": 'group_by("src").agg(n=count())',
        },
        "one_record_changes": {
            "changes_each": n_changes,
            **per_change,
            "extra_insert_median_us": round(
                per_change["checked"]["insert_median_us"]
                - per_change["signed"]["insert_median_us"],
                1,
            ),
            "extra_remove_median_us": round(
                per_change["checked"]["remove_median_us"]
                - per_change["signed"]["remove_median_us"],
                1,
            ),
        },
        "peak_rss_mb": peak_rss_mb(),
    }


if __name__ == "__main__":
    import json
    import sys

    json.dump(run(quick="--quick" in sys.argv), sys.stdout, indent=2)
    print()
