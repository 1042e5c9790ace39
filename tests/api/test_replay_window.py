"""``dd.io.ReplayWindow``: after any sequence of moves, forward or backward, near or far, the
input holds exactly the records of the window, computed here from scratch by filtering the
data; each move sends only the records that enter and leave."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd

SCHEMA = {"time": "int64", "user": "str"}


def _window(data: pl.DataFrame, start: int, end: int) -> Counter:
    rows = data.filter((pl.col("time") >= start) & (pl.col("time") < end)).rows()
    return Counter(rows)


def _contents(out: dd.Output) -> Counter:
    snap = out.snapshot()
    return Counter(
        {(t, u): int(n) for t, u, n in snap[["time", "user", "count"]].itertuples(index=False)}
    )


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(st.integers(0, 40), max_size=30),
    size=st.integers(1, 15),
    ends=st.lists(st.integers(-5, 60), min_size=1, max_size=8),
)
def test_the_input_holds_the_window_after_every_move(times, size, ends):
    data = pl.DataFrame(
        {"time": times, "user": [f"u{i % 3}" for i in range(len(times))]},
        schema={"time": pl.Int64, "user": pl.String},
    )
    flow = dd.Dataflow()
    events = flow.input("events", schema=SCHEMA)
    out = events.output()
    window = dd.io.ReplayWindow(events, data, "time", size=size)
    before: Counter = Counter()
    for epoch, end in enumerate(ends, start=1):
        entered, left = window.move_to(end)
        flow.advance_to(epoch)
        flow.run()
        want = _window(data, end - size, end)
        assert _contents(out) == want, (end, size)
        assert (window.start, window.end) == (end - size, end)
        assert Counter(window.rows().rows()) == want
        # only the difference was sent
        assert entered == sum((want - before).values())
        assert left == sum((before - want).values())
        before = want


def test_bad_windows_are_refused_with_the_reason():
    flow = dd.Dataflow()
    events = flow.input("events", schema={**SCHEMA, "when": "str"})
    data = pl.DataFrame({"time": [1], "user": ["a"], "when": ["x"]})
    with pytest.raises(dd.SchemaError, match="no time column 'ts'"):
        dd.io.ReplayWindow(events, data, "ts", size=5)
    with pytest.raises(dd.SchemaError, match="'when' must be a non-nullable integer column"):
        dd.io.ReplayWindow(events, data, "when", size=5)
    with pytest.raises(dd.InputError, match="size must be a positive integer, got 0"):
        dd.io.ReplayWindow(events, data, size=0)
    with pytest.raises(dd.SchemaError, match="the window's data: the data is missing column"):
        dd.io.ReplayWindow(events, pl.DataFrame({"time": [1]}), size=5)
    window = dd.io.ReplayWindow(events, data, size=5)
    with pytest.raises(dd.InputError, match=r"end must be an integer, got 2\.5"):
        window.move_to(2.5)  # type: ignore[arg-type]
    assert (window.first, window.last) == (1, 1)
