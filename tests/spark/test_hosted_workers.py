"""Workers hosted by Spark (``SparkRuntime(spark, workers=N)``): their barrier stage's life, the
task slots it may take, and a worker lost with its task.

Their results are checked against the reference in tests/semantics (runtime ``spark``) and
in tests/e2e (the Spark pipeline); connected components here against NetworkX.
"""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import networkx as nx
import pytest

import ddflow as dd
from ddflow.runtime.spark.hosted import HostedWorkers, task_slots

pytestmark = pytest.mark.spark


def components(flow: dd.Dataflow) -> tuple[dd.InputCollection, dd.Output]:
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    return edges, dd.graph.connected_components(edges).output()


def labels(out: dd.Output) -> dict[int, int]:
    snap = out.snapshot()
    return dict(zip(snap["node"], snap["label"], strict=True))


def nx_labels(edges: list[tuple[int, int]]) -> dict[int, int]:
    g = nx.Graph(edges)
    return {n: min(c) for c in nx.connected_components(g) for n in c}


def test_components_on_hosted_workers_then_the_stage_ends_with_the_block(spark):
    edges_now = [(1, 2), (2, 3), (7, 8), (8, 9), (4, 5)]
    with dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2)) as flow:
        edges, out = components(flow)
        edges.insert(edges_now)
        flow.advance_to(1)
        flow.run()
        assert labels(out) == nx_labels(edges_now)
        edges.remove([(2, 3)])
        edges.insert([(3, 9)])
        flow.advance_to(2)
        flow.run()
        edges_now = [e for e in edges_now if e != (2, 3)] + [(3, 9)]
        assert labels(out) == nx_labels(edges_now)
        assert flow.workers == 2
        got = out.to_spark().toPandas().sort_values("node").reset_index(drop=True)
        want = out.snapshot().sort_values("node").reset_index(drop=True)
        assert got.astype("int64").equals(want.astype("int64"))
        assert out.to_spark(epoch=0).count() == 8  # (nodes 1, 2, 3, 4, 5, 7, 8, 9)
        (task,) = flow._processes.procs
        assert task.where.startswith("Spark barrier task 0")
        stage = flow._processes._stage
        assert stage.thread.is_alive()
    stage.thread.join(30)
    assert not stage.thread.is_alive() and stage.error is None
    assert labels(out) == nx_labels(edges_now)  # (the outputs stay readable)


def test_more_workers_than_the_slots_allow_are_refused_saying_how_many(spark):
    """A local session's task slots are fixed: too many workers are refused at the
    ``SparkRuntime(...)`` that asks for them, naming its line."""
    with pytest.raises(
        dd.ConfigurationError, match=r"needs 2 task slots .* has 2: use workers=2 at most"
    ) as info:
        dd.SparkRuntime(spark, workers=3)
    assert info.value.site is not None and info.value.site.filename == __file__


def test_a_worker_killed_with_its_task_makes_run_raise_naming_it(spark):
    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
    edges, out = components(flow)
    edges.insert([(i, i + 1) for i in range(0, 200, 2)])
    flow.advance_to(1)
    flow.run()
    (task,) = flow._processes.procs
    os.kill(task.pid, signal.SIGKILL)
    edges.insert([(i, i + 1) for i in range(1, 200, 2)])
    flow.advance_to(2)
    start = time.monotonic()
    with pytest.raises(
        dd.WorkerError,
        match=r"worker 1 \(Spark barrier task 0 .*process \d+\) was lost: its Spark stage failed "
        r"\(Python worker exited unexpectedly",
    ):
        flow.run()
    assert time.monotonic() - start < 60
    # the session is whole again: another dataflow gets its slot
    with dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2)) as again:
        edges, out = components(again)
        edges.insert([(1, 2)])
        again.advance_to(1)
        again.run()
        assert labels(out) == {1: 1, 2: 1}


def test_the_workers_number_is_given_once():
    with pytest.raises(dd.ConfigurationError, match="differ"):
        dd.Dataflow(runtime=SimpleNamespace(workers=2, kernels=None), workers=3)


@pytest.mark.parametrize("workers", [0, -1, True, 1.5])
def test_a_bad_number_of_workers_is_refused(spark, workers):
    with pytest.raises(dd.ConfigurationError, match="number of workers >= 1"):
        dd.SparkRuntime(spark, workers=workers)


def conf(master: str, **settings: str) -> SimpleNamespace:
    """A session as far as the slot and allocation checks read it."""
    values = dict(settings)
    context = SimpleNamespace(
        master=master,
        defaultParallelism=16,
        getConf=lambda: SimpleNamespace(get=lambda key, default=None: values.get(key, default)),
    )
    return SimpleNamespace(sparkContext=context)


def test_task_slots_of_local_and_cluster_masters():
    assert task_slots(conf("local[3]").sparkContext) == 3
    assert task_slots(conf("local").sparkContext) == 1
    assert task_slots(conf("local[*]").sparkContext) == (os.cpu_count() or 1)
    assert task_slots(conf("local[2, 4]").sparkContext) == 2
    assert task_slots(conf("spark://host:7077").sparkContext) == 16


def test_dynamic_allocation_is_refused_before_anything_starts():
    session = conf("spark://host:7077", **{"spark.dynamicAllocation.enabled": "true"})
    with pytest.raises(dd.ConfigurationError, match=r"dynamicAllocation\.enabled=false"):
        HostedWorkers(session, 2).check()
    HostedWorkers(conf("spark://host:7077"), 16).check()  # (15 tasks, 16 slots: one free)
    with pytest.raises(dd.ConfigurationError, match="has 16"):
        HostedWorkers(conf("spark://host:7077"), 17).check()


def test_to_spark_needs_a_session_off_spark(spark):
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "str"})
    out = xs.output()
    xs.insert(["a", "b", "a"])
    flow.advance_to(1)
    flow.run()
    with pytest.raises(dd.GraphError, match=r"to_spark\(spark\)") as info:
        out.to_spark()
    assert "test_hosted_workers.py" in str(info.value)
    rows = sorted(out.to_spark(spark).collect())
    assert [(r["k"], r["count"]) for r in rows] == [("a", 2), ("b", 1)]
    with pytest.raises(dd.TimeError, match="not complete"):
        out.to_spark(spark, epoch=1)
