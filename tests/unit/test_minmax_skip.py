"""The min/max reduce's skip (``minmax_unchanged``) against its promise: a key it returns has
the same ``f(input)`` at every time after the new updates as before them.

Each case draws a key's input history (retractions and records never inserted included), builds
the output history the reduce would hold for it (at each time of a grid, ``f`` of the input
accumulated there, as differences between neighbouring times), then draws new updates. For
each key either path of the skip returns, ``f`` is recomputed at every time of the grid, with
and without the new updates."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import product
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.differential.kernel import ReduceSpec
from ddflow.runtime.local.kernels import DIFF, KEY, LocalKernels
from ddflow.runtime.local.reduce import minmax_unchanged, reduce_prepare
from ddflow.runtime.local.reduce import skips as reduce_skips
from ddflow.runtime.local.rows import Rows
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings
from ddflow.timely.lattice import TimeType

TT = TimeType(("product", "product"))
GRID = list(product(range(4), repeat=2))
I64 = pl.Int64()
SPECS = [
    ReduceSpec.of(
        "agg",
        ["k"],
        aggs=[("lo", "min", "a"), ("hi", "max", "a")],
        out_types={"lo": I64, "hi": I64},
    ),
    ReduceSpec.of(
        "agg",
        ["k"],
        aggs=[("lo", "min", "a"), ("hi", "max", "b")],
        out_types={"lo": I64, "hi": I64},
    ),
    ReduceSpec.of("agg", ["k"], aggs=[("lo", "min", "a")], out_types={"lo": I64}),
]
K = LocalKernels()
#: settings that take the skip's row path at any size, and its columnar path
ROW_PATH = LocalSettings(reduce=ReduceSettings(small_rows=10**9))
COLUMNAR_PATH = LocalSettings(small_batch_rows=0)

value = st.one_of(st.none(), st.integers(0, 4))
update = st.tuples(
    st.integers(0, 1), value, value, st.sampled_from(GRID), st.sampled_from([1, 1, 1, -1, 2])
)


def f(spec: ReduceSpec, rows: Counter) -> tuple[Any, ...] | None:
    """The aggregate of one key's accumulated ``(a, b) -> multiplicity``, as the reduce
    defines it: a row only for a positive count; min/max over the values of positive
    multiplicity (summed over the records holding them)."""
    if sum(rows.values()) <= 0:
        return None
    out = []
    for _, kind, c in spec.aggs:
        per: Counter = Counter()
        for rec, m in rows.items():
            x = rec[0 if c == "a" else 1]
            if x is not None:
                per[x] += m
        present = [x for x, m in per.items() if m > 0]
        out.append((min if kind == "min" else max)(present) if present else None)
    return tuple(out)


def accumulated(updates: list[tuple[Any, ...]], key: int, t: tuple[int, int]) -> Counter:
    acc: Counter = Counter()
    for k, a, b, s, d in updates:
        if k == key and TT.less_equal(s, t):
            acc[(a, b)] += d
    return acc


def output_history(spec: ReduceSpec, updates: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Output updates whose accumulation at each grid time is ``f`` of the input there:
    ``F(i, j) - F(i-1, j) - F(i, j-1) + F(i-1, j-1)`` on the grid."""
    rows = []
    for key in {u[0] for u in updates}:
        at = {t: f(spec, accumulated(updates, key, t)) for t in GRID}
        for i, j in GRID:
            diff: Counter = Counter()
            for (di, dj), sign in (((0, 0), 1), ((1, 0), -1), ((0, 1), -1), ((1, 1), 1)):
                t = (i - di, j - dj)
                if min(t) >= 0 and at[t] is not None:
                    diff[at[t]] += sign
            rows += [(key, *o, i, j, d) for o, d in diff.items() if d]
    return rows


