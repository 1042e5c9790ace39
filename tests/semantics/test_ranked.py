"""``dd.top_k`` and ``dd.arg_max`` in ``group_by(...).agg(...)``, against a definition computed
from scratch at every epoch, and against the reference.

The from-scratch definition here shares nothing with the engine or the reference: the input's
multiset at each epoch (``Run.accumulated``), a group's ``(value, by)`` pairs each repeated as
many times as its multiplicity when that is positive, sorted with Python's ``sorted`` on
``(-by, value)`` (integer ``by``), the first ``k`` values. Streams retract records never
inserted, so some multiplicities go negative: those records do not count.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pandas as pd
import pytest
from harness import (
    SETTINGS,
    changes_table,
    check_run,
    run_stream,
    streams_and_run_points,
)
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd

TAGS = {"tags": {"team": "int64", "tag": "str", "uses": "int64"}}
tag_records = {
    "tags": st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3))
}
NULLABLE = {"s": {"g": "int64", "v": "int64?", "w": "float64?"}}
nullable_records = {
    "s": st.tuples(
        st.integers(0, 1),
        st.one_of(st.none(), st.integers(-2, 2)),
        st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf")])),
    )
}


def _expected_top(acc: Counter, k: int) -> dict[int, tuple[list[str], str | None, int]]:
    """Per team with positive count: its top ``k`` tags by uses (ties by tag), the arg max,
    and the count."""
    pairs: dict[int, Counter] = defaultdict(Counter)
    count: Counter = Counter()
    for (team, tag, uses), m in acc.items():
        pairs[team][(tag, uses)] += m
        count[team] += m
    out = {}
    for team, total in count.items():
        if total <= 0:
            continue
        copies = [(-uses, tag) for (tag, uses), m in pairs[team].items() for _ in range(max(m, 0))]
        top = [tag for _, tag in sorted(copies)[:k]]
        out[team] = (top, top[0] if top else None, total)
    return out


def _snapshot(out: dd.Output, epoch: int) -> dict[Any, tuple[Any, ...]]:
    snap = out.snapshot(epoch=epoch)
    assert (snap["count"] == 1).all(), snap
    rows = snap.drop(columns="count").itertuples(index=False)
    return {
        r[0]: tuple(None if v is pd.NA else list(v) if isinstance(v, list) else v for v in r[1:])
        for r in rows
    }


# ---------------------------------------------------------------------- worked streams


def test_top_k_stream_table(runtime):
    stream = [
        [("tags", (1, "#x", 5), 1), ("tags", (1, "#y", 9), 1), ("tags", (1, "#z", 5), 1)],
        [("tags", (1, "#y", 9), -1)],  # the leader goes: the runner-up and the tie move up
        [("tags", (1, "#w", 5), 1), ("tags", (1, "#w", 5), 1)],  # twice: it counts twice
        [("tags", (1, "#x", 5), -1), ("tags", (1, "#z", 5), -1), ("tags", (1, "#w", 5), -2)],
    ]

    def build(flow, i):
        return (
            i["tags"]
            .group_by("team")
            .agg(top=dd.top_k("tag", 2, by="uses"), best=dd.arg_max("tag", by="uses"), n=dd.count())
        )

    run = run_stream(build, TAGS, stream, runtime, run_points=[0])
    check_run(run)
    #                                  team top              best   n  time diff
    assert changes_table(run.outputs[0]) == [
        (1, ("#w", "#w"), "#w", 4, 2, 1),
        (1, ("#w", "#w"), "#w", 4, 3, -1),
        (1, ("#x", "#z"), "#x", 2, 1, 1),
        (1, ("#x", "#z"), "#x", 2, 2, -1),
        (1, ("#y", "#x"), "#y", 3, 0, 1),
        (1, ("#y", "#x"), "#y", 3, 1, -1),
    ]


def test_top_k_of_the_values_themselves():
    """Without ``by``, the largest values first; fewer than ``k`` values give a shorter list."""
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"g": "str", "x": "int64"})
    out = xs.group_by("g").agg(top=dd.top_k("x", 3)).output()
    xs.insert([("a", 4), ("a", 1), ("a", 7), ("a", 2), ("b", 3)])
    flow.advance_to(1)
    flow.run()
    assert _snapshot(out, 0) == {"a": ([7, 4, 2],), "b": ([3],)}
    xs.remove([("a", 7), ("b", 3)])
    xs.insert([("b", 5)])
    flow.advance_to(2)
    flow.run()
    assert _snapshot(out, 1) == {"a": ([4, 2, 1],), "b": ([5],)}


def test_top_k_and_arg_max_skip_nulls_and_order_floats_totally(runtime):
    """Nulls in the value or in ``by`` are skipped (a group of only nulls: an empty list and a
    null arg max); NaN is the largest ``by``; ``-0.0`` ties with ``0.0``, broken by value."""
    stream = [
        [
            ("s", (0, 3, 0.0), 1),
            ("s", (0, 1, -0.0), 1),
            ("s", (0, 2, float("nan")), 1),
            ("s", (0, None, 9.0), 1),
            ("s", (0, 8, None), 1),
            ("s", (1, None, 1.0), 1),
        ],
        [("s", (0, 2, float("nan")), -1)],
    ]

    def build(flow, i):
        return i["s"].group_by("g").agg(top=dd.top_k("v", 3, by="w"), best=dd.arg_max("v", by="w"))

    run = run_stream(build, NULLABLE, stream, runtime, run_points=[])
    check_run(run)
    out = run.outputs[0]
    assert _snapshot(out, 0) == {0: ([2, 1, 3], 2), 1: ([], None)}
    assert _snapshot(out, 1) == {0: ([1, 3], 1), 1: ([], None)}


def test_top_k_inside_a_loop():
    """``arg_max`` (by the label itself) as the loop's aggregate: the largest label reachable
    backwards, to a fixed point, checked against the reference at every epoch."""
    stream = [
        [("e", (1, 2), 1), ("e", (2, 3), 1), ("e", (5, 1), 1)],
        [("e", (5, 1), -1), ("e", (3, 1), 1)],
        [("e", (4, 4), 1), ("e", (2, 3), -1)],
    ]
    schemas = {"e": {"src": "int64", "dst": "int64"}}

    def build(flow, i):
        e = i["e"]
        nodes = e.select(node=dd.col("src")).concat(e.select(node=dd.col("dst"))).distinct()

        def body(x):
            sent = x.join(e, left_on="node", right_on="src").select(
                node=dd.col("dst"), label=dd.col("label")
            )
            agg = dd.arg_max("label", by="label")
            return sent.concat(x).group_by("node").agg(label=agg)

        return nodes.with_columns(label=dd.col("node")).iterate(body)

    run = run_stream(build, schemas, stream, "local", run_points=[0])
    check_run(run)
    assert _snapshot(run.outputs[0], 0) == {1: (5,), 2: (5,), 3: (5,), 5: (5,)}
    assert _snapshot(run.outputs[0], 1) == {1: (3,), 2: (3,), 3: (3,)}
    assert _snapshot(run.outputs[0], 2) == {1: (3,), 2: (3,), 3: (3,), 4: (4,)}


# ---------------------------------------------------------------------- properties


@SETTINGS
@given(case=streams_and_run_points(tag_records))
def test_top_k_and_arg_max_at_every_epoch(runtime, case):
    stream, points = case

    def build(flow, i):
        return (
            i["tags"]
            .group_by("team")
            .agg(top=dd.top_k("tag", 2, by="uses"), best=dd.arg_max("tag", by="uses"), n=dd.count())
        )

    run = run_stream(build, TAGS, stream, runtime, run_points=points)
    for e in range(len(stream)):
        want = {
            team: (top, best, n)
            for team, (top, best, n) in _expected_top(run.accumulated(e)["tags"], 2).items()
        }
        assert _snapshot(run.outputs[0], e) == want, (e, stream)
    check_run(run)


@SETTINGS
@given(case=streams_and_run_points(nullable_records))
def test_top_k_with_nulls_and_floats_matches_the_reference(runtime, case):
    stream, points = case

    def build(flow, i):
        return i["s"].group_by("g").agg(top=dd.top_k("v", 2, by="w"), best=dd.arg_max("v", by="w"))

    check_run(run_stream(build, NULLABLE, stream, runtime, run_points=points))


@SETTINGS
@given(case=streams_and_run_points(nullable_records))
def test_arg_max_of_integers_matches_the_reference(runtime, case):
    """``arg_max`` over integer columns, which the native core evaluates where the runtime
    asks for it (``harness.LARGE_DATA_PATHS``): nulls skipped, ties by the least value."""
    stream, points = case

    def build(flow, i):
        s = i["s"].select("g", "v", h=dd.col("g") % 2)
        return [
            s.group_by("h").agg(best=dd.arg_max("v", by="g"), n=dd.count()),
            s.group_by("g").agg(best=dd.arg_max("v", by="v")),
        ]

    run = run_stream(build, NULLABLE, stream, runtime, run_points=points)
    check_run(run)


# ---------------------------------------------------------------------- errors


def test_top_k_refuses_bad_arguments():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"g": "str", "x": "int64"})
    with pytest.raises(dd.GraphError, match="top_k needs a positive integer k, got 0"):
        dd.top_k("x", 0)
    with pytest.raises(dd.GraphError, match="positive integer k, got True"):
        dd.top_k("x", True)
    with pytest.raises(dd.SchemaError, match="arg_max\\(by=\\): unknown column 'nope'"):
        xs.group_by("g").agg(best=dd.arg_max("x", by="nope"))
    tops = xs.group_by("g").agg(top=dd.top_k("x", 2))
    assert str(tops.schema["top"]) == "list[int64]"
    with pytest.raises(dd.SchemaError, match="'top' is a list\\[int64\\], and a list cannot be"):
        tops.group_by("top")
    with pytest.raises(dd.SchemaError, match="distinct: column 'top' is a list"):
        tops.distinct()
    with pytest.raises(dd.SchemaError, match="top_k\\('top'\\) of a list column"):
        tops.group_by("g").agg(t=dd.top_k("top", 1))
