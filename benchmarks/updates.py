"""Single-record updates against a maintained join and group-by, at growing data sizes.

For each size N (100k, 1M, 10M records), a flow maintains ``orders ⋈ customers`` and a per-region
count and sum of order amounts. After loading, it applies single-record updates (an insertion and
a deletion per epoch) and reports the median latency per update. The baseline recomputes the
same join and group-by from scratch with Polars on the final data, in the same run. The claim
checked: ddflow's per-update latency does not grow with N, while recomputation does.

After the updates, the maintained per-region rows must equal Polars' recomputation on the final
orders (the loaded ones less the removed, plus the inserted), or the run fails
(:class:`ResultMismatch`); the JSON says ``"result_checked": true``.
"""

from __future__ import annotations

import gc
from functools import partial
from typing import Any

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb, summary, timed


def _data(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    n_customers = max(n // 10, 1)
    orders = pl.DataFrame(
        {
            "order": np.arange(n, dtype=np.int64),
            "customer": rng.integers(0, n_customers, n, dtype=np.int64),
            "amount": rng.integers(1, 1000, n, dtype=np.int64),
        }
    )
    customers = pl.DataFrame(
        {
            "customer": np.arange(n_customers, dtype=np.int64),
            "region": rng.integers(0, 100, n_customers, dtype=np.int64),
        }
    )
    return orders, customers


class ResultMismatch(AssertionError):
    """ddflow's maintained result differs from the recomputation from scratch."""


def _recompute(orders: pl.DataFrame, customers: pl.DataFrame) -> pl.DataFrame:
    return (
        orders.join(customers, on="customer")
        .group_by("region")
        .agg(pl.len().alias("orders"), pl.col("amount").sum())
    )


def check_result(out: dd.Output, orders: pl.DataFrame, customers: pl.DataFrame) -> None:
    """Raise :class:`ResultMismatch` unless ``out`` holds, once each, exactly the rows of the
    join and group-by recomputed from scratch on ``orders`` and ``customers``."""
    got = out.snapshot_polars()
    if got.height and got["count"].to_list() != [1] * got.height:
        raise ResultMismatch(
            f"rows held more or less than once: {got.filter(pl.col('count') != 1)}"
        )
    want = _recompute(orders, customers).select(
        "region", pl.col("orders").cast(pl.Int64), pl.col("amount").cast(pl.Int64)
    )
    try:
        assert_frame_equal(got.drop("count").sort("region"), want.sort("region"))
    except AssertionError as e:
        raise ResultMismatch(f"ddflow and the Polars recomputation disagree: {e}") from None


def _update(
    flow: dd.Dataflow,
    o: dd.InputCollection,
    victim: tuple[int, int, int],
    new: tuple[int, int, int],
) -> None:
    """One update: an order removed, another inserted, as one epoch, run to completion."""
    o.remove([victim])
    o.insert([new])
    flow.advance_to(flow.epoch + 1)
    flow.run()


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
    # each loaded order is removed at most once (a second removal would make it negative)
    victims = rng.choice(n, size=updates, replace=False)
    inserted = []
    for i in range(updates):
        victim = orders.row(int(victims[i]))
        new = (n + i, int(rng.integers(0, n_customers)), int(rng.integers(1, 1000)))
        inserted.append(new)
        lat.append(timed(partial(_update, flow, o, victim, new)))
    if not probe.done(flow.epoch - 1):
        raise ResultMismatch(f"the join's probe is not done through epoch {flow.epoch - 1}")
    final = pl.concat(
        [
            orders.filter(~pl.col("order").is_in(victims.tolist())),
            pl.DataFrame(inserted, schema=orders.schema, orient="row"),
        ]
    )
    base = []
    for _ in range(baseline_runs):
        base.append(timed(partial(_recompute, final, customers)))
    # the maintained answer equals a recomputation on the final data
    check_result(out, final, customers)
    result = {
        "records": n,
        "load_s": round(load_s, 3),
        "ddflow_update": summary(lat[2:] if len(lat) > 4 else lat),
        "recompute_polars": summary(base),
        "peak_rss_mb": peak_rss_mb(),
        "result_checked": True,
    }
    result["speedup_vs_recompute"] = round(
        result["recompute_polars"]["median_ms"] / result["ddflow_update"]["median_ms"], 2
    )
    return result


def run(quick: bool = False) -> dict[str, Any]:
    sizes = [10_000, 100_000] if quick else [100_000, 1_000_000, 10_000_000]
    rows = []
    for n in sizes:
        rows.append(measure(n, updates=10 if quick else 30))
        gc.collect()  # (the flow and data of one size are gone before the next is loaded)
    first = rows[0]["ddflow_update"]["median_ms"]
    for r in rows:
        r["latency_ratio_vs_smallest"] = round(r["ddflow_update"]["median_ms"] / first, 2)
    return {
        "benchmark": "updates",
        "machine": machine(),
        "sizes": rows,
        "result_checked": all(r["result_checked"] for r in rows),
    }
