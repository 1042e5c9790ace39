"""Outer joins (``join(..., how="left" | "outer")``) and the collection-wide sort and limit
(``order_by(...).limit(n)``): against the reference at every epoch, on every runtime, and
against pandas recomputing from the input at every epoch.

The pandas checks share nothing with the engine: the live records at each epoch, each repeated
as many times as its multiplicity, in a pandas frame; ``merge(how=...)`` for the joins (keys
drawn non-null there: pandas matches a null key with a null key, SQL and ddflow match it with
nothing, which the reference checks), ``sort_values(..., na_position="last")`` over the order
columns, then every column ascending, and ``head(n)`` for the limit (floats drawn without NaN
there: pandas sorts NaN as a null, ddflow as the largest float, which the reference checks).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd
from harness import SETTINGS, changes_table, check_stream, run_stream, streams_and_run_points
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd

#: (``w`` without nulls, NaN only in the worked stream: a pandas frame reads a null float as
#: NaN, and a record holding NaN equals no other, so the suite's comparisons leave them out)
ROWS = {"s": {"g": "int64?", "v": "int64?", "w": "float64", "t": "str"}}
row_records = {
    "s": st.tuples(
        st.one_of(st.none(), st.integers(0, 2)),
        st.one_of(st.none(), st.integers(-2, 2)),
        st.sampled_from([0.0, -0.0, 1.5, float("-inf"), float("inf")]),
        st.sampled_from(["a", "b", ""]),
    )
}


def _nan_named(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with NaN as the string "NaN" (NaN equals nothing), sorted."""

    def plain(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") else v  # (a NumPy scalar from pandas)
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return sorted((tuple(plain(v) for v in r) for r in rows), key=repr)


def test_order_by_limit_stream_table(runtime):
    a, b, c, d = (1, 5, 0.5, "a"), (2, None, -1.0, "b"), (0, 9, 2.0, "a"), (None, 10, math.nan, "c")
    stream = [
        [("s", a, 1), ("s", b, 1), ("s", c, 1)],
        [("s", b, -1), ("s", a, 1)],
        [("s", a, -1), ("s", d, 1)],
    ]

    def build(flow, i):
        s = i["s"]
        return [s.order_by("v").limit(2), s.order_by("w", descending=True).limit(1)]

    # (not against the reference, whose records hold NaN, which equals nothing)
    run = run_stream(build, ROWS, stream, runtime, run_points=[0])
    # by v (nulls last): {a, c}; then a's two copies; then a and c
    assert _nan_named(changes_table(run.outputs[0])) == _nan_named(
        [(*a, 0, 1), (*a, 1, 1), (*a, 2, -1), (*c, 0, 1), (*c, 1, -1), (*c, 2, 1)]
    )
    # by w descending: c (2.0), until d's NaN, the largest float
    assert _nan_named(changes_table(run.outputs[1])) == _nan_named(
        [(*c, 0, 1), (*c, 2, -1), (*d, 2, 1)]
    )


@SETTINGS
@given(case=streams_and_run_points(row_records, max_updates=8))
def test_order_by_limit_matches_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        s = i["s"]
        return [
            s.order_by("v").limit(1),
            s.order_by("v", "w", descending=[True, False]).limit(3),
            s.order_by("t", "w", descending=True).limit(2),
            s.select("g", "t").order_by("g").limit(2),
        ]

    check_stream(build, ROWS, stream, runtime, run_points)


# ---------------------------------------------------------------------- against pandas


@st.composite
def live_streams(
    draw: st.DrawFn, domains: dict[str, st.SearchStrategy[Any]]
) -> list[list[tuple[str, Any, int]]]:
    """Epochs of insertions and of removals of live records only (multiplicities stay
    non-negative, as pandas needs)."""
    live: Counter = Counter()
    epochs = []
    for _ in range(draw(st.integers(1, 5))):
        updates = []
        for _ in range(draw(st.integers(0, 7))):
            present = sorted((r for r, m in live.items() if m > 0), key=repr)
            if present and draw(st.booleans()):
                rec = draw(st.sampled_from(present))
                live[rec] -= 1
                updates.append((rec[0], rec[1], -1))
            else:
                name = draw(st.sampled_from(sorted(domains)))
                rec = (name, draw(domains[name]))
                live[rec] += 1
                updates.append((name, rec[1], 1))
        epochs.append(updates)
    return epochs


def _frame(acc: Counter, columns: dict[str, str]) -> pd.DataFrame:
    rows = [r for r, m in acc.items() for _ in range(m)]
    dtypes = {"int64": "Int64", "str": "string", "float64": "Float64"}
    return pd.DataFrame(rows, columns=list(columns)).astype(
        {c: dtypes[t.rstrip("?")] for c, t in columns.items()}
    )


def _counter(frame: pd.DataFrame) -> Counter:
    def plain(v: Any) -> Any:
        return None if v is pd.NA or v is None else v

    return Counter(tuple(plain(v) for v in row) for row in frame.itertuples(index=False))


def _run(schemas: dict[str, dict[str, str]], build: Any, stream: list[Any]) -> tuple[Any, Any]:
    flow = dd.Dataflow()
    inputs = {n: flow.input(n, schema=s) for n, s in schemas.items()}
    outputs = [c.output() for c in build(inputs)]
    live = {n: Counter() for n in schemas}
    for e, updates in enumerate(stream):
        for name, rec, d in updates:
            (inputs[name].insert if d > 0 else inputs[name].remove)([rec])
            live[name][rec] += d
        flow.advance_to(e + 1)
        flow.run()
        yield outputs, {n: +c for n, c in live.items()}, e


JOINED = {"l": {"k": "int64", "a": "str"}, "r": {"k": "int64", "b": "int64?"}}


@SETTINGS
@given(
    stream=live_streams(
        {
            "l": st.tuples(st.integers(0, 3), st.sampled_from(["x", "y"])),
            "r": st.tuples(st.integers(1, 4), st.one_of(st.none(), st.integers(0, 2))),
        }
    )
)
def test_outer_joins_match_pandas(stream):
    def build(i):
        left, right = i["l"], i["r"]
        return [left.join(right, on="k", how=how) for how in ("inner", "left", "outer")]

    for outputs, live, e in _run(JOINED, build, stream):
        lf, rf = _frame(live["l"], JOINED["l"]), _frame(live["r"], JOINED["r"])
        for out, how in zip(outputs, ("inner", "left", "outer"), strict=True):
            want = _counter(lf.merge(rf, on="k", how=how)[["k", "a", "b"]])
            snap = out.snapshot(epoch=e)
            got = _counter(snap.loc[snap.index.repeat(snap["count"])].drop(columns="count"))
            assert got == want, (how, e, stream)


LIMITED = {"s": {"g": "int64?", "v": "int64", "w": "float64", "t": "str"}}


@SETTINGS
@given(
    stream=live_streams(
        {
            "s": st.tuples(
                st.one_of(st.none(), st.integers(0, 2)),
                st.integers(-2, 2),
                st.sampled_from([0.0, 1.5, -3.0]),
                st.sampled_from(["a", "b", ""]),
            )
        }
    ),
    n=st.integers(1, 4),
    by=st.sampled_from([["v"], ["g", "w"], ["t", "v"], ["w"]]),
    descending=st.booleans(),
)
def test_order_by_limit_matches_pandas(stream, n, by, descending):
    columns = list(LIMITED["s"])
    others = [c for c in columns if c not in by]

    def build(i):
        return [i["s"].order_by(*by, descending=descending).limit(n)]

    for (out,), live, e in _run(LIMITED, build, stream):
        frame = _frame(live["s"], LIMITED["s"])
        ordered = frame.sort_values(
            [*by, *others],
            ascending=[not descending] * len(by) + [True] * len(others),
            na_position="last",
            kind="mergesort",
        )
        want = _counter(ordered.head(n))
        snap = out.snapshot(epoch=e)
        got = _counter(snap.loc[snap.index.repeat(snap["count"])].drop(columns="count"))
        assert got == want, (by, descending, n, e, stream)
