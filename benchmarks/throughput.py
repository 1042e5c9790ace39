"""Sustained update throughput of a maintained join and group-by, by batch size, vs Polars.

A flow maintains ``orders ⋈ customers`` and a per-region count and sum of order amounts (the
query of ``updates``). The customers (a static dimension) are loaded first; then a seeded stream
of updates to ``orders`` is applied: each update inserts a new order or, with probability 0.2,
deletes an order inserted earlier in the stream and still present (chosen uniformly). The stream
is fed in batches of B updates, one epoch per batch, for each B in turn (a fresh flow each), and
the benchmark reports updates per second (stream length over the total time of the epochs).

The baseline, in the same run and interleaved with ddflow's epochs: after a few batches spread
over the stream, Polars recomputes the same join and group-by from scratch on the orders live at
that point; its throughput is extrapolated as ``B / mean recompute time`` (one recompute per
batch of B updates). Each ratio pairs ddflow's run at B with the recomputes timed during that
run. ddflow's output equals Polars' recompute after every sampled batch and at the end
(checked, outside the timings).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb, summary

N_REGIONS = 100
DELETE_SHARE = 0.2
ORDER_SCHEMA = {"order": "int64", "customer": "int64", "amount": "int64"}
CUSTOMER_SCHEMA = {"customer": "int64", "region": "int64"}


@dataclass(frozen=True)
class Stream:
    """A seeded update stream on ``orders``.

    Order ``k`` is the ``k``-th order inserted, so row ``k`` of ``orders`` is its record. Stream
    position ``i`` inserts (``sign[i] == 1``) or deletes (``sign[i] == -1``) order
    ``target[i]``; ``inserted_at`` / ``deleted_at`` give each order's positions (``deleted_at``
    is the stream length for an order never deleted)."""

    orders: pl.DataFrame
    target: np.ndarray
    sign: np.ndarray
    inserted_at: np.ndarray
    deleted_at: np.ndarray

    @property
    def length(self) -> int:
        """The number of updates in the stream."""
        return len(self.sign)

    def batch(self, start: int, stop: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The orders deleted and the orders inserted at positions ``start <= i < stop``."""
        target, sign = self.target[start:stop], self.sign[start:stop]
        return self._rows(target[sign < 0]), self._rows(target[sign > 0])

    def live(self, position: int) -> pl.DataFrame:
        """The orders present after the first ``position`` updates."""
        mask = (self.inserted_at < position) & (self.deleted_at >= position)
        return self.orders.filter(pl.Series(mask))

    def _rows(self, ids: np.ndarray) -> pl.DataFrame:
        return self.orders[ids]


def make_stream(n_updates: int, n_customers: int, seed: int) -> Stream:
    """``n_updates`` updates: insertions of new orders, and with probability ``DELETE_SHARE``
    (when some order is present) the deletion of a uniformly chosen present order."""
    rng = np.random.default_rng(seed)
    delete = rng.random(n_updates) < DELETE_SHARE
    pick = rng.random(n_updates)
    target = np.empty(n_updates, dtype=np.int64)
    sign = np.empty(n_updates, dtype=np.int64)
    live: list[int] = []
    next_order = 0
    for i in range(n_updates):
        if delete[i] and live:
            j = int(pick[i] * len(live))
            live[j], live[-1] = live[-1], live[j]
            target[i], sign[i] = live.pop(), -1
        else:
            target[i], sign[i] = next_order, 1
            live.append(next_order)
            next_order += 1
    inserted_at = np.flatnonzero(sign > 0)
    deleted_at = np.full(next_order, n_updates, dtype=np.int64)
    deleted_at[target[sign < 0]] = np.flatnonzero(sign < 0)
    orders = pl.DataFrame(
        {
            "order": np.arange(next_order, dtype=np.int64),
            "customer": rng.integers(0, n_customers, next_order, dtype=np.int64),
            "amount": rng.integers(1, 1000, next_order, dtype=np.int64),
        }
    )
    return Stream(orders, target, sign, inserted_at, deleted_at)


