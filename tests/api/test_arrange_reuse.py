"""An arrangement read by operators other than joins on its keys (found by the random-plan
property): ``Collection.arrange`` gives an :class:`~ddflow.Arranged` collection meant to be
shared by joins; used as an ordinary collection (a ``concat``, an ``antijoin`` on other keys) it
must read as its records. It once failed (the arranged batches' key column reached the concat)
or, worse, gave a wrong result (an arrangement on other keys reused the first one's key codes)."""

from __future__ import annotations

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


def test_an_arrangement_concatenated_with_its_source() -> None:
    _check(lambda b: b.arrange(["v"]).concat(b))


def test_an_antijoin_of_an_arrangement_on_other_keys() -> None:
    _check(lambda b: b.arrange(["v", "k"]).antijoin(b, on="k"))
