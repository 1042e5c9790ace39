"""The reduce's interesting times against their definition: for each key, the least upper
bounds of every subset of the key's times (history and new) that holds a new time, found here
by enumerating the subsets. Both paths (row by row, and columnar) are checked, over product
orders and lexicographic pairs, with null keys."""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.runtime.local.index import IndexedHistory
from ddflow.runtime.local.kernels import KEY, LocalKernels
from ddflow.runtime.local.reduce import (
    _distinct_keys,
    _interesting_times_arrays,
    interesting_times,
)
from ddflow.runtime.local.rows import Rows, as_rows
from ddflow.runtime.local.rows import frame as as_frame
from ddflow.runtime.local.settings import (
    IndexSettings,
    LocalSettings,
    LookupSettings,
    ReduceSettings,
)
from ddflow.timely.lattice import TimeType

#: settings that take the reduce kernels' row path at any size, and their columnar path
ROW_PATH = LocalSettings(reduce=ReduceSettings(small_rows=10**9))
COLUMNAR_PATH = LocalSettings(small_batch_rows=0)

TIMES = [
    TimeType(("product",)),  # (a total order)
    TimeType(("product", "product")),
    TimeType(("product", "product", "product")),
    TimeType(("product", "lexicographic")),
    TimeType(("product", "product", "lexicographic")),
]
keys = st.one_of(st.none(), st.integers(0, 2))


def expected(
    new: list[tuple[Any, tuple[int, ...]]], history: list[tuple[Any, tuple[int, ...]]], tt: TimeType
) -> set[tuple[tuple[int, ...], Any]]:
    """``(time, key)`` for every lub of a subset of a key's times holding a new time."""
    out = set()
    for key in {k for k, _ in new}:
        fresh = sorted({t for k, t in new if k == key})
        others = sorted({t for k, t in history if k == key} - set(fresh))
        for mask in range(1, 1 << len(fresh)):
            lifted = reduce(tt.join, [t for i, t in enumerate(fresh) if mask >> i & 1])
            for omask in range(1 << len(others)):
                chosen = [t for i, t in enumerate(others) if omask >> i & 1]
                out.add((reduce(tt.join, chosen, lifted), key))
    return out


def frame_of(rows: list[tuple[Any, tuple[int, ...]]], tt: TimeType) -> pl.DataFrame:
    data = pl.DataFrame(
        [(k, *t) for k, t in rows],
        orient="row",
        schema={"k": pl.Int64, **{c: pl.Int64 for c in tt.columns()}},
    )
    return LocalKernels().arrange(data, ["k"])


def got(parts: list[tuple[tuple[int, ...], Any]]) -> set[tuple[tuple[int, ...], Any]]:
    out = set()
    for t, part in parts:
        for row in as_frame(part).select([KEY, "k"]).iter_rows():
            out.add((t, row[1]))
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[TimeType, list[Any], list[Any]]:
    tt = draw(st.sampled_from(TIMES))
    time = st.tuples(*[st.integers(0, 3)] * tt.width)
    new = draw(st.lists(st.tuples(keys, time), min_size=1, max_size=3))
    if draw(st.booleans()):  # all at one time (the keys alone, and one part)
        new = [(k, new[0][1]) for k, _ in new]
    history = draw(st.lists(st.tuples(keys, time), max_size=8))
    return tt, new, history


@settings(max_examples=400, deadline=None)
@given(case=cases())
def test_interesting_times_are_the_lubs_of_subsets_holding_a_new_time(case):
    tt, new, history = case
    want = expected(new, history, tt)
    for paths in (ROW_PATH, COLUMNAR_PATH):  # the row path, then the columnar one
        parts = interesting_times(frame_of(new, tt), frame_of(history, tt), tt, ["k"], paths)
        assert got(parts) == want, paths
        assert len({t for t, _ in parts}) == len(parts)  # one part per time


def test_incomparable_lifts_add_their_lub():
    """A new time lifted by two history times to incomparable times: their lub, which is
    neither a lift nor a history time, is interesting too (the columnar path's rounds after
    the lifts)."""
    tt = TimeType(("product", "product", "product"))
    new = [(1, (0, 2, 2))]
    history = [(1, (0, 5, 0)), (1, (0, 0, 7)), (2, (0, 9, 9))]
    for paths in (ROW_PATH, COLUMNAR_PATH):
        parts = interesting_times(frame_of(new, tt), frame_of(history, tt), tt, ["k"], paths)
        assert got(parts) == {((0, 2, 2), 1), ((0, 5, 2), 1), ((0, 2, 7), 1), ((0, 5, 7), 1)}


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 2)), max_size=30
    ),
    collide=st.booleans(),
    flagged=st.booleans(),
)
def test_distinct_keys_are_the_unique_key_rows(rows, collide, flagged):
    """The distinct ``(KEY, a, b)`` rows of a batch sorted by ``KEY``, from the runs' heads,
    whatever the codes: here codes that collide (several keys in one run) or not."""
    data = pl.DataFrame(rows, orient="row", schema={"a": pl.Int64, "b": pl.Int64})
    code = (pl.col("b") % 2) if collide else (pl.col("a").fill_null(-1) * 3 + pl.col("b"))
    batch = data.with_columns(code.cast(pl.Int64).alias(KEY)).sort(KEY)
    if flagged:
        batch = batch.with_columns(pl.col(KEY).set_sorted())
    got_rows = _distinct_keys(batch, ["a", "b"])
    assert got_rows.columns == [KEY, "a", "b"]
    assert sorted(got_rows.iter_rows(), key=repr) == sorted(
        set(batch.select([KEY, "a", "b"]).iter_rows()), key=repr
    )
    assert got_rows.get_column(KEY).is_sorted()


