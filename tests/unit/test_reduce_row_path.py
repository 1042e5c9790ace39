"""The reduce's row-by-row path (small steps) against its columnar path: on arbitrary input
histories, output histories and queries, over product and lexicographic times, every group
function gives the same corrections, dtypes included."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from ddflow.kernels import local_reduce
from ddflow.kernels.local import DIFF, KEY, LocalKernels
from ddflow.kernels.local_rows import frame as as_frame
from ddflow.kernels.local_reduce import (
    interesting_times,
    reduce_evaluate,
    reduce_prepare,
    time_queries,
)
from ddflow.lattice import TimeType
from ddflow.operators.reduce import ReduceSpec

I64, STR = pl.Int64(), pl.String()
TIMES = [TimeType(("product", "product")), TimeType(("product", "lexicographic"))]


def lower_median(key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[Any, ...]]:
    values = [v for (v, _s), m in group for _ in range(m)]
    return [(values[(len(values) - 1) // 2], len(group))]


SPECS = {
    "agg": ReduceSpec.of("agg", ["k"], aggs=[("n", "count", None), ("s", "sum", "v"),
                                             ("lo", "min", "v"), ("hi", "max", "s"),
                                             ("m", "mean", "v")],
                         out_types={"n": I64, "s": I64, "lo": I64, "hi": STR,
                                    "m": pl.Float64()}),
    "agg_weights": ReduceSpec.of("agg", ["k"], aggs=[("n", "count", None), ("t", "sum", "v"),
                                                     ("m", "mean", "v")],
                                 out_types={"n": I64, "t": I64, "m": pl.Float64()}),
    "distinct": ReduceSpec.of("distinct", ["k", "v", "s"]),
    "threshold": ReduceSpec.of("threshold", ["k", "v", "s"], fn=lambda m: m % 3 - 1),
    "reduce": ReduceSpec.of("reduce", ["k"], fn=lower_median, values=["v", "s"],
                            outputs=["med", "rows"], out_types={"med": I64, "rows": I64}),
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
    rows = draw(st.lists(st.tuples(keys, values, strs, times(tt), st.sampled_from([1, 1, 2, -1])),
                         max_size=25))
    raw = pl.DataFrame([(a, v, s, *t, d) for a, v, s, t, d in rows], orient="row",
                       schema={"k": I64, "v": I64, "s": STR, **{c: I64 for c in tcols}, DIFF: I64})
    if kind == "agg":  # a non-null count column for min/max of a string
        raw = raw.with_columns(pl.col("s").fill_null("z"))
    history = k.arrange(reduce_prepare(spec, raw, tt), spec.keys)

    outs = list(spec.outputs)
    out_types = {n: spec.out_types[n] for n in outs}
    out_rows = draw(st.lists(st.tuples(keys, st.integers(-2, 2), times(tt),
                                       st.sampled_from([1, -1])), max_size=10))
    def out_value(n: str, x: int) -> Any:
        return {"String": str(x), "Float64": x / 2}.get(str(out_types[n]), x)

    out_history = pl.DataFrame(
        [(a, *(out_value(n, x) for n in outs), *t, d) for a, x, t, d in out_rows], orient="row",
        schema={"k": I64, **out_types, **{c: I64 for c in tcols}, DIFF: I64})
    if kind in ("distinct", "threshold"):  # their outputs are the key columns
        out_history = history.select([*spec.keys, *tcols, DIFF]).head(draw(st.integers(0, 5)))
    out_history = k.arrange(out_history, spec.keys)
    query_rows = draw(st.lists(st.tuples(st.integers(0, max(history.height - 1, 0)), times(tt)),
                               max_size=8))
    if history.height == 0:
        query_rows = []
    queries = pl.DataFrame(
        [(*history.row(i, named=True).values(),) for i, _ in query_rows],
        schema=history.schema, orient="row").select([KEY, *spec.keys])
    queries = queries.with_columns([pl.Series(c, [t[j] for _, t in query_rows], dtype=I64)
                                    for j, c in enumerate(tcols)]).unique()
    return kind, tt, queries, history, out_history


def consolidated(frame: pl.DataFrame) -> pl.DataFrame:
    cols = [c for c in frame.columns if c != DIFF]
    return (frame.group_by(cols).agg(pl.col(DIFF).sum()).filter(pl.col(DIFF) != 0)
            .sort(cols, nulls_last=False))


@settings(max_examples=300, deadline=None)
@given(case=cases())
def test_row_path_equals_columnar_path(case):
    kind, tt, queries, history, out_history = case
    spec = SPECS[kind]
    rows = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, small_rows=10**9))
    columnar = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, small_rows=-1))
    assert_frame_equal(consolidated(rows), consolidated(columnar), check_exact=True)
    # the columnar path in slices of keys, as for a large history
    limit, local_reduce.EVALUATE_SLICE_ROWS = local_reduce.EVALUATE_SLICE_ROWS, 3
    try:
        sliced = as_frame(reduce_evaluate(spec, queries, history, out_history, tt, small_rows=-1))
    finally:
        local_reduce.EVALUATE_SLICE_ROWS = limit
    assert_frame_equal(consolidated(sliced), consolidated(columnar), check_exact=True)


def test_float_columns_take_the_columnar_path():
    spec = ReduceSpec.of("agg", ["k"], aggs=[("t", "sum", "x")], out_types={"t": pl.Float64()})
    tt = TimeType(("product",))
    raw = pl.DataFrame({"k": [1, 1, 1], "x": [0.1, 0.2, 0.3], "__t0": [0, 0, 0], DIFF: [1, 1, 1]})
    history = LocalKernels().arrange(reduce_prepare(spec, raw, tt), spec.keys)
    queries = history.select([KEY, "k", "__t0"]).unique()
    empty = LocalKernels().arrange(
        pl.DataFrame(schema={"k": I64, "t": pl.Float64(), "__t0": I64, DIFF: I64}), ["k"])
    small = as_frame(reduce_evaluate(spec, queries, history, empty, tt, small_rows=10**9))
    columnar = as_frame(reduce_evaluate(spec, queries, history, empty, tt, small_rows=-1))
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
    rows = interesting_times(new, old, tt, spec.keys, small_rows=10**9)
    columnar = interesting_times(new, old, tt, spec.keys, small_rows=-1)
    assert as_sets(rows) == as_sets(columnar)
    for parts in (rows, columnar):
        for _, part in parts:
            assert as_frame(part).schema == new.select([KEY, *spec.keys]).schema
    pending = {t: [f] for t, f in columnar}
    if pending:
        q_rows = as_frame(time_queries(pending, tt, small_rows=10**9))
        q_columnar = as_frame(time_queries(pending, tt, small_rows=-1))
        assert q_rows.schema == q_columnar.schema
        assert sorted(q_rows.iter_rows(), key=repr) == sorted(q_columnar.iter_rows(), key=repr)
