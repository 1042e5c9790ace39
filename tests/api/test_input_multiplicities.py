"""An input is a table: a call that would take a record's multiplicity below zero (removing a
record that is not there, or more copies than there are) raises :class:`~ddflow.InputError`
naming the record, its multiplicity and the caller's line, and accepts nothing; what was
accepted before stays, and the outputs equal the reference on exactly what was accepted. A
``signed=True`` input checks nothing.

Regression: ``xs.remove([(1, 2)])`` on an input that never had ``(1, 2)`` left it with
multiplicity -1, silently; a ``group_by`` then hid the group."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest import mock

import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
import ddflow.api.multiplicities as multiplicities
from ddflow.testing import frame_to_counter, reference

EDGES = {"a": "int64", "b": "int64"}


def _flow(schema: dict[str, str] = EDGES, **kw: Any) -> tuple[dd.Dataflow, Any, list[Any]]:
    """A flow with input ``xs`` and two outputs: the input itself and a group-by on its first
    column (which hides a group whose count is not positive)."""
    flow = dd.Dataflow()
    xs = flow.input("xs", schema=schema, **kw)
    first = next(iter(schema))
    outs = [xs.output(), xs.group_by(first).agg(n=dd.count()).output()]
    return flow, xs, outs


def _refused(call: Callable[[], None], *words: str) -> dd.InputError:
    """``call()`` raises an InputError mentioning ``words`` and pointing at the caller's line
    (the line of the lambda)."""
    line = call.__code__.co_firstlineno
    with pytest.raises(dd.InputError) as info:
        call()
    message = str(info.value)
    for w in words:
        assert w in message, (w, message)
    assert info.value.site is not None
    assert (info.value.site.filename, info.value.site.lineno) == (__file__, line)
    return info.value


def _same_as_reference(flow: dd.Dataflow, outs: list[Any], accepted: Counter) -> None:
    """Run the flow to the next epoch; every output equals the reference on ``accepted``."""
    flow.advance_to(flow.epoch + 1)
    flow.run()
    want = reference(flow, {"xs": +accepted})
    for out in outs:
        assert frame_to_counter(out.snapshot()) == want[out]


def test_removing_an_absent_record_raises_naming_it_and_the_callers_line() -> None:
    flow, xs, outs = _flow()
    xs.insert([(1, 2), (1, 3)])
    _refused(
        lambda: xs.remove([(1, 2), (4, 5)]),
        "remove",
        "'xs'",
        "(4, 5)",
        "multiplicity is 0",
        "changes it by -1",
        "signed=True",
    )
    # nothing of the call was accepted: (1, 2) is still there, and no group 4 hides anywhere
    _same_as_reference(flow, outs, Counter({(1, 2): 1, (1, 3): 1}))
    xs.remove([(1, 2)])
    _same_as_reference(flow, outs, Counter({(1, 3): 1}))


def test_removing_twice_what_was_inserted_once_raises() -> None:
    flow, xs, outs = _flow()
    xs.insert([(1, 2), (7, 7)])
    _same_as_reference(flow, outs, Counter({(1, 2): 1, (7, 7): 1}))
    xs.remove([(1, 2)])
    _refused(lambda: xs.remove([(1, 2)]), "(1, 2)", "multiplicity is 0")
    # within one call: two copies of a record present once
    _refused(lambda: xs.remove([(7, 7), (7, 7)]), "(7, 7)", "multiplicity is 1", "changes it by -2")
    _same_as_reference(flow, outs, Counter({(7, 7): 1}))


def test_the_first_offending_record_of_the_call_is_named() -> None:
    _, xs, _ = _flow()
    xs.insert([(1, 1), (2, 2)])
    error = _refused(lambda: xs.remove([(1, 1), (3, 3), (2, 2), (5, 5)]), "(3, 3)")
    assert "(5, 5)" not in str(error)


def test_an_update_with_a_too_negative_diff_raises_and_accepts_nothing() -> None:
    flow, xs, outs = _flow()
    xs.update([(3, 4, 2), (5, 6, 1)])
    _refused(
        lambda: xs.update([(1, 2, 1), (3, 4, -3), (5, 6, -1)]),
        "update",
        "(3, 4)",
        "multiplicity is 2",
        "changes it by -3",
    )
    _same_as_reference(flow, outs, Counter({(3, 4): 2, (5, 6): 1}))
    # a call's changes to one record are summed first: removing before inserting is fine
    xs.update([(3, 4, -2), (5, 6, -1), (9, 9, -1), (9, 9, 1), (8, 8, -1), (8, 8, 2)])
    xs.insert_frame(pl.DataFrame({"a": [6, 6], "b": [6, 6], "d": [-1, 1]}), diff="d")
    _refused(
        lambda: xs.update([(8, 8, 1), (8, 8, -3)]),
        "(8, 8)",
        "multiplicity is 1",
        "changes it by -2",
    )
    _same_as_reference(flow, outs, Counter({(8, 8): 1}))


@pytest.mark.parametrize("kind", ["pandas", "polars"])
def test_remove_frame_of_absent_records_raises(kind: str) -> None:
    flow, xs, outs = _flow()
    xs.insert_frame(pl.DataFrame({"a": [1, 2, 2], "b": [10, 20, 20]}))
    gone = {"a": [2, 2, 2], "b": [20, 20, 20]}
    frame = pd.DataFrame(gone) if kind == "pandas" else pl.DataFrame(gone)
    _refused(
        lambda: xs.remove_frame(frame),
        "remove_frame",
        "(2, 20)",
        "multiplicity is 2",
        "changes it by -3",
    )
    _same_as_reference(flow, outs, Counter({(1, 10): 1, (2, 20): 2}))
    frame = (
        pd.DataFrame({"a": [2, 2]}).assign(b=20)
        if kind == "pandas"
        else pl.DataFrame({"a": [2, 2], "b": [20, 20]})
    )
    xs.remove_frame(frame)
    _same_as_reference(flow, outs, Counter({(1, 10): 1}))


def test_insert_frame_with_a_diff_column_going_negative_raises() -> None:
    flow, xs, outs = _flow()
    xs.insert_frame(pl.DataFrame({"a": [1, 2], "b": [1, 2], "d": [3, 1]}), diff="d")
    changes = pl.DataFrame({"a": [1, 2], "b": [1, 2], "d": [-3, -2]})
    _refused(
        lambda: xs.insert_frame(changes, diff="d"),
        "insert_frame",
        "(2, 2)",
        "multiplicity is 1",
        "changes it by -2",
    )
    _same_as_reference(flow, outs, Counter({(1, 1): 3, (2, 2): 1}))


def test_a_large_call_is_checked_as_a_small_one() -> None:
    """A call too large for the recent changes is merged with the kept records at once; it is
    refused whole just the same, and the first offending row is named."""
    flow, xs, outs = _flow()
    n = 5 * multiplicities.MIN_RECENT
    xs.insert_frame(pl.DataFrame({"a": list(range(n)), "b": [0] * n}))
    gone = pl.DataFrame({"a": [*range(n - 1, -1, -1), 3], "b": [0] * (n + 1)})
    _refused(lambda: xs.remove_frame(gone), "(3, 0)", "multiplicity is 1", "changes it by -2")
    xs.remove_frame(gone.head(n - 10))
    _same_as_reference(flow, outs, Counter({(i, 0): 1 for i in range(10)}))


def test_records_are_equal_as_the_engine_consolidates_them() -> None:
    """NaN equals NaN, null equals null, -0.0 equals 0.0; strings are exact."""
    schema = {"s": "str?", "f": "float64?"}
    flow, xs, outs = _flow(schema)
    nan = float("nan")
    xs.insert([("a", nan), (None, None), ("", -0.0), ("b", 1.5), ("B", 1.5)])
    xs.remove([("a", float("nan")), (None, None), ("", 0.0)])
    _refused(lambda: xs.remove([("", 0.0)]), "('', 0.0)", "multiplicity is 0")
    _refused(lambda: xs.remove([("a", math.nan)]), "('a', nan)", "multiplicity is 0")
    _refused(lambda: xs.remove([(None, nan)]), "(None, nan)")
    _refused(lambda: xs.remove([("b ", 1.5)]), "('b ', 1.5)")
    xs.remove([("b", 1.5)])
    _same_as_reference(flow, outs, Counter({("B", 1.5): 1}))


def test_a_signed_input_accepts_negative_multiplicities() -> None:
    flow = dd.Dataflow()
    xs = flow.input("xs", schema=EDGES, signed=True)
    out = xs.output()
    xs.remove([(1, 2)])
    xs.update([(3, 4, -2)])
    flow.advance_to(1)
    flow.run()
    assert sorted(out.changes().itertuples(index=False, name=None)) == [
        (1, 2, 0, -1),
        (3, 4, 0, -2),
    ]
    assert frame_to_counter(out.snapshot()) == Counter({(1, 2): -1, (3, 4): -2})


# ---------------------------------------------------------------------- the property

_VALUES = st.tuples(
    st.sampled_from([0, 1, None]),
    st.sampled_from([0.0, -0.0, float("nan"), 2.5, None]),
    st.sampled_from(["x", "", None]),
)
_CALLS = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["insert", "remove", "remove_frame"]),
            st.lists(_VALUES, min_size=1, max_size=6),
        ),
        st.tuples(
            st.just("update"),
            st.lists(st.tuples(_VALUES, st.integers(-2, 2)), min_size=1, max_size=6),
        ),
        st.tuples(st.just("advance"), st.just([])),
    ),
    max_size=25,
)
_SCHEMA = {"i": "int64?", "f": "float64?", "s": "str?"}


def _key(r: tuple[Any, ...]) -> tuple[Any, ...]:
    """A record as the model counts it: NaN and -0.0 made one value each."""
    return tuple(
        "NaN" if isinstance(v, float) and v != v else (v + 0.0 if isinstance(v, float) else v)
        for v in r
    )


def _call(xs: Any, what: str, rows: list[Any]) -> None:
    if what == "insert":
        xs.insert(rows)
    elif what == "remove":
        xs.remove(rows)
    elif what == "remove_frame":
        types = {"i": pl.Int64, "f": pl.Float64, "s": pl.String}
        xs.remove_frame(pl.DataFrame(rows, schema=types, orient="row"))
    else:
        xs.update([(*r, d) for r, d in rows])


@settings(max_examples=80, deadline=None)
@given(calls=_CALLS, merge_often=st.booleans())
def test_a_checked_input_refuses_exactly_what_would_go_negative(
    calls: list[Any], merge_often: bool
) -> None:
    """Random calls: each raises exactly when a Counter model would go below zero, naming the
    first record of the call that would, and otherwise the input's outputs equal the model.
    ``merge_often`` merges the recent changes into the kept records at almost every call, with
    keys so short that records collide."""
    with mock.patch.object(multiplicities, "MIN_RECENT", 1 if merge_often else 1024):
        flow, xs, outs = _flow(_SCHEMA)
        if merge_often:
            xs._multiplicities.key_bits = 2
        model: Counter = Counter()
        for what, rows in [*calls, ("advance", [])]:
            if what == "advance":
                flow.advance_to(flow.epoch + 1)
                flow.run()
                got = frame_to_counter(outs[0].snapshot_polars())
                assert Counter({_key(r): c for r, c in got.items()}) == +model
                continue
            changes = (
                rows if what == "update" else [(r, 1 if what == "insert" else -1) for r in rows]
            )
            net: Counter = Counter()
            shown: dict[tuple[Any, ...], tuple[Any, ...]] = {}
            for r, d in changes:
                net[_key(r)] += d
                shown.setdefault(_key(r), r)
            bad = [k for k in net if model[k] + net[k] < 0]
            if bad:
                with pytest.raises(dd.InputError, match="below zero") as info:
                    _call(xs, what, rows)
                assert f"record {shown[bad[0]]!r} below zero" in str(info.value)
            else:
                _call(xs, what, rows)
                model.update(net)


def test_records_with_list_columns_are_counted():
    """A list column's values are compared as sequences: inserted twice, removed once, and a
    removal of a list never inserted is refused; the same past the small-call path."""
    flow = dd.Dataflow()
    pages = flow.input("pages", schema={"url": "str", "links": "list[str]"})
    out = pages.output()
    pages.insert([("a", ["b", "c"]), ("a", ["b", "c"]), ("b", [])])
    pages.remove([("a", ["b", "c"])])
    with pytest.raises(dd.InputError, match=r"\('b', \['x'\]\) below zero"):
        pages.remove([("b", ["x"])])
    pages.insert([(f"k{i}", [str(i)]) for i in range(3000)])
    pages.remove([("k5", ["5"])])
    flow.advance_to(1)
    flow.run()
    snap = out.snapshot()
    assert len(snap) == 3001  # a, b and the k*s but k5
    assert snap.set_index("url").loc["a", "count"] == 1
    assert "k5" not in set(snap["url"])
