"""The local runtime's row kernels (small batches as Python tuples) against its columnar
kernels (Polars): on arbitrary batches, with nulls, repeated rows, zero-sum groups, product and
lexicographic times, each kernel gives the same multiset of rows either way, and the same key
codes, so that row and columnar batches can share one trace."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow.runtime.local.reduce.skips as reduce_skips
from ddflow.differential.kernel import ReduceSpec
from ddflow.expr.nodes import col, lit
from ddflow.runtime.local.columnar import grouped_sums, merge_arrays
from ddflow.runtime.local.kernels import DIFF, KEY, LocalKernels
from ddflow.runtime.local.reduce import minmax_unchanged, reduce_prepare
from ddflow.runtime.local.rows import Rows, as_rows, frame, mix_code, mix_codes, rowable
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings, SumSettings
from ddflow.schema import Schema
from ddflow.timely.lattice import TimeType

I64, STR = pl.Int64(), pl.String()
OUTER = TimeType(("product",))
TIMES = [TimeType(("product", "product")), TimeType(("product", "lexicographic"))]
K = LocalKernels()
COLUMNAR = LocalKernels(LocalSettings(small_batch_rows=0))
#: the default settings' thresholds
DEFAULT = LocalSettings()
#: settings that take the reduce kernels' row path at any size, and their columnar path
ROW_PATH = LocalSettings(reduce=ReduceSettings(small_rows=10**9))
COLUMNAR_PATH = COLUMNAR.settings

ints = st.one_of(st.none(), st.integers(-2, 2))
strs = st.one_of(st.none(), st.sampled_from(["a", "b", "ab"]))


def times(tt: TimeType) -> st.SearchStrategy[tuple[int, ...]]:
    return st.tuples(*[st.integers(0, 3)] * tt.width)


@st.composite
def batches(draw: st.DrawFn, tt: TimeType, max_size: int = 12) -> pl.DataFrame:
    rows = draw(
        st.lists(st.tuples(ints, strs, times(tt), st.sampled_from([1, -1, 2])), max_size=max_size)
    )
    return pl.DataFrame(
        [(a, s, *t, d) for a, s, t, d in rows],
        orient="row",
        schema={"a": I64, "s": STR, **{c: I64 for c in tt.columns()}, DIFF: I64},
    )


def rows_of(f: pl.DataFrame) -> Rows:
    out = as_rows(f, limit=10**9)
    assert type(out) is Rows
    return out


def bag(batch: Any) -> Counter[tuple[Any, ...]]:
    """A batch's rows as a multiset, in a fixed column order."""
    f = frame(batch)
    return Counter(f.select(sorted(f.columns)).iter_rows())


def same(a: Any, b: Any) -> None:
    fa, fb = frame(a), frame(b)
    assert dict(fa.schema) == dict(fb.schema) or set(fa.columns) == set(fb.columns)
    assert bag(fa) == bag(fb)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), tt=st.sampled_from(TIMES))
def test_linear_and_time_kernels_agree(data: st.DataObject, tt: TimeType) -> None:
    f = data.draw(batches(tt))
    r = rows_of(f)
    same(K.negate(r), COLUMNAR.negate(f))
    same(K.consolidate(r), COLUMNAR.consolidate(f))
    same(K.increment(r, tt, 3), COLUMNAR.increment(f, tt, 3))
    same(K.leave(r, tt, OUTER), COLUMNAR.leave(f, tt, OUTER))
    outer = K.leave(r, tt, OUTER)
    same(K.enter(outer, OUTER, tt), COLUMNAR.enter(frame(outer), OUTER, tt))
    frontier = data.draw(st.lists(times(tt), max_size=2))
    same(K.advance(r, tt, frontier), COLUMNAR.advance(f, tt, frontier))
    assert K.distinct_times(r, tt) == COLUMNAR.distinct_times(f, tt)
    assert sorted(K.count_by_time(r, tt)) == sorted(COLUMNAR.count_by_time(f, tt))
    split_r, split_f = K.split_by_time(r, tt), COLUMNAR.split_by_time(f, tt)
    assert [t for t, _ in split_r] == [t for t, _ in split_f]
    for (_, a), (_, b) in zip(split_r, split_f, strict=True):
        same(a, b)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), tt=st.sampled_from(TIMES))
