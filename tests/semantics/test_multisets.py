"""Naiad's multiset operators, ``union`` (multiplicity ``max(a, b)``), ``intersect``
(``min(a, b)``) and ``cogroup`` (a function of both groups of a key), against definitions
computed from scratch at every epoch, and against the reference.

The from-scratch definitions here share nothing with the engine or the reference: the inputs'
multisets at each epoch (``Run.accumulated``), then ``max``/``min`` record by record, or the
user's function called on each key's two groups. Streams retract records never inserted, so
multiplicities go negative: the definitions hold for any integers.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from harness import (
    SETTINGS,
    changes_table,
    check_run,
    run_stream,
    short_strs,
    small_ints,
    streams_and_run_points,
)
from hypothesis import given
from hypothesis import strategies as st

import ddflow as dd

AB = {"a": {"x": "int64", "s": "str"}, "b": {"x": "int64", "s": "str"}}
ab_records = {n: st.tuples(st.integers(0, 3), short_strs) for n in "ab"}
LR = {"left": {"k": "int64", "v": "int64"}, "right": {"key": "int64", "w": "str"}}
lr_records = {
    "left": st.tuples(st.integers(0, 3), small_ints),
    "right": st.tuples(st.integers(0, 3), short_strs),
}


def _expected_pointwise(acc: dict[str, Counter], op: Any) -> Counter:
    a, b = acc["a"], acc["b"]
    out = {r: op(a.get(r, 0), b.get(r, 0)) for r in set(a) | set(b)}
    return Counter({r: m for r, m in out.items() if m != 0})


def _got(out: dd.Output, epoch: int) -> Counter:
    snap = out.snapshot(epoch=epoch)
    names = [c for c in snap.columns if c != "count"]
    return Counter(
        {tuple(row[:-1]): int(row[-1]) for row in snap[[*names, "count"]].itertuples(index=False)}
    )


def summary(key: Any, left: list[tuple[tuple[Any, ...], int]], right: list[Any]) -> list[Any]:
    """A function of both groups that sees each side's records and counts: the number of left
    records, the sum of their ``v * m``, the right's total count, and its largest ``w``."""
    total_right = sum(m for _, m in right)
    largest = max((w for (w,), _ in right), default="")
    return [(len(left), sum(v * m for (v,), m in left), total_right, largest)]


SUMMARY = {"records": "int64", "weighted": "int64", "right_count": "int64", "largest": "str"}


def _expected_cogroup(acc: dict[str, Counter]) -> Counter:
    """``summary`` called on every key's positive records of both sides, from scratch."""
    left: dict[int, list[Any]] = defaultdict(list)
    right: dict[int, list[Any]] = defaultdict(list)
    for (k, v), m in acc["left"].items():
        if m > 0:
            left[k].append(((v,), m))
    for (k, w), m in acc["right"].items():
        if m > 0:
            right[k].append(((w,), m))
    out: Counter = Counter()
    for k in set(left) | set(right):
        for row in summary(k, sorted(left[k]), sorted(right[k])):
            out[(k, *row)] += 1
    return out


# ---------------------------------------------------------------------- worked streams


def test_union_and_intersect_stream_table(runtime):
    stream = [
        [("a", (1, "p"), 1), ("a", (1, "p"), 1), ("b", (1, "p"), 1), ("b", (2, "q"), 1)],
        [("b", (1, "p"), 1), ("b", (1, "p"), 1)],  # b's copies overtake a's
        [("a", (1, "p"), -1), ("a", (2, "q"), 1)],
    ]

    def build(flow, i):
        return [i["a"].union(i["b"]), i["a"].intersect(i["b"])]

    run = run_stream(build, AB, stream, runtime, run_points=[0])
    check_run(run)
    union, intersect = run.outputs
    #                                x    s  time diff
    assert changes_table(union) == [
        (1, "p", 0, 2),
        (1, "p", 1, 1),
        (2, "q", 0, 1),
    ]
    assert changes_table(intersect) == [
        (1, "p", 0, 1),
        (1, "p", 1, 1),
        (1, "p", 2, -1),
        (2, "q", 2, 1),
    ]


def test_cogroup_stream_table(runtime):
    stream = [
        [("left", (1, 5), 1), ("right", (1, "z"), 1), ("right", (2, "a"), 1)],
        [("right", (1, "z"), -1)],  # key 1: left only
        [("left", (1, 5), -1)],  # key 1: empty on both sides, so no row
        [("left", (3, 2), 1), ("left", (3, 2), 1)],
    ]

    def build(flow, i):
        return i["left"].cogroup(i["right"], summary, SUMMARY, left_on="k", right_on="key")

    run = run_stream(build, LR, stream, runtime, run_points=[])
    check_run(run)
    #                                      k recs wtd rc largest time diff
    assert changes_table(run.outputs[0]) == [
        (1, 1, 5, 0, "", 1, 1),
        (1, 1, 5, 0, "", 2, -1),
        (1, 1, 5, 1, "z", 0, 1),
        (1, 1, 5, 1, "z", 1, -1),
        (2, 0, 0, 1, "a", 0, 1),
        (3, 1, 4, 0, "", 3, 1),
    ]


