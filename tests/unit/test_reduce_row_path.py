"""The reduce's row-by-row path (small steps) against its columnar path: on arbitrary input
histories, output histories and queries, over product and lexicographic times, every group
function gives the same corrections, dtypes included."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from ddflow.differential.kernel import ReduceSpec
from ddflow.runtime.local import reduce as local_reduce
from ddflow.runtime.local import rows as local_rows
from ddflow.runtime.local.kernels import DIFF, KEY, LocalKernels
from ddflow.runtime.local.reduce import (
    evaluation,
    interesting_times,
    reduce_evaluate,
    reduce_prepare,
    time_queries,
)
from ddflow.runtime.local.rows import frame as as_frame
from ddflow.runtime.local.settings import (
    IndexSettings,
    LocalSettings,
    LookupSettings,
    ReduceSettings,
)
from ddflow.timely.lattice import TimeType

I64, STR = pl.Int64(), pl.String()
#: settings that take the reduce kernels' row path at any size, and their columnar path
ROW_PATH = LocalSettings(reduce=ReduceSettings(small_rows=10**9))
COLUMNAR_PATH = LocalSettings(small_batch_rows=0)
TIMES = [
    TimeType(("product",)),
    TimeType(("product", "product")),
    TimeType(("product", "product", "product")),
    TimeType(("product", "lexicographic")),
]


def lower_median(key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[Any, ...]]:
    values = [v for (v, _s), m in group for _ in range(m)]
    return [(values[(len(values) - 1) // 2], len(group))]


SPECS = {
    "agg": ReduceSpec.of(
        "agg",
        ["k"],
        aggs=[
            ("n", "count", None),
            ("s", "sum", "v"),
            ("lo", "min", "v"),
            ("hi", "max", "s"),
            ("m", "mean", "v"),
        ],
        out_types={"n": I64, "s": I64, "lo": I64, "hi": STR, "m": pl.Float64()},
    ),
    "agg_weights": ReduceSpec.of(
        "agg",
        ["k"],
        aggs=[("n", "count", None), ("t", "sum", "v"), ("m", "mean", "v")],
        out_types={"n": I64, "t": I64, "m": pl.Float64()},
    ),
    "distinct": ReduceSpec.of("distinct", ["k", "v", "s"]),
    "threshold": ReduceSpec.of("threshold", ["k", "v", "s"], fn=lambda m: m % 3 - 1),
    "reduce": ReduceSpec.of(
        "reduce",
        ["k"],
        fn=lower_median,
        values=["v", "s"],
        outputs=["med", "rows"],
        out_types={"med": I64, "rows": I64},
    ),
}

keys = st.one_of(st.none(), st.integers(0, 2))
values = st.one_of(st.none(), st.integers(-3, 3))
strs = st.one_of(st.none(), st.sampled_from(["a", "b", "ab"]))


def times(tt: TimeType) -> st.SearchStrategy[tuple[int, ...]]:
    return st.tuples(*[st.integers(0, 2)] * tt.width)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, TimeType, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    kind = draw(st.sampled_from(sorted(SPECS)))
    spec = SPECS[kind]
    tt = draw(st.sampled_from(TIMES))
    tcols = tt.columns()
    k = LocalKernels()
    rows = draw(
        st.lists(
            st.tuples(keys, values, strs, times(tt), st.sampled_from([1, 1, 2, -1])), max_size=25
        )
    )
    raw = pl.DataFrame(
        [(a, v, s, *t, d) for a, v, s, t, d in rows],
        orient="row",
        schema={"k": I64, "v": I64, "s": STR, **{c: I64 for c in tcols}, DIFF: I64},
    )
    if kind == "agg":  # a non-null count column for min/max of a string
        raw = raw.with_columns(pl.col("s").fill_null("z"))
    history = k.arrange(reduce_prepare(spec, raw, tt), spec.keys)

    outs = list(spec.outputs)
    out_types = {n: spec.out_types[n] for n in outs}
    out_rows = draw(
        st.lists(
            st.tuples(keys, st.integers(-2, 2), times(tt), st.sampled_from([1, -1])), max_size=10
        )
    )

    def out_value(n: str, x: int) -> Any:
        return {"String": str(x), "Float64": x / 2}.get(str(out_types[n]), x)

    out_history = pl.DataFrame(
        [(a, *(out_value(n, x) for n in outs), *t, d) for a, x, t, d in out_rows],
        orient="row",
        schema={"k": I64, **out_types, **{c: I64 for c in tcols}, DIFF: I64},
    )
    if kind in ("distinct", "threshold"):  # their outputs are the key columns
        out_history = history.select([*spec.keys, *tcols, DIFF]).head(draw(st.integers(0, 5)))
    out_history = k.arrange(out_history, spec.keys)
    query_rows = draw(
        st.lists(st.tuples(st.integers(0, max(history.height - 1, 0)), times(tt)), max_size=8)
    )
    if history.height == 0:
        query_rows = []
    queries = pl.DataFrame(
        [(*history.row(i, named=True).values(),) for i, _ in query_rows],
        schema=history.schema,
        orient="row",
    ).select([KEY, *spec.keys])
    queries = queries.with_columns(
        [pl.Series(c, [t[j] for _, t in query_rows], dtype=I64) for j, c in enumerate(tcols)]
    ).unique()
    return kind, tt, queries, history, out_history


def consolidated(frame: pl.DataFrame) -> pl.DataFrame:
    cols = [c for c in frame.columns if c != DIFF]
    return (
        frame.group_by(cols)
        .agg(pl.col(DIFF).sum())
        .filter(pl.col(DIFF) != 0)
        .sort(cols, nulls_last=False)
    )


@settings(max_examples=300, deadline=None)
@given(case=cases())
def test_row_path_equals_columnar_path(case):
    kind, tt, queries, history, out_history = case
    spec = SPECS[kind]
    rows = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, ROW_PATH))
    columnar = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, COLUMNAR_PATH))
    assert_frame_equal(consolidated(rows), consolidated(columnar), check_exact=True)
    # one query per key (each key's group read at one time, as a small update's steps ask)
    once = queries.unique(subset=[KEY, *spec.keys], keep="first", maintain_order=True)
    once_rows = reduce_evaluate(spec, once, history, out_history, tt, ROW_PATH)
    once_columnar = reduce_evaluate(spec, once, history, out_history, tt, COLUMNAR_PATH)
    assert_frame_equal(
        consolidated(as_frame(once_rows)), consolidated(as_frame(once_columnar)), check_exact=True
    )
    # the columnar path in slices of keys, as for a large history
    in_slices = replace(COLUMNAR_PATH, reduce=ReduceSettings(evaluate_slice_rows=3))
    sliced = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, in_slices))
    assert_frame_equal(consolidated(sliced), consolidated(columnar), check_exact=True)


@pytest.mark.parametrize("kind", ["threshold", "reduce", "distinct"])
def test_a_value_that_cancels_by_the_query_time_is_not_in_the_group(kind):
    """A value inserted and retracted by the query time (multiplicity 0 there) is out of the
    group in both paths, one query per key or two: a threshold would count it as ``fn(0)``
    (a custom reduce's and a distinct's group functions leave such values out themselves;
    a threshold's and a distinct's keys are whole records, each its own group)."""
    spec, tt, k = SPECS[kind], TimeType(("product",)), LocalKernels()
    raw = pl.DataFrame(
        [(1, 5, "a", 0, 1), (1, 5, "a", 1, -1), (1, 7, "b", 0, 1)],
        orient="row",
        schema={"k": I64, "v": I64, "s": STR, "__t0": I64, DIFF: I64},
    )
    history = k.arrange(reduce_prepare(spec, raw, tt), spec.keys)
    out_history = history.select([*spec.keys, "__t0", DIFF]).clear()
    if kind == "reduce":
        out_history = pl.DataFrame(
            schema={"k": I64, "med": I64, "rows": I64, "__t0": I64, DIFF: I64}
        )
    out_history = k.arrange(out_history, spec.keys)
    for at in ([1], [0, 1]):
        queries = pl.concat(
            [
                history.select([KEY, *spec.keys])
                .unique(maintain_order=True)
                .with_columns(pl.lit(t, dtype=I64).alias("__t0"))
                for t in at
            ]
        )
        for paths in (ROW_PATH, COLUMNAR_PATH):
            got = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, paths))
            at_1 = consolidated(got.filter(pl.col("__t0") == 1).drop("__t0"))
            if kind == "reduce":  # one value left: the median 7 of one distinct row
                want = [(1, 7, 1, 1)] if at == [1] else [(1, 7, 1, 1), (1, 5, 2, -1)]
                assert sorted(at_1.select(["k", "med", "rows", DIFF]).rows()) == sorted(want)
            else:  # the record (1, 5, a) is gone at time 1: no row for it there (fn(0)
                # would give one), but the retraction of a distinct's earlier row
                rows = [
                    r for r in at_1.select(["k", "v", "s", DIFF]).rows() if r[:3] == (1, 5, "a")
                ]
                want = [(1, 5, "a", -1)] if kind == "distinct" and at == [0, 1] else []
                assert rows == want, (at, paths)


def test_float_columns_take_the_columnar_path():
    spec = ReduceSpec.of("agg", ["k"], aggs=[("t", "sum", "x")], out_types={"t": pl.Float64()})
    tt = TimeType(("product",))
    raw = pl.DataFrame({"k": [1, 1, 1], "x": [0.1, 0.2, 0.3], "__t0": [0, 0, 0], DIFF: [1, 1, 1]})
    history = LocalKernels().arrange(reduce_prepare(spec, raw, tt), spec.keys)
    queries = history.select([KEY, "k", "__t0"]).unique()
    empty = LocalKernels().arrange(
        pl.DataFrame(schema={"k": I64, "t": pl.Float64(), "__t0": I64, DIFF: I64}), ["k"]
    )
    small = as_frame(reduce_evaluate(spec, queries, history, empty, tt, ROW_PATH))
    columnar = as_frame(reduce_evaluate(spec, queries, history, empty, tt, COLUMNAR_PATH))
    # Polars' grouped sum, not Python's left-to-right one (which differs here)
    assert small.get_column("t").to_list() == columnar.get_column("t").to_list()
    assert columnar.get_column("t").to_list() != [0.1 + 0.2 + 0.3]


def as_sets(parts: list[tuple[tuple[int, ...], pl.DataFrame]]) -> dict[tuple[int, ...], set]:
    out: dict[tuple[int, ...], set] = {}
    for t, part in parts:
        out.setdefault(t, set()).update(as_frame(part).iter_rows())
    return out


@settings(max_examples=300, deadline=None)
@given(case=cases(), cut=st.integers(0, 10))
def test_interesting_times_and_queries_rows_equal_columnar(case, cut):
    """The closure of new times under lubs with a key's history, and the pending-query frame,
    are the same sets either way (the history's first ``cut`` rows play the new updates)."""
    kind, tt, _, history, _ = case
    spec = SPECS[kind]
    new, old = history.head(cut), history.slice(cut)
    rows = interesting_times(new, old, tt, spec.keys, ROW_PATH)
    columnar = interesting_times(new, old, tt, spec.keys, COLUMNAR_PATH)
    assert as_sets(rows) == as_sets(columnar)
    for parts in (rows, columnar):
        for _, part in parts:
            assert as_frame(part).schema == new.select([KEY, *spec.keys]).schema
    pending = {t: [f] for t, f in columnar}
    if pending:
        q_rows = as_frame(time_queries(pending, tt, ROW_PATH))
        q_columnar = as_frame(time_queries(pending, tt, COLUMNAR_PATH))
        assert q_rows.schema == q_columnar.schema
        assert sorted(q_rows.iter_rows(), key=repr) == sorted(q_columnar.iter_rows(), key=repr)
        # a time pending in two frames (two steps' keys) holds each key once
        twice = as_frame(time_queries({t: [f, f] for t, f in columnar}, tt, COLUMNAR_PATH))
        assert sorted(twice.iter_rows(), key=repr) == sorted(q_columnar.iter_rows(), key=repr)


BOUNDED_SPECS = [
    ReduceSpec.of("agg", ["k"], aggs=[("lo", "min", "v")], out_types={"lo": I64}),
    ReduceSpec.of("agg", ["k"], aggs=[("hi", "max", "v")], out_types={"hi": I64}),
]


@st.composite
def bounded_cases(draw: st.DrawFn) -> tuple[ReduceSpec, TimeType, Any, Any, Any]:
    """One query per key, histories of integer values with retractions, and output histories
    that often hold one row of multiplicity 1 per key (the bound), sometimes not."""
    spec = draw(st.sampled_from(BOUNDED_SPECS))
    tt = draw(st.sampled_from([TimeType(("product",)), TimeType(("product", "product"))]))
    tcols = tt.columns()
    k = LocalKernels()
    rows = draw(
        st.lists(
            st.tuples(
                st.integers(0, 4), st.integers(-3, 3), times(tt), st.sampled_from([1, 1, 2, -1])
            ),
            min_size=1,
            max_size=40,
        )
    )
    raw = pl.DataFrame(
        [(a, v, *t, d) for a, v, t, d in rows],
        orient="row",
        schema={"k": I64, "v": I64, **{c: I64 for c in tcols}, DIFF: I64},
    )
    history = k.arrange(reduce_prepare(spec, raw, tt), spec.keys)
    (name,) = spec.outputs
    out_rows = draw(
        st.lists(
            st.tuples(
                st.integers(0, 4), st.integers(-3, 3), times(tt), st.sampled_from([1, 1, 1, -1])
            ),
            max_size=10,
        )
    )
    out_history = k.arrange(
        pl.DataFrame(
            [(a, x, *t, d) for a, x, t, d in out_rows],
            orient="row",
            schema={"k": I64, name: I64, **{c: I64 for c in tcols}, DIFF: I64},
        ),
        spec.keys,
    )
    qkeys = draw(st.lists(st.integers(0, 5), unique=True, min_size=1, max_size=6))
    qtimes = [draw(times(tt)) for _ in qkeys]
    queries = pl.DataFrame(
        [(a, a, *t) for a, t in zip(qkeys, qtimes, strict=True)],
        orient="row",
        schema={KEY: I64, "k": I64, **{c: I64 for c in tcols}},
    )
    return spec, tt, queries, history, out_history


def evaluate_with(
    bounded: Any, spec: ReduceSpec, tt: TimeType, queries: Any, history: Any, out_history: Any
) -> pl.DataFrame:
    """The columnar evaluation with ``_extreme_by_bound`` replaced by ``bounded``, tried on
    histories of any size and taken whatever share of them is below the bounds."""
    always = replace(COLUMNAR_PATH, reduce=ReduceSettings(bounded_rows=0, bounded_share=1.0))
    saved = evaluation._extreme_by_bound
    evaluation._extreme_by_bound = bounded
    try:
        return consolidated(
            as_frame(reduce_evaluate(spec, queries, history, out_history, tt, always))
        )
    finally:
        evaluation._extreme_by_bound = saved


@settings(max_examples=400, deadline=None)
@given(case=bounded_cases())
def test_bounded_min_max_equals_the_general_path(case):
    """The evaluation of a min (max) that sums a key's values only up to (down to) its
    current output, counting the rest, against the general path that sums every value."""
    spec, tt, queries, history, out_history = case
    general = evaluate_with(lambda *a: None, spec, tt, queries, history, out_history)
    real = evaluation._extreme_by_bound
    taken: list[bool] = []

    def spy(*args: Any) -> Any:
        result = real(*args)
        taken.append(result is not None)
        return result

    bounded = evaluate_with(spy, spec, tt, queries, history, out_history)
    assert taken == [True]  # the bounded path ran
    assert_frame_equal(bounded, general, check_exact=True)


@settings(max_examples=400, deadline=None)
@given(
    case=bounded_cases(),
    cuts=st.lists(st.integers(0, 40), max_size=3),
    by_value=st.lists(st.booleans(), min_size=4, max_size=4),
    heavy=st.integers(1, 3),
    summary_rows=st.sampled_from([1, 5, 1 << 20]),
)
def test_indexed_history_equals_the_updates_it_indexes(case, cuts, by_value, heavy, summary_rows):
    """The history of the queried keys read through batch indexes (:mod:`local_index`: times
    and counts from per-(key, time) summaries of the heavy keys, values up to a bound from the
    front of a key's rows where the batch is sorted by value) against the same updates read
    whole: the evaluation (bounded path, then the general path on every update) and the
    interesting times."""
    from ddflow.runtime.local import index as local_index

    spec, tt, queries, history, out_history = case
    # indexes of any batch, for keys of ``heavy`` updates, summed in ranges of keys
    k = LocalKernels(
        LocalSettings(
            index=IndexSettings(indexed_rows=1, heavy_rows=heavy, summary_rows=summary_rows),
            lookups=LookupSettings(scan_rows_per_key=0),
        )
    )
    row_path = replace(k.settings, reduce=ReduceSettings(small_rows=10**9))
    columnar = replace(k.settings, small_batch_rows=0)
    in_slices = replace(columnar, reduce=ReduceSettings(evaluate_slice_rows=3))
    tcols = tt.columns()
    (value,) = spec.values
    # the history cut into arranged batches; some sorted by value within each key
    bounds = sorted({min(c, history.height) for c in cuts} | {0, history.height})
    parts = []
    for i, (lo, hi) in enumerate(pairwise(bounds)):
        part = history.slice(lo, hi - lo).sort(KEY)
        if by_value[i % 4]:
            part = part.sort([KEY, value, *tcols])
        parts.append(part)
    codes = np.unique(queries.get_column(KEY).to_numpy())
    indexed = k.indexed_history(parts, codes, spec.keys, tt)
    if indexed is None:  # no queried key has `heavy` updates in a batch: nothing to index
        assert not any(
            p.filter(pl.col(KEY).is_in(codes.tolist()))
            .group_by(KEY)
            .len()
            .filter(pl.col("len") >= heavy)
            .height
            for p in parts
        )
        return
    whole = pl.concat(parts)

    def evaluate(h: Any, paths: LocalSettings = columnar) -> pl.DataFrame:
        return consolidated(as_frame(reduce_evaluate(spec, queries, h, out_history, tt, paths)))

    real = evaluation._extreme_by_bound
    taken: list[bool] = []

    def spy(*args: Any) -> Any:
        result = real(*args)
        taken.append(isinstance(args[2], local_index.IndexedHistory) and result is not None)
        return result

    evaluation._extreme_by_bound = spy
    try:
        through_index = evaluate(indexed)
        assert taken == [True]  # the bounded path read the indexes
        # a history too large for one evaluation is cut by key range into histories
        # read through the same indexes (not gathered whole)
        taken.clear()
        sliced = evaluate(indexed, in_slices)
    finally:
        evaluation._extreme_by_bound = real
    assert taken and all(taken)
    whole_result = evaluate(whole)
    assert_frame_equal(through_index, whole_result, check_exact=True)
    assert_frame_equal(sliced, whole_result, check_exact=True)
    # the row path reads the heavy keys' rows straight into tuples: the same updates,
    # and the same evaluation
    tuples = indexed.row_tuples()
    assert isinstance(tuples, local_rows.Rows)
    assert tuples.names == tuple(whole.columns)
    asked = whole.filter(pl.col(KEY).is_in(codes.tolist()))
    assert sorted(tuples.rows) == sorted(asked.rows())
    by_rows = evaluate(indexed, row_path)
    assert_frame_equal(by_rows, whole_result, check_exact=True)
    new = queries.select([KEY, "k", *tcols])
    assert as_sets(
        local_reduce.interesting_times(new, indexed, tt, spec.keys, columnar)
    ) == as_sets(local_reduce.interesting_times(new, whole, tt, spec.keys, columnar))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 8), st.one_of(st.none(), st.integers(-5, 5)), st.sampled_from([-1, 1, 2])
        ),
        max_size=30,
    ),
    extra=st.lists(st.integers(0, 12), max_size=5),
    sign=st.sampled_from([1, -1]),
    shuffle=st.randoms(),
)
def test_bounds_of_a_bounded_min_max_are_the_single_output_rows(rows, extra, sign, shuffle):
    """The bound of each query of the bounded min/max evaluation (``_single_rows``): set
    exactly for the keys whose accumulated output is one row of multiplicity 1 with a value,
    to that value times ``sign``, whatever the order of the output's rows."""
    shuffle.shuffle(rows)
    current = pl.DataFrame(rows, schema={KEY: I64, "m": I64, DIFF: I64}, orient="row")
    qk = np.unique(np.array([k for k, _, _ in rows] + extra, dtype=np.int64))
    bounded, bound = local_reduce._single_rows(current, qk, "m", sign)
    by_key: dict[int, list[tuple[Any, int]]] = {}
    for k, v, d in rows:
        by_key.setdefault(k, []).append((v, d))
    for i, k in enumerate(qk.tolist()):
        got = by_key.get(k, [])
        single = len(got) == 1 and got[0][1] == 1 and got[0][0] is not None
        assert bool(bounded[i]) == single
        if single:
            assert int(bound[i]) == got[0][0] * sign