def test_projections_and_fallbacks_agree(data: st.DataObject, tt: TimeType) -> None:
    f = data.draw(batches(tt))
    r = rows_of(f)
    schema = Schema({"a": "int64?", "s": "str?"})
    swap = [K.compile(col("s"), schema, "x"), K.compile(col("a"), schema, "y")]
    same(K.select(r, swap, tt), COLUMNAR.select(f, swap, tt))
    renamed = [K.compile(col("a"), schema, "s")]
    same(
        K.with_columns(r, renamed, ["a", "s"], tt),
        COLUMNAR.with_columns(f, renamed, ["a", "s"], tt),
    )
    computed = [K.compile(col("a") * 2 + 1, schema, "b")]  # not a plain column: via Polars
    same(K.select(r, computed, tt), COLUMNAR.select(f, computed, tt))
    # a cast to the column's own type is a projection; to another type, Polars converts
    kept = [K.compile(col("a").cast("int64"), schema, "b"), K.compile(col("s"), schema, "t")]
    assert [getattr(c, "_dd_column", None) for c in kept] == [("a", "b"), ("s", "t")]
    same(K.select(r, kept, tt), COLUMNAR.select(f, kept, tt))
    converted = [
        K.compile(col("a").cast("float64"), schema, "b"),
        K.compile(col("a").cast("int32"), schema, "c"),
    ]
    assert [getattr(c, "_dd_column", None) for c in converted] == [None, None]
    same(K.select(r, converted, tt), COLUMNAR.select(f, converted, tt))
    pred = K.compile(col("a") > 0, schema, None)
    same(K.filter(r, pred), COLUMNAR.filter(f, pred))
    same(K.concat([r, K.negate(r), f]), COLUMNAR.concat([f, COLUMNAR.negate(f), f]))


@st.composite
def int_batches(draw: st.DrawFn, tt: TimeType, nulls: bool) -> pl.DataFrame:
    """Batches of integer columns only (``a`` with nulls when ``nulls``), as most traces
    hold."""
    a = st.one_of(st.none(), st.integers(-3, 3)) if nulls else st.integers(-3, 3)
    rows = draw(
        st.lists(
            st.tuples(a, st.integers(0, 2), times(tt), st.sampled_from([1, -1, 2])), max_size=30
        )
    )
    return pl.DataFrame(
        [(x, y, *t, d) for x, y, t, d in rows],
        orient="row",
        schema={"a": I64, "b": pl.Int32(), **{c: I64 for c in tt.columns()}, DIFF: I64},
    )


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    tt=st.sampled_from([OUTER, *TIMES]),
    keys=st.sampled_from([["a"], ["a", "b"], []]),
    nulls=st.booleans(),
)
def test_merges_agree_with_a_reference(
    data: st.DataObject, tt: TimeType, keys: list[str], nulls: bool
) -> None:
    """A merge of arranged batches, rows and frames mixed as a trace holds them, advances
    every time by the frontier and sums the diffs of equal updates, whichever way it goes:
    rows in one pass (all rows, few), NumPy (integer columns without nulls, a product
    order) or Polars. Checked against the sums computed here, key codes included."""
    parts = data.draw(st.lists(int_batches(tt, nulls), min_size=1, max_size=4))
    since = data.draw(st.lists(times(tt), max_size=2))
    sums: dict[tuple[Any, ...], int] = {}
    for p in parts:
        for a, b, *t, d in p.iter_rows():
            u = (a, b, *tt.advance_by(t, since))
            sums[u] = sums.get(u, 0) + d
    want = pl.DataFrame(
        [(*u, d) for u, d in sums.items() if d], orient="row", schema=parts[0].schema
    )
    as_rows_too = data.draw(st.lists(st.booleans(), min_size=len(parts), max_size=len(parts)))
    mixed = [
        K.arrange(rows_of(p), keys) if r else COLUMNAR.arrange(p, keys)
        for p, r in zip(parts, as_rows_too, strict=True)
    ]
    every_row = [K.arrange(rows_of(p), keys) for p in parts]
    reference = COLUMNAR.arrange(want, keys)
    for kernels, batches in ((K, mixed), (K, every_row), (COLUMNAR, mixed)):
        merged = kernels.merge(batches, tt, since, keys=keys)
        same(merged, reference)
        codes = frame(merged).get_column(KEY).to_list()
        assert codes == sorted(codes)
    # NumPy's merge is taken wherever it applies, and only there
    in_arrays = merge_arrays(mixed, tt, since, (DIFF,))
    null = any(p.get_column("a").null_count() for p in parts)
    applies = tt.is_product and not null and any(p.height for p in parts)
    assert (in_arrays is not None) == applies
    if in_arrays is not None:
        same(in_arrays, reference)
        assert in_arrays.get_column(KEY).is_sorted()