@settings(max_examples=600, deadline=None)
@given(
    spec=st.sampled_from(SPECS),
    history=st.lists(update, max_size=10),
    new=st.lists(update, min_size=1, max_size=4),
)
def test_a_skipped_key_keeps_its_output_at_every_later_time(spec, history, new):
    tcols = TT.columns()
    schema = {"k": I64, "a": I64, "b": I64, **{c: I64 for c in tcols}, DIFF: I64}
    raw = pl.DataFrame([(k, a, b, *t, d) for k, a, b, t, d in new], orient="row", schema=schema)
    new_frame = K.arrange(reduce_prepare(spec, raw, TT), spec.keys)
    outs = list(spec.outputs)
    out_frame = K.arrange(
        pl.DataFrame(
            output_history(spec, history),
            orient="row",
            schema={"k": I64, **{n: I64 for n in outs}, **{c: I64 for c in tcols}, DIFF: I64},
        ),
        spec.keys,
    )
    both = history + new
    for paths in (ROW_PATH, COLUMNAR_PATH):
        args = (new_frame, out_frame)
        if paths is ROW_PATH:
            args = tuple(Rows(dict(a.schema), list(a.iter_rows())) for a in args)
        skipped = minmax_unchanged(spec, *args, TT, paths)
        keys = {
            row[1]
            for row in (
                skipped.rows
                if isinstance(skipped, Rows)
                else skipped.select([KEY, "k"]).iter_rows()
            )
        }
        for key in keys:
            for t in GRID:
                assert f(spec, accumulated(both, key, t)) == f(
                    spec, accumulated(history, key, t)
                ), (paths, key, t)


def test_the_skip_takes_a_label_moving_above_the_min_after_the_output_changed():
    """Label propagation's common case: the key's min (5) fell to 2 at iteration 2, and a
    neighbour's label moves from 9 to 7 at iteration 1 (the output's later changes replace
    one row by another, and the min before them, 5, is the larger bound). A move from 9 to 4
    would lower the min at iteration 1: not skipped."""
    spec = SPECS[2]
    history = [(0, 9, None, (0, 0), 1), (0, 5, None, (0, 0), 1), (0, 2, None, (0, 2), 1)]
    for to, skips in ((7, 1), (5, 1), (4, 0)):
        check_skip(spec, history, [(0, 9, None, (0, 1), -1), (0, to, None, (0, 1), 1)], skips)


def test_the_skip_is_not_tried_on_many_new_updates_per_output_row():
    """The columnar skip is not tried where the new updates far outnumber their keys' output
    rows (it would group them all to find few keys): the case above skips its key, but not
    once the limits say its two new updates are many against the key's three output rows.
    The row path still tries."""
    spec = SPECS[2]
    history = [(0, 9, None, (0, 0), 1), (0, 5, None, (0, 0), 1), (0, 2, None, (0, 2), 1)]
    new = [(0, 9, None, (0, 1), -1), (0, 7, None, (0, 1), 1)]
    check_skip(spec, history, new, 1)
    limits = ReduceSettings(skip_try_rows=2, skip_try_ratio=0.5)
    check_skip(spec, history, new, 0, paths=(replace(COLUMNAR_PATH, reduce=limits),))
    rows = replace(limits, small_rows=10**9)
    check_skip(spec, history, new, 1, paths=(replace(ROW_PATH, reduce=rows),))
    fewer = replace(limits, skip_try_rows=3)  # fewer new updates than that
    check_skip(spec, history, new, 1, paths=(replace(COLUMNAR_PATH, reduce=fewer),))