# ---------------------------------------------------------------------- properties


@SETTINGS
@given(case=streams_and_run_points(ab_records))
def test_union_and_intersect_are_max_and_min_at_every_epoch(runtime, case):
    stream, points = case

    def build(flow, i):
        return [i["a"].union(i["b"]), i["a"].intersect(i["b"])]

    run = run_stream(build, AB, stream, runtime, run_points=points)
    union, intersect = run.outputs
    for e in range(len(stream)):
        acc = run.accumulated(e)
        assert _got(union, e) == _expected_pointwise(acc, max), (e, stream)
        assert _got(intersect, e) == _expected_pointwise(acc, min), (e, stream)
    check_run(run)


@SETTINGS
@given(case=streams_and_run_points(lr_records))
def test_cogroup_calls_the_function_on_both_groups_at_every_epoch(runtime, case):
    stream, points = case

    def build(flow, i):
        return i["left"].cogroup(i["right"], summary, SUMMARY, left_on="k", right_on="key")

    run = run_stream(build, LR, stream, runtime, run_points=points)
    for e in range(len(stream)):
        assert _got(run.outputs[0], e) == _expected_cogroup(run.accumulated(e)), (e, stream)
    check_run(run)


def _reachable(edges: Counter, roots: Counter) -> set[int]:
    """The nodes reachable from the roots along edges present, from scratch."""
    succ: dict[int, set[int]] = defaultdict(set)
    for (s, d), m in edges.items():
        if m > 0:
            succ[s].add(d)
    seen = {n for (n,), m in roots.items() if m > 0}
    todo = list(seen)
    while todo:
        for d in succ[todo.pop()]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


@st.composite
def edge_toggles(draw: st.DrawFn) -> list[list[tuple[str, tuple[int, ...], int]]]:
    """Epochs that insert edges and roots, and remove some of those present (never below zero)."""
    live: Counter = Counter()
    stream = []
    for _ in range(draw(st.integers(1, 5))):
        epoch = []
        for _ in range(draw(st.integers(0, 5))):
            name = draw(st.sampled_from(["edges", "edges", "edges", "roots"]))
            record = (
                (draw(st.integers(0, 5)), draw(st.integers(0, 5)))
                if name == "edges"
                else (draw(st.integers(0, 5)),)
            )
            diff = -1 if live[(name, record)] > 0 and draw(st.booleans()) else 1
            live[(name, record)] += diff
            epoch.append((name, record, diff))
        stream.append(epoch)
    return stream


@SETTINGS
@given(stream=edge_toggles(), points=st.sets(st.integers(0, 4)))
def test_union_inside_a_loop_is_reachability(runtime, stream, points):
    """``reach = roots ∪ successors(reach)`` iterated to its fixed point is the set of nodes
    reachable from the roots: the union's max keeps it a set while edges come and go."""
    schemas = {"edges": {"src": "int64", "dst": "int64"}, "roots": {"n": "int64"}}

    def build(flow, i):
        roots, edges = i["roots"].distinct(), i["edges"]
        return roots.iterate(
            lambda x: roots.union(
                x.join(edges, left_on="n", right_on="src").select(n=dd.col("dst")).distinct()
            )
        )

    run = run_stream(build, schemas, stream, runtime, run_points=points)
    for e in range(len(stream)):
        acc = run.accumulated(e)
        want = Counter({(n,): 1 for n in _reachable(acc["edges"], acc["roots"])})
        assert _got(run.outputs[0], e) == want, (e, stream)
    check_run(run)


def test_union_of_different_schemas_is_refused():
    flow = dd.Dataflow()
    a = flow.input("a", schema={"x": "int64"})
    b = flow.input("b", schema={"y": "int64"})
    try:
        a.union(b)
    except dd.SchemaError as e:
        assert "union of different schemas" in str(e)
        assert e.site is not None and e.site.filename == __file__
    else:
        raise AssertionError("union of different schemas was accepted")


def test_a_cogroup_function_that_raises_is_named():
    flow = dd.Dataflow()
    left = flow.input("left", schema={"k": "int64"})
    right = flow.input("right", schema={"k": "int64"})

    def broken(key, left_group, right_group):
        raise ValueError("no")

    left.cogroup(right, broken, {"n": "int64"}, on="k").output()
    left.insert([1])
    flow.advance_to(1)
    try:
        flow.run()
    except dd.UserFunctionError as e:
        assert "broken" in str(e) and "ValueError: no" in str(e)
        assert e.site is not None and e.site.filename == __file__
    else:
        raise AssertionError("the failure was not reported")
