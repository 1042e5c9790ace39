"""Regression: float division by a constant must not depend on the batch size (an update and
its retraction, evaluated in different batches, must compute the same value)."""

import numpy as np
import polars as pl

import ddflow as dd
from ddflow.expr import compile_polars
from ddflow.schema import Schema


def test_division_by_a_literal_is_correctly_rounded_in_every_batch_size():
    values = np.random.default_rng(0).integers(0, 10**9, 10_000).astype(float)
    expr = compile_polars(dd.col("m") / 1e9, Schema({"m": "float64"}))
    many = pl.DataFrame({"m": values}).select(expr).to_series().to_numpy()
    assert (many == values / 1e9).all()
    one = pl.DataFrame({"m": [3e7]}).select(expr).item()
    assert one == 3e7 / 1e9 == many[0] if values[0] == 3e7 else one == 0.03


def test_insert_then_remove_through_a_division_cancels():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"m": "int64"})
    out = xs.select(r=dd.col("m").cast("float64") / 10**9).output()
    xs.insert([30_000_000, 1])
    flow.advance_to(1)
    xs.remove([30_000_000])
    flow.advance_to(2)
    flow.run()
    assert out.snapshot().to_dict("list") == {"r": [1e-09], "count": [1]}