def test_the_skip_is_bounded_by_every_later_output():
    """The output changes after the new updates' time: the new values are compared with the
    largest min (smallest max) the key has at any later time, and a null min there stops the
    skip."""
    spec = SPECS[2]
    rises = [(0, 2, None, (0, 0), 1), (0, 5, None, (0, 0), 1), (0, 2, None, (0, 2), -1)]
    check_skip(spec, rises, [(0, 3, None, (0, 1), 1)], 0)  # the min 5 at (0, 2) would be 3
    check_skip(spec, rises, [(0, 6, None, (0, 1), 1)], 1)
    to_null = [(0, 5, None, (0, 0), 1), (0, 5, None, (0, 2), -1), (0, None, None, (0, 2), 1)]
    check_skip(spec, to_null, [(0, 7, None, (0, 1), 1)], 0)  # the null min at (0, 2) would be 7
    # the min itself retracted, even for a larger value: not skipped
    check_skip(
        spec,
        [(0, 5, None, (0, 0), 1), (0, 9, None, (0, 0), 1)],
        [(0, 5, None, (0, 1), -1), (0, 7, None, (0, 1), 1)],
        0,
    )
    # more retracted than inserted at a time: the count could reach zero
    check_skip(
        spec,
        [(0, 5, None, (0, 0), 1), (0, 9, None, (0, 0), 1)],
        [(0, 7, None, (0, 1), -2), (0, 8, None, (0, 1), 1)],
        0,
    )


def test_the_row_skip_tests_each_time_where_one_bound_for_all_is_too_coarse():
    """A neighbour's label falling over the iterations while the key's own label falls too
    (label propagation's common case for an edge inside a component): each new label is
    above the key's label at its iteration, but the least (4) is below the key's label of an
    earlier iteration (5), the single bound; the row path tests time by time and skips the
    key. One step further down (a new label of 2 at an iteration where the key's is 3) it
    does not."""
    spec = SPECS[2]
    history = [(0, 5, None, (0, 0), 1), (0, 3, None, (0, 2), 1)]  # the key's label: 5, then 3
    falling = [
        (0, 9, None, (1, 0), 1),
        (0, 9, None, (1, 1), -1),
        (0, 6, None, (1, 1), 1),
        (0, 6, None, (1, 2), -1),
        (0, 4, None, (1, 2), 1),
    ]
    check_skip(spec, history, falling, 0, paths=(COLUMNAR_PATH,))
    check_skip(spec, history, falling, 1, paths=(ROW_PATH,))
    lower = [*falling[:-1], (0, 2, None, (1, 2), 1)]
    check_skip(spec, history, lower, 0, paths=(ROW_PATH,))
    # the same label retracted where it is the key's min (3 at (1, 2)): not skipped
    check_skip(
        spec, history, [(0, 3, None, (1, 2), -1), (0, 7, None, (1, 2), 1)], 0, paths=(ROW_PATH,)
    )


def test_the_row_skip_tests_only_times_after_a_new_update():
    """New updates at two incomparable times, (1, 2) and (2, 1), where the key has no output
    at (1, 1) (its group starts at each of them): the times tested are those after a new
    update, not (1, 1), and the key is skipped; a new value below the key's min at (2, 2)
    is not."""
    spec = SPECS[2]
    history = [(0, 5, None, (1, 2), 1), (0, 5, None, (2, 1), 1)]
    check_skip(
        spec, history, [(0, 8, None, (1, 2), 1), (0, 7, None, (2, 1), 1)], 1, paths=(ROW_PATH,)
    )
    check_skip(
        spec, history, [(0, 8, None, (1, 2), 1), (0, 4, None, (2, 2), 1)], 0, paths=(ROW_PATH,)
    )


def check_skip(
    spec: ReduceSpec,
    history: list[Any],
    new: list[Any],
    skips: int,
    paths: tuple[LocalSettings, ...] = (ROW_PATH, COLUMNAR_PATH),
) -> None:
    tcols = TT.columns()
    schema = {"k": I64, "a": I64, "b": I64, **{c: I64 for c in tcols}, DIFF: I64}
    raw = pl.DataFrame([(k, a, b, *t, d) for k, a, b, t, d in new], orient="row", schema=schema)
    new_frame = K.arrange(reduce_prepare(spec, raw, TT), spec.keys)
    out_frame = K.arrange(
        pl.DataFrame(
            output_history(spec, history),
            orient="row",
            schema={"k": I64, "lo": I64, **{c: I64 for c in tcols}, DIFF: I64},
        ),
        spec.keys,
    )
    for path in paths:
        skipped = minmax_unchanged(spec, new_frame, out_frame, TT, path)
        assert skipped.height == skips, path


