"""Linear operators (select, with_columns, filter, map, flat_map, concat, negate, consolidate)
against the reference, at every epoch, with retractions and negative multiplicities."""

from __future__ import annotations

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

XS = {"xs": {"x": "int64", "s": "str"}}
TWO = {"xs": {"x": "int64", "s": "str"}, "ys": {"x": "int64", "s": "str"}}
xs_records = st.tuples(small_ints, short_strs)


# ---------------------------------------------------------------------- worked streams


def test_filter_select_stream_table(runtime):
    stream = [
        [("xs", (1, "a"), 1), ("xs", (2, "b"), 1), ("xs", (3, "a"), 1)],
        [("xs", (2, "b"), -1), ("xs", (3, "a"), 1)],
        [("xs", (5, "c"), -1)],  # never inserted: multiplicity -1
        [("xs", (5, "c"), 1), ("xs", (1, "a"), -1)],
    ]

    def build(flow, i):
        return i["xs"].filter(dd.col("x") > 1).select("x", y=dd.col("x") * 10)

    run = check_stream(build, XS, stream, runtime, run_points=[])
    #       x   y  time diff
    assert changes_table(run.outputs[0]) == [
        (2, 20, 0, 1),
        (2, 20, 1, -1),
        (3, 30, 0, 1),
        (3, 30, 1, 1),
        (5, 50, 2, -1),
        (5, 50, 3, 1),
    ]
    assert run.outputs[0].snapshot(epoch=3).to_dict("list") == {"x": [3], "y": [30], "count": [2]}


def test_concat_with_negation_cancels(runtime):
    stream = [[("xs", (1, "a"), 1), ("xs", (2, "a"), 1)], [("xs", (2, "a"), -1)]]

    def build(flow, i):
        xs = i["xs"]
        return [xs.concat(xs.negate()), xs.concat(xs), xs.negate().consolidate()]

    run = check_stream(build, XS, stream, runtime)
    assert changes_table(run.outputs[0]) == []
    #                                         x   s  time diff
    assert changes_table(run.outputs[1]) == [(1, "a", 0, 2), (2, "a", 0, 2), (2, "a", 1, -2)]
    assert changes_table(run.outputs[2]) == [(1, "a", 0, -1), (2, "a", 0, -1), (2, "a", 1, 1)]


def test_updates_cancelling_within_an_epoch_leave_no_change(runtime):
    stream = [[("xs", (1, "a"), 1), ("xs", (1, "a"), -1), ("xs", (4, "b"), 1)], []]
    run = check_stream(lambda flow, i: i["xs"].consolidate(), XS, stream, runtime)
    assert changes_table(run.outputs[0]) == [(4, "b", 0, 1)]


def test_map_to_colliding_records_adds_multiplicities(runtime):
    stream = [
        [("xs", (1, "a"), 1), ("xs", (3, "b"), 1)],
        [("xs", (5, "a"), 1), ("xs", (1, "a"), -1)],
    ]

    def build(flow, i):
        return i["xs"].map(lambda r: r[0] % 2, schema={"odd": "int64"})

    run = check_stream(build, XS, stream, runtime)
    #                                       odd time diff
    assert changes_table(run.outputs[0]) == [(1, 0, 2)]


# ---------------------------------------------------------------------- properties


