"""Arrangements: lookups by key, and compaction that keeps every accumulation at or beyond
``since``."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ddflow.differential.kernel import Capabilities, Description
from ddflow.runtime.local import rows as R
from ddflow.runtime.local import trace
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.rows import frame as as_frame
from ddflow.runtime.local.settings import LocalSettings, LookupSettings
from ddflow.runtime.local.trace import Spine, TraceSettings
from ddflow.timely.lattice import TimeType

TT = TimeType(("product", "product"))
K = LocalKernels()


def batch(rows):
    """rows: (key, val, t0, t1, diff)"""
    frame = pl.DataFrame(
        rows,
        schema={
            "k": pl.Int64,
            "v": pl.Int64,
            "__t0": pl.Int64,
            "__t1": pl.Int64,
            "__diff": pl.Int64,
        },
        orient="row",
    )
    return K.arrange(K.consolidate(frame), ["k"])


def spine(kernels=K):
    return Spine(kernels, TT, ["k"], batch([]))


def accumulation(rows, key, u):
    acc: Counter = Counter()
    for k, v, t0, t1, d in rows:
        if k == key and TT.less_equal((t0, t1), u):
            acc[v] += d
    return {v: c for v, c in acc.items() if c}


def trace_accumulation(s, key, u):
    got = as_frame(s.lookup(np.array([key])))
    return accumulation(got.select(["k", "v", "__t0", "__t1", "__diff"]).iter_rows(), key, u)


def insert_in_parts(s, rows, cuts):
    """Insert ``rows`` into the spine in consecutive parts of the sizes ``cuts`` (cycled),
    yielding after each part the number of rows inserted so far."""
    start = 0
    for c in itertools.cycle(cuts):
        part = rows[start : start + c]
        if not part:
            return
        b = batch(part)
        s.insert(b, b.height)
        start += c
        yield start


def assert_every_accumulation(s, rows):
    """Every key's accumulation in the trace, at every time in advance of its ``since``, is
    that of ``rows``."""
    for key in range(5):
        for u in itertools.product(range(5), range(5)):
            if any(TT.less_equal(f, u) for f in s.since):
                assert trace_accumulation(s, key, u) == accumulation(rows, key, u), (key, u)


updates = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.integers(0, 2),
        st.integers(0, 3),
        st.integers(0, 3),
        st.sampled_from([-1, 1]),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    updates,
    st.lists(st.integers(1, 8), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=3),
)
def test_compaction_keeps_every_accumulation_in_advance_of_since(rows, cuts, since):
    s = spine()
    h = s.handle()
    list(insert_in_parts(s, rows, cuts))
    h.set_since(since)
    s.compact()
    assert_every_accumulation(s, rows)


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
    big = LocalKernels(LocalSettings(small_batch_rows=0))
    rows = pl.DataFrame(
        {
            "k": rng.integers(0, 500, 4000),
            "v": rng.integers(0, 9, 4000),
            "__t0": rng.integers(0, 3, 4000),
            "__t1": rng.integers(0, 3, 4000),
            "__diff": rng.choice([1, -1], 4000),
        }
    )
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
    expected = (
        advanced.filter(pl.col("k").is_in(codes.tolist()))
        .group_by(["k", "v", "__t0", "__t1"])
        .agg(pl.col("__diff").sum())
        .filter(pl.col("__diff") != 0)
    )
    key_cols = ["k", "v", "__t0", "__t1", "__diff"]
    assert sorted(found.select(key_cols).rows()) == sorted(expected.select(key_cols).rows())
    # a key that is not one Int64 column keeps a separate code column
    two = big.arrange(rows.head(100), ["k", "v"])
    assert _buffer(two, "__key") != _buffer(two, "k")


@settings(max_examples=150, deadline=None)
@given(
    updates,
    st.lists(st.integers(1, 8), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=3),
    st.integers(1, 3),
    st.integers(1, 6),
    st.booleans(),
)
@example(
    rows=[(0, 0, 0, 0, -1), (0, 0, 0, 0, 1)],
    cuts=[1],
    since=[(0, 0)],
    fuel=1,
    chunk=1,
    compact=True,
)  # (a merge in progress cancelling everything, then compacted)
def test_merges_in_steps_keep_every_accumulation(rows, cuts, since, fuel, chunk, compact):
    """Merges done a range of keys at a time (here of any size, in ranges of a few updates):
    after every insert, every key's accumulation at every time in advance of ``since`` equals
    that of the updates inserted, read while merges are in progress and after."""
    settings = TraceSettings(fueled_rows=2, fuel=fuel, fuel_chunk=chunk)
    s = Spine(K, TT, ["k"], batch([]), settings=settings)
    s.handle().set_since(since)
    for start in insert_in_parts(s, rows, cuts):
        assert_every_accumulation(s, rows[:start])
    if compact:
        s.compact()
        assert not any(type(x) is trace.Merging for x in s.batches)
    assert_every_accumulation(s, rows)


def test_a_long_trace_merges_in_steps_and_stays_geometric():
    """Many inserts into a trace whose merges go in steps: some merge is in progress at some
    points and not at others, every batch is sorted by key code, and the spine keeps few
    batches."""
    s = Spine(K, TT, ["k"], batch([]), settings=TraceSettings(fueled_rows=50))
    rng = np.random.default_rng(5)
    in_progress = 0
    inserted = []
    for i in range(300):
        rows = [(int(k), int(v), 0, i % 4, 1) for k, v in rng.integers(0, 40, (5, 2))]
        inserted += rows
        b = batch(rows)
        s.insert(b, b.height)
        in_progress += any(type(x) is trace.Merging for x in s.batches)
    assert 0 < in_progress < 300
    assert len(s.batches) < 20
    for part in s.parts():
        codes = as_frame(part).get_column("__key").to_list()
        assert codes == sorted(codes)
    for key in range(40):
        assert trace_accumulation(s, key, (0, 3)) == accumulation(inserted, key, (0, 3))


def test_descriptions_say_how_the_batches_changed():
    """A reader of a trace (a reduce's kept read) compares the batches' descriptions: every
    insert appends one of one insertion, and the descriptions change otherwise only when the
    batches (with a merge in progress's inputs) change: merges done, compaction. A merge begun
    in steps keeps its inputs, and their descriptions, until it is done. Checked after every
    insert and compaction of a trace whose merges go in steps."""
    s = Spine(K, TT, ["k"], batch([]), settings=TraceSettings(fueled_rows=30, fuel_chunk=8))
    rng = np.random.default_rng(7)
    seen = {"merged": 0, "begun": 0}
    for i in range(200):
        before, described = list(s.parts()), s.descriptions()
        rows = [(int(k), int(v), 0, i % 4, 1) for k, v in rng.integers(0, 30, (3, 2))]
        b = batch(rows)
        merging = sum(type(x) is trace.Merging for x in s.batches)
        d = s.insert(b, b.height)
        assert d == Description(i, i + 1, tuple(s.since)) and s.upper == i + 1
        after = s.parts()
        appended = (
            len(after) == len(before) + 1
            and all(x is y for x, y in zip(before, after, strict=False))
            and after[-1] is b
        )
        assert appended == (s.descriptions() == [*described, d]), i
        seen["merged"] += not appended
        seen["begun"] += appended and sum(type(x) is trace.Merging for x in s.batches) > merging
        if i % 50 == 49:
            described = s.descriptions()
            s.compact()
            assert s.descriptions() == [Description(0, i + 1, tuple(s.since))] != described
        assert s.parts() == [
            y for x in s.batches for y in (x.inputs if type(x) is trace.Merging else [x])
        ]
    assert seen["merged"] and seen["begun"], seen


@settings(max_examples=150, deadline=None)
@given(
    updates,
    st.lists(st.integers(1, 6), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=3),
    st.integers(0, 12),
    st.booleans(),
    st.booleans(),
)
@example(
    rows=[(0, 0, 0, 0, 1), (0, 0, 1, 1, -1)],
    cuts=[1],
    since=[(2, 2)],
    back=1,
    stepped=False,
    compact=False,
)  # (the last insertion merged with the one before into nothing: no batch describes it)
def test_a_trace_as_of_an_earlier_insertion(rows, cuts, since, back, stepped, compact):
    """What a join reads for ``L - dL``: leaving out of a lookup the insertions from
    ``first`` on that the trace holds apart, and subtracting the others (merged into other
    batches, or cancelled by a merge that left no batch), reads the trace as of its first
    ``first`` insertions, at every time in advance of ``since``."""
    settings = TraceSettings(
        tail_batches=0, fueled_rows=2 if stepped else 250_000, fuel=1, fuel_chunk=2
    )
    s = Spine(K, TT, ["k"], batch([]), settings=settings)
    s.handle().set_since(since)
    inserted: list[list[tuple[int, ...]]] = []
    start = 0
    for c in itertools.cycle(cuts):
        part = rows[start : start + c]
        if not part:
            break
        b = batch(part)
        if b.height:
            s.insert(b, b.height)
            inserted.append(part)
        start += c
    if compact:
        s.compact()
    d = s.descriptions()
    assert all(x.lower < x.upper <= y.lower for x, y in itertools.pairwise(d))
    assert all(x.lower >= 0 and x.upper <= s.upper == len(inserted) for x in d)
    first = max(0, len(inserted) - back)
    apart = s.held_apart(first)
    read = as_frame(s.lookup(np.arange(5), apart_from=first))
    got = list(read.select(["k", "v", "__t0", "__t1", "__diff"]).iter_rows())
    for p in range(first, len(inserted)):
        if p not in apart:
            got += [(k, v, t0, t1, -d) for k, v, t0, t1, d in inserted[p]]
    want = [r for part in inserted[:first] for r in part]
    for key in range(5):
        for u in itertools.product(range(5), range(5)):
            if any(TT.less_equal(f, u) for f in s.since):
                assert accumulation(got, key, u) == accumulation(want, key, u), (key, u)


@pytest.mark.parametrize("n", [70_000, 140_000])
@pytest.mark.parametrize("small_rows", [0, 256])
@pytest.mark.parametrize("spread", [1, 1_000])
def test_lookups_of_few_and_of_many_keys_in_a_large_batch(n, small_rows, spread):
    """A lookup finds exactly the asked keys' rows, in key order, whether it searches key by
    key (few keys; through the batch's direct index where its keys are dense, ``spread`` 1,
    else through its fences at ``fenced_rows`` rows and more; giving rows where few match)
    or filters the whole batch (many keys: ``scan_rows_per_key``)."""
    from ddflow.runtime.local.rows import ColumnCache

    rng = np.random.default_rng(11)
    big = LocalKernels(LocalSettings(small_batch_rows=small_rows))
    lookups = big.settings.lookups
    rows = pl.DataFrame(
        {
            "k": rng.integers(0, n // 4, n) * spread,
            "v": rng.integers(0, 9, n),
            "__t0": np.zeros(n, dtype=np.int64),
            "__t1": rng.integers(0, 3, n),
            "__diff": np.ones(n, dtype=np.int64),
        }
    )
    arranged = big.arrange(rows, ["k"])
    for m in (1, 30, lookups.fenced_codes * 2, 1_000, 5_000, 15_000):
        codes = np.unique(rng.integers(-5, n // 4 + 5, m) * spread)
        got = as_frame(big.lookup(arranged, codes))
        assert got.get_column("__key").is_sorted()
        wanted = set(codes.tolist())
        expected = [r for r in rows.rows() if r[0] in wanted]
        assert sorted(got.select(rows.columns).rows()) == sorted(expected)
        if m >= 5_000:
            assert m * lookups.scan_rows_per_key >= n  # (the filtering path)
    cache = ColumnCache.of(arranged)
    assert (cache.dense(lookups) is not None) == (spread == 1)
    assert (cache.fence is not None) == (n >= lookups.fenced_rows and spread > 1)


def test_a_merge_in_steps_that_cancels_out_leaves_the_spine_consistent():
    """Batches that cancel each other merge (in steps) to nothing; the spine drops the empty
    result and keeps merging what comes after."""
    s = Spine(K, TT, ["k"], batch([]), settings=TraceSettings(fueled_rows=2))
    rows = [(k, k, 0, 0, 1) for k in range(8)]
    inserted = []
    for sign in (1, -1, 1, -1, 1):
        b = batch([(k, v, t0, t1, sign * d) for k, v, t0, t1, d in rows])
        s.insert(b, b.height)
        inserted += [(k, v, t0, t1, sign * d) for k, v, t0, t1, d in rows]
        for extra in range(3):
            e = batch([(100 + extra, 0, 0, 0, 1)])
            s.insert(e, e.height)
            inserted.append((100 + extra, 0, 0, 0, 1))
    s.compact()
    for key in [*range(8), 100, 101, 102]:
        assert trace_accumulation(s, key, (0, 0)) == accumulation(inserted, key, (0, 0))


def test_a_cascade_of_merges_is_one_merge_paid_by_later_inserts():
    """A cascade of merges (each merged batch at least half its older neighbour) is one
    merge of every batch it reaches; a large one goes on in steps, paid by later inserts,
    and is never forced to finish at once (which made one update pay for most of the
    trace's merging). The spine stays small, sorted and exact."""
    s = Spine(K, TT, ["k"], batch([]), settings=TraceSettings(fueled_rows=40, fuel_chunk=8))
    rng = np.random.default_rng(7)
    real = trace.Merging.work
    forced, stepped, widths = [], [], []

    def work(self, spine, fuel, finish=False):
        was = self.done
        real(self, spine, fuel, finish)
        if self.done and not was:
            (forced if finish else stepped).append(self.size)
            widths.append(len(self.inputs))

    trace.Merging.work = work
    try:
        inserted = []
        for i in range(400):
            rows = [(int(k), int(v), 0, i, 1) for k, v in rng.integers(0, 10_000, (5, 2))]
            inserted += rows
            b = batch(rows)
            s.insert(b, b.height)
            assert len(s.parts()) < 20 + s.settings.tail_batches
    finally:
        trace.Merging.work = real
    assert stepped and not forced
    assert max(widths) > 2  # (some cascade reached more than two batches)
    for part in s.parts():
        codes = as_frame(part).get_column("__key").to_list()
        assert codes == sorted(codes)
    for key in rng.integers(0, 10_000, 50).tolist():
        assert trace_accumulation(s, key, (0, 400)) == accumulation(inserted, key, (0, 400))


def test_small_batches_at_the_end_wait_to_be_merged():
    """A small update inserts a batch of a few updates per operator step, and merging each with
    its neighbours costs a merge's fixed cost every time. Up to ``tail_batches`` batches of at
    most ``tail_rows`` updates together may stay at the end of the spine unmerged, then are
    merged at once: far fewer merges than without them; the spine stays small and every
    accumulation exact. Kernels that do not say ``small_tail`` (Spark's) merge as before."""

    class Untailed(LocalKernels):
        capabilities = Capabilities(stepped_merges=True, row_batches=True, distinct_skips=True)

    def run(kernels=K, settings=None) -> tuple[Spine, list[tuple[int, ...]], list[bool]]:
        s = Spine(kernels, TT, ["k"], batch([]), settings=settings)
        inserted = [(k, k, 0, 0, 1) for k in range(1000)]
        b = batch(inserted)
        s.insert(b, b.height)
        merged = []
        for i in range(1, 121):
            rows = [(i % 50, 1000 + i, 0, i, 1)] * (1 + i % 3)
            inserted += rows
            before = s.descriptions()
            b = batch(rows)
            d = s.insert(b, b.height)
            merged.append(s.descriptions() != [*before, d])
            assert len(s.sizes) <= 12 + s.settings.tail_batches  # (geometric, and the tail)
        return s, inserted, merged

    s, inserted, merged = run()
    for key in range(60):
        assert trace_accumulation(s, key, (0, 200)) == accumulation(inserted, key, (0, 200))
        assert trace_accumulation(s, key, (0, 60)) == accumulation(inserted, key, (0, 60))
    _, _, every = run(settings=TraceSettings(tail_batches=0))
    # (27 merges against 74 of 120 inserts)
    assert 0 < sum(merged) < sum(every) / 2, (sum(merged), sum(every))
    assert run(Untailed())[2] == every


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 3, 40, 300, 3_000]), min_size=1, max_size=5),
    asked=st.integers(1, 400),
    small_rows=st.sampled_from([0, 256]),
    lookup_rows=st.sampled_from([None, 50, 10**6]),
    seed=st.integers(0, 2**16),
    strings=st.booleans(),
    within=st.booleans(),
    scan=st.booleans(),
)
def test_a_lookup_in_every_batch_of_a_trace_equals_the_lookups_concatenated(
    sizes, asked, small_rows, lookup_rows, seed, strings, within, scan
):
    """``lookup_parts`` (a trace's lookup: rows when few match in all its batches, else one
    frame gathered from the batches' columns) finds, in each batch, the rows that a lookup of
    that batch alone finds: batches held as rows and as frames, keys in none of them, a
    schema without a row form (strings with nulls), and row limits that take either side;
    ``within`` (a join's read) and ``scan`` (a batch filtered whole, or given whole within)."""
    check_lookup_parts(sizes, asked, small_rows, lookup_rows, seed, strings, within, scan)


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 3, 40, 300, 3_000]), min_size=1, max_size=8),
    asked=st.integers(1, 16),
    lookup_rows=st.sampled_from([None, 5, 50]),
    seed=st.integers(0, 2**16),
    strings=st.booleans(),
    within=st.booleans(),
    key_range=st.sampled_from([6, 500]),
)
def test_a_lookup_of_a_few_keys_in_a_trace_equals_the_lookups_concatenated(
    sizes, asked, lookup_rows, seed, strings, within, key_range
):
    """A lookup of at most ``few_codes`` keys (a small update's: one pass over the batches,
    one list of rows) gives the rows of the lookups batch by batch, in their order; more rows
    than the limit, or a schema without a row form, take the batch-by-batch path."""
    default = LocalSettings().lookups
    assert default.few_codes >= 16
    got = check_lookup_parts(
        sizes, asked, 256, lookup_rows, seed, strings, within, False, key_range
    )
    if not strings and got.height <= (lookup_rows or default.rows):
        assert type(got) is R.Rows


