"""Column expressions and row functions against the reference at every epoch, where the value
rules matter: nulls under ``~`` and in ``filter``, integer division by zero and wrap-around,
division by a constant, ``float32`` results, and ints returned for float columns.

The reference evaluates expressions and converts row-function results with its own
plain-Python rules (:mod:`ddflow.testing.values`), so a bug in the engine's shared expression
compiler or row conversion shows up here. (Outputs keep float columns non-null: a snapshot is
pandas, where a null float would read as NaN.)
"""

from __future__ import annotations

from harness import SETTINGS, changes_table, check_stream, streams_and_run_points
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd

XS = {"xs": {"k": "int64", "i": "int32?", "f": "float64?", "g": "float32?", "s": "str?"}}


def _pipelines(flow, i):
    xs = i["xs"]
    col = dd.col
    return [
        # a comparison with a null is null, and so is its negation: the row is dropped
        xs.select("k", neg=~(col("i") > 0), gone=(col("f") > 1).is_null()),
        xs.filter(~(col("i") > 0)).select("k"),
        # integer // and % by zero are null; int32 arithmetic wraps at 32 bits
        xs.select("k", q=col("i") // (col("k") - 2), r=col("i") % 0, w=col("i") * -2 + 1),
        # division by a constant is correctly rounded in every batch size
        xs.select("k", d=col("f").fill_null(0.0) / 3, e=col("g").fill_null(0.0) / 3),
        xs.select(
            "k", h=(col("g") * 3 - 1).fill_null(-1.0), m=col("f").fill_null(col("g")).fill_null(0.5)
        ),
        xs.with_columns(t=(col("s").str.len() * col("i")).fill_null(0)).select("k", "t"),
        # row functions: ints into float columns, float32 rounding
        xs.map(
            lambda r: (r[0], r[0] * 2**53 + 1, r[0] * 2**60 + 2**36 + 1),
            schema={"k": "int64", "a": "float64", "b": "float32"},
        ),
        xs.flat_map(
            lambda r: [(r[0], 0.1), (r[0], r[0])] if r[1] is None else [],
            schema={"k": "int64", "v": "float32"},
        ),
    ]


def test_expressions_with_nulls_stream_table(runtime):
    stream = [
        [("xs", (1, 5, 2.5, 0.1, "ab"), 1), ("xs", (2, None, None, None, None), 1)],
        [("xs", (3, -(2**31), 5.0, 7.0, "é"), 1), ("xs", (1, 5, 2.5, 0.1, "ab"), -1)],
        [("xs", (4, 0, -0.0, 16777217.0, ""), 1), ("xs", (2, None, None, None, None), -1)],
    ]
    run = check_stream(_pipelines, XS, stream, runtime)
    #                                     k   neg   gone  time diff
    assert changes_table(run.outputs[0]) == [
        (1, False, False, 0, 1),
        (1, False, False, 1, -1),
        (2, None, True, 0, 1),
        (2, None, True, 2, -1),
        (3, True, False, 1, 1),
        (4, True, False, 2, 1),
    ]
    #                                     k      q     r         w      time diff
    assert changes_table(run.outputs[2]) == [
        (1, -5, None, -9, 0, 1),
        (1, -5, None, -9, 1, -1),
        (2, None, None, None, 0, 1),
        (2, None, None, None, 2, -1),
        (3, -(2**31), None, 1, 1, 1),
        (4, 0, None, 1, 2, 1),
    ]
    assert changes_table(run.outputs[3])[0] == (1, 2.5 / 3, 0.10000000149011612 / 3, 0, 1)


records = st.tuples(
    st.integers(0, 5),
    st.none() | st.sampled_from([0, 1, -1, 7, 2**31 - 1, -(2**31)]),
    st.none() | st.sampled_from([0.0, -0.0, 2.5, 5.0, -7.0, 0.1, 1e300]),
    st.none() | st.sampled_from([0.0, 0.1, 7.0, 16777217.0, -2.5]),
    st.none() | st.sampled_from(["", "a", "é", "ab"]),
)


@SETTINGS
@given(case=streams_and_run_points({"xs": records}, max_updates=5))
def test_expressions_match_reference(runtime, case):
    stream, run_points = case
    check_stream(_pipelines, XS, stream, runtime, run_points)
