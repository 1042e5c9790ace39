"""``accumulate`` (the reduce's input at queried times) against a sum in plain Python: for
every query, the history rows of its key at times ``<=`` the query's, summed per value, zero
sums dropped. Queries after the whole history take the path that sums the history once
(``all_before``); arbitrary queries take the pairwise one."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.differential.batch import DIFF, KEY, QUERY_PREFIX, time_columns
from ddflow.runtime.local.columnar import accumulate, all_before
from ddflow.runtime.local.settings import SumSettings
from ddflow.timely.lattice import TimeType

I64 = pl.Int64()
TIMES = {
    1: TimeType(("product",)),
    2: TimeType(("product", "product")),
    3: TimeType(("product", "product", "product")),
}


def python_accumulate(
    history: list[tuple], queries: list[tuple], tt: TimeType
) -> set[tuple[Any, ...]]:
    """Rows ``(key, *query time, value, diff, weight)`` by the definition."""
    out = set()
    for key, qt in queries:
        sums: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
        for k, v, t, d, w in history:
            if k == key and tt.less_equal(t, qt):
                sums[v][0] += d
                sums[v][1] += 0 if w is None else w
        out |= {(key, *qt, v, d, w) for v, (d, w) in sums.items() if d or w}
    return out


@st.composite
def cases(draw: st.DrawFn, after: bool) -> tuple[TimeType, list[tuple], list[tuple]]:
    width = draw(st.sampled_from(sorted(TIMES)))
    tt = TIMES[width]
    coord = st.integers(0, 3)
    history = draw(
        st.lists(
            st.tuples(
                st.integers(0, 2),
                st.one_of(st.none(), st.integers(-2, 2)),
                st.tuples(*[coord] * width),
                st.sampled_from([1, -1, 2]),
                st.one_of(st.none(), st.integers(-3, 3)),
            ),
            max_size=30,
        )
    )
    if after:  # every coordinate at or after the history's
        lead = [max([t[i] for _, _, t, _, _ in history], default=0) for i in range(width)]
        qtime = st.tuples(*[st.integers(x, x + 2) for x in lead])
    else:
        qtime = st.tuples(*[coord] * width)
    queries = draw(st.lists(st.tuples(st.integers(0, 2), qtime), max_size=8, unique=True))
    return tt, history, queries


def frames(
    tt: TimeType, history: list[tuple], queries: list[tuple]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    tcols, qcols = tt.columns(), time_columns(tt, QUERY_PREFIX)
    h = pl.DataFrame(
        [(k, v, *t, d, w) for k, v, t, d, w in history],
        orient="row",
        schema={KEY: I64, "v": I64, **{c: I64 for c in tcols}, DIFF: I64, "w": I64},
    )
    q = pl.DataFrame(
        [(k, *t) for k, t in queries], orient="row", schema={KEY: I64, **{c: I64 for c in qcols}}
    )
    return h, q


def check(tt: TimeType, history: list[tuple], queries: list[tuple]) -> None:
    h, q = frames(tt, history, queries)
    got = accumulate(h, q, tt, [KEY], ["v"], SumSettings(), ["w"])
    qcols = time_columns(tt, QUERY_PREFIX)
    rows = set(got.select([KEY, *qcols, "v", DIFF, "w"]).iter_rows())
    assert len(rows) == got.height, "a (key, time, value) appears twice"
    assert rows == python_accumulate(history, queries, tt)
    assert got.schema == pl.Schema(
        {KEY: I64, **{c: I64 for c in qcols}, "v": I64, DIFF: I64, "w": I64}
    )


@settings(max_examples=300, deadline=None)
@given(case=cases(after=True))
def test_queries_after_the_whole_history(case):
    tt, history, queries = case
    if history and queries:
        h, q = frames(tt, history, queries)
        tcols, qcols = tt.columns(), time_columns(tt, QUERY_PREFIX)
        assert all_before(h, q, tt, tcols, qcols)
    check(tt, history, queries)


@settings(max_examples=300, deadline=None)
@given(case=cases(after=False))
def test_arbitrary_queries(case):
    check(*case)
