"""Checkpoints and restore: a dataflow restored from a checkpoint gives, at every later epoch,
exactly the outputs of a run that never stopped (Hypothesis streams with retractions, loops and
nested loops, on one worker and on several); a damaged checkpoint is detected and skipped; a
checkpoint of another plan is refused, naming the difference."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import networkx as nx
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.api import checkpoints
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings
from ddflow.runtime.local.trace import TraceSettings

col = dd.col
#: "native": the reduces in the native core (and with two workers in this process)
RUNTIMES = ["embedded", "columnar", "native", "workers-2"]
EDGE = {"src": "int64", "dst": "int64"}
#: every batch in Polars, and merges done in steps from a few rows on: a checkpoint then finds
#: frames of every layout the kernels make, and merges in progress
COLUMNAR = LocalSettings(
    small_batch_rows=0, trace=TraceSettings(fueled_rows=8, fuel=1, fuel_chunk=4)
)


NATIVE = LocalSettings(reduce=ReduceSettings(native=True))


def new_flow(runtime, directory, **kw):
    if runtime == "embedded":
        return dd.Dataflow(checkpoint=directory, **kw)
    if runtime == "columnar":
        return dd.Dataflow(dd.LocalRuntime(COLUMNAR), checkpoint=directory, **kw)
    if runtime == "native":
        return dd.Dataflow(dd.LocalRuntime(NATIVE), checkpoint=directory, **kw)
    return dd.Dataflow(
        dd.LocalRuntime(NATIVE), workers=2, processes=False, checkpoint=directory, **kw
    )


def graph_queries(flow):
    """Outputs over one edge input: aggregates, a join, a distinct, a loop (connected
    components) and a doubly nested loop (strongly connected components)."""
    edges = flow.input("edges", schema=EDGE)
    degree = edges.group_by("src").agg(n=dd.count(), top=dd.max("dst"), total=dd.sum("dst"))
    two_hop = (
        edges.join(edges.select(mid=col("src"), far=col("dst")), left_on="dst", right_on="mid")
        .select("src", "far")
        .distinct()
    )
    outputs = [
        degree.output(),
        two_hop.output(),
        dd.graph.connected_components(edges).output(),
        dd.graph.strongly_connected_components(edges).output(),
    ]
    return edges, outputs


# a stream: per epoch, edges inserted and some of the live ones removed
@st.composite
def streams(draw):
    live: list[tuple[int, int]] = []
    epochs = []
    for _ in range(draw(st.integers(2, 5))):
        ins = draw(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=8))
        rem = draw(st.lists(st.sampled_from(live), max_size=3, unique=True)) if live else []
        for r in rem:
            live.remove(r)
        live += ins
        epochs.append((ins, rem))
    return epochs


def feed(flow, edges, epochs, start):
    for e, (ins, rem) in enumerate(epochs, start=start):
        edges.insert(ins)
        edges.remove(rem)
        flow.advance_to(e + 1)
        flow.run()


def results(outputs, epoch):
    return [sorted(o.snapshot_polars(epoch).rows()) for o in outputs]


@pytest.mark.parametrize("runtime", RUNTIMES)
@settings(max_examples=8, deadline=None)
@given(stream=streams(), data=st.data())
def test_a_restored_flow_goes_on_as_one_that_never_stopped(runtime, stream, data, tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("ckpt"))
    cut = data.draw(st.integers(1, len(stream) - 1), label="epochs before the checkpoint")
    flow = new_flow(runtime, None)
    edges, outputs = graph_queries(flow)
    feed(flow, edges, stream, 0)
    expected = [results(outputs, e) for e in range(len(stream))]

    first = new_flow(runtime, directory)
    edges, outputs = graph_queries(first)
    feed(first, edges, stream[:cut], 0)
    assert first.checkpoint() == cut - 1
    del first, edges, outputs

    again = new_flow(runtime, directory)
    edges, outputs = graph_queries(again)
    assert again.restore() == cut - 1
    assert again.epoch == cut
    assert results(outputs, cut - 1) == expected[cut - 1]
    feed(again, edges, stream[cut:], cut)
    live: list[tuple[int, int]] = []
    for e, (ins, rem) in enumerate(stream):
        for r in rem:
            live.remove(r)
        live += ins
        if e >= cut - 1:
            assert results(outputs, e) == expected[e], e
            # (and the components are NetworkX's, recomputed from the epoch's edges)
            graph = nx.Graph(live)
            want = {n: min(c) for c in nx.connected_components(graph) for n in c}
            assert {n: label for n, label, _ in results(outputs, e)[2]} == want, e


def test_checked_inputs_keep_their_multiplicities_and_outputs_their_contents(tmp_path):
    flow = dd.Dataflow(checkpoint=tmp_path)
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.output()
    xs.insert([1, 1, 2])
    flow.advance_to(1)
    flow.run()
    flow.checkpoint()
    again = dd.Dataflow(checkpoint=tmp_path)
    ys = again.input("xs", schema={"k": "int64"})
    out = ys.output()
    assert again.restore() == 0
    ys.remove([1, 1])  # (inserted before the checkpoint: the check knows them)
    with pytest.raises(dd.InputError, match="below zero"):
        ys.remove([2, 2])
    again.advance_to(2)
    again.run()
    assert out.snapshot_polars(1).rows() == [(2, 1)]
    assert out.snapshot_polars(0).rows() == [(1, 2), (2, 1)]
    assert out.changes().shape[0] == 3  # (the restored contents, then epoch 1's change)
    with pytest.raises(dd.TimeError, match="restored from a checkpoint of epoch 0"):
        out.snapshot(epoch=-1)


class Counter(dd.Vertex):
    """Counts the rows it has seen, and at each epoch's end, and two epochs later, says how
    many (a notification at a future epoch is state too)."""

    def __init__(self):
        self.seen = 0

    def on_recv(self, edge, batch, time):
        self.seen += batch.height
        self.notify_at(time)
        self.notify_at((time[0] + 2,))

    def on_notify(self, time):
        self.send_by(0, [(time[0], self.seen)], time)

    def checkpoint(self):
        return {"seen": self.seen}

    def restore(self, state):
        self.seen = state["seen"]


class Forgetful(Counter):
    checkpoint = dd.Vertex.checkpoint
    restore = dd.Vertex.restore


def vertex_flow(directory, cls=Counter):
    flow = dd.Dataflow(checkpoint=directory)
    xs = flow.input("xs", schema={"k": "int64"})
    (counts,) = flow.vertex(cls(), [xs], [{"epoch": "int64", "seen": "int64"}])
    return flow, xs, counts.output()


def test_a_vertex_saves_its_state_and_the_notifications_it_waits_for(tmp_path):
    flow, xs, out = vertex_flow(None)
    for e in range(4):
        xs.insert([e] * (e + 1))
        flow.advance_to(e + 1)
        flow.run()
    flow.advance_to(6)
    flow.run()
    expected = sorted(out.snapshot_polars(5).rows())

    flow, xs, out = vertex_flow(tmp_path)
    for e in range(2):
        xs.insert([e] * (e + 1))
        flow.advance_to(e + 1)
        flow.run()
    flow.checkpoint()
    flow, xs, out = vertex_flow(tmp_path)
    flow.restore()
    for e in range(2, 4):
        xs.insert([e] * (e + 1))
        flow.advance_to(e + 1)
        flow.run()
    flow.advance_to(6)
    flow.run()
    assert sorted(out.snapshot_polars(5).rows()) == expected

    flow, xs, out = vertex_flow(tmp_path / "other", Forgetful)
    xs.insert([1])
    flow.advance_to(1)
    flow.run()
    with pytest.raises(dd.CheckpointError, match=r"Forgetful keeps state \(seen\)") as info:
        flow.checkpoint()
    assert info.value.site.filename == __file__


def count_flow(directory, extra=False, **kw):
    flow = dd.Dataflow(checkpoint=directory, **kw)
    xs = flow.input("xs", schema={"k": "int64"})
    counted = xs.group_by("k").agg(n=dd.count())
    if extra:
        counted = counted.filter(col("n") > 1)
    return flow, xs, counted.output()


def run_epochs(flow, xs, epochs, start=0):
    for e in range(start, start + epochs):
        xs.insert([e % 3, 7])
        flow.advance_to(e + 1)
        flow.run()


def test_checkpoint_every_n_epochs_keeps_the_newest(tmp_path):
    flow, xs, _ = count_flow(tmp_path, checkpoint_every=2, keep=2)
    run_epochs(flow, xs, 7)
    assert checkpoints.checkpoints(str(tmp_path)) == ["epoch=000000003", "epoch=000000005"]
    assert flow.checkpointed == 5


def flip_a_byte(path):
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def manifest(root):
    return json.loads((Path(root) / "manifest.json").read_text())


@pytest.mark.parametrize(
    "damage",
    [
        lambda root, f: flip_a_byte(os.path.join(root, f)),
        lambda root, f: os.truncate(os.path.join(root, f), 10),
        lambda root, f: (Path(root) / "manifest.json").write_text("{not json"),
    ],
    ids=["byte-flipped", "truncated", "manifest"],
)
def test_a_damaged_checkpoint_is_skipped_for_the_one_before(tmp_path, damage):
    flow, xs, out = count_flow(tmp_path)
    run_epochs(flow, xs, 2)
    flow.checkpoint()
    run_epochs(flow, xs, 1, start=2)
    flow.checkpoint()
    newest = os.path.join(tmp_path, "epoch=000000002")
    damage(newest, sorted(manifest(newest)["files"])[-1])
    again, _, out = count_flow(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"epoch=000000002 is skipped"):
        assert again.restore() == 1
    assert sorted(out.snapshot_polars(1).rows()) == [(0, 1, 1), (1, 1, 1), (7, 2, 1)]


def test_when_every_checkpoint_is_damaged_restore_refuses_listing_each(tmp_path):
    """Regression: with every checkpoint damaged, ``restore()`` returned None (with
    warnings), as when there is none, and a program that ignored warnings started again from
    epoch 0. It raises, naming each checkpoint and what is wrong with it."""
    flow, xs, _ = count_flow(tmp_path)
    run_epochs(flow, xs, 2)
    flow.checkpoint()
    run_epochs(flow, xs, 1, start=2)
    flow.checkpoint()
    older = os.path.join(tmp_path, "epoch=000000001")
    newest = os.path.join(tmp_path, "epoch=000000002")
    flip_a_byte(os.path.join(older, sorted(manifest(older)["files"])[0]))
    (Path(newest) / "manifest.json").write_text("{not json")
    again, _, _ = count_flow(tmp_path)
    line = sys._getframe().f_lineno + 2
    with pytest.warns(RuntimeWarning), pytest.raises(dd.CheckpointError) as info:
        again.restore()
    message = str(info.value)
    assert "every checkpoint" in message and "damaged" in message
    assert f"{newest}: its manifest cannot be read" in message
    assert f"{older}: " in message and "does not match its checksum" in message
    assert info.value.site is not None and info.value.site.lineno == line


def test_a_checkpoint_of_another_plan_is_refused_naming_the_difference(tmp_path):
    flow, xs, _ = count_flow(tmp_path)
    run_epochs(flow, xs, 1)
    flow.checkpoint()
    other, _, _ = count_flow(tmp_path, extra=True)
    with pytest.raises(dd.CheckpointError, match=r"its node 2: output\(1\).* is here 2: filter"):
        other.restore()
    longer = dd.Dataflow(checkpoint=tmp_path)
    counted = longer.input("xs", schema={"k": "int64"}).group_by("k").agg(n=dd.count())
    counted.output()
    counted.distinct().output()
    with pytest.raises(dd.CheckpointError, match=r"this dataflow has more nodes, from 3: reduce"):
        longer.restore()
    schema = dd.Dataflow(checkpoint=tmp_path)
    schema.input("xs", schema={"k": "str"}).group_by("k").agg(n=dd.count()).output()
    with pytest.raises(
        dd.CheckpointError, match=r"its node 0: input\(\) .*int64.* is here 0: input"
    ):
        schema.restore()
    workers, _, _ = count_flow(tmp_path, workers=2, processes=False)
    with pytest.raises(dd.CheckpointError, match="of 1 workers and this dataflow has 2"):
        workers.restore()


def test_when_a_checkpoint_cannot_be_taken_it_says_why(tmp_path):
    flow, xs, _ = count_flow(tmp_path)
    with pytest.raises(dd.CheckpointError, match=r"after run\(\)"):
        flow.checkpoint()
    run_epochs(flow, xs, 1)
    xs.insert([5])
    flow.run()  # (epoch 1's updates run before epoch 1 is complete)
    with pytest.raises(dd.CheckpointError, match=r"already ran updates of epoch 1"):
        flow.checkpoint()
    nowhere, ys, _ = count_flow(None)
    run_epochs(nowhere, ys, 1)
    with pytest.raises(dd.CheckpointError, match="nowhere to write"):
        nowhere.checkpoint()
    empty, _, _ = count_flow(tmp_path / "empty")
    assert empty.restore() is None


def test_after_a_failure_in_run_restore_brings_the_same_flow_back(tmp_path):
    fail = {"on": False}

    def double(k):
        if fail["on"] and k == 13:
            raise ValueError("thirteen")
        return 2 * k

    def make():
        flow = dd.Dataflow(checkpoint=tmp_path)
        xs = flow.input("xs", schema={"k": "int64"})
        out = xs.map(lambda r: (double(r[0]),), schema={"d": "int64"}).output()
        return flow, xs, out

    flow, xs, out = make()
    xs.insert([1, 2])
    flow.advance_to(1)
    flow.run()
    flow.checkpoint()
    fail["on"] = True
    xs.insert([13])
    flow.advance_to(2)
    with pytest.raises(dd.UserFunctionError, match="thirteen"):
        flow.run()
    with pytest.raises(dd.DataflowFailedError):
        xs.insert([3])
    fail["on"] = False
    assert flow.restore() == 0
    assert flow.epoch == 1
    xs.insert([13, 3])
    flow.advance_to(2)
    flow.run()
    assert sorted(out.snapshot_polars(1).rows()) == [(2, 1), (4, 1), (6, 1), (26, 1)]


def test_the_cost_follows_the_live_state_not_the_history(tmp_path):
    """Many epochs that insert and retract the same records: the checkpoint holds the live
    records (and a few times of theirs), not every update."""
    rng = random.Random(1)
    flow, xs, _ = count_flow(tmp_path)
    live = list(range(50))
    xs.insert(live)
    flow.advance_to(1)
    flow.run()
    for e in range(1, 60):
        r = rng.choice(live)
        xs.remove([r])
        xs.insert([r])
        flow.advance_to(e + 1)
        flow.run()
    flow.checkpoint()
    root = os.path.join(tmp_path, checkpoints.checkpoints(str(tmp_path))[-1])
    rows = sum(
        pl.read_parquet(os.path.join(root, f)).height
        for f in manifest(root)["files"]
        if f.startswith("worker-")
    )
    assert rows <= 4 * 50, rows


@pytest.mark.parametrize("host", ["processes", pytest.param("spark", marks=pytest.mark.spark)])
def test_worker_processes_and_spark_tasks_write_and_load_their_parts(tmp_path, host, request):
    """Each worker writes its part of the checkpoint (on Spark, the tasks: the directory is
    one every executor reaches, here the machine's)."""
    stream = [([(1, 2), (2, 3), (5, 6)], []), ([(3, 4)], [(1, 2)]), ([(6, 7), (4, 1)], [])]
    stream += [([(7, 5)], [(2, 3)]), ([(1, 2)], [(6, 7)])]

    def make(directory):
        if host == "spark":
            spark = request.getfixturevalue("spark")
            flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2), checkpoint=directory)
        else:
            flow = dd.Dataflow(workers=2, checkpoint=directory)
        edges, outputs = graph_queries(flow)
        return flow, edges, outputs

    flow, edges, outputs = make(None)
    feed(flow, edges, stream, 0)
    expected = [results(outputs, e) for e in range(len(stream))]
    flow.close()
    flow, edges, outputs = make(tmp_path)
    feed(flow, edges, stream[:2], 0)
    assert flow.checkpoint() == 1
    flow.close()
    parts = os.listdir(tmp_path / "epoch=000000001")
    assert "worker-0" in parts and "worker-1" in parts
    flow, edges, outputs = make(tmp_path)
    try:
        assert flow.restore() == 1
        feed(flow, edges, stream[2:], 2)
        for e in range(1, len(stream)):
            assert results(outputs, e) == expected[e], e
    finally:
        flow.close()


def test_after_a_worker_died_restore_brings_the_flow_back_on_new_workers(tmp_path):
    import signal

    stream = [([(1, 2), (2, 3), (5, 6)], []), ([(3, 4)], [(1, 2)]), ([(6, 7), (4, 1)], [])]
    reference = dd.Dataflow()
    edges, outputs = graph_queries(reference)
    feed(reference, edges, stream, 0)
    expected = results(outputs, 2)

    flow = dd.Dataflow(workers=2, checkpoint=tmp_path)
    edges, outputs = graph_queries(flow)
    try:
        feed(flow, edges, stream[:2], 0)
        flow.checkpoint()
        os.kill(flow._processes.procs[0].pid, signal.SIGKILL)
        ins, rem = stream[2]
        edges.insert(ins)
        flow.advance_to(3)
        with pytest.raises(dd.WorkerError, match="killed by signal SIGKILL"):
            flow.run()
        assert flow.restore() == 1
        edges.insert(ins)
        edges.remove(rem)
        flow.advance_to(3)
        flow.run()
        assert results(outputs, 2) == expected
    finally:
        flow.close()
