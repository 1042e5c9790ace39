"""A user function that raises inside ``run()`` never loses or corrupts accepted data silently:
``run()`` raises a :class:`~ddflow.UserFunctionError` naming the function, the line that gave it
and its cause; the dataflow then refuses every call that would feed or run it
(:class:`~ddflow.DataflowFailedError`), and the epochs complete before the failure still read
as the reference computes them.

Regression: a ``map`` over ``[1, 3, 4, 9]`` whose function raised on 3 once used to drop the
whole failing batch: the next ``run()`` succeeded with ``[10, 90]``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import ddflow as dd
from ddflow.testing import frame_to_counter, reference


class Flaky:
    """A function of a record that raises on ``bad`` while ``armed``."""

    def __init__(self, bad: int, fn: Any) -> None:
        self.bad, self.fn, self.armed = bad, fn, True

    def __call__(self, *args: Any) -> Any:
        if self.armed and self._hits(args):
            raise ValueError(f"cannot take {self.bad}")
        return self.fn(*args)

    def _hits(self, args: Any) -> bool:
        return any(
            self.bad in (a if isinstance(a, tuple) else (a,))
            for a in args
            if not isinstance(a, list)
        ) or any(self.bad in v for a in args if isinstance(a, list) for v, _ in a)


def _map(xs: dd.Collection, f: Any) -> dd.Collection:
    return xs.map(lambda r: f(r), schema={"y": "int64"})


def _flat_map(xs: dd.Collection, f: Any) -> dd.Collection:
    return xs.flat_map(lambda r: f(r), schema={"y": "int64"})


def _reduce(xs: dd.Collection, f: Any) -> dd.Collection:
    keyed = xs.select(k=dd.col("x") % 2, x=dd.col("x"))
    return keyed.group_by("k").reduce(lambda k, g: f(k, g), schema={"y": "int64"})


CASES = {
    "map": (_map, lambda r: (r[0] * 10,)),
    "flat_map": (_flat_map, lambda r: [(r[0] * 10,), (r[0],)]),
    "reduce": (_reduce, lambda k, g: [(sum(v[0] * m for v, m in g),)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_raising_user_function_stops_the_dataflow_and_loses_nothing_silently(case: str) -> None:
    build, fn = CASES[case]
    f = Flaky(3, fn)
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"x": "int64"})
    out = build(xs, f).output()
    xs.insert([1, 2])
    flow.advance_to(1)
    flow.run()
    epoch0 = frame_to_counter(out.snapshot(epoch=0))
    xs.insert([1, 3, 4, 9])
    flow.advance_to(2)
    with pytest.raises(dd.UserFunctionError, match="raised ValueError: cannot take 3") as info:
        flow.run()
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.site is not None and info.value.site.filename == __file__
    f.armed = False
    for call in (
        flow.run,
        flow.step,
        lambda: xs.insert([5]),
        lambda: xs.remove([1]),
        lambda: flow.advance_to(3),
        flow.close,
    ):
        with pytest.raises(dd.DataflowFailedError, match="cannot take 3"):
            call()
    # what was complete before the failure is still there, and right
    assert out.complete_through == 0
    want = reference(flow, {"xs": Counter({(1,): 1, (2,): 1})})[out]
    assert epoch0 == want
    assert frame_to_counter(out.snapshot()) == want


def test_a_raising_vertex_handler_names_the_vertex() -> None:
    class Broken(dd.Vertex):
        def on_recv(self, edge: int, batch: Any, time: Any) -> None:
            raise KeyError("lost")

    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"x": "int64"})
    (ys,) = flow.vertex(Broken(), [xs], [{"x": "int64"}])
    ys.output()
    xs.insert([1])
    flow.advance_to(1)
    with pytest.raises(dd.UserFunctionError, match=r"vertex Broken\.on_recv .*KeyError"):
        flow.run()
    with pytest.raises(dd.DataflowFailedError):
        flow.run()


def test_an_inspect_callback_that_raises_stops_the_dataflow() -> None:
    def spy(batch: Any) -> None:
        raise RuntimeError("spy failed")

    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"x": "int64"})
    xs.inspect(spy).output()
    xs.insert([1])
    flow.advance_to(1)
    with pytest.raises(dd.UserFunctionError, match="inspect function spy"):
        flow.run()
    with pytest.raises(dd.DataflowFailedError, match="spy failed"):
        xs.insert([2])


def test_a_failure_inside_a_library_ddflow_calls_is_not_blamed_on_a_user_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An aggregate has no user function: when the Polars code ddflow runs for it fails, the
    error is ddflow's own (raised as it is), not a user function "defined in" Polars."""
    import polars as pl

    from ddflow.runtime.local.reduce import groups

    # (the expression is made here, but fails later, inside Polars, called by ddflow)
    monkeypatch.setattr(groups, "_linear", lambda kind, c: pl.col(c).str.len_chars())
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "x": "float64"})
    xs.group_by("k").agg(low=dd.min("x"), total=dd.sum("x")).output()
    xs.insert([(1, 2.5)])
    flow.advance_to(1)
    with pytest.raises(pl.exceptions.PolarsError) as info:
        flow.run()
    assert not isinstance(info.value, dd.UserFunctionError)
    with pytest.raises(dd.DataflowFailedError):
        flow.run()