ONE_EXTREME = [
    ReduceSpec.of("agg", ["k"], aggs=[("lo", "min", "a")], out_types={"lo": I64}),
    ReduceSpec.of("agg", ["k"], aggs=[("hi", "max", "a")], out_types={"hi": I64}),
]
present = st.integers(0, 4)
present_update = st.tuples(
    st.integers(0, 2), present, present, st.sampled_from(GRID), st.sampled_from([1, 1, 1, -1, 2])
)


@settings(max_examples=400, deadline=None)
@given(
    spec=st.sampled_from(ONE_EXTREME),
    history=st.lists(present_update, max_size=12),
    new=st.lists(present_update, min_size=1, max_size=6),
    one_time=st.booleans(),
    least=st.booleans(),
    arbitrary=st.one_of(
        st.none(),
        st.lists(
            st.tuples(st.integers(0, 2), present, st.sampled_from(GRID), st.sampled_from([1, -1])),
            max_size=10,
        ),
    ),
)
def test_the_array_skip_keeps_its_promise_and_agrees_with_the_other_paths(
    spec, history, new, one_time, least, arbitrary
):
    """One min (max) of a column without nulls, keyed by an integer key: the NumPy path of
    the skip keeps the promise above, and returns exactly the keys of the Polars path, and
    no key the row path does not (which also keeps the promise) (new updates at one time or
    several; a max's values at the least int64, which the NumPy path leaves to the others,
    now and then; and, for the agreement only, output histories no reduce would hold:
    several rows at a time)."""
    tcols = TT.columns()
    if one_time:
        new = [(k, a, b, new[0][3], d) for k, a, b, _, d in new]
    if least and spec.aggs[0][1] == "max":
        new = [(k, -(2**63) if i == 0 else a, b, t, d) for i, (k, a, b, t, d) in enumerate(new)]
    schema = {"k": I64, "a": I64, "b": I64, **{c: I64 for c in tcols}, DIFF: I64}
    raw = pl.DataFrame([(k, a, b, *t, d) for k, a, b, t, d in new], orient="row", schema=schema)
    new_frame = K.arrange(reduce_prepare(spec, raw, TT), spec.keys)
    outs = list(spec.outputs)
    held = (
        output_history(spec, history)
        if arbitrary is None
        else [(k, v, *t, d) for k, v, t, d in arbitrary]
    )
    out_frame = K.arrange(
        pl.DataFrame(
            held,
            orient="row",
            schema={"k": I64, **{n: I64 for n in outs}, **{c: I64 for c in tcols}, DIFF: I64},
        ),
        spec.keys,
    )

    def keys_of(skipped: Any) -> set[int]:
        return {
            row[1]
            for row in (
                skipped.rows
                if isinstance(skipped, Rows)
                else skipped.select([KEY, "k"]).iter_rows()
            )
        }

    applies = reduce_skips._minmax_unchanged_arrays(spec, new_frame, out_frame, TT)
    assert (applies is None) == (least and spec.aggs[0][1] == "max")
    arrays = keys_of(minmax_unchanged(spec, new_frame, out_frame, TT, COLUMNAR_PATH))
    rows = keys_of(
        minmax_unchanged(
            spec,
            *(Rows(dict(a.schema), list(a.iter_rows())) for a in (new_frame, out_frame)),
            TT,
            ROW_PATH,
        )
    )
    original = reduce_skips._minmax_unchanged_arrays
    reduce_skips._minmax_unchanged_arrays = lambda *a: None
    try:
        polars = keys_of(minmax_unchanged(spec, new_frame, out_frame, TT, COLUMNAR_PATH))
    finally:
        reduce_skips._minmax_unchanged_arrays = original
    assert arrays == polars
    assert arrays <= rows  # (the row path also tests each time: see the test below)
    if applies is not None:
        assert keys_of(applies) == arrays
    both = history + new
    for key in rows if arbitrary is None else ():
        for t in GRID:
            assert f(spec, accumulated(both, key, t)) == f(spec, accumulated(history, key, t))