def check_lookup_parts(
    sizes, asked, small_rows, lookup_rows, seed, strings, within, scan, key_range=500
):
    """``scan``: every batch is large enough to be scanned (``scan_rows`` 1)."""
    rng = np.random.default_rng(seed)
    lookups = LookupSettings(scan_rows=1) if scan else LookupSettings()
    k = LocalKernels(LocalSettings(small_batch_rows=small_rows, lookups=lookups))
    if lookup_rows is not None and small_rows:
        k.lookup_rows = lookup_rows
    parts = []
    for n in sizes:
        data = pl.DataFrame(
            {
                "k": rng.integers(0, key_range, n),
                "v": rng.integers(0, 9, n),
                "__t0": rng.integers(0, 3, n),
                "__diff": np.ones(n, dtype=np.int64),
            }
        )
        if strings:
            data = data.with_columns(
                pl.when(pl.col("v") > 6)
                .then(None)
                .otherwise(pl.col("v").cast(pl.String))
                .alias("v")
            )
        parts.append(k.from_polars(k.arrange(data, ["k"])))
    codes = np.unique(rng.integers(-3, key_range + 10, asked))
    got = k.lookup_parts(parts, codes, within)
    want = k.concat([(k.lookup_within if within else k.lookup)(p, codes) for p in parts])
    columns = as_frame(parts[0]).columns
    assert sorted(as_frame(got).select(columns).rows(), key=repr) == sorted(
        as_frame(want).select(columns).rows(), key=repr
    )
    wanted = set(codes.tolist())
    if not (within and scan):
        assert all(r[0] in wanted for r in as_frame(got).select("__key").rows())
    if small_rows and not strings and not scan and as_frame(got).height <= k.lookup_rows:
        assert type(got) is not pl.DataFrame or as_frame(got).height == 0
    if len(codes) <= lookups.few_codes and not scan:  # (in the order of the batches, then codes)
        assert as_frame(got).select(columns).rows() == as_frame(want).select(columns).rows()
    return got
