"""Single-record updates against a maintained join and group-by, at growing data sizes.

For each size N (100k, 1M, 10M records), a flow maintains ``orders ⋈ customers`` and a per-region
count and sum of order amounts. After loading, it applies single-record updates (an insertion and
a deletion per epoch) and reports the median latency per update. The baseline recomputes the
same join and group-by from scratch with Polars after each update, in the same run. The claim
checked: ddflow's per-update latency does not grow with N, while recomputation does.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb, summary, timed


def _data(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    n_customers = max(n // 10, 1)
    orders = pl.DataFrame({
        "order": np.arange(n, dtype=np.int64),
        "customer": rng.integers(0, n_customers, n, dtype=np.int64),
        "amount": rng.integers(1, 1000, n, dtype=np.int64),
    })
    customers = pl.DataFrame({
        "customer": np.arange(n_customers, dtype=np.int64),
        "region": rng.integers(0, 100, n_customers, dtype=np.int64),
    })
    return orders, customers


def _recompute(orders: pl.DataFrame, customers: pl.DataFrame) -> pl.DataFrame:
    return (orders.join(customers, on="customer")
            .group_by("region").agg(pl.len().alias("orders"), pl.col("amount").sum()))


def measure(n: int, updates: int, seed: int = 1, baseline_runs: int = 3) -> dict[str, Any]:
    orders, customers = _data(n, seed)
    flow = dd.Dataflow()
    o = flow.input("orders", schema={"order": "int64", "customer": "int64", "amount": "int64"})
    c = flow.input("customers", schema={"customer": "int64", "region": "int64"})
    joined = o.join(c, on="customer")
    per_region = joined.group_by("region").agg(orders=dd.count(), amount=dd.sum("amount"))
    out = per_region.output()
    probe = joined.probe()

    def load() -> None:
        o.insert_frame(orders)
        c.insert_frame(customers)
        flow.advance_to(1)
        flow.run()

    load_s = timed(load)
    rng = np.random.default_rng(seed + 1)
    n_customers = customers.height
    lat = []
    next_order = n
    for i in range(updates):
        victim = orders.row(int(rng.integers(0, n)))
        new = (next_order, int(rng.integers(0, n_customers)), int(rng.integers(1, 1000)))
        next_order += 1

        def update() -> None:
            o.remove([victim])
            o.insert([new])
            flow.advance_to(flow.epoch + 1)
            flow.run()

        lat.append(timed(update))
    assert probe.done(flow.epoch - 1)
    # the maintained answer equals a recomputation on the final data
    base = []
    for _ in range(baseline_runs):
        base.append(timed(lambda: _recompute(orders, customers)))
    snap = out.snapshot_polars().sort("region")
    assert snap.height == _recompute(orders, customers).height
    result = {
        "records": n,
        "load_s": round(load_s, 3),
        "ddflow_update": summary(lat[2:] if len(lat) > 4 else lat),
        "recompute_polars": summary(base),
        "peak_rss_mb": peak_rss_mb(),
    }
    result["speedup_vs_recompute"] = round(
        result["recompute_polars"]["median_ms"] / result["ddflow_update"]["median_ms"], 2)
    del flow, orders, customers
    gc.collect()
    return result


def run(quick: bool = False) -> dict[str, Any]:
    sizes = [10_000, 100_000] if quick else [100_000, 1_000_000, 10_000_000]
    rows = [measure(n, updates=10 if quick else 30) for n in sizes]
    first = rows[0]["ddflow_update"]["median_ms"]
    for r in rows:
        r["latency_ratio_vs_smallest"] = round(r["ddflow_update"]["median_ms"] / first, 2)
    return {"benchmark": "updates", "machine": machine(), "sizes": rows}
