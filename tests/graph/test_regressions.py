"""Regressions found while writing :mod:`ddflow.graph`, named after what broke.

* a loop whose body ends in no reduce never stopped: the feedback passed ``+r`` and ``-r`` on
  as separate updates that cancel, forever (the feedback now consolidates each complete
  iteration before sending it on);
* float division by a constant depended on the batch size (Polars multiplies by the
  reciprocal), so a retraction computed in another batch did not cancel its insertion (the
  divisor is now compiled as a column, which Polars divides exactly).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import ddflow as dd


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging) when the block runs longer than ``seconds``."""

    def alarm(*_: object) -> None:
        raise TimeoutError(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def identity_loop(body: Callable[[dd.Collection, dd.Collection], dd.Collection]) -> list:
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = edges.iterate(lambda y: body(y, edges)).output()
    edges.insert([(1, 2), (2, 1)])
    flow.advance_to(1)
    with time_limit(2):  # a two-edge loop takes well under a second
        flow.run()
    return sorted(out.snapshot()[["src", "dst"]].itertuples(index=False, name=None))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda y, e: y.filter(dd.col("src") > 0), id="filter"),
        pytest.param(
            lambda y, e: y.join(e.select(src=dd.col("src")).distinct(), on="src"), id="join"
        ),
        pytest.param(lambda y, e: y.filter(dd.col("src") > 0).consolidate(), id="consolidate"),
    ],
)
def test_iterate_stops_when_a_body_without_reduce_reaches_its_fixed_point(body):
    assert identity_loop(body) == [(1, 2), (2, 1)]


def test_iterate_stops_when_the_body_ends_in_a_reduce():
    """The workaround (and why the other graph loops, which end in group_by, terminate)."""
    assert identity_loop(lambda y, e: y.filter(dd.col("src") > 0).distinct()) == [(1, 2), (2, 1)]


def test_float_division_by_a_constant_retracts_what_it_inserted():
    flow = dd.Dataflow()
    x = flow.input("x", schema={"m": "int64"})
    out = x.select(m=dd.col("m"), r=dd.col("m").cast("float64") / 10**9).output()
    x.insert([30000000, 1])
    flow.advance_to(1)
    flow.run()
    x.remove([30000000])
    flow.advance_to(2)
    flow.run()
    assert out.snapshot()["m"].tolist() == [1]
