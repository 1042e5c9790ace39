"""Streams whose keys all land on one worker.

Every key of these streams is owned by worker 1, with two workers and with three (found with
the exchange's own partition), so with several workers one worker holds every arrangement and
the others run their copies empty. Joins, group-bys and a loop still equal the reference at
every epoch, on every runtime of the suite.
"""

from __future__ import annotations

import polars as pl
from harness import SETTINGS, check_stream, small_ints, streams_and_run_points
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.settings import LocalSettings


def owned_by_worker_1(candidates: int = 2000, count: int = 6) -> list[int]:
    """Integer keys that worker 1 owns both of two workers and of three."""
    k = LocalKernels(LocalSettings())
    frame = pl.DataFrame({"k": list(range(candidates))}, schema={"k": pl.Int64})

    def owned(workers: int) -> set[int]:
        parts = dict(k.partition(frame, ("k",), workers))
        return set(parts[1].get_column("k").to_list())

    keys = sorted(owned(2) & owned(3))[:count]
    assert len(keys) == count
    return keys


SKEWED = owned_by_worker_1()
skewed = st.sampled_from(SKEWED)

KV = {"l": {"k": "int64", "v": "int64"}, "r": {"k": "int64", "w": "int64"}}
kv_records = {"l": st.tuples(skewed, small_ints), "r": st.tuples(skewed, small_ints)}
EDGES = {"roots": {"k": "int64"}, "edges": {"src": "int64", "dst": "int64"}}
edge_records = {"roots": st.tuples(skewed), "edges": st.tuples(skewed, skewed)}


@SETTINGS
@given(case=streams_and_run_points(kv_records, max_updates=8))
def test_joins_and_group_bys_on_keys_of_one_worker(runtime, case):
    stream, run_points = case

    def build(flow, i):
        left, right = i["l"], i["r"]
        return [
            left.join(right, on="k"),
            left.group_by("k").agg(n=dd.count(), total=dd.sum("v"), hi=dd.max("v")),
            left.select("k").distinct(),
        ]

    check_stream(build, KV, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(edge_records, max_updates=8))
def test_reachability_on_keys_of_one_worker(runtime, case):
    stream, run_points = case

    def build(flow, i):
        roots = i["roots"].distinct()
        edges = i["edges"].distinct()
        return roots.iterate(
            lambda x: x.concat(
                x.join(edges, left_on="k", right_on="src").select(k=dd.col("dst"))
            ).distinct()
        )

    check_stream(build, EDGES, stream, runtime, run_points)
