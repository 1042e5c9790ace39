"""Arrangements: lookups by key, and compaction that keeps every accumulation at or beyond
``since``."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.kernels.local import LocalKernels
from ddflow.kernels.local_rows import frame as as_frame
from ddflow.lattice import TimeType
from ddflow.trace import Spine

TT = TimeType(("product", "product"))
K = LocalKernels()


def batch(rows):
    """rows: (key, val, t0, t1, diff)"""
    frame = pl.DataFrame(rows, schema={"k": pl.Int64, "v": pl.Int64, "__t0": pl.Int64,
                                       "__t1": pl.Int64, "__diff": pl.Int64}, orient="row")
    return K.arrange(K.consolidate(frame), ["k"])


def spine():
    return Spine(K, TT, ["k"], batch([]))


def accumulation(rows, key, u):
    acc: Counter = Counter()
    for k, v, t0, t1, d in rows:
        if k == key and TT.less_equal((t0, t1), u):
            acc[v] += d
    return {v: c for v, c in acc.items() if c}


def trace_accumulation(s, key, u):
    got = as_frame(s.lookup(np.array([key])))
    return accumulation(got.select(["k", "v", "__t0", "__t1", "__diff"]).iter_rows(), key, u)


updates = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 2), st.integers(0, 3), st.integers(0, 3),
              st.sampled_from([-1, 1])),
    min_size=1, max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(updates, st.lists(st.integers(1, 8), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=3))
def test_compaction_keeps_every_accumulation_in_advance_of_since(rows, cuts, since):
    s = spine()
    h = s.handle()
    start = 0
    for c in itertools.cycle(cuts):
        part = rows[start:start + c]
        if not part:
            break
        b = batch(part)
        s.insert(b, b.height)
        start += c
    h.set_since(since)
    s.compact()
    frontier = s.since
    for key in range(5):
        for u in itertools.product(range(5), range(5)):
            if any(TT.less_equal(f, u) for f in frontier):
                assert trace_accumulation(s, key, u) == accumulation(rows, key, u)


def test_lookup_returns_only_the_keys_asked_for():
    s = spine()
    for k in range(100):
        b = batch([(k, k * 10, 0, 0, 1)])
        s.insert(b, b.height)
    assert len(s.batches) < 10  # geometric merging keeps few batches
    got = as_frame(s.lookup(np.array([3, 50, 99])))
    assert sorted(got.get_column("k").to_list()) == [3, 50, 99]


def test_a_trace_of_a_sliding_window_stays_bounded():
    s = spine()
    h = s.handle()
    window = 20
    sizes = []
    for epoch in range(1_000):
        rows = [(epoch % 7, epoch, epoch, 0, 1)]
        if epoch >= window:
            rows.append(((epoch - window) % 7, epoch - window, epoch, 0, -1))
        b = batch(rows)
        s.insert(b, b.height)
        h.set_since([(epoch, 0)])
        sizes.append(len(s))
    assert max(sizes[100:]) <= 4 * window