#: expressions small batches evaluate in Python (``_dd_row``), and some they leave to Polars
ROW_EXPRS = [
    col("a") + col("a"),
    col("a") - 1,
    (5 - col("a")).cast("int64"),
    col("a") + (2**63 - 2),
    col("a") - (2**63 - 1),  # (overflow: Polars decides)
    col("a") == 1,
    col("a") != col("a") - 1,
    col("a") < 0,
    col("a") <= col("a"),
    col("a") > -1,
    col("a") >= 2,
    col("s") < "ab",
    col("s") == col("s"),
    col("s") >= "b",
    lit("b") > col("s"),
    lit(1) + 2 == col("a"),
    lit(5),
    lit("q"),
    lit(2**40) - col("a"),
]
POLARS_EXPRS = [
    col("a") * 2,
    col("a") / 2,
    col("a").cast("int32") + 1,
    col("a").cast("float64"),
    col("a").is_null(),
    (col("a") > 0) & (col("s") == "a"),
    col("a") == lit(1.5),
]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), tt=st.sampled_from(TIMES))
def test_expressions_of_rows_are_polars_results(data: st.DataObject, tt: TimeType) -> None:
    """Selects and filters of small batches in Python give Polars' rows and types: nulls,
    strings, comparisons, int64 arithmetic up to overflow (left to Polars)."""
    f = data.draw(batches(tt))
    r = rows_of(f)
    schema = Schema({"a": "int64?", "s": "str?"})
    picked = data.draw(st.lists(st.sampled_from(ROW_EXPRS + POLARS_EXPRS), min_size=1, max_size=3))
    compiled = [K.compile(e, schema, f"x{i}") for i, e in enumerate(picked)]
    got, want = K.select(r, compiled, tt), COLUMNAR.select(f, compiled, tt)
    assert dict(frame(got).schema) == dict(want.schema)
    same(got, want)
    for i, e in enumerate(picked):
        pred = K.compile(e, schema, None)
        if want.schema[f"x{i}"] == pl.Boolean:
            same(K.filter(r, pred), COLUMNAR.filter(f, pred))
    # the expressions evaluated in Python are those this test means
    assert all(hasattr(K.compile(e, schema, "x"), "_dd_row") for e in ROW_EXPRS)
    assert not any(hasattr(K.compile(e, schema, "x"), "_dd_row") for e in POLARS_EXPRS)