DISTINCT = ReduceSpec.of("distinct", ["k", "a"])
record_update = st.tuples(
    st.integers(0, 2), st.integers(0, 1), st.sampled_from(GRID), st.sampled_from([1, 1, 1, -1, 2])
)


def present_at(updates: list[tuple[Any, ...]], record: tuple[int, int], t: tuple[int, int]) -> bool:
    return sum(d for k, a, s, d in updates if (k, a) == record and TT.less_equal(s, t)) > 0


@settings(max_examples=400, deadline=None)
@given(
    history=st.lists(record_update, max_size=10),
    new=st.lists(record_update, min_size=1, max_size=5),
)
def test_a_record_the_distinct_skip_returns_is_present_or_absent_as_before(history, new):
    """``distinct_unchanged`` against its promise: for each record either path returns, the
    distinct's output (the record present where its count is positive) is the same at every
    time of the grid with and without the new updates; the output history is the one the
    reduce would hold (presence differenced between neighbouring times). Both paths return
    the same records."""
    tcols = TT.columns()
    schema = {"k": I64, "a": I64, **{c: I64 for c in tcols}, DIFF: I64}
    records = {(k, a) for k, a, _, _ in history}
    out_rows = []
    for rec in records:
        for i, j in GRID:
            d = 0
            for (di, dj), sign in (((0, 0), 1), ((1, 0), -1), ((0, 1), -1), ((1, 1), 1)):
                t = (i - di, j - dj)
                if min(t) >= 0 and present_at(history, rec, t):
                    d += sign
            if d:
                out_rows.append((*rec, i, j, d))
    new_frame = K.arrange(
        pl.DataFrame([(k, a, *t, d) for k, a, t, d in new], orient="row", schema=schema),
        DISTINCT.keys,
    )
    out_frame = K.arrange(pl.DataFrame(out_rows, orient="row", schema=schema), DISTINCT.keys)
    found = []
    for paths in (ROW_PATH, COLUMNAR_PATH):
        args = (new_frame, out_frame)
        if paths is ROW_PATH:
            args = tuple(Rows(dict(a.schema), list(a.iter_rows())) for a in args)
        skipped = reduce_skips.distinct_unchanged(DISTINCT, *args, TT, paths)
        rows = skipped.rows if isinstance(skipped, Rows) else skipped.select([KEY, "k", "a"]).rows()
        found.append({(k, a) for _, k, a in rows})
    assert found[0] == found[1]
    for rec in found[0]:
        for t in GRID:
            assert present_at(history + new, rec, t) == present_at(history, rec, t), (rec, t)


def test_the_distinct_skip_takes_an_insertion_of_a_record_present_since_before():
    """A record present since (0, 0) gets another copy at (1, 1): skipped. Not skipped: a
    removal, a record absent before (never present, or removed again at (0, 1)), or one
    whose output changes after the new time."""
    tcols = TT.columns()
    schema = {"k": I64, "a": I64, **{c: I64 for c in tcols}, DIFF: I64}
    out = K.arrange(
        pl.DataFrame(
            [(0, 0, 0, 0, 1), (1, 0, 0, 0, 1), (1, 0, 2, 2, -1), (3, 0, 0, 0, 1), (3, 0, 0, 1, -1)],
            orient="row",
            schema=schema,
        ),
        DISTINCT.keys,
    )
    for new, skips in (
        ([(0, 0, 1, 1, 1)], 1),
        ([(0, 0, 1, 1, -1)], 0),
        ([(0, 0, 1, 1, 1), (0, 0, 1, 2, -1)], 0),
        ([(2, 0, 1, 1, 1)], 0),
        ([(1, 0, 1, 1, 1)], 0),
        ([(3, 0, 1, 1, 1)], 0),
    ):
        batch = K.arrange(pl.DataFrame(new, orient="row", schema=schema), DISTINCT.keys)
        for paths in (ROW_PATH, COLUMNAR_PATH):
            got = reduce_skips.distinct_unchanged(DISTINCT, batch, out, TT, paths)
            assert got.height == skips, (new, paths)
