"""Null keys: a null grouping key is a group of its own (``group_by``, ``distinct``), while a
null join key matches nothing, as in SQL (``join``, ``semijoin``; ``antijoin`` keeps the
row). Checked against the reference at every epoch."""

from __future__ import annotations

from harness import SETTINGS, changes_table, check_stream, small_ints, streams_and_run_points
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd

SCHEMAS = {"l": {"k": "int64?", "s": "str?", "v": "int64"}, "r": {"k": "int64?", "w": "int64"}}
null_or_small = st.one_of(st.none(), st.integers(0, 2))
records = {
    "l": st.tuples(null_or_small, st.sampled_from([None, "a", "b"]), small_ints),
    "r": st.tuples(null_or_small, small_ints),
}


def build(flow, i):
    left, right = i["l"], i["r"]
    return [
        left.group_by("k").agg(n=dd.count(), total=dd.sum("v"), lo=dd.min("v"), hi=dd.max("v")),
        left.group_by("k", "s").agg(n=dd.count()),
        left.select("s").distinct(),
        left.group_by("s").reduce(lambda s, group: [(len(group),)], schema={"rows": "int64"}),
        left.join(right, on="k"),
        left.semijoin(right, on="k"),
        left.antijoin(right, on="k"),
        left.join(right, on="k", how="left"),
        right.join(left, on="k", how="outer"),
        left.order_by("k", "s").limit(2),
    ]


def test_null_keys_stream_table(runtime):
    stream = [
        [
            ("l", (None, None, 1), 1),
            ("l", (None, "a", 2), 1),
            ("l", (1, None, 3), 1),
            ("r", (None, 7), 1),
            ("r", (1, 8), 1),
        ],
        [("l", (None, None, 1), -1), ("l", (2, "a", 5), 1)],
    ]
    run = check_stream(build, SCHEMAS, stream, runtime, run_points=[])
    #                                       k  n total lo hi time diff
    assert changes_table(run.outputs[0]) == [
        (None, 1, 2, 2, 2, 1, 1),
        (None, 2, 3, 1, 2, 0, 1),
        (None, 2, 3, 1, 2, 1, -1),
        (1, 1, 3, 3, 3, 0, 1),
        (2, 1, 5, 5, 5, 1, 1),
    ]
    # the null-keyed rows join nothing; (1, None, 3) meets (1, 8)
    assert changes_table(run.outputs[4]) == [(1, None, 3, 8, 0, 1)]
    # ... and appear unmatched in a left join: (None, None, 1) until it goes at epoch 1
    assert changes_table(run.outputs[7]) == [
        (None, None, 1, None, 0, 1),
        (None, None, 1, None, 1, -1),
        (None, "a", 2, None, 0, 1),
        (1, None, 3, 8, 0, 1),
        (2, "a", 5, None, 1, 1),
    ]
    # nulls last: first (1, None, 3), then, of k null, (None, "a", 2) before (None, None, 1);
    # at epoch 1, (2, "a", 5) comes before the null keys
    assert changes_table(run.outputs[9]) == [
        (None, "a", 2, 0, 1),
        (None, "a", 2, 1, -1),
        (1, None, 3, 0, 1),
        (2, "a", 5, 1, 1),
    ]


@SETTINGS
@given(case=streams_and_run_points(records, max_updates=8))
def test_null_keys_match_reference(runtime, case):
    stream, points = case
    check_stream(build, SCHEMAS, stream, runtime, run_points=points)
