"""Inputs, outputs and probes, and the errors bad input gets."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd


def flow_with_output():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "str", "v": "int64"})
    out = xs.output()
    return flow, xs, out


def test_insert_frame_accepts_pandas_polars_and_arrow():
    flow, xs, out = flow_with_output()
    xs.insert_frame(pd.DataFrame({"k": ["a"], "v": [1]}))
    xs.insert_frame(pl.DataFrame({"v": [2], "k": ["b"]}))  # column order does not matter
    xs.insert_frame(pa.table({"k": ["c"], "v": [3]}))
    flow.advance_to(1)
    flow.run()
    assert out.snapshot().to_dict("list") == {
        "k": ["a", "b", "c"],
        "v": [1, 2, 3],
        "count": [1, 1, 1],
    }


def test_insert_frame_with_a_diff_column():
    flow, xs, out = flow_with_output()
    xs.insert([("a", 1)])
    xs.insert_frame(pd.DataFrame({"k": ["a", "b"], "v": [1, 2], "d": [-1, 3]}), diff="d")
    flow.advance_to(1)
    flow.run()
    assert out.snapshot().to_dict("list") == {"k": ["b"], "v": [2], "count": [3]}


def test_a_bad_row_is_rejected_and_nothing_accepted_before_is_lost():
    flow, xs, out = flow_with_output()
    xs.insert([("a", 1)])
    with pytest.raises(
        dd.SchemaError,
        match=r"column 'v' \(int64\) at row 1: expected int64, "
        r"got str 'three'",
    ) as e:
        xs.insert([("b", 2), ("c", "three")])
    assert "test_inputs.py" in str(e.value)  # points at the user's line
    with pytest.raises(
        dd.SchemaError,
        match=r"column 'v' \(int64, not nullable\) at row 0: "
        r"got None",
    ):
        xs.insert([("b", None)])
    with pytest.raises(dd.SchemaError, match="missing column v"):
        xs.insert_frame(pd.DataFrame({"k": ["z"]}))
    flow.advance_to(1)
    flow.run()
    assert out.snapshot().to_dict("list") == {"k": ["a"], "v": [1], "count": [1]}


def test_advance_to_an_earlier_epoch_is_an_error():
    flow, xs, out = flow_with_output()
    flow.advance_to(3)
    with pytest.raises(dd.TimeError, match="goes back"):
        xs.advance_to(2)
    with pytest.raises(dd.TimeError, match="goes back"):
        flow.advance_to(1)
    xs.insert([("a", 1)])
    flow.advance_to(4)
    flow.run()
    assert out.snapshot(epoch=3).to_dict("list") == {"k": ["a"], "v": [1], "count": [1]}


def test_inserting_into_a_closed_input_is_an_error():
    flow, xs, out = flow_with_output()
    xs.insert([("a", 1)])
    xs.close()
    with pytest.raises(dd.ClosedInputError, match="insert on input 'xs', which is closed"):
        xs.insert([("b", 2)])
    with pytest.raises(dd.ClosedInputError, match="advance_to on input 'xs', which is closed"):
        xs.advance_to(5)
    flow.run()
    assert out.snapshot().to_dict("list") == {"k": ["a"], "v": [1], "count": [1]}


def test_unknown_column_in_an_expression_fails_at_build_time_at_the_users_line():
    _, xs, _ = flow_with_output()
    with pytest.raises(dd.ExpressionError) as e:
        xs.filter(dd.col("nope") > 1)
    assert "nope" in str(e.value) and "test_inputs.py" in str(e.value)


def test_snapshot_of_an_incomplete_epoch_is_an_error():
    flow, xs, out = flow_with_output()
    xs.insert([("a", 1)])
    flow.advance_to(1)
    flow.run()
    with pytest.raises(dd.TimeError, match="not complete"):
        out.snapshot(epoch=1)


def test_subscribe_and_probe_see_each_completed_epoch():
    flow, xs, out = flow_with_output()
    probe = xs.probe()
    seen = []
    out.subscribe(lambda df: seen.append(df[["k", "time", "diff"]].values.tolist()))
    xs.insert([("a", 1)])
    flow.advance_to(1)
    xs.remove([("a", 1)])
    flow.advance_to(2)
    assert not probe.done(0)
    flow.run()
    assert probe.done(1) and not probe.done(2)
    assert seen == [[["a", 0, 1]], [["a", 1, -1]]]


def test_the_graph_cannot_change_once_running():
    flow, xs, _ = flow_with_output()
    flow.run()
    with pytest.raises(dd.GraphError, match="already running"):
        xs.distinct()


def test_step_returns_false_once_the_work_is_done():
    flow, xs, out = flow_with_output()
    xs.insert([("a", 1)])
    flow.advance_to(1)
    steps = 0
    while flow.step():
        steps += 1
        assert steps < 1_000
    assert steps > 0  # there was work: the epoch's insert
    assert out.snapshot().to_dict("list") == {"k": ["a"], "v": [1], "count": [1]}
    assert not flow.step()


_ROWS = st.tuples(
    st.sampled_from(["a", "b", None]),
    st.integers(-2, 2),
    st.sampled_from([date(2024, 1, 1), date(2025, 6, 30)]),
)
_CALL = st.one_of(
    st.tuples(st.just("insert"), st.lists(_ROWS, max_size=4)),
    st.tuples(st.just("remove"), st.lists(_ROWS, max_size=4)),
    st.tuples(st.just("update"), st.lists(st.tuples(_ROWS, st.integers(-2, 3)), max_size=4)),
    st.tuples(st.just("frame_diff"), st.lists(st.tuples(_ROWS, st.integers(-2, 3)), max_size=4)),
    st.tuples(st.just("frame"), st.lists(_ROWS, max_size=4)),
    st.tuples(st.just("advance"), st.just([])),
)


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(_CALL, max_size=14), with_float=st.booleans())
def test_every_kind_of_input_call_lands_as_the_multiset_it_describes(calls, with_float):
    """Inserts, removes, updates and frames with a diff column, in any mix within an epoch,
    give the multiset they describe at every epoch: with small epochs held as rows (made
    directly from the calls' rows) and with every batch a frame; a float column (no row
    form) takes the frame path."""

    def run(small):
        flow = dd.Dataflow(dd.LocalRuntime(small_batch_rows=small))
        schema = {"k": "str?", "v": "int64", "d": "date"}
        if with_float:
            schema["x"] = "float64"
        xs = flow.input("xs", schema=schema, signed=True)
        out = xs.output()
        seen, want, counts = [], [], Counter()

        def full(r):
            return (*r, r[1] / 2) if with_float else r

        # (a final advance: every example checks at least one epoch, the last)
        for what, rows in [*calls, ("advance", [])]:
            if what == "advance":
                flow.advance_to(flow.epoch + 1)
                flow.run()
                seen.append(sorted(map(tuple, out.snapshot_polars().rows()), key=repr))
                want.append(sorted(((*r, c) for r, c in counts.items() if c), key=repr))
                continue
            if what in ("insert", "frame"):
                data = [full(r) for r in rows]
                diffs = [1] * len(rows)
            elif what == "remove":
                data, diffs = [full(r) for r in rows], [-1] * len(rows)
            else:
                data, diffs = [full(r) for r, _ in rows], [d for _, d in rows]
            if what == "insert":
                xs.insert(data)
            elif what == "remove":
                xs.remove(data)
            elif what == "update":
                xs.update([(*r, d) for r, d in zip(data, diffs, strict=True)])
            else:
                cols = list(schema)
                types = {"k": pl.String, "v": pl.Int64, "d": pl.Date, "x": pl.Float64}
                frame = pl.DataFrame(data, schema={c: types[c] for c in cols}, orient="row")
                if what == "frame":
                    xs.insert_frame(frame.select(cols[::-1]))  # (any column order)
                else:
                    xs.insert_frame(
                        frame.with_columns(pl.Series("n", diffs, dtype=pl.Int64)), diff="n"
                    )
            for r, d in zip(data, diffs, strict=True):
                counts[r] += d
        return seen, want

    seen, want = run(dd.LocalRuntime().kernels.small_rows)
    assert seen == want
    assert run(0)[0] == want