@settings(max_examples=300, deadline=None)
@given(case=cases(), cut=st.integers(0, 8), rows_part=st.booleans(), rows_new=st.booleans())
def test_a_trace_before_the_new_times_lifts_none(case, cut, rows_part, rows_new):
    """``trace_before`` (the reduce then reads no history for the interesting times) holds
    exactly when each coordinate of every trace time is at most that of every new time; and
    then the interesting times are those of the new updates alone."""
    tt, new, history = case
    k = LocalKernels()
    arranged = frame_of(history, tt)
    parts = [arranged.head(cut), arranged.slice(cut)]
    if rows_part:  # (a small batch of a trace is held as rows)
        parts[0] = as_rows(parts[0], 10**9)
    fresh = frame_of(new, tt)
    got_before = k.trace_before(parts, as_rows(fresh, 10**9) if rows_new else fresh, tt)
    if tt.is_product:
        want = all(h[i] <= n[i] for _, h in history for _, n in new for i in range(tt.width))
    else:
        want = False
    assert got_before == want
    if got_before:
        for paths in (ROW_PATH, COLUMNAR_PATH):
            alone = interesting_times(fresh, arranged.clear(), tt, ["k"], paths)
            assert got(alone) == expected(new, history, tt)


def chain_case(
    new: list[tuple[Any, tuple[int, ...]]], history: list[tuple[Any, tuple[int, ...]]], tt: TimeType
) -> bool:
    """Does the array path promise to take this case: a product order, each key's new times
    equal but in the last coordinate, and its history times at most those there?"""
    if not tt.is_product:
        return False
    for key in {k for k, _ in new}:
        heads = {t[:-1] for k, t in new if k == key}
        if len(heads) > 1:
            return False
        (head,) = heads
        if any(
            any(a > b for a, b in zip(t[:-1], head, strict=True)) for k, t in history if k == key
        ):
            return False
    return True


@st.composite
def chain_cases(draw: st.DrawFn) -> tuple[TimeType, list[Any], list[Any]]:
    """Keys without nulls; a later epoch's loop often (history heads at most the new ones)."""
    tt = draw(st.sampled_from(TIMES))
    time = st.tuples(*[st.integers(0, 3)] * tt.width)
    keys_ = st.integers(-2, 4)
    head = draw(time)[:-1]
    fresh = st.tuples(keys_, st.integers(0, 3).map(lambda x: (*head, x)))
    new = draw(
        st.lists(
            st.one_of(fresh, st.tuples(keys_, time)) if draw(st.booleans()) else fresh,
            min_size=1,
            max_size=6,
        )
    )
    below = st.tuples(*[st.integers(0, h) for h in head], st.integers(0, 4))
    history = draw(st.lists(st.tuples(keys_, st.one_of(below, time)), max_size=10))
    return tt, new, history


@settings(max_examples=400, deadline=None)
@given(
    case=chain_cases(),
    rows_in=st.booleans(),
    paths=st.sampled_from([ROW_PATH, COLUMNAR_PATH]),
    indexed=st.booleans(),
)
def test_the_array_path_keeps_its_promise_and_finds_the_closure(case, rows_in, paths, indexed):
    """The NumPy path returns the closure wherever it applies (:func:`chain_case`, here
    checked by enumeration), from frames, rows or the indexes of a large batch (a heavy key's
    times from the index's summary), and answers None elsewhere; its parts are one per time,
    each key once, sorted."""
    tt, new, history = case
    fresh, old = frame_of(new, tt), frame_of(history, tt)
    if rows_in:
        fresh, old = as_rows(fresh, 10**9), as_rows(old, 10**9)
    elif indexed:  # through the index of a large batch: keys of more than 2 rows heavy
        every_batch = LocalSettings(
            index=IndexSettings(indexed_rows=1, heavy_rows=2),
            lookups=LookupSettings(scan_rows_per_key=0),
        )
        codes = np.unique(fresh.get_column(KEY).to_numpy())
        batch = old.with_columns(pl.lit(1, dtype=pl.Int64).alias("__diff"))
        read = IndexedHistory.read(LocalKernels(every_batch), [batch], codes, ["k"], tt)
        if read is not None:
            old = read
    parts = _interesting_times_arrays(fresh, old, tt, ["k"], paths)
    if not chain_case(new, history, tt):
        assert parts is None
        return
    assert parts is not None
    assert got(parts) == expected(new, history, tt)
    assert len({t for t, _ in parts}) == len(parts)
    for _, part in parts:
        codes = as_frame(part).get_column(KEY).to_list()
        assert codes == sorted(set(codes))
        assert as_frame(part).get_column("k").to_list() == codes
        assert isinstance(part, Rows) == (paths is ROW_PATH)
