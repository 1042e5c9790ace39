"""The reduce family (group_by().agg, group_by().reduce, distinct, threshold) against the
reference at every epoch, with groups that empty, go negative and come back.

Semantics shared by runtime and reference: ``count`` is the sum of multiplicities, ``sum(c)`` the
sum of ``c * m``, a group yields a row only when its count is positive, ``min``/``max`` range over
values of positive multiplicity, ``mean = sum / count``; ``distinct`` keeps records with ``m > 0``
once; ``threshold(fn)`` gives each record multiplicity ``fn(m)``; ``reduce(fn)`` sees
``fn(key, [(values, m), ...])`` with the rows of positive multiplicity.
"""

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

G = {"g": {"k": "int64", "v": "int64", "f": "float64"}}
# dyadic floats: sums are exact in any order, so runtime and reference agree bit for bit
dyadic = st.sampled_from([-1.5, -0.5, 0.0, 0.25, 1.0, 2.5])
g_records = {"g": st.tuples(st.integers(0, 2), small_ints, dyadic)}


def lower_median(key, group):
    """A non-monotone group function: the lower median of the multiset of ``v``."""
    values = sorted(vals[0] for vals, m in group for _ in range(m))
    return [(values[(len(values) - 1) // 2],)]


def second_smallest(key, group):
    """The second-smallest distinct ``v``, if there is one (appears and disappears)."""
    distinct = sorted({vals[0] for vals, _m in group})
    return [(distinct[1],)] if len(distinct) > 1 else []


def count_parity(key, group):
    """Whether the group's size is odd: flips on every insertion."""
    return [(sum(m for _, m in group) % 2,)]


# ---------------------------------------------------------------------- worked streams


def test_group_by_agg_stream_table(runtime):
    stream = [
        [("g", (1, 3, 0.5), 1), ("g", (1, 5, 1.5), 1), ("g", (2, 4, 1.0), 1)],
        [("g", (1, 3, 0.5), -1)],
        [("g", (2, 4, 1.0), -1), ("g", (2, 9, 2.0), -1)],  # group 2 goes negative: no row
        [("g", (2, 9, 2.0), 1), ("g", (2, 9, 2.0), 1)],
    ]

    def build(flow, i):
        return i["g"].group_by("k").agg(n=dd.count(), lo=dd.min("v"), hi=dd.max("v"), s=dd.sum("f"))

    run = check_stream(build, G, stream, runtime, run_points=[])
    #                                        k  n lo hi    s  time diff
    assert changes_table(run.outputs[0]) == [
        (1, 1, 5, 5, 1.5, 1, 1),
        (1, 2, 3, 5, 2.0, 0, 1),
        (1, 2, 3, 5, 2.0, 1, -1),
        (2, 1, 4, 4, 1.0, 0, 1),
        (2, 1, 4, 4, 1.0, 2, -1),
        (2, 1, 9, 9, 2.0, 3, 1),
    ]


def test_reduce_median_stream_table(runtime):
    stream = [
        [("g", (0, 1, 0.0), 1), ("g", (0, 5, 0.0), 1), ("g", (0, 7, 0.0), 1)],
        [("g", (0, 0, 0.0), 1)],
        [("g", (0, 7, 0.0), -1), ("g", (0, 0, 0.0), -1)],
        [("g", (0, 1, 0.0), -1), ("g", (0, 5, 0.0), -1)],
    ]

    def build(flow, i):
        return i["g"].select("k", "v").group_by("k").reduce(lower_median, schema={"med": "int64"})

    run = check_stream(build, G, stream, runtime, run_points=[0, 2])
    # the median moves down, stays put while the group changes, then the group empties
    #                                      k med time diff
    assert changes_table(run.outputs[0]) == [
        (0, 1, 1, 1),
        (0, 1, 3, -1),
        (0, 5, 0, 1),
        (0, 5, 1, -1),
    ]


def test_distinct_and_threshold_stream_table(runtime):
    stream = [
        [("g", (1, 1, 0.0), 1), ("g", (1, 1, 0.0), 1), ("g", (2, 2, 0.0), -1)],
        [("g", (1, 1, 0.0), -1), ("g", (2, 2, 0.0), 1)],
    ]

    def build(flow, i):
        xs = i["g"].select("k")
        return [
            xs.distinct(),
            xs.threshold(lambda m: 1 if m >= 2 else 0),
            xs.threshold(lambda m: -m),
        ]

    run = check_stream(build, G, stream, runtime)
    distinct, at_least_two, negated = run.outputs
    #                                 k time diff
    assert changes_table(distinct) == [(1, 0, 1)]
    assert changes_table(at_least_two) == [(1, 0, 1), (1, 1, -1)]
    assert changes_table(negated) == [(1, 0, -2), (1, 1, 1), (2, 0, 1), (2, 1, -1)]


# ---------------------------------------------------------------------- properties


@SETTINGS
@given(case=streams_and_run_points(g_records, max_updates=8))
def test_aggregates_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        g = i["g"]
        return [
            g.group_by("k").agg(n=dd.count(), s=dd.sum("v"), sf=dd.sum("f"), m=dd.mean("v")),
            # one value column per min/max aggregate: see
            # test_min_and_max_of_different_columns_in_one_agg
            g.group_by("k").agg(n=dd.count(), lo=dd.min("v"), hi=dd.max("v"), s=dd.sum("v")),
            g.group_by("k").agg(hi=dd.max("f"), m=dd.mean("f")),
            g.group_by("k", "v").agg(lo=dd.min("f"), n=dd.count()),
            g.group_by("v").agg(hi=dd.max("k")),
            g.select("k").group_by("k").agg(n=dd.count()),
        ]

    check_stream(build, G, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points(g_records, max_updates=8))
def test_group_functions_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        g = i["g"].select("k", "v", "f")
        by_k = g.group_by("k")
        return [
            by_k.reduce(lower_median, schema={"med": "int64"}),
            by_k.reduce(second_smallest, schema={"second": "int64"}),
            by_k.reduce(count_parity, schema={"odd": "int64"}),
            # two key columns: the key is a tuple
            g.group_by("k", "v").reduce(
                lambda key, grp: [(key[0] * 10 + key[1], len(grp))],
                schema={"code": "int64", "n": "int64"},
            ),
            # many output rows per group, and rows depending on multiplicities
            g.group_by("k").reduce(
                lambda key, grp: [(vals[0], m) for vals, m in grp if m > 1],
                schema={"v": "int64", "m": "int64"},
            ),
        ]

    check_stream(build, G, stream, runtime, run_points)


@SETTINGS
@given(case=streams_and_run_points({"xs": st.tuples(st.integers(0, 3), short_strs)}, max_updates=8))
def test_distinct_and_threshold_match_reference(runtime, case):
    stream, run_points = case

    def build(flow, i):
        xs = i["xs"]
        return [
            xs.distinct(),
            xs.select("x").distinct(),
            xs.threshold(lambda m: 1 if m >= 2 else 0),
            xs.threshold(lambda m: m % 3),
            xs.threshold(lambda m: -m if m < 0 else 0),
            xs.concat(xs).distinct().concat(xs.distinct().negate()),  # always empty
        ]

    check_stream(build, {"xs": {"x": "int64", "s": "str"}}, stream, runtime, run_points)


@SETTINGS
@given(
    case=streams_and_run_points(
        {
            "l": st.tuples(st.integers(0, 3), small_ints),
            "r": st.tuples(st.integers(0, 3), small_ints),
        },
        max_updates=8,
    )
)
def test_reductions_of_joins_match_reference(runtime, case):
    stream, run_points = case
    schemas = {"l": {"k": "int64", "a": "int64"}, "r": {"k": "int64", "b": "int64"}}

    def build(flow, i):
        j = i["l"].join(i["r"], on="k")
        per_key = j.group_by("k").agg(n=dd.count(), s=dd.sum("a"), lo=dd.min("a"))
        return [
            per_key,
            j.group_by("k").agg(s=dd.sum("b"), m=dd.mean("b")),
            per_key.join(i["l"].distinct(), on="k"),
            j.select("a", "b").distinct().group_by("a").agg(n=dd.count()),
        ]

    check_stream(build, schemas, stream, runtime, run_points)


# ---------------------------------------------------------------------- regressions


def test_min_max_over_records_that_cancel_only_in_projection(runtime):
    """The runtime and the reference once disagreed when a group's records share the aggregated
    value but differ in another column, with mixed-sign multiplicities: the runtime took the
    value's multiplicity (+1 - 1 = 0, absent), the reference the records' (one is +1, present).
    The semantics is now the value's multiplicity in the group."""
    stream = [[("g", (1, 2, "a"), 1), ("g", (1, 2, "b"), -1), ("g", (1, 1, "c"), 1)]]

    def build(flow, i):
        return i["g"].group_by("v").agg(hi=dd.max("k"), lo=dd.min("k"))

    run = check_stream(build, {"g": {"v": "int64", "k": "int64", "tag": "str"}}, stream, runtime)
    #                                      v hi lo time diff
    assert changes_table(run.outputs[0]) == [(1, 1, 1, 0, 1)]


def test_min_and_max_of_different_columns_in_one_agg(runtime):
    # v = 0 has multiplicity +1 - 1 = 0 in the group: absent; v = 1 is the only value present
    stream = [[("g", (0, 0, -1.5), 1), ("g", (0, 0, -0.5), -1), ("g", (0, 1, -1.5), 1)]]

    def build(flow, i):
        return i["g"].group_by("k").agg(lo=dd.min("v"), hi=dd.max("f"))

    run = check_stream(build, G, stream, runtime)
    #                                      k lo   hi  time diff
    assert changes_table(run.outputs[0]) == [(0, 1, -1.5, 0, 1)]


def test_min_max_of_a_group_whose_values_are_all_null_is_null(runtime):
    """min/max skip nulls, so a group whose values are all null has a null min and max: their
    columns are nullable where the aggregated column is (they were declared non-nullable, and a
    snapshot turned the null into NaN)."""
    stream = [[("g", (1, None), 1), ("g", (2, 5), 1), ("g", (2, None), 1)], [("g", (2, 5), -1)]]

    def build(flow, i):
        return i["g"].group_by("k").agg(lo=dd.min("v"), hi=dd.max("v"))

    run = check_stream(build, {"g": {"k": "int64", "v": "int64?"}}, stream, runtime)
    out = run.outputs[0]
    assert str(out.schema["lo"]) == "int64?" and str(out.schema["hi"]) == "int64?"
    #                                      k  lo    hi  time diff
    assert changes_table(out) == [
        (1, None, None, 0, 1),
        (2, None, None, 1, 1),
        (2, 5, 5, 0, 1),
        (2, 5, 5, 1, -1),
    ]
