"""The semantics driver: run a stream through a runtime and compare every complete epoch with
the from-scratch reference interpreter (:func:`ddflow.testing.reference`).

A *stream* is a list of epochs; epoch ``e`` is a list of ``(input_name, record, diff)``
updates. The driver feeds epoch ``e`` at the inputs' current epoch, closes it with
``advance_to(e + 1)``, and calls ``run()`` only after the epochs listed in ``run_points`` (and
always at the end), so that several epochs can be in flight at once. Then, for every epoch::

    output.snapshot(epoch=e)  ==  reference(flow, inputs accumulated at epochs <= e)[output]
    sum of output.changes() with time <= e  ==  output.snapshot(epoch=e)

The runtimes are listed once, in :data:`RUNTIMES`; :func:`make_flow` builds an empty dataflow
on one of them. A new runtime (``"spark"``) is added in exactly these two places.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.runtime.local.settings import (
    LocalSettings,
    LookupSettings,
    ReduceSettings,
    SumSettings,
)
from ddflow.testing import frame_to_counter, reference
from ddflow.testing.budget import time_budget

#: the runtimes of the semantics suite: every test runs on "local" (small batches held as rows),
#: "local-columnar" (the local runtime with every batch in Polars), "local-w2" and "local-w3"
#: (two and three workers, in this process); the tests named in :data:`PROCESS_SUBSET` run on
#: "workers" (two workers, one a process of its own) and those in :data:`SPARK_SUBSET` on
#: "spark" too
RUNTIMES: list[str] = [
    "local",
    "local-python",
    "local-columnar",
    "local-w2",
    "local-w3",
    "workers",
    "spark",
]

#: The semantics tests that also run on the Spark runtime (two workers hosted by Spark): the
#: worked streams, one per operator family (linear, join, reduce, loops, prioritized loops, null
#: keys). The Hypothesis properties, with hundreds of streams each, run on the local runtimes
#: (which share the hosted workers' routes and progress tracking: ``local-w2``, ``workers``);
#: ``tests/spark`` compares the two runtimes on seeded random streams of every operator family
#: (nested loops included) and ``tests/graph`` runs connected components on Spark against
#: NetworkX.
SPARK_SUBSET: frozenset[str] = frozenset(
    {
        "test_filter_select_stream_table",
        "test_concat_with_negation_cancels",
        "test_fused_chains_call_inspect_with_every_batch",
        "test_join_stream_table",
        "test_top_k_stream_table",
        "test_top_k_and_arg_max_skip_nulls_and_order_floats_totally",
        "test_semijoin_and_antijoin_stream_table",
        "test_group_by_agg_stream_table",
        "test_reduce_median_stream_table",
        "test_distinct_and_threshold_stream_table",
        "test_min_max_over_records_that_cancel_only_in_projection",
        "test_reachability_stream_table",
        "test_prioritized_iterate_with_max_iterations",
        "test_distinct_of_figure_13",
        "test_null_keys_stream_table",
        "test_union_and_intersect_stream_table",
        "test_cogroup_stream_table",
    }
)

#: The semantics tests that also run on worker processes ("workers"): the worked streams of
#: :data:`SPARK_SUBSET` and the nested loops' (a step there is a round trip between processes,
#: so the Hypothesis properties, with hundreds of streams each, run their workers in one process:
#: "local-w2", "local-w3"; tests/property runs random plans on processes)
PROCESS_SUBSET: frozenset[str] = SPARK_SUBSET | {
    "test_nested_loops_stream_table",
    "test_max_iterations_applies_the_body_k_times",
}

Update = tuple[str, tuple[Any, ...], int]
Stream = Sequence[Sequence[Update]]
Build = Callable[
    [dd.Dataflow, dict[str, dd.InputCollection]], "dd.Collection | Sequence[dd.Collection]"
]


#: the local runtime's settings in the suite: paths the local kernels take only on large data,
#: taken here at every size. Integer frames of ``packed_rows`` or more are summed by packed
#: codes (``ddflow.runtime.local.columnar.grouped_sums``; here the group-by sums only what
#: cannot be packed: floats, strings, nulls); a reduce evaluation over more than
#: ``evaluate_slice_rows`` history rows goes in slices of keys (here more than 16); and a
#: lookup of many keys in a batch of ``scan_rows`` or more scans it (a join then reads the
#: batch whole, other keys' updates too). Both local variants run with them. Progress is
#: tracked by the core's tracker and the Python one, compared at every call
#: (``progress="checked"``), and the loops the native core can run whole run there
#: (``regions=True``).
LARGE_DATA_PATHS = LocalSettings(
    sums=SumSettings(packed_rows=1),
    reduce=ReduceSettings(evaluate_slice_rows=16, native=True),
    lookups=LookupSettings(scan_rows=1),
    progress="checked",
    regions=True,
)
#: ... with every reduce and every loop in Python (:data:`LARGE_DATA_PATHS` runs those the
#: native core covers there)
PYTHON_REDUCES = replace(
    LARGE_DATA_PATHS, reduce=replace(LARGE_DATA_PATHS.reduce, native=False), regions=False
)


def make_flow(runtime: str) -> dd.Dataflow:
    """An empty dataflow on ``runtime`` (one of :data:`RUNTIMES`); the local runtimes with
    :data:`LARGE_DATA_PATHS`."""
    if runtime == "local":
        return dd.Dataflow(runtime=dd.LocalRuntime(LARGE_DATA_PATHS))
    if runtime == "local-python":  # every reduce in Python, not in the native core
        return dd.Dataflow(runtime=dd.LocalRuntime(PYTHON_REDUCES))
    if runtime == "local-columnar":  # every batch in Polars: the columnar kernels alone (and
        # every reduce in Python: its columnar paths)
        return dd.Dataflow(runtime=dd.LocalRuntime(PYTHON_REDUCES, small_batch_rows=0))
    if runtime == "workers":  # two workers, worker 1 a process of its own
        return dd.Dataflow(runtime=dd.LocalRuntime(LARGE_DATA_PATHS), workers=2)
    if runtime.startswith("local-w"):  # two or three workers run one after another in this
        # process: the routes and progress tracking of "workers", without a process's round
        # trip at each operator step
        workers = int(runtime[len("local-w") :])
        return dd.Dataflow(
            runtime=dd.LocalRuntime(LARGE_DATA_PATHS), workers=workers, processes=False
        )
    if runtime == "spark":  # two workers, worker 1 a task of a Spark barrier stage
        # (tests/conftest.py fails the test first if Spark cannot run)
        from ddflow.runtime.spark.session import local_session

        # the process's one session (``getOrCreate``), shared with tests/spark's fixture
        session = local_session(app="ddflow-tests", partitions=4)
        return dd.Dataflow(runtime=dd.SparkRuntime(session, LARGE_DATA_PATHS, workers=2))
    raise ValueError(f"unknown runtime {runtime!r}; the runtimes are {RUNTIMES}")


class Run:
    """A fed and run dataflow: its inputs, outputs, and the inputs accumulated per epoch."""

    def __init__(
        self,
        flow: dd.Dataflow,
        inputs: dict[str, dd.InputCollection],
        outputs: list[dd.Output],
        stream: Stream,
    ) -> None:
        self.flow = flow
        self.inputs = inputs
        self.outputs = outputs
        self.stream = stream

    def accumulated(self, epoch: int) -> dict[str, Counter]:
        """Every input's multiset at ``epoch`` (updates of epochs ``<= epoch``)."""
        acc: dict[str, Counter] = {name: Counter() for name in self.inputs}
        for updates in self.stream[: epoch + 1]:
            for name, record, diff in updates:
                acc[name][tuple(record)] += diff
        return {name: Counter({r: m for r, m in c.items() if m != 0}) for name, c in acc.items()}


