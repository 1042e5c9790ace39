"""A loop's variable keeps its input's schema at every iteration, so a body that may return
nulls in a column its input never holds them is refused when the dataflow is built, naming
the columns and the user's line (such a null would reach readers built to take the column as
never null)."""

from __future__ import annotations

import pytest

import ddflow as dd
from ddflow.testing import frame_to_counter


def test_a_loop_body_that_widens_nullability_is_refused() -> None:
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "v": "int64?"})
    with pytest.raises(dd.SchemaError, match=r"may return nulls in 'k'") as info:
        xs.iterate(lambda x: x.select(k=dd.col("v"), v=dd.col("v")))
    assert info.value.site is not None and info.value.site.filename == __file__


def test_a_nullable_input_or_a_filled_body_is_accepted() -> None:
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "v": "int64?"})
    filled = xs.iterate(lambda x: x.select(k=dd.col("v").fill_null(0), v=dd.col("v")))
    wide = xs.select(k=dd.col("k").cast("int64?"), v=dd.col("v")).iterate(
        lambda x: x.select(k=dd.col("v"), v=dd.col("v")), max_iterations=2
    )
    out_filled, out_wide = filled.output(), wide.output()
    xs.insert([(1, None), (2, 3)])
    flow.advance_to(1)
    flow.run()
    assert frame_to_counter(out_filled.snapshot()) == {(0, None): 1, (3, 3): 1}
    assert frame_to_counter(out_wide.snapshot()) == {(None, None): 1, (3, 3): 1}