def _linear_pipelines(flow, i):
    xs, ys = i["xs"], i["ys"]
    return [
        xs.select("s", z=dd.col("x") * 2 - 3),
        xs.with_columns(x=dd.col("x") % 3, t=dd.col("s").str.len()),
        xs.filter((dd.col("x") >= 2) & (dd.col("s") != "a")),
        xs.map(lambda r: (r[0] // 2, r[1] + "!"), schema={"h": "int64", "s": "str"}),
        xs.flat_map(lambda r: [(r[0] + k,) for k in range(r[0] % 3)], schema={"x": "int64"}),
        xs.concat(ys, xs.negate()),
        xs.concat(ys.negate()).consolidate().filter(dd.col("x") < 4),
        ys.negate().negate().select("x"),
        xs.flat_map(lambda r: [r, r] if r[1] else [], schema=None).concat(xs.negate()),
    ]


@SETTINGS
@given(case=streams_and_run_points({"xs": xs_records, "ys": xs_records}))
def test_linear_operators_match_reference(runtime, case):
    stream, run_points = case
    check_stream(_linear_pipelines, TWO, stream, runtime, run_points)


@SETTINGS
@given(
    case=streams_and_run_points(
        {"xs": st.tuples(small_ints, st.sampled_from([-1.5, 0.1, 2.0]))}, max_updates=4
    )
)
def test_float_expressions_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        v = i["xs"]
        return [
            v.with_columns(w=dd.col("w") * 2 + dd.col("k")),
            v.filter(dd.col("w") > 0).select("w"),
        ]

    check_stream(build, {"xs": {"k": "int64", "w": "float64"}}, stream, runtime, run_points)


def test_select_of_only_literals_keeps_every_record(runtime):
    """The reference interpreter once collapsed ``select(one=lit(1))`` to a single row (a Polars
    select of literals only has height one), so counts over it were wrong."""
    stream = [
        [("xs", (1, "a"), 1), ("xs", (2, "b"), 1), ("xs", (3, "c"), 1)],
        [("xs", (2, "b"), -1)],
    ]

    def build(flow, i):
        ones = i["xs"].select(one=dd.lit(1))
        return [ones, ones.group_by("one").agg(n=dd.count())]

    run = check_stream(build, XS, stream, runtime)
    ones, counts = run.outputs
    #                          one time diff
    assert changes_table(ones) == [(1, 0, 3), (1, 1, -1)]
    #                            one n time diff
    assert changes_table(counts) == [(1, 2, 1, 1), (1, 3, 0, 1), (1, 3, 1, -1)]


# ---------------------------------------------------------------------- fused chains


def _chains(flow, i):
    """Stateless chains whose last node has one consumer, itself stateless (a concat, a loop's
    enter, variable and leave) or an arrangement, and concats read by an arrangement alone:
    built as no operators of their own (see ``ddflow.plan.build``)."""
    xs, ys = i["xs"], i["ys"]
    chain = xs.filter(dd.col("x") >= 1).select(x=dd.col("x") * 2, s=dd.col("s")).negate().negate()
    mixed = chain.concat(ys.filter(dd.col("x") < 4).select("x", "s"), xs.negate())

    def body(v: dd.Collection) -> dd.Collection:
        step = v.select(x=dd.col("x") + 1, s=dd.col("s")).filter(dd.col("x") < 6)
        return step.concat(v.filter(dd.col("x") < 6)).distinct()

    looped = ys.with_columns(x=dd.col("x") % 3).filter(dd.col("s") != "ab").iterate(body)
    shared = ys.select(x=dd.col("x") + 1, s=dd.col("s"))  # (read twice: an operator)
    # a join's inputs: a concat of chains, and a chain (each arranged as it arrives)
    joined = (
        xs.filter(dd.col("x") >= 1)
        .select("x", "s")
        .concat(ys.negate())
        .join(ys.filter(dd.col("x") < 5).select("x", t=dd.col("s")), on="x")
    )
    return [
        mixed,
        looped.select("s", y=dd.col("x") * 10).filter(dd.col("y") > 0),
        shared.concat(shared.filter(dd.col("x") > 2).negate()),
        joined,
    ]


@SETTINGS
@given(case=streams_and_run_points({"xs": xs_records, "ys": xs_records}))
def test_fused_chains_match_reference(runtime, case):
    stream, run_points = case
    run = check_stream(_chains, TWO, stream, runtime, run_points)
    names = sorted(op.name for op in run.flow.worker.operators if "+" in op.name)
    assert names == [
        "concat(-, filter+negate)",  # the chain on the shared select's second reader
        "concat(filter+select+negate+negate, filter+select, negate)",
        "concat(filter+select, negate)+arrange",  # the join's inputs
        "concat(select+filter, filter)+reduce",  # the loop body's, taken up by the distinct
        "filter+select+arrange",
        "select+filter",  # after the loop: an operator of its own (an output reads it)
        "with_columns+filter+enter",
    ], names


def test_fused_chains_call_inspect_with_every_batch(runtime):
    """An ``inspect`` in a fused chain, and one that nothing reads, still see every batch."""
    stream = [
        [("xs", (1, "a"), 1), ("xs", (2, "b"), 1), ("xs", (7, "a"), 1)],
        [("xs", (2, "b"), -1), ("xs", (3, "a"), 1)],
        [],
        [("xs", (3, "a"), -1), ("xs", (9, "c"), 1)],
    ]
    inside: list = []
    unread: list = []

    def build(flow, i):
        xs = i["xs"]
        kept = xs.filter(dd.col("x") < 5).inspect(inside.append).select("x")
        xs.select(y=dd.col("x") * 2).inspect(unread.append)  # (no node reads it)
        return kept.concat(xs.select("x").negate())

    run = check_stream(build, XS, stream, runtime)

    def rows(batches):
        return sorted(r for b in batches for r in b.iter_rows())

    #                       x   s  time diff
    assert rows(inside) == [
        (1, "a", 0, 1),
        (2, "b", 0, 1),
        (2, "b", 1, -1),
        (3, "a", 1, 1),
        (3, "a", 3, -1),
    ]
    #                       y time diff
    assert rows(unread) == [
        (2, 0, 1),
        (4, 0, 1),
        (4, 1, -1),
        (6, 1, 1),
        (6, 3, -1),
        (14, 0, 1),
        (18, 3, 1),
    ]
    names = [op.name for op in run.flow.worker.operators]
    if run.flow.workers == 1:
        assert "concat(filter+inspect+select, select+negate)" in names, names
        assert "select+inspect" in names, names
    else:  # (an inspect runs on worker 0 alone, in the user's process: not fused)
        assert "concat(select, select+negate)" in names, names
        assert names.count("inspect") == 2, names