def feed(inputs: Mapping[str, dd.InputCollection], updates: Iterable[Update]) -> None:
    """Apply one epoch's updates to the inputs (as ``update`` batches, one per input)."""
    rows: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for name, record, diff in updates:
        rows[name].append((*record, diff))
    for name, batch in rows.items():
        inputs[name].update(batch)


#: seconds a whole stream may take to run before it counts as not terminating
RUN_BUDGET = 30.0
#: how much longer the Spark runtime may take (each step runs Spark jobs)
SPARK_SLOWER = 20


def run_stream(
    build: Build,
    schemas: Mapping[str, Mapping[str, str]],
    stream: Stream,
    runtime: str,
    run_points: Iterable[int] | None = None,
    budget: float = RUN_BUDGET,
) -> Run:
    """Build a flow, feed ``stream``, running after the epochs in ``run_points`` and at the end."""
    if runtime.startswith("spark"):
        budget *= SPARK_SLOWER
    with time_budget(budget, f"running the stream {list(map(list, stream))}"):
        return _run_stream(build, schemas, stream, runtime, run_points)


def _run_stream(
    build: Build,
    schemas: Mapping[str, Mapping[str, str]],
    stream: Stream,
    runtime: str,
    run_points: Iterable[int] | None,
) -> Run:
    flow = make_flow(runtime)
    # signed: the streams retract records never inserted, so multiplicities go negative
    inputs = {
        name: flow.input(name, schema=schema, signed=True) for name, schema in schemas.items()
    }
    built = build(flow, inputs)
    collections = [built] if isinstance(built, dd.Collection) else list(built)
    outputs = [c.output() for c in collections]
    feed_and_run(flow, inputs, stream, run_points)
    return Run(flow, inputs, outputs, stream)


def feed_and_run(
    flow: dd.Dataflow,
    inputs: Mapping[str, dd.InputCollection],
    stream: Stream,
    run_points: Iterable[int] | None,
) -> None:
    """Feed ``stream`` epoch by epoch, running after the epochs in ``run_points`` (every one
    for None) and at the end."""
    points = set(range(len(stream))) if run_points is None else set(run_points)
    for e, updates in enumerate(stream):
        feed(inputs, updates)
        flow.advance_to(e + 1)
        if e in points:
            flow.run()
    flow.run()


