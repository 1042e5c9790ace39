"""Hypothesis strategies for testing dataflows: column values, records, update streams, and
random dataflows (plans) built with the public API.

A user tests a pipeline as ddflow tests itself: draw a stream of updates for its inputs, feed
it epoch by epoch (``run()`` only at some epochs, so that several epochs are in flight), and
compare every complete epoch of every output with the from-scratch reference interpreter::

    output.snapshot(epoch=e)  ==  reference(flow, inputs accumulated at epochs <= e)[output]

* :func:`values` draws values of one ddflow type, skewed: a few hot values most of the time
  (so that keys collide and joins match), the type's special values often (NaN, ``-0.0``,
  ``±inf``, the int64 and int32 extremes, the first and last dates, nulls in a nullable
  column), and any value of the type now and then;
* :func:`records` draws records (tuples in schema order) of a schema (both in
  :mod:`~ddflow.testing.strategies.column_values`);
* :func:`streams` draws streams: a list of epochs, each a list of ``(input_name, record, diff)``
  updates with diffs ±1 (now and then ±2): insertions, retractions of inserted records,
  insertions again, an insertion cancelled by its retraction in the same epoch, and, for the
  inputs made with ``signed=True``, retractions of records never inserted (so multiplicities go
  negative); :func:`run_points` draws the epochs after which to ``run()`` (both in
  :mod:`~ddflow.testing.strategies.update_streams`);
* :func:`plans` draws random dataflows (:class:`Plan`): a DAG of the public operators over a
  few inputs, with loops nested up to three deep and random column expressions
  (:mod:`~ddflow.testing.strategies.random_plans`; their row functions, :class:`MapColumns`
  and friends, in :mod:`~ddflow.testing.strategies.row_functions`).

Each module states the invariants of what it draws: values valid for their column and
unchanged in a batch, records that compare as equal records do, streams whose unsigned inputs
never go below zero, plans that build on every runtime, terminate, do not overflow, do not
depend on batch sizes or runtimes, and print as the Python code that builds them.

>>> from hypothesis import given, settings
>>> from hypothesis import strategies as st
>>> import ddflow as dd
>>> from ddflow.testing import accumulate, frame_to_counter, reference
>>> SCHEMA = {"edges": {"src": "int64", "dst": "int64"}}
>>> @settings(max_examples=5, database=None, deadline=None)
... @given(streams(SCHEMA, max_epochs=3, extremes=False))
... def test_out_degrees(stream):
...     flow = dd.Dataflow()
...     edges = flow.input("edges", schema=SCHEMA["edges"])
...     out = edges.group_by("src").agg(n=dd.count()).output()
...     fed = []
...     for epoch, updates in enumerate(stream):
...         edges.update([(*record, diff) for _, record, diff in updates])
...         fed += [(record, diff) for _, record, diff in updates]
...         flow.advance_to(epoch + 1)
...         flow.run()
...         want = reference(flow, {"edges": accumulate(fed)})[out]
...         assert frame_to_counter(out.snapshot(epoch=epoch)) == want
>>> test_out_degrees()

A random plan draws its streams itself (:meth:`Plan.streams`) and builds on any dataflow:

>>> @settings(max_examples=3, database=None, deadline=None)
... @given(plans(max_ops=3, loops=False).flatmap(lambda p: st.tuples(st.just(p), p.streams())))
... def test_plan_builds(case):
...     plan, stream = case
...     inputs, outputs = plan.build(dd.Dataflow())
...     assert set(inputs) == set(plan.schemas) and outputs
>>> test_plan_builds()
"""

from __future__ import annotations

from ddflow.testing.strategies.column_values import NAN, TYPES, records, values
from ddflow.testing.strategies.plan import Plan
from ddflow.testing.strategies.random_plans import plans
from ddflow.testing.strategies.row_functions import (
    Abs,
    Clamp,
    DistinctValues,
    FlatMapColumns,
    GroupSize,
    Halve,
    LeastValue,
    MapColumns,
    OddValues,
    Scale,
)
from ddflow.testing.strategies.update_streams import SIGNED_INPUTS as SIGNED_INPUTS
from ddflow.testing.strategies.update_streams import RecordsOrSchemas as RecordsOrSchemas
from ddflow.testing.strategies.update_streams import Stream as Stream
from ddflow.testing.strategies.update_streams import Update as Update
from ddflow.testing.strategies.update_streams import run_points, streams, streams_and_run_points

__all__ = [
    "NAN",
    "TYPES",
    "Abs",
    "Clamp",
    "DistinctValues",
    "FlatMapColumns",
    "GroupSize",
    "Halve",
    "LeastValue",
    "MapColumns",
    "OddValues",
    "Plan",
    "Scale",
    "plans",
    "records",
    "run_points",
    "streams",
    "streams_and_run_points",
    "values",
]