def test_an_overflowing_row_goes_to_polars() -> None:
    schema = Schema({"a": "int64?", "s": "str?"})
    f = pl.DataFrame(
        {"a": [2**62, None], "s": ["a", "b"], "__t0": [0, 0], DIFF: [1, 1]},
        schema={"a": I64, "s": STR, "__t0": I64, DIFF: I64},
    )
    twice = [K.compile(col("a") + col("a"), schema, "b")]
    want = COLUMNAR.select(f, twice, OUTER)
    assert frame(K.select(rows_of(f), twice, OUTER)).equals(want)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(), tt=st.sampled_from(TIMES), keys=st.sampled_from([["a"], ["s"], ["a", "s"], []])
)
def test_arrangements_agree(data: st.DataObject, tt: TimeType, keys: list[str]) -> None:
    parts = data.draw(st.lists(batches(tt), min_size=1, max_size=3))
    arranged_r = [K.arrange(rows_of(p), keys) for p in parts]
    arranged_f = [COLUMNAR.arrange(p, keys) for p in parts]
    for a, b in zip(arranged_r, arranged_f, strict=True):
        same(a, b)  # key codes included: equal keys, equal codes, either way
        codes = [row[a.index(KEY)] for row in a.rows]
        assert codes == sorted(codes)
    since = data.draw(st.lists(times(tt), max_size=2))
    merged_r = K.merge(arranged_r, tt, since)
    merged_f = COLUMNAR.merge(arranged_f, tt, since)
    same(merged_r, merged_f)
    # a trace holding row and columnar batches at once answers lookups the same
    all_codes = sorted({c for b in arranged_f for c in b.get_column(KEY).to_list()})
    ask = sorted(data.draw(st.sets(st.sampled_from(all_codes)))) if all_codes else []
    mixed = K.concat(
        [K.lookup(a, np.array(ask, dtype=np.int64)) for a in arranged_r]
        + [K.lookup(b, np.array(ask, dtype=np.int64)) for b in arranged_f]
    )
    asked = np.array(ask, dtype=np.int64)
    columnar = COLUMNAR.concat([COLUMNAR.lookup(b, asked) for b in arranged_f] * 2)
    same(mixed, columnar)
    if arranged_r[0].height:
        assert K.key_set(arranged_r[0]) == COLUMNAR.key_set(arranged_f[0]).tolist()


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    tt=st.sampled_from(TIMES),
    on=st.sampled_from([(["a"], ["a"]), (["s"], ["s"]), (["a", "s"], ["a", "s"])]),
)
def test_joins_agree(data: st.DataObject, tt: TimeType, on: tuple[list[str], list[str]]) -> None:
    left, right = data.draw(batches(tt)), data.draw(batches(tt))
    output = [("l", "a", "a"), ("l", "s", "ls"), ("r", "s", "rs")]
    for delta_is_left in (True, False):
        got = K.join_slice(rows_of(left), rows_of(right), tt, on[0], on[1], delta_is_left, output)
        want = COLUMNAR.join_slice(left, right, tt, on[0], on[1], delta_is_left, output)
        same(got, want)


def skip_agrees(spec: ReduceSpec, new: Any, out_history: pl.DataFrame, tt: TimeType) -> None:
    """The row path of the min/max skip returns the keys of the columnar path, and no others
    once its time-by-time test (for the keys the single bound does not clear) is off; with it
    on, those keys and perhaps more."""

    def skipped() -> Counter:
        return bag(minmax_unchanged(spec, rows_of(frame(new)), rows_of(out_history), tt, ROW_PATH))

    want = bag(minmax_unchanged(spec, frame(new), out_history, tt, COLUMNAR_PATH))
    more = skipped()
    real = reduce_skips._unchanged_at_each_time
    reduce_skips._unchanged_at_each_time = lambda *a: False
    try:
        assert skipped() == want
    finally:
        reduce_skips._unchanged_at_each_time = real
    assert not want - more


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_minmax_skip_agrees(data: st.DataObject) -> None:
    tt = TIMES[0]
    spec = ReduceSpec.of(
        "agg",
        ["s"],
        aggs=[("lo", "min", "a"), ("hi", "max", "a")],
        out_types={"lo": I64, "hi": I64},
    )
    new = K.arrange(reduce_prepare(spec, data.draw(batches(tt)), tt), spec.keys)
    outs = data.draw(
        st.lists(st.tuples(strs, ints, ints, times(tt), st.sampled_from([1, -1])), max_size=8)
    )
    out_history = COLUMNAR.arrange(
        pl.DataFrame(
            [(s, lo, hi, *t, d) for s, lo, hi, t, d in outs],
            orient="row",
            schema={"s": STR, "lo": I64, "hi": I64, **{c: I64 for c in tt.columns()}, DIFF: I64},
        ),
        spec.keys,
    )
    skip_agrees(spec, new, out_history, tt)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), one_time=st.booleans())
