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


def _buffer(frame: pl.DataFrame, column: str) -> int:
    return frame.get_column(column).to_arrow().buffers()[1].address


def test_an_integer_key_column_is_its_own_code_in_memory():
    """A trace keyed by one Int64 column holds the key code as that column (one buffer), after
    arranging and after a merge that consolidates and advances; lookups still find every row."""
    rng = np.random.default_rng(3)
    big = LocalKernels(small_rows=0)
    rows = pl.DataFrame({"k": rng.integers(0, 500, 4000), "v": rng.integers(0, 9, 4000),
                         "__t0": rng.integers(0, 3, 4000), "__t1": rng.integers(0, 3, 4000),
                         "__diff": rng.choice([1, -1], 4000)})
    a = big.arrange(rows.head(2500), ["k"])
    b = big.arrange(rows.tail(1500), ["k"])
    for arranged in (a, b):
        assert _buffer(arranged, "__key") == _buffer(arranged, "k")
    merged = big.merge([a, b], TT, [(1, 0)], keys=["k"])
    assert _buffer(merged, "__key") == _buffer(merged, "k")
    assert merged.get_column("__key").is_sorted()
    codes = np.array([7, 123, 499])
    found = as_frame(big.lookup(merged, codes))
    advanced = big.advance(rows, TT, [(1, 0)])
    expected = (advanced.filter(pl.col("k").is_in(codes.tolist()))
                .group_by(["k", "v", "__t0", "__t1"]).agg(pl.col("__diff").sum())
                .filter(pl.col("__diff") != 0))
    key_cols = ["k", "v", "__t0", "__t1", "__diff"]
    assert sorted(found.select(key_cols).rows()) == sorted(expected.select(key_cols).rows())
    # a key that is not one Int64 column keeps a separate code column
    two = big.arrange(rows.head(100), ["k", "v"])
    assert _buffer(two, "__key") != _buffer(two, "k")
