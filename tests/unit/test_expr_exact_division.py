"""Regression: float division by a constant must not depend on the batch size (an update and
its retraction, evaluated in different batches, must compute the same value)."""

import numpy as np
import polars as pl

import ddflow as dd
from ddflow.expr.nodes import compile_polars
from ddflow.schema import Schema


def test_division_by_a_literal_is_correctly_rounded_in_every_batch_size():
    values = np.random.default_rng(0).integers(0, 10**9, 10_000).astype(float)
    expr = compile_polars(dd.col("m") / 1e9, Schema({"m": "float64"}))
    exact = values / 1e9  # (NumPy divides element by element: correctly rounded)
    for size in (1, 2, 3, 64, 1_000, 10_000):
        n = min(len(values), 50 * size)  # fifty batches of each size (of 1 to 10,000 rows)
        got = np.concatenate(
            [
                pl.DataFrame({"m": values[i : i + size]}).select(expr).to_series().to_numpy()
                for i in range(0, n, size)
            ]
        )
        wrong = np.flatnonzero(got != exact[:n])
        assert wrong.size == 0, (
            f"batches of {size} rows: {values[wrong[0]]} / 1e9 gave {got[wrong[0]]!r}, "
            f"not {exact[wrong[0]]!r} ({wrong.size} of {n} values wrong)"
        )


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