def test_minmax_skip_agrees_on_an_integer_key(data: st.DataObject, one_time: bool) -> None:
    """As above, keyed by an ``Int64`` column without nulls, whose key code is the column
    (the columnar skip groups by the code alone), with new updates at one time or several."""
    tt = TIMES[0]
    tcols = tt.columns()
    spec = ReduceSpec.of(
        "agg",
        ["k"],
        aggs=[("lo", "min", "a"), ("hi", "max", "a")],
        out_types={"lo": I64, "hi": I64},
    )
    keys = st.integers(0, 3)
    rows = data.draw(
        st.lists(st.tuples(keys, ints, times(tt), st.sampled_from([1, -1, 2])), max_size=12)
    )
    if one_time and rows:
        rows = [(k, a, rows[0][2], d) for k, a, _, d in rows]
    raw = pl.DataFrame(
        [(k, a, *t, d) for k, a, t, d in rows],
        orient="row",
        schema={"k": I64, "a": I64, **{c: I64 for c in tcols}, DIFF: I64},
    )
    new = K.arrange(reduce_prepare(spec, raw, tt), spec.keys)
    outs = data.draw(
        st.lists(st.tuples(keys, ints, ints, times(tt), st.sampled_from([1, -1])), max_size=8)
    )
    out_history = COLUMNAR.arrange(
        pl.DataFrame(
            [(k, lo, hi, *t, d) for k, lo, hi, t, d in outs],
            orient="row",
            schema={"k": I64, "lo": I64, "hi": I64, **{c: I64 for c in tcols}, DIFF: I64},
        ),
        spec.keys,
    )
    skip_agrees(spec, new, out_history, tt)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
            st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_integer_key_codes_agree(rows: list[tuple[int | None, int | None]]) -> None:
    """Several integer key columns: the row kernels' scalar mix equals the vectorized one."""
    a = pl.Series([r[0] for r in rows], dtype=pl.Int64)
    b = pl.Series([r[1] for r in rows], dtype=pl.Int32)
    assert mix_codes([a, b]).tolist() == [mix_code(r) for r in rows]


def test_floats_stay_columnar() -> None:
    f = pl.DataFrame({"x": [0.1, float("nan")], "__t0": [0, 0], DIFF: [1, 1]})
    assert not rowable(dict(f.schema))
    assert as_rows(f, DEFAULT.small_batch_rows) is f


def test_columnar_runtime_never_holds_rows() -> None:
    import ddflow as dd

    flow = dd.Dataflow(runtime=dd.LocalRuntime(small_batch_rows=0))
    seen: list[Any] = []
    k = flow.kernels
    original = k.consolidate

    def spy(batch: Any, sums: Any = (DIFF,)) -> Any:
        seen.append(type(batch))
        return original(batch, sums)

    k.consolidate = spy  # type: ignore[method-assign]
    edges = flow.input("edges", schema={"a": "int64", "b": "int64"})
    out = dd.graph.connected_components(edges, "a", "b").output()
    edges.insert([(1, 2), (2, 3)])
    flow.advance_to(1)
    flow.run()
    assert out.snapshot()["label"].tolist() == [1, 1, 1]
    assert seen and Rows not in seen


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-3, 3),
            st.sampled_from([0, 7, -(2**40), 2**40]),
            st.integers(0, 2),
            st.integers(-2, 2),
            st.integers(-1, 1),
        ),
        max_size=40,
    ),
    wide=st.booleans(),
    unsigned=st.booleans(),
    drop_zero=st.booleans(),
    runs=st.sampled_from([None, 1, 2, 3]),
    few_runs=st.sampled_from([0, 64]),
    sums=st.sampled_from([["__diff", "w"], ["__diff"]]),
    wide_sum=st.booleans(),
    arrays=st.booleans(),
)
def test_grouped_sums_by_packed_codes_equal_the_group_by(
    rows, wide, unsigned, drop_zero, runs, few_runs, sums, wide_sum, arrays
):
    """The packed-code sum (large integer frames) against Polars' group-by: negative, wide
    and unsigned columns, ranges too wide to pack (which fall back), one or two summed
    columns (one is folded into the codes when its range fits: not with ``wide_sum``), and
    groups whose sums are all zero dropped or kept. Packed, the groups come out sorted, their
    columns decoded from the codes in their own types. Frames that are ``runs`` sorted runs
    (as a merge of arranged batches is: one run takes neither a sort nor a gather), sorted by
    the stable sort or by Polars' (``few_runs``). With ``arrays``, the NumPy path of small
    frames (:func:`~ddflow.runtime.local.kernels._array_sums`) instead, which sorts the columns
    together where the ranges are too wide to pack: sorted by the group either way."""
    schema = {
        "a": pl.Int64,
        "b": pl.Int64,
        "c": pl.UInt32 if unsigned else pl.Int16,
        "__diff": pl.Int64,
        "w": pl.Int64,
    }
    f = pl.DataFrame(rows, schema=schema, orient="row")
    if wide and f.height:
        f = f.with_columns(pl.Series("b", [(-1) ** i * (2**61 + i) for i in range(f.height)]))
    if wide_sum:
        f = f.with_columns(pl.col("__diff") * 2**50)
    if runs is not None:  # cut into that many parts, each sorted by the group
        part = pl.int_range(pl.len()) * runs // pl.len()
        f = f.with_columns(part.alias("__part")).sort(["__part", "a", "b", "c"]).drop("__part")
    f = f.select(["a", "b", "c", *sums])
    # the packed path for any size, or the array path for any size
    paths = (
        SumSettings(packed_rows=10**9, sorted_runs=few_runs, array_rows=10**9 - 1)
        if arrays
        else SumSettings(packed_rows=1, sorted_runs=few_runs, array_rows=0)
    )
    got = grouped_sums(f, ["a", "b", "c"], sums, paths, drop_zero=drop_zero)
    want = f.group_by(["a", "b", "c"]).agg([pl.col(w).sum() for w in sums])
    if drop_zero:
        want = want.filter(pl.any_horizontal([pl.col(w) != 0 for w in sums]))
    assert got.schema == want.schema
    assert sorted(got.rows()) == sorted(want.rows())
    if not wide or arrays:
        assert got.select(["a", "b", "c"]).rows() == sorted(got.select(["a", "b", "c"]).rows())