def changes_through(changes: pd.DataFrame, epoch: int) -> Counter:
    """The accumulation of a ``changes()`` frame at ``epoch``."""
    names = [c for c in changes.columns if c not in ("time", "diff")]
    acc: Counter = Counter()
    upto = changes[changes["time"] <= epoch]
    for row in upto[[*names, "diff"]].itertuples(index=False):
        acc[_nulls_as_none(row[:-1])] += int(row[-1])
    return Counter({r: m for r, m in acc.items() if m != 0})


def describe(expected: Counter, actual: Counter) -> str:
    missing = {r: m - actual.get(r, 0) for r, m in expected.items() if m != actual.get(r, 0)}
    extra = {r: actual[r] for r in actual if r not in expected}
    return f"missing (record: expected - actual) {missing}; extra {extra}"


def check_run(run: Run, epochs: Iterable[int] | None = None) -> None:
    """Compare every output at every epoch with the reference, and changes() with snapshots."""
    stream = run.stream
    for out in run.outputs:
        assert out.complete_through >= len(stream) - 1, (
            f"output complete through {out.complete_through}, fed {len(stream)} epochs"
        )
        ch = out.changes()
        assert (ch["diff"] != 0).all(), f"changes() holds zero diffs:\n{ch}"
        names = [c for c in ch.columns if c not in ("time", "diff")]
        seen = Counter(_nulls_as_none(r) for r in ch[[*names, "time"]].itertuples(index=False))
        dup = [r for r, n in seen.items() if n > 1]
        assert not dup, f"changes() is not consolidated per epoch: {dup}\n{ch}"
    for e in range(len(stream)) if epochs is None else epochs:
        want = reference(run.flow, run.accumulated(e))
        for i, out in enumerate(run.outputs):
            got = frame_to_counter(out.snapshot(epoch=e))
            assert got == want[out], (
                f"output {i} at epoch {e}: {describe(want[out], got)}\n"
                f"expected {dict(want[out])}\n     got {dict(got)}\n"
                f"stream {list(map(list, stream))}"
            )
            replayed = changes_through(out.changes(), e)
            assert replayed == got, (
                f"output {i} at epoch {e}: changes() replayed differs from snapshot: "
                f"{describe(got, replayed)}\nstream {list(map(list, stream))}"
            )


def check_stream(
    build: Build,
    schemas: Mapping[str, Mapping[str, str]],
    stream: Stream,
    runtime: str,
    run_points: Iterable[int] | None = None,
    budget: float = RUN_BUDGET,
) -> Run:
    """Run ``stream`` and check every output at every epoch against the reference."""
    run = run_stream(build, schemas, stream, runtime, run_points, budget)
    check_run(run)
    return run


def changes_table(out: dd.Output) -> list[tuple[Any, ...]]:
    """``changes()`` as a sorted list of ``(*record, time, diff)`` rows, for exact expectations."""
    return sorted(
        (_nulls_as_none(r) for r in out.changes().itertuples(index=False)),
        key=lambda r: tuple((v is not None, v) for v in r),
    )


def _nulls_as_none(row: Iterable[Any]) -> tuple[Any, ...]:
    """A pandas row as a record: ``pd.NA``, ``NaT`` and ``None`` become ``None`` (NaN stays)."""
    return tuple(
        None
        if v is None or v is pd.NA or v is pd.NaT
        else tuple(v)
        if isinstance(v, (list, tuple))
        else v
        for v in row
    )


# ---------------------------------------------------------------------- Hypothesis strategies

small_ints = st.integers(0, 5)
short_strs = st.sampled_from(["", "a", "b", "ab", "ba"])
diffs = st.sampled_from([1, 1, 1, -1])


def streams(
    records: Mapping[str, st.SearchStrategy[tuple[Any, ...]]],
    max_epochs: int = 5,
    max_updates: int = 6,
) -> st.SearchStrategy[list[list[Update]]]:
    """Streams of ±1 updates to the named inputs: insertions, retractions (also of records never
    inserted, so negative multiplicities occur) and cancellations within an epoch."""
    names = sorted(records)
    update = st.sampled_from(names).flatmap(lambda n: st.tuples(st.just(n), records[n], diffs))
    return st.lists(st.lists(update, max_size=max_updates), min_size=1, max_size=max_epochs)


@st.composite
def streams_and_run_points(
    draw: st.DrawFn,
    records: Mapping[str, st.SearchStrategy[tuple[Any, ...]]],
    max_epochs: int = 5,
    max_updates: int = 6,
) -> tuple[list[list[Update]], set[int]]:
    """A stream and the epochs after which to ``run()`` (often none: all epochs in flight)."""
    stream = draw(streams(records, max_epochs, max_updates))
    points = draw(st.sets(st.integers(0, len(stream) - 1), max_size=len(stream)))
    return stream, points


#: Hypothesis settings for the suite: moderate example counts, no deadline (the first run of a
#: flow compiles expressions), and a fixture that is a plain runtime name.
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
