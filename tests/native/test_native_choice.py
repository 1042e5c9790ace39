"""Which reduces run in the native core, where the settings ask for it
(``ReduceSettings(native=True)``): the choice is made when the dataflow is built, from the
reduce and its columns' types, and ``Dataflow.explain()`` shows it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import ddflow as dd
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings

NATIVE = LocalSettings(reduce=ReduceSettings(native=True))


def _native_flow() -> dd.Dataflow:
    return dd.Dataflow(runtime=dd.LocalRuntime(NATIVE))


def _kinds(flow: dd.Dataflow) -> list[str]:
    return [line.split(": ")[1] for line in flow.explain().splitlines() if ": " in line]


@pytest.mark.parametrize(
    ("schema", "agg", "native"),
    [
        ({"k": "int64", "v": "int64?"}, {"lo": dd.min("v"), "s": dd.sum("v")}, True),
        ({"k": "int32", "v": "date"}, {"hi": dd.max("v"), "n": dd.count()}, True),
        ({"k": "bool", "v": "datetime?"}, {"hi": dd.min("v")}, True),
        ({"k": "int64", "v": "float64"}, {"lo": dd.min("v")}, False),
        ({"k": "str", "v": "int64"}, {"n": dd.count()}, False),
        ({"k": "int64", "v": "int64"}, {"m": dd.mean("v")}, False),
        ({"k": "int64", "v": "int64"}, {"top": dd.top_k("v", 2, by="v")}, False),
        ({"k": "int64", "v": "int64?", "w": "date"}, {"am": dd.arg_max("v", by="w")}, True),
        ({"k": "int64", "v": "str", "w": "int64"}, {"am": dd.arg_max("v", by="w")}, False),
    ],
)
def test_the_integer_family_s_aggregates_run_natively(
    schema: dict[str, str], agg: dict[str, dd.Agg], native: bool
) -> None:
    flow = _native_flow()
    xs = flow.input("xs", schema=schema)
    xs.group_by("k").agg(**agg).output()
    assert _kinds(flow) == ["native" if native else "python"]


def test_distinct_and_threshold_of_integers_run_natively() -> None:
    flow = _native_flow()
    xs = flow.input("xs", schema={"a": "int64", "b": "bool?"})
    xs.distinct().output()
    xs.threshold(lambda m: min(m, 1)).output()
    flow.input("ys", schema={"a": "str"}).threshold(lambda m: m).output()
    assert _kinds(flow) == ["native", "native", "python"]


def _fails_at_three(m: int) -> int:
    if m == 3:
        raise ZeroDivisionError("three")
    return m


def test_a_threshold_function_that_fails_in_the_core_is_a_user_function_error() -> None:
    """A threshold's function called from the native core: its exception comes back as the
    Python reducer's does, a ``UserFunctionError`` naming the function and the line of the
    ``threshold``; the epochs before are exact."""
    flow = _native_flow()
    xs = flow.input("xs", schema={"a": "int64"})
    out = xs.threshold(_fails_at_three).output()
    site = sys._getframe().f_lineno - 1
    line = _fails_at_three.__code__.co_firstlineno
    assert _kinds(flow) == ["native"]
    xs.insert([1, 1, 2])
    flow.advance_to(1)
    flow.run()
    snap = out.snapshot()
    assert dict(zip(snap["a"].tolist(), snap["count"].tolist(), strict=True)) == {1: 2, 2: 1}
    xs.insert([1])
    flow.advance_to(2)
    with pytest.raises(dd.UserFunctionError) as failed:
        flow.run()
    message = str(failed.value)
    assert "_fails_at_three" in message and f"test_native_choice.py:{line}" in message
    assert "ZeroDivisionError: three" in message
    assert message.endswith(f"test_native_choice.py:{site} in {sys._getframe().f_code.co_name})")


def test_by_default_every_reduce_runs_in_python() -> None:
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "v": "int64"})
    xs.group_by("k").agg(lo=dd.min("v")).output()
    assert _kinds(flow) == ["python"]


@pytest.mark.parametrize("native_first", [True, False])
def test_a_checkpoint_restores_across_the_two_reducers(tmp_path, native_first: bool) -> None:
    """A dataflow's checkpoint written with its reduces in one reducer restores into the
    same dataflow with them in the other, which goes on as a run that never stopped."""
    settings = [NATIVE, LocalSettings(reduce=ReduceSettings(native=False))]
    if not native_first:
        settings.reverse()

    def build(s: LocalSettings, checkpoint: Any = None) -> tuple[dd.Dataflow, Any, Any]:
        flow = dd.Dataflow(runtime=dd.LocalRuntime(s), checkpoint=checkpoint)
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
        labels = dd.graph.connected_components(edges).output()
        return flow, edges, labels

    first, edges, _ = build(settings[0], tmp_path)
    edges.insert([(1, 2), (2, 3), (5, 6)])
    first.advance_to(1)
    first.run()
    first.checkpoint()
    again, edges2, labels2 = build(settings[1], tmp_path)
    assert again.restore() == 0
    assert set(_kinds(again)) == ({"python"} if native_first else {"native"})
    edges2.remove([(2, 3)])
    edges2.insert([(3, 5)])
    again.advance_to(2)
    again.run()
    never, edges3, labels3 = build(settings[1])
    edges3.insert([(1, 2), (2, 3), (5, 6)])
    never.advance_to(1)
    edges3.remove([(2, 3)])
    edges3.insert([(3, 5)])
    never.advance_to(2)
    never.run()
    got = labels2.snapshot().sort_values("node").reset_index(drop=True)
    want = labels3.snapshot().sort_values("node").reset_index(drop=True)
    assert got.equals(want)
