"""Random dataflows against the reference interpreter, on every runtime.

For every plan drawn by :func:`ddflow.testing.strategies.plans` and every stream of updates to
its inputs (several epochs in flight, retractions, negative multiplicities), on each runtime,
for every output and every epoch ``e``::

    snapshot(epoch=e)                 ==  reference(flow, inputs accumulated at e)[output]
    changes() replayed through e      ==  snapshot(epoch=e)
    changes()                         has no zero diff and one row per (record, time)

Runtimes: ``local`` (small batches held as rows) and ``local-columnar`` (every batch in
Polars) on every example, ``spark`` on a few small plans (a Spark step costs a few Spark jobs).

Records compare as the engine consolidates them: NaN equals NaN and ``-0.0`` equals ``0.0``
(the two zeros are one record, kept with the sign of whichever came first; plans never divide
by a float zero, so no result shows the sign). The reference is compared with
``snapshot_polars``, which keeps the column types (in pandas a ``"float64?"`` NaN reads as null
and a date as a timestamp); the pandas ``snapshot()`` and ``changes()`` are compared with each
other (rows whose records pandas cannot tell apart are left out of the consolidation check).

Sizes follow the Hypothesis profile (``tests/conftest.py``): ``ci`` by default,
``DDFLOW_HYPOTHESIS_PROFILE=long`` for ten times the examples and longer streams.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings
from ddflow.testing import frame_to_counter, reference
from ddflow.testing.budget import time_budget
from ddflow.testing.strategies import Plan, plans

#: the Hypothesis profile (registered and loaded by tests/conftest.py)
LONG = os.environ.get("DDFLOW_HYPOTHESIS_PROFILE", "ci") == "long"
SCALE = 10 if LONG else 1
#: epochs and updates per epoch of the streams
EPOCHS, UPDATES = (6, 10) if LONG else (4, 6)
#: seconds one runtime may take for one stream before it counts as not terminating
BUDGET = 60.0

RUNTIMES: dict[str, Callable[[], dd.Dataflow]] = {
    # (the reduces the native core covers run there, and the loops it can run whole;
    # progress is tracked by the core's tracker and the Python one, compared at every call)
    "local": lambda: dd.Dataflow(
        runtime=dd.LocalRuntime(
            LocalSettings(reduce=ReduceSettings(native=True), progress="checked", regions=True)
        )
    ),
    # (every batch in Polars, every reduce in Python rather than in the native core, and
    # progress tracked by the Python tracker alone)
    "local-columnar": lambda: dd.Dataflow(
        runtime=dd.LocalRuntime(
            LocalSettings(reduce=ReduceSettings(native=False), progress="python"),
            small_batch_rows=0,
        )
    ),
    # (several workers in this process, one after another: the routes and progress tracking
    # of worker processes, without a round trip at each step; the processes themselves run
    # test_random_loops_on_worker_processes)
    "local-w2": lambda: dd.Dataflow(workers=2, processes=False),
    "local-w3": lambda: dd.Dataflow(
        runtime=dd.LocalRuntime(small_batch_rows=0), workers=3, processes=False
    ),
}

Stream = list[list[tuple[str, tuple[Any, ...], int]]]


# ---------------------------------------------------------------------- comparing records


class _NaN:
    """NaN as a value that equals itself, for comparing records."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return hash("NaN")

    def __repr__(self) -> str:
        return "nan"


NAN = _NaN()


def _value(v: Any) -> Any:
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isnan(v):
        return NAN
    return v


def comparable(records: Counter) -> Counter:
    """A multiset of records with NaN equal to NaN (``-0.0`` already equals ``0.0``)."""
    out: Counter = Counter()
    for record, m in records.items():
        out[tuple(map(_value, record))] += m
    return Counter({r: m for r, m in out.items() if m != 0})


def describe(expected: Counter, actual: Counter) -> str:
    missing = {r: m - actual.get(r, 0) for r, m in expected.items() if m != actual.get(r, 0)}
    extra = {r: m for r, m in actual.items() if r not in expected}
    return f"missing (record: expected - actual) {missing}; extra {extra}"


def pandas_records(frame: pd.DataFrame, weight: str) -> Counter:
    """A pandas snapshot (``weight="count"``) or change log (``"diff"``), rows summed."""
    names = [c for c in frame.columns if c not in ("time", "diff", "count")]
    acc: Counter = Counter()
    for row in frame[[*names, weight]].itertuples(index=False):
        acc[tuple(map(_value, row[:-1]))] += int(row[-1])
    return Counter({r: m for r, m in acc.items() if m != 0})


# ---------------------------------------------------------------------- running a plan


def run(plan: Plan, flow: dd.Dataflow, stream: Stream, points: set[int]) -> list[dd.Output]:
    """Build ``plan`` on ``flow`` and feed ``stream``, running after the epochs in ``points``
    and at the end."""
    inputs, collections = plan.build(flow)
    outputs = [c.output() for c in collections]
    for e, updates in enumerate(stream):
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for name, record, diff in updates:
            rows.setdefault(name, []).append((*record, diff))
        for name, batch in rows.items():
            inputs[name].update(batch)
        flow.advance_to(e + 1)
        if e in points:
            flow.run()
    flow.run()
    return outputs