def test_a_column_cache_takes_rows_with_columns_in_any_order():
    """``ColumnCache.take(idx, names)`` against Polars' gather and projection of the same
    frame: every column, and the named ones in another order (nulls and strings included)."""
    from ddflow.runtime.local.rows import ColumnCache

    f = pl.DataFrame(
        {
            "__key": [1, 1, 2, 3, 3],
            "a": [5, None, 7, 8, 9],
            "s": ["x", "y", None, "w", "v"],
            "__diff": [1, -1, 2, 1, 1],
        }
    )
    cache = ColumnCache(f)
    idx = np.array([4, 0, 2])
    assert cache.take(idx).rows == f[idx].rows()
    names = ["__diff", "s", "__key"]
    taken = cache.take(idx, names)
    assert taken.rows == f[idx][names].rows()
    assert list(taken.schema) == names


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fenced_key_ranges_equal_a_binary_search(data: st.DataObject) -> None:
    """``key_ranges`` through fences against ``numpy.searchsorted``, left and right: keys in
    runs from one row to several fences long, codes absent, below and above every key, at the
    ends of the int64 range (the largest code takes the plain search), few and many."""
    from ddflow.runtime.local.rows import key_ranges

    every, fenced_codes = DEFAULT.lookups.fence_every, DEFAULT.lookups.fenced_codes
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    distinct = data.draw(st.integers(1, 3_000))
    heavy = data.draw(st.sampled_from([1, 8, every - 1, every, 3 * every + 5]))
    runs = rng.integers(1, 4, distinct)
    runs[rng.random(distinct) < 0.05] = heavy  # a few keys across fences
    values = np.unique(rng.integers(-(2**40), 2**40, distinct))
    if data.draw(st.booleans()):
        values[0] = np.iinfo(np.int64).min  # (the null key's code)
    keys = np.repeat(values, runs[: len(values)])
    fence = keys[::every].copy()
    m = data.draw(st.sampled_from([1, fenced_codes - 1, fenced_codes, 200, 2_000]))
    codes = np.concatenate(
        (rng.choice(values, m), rng.integers(-(2**41), 2**41, m), values[:1] - 1, values[-1:] + 1)
    )
    if data.draw(st.booleans()):
        codes = np.unique(codes)  # (a lookup's codes are sorted and unique; any order works)
    if data.draw(st.integers(0, 4)) == 0:
        codes = np.append(codes, np.iinfo(np.int64).max)
    lo, hi = key_ranges(keys, codes, fence, every, fenced_codes)
    assert lo.tolist() == np.searchsorted(keys, codes, side="left").tolist()
    assert hi.tolist() == np.searchsorted(keys, codes, side="right").tolist()
    empty = np.zeros(0, dtype=np.int64)
    lo, hi = key_ranges(empty, codes, empty[::every].copy(), every, fenced_codes)
    assert not lo.any() and not hi.any()


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_direct_key_ranges_equal_a_binary_search(data: st.DataObject) -> None:
    """``dense_ranges`` through a direct index (``dense_offsets``) against
    ``numpy.searchsorted``, left and right: codes spanning up to ``dense_span`` times the rows
    (some absent, some keys in long runs), anywhere in the int64 range up to its ends, looked
    up with codes present, absent, below and above the span, and the int64 extremes (which
    must not wrap around). A batch under ``dense_rows`` rows, or whose codes span more, has
    no direct index (the default settings' thresholds)."""
    from ddflow.runtime.local.rows import dense_offsets, dense_ranges, is_dense

    lookups = DEFAULT.lookups
    dense_rows, dense_span = lookups.dense_rows, lookups.dense_span

    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = data.draw(st.sampled_from([dense_rows - 1, dense_rows, 3 * dense_rows]))
    span = data.draw(st.sampled_from([1, n // 3, n, dense_span * n, dense_span * n + 1]))
    lo64, hi64 = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    base = data.draw(st.sampled_from([0, -5, 2**40, lo64 + 1, hi64 - span]))
    keys = np.sort(base + rng.integers(0, span, n))
    keys[0], keys[-1] = base, base + span - 1  # (the span exactly)
    if span > 2:
        keys[n // 2 : n // 2 + n // 4] = keys[n // 2]  # (a long run)
    expect = n >= dense_rows and span <= dense_span * n and base - 1 >= lo64 and keys[-1] < hi64
    assert is_dense(keys, lookups) == expect
    index = dense_offsets(keys, lookups)
    assert (index is not None) == expect
    if index is None:
        return
    m = data.draw(st.sampled_from([1, 50, 3_000]))
    codes = np.concatenate(
        (
            rng.choice(keys, m),
            base + rng.integers(-3, span + 3, m),
            [lo64, hi64, base - 1, base, base + span - 1],
            [base + span] if base + span <= hi64 else [],
        )
    )
    if data.draw(st.booleans()):
        codes = np.unique(codes)  # (a lookup's codes are sorted and unique; any order works)
    got_lo, got_hi = dense_ranges(index[0], index[1], codes.astype(np.int64))
    assert got_lo.dtype == got_hi.dtype == np.int64
    assert got_lo.tolist() == np.searchsorted(keys, codes, side="left").tolist()
    assert got_hi.tolist() == np.searchsorted(keys, codes, side="right").tolist()


@pytest.mark.parametrize("spread", [1, 1_000])
def test_few_keys_looked_up_in_large_batches(spread: int) -> None:
    """``lookup_few`` (a small update's read of a few keys in every batch of a trace) against
    a filter of each batch, with keys dense enough for a direct index (``spread`` 1) and too
    sparse for one (binary searches): present, absent, below and above every key, over two
    large batches and a small one, in batch order; None when more than ``limit`` rows match."""
    from ddflow.runtime.local.rows import ColumnCache, lookup_few

    rng = np.random.default_rng(5)
    k = LocalKernels()
    parts: list[Any] = []
    for n in (9_000, 5_000, 40):
        f = pl.DataFrame(
            {
                "k": rng.integers(0, n // 3, n) * spread,
                "v": rng.integers(0, 9, n),
                "__t0": np.zeros(n, dtype=np.int64),
                "__diff": np.ones(n, dtype=np.int64),
            }
        )
        parts.append(as_rows(k.arrange(f, ["k"]), k.settings.small_batch_rows))
    lookups = k.settings.lookups
    assert [type(p) for p in parts] == [pl.DataFrame, pl.DataFrame, Rows]
    assert [ColumnCache.of(p).dense(lookups) is not None for p in parts[:2]] == [spread == 1] * 2
    names = list(parts[0].columns)
    for codes in (
        [0],
        [spread * 7, spread * 1_500, spread * 2_900],
        [-4, spread * 10**6],
        sorted({int(c) for c in rng.integers(0, 3_000, 12) * spread}),
    ):
        got = lookup_few(parts, np.array(codes, dtype=np.int64), 10_000, lookups)
        assert got is not None
        want = [
            r
            for p in parts
            for r in (p.rows if type(p) is Rows else p.rows())
            if r[names.index("__key")] in set(codes)
        ]
        assert got.rows == want
    heavy = np.array([int(parts[0]["__key"][0])], dtype=np.int64)
    assert lookup_few(parts, heavy, 0, lookups) is None


@settings(max_examples=150, deadline=None)
@given(data=st.data(), width=st.integers(1, 3))
def test_accumulation_by_key_equals_the_join(data: st.DataObject, width: int) -> None:
    """The reduce's NumPy accumulation of its output at one query per key against
    ``accumulate`` (a join, a filter and a group-by): keys queried or not, rows at, below,
    above and beside the query times, diffs cancelling; None where it does not apply (no
    history, nothing at or below the queries, a value column with nulls)."""
    from ddflow.differential.batch import QUERY_PREFIX as QPREFIX
    from ddflow.differential.batch import time_columns
    from ddflow.runtime.local.columnar import accumulate
    from ddflow.runtime.local.reduce import _accumulate_by_key

    tt = TimeType(("product",) * width)
    tcols, qcols = tt.columns(), time_columns(tt, QPREFIX)
    point = st.tuples(*[st.integers(0, 3)] * width)
    nulls = data.draw(st.booleans())
    rows = data.draw(
        st.lists(
            st.tuples(
                st.integers(0, 5),
                st.one_of(st.none(), st.integers(-2, 2))
                if nulls
                else st.integers(-(2**63), 2**63 - 1)
                if data.draw(st.booleans())
                else st.integers(-2, 2),
                point,
                st.sampled_from([1, -1, 2]),
            ),
            max_size=30,
        )
    )
    if rows and data.draw(st.booleans()):  # a row and its retraction: a group summing to 0
        k, v, t, d = rows[0]
        rows.append((k, v, t, -d))
    history = pl.DataFrame(
        [(k, k, v, *t, d) for k, v, t, d in rows],
        orient="row",
        schema={KEY: I64, "k": I64, "lo": I64, **{c: I64 for c in tcols}, DIFF: I64},
    )
    asked = data.draw(st.dictionaries(st.integers(0, 6), point, max_size=6))
    queries = pl.DataFrame(
        [(k, k, *t) for k, t in asked.items()],
        orient="row",
        schema={KEY: I64, "k": I64, **{c: I64 for c in qcols}},
    )
    run_search_rows = DEFAULT.index.run_search_rows
    got = _accumulate_by_key(history, queries, tt, [KEY, "k"], ["lo"], run_search_rows)
    want = accumulate(history, queries, tt, [KEY, "k"], ["lo"], DEFAULT.sums)
    has_nulls = history.get_column("lo").null_count() > 0
    if got is None:
        assert (
            has_nulls
            or history.height == 0
            or queries.height == 0
            or not any(
                k in asked and all(a <= b for a, b in zip(t, asked[k], strict=True))
                for k, _, t, _ in rows
            )
        )
        return
    assert not has_nulls
    assert list(got.columns) == list(want.columns)
    assert dict(got.schema) == dict(want.schema)
    assert bag(got) == bag(want)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(ints, st.integers(0, 3)), max_size=30),
    dropped=st.lists(ints, max_size=6),
    rows_in=st.booleans(),
)
def test_without_keys_is_the_anti_join_on_the_keys(rows, dropped, rows_in):
    """``without_keys`` (a reduce drops the keys its min/max skip let go): the rows whose
    ``(KEY, k)`` is not among the keys' rows; by the codes alone where they are the keys (an
    ``Int64`` key without nulls), else by a join on every key column (nulls included)."""
    data = pl.DataFrame(rows, schema={"k": I64, "v": I64}, orient="row")
    batch = K.arrange(data, ["k"])
    keys = K.arrange(pl.DataFrame({"k": dropped}, schema={"k": I64}), ["k"]).select([KEY, "k"])
    got = frame(K.without_keys(as_rows(batch, 10**9) if rows_in else batch, keys))
    gone = set(dropped)
    want = [r for r in batch.rows() if r[batch.columns.index("k")] not in gone]
    assert sorted(got.select(batch.columns).rows(), key=repr) == sorted(want, key=repr)
