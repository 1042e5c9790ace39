"""An arrangement read by operators other than joins (found by the random-plan property).

``Collection.arrange`` gives an :class:`~ddflow.Arranged` collection meant to be shared by
joins; used as an ordinary collection (a ``concat``, an ``antijoin`` on other keys) the engine
fails or, worse, gives a wrong result. These strict xfails pin the defects until they are
fixed (the random-plan strategy keeps arrangements to joins meanwhile)."""

from __future__ import annotations

import pytest

import ddflow as dd
from ddflow.testing import frame_to_counter, reference


def _check(build) -> None:
    flow = dd.Dataflow()
    b = flow.input("b", schema={"v": "str", "k": "int64"})
    out = build(b).output()
    b.insert([("x", 1)])
    flow.advance_to(1)
    flow.run()
    assert frame_to_counter(out.snapshot()) == reference(flow, {"b": {("x", 1): 1}})[out]


@pytest.mark.xfail(strict=True, reason="engine defect: an arrangement read by a concat fails")
def test_an_arrangement_concatenated_with_its_source() -> None:
    _check(lambda b: b.arrange(["v"]).concat(b))


@pytest.mark.xfail(
    strict=True,
    reason="engine defect: an antijoin of an arrangement on other keys gives a wrong result",
)
def test_an_antijoin_of_an_arrangement_on_other_keys() -> None:
    _check(lambda b: b.arrange(["v", "k"]).antijoin(b, on="k"))
