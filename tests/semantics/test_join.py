"""Joins (on=, left_on=/right_on=, multi-column keys, self-joins, joins of joins, shared
arrangements), semijoin and antijoin against the reference at every epoch."""

from __future__ import annotations

from collections import Counter

from harness import (
    SETTINGS,
    changes_table,
    check_stream,
    short_strs,
    small_ints,
    streams_and_run_points,
)
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd

LR = {"l": {"k": "int64", "a": "str"}, "r": {"k": "int64", "b": "int64"}}
keys = st.integers(0, 3)
lr_records = {"l": st.tuples(keys, short_strs), "r": st.tuples(keys, small_ints)}


# ---------------------------------------------------------------------- worked streams


def test_join_stream_table(runtime):
    stream = [
        [("l", (1, "a"), 1), ("r", (1, 10), 1), ("r", (2, 20), 1)],
        [("l", (2, "b"), 1), ("l", (1, "a"), 1)],
        [("r", (1, 10), -1), ("r", (1, 11), 1)],
        [("l", (2, "b"), -1), ("l", (3, "c"), -1), ("r", (3, 30), 1)],
    ]
    run = check_stream(
        lambda flow, i: i["l"].join(i["r"], on="k"), LR, stream, runtime, run_points=[1]
    )
    #                                        k   a    b  time diff
    assert changes_table(run.outputs[0]) == [
        (1, "a", 10, 0, 1),
        (1, "a", 10, 1, 1),
        (1, "a", 10, 2, -2),
        (1, "a", 11, 2, 2),
        (2, "b", 20, 1, 1),
        (2, "b", 20, 3, -1),
        (3, "c", 30, 3, -1),  # a record removed before it was inserted joins negatively
    ]


def test_semijoin_and_antijoin_stream_table(runtime):
    stream = [
        [("l", (1, "a"), 1), ("l", (2, "b"), 1), ("r", (1, 5), 1), ("r", (1, 6), 1)],
        [("r", (1, 5), -1)],
        [("r", (1, 6), -1), ("r", (2, 7), 1)],
    ]

    def build(flow, i):
        return [i["l"].semijoin(i["r"], on="k"), i["l"].antijoin(i["r"], on="k")]

    run = check_stream(build, LR, stream, runtime, run_points=[])
    semi, anti = run.outputs
    #                                  k   a  time diff
    assert changes_table(semi) == [(1, "a", 0, 1), (1, "a", 2, -1), (2, "b", 2, 1)]
    assert changes_table(anti) == [(1, "a", 2, 1), (2, "b", 0, 1), (2, "b", 2, -1)]


# ---------------------------------------------------------------------- properties


@SETTINGS
@given(case=streams_and_run_points(lr_records, max_updates=8))
def test_joins_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        left, r = i["l"], i["r"]
        return [
            left.join(r, on="k"),
            left.join(r, left_on="k", right_on="b"),
            r.join(left, left_on=["k"], right_on=["k"]),
        ]

    check_stream(build, LR, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(lr_records, max_updates=8))
def test_outer_joins_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        left, r = i["l"], i["r"]
        return [
            left.join(r, on="k", how="left"),
            left.join(r, on="k", how="outer"),
            r.join(left, left_on="b", right_on="k", how="outer"),
            left.join(left, on="k", how="outer"),  # (a self-join: every key matches)
        ]

    check_stream(build, LR, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(lr_records, max_updates=8))
def test_semijoin_antijoin_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        left, r = i["l"], i["r"]
        return [
            left.semijoin(r, on="k"),
            left.antijoin(r, on="k"),
            r.semijoin(left, left_on="b", right_on="k"),
            r.antijoin(r.filter(dd.col("b") > 2), on="k"),
        ]

    check_stream(build, LR, stream, runtime, run_points)


MULTI = {
    "p": {"k1": "int64", "k2": "str", "v": "int64"},
    "q": {"j1": "int64", "k2": "str", "w": "int64"},
}
multi_records = {
    "p": st.tuples(st.integers(0, 2), st.sampled_from(["a", "b"]), small_ints),
    "q": st.tuples(st.integers(0, 2), st.sampled_from(["a", "b"]), small_ints),
}


@SETTINGS
@given(case=streams_and_run_points(multi_records, max_updates=8))
def test_multi_column_keys_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        p, q = i["p"], i["q"]
        return [
            p.join(q, left_on=["k1", "k2"], right_on=["j1", "k2"]),
            q.join(p, left_on=["k2", "j1"], right_on=["k2", "k1"]),  # clashing column w/ suffix
            p.semijoin(q, left_on=["k1", "k2"], right_on=["j1", "k2"]),
            p.antijoin(q, left_on=["k2", "v"], right_on=["k2", "w"]),
            p.join(q, left_on=["k1", "k2"], right_on=["j1", "k2"], how="outer"),
        ]

    check_stream(build, MULTI, stream, runtime, run_points)


EDGES = {"e": {"src": "int64", "dst": "int64"}}
edge_records = {"e": st.tuples(st.integers(0, 4), st.integers(0, 4))}


@SETTINGS
@given(case=streams_and_run_points(edge_records, max_updates=8))
def test_self_join_and_join_of_join_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        e = i["e"]
        mid = e.select(a="src", m="dst")
        two = mid.join(e, left_on="m", right_on="src")  # paths a -> m -> dst
        three = two.join(e.select(x="src", y="dst"), left_on="dst", right_on="x")
        loops = e.join(e, left_on=["src", "dst"], right_on=["dst", "src"])
        return [two, three, loops, e.join(e, on="src")]

    check_stream(build, EDGES, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points({**lr_records, "s": st.tuples(keys, short_strs)}, max_updates=8))
def test_arrangement_shared_by_two_joins_matches_reference(runtime, case):
    stream, run_points = case
    schemas = {**LR, "s": {"k": "int64", "c": "str"}}

    def build(flow, i):
        shared = i["l"].arrange("k")
        return [
            shared.join(i["r"], on="k"),
            shared.join(i["s"], on="k"),
            i["r"].join(shared, on="k"),
            shared.join(shared, on="k"),
            shared.filter(dd.col("k") > 0),  # an arrangement is also a collection
        ]

    run = check_stream(build, schemas, stream, runtime, run_points)
    joins = [op for op in run.flow.worker.operators if op.name == "join"]
    uses = Counter(id(s) for op in joins for s in (op.left, op.right))
    # l is arranged once and that arrangement serves five join inputs
    assert sorted(uses.values()) == [1, 1, 1, 5]