def make_customers(n_customers: int, seed: int) -> pl.DataFrame:
    """``n_customers`` customers, each in one of ``N_REGIONS`` regions."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "customer": np.arange(n_customers, dtype=np.int64),
            "region": rng.integers(0, N_REGIONS, n_customers, dtype=np.int64),
        }
    )


def recompute(orders: pl.DataFrame, customers: pl.DataFrame) -> pl.DataFrame:
    """The per-region order count and amount sum, from scratch with Polars."""
    return (
        orders.join(customers, on="customer")
        .group_by("region")
        .agg(pl.len().cast(pl.Int64).alias("orders"), pl.col("amount").sum())
        .sort("region")
    )


def build_flow(
    workers: int = 1,
) -> tuple[dd.Dataflow, dd.InputCollection, dd.InputCollection, dd.Output]:
    """The maintained query: the flow, the orders and customers inputs, and the output."""
    flow = dd.Dataflow(workers=workers)
    orders = flow.input("orders", schema=ORDER_SCHEMA)
    customers = flow.input("customers", schema=CUSTOMER_SCHEMA)
    joined = orders.join(customers, on="customer")
    out = joined.group_by("region").agg(orders=dd.count(), amount=dd.sum("amount")).output()
    return flow, orders, customers, out


def apply_batch(
    flow: dd.Dataflow, orders: dd.InputCollection, gone: pl.DataFrame, new: pl.DataFrame
) -> float:
    """Apply one batch as one epoch and run it to completion: the seconds it took."""
    t0 = time.perf_counter()
    # insertions first: an order inserted and deleted within one batch is then present when
    # it is removed (an input refuses to take a record below zero)
    if new.height:
        orders.insert_frame(new)
    if gone.height:
        orders.remove_frame(gone)
    flow.advance_to(flow.epoch + 1)
    flow.run()
    return time.perf_counter() - t0


def sampled_batches(n_batches: int, samples: int) -> set[int]:
    """Indices of ``samples`` distinct batches (at most ``n_batches``) spread evenly over the
    stream, the last one included."""
    samples = min(samples, n_batches)
    return {n_batches - 1 - k * n_batches // samples for k in range(samples)}


def time_recompute(
    stream: Stream, customers: pl.DataFrame, position: int
) -> tuple[float, pl.DataFrame]:
    """Polars' recompute of the result on the orders live at ``position``: the seconds it took
    (the live table is materialised outside the timing) and the result."""
    live = stream.live(position)
    t0 = time.perf_counter()
    result = recompute(live, customers)
    return time.perf_counter() - t0, result


def current(out: dd.Output) -> pl.DataFrame:
    """The output's latest complete result, in ``recompute``'s form."""
    return out.snapshot_polars().drop("count").sort("region")


def measure(stream: Stream, customers: pl.DataFrame, batch: int, samples: int) -> dict[str, Any]:
    """Feed the whole stream in batches of ``batch`` updates to a fresh flow, timing each
    epoch, with Polars recomputes timed after the sampled batches."""
    flow, orders, cust, out = build_flow()
    cust.insert_frame(customers)
    flow.advance_to(1)
    flow.run()
    n_batches = -(-stream.length // batch)
    sampled = sampled_batches(n_batches, samples)
    epoch_s: list[float] = []
    polars_s: list[float] = []
    for k in range(n_batches):
        start, stop = k * batch, min((k + 1) * batch, stream.length)
        gone, new = stream.batch(start, stop)
        epoch_s.append(apply_batch(flow, orders, gone, new))
        if k in sampled:
            seconds, expected = time_recompute(stream, customers, stop)
            polars_s.append(seconds)
            assert current(out).equals(expected), f"ddflow and Polars disagree after {stop}"
    assert current(out).equals(recompute(stream.live(stream.length), customers))
    ddflow_ups = stream.length / sum(epoch_s)
    polars_ups = batch / (sum(polars_s) / len(polars_s))
    result = {
        "batch": batch,
        "epochs": n_batches,
        "ddflow_updates_per_s": round(ddflow_ups),
        "ddflow_total_s": round(sum(epoch_s), 3),
        "ddflow_epoch": summary(epoch_s),
        "polars_recompute_sampled": summary(polars_s),
        "polars_updates_per_s_extrapolated": round(polars_ups),
        "speedup_vs_polars": round(ddflow_ups / polars_ups, 2),
        "peak_rss_mb_so_far": peak_rss_mb(),
    }
    del flow, orders, cust, out
    gc.collect()
    return result


def run(quick: bool = False) -> dict[str, Any]:
    if quick:
        n_updates, n_customers, batches = 20_000, 2_000, [100, 1_000, 10_000]
    else:
        n_updates, n_customers, batches = 1_000_000, 100_000, [1_000, 10_000, 100_000]
    stream = make_stream(n_updates, n_customers, seed=1)
    customers = make_customers(n_customers, seed=2)
    rows = [measure(stream, customers, b, samples=10) for b in batches]
    return {
        "benchmark": "throughput",
        "machine": machine(),
        "updates": stream.length,
        "deletions": int((stream.sign < 0).sum()),
        "orders_live_at_end": stream.live(stream.length).height,
        "customers": n_customers,
        "regions": N_REGIONS,
        "polars_baseline": "join + group-by recomputed from scratch on the live orders after "
        "a few sampled batches (query time only), extrapolated to one "
        "recompute per batch: updates/s = batch / mean recompute time",
        "batches": rows,
        "peak_rss_mb": peak_rss_mb(),
    }
