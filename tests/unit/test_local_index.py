"""Reading a history's rows by query (:mod:`ddflow.runtime.local.index`): each row's query
found by runs of equal key codes, as a search per row would find it."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.runtime.local import index as local_index
from ddflow.runtime.local.index import positions
from ddflow.runtime.local.settings import (
    IndexSettings,
    LocalSettings,
    LookupSettings,
    ReduceSettings,
)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    runs=st.integers(1, 6),
    keys=st.integers(1, 300),
    asked=st.integers(1, 300),
    rows=st.integers(0, 4000),
    low=st.booleans(),
)
def test_positions_by_runs_equal_a_search_per_row(seed, runs, keys, asked, rows, low):
    """A history of a few sorted runs (as a trace's batches give it), or of codes in no
    order; queries on some of its keys and on keys it lacks, at times per query."""
    rng = np.random.default_rng(seed)
    universe = rng.choice(10**6, size=keys, replace=False) - 5 * 10**5
    parts = [np.sort(rng.choice(universe, size=rows // runs)) for _ in range(runs)]
    codes = np.concatenate(parts).astype(np.int64)
    if rng.random() < 0.2:
        rng.shuffle(codes)
    times = [rng.integers(0, 4, len(codes)), rng.integers(0, 4, len(codes))]
    qk = np.unique(
        np.concatenate([rng.choice(universe, size=asked), rng.integers(-(10**6), 10**6, 5)])
    ).astype(np.int64)
    qt = [rng.integers(0, 4, len(qk)), rng.integers(0, 4, len(qk))]
    run_search_rows = 1 if low else IndexSettings().run_search_rows
    pos, valid = positions(qk, qt, codes, times, run_search_rows)
    at = np.minimum(np.searchsorted(qk, codes), len(qk) - 1)
    want = (qk[at] == codes) & (times[0] <= qt[0][at]) & (times[1] <= qt[1][at])
    assert np.array_equal(valid, want)
    assert np.array_equal(pos, at[want])


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    runs=st.integers(1, 5),
    keys=st.integers(1, 200),
    rows=st.integers(0, 3000),
    limit=st.integers(1, 500),
    asked=st.integers(1, 200),
    heavy=st.sampled_from([2, 8, 64]),
)
def test_evaluation_slices_cut_the_queries_by_key_range(
    seed, runs, keys, rows, limit, asked, heavy
):
    """A reduce's evaluation in ranges of keys (``LocalKernels.evaluation_slices``): the
    ranges are the keys in order, each query is in the range of its key, and each range's
    updates in the trace are about the limit (at most the limit's share plus one key's).
    Some batches carry an index (as the reads of a later step leave them): its bound on a
    batch's updates of the keys is never below their count."""
    from ddflow.differential.batch import DIFF, KEY
    from ddflow.runtime.local.index import BatchIndex
    from ddflow.runtime.local.kernels import LocalKernels
    from ddflow.timely.lattice import EPOCHS

    rng = np.random.default_rng(seed)
    universe = np.sort(rng.choice(10**6, size=keys, replace=False) - 5 * 10**5)
    parts = [
        pl.DataFrame(
            {
                KEY: np.sort(rng.choice(universe, size=rows // runs)),
                "__t0": rng.integers(0, 3, rows // runs),
                DIFF: np.ones(rows // runs, dtype=np.int64),
            }
        )
        for _ in range(runs)
    ]
    codes = np.unique(rng.choice(universe, size=asked)).astype(np.int64)
    indexed = LocalSettings(index=IndexSettings(heavy_rows=heavy))
    for p in parts:
        if rng.random() < 0.6:
            index = BatchIndex.of(p, EPOCHS, indexed)
            held = p.get_column(KEY).to_numpy()
            assert index.rows_at_most(codes) >= np.isin(held, codes).sum()
    queries = pl.DataFrame(
        {KEY: rng.choice(codes, size=3 * len(codes)), "__t0": rng.integers(0, 4, 3 * len(codes))}
    )
    sliced = LocalSettings(reduce=ReduceSettings(evaluate_slice_rows=limit))
    slices = LocalKernels(sliced).evaluation_slices(queries, codes, parts)
    all_codes = np.concatenate([p.get_column(KEY).to_numpy() for p in parts])
    weight = {int(c): int(np.count_nonzero(all_codes == c)) for c in codes}
    total = sum(weight.values())
    if total <= limit or len(codes) < 2:
        assert slices is None
        return
    assert slices is not None
    assert np.array_equal(np.concatenate([c for _, c in slices]), codes)
    share = -(-total // -(-total // limit))
    for q, c in slices:
        assert len(c) and set(q.get_column(KEY).to_list()) <= set(c.tolist())
        assert sum(weight[int(x)] for x in c) <= share + max(weight[int(x)] for x in c)
    got = pl.concat([q for q, _ in slices]).sort([KEY, "__t0"])
    assert got.equals(queries.sort([KEY, "__t0"]))


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(0, 400),
    keys=st.integers(1, 60),
    asked=st.integers(0, 60),
    scan_rows=st.sampled_from([1, 10**9]),
)
def test_lookup_within_holds_the_lookup(seed, rows, keys, asked, scan_rows):
    """A join's read of a batch (``lookup_within``): the batch itself where a lookup would
    scan it, else the lookup; either way its rows of the asked keys are the lookup's."""
    from ddflow.runtime.local import kernels as local
    from ddflow.runtime.local.kernels import KEY, LocalKernels

    rng = np.random.default_rng(seed)
    batch = pl.DataFrame({KEY: np.sort(rng.integers(0, keys, rows)), "x": rng.integers(0, 9, rows)})
    codes = np.unique(rng.integers(0, keys + 5, asked)).astype(np.int64)
    lookups = LookupSettings(scan_rows=scan_rows)
    k = LocalKernels(LocalSettings(small_batch_rows=0, lookups=lookups))
    got = local.frame(k.lookup_within(batch, codes))
    want = local.frame(k.lookup(batch, codes))
    scans = len(codes) * lookups.scan_rows_per_key >= rows >= scan_rows
    if scans:
        assert got is batch
    asked_rows = got.filter(pl.col(KEY).is_in(codes.tolist()))
    assert asked_rows.sort([KEY, "x"]).equals(want.sort([KEY, "x"]))
    if not scans:
        assert got.sort([KEY, "x"]).equals(want.sort([KEY, "x"]))


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    runs=st.integers(1, 4),
    keys=st.integers(2, 120),
    rows=st.integers(0, 2000),
    heavy=st.sampled_from([2, 8, 10**6]),
    small=st.sampled_from([0, 256]),
)
def test_reads_of_disjoint_keys_united_and_narrowed_equal_one_read(
    seed, runs, keys, rows, heavy, small
):
    """A reduce's reads of its input for two disjoint sets of keys (each through the batch
    indexes where a key is heavy, else by lookup), united (``union_reads``), hold the same
    updates, times and codes as one read of all the keys; narrowed to some keys
    (``keys_in``), as one read of those."""
    from ddflow.runtime.local import kernels as local
    from ddflow.runtime.local.kernels import LocalKernels
    from ddflow.runtime.local.trace import Spine
    from ddflow.timely.lattice import TimeType

    rng = np.random.default_rng(seed)
    tt = TimeType(("product", "product"))
    # indexes of any batch, for keys of ``heavy`` updates
    k = LocalKernels(
        LocalSettings(
            small_batch_rows=small,
            index=IndexSettings(indexed_rows=1, heavy_rows=heavy),
            lookups=LookupSettings(scan_rows_per_key=0),
        )
    )
    schema = {"k": pl.Int64, "v": pl.Int64, "__t0": pl.Int64, "__t1": pl.Int64, "__diff": pl.Int64}
    spine = Spine(k, tt, ["k"], k.arrange(pl.DataFrame(schema=schema), ["k"]))
    for _ in range(runs):
        n = rows // runs
        data = pl.DataFrame(
            {
                "k": rng.integers(0, keys, n),
                "v": rng.integers(0, 9, n),
                "__t0": rng.integers(0, 2, n),
                "__t1": rng.integers(0, 4, n),
                "__diff": rng.choice([-1, 1, 2], n),
            }
        )
        batch = k.from_polars(k.arrange(data, ["k"]))
        spine.insert(batch, data.height)
    codes = np.arange(keys, dtype=np.int64)
    first = np.sort(rng.choice(codes, size=keys // 2, replace=False))
    rest = np.setdiff1d(codes, first)

    def read(c: np.ndarray) -> object:
        got = k.indexed_history(spine.parts(), c, ["k"], tt)
        return spine.lookup(c) if got is None else got

    whole, united = read(codes), k.union_reads(read(first), read(rest), codes)
    some = np.sort(rng.choice(codes, size=max(1, keys // 3), replace=False))
    narrowed = k.keys_in(whole, some)
    alone = read(some)

    def updates(h: object) -> list:
        f = h.rows() if isinstance(h, local_index.IndexedHistory) else h
        return sorted(local.frame(f).select(list(schema)).rows())

    def times(h: object) -> set:
        if isinstance(h, local_index.IndexedHistory):
            c, t = h.time_arrays()
            return set(zip(c.tolist(), *(x.tolist() for x in t), strict=True))
        return set(local.frame(h).select(["k", "__t0", "__t1"]).rows())

    assert updates(united) == updates(whole)
    assert times(united) == times(whole)
    assert updates(narrowed) == updates(alone)
    if isinstance(united, local_index.IndexedHistory):
        assert np.array_equal(united.codes, codes)
        assert united.light.columns == list(
            whole.schema
            if isinstance(whole, local_index.IndexedHistory)
            else local.frame(whole).columns
        )


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    batches=st.integers(1, 5),
    keys=st.integers(1, 40),
    rows=st.integers(0, 300),
    asked=st.integers(0, 40),
)
def test_gathered_rows_are_the_rows_found_in_each_batch(seed, batches, keys, rows, asked):
    """``gather_found`` over batches of every kind a trace holds (a key code that views its
    key column's buffer, one that is a separate column, equal to the key or not, columns in
    another order, a column with nulls, rows) gives each batch's rows of the asked keys, in
    order, as a Polars gather would."""
    from ddflow.runtime.local.kernels import KEY, LocalKernels, share_key
    from ddflow.runtime.local.rows import ColumnCache, Rows, batch_ranges, lookup

    rng = np.random.default_rng(seed)
    schema = {
        "k": pl.Int64,
        "v": pl.Int64,
        "w": pl.Int64,
        "__t0": pl.Int64,
        "__diff": pl.Int64,
        KEY: pl.Int64,
    }
    codes = np.unique(rng.integers(0, keys + 3, asked)).astype(np.int64)
    found, want = [], []
    for _ in range(batches):
        kind = int(rng.integers(0, 5))
        k = np.sort(rng.integers(0, keys, rows))
        w = pl.Series("w", rng.integers(-5, 5, rows), dtype=pl.Int64)
        if kind == 3 and rows:  # (nulls: gathered by Polars, not from NumPy)
            w = w.scatter(rng.integers(0, rows, 1 + rows // 10), None)
        data = pl.DataFrame(
            {
                "k": k,
                "v": rng.integers(0, 9, rows),
                "w": w,
                "__t0": rng.integers(0, 3, rows),
                "__diff": rng.choice([-1, 1, 2], rows),
            }
        )
        if kind == 0:  # the key code is the key column itself (one buffer)
            batch = share_key(data.with_columns(pl.col("k").alias(KEY)), ["k"])
            assert ColumnCache.of(batch).copies == ({KEY: "k"} if rows else {})
        elif kind == 1:  # a key code of its own, ordered as the key but not equal to it
            batch = data.with_columns((pl.col("k") * 7 + 1).alias(KEY))
            assert ColumnCache.of(batch).copies == {}
        elif kind == 2:  # the key code first, equal to the key, in another buffer
            batch = data.select(pl.col("k").alias(KEY), *data.columns)
            batch = batch.with_columns(pl.Series(KEY, k.copy()))
        else:
            batch = data.with_columns(pl.col("k").alias(KEY))
        asked_codes = codes * 7 + 1 if kind == 1 else codes
        if kind == 4 and rows:
            rows_batch = LocalKernels().arrange(
                Rows(dict(batch.drop(KEY).schema), batch.drop(KEY).rows()), ["k"]
            )
            got = lookup(rows_batch, asked_codes)
            found.append((rows_batch, got))
            want.append(got.to_frame().select(list(schema)))
            continue
        lo, hi = batch_ranges(batch, asked_codes, LocalSettings().lookups)
        found.append((batch, (lo, hi)))
        idx = np.concatenate(
            [np.arange(a, z) for a, z in zip(lo, hi, strict=True)] + [np.zeros(0, dtype=np.int64)]
        )
        want.append(batch[idx].select(list(schema)))
    got = local_index.gather_found(found, schema)
    expected = pl.concat(want) if want else pl.DataFrame(schema=schema)
    assert got.schema == pl.Schema(schema)
    # rows gathered from Python rows come after the columnar ones
    order = list(schema)
    assert got.sort(order).equals(expected.select(order).sort(order))
    columnar = [w for (b, _), w in zip(found, want, strict=True) if type(b) is not Rows]
    if columnar:
        head = pl.concat(columnar)
        assert got.head(head.height).equals(head)