def accumulated(stream: Stream, epoch: int, names: list[str]) -> dict[str, Counter]:
    """Every input's multiset at ``epoch``."""
    acc: dict[str, Counter] = {name: Counter() for name in names}
    for updates in stream[: epoch + 1]:
        for name, record, diff in updates:
            acc[name][record] += diff
    return {name: Counter({r: m for r, m in c.items() if m != 0}) for name, c in acc.items()}


def expected(plan: Plan, stream: Stream) -> list[list[Counter]]:
    """The reference's value of every output (index) at every epoch (index)."""
    flow = dd.Dataflow()
    outputs = [c.output() for c in plan.build(flow)[1]]
    per_epoch = []
    with time_budget(BUDGET, "the reference"):
        for e in range(len(stream)):
            want = reference(flow, accumulated(stream, e, list(plan.schemas)))
            per_epoch.append([comparable(want[o]) for o in outputs])
    return [list(column) for column in zip(*per_epoch, strict=True)]


def check(
    plan: Plan,
    stream: Stream,
    points: set[int],
    runtime: str,
    make_flow: Callable[[], dd.Dataflow],
    want: list[list[Counter]],
    budget: float = BUDGET,
) -> dd.Dataflow:
    """Run ``stream`` on a new flow of ``make_flow`` and compare every output at every epoch
    with ``want`` (:func:`expected`)."""
    flow = make_flow()
    with time_budget(budget, f"the stream on {runtime}"):
        outputs = run(plan, flow, stream, points)
    for i, out in enumerate(outputs):
        assert out.complete_through == len(stream) - 1, (
            f"{runtime}: output {i} complete through {out.complete_through}, "
            f"fed {len(stream)} epochs"
        )
        changes = out.changes()
        assert (changes["diff"] != 0).all(), f"{runtime}: changes() holds zero diffs:\n{changes}"
        names = [c for c in changes.columns if c not in ("time", "diff")]
        # in pandas a null of a "float64?" column reads as NaN: such rows may differ unseen
        ambiguous = [n for n, t in out.schema.items() if t.kind == "float" and t.nullable]
        clear = ~changes[ambiguous].isna().any(axis=1) if ambiguous else changes["diff"] != 0
        dup = changes[clear].duplicated([*names, "time"])
        assert not dup.any(), f"{runtime}: changes() not consolidated:\n{changes[clear][dup]}"
        for e in range(len(stream)):
            got = comparable(frame_to_counter(out.snapshot_polars(epoch=e)))
            assert got == want[i][e], (
                f"{runtime}: output {i} at epoch {e}: {describe(want[i][e], got)}\n"
                f"expected {dict(want[i][e])}\n     got {dict(got)}"
            )
            snapshot = pandas_records(out.snapshot(epoch=e), "count")
            replayed = pandas_records(changes[changes["time"] <= e], "diff")
            assert replayed == snapshot, (
                f"{runtime}: output {i} at epoch {e}: changes() replayed differs from "
                f"snapshot(): {describe(snapshot, replayed)}"
            )
    return flow


# ---------------------------------------------------------------------- the properties


@settings(max_examples=120 * SCALE)
@given(data=st.data())
def test_random_plans_match_reference(data):
    """Plans of up to six operations (eight in the long profile), loops included."""
    plan = data.draw(plans(max_ops=6 if not LONG else 8), label="plan")
    stream, points = data.draw(
        plan.streams_and_run_points(EPOCHS, UPDATES), label="stream, run points"
    )
    want = expected(plan, stream)
    for runtime, make_flow in RUNTIMES.items():
        check(plan, stream, points, runtime, make_flow, want)


@settings(max_examples=100 * SCALE)
@given(data=st.data())
def test_random_loops_match_reference(data):
    """Plans with at least one loop (nested loops, loops over DAGs)."""
    plan = data.draw(plans(max_ops=4 if not LONG else 6, min_loops=1), label="plan")
    stream, points = data.draw(
        plan.streams_and_run_points(EPOCHS, UPDATES), label="stream, run points"
    )
    want = expected(plan, stream)
    for runtime, make_flow in RUNTIMES.items():
        check(plan, stream, points, runtime, make_flow, want)


@settings(max_examples=25 * SCALE)
@given(data=st.data())
def test_random_loops_on_worker_processes(data):
    """Plans with at least one loop on two workers, worker 1 a process of its own."""
    plan = data.draw(plans(max_ops=4 if not LONG else 6, min_loops=1), label="plan")
    stream, points = data.draw(
        plan.streams_and_run_points(EPOCHS, UPDATES), label="stream, run points"
    )
    want = expected(plan, stream)
    check(plan, stream, points, "workers", lambda: dd.Dataflow(workers=2), want)


@pytest.mark.spark
@settings(max_examples=3 * SCALE)
@given(data=st.data())
def test_random_plans_match_reference_on_spark(spark, data):
    """Small plans (one loop deep at most) on two workers hosted by Spark."""
    plan = data.draw(
        plans(
            max_inputs=2,
            max_ops=2 if not LONG else 3,
            max_depth=1,
            extremes=False,
            max_outputs=2,
        ),
        label="plan",
    )
    stream, points = data.draw(
        plan.streams_and_run_points(2 if not LONG else 3, 3), label="stream, run points"
    )
    want = expected(plan, stream)
    flows: list[dd.Dataflow] = []

    def make_flow() -> dd.Dataflow:
        flows.append(dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2)))
        return flows[-1]

    try:
        check(plan, stream, points, "spark", make_flow, want, budget=BUDGET * 20)
    finally:
        for flow in flows:
            flow.close()  # (its barrier stage: the session's slot is free for the next)
