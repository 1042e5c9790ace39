"""The Spark data pipeline end to end: folder and streaming sources, windows, Parquet sinks (the
sources on one worker, on two worker processes, and on two workers hosted by Spark)."""

from __future__ import annotations

import os
import random

import networkx as nx
import polars as pl
import pytest

import ddflow as dd
from ddflow.io import spark as io
from ddflow.testing import frame_to_counter

pytestmark = pytest.mark.spark


#: the flows a test made, closed after it (two workers hosted by Spark hold a task slot)
OPEN: list[dd.Dataflow] = []


@pytest.fixture(autouse=True)
def _close_flows():
    yield
    while OPEN:
        OPEN.pop().close()


def new_flow(spark, workers):
    """One worker, two worker processes, or two workers hosted by Spark (``"spark-2"``)."""
    if workers == "spark-2":
        flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
    else:
        flow = dd.Dataflow(workers=workers)
    OPEN.append(flow)
    return flow


def components(edges):
    """Connected components by min-label propagation, written with the public operators."""
    col = dd.col
    sym = edges.select("src", "dst").concat(edges.select(src=col("dst"), dst=col("src")))
    nodes = sym.select(node=col("src")).distinct().with_columns(label=col("node"))
    return nodes.iterate(
        lambda x: (
            x.join(sym, left_on="node", right_on="src")
            .select(node=col("dst"), label=col("label"))
            .concat(nodes)
            .group_by("node")
            .agg(label=dd.min("label"))
        )
    )


def nx_labels(edge_list):
    g = nx.Graph()
    g.add_edges_from(edge_list)
    return {n: min(c) for c in nx.connected_components(g) for n in c}


def write_epoch_files(folder, epochs, fmt="parquet"):
    os.makedirs(folder, exist_ok=True)
    for i, rows in enumerate(epochs):
        frame = pl.DataFrame(
            rows, schema={"src": pl.Int64, "dst": pl.Int64, "ts": pl.Int64}, orient="row"
        )
        path = os.path.join(folder, f"part-{i:04d}.{fmt}")
        if fmt == "parquet":
            frame.write_parquet(path)
        else:
            frame.write_csv(path)


@pytest.mark.parametrize("workers", [1, 2, "spark-2"])
def test_folder_source_loads_each_file_as_an_epoch(spark, tmp_path, workers):
    rng = random.Random(1)
    epochs = [[(rng.randrange(12), rng.randrange(12), i) for _ in range(6)] for i in range(4)]
    folder = str(tmp_path / "in")
    write_epoch_files(folder, epochs[:2], fmt="csv")
    flow = new_flow(spark, workers)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"})
    out = components(edges).output()
    source = io.FolderSource(spark, edges, folder, format="csv")
    assert source.poll() == [0, 1]
    write_epoch_files(folder, epochs, fmt="csv")  # two more files appear
    assert source.poll() == [2, 3]
    assert source.poll() == []
    seen = []
    for e, rows in enumerate(epochs):
        seen += [(s, d) for s, d, _ in rows]
        snap = out.snapshot(epoch=e)
        assert dict(zip(snap["node"], snap["label"], strict=True)) == nx_labels(seen)


def test_a_malformed_file_is_named_and_loses_nothing(spark, tmp_path):
    folder = tmp_path / "in"
    write_epoch_files(str(folder), [[(1, 2, 0)]])
    (folder / "part-0001.parquet").write_bytes(b"this is not parquet")
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"})
    out = edges.output()
    source = io.FolderSource(spark, edges, str(folder))
    with pytest.raises(dd.InputError, match=r"part-0001\.parquet") as info:
        source.poll()
    # the root cause comes first, in one line, not buried in Spark's Java stack trace
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    assert "not a parquet file" in message.lower(), message
    assert frame_to_counter(out.snapshot(epoch=0)) == {(1, 2, 0): 1}


@pytest.mark.parametrize("workers", [1, 2, "spark-2"])
def test_dataframe_and_change_sources(spark, workers):
    flow = new_flow(spark, workers)
    xs = flow.input("xs", schema={"k": "str", "v": "int64"})
    out = xs.group_by("k").agg(total=dd.sum("v")).output()
    io.insert_dataframe(
        xs, spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k string, v long")
    )
    flow.advance_to(1)
    changes = spark.createDataFrame([("a", 1, -1), ("b", 5, 2)], "k string, v long, d long")
    io.insert_dataframe(xs, changes, diff="d")
    flow.advance_to(2)
    flow.run()
    assert frame_to_counter(out.snapshot(0)) == {("a", 4): 1, ("b", 2): 1}
    assert frame_to_counter(out.snapshot(1)) == {("a", 3): 1, ("b", 12): 1}
    with pytest.raises(dd.SchemaError, match="missing"):
        io.insert_dataframe(xs, spark.createDataFrame([("a",)], "k string"))


def test_event_time_windows_retract_what_expires():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"id": "int64", "ts": "int64"})
    out = xs.output()
    sliding = io.EventTimeWindow(xs, "ts", size=10)
    sliding.add(pl.DataFrame({"id": [1, 2], "ts": [0, 5]}))
    flow.advance_to(1)
    sliding.add(pl.DataFrame({"id": [3], "ts": [12]}))  # watermark 12: ts <= 2 expires
    flow.advance_to(2)
    sliding.add(pl.DataFrame({"id": [4], "ts": [1]}))  # late: dropped
    flow.advance_to(3)
    flow.run()
    assert frame_to_counter(out.snapshot(1)) == {(2, 5): 1, (3, 12): 1}
    assert sliding.dropped == 1

    flow2 = dd.Dataflow()
    ys = flow2.input("ys", schema={"id": "int64", "ts": "int64"})
    out2 = ys.output()
    tumbling = io.EventTimeWindow(ys, "ts", size=10, slide=10)
    tumbling.add(pl.DataFrame({"id": [1, 2], "ts": [3, 9]}))
    flow2.advance_to(1)
    tumbling.add(pl.DataFrame({"id": [3], "ts": [14]}))  # window [10, 20) starts
    flow2.advance_to(2)
    flow2.run()
    assert frame_to_counter(out2.snapshot(0)) == {(1, 3): 1, (2, 9): 1}
    assert frame_to_counter(out2.snapshot(1)) == {(3, 14): 1}


def test_sinks_replace_an_epoch_written_twice(tmp_path):
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.output()
    log = io.ParquetChangeLog(out, str(tmp_path / "log"))
    xs.insert([1, 2])
    flow.advance_to(1)
    flow.run()
    # a crashed earlier attempt left a temporary directory; the epoch is written again
    os.makedirs(tmp_path / "log" / "_tmp-crashed")
    log.write(out.changes())
    replay = io.read_change_log(str(tmp_path / "log"), polars=True)
    assert sorted(replay.get_column("k").to_list()) == [1, 2]


@pytest.mark.parametrize("workers", [1, 2, "spark-2"])
def test_streaming_files_into_windowed_components_and_parquet_sinks(spark, tmp_path, workers):
    rng = random.Random(7)
    batches = []
    for i in range(5):
        batches.append([(rng.randrange(15), rng.randrange(15), 10 * i + j) for j in range(5)])
    folder = str(tmp_path / "stream")
    os.makedirs(folder)
    flow = new_flow(spark, workers)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"})
    out = components(edges).output()
    log = io.ParquetChangeLog(out, str(tmp_path / "log"), spark=spark)
    snap_sink = io.ParquetSnapshot(out, str(tmp_path / "snapshot"))
    window = io.EventTimeWindow(edges, "ts", size=25)
    stream = (
        spark.readStream.schema(io.spark_schema(edges))
        .option("maxFilesPerTrigger", 1)
        .parquet(folder)
    )
    source = io.StreamingSource(stream, window, flow, checkpoint=str(tmp_path / "ckpt"))
    try:
        for i, rows in enumerate(batches):
            write_epoch_files(folder + "/tmp", [rows])
            os.replace(f"{folder}/tmp/part-0000.parquet", f"{folder}/batch-{i:03d}.parquet")
            source.wait_for(i + 1, timeout=120)
    finally:
        source.stop()
    assert source.batches == len(batches)
    # the change log, replayed, equals the snapshot of every epoch
    replay = spark.read.parquet(str(tmp_path / "log")).toPandas()
    for e in range(len(batches)):
        upto = replay[replay["time"] <= e]
        acc = upto.groupby(["node", "label"])["diff"].sum()
        acc = {k: v for k, v in acc.items() if v}
        assert acc == frame_to_counter(out.snapshot(e))
        # and the window kept exactly the edges of the last 25 time units
        live = [r for b in batches[: e + 1] for r in b if r[2] > max(x[2] for x in batches[e]) - 25]
        snap = out.snapshot(e)
        labels = dict(zip(snap["node"], snap["label"], strict=True))
        assert labels == nx_labels([(s, d) for s, d, _ in live])
    table = pl.read_parquet(str(tmp_path / "snapshot") + "/*.parquet")
    assert frame_to_counter(table) == frame_to_counter(out.snapshot())
    assert snap_sink.epoch == len(batches) - 1
    assert log.written == sorted(set(log.written))


def test_a_stopped_streaming_source_lets_go_of_its_flow(spark, tmp_path):
    """(Spark's callback server keeps the source's foreachBatch function for the session's
    life: a flow the source kept would keep its workers, and on Spark their task slots.)"""
    import gc
    import weakref

    folder = str(tmp_path / "stream")
    write_epoch_files(folder, [[(1, 2, 0)]])
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"})
    out = edges.output()
    stream = spark.readStream.schema(io.spark_schema(edges)).parquet(folder)
    source = io.StreamingSource(stream, edges, flow, checkpoint=str(tmp_path / "ckpt"))
    source.wait_for(1, timeout=120)
    source.stop()
    assert frame_to_counter(out.snapshot()) == {(1, 2, 0): 1}
    alive = weakref.ref(flow)
    del flow, edges, out
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("workers", [1, 2, "spark-2"])
def test_parquet_folders_are_read_by_the_workers(spark, tmp_path, workers):
    rng = random.Random(3)
    epochs = [[(rng.randrange(30), rng.randrange(30), i) for _ in range(40)] for i in range(3)]
    folder = str(tmp_path / "in")
    for i, rows in enumerate(epochs):  # (an epoch a sub-folder of two files)
        write_epoch_files(f"{folder}/epoch-{i}", [rows[:20], rows[20:]])
    flow = new_flow(spark, workers)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"}, signed=True)
    out = components(edges).output()
    source = io.FolderSource(spark, edges, folder)
    assert source.poll() == [0, 1, 2]
    seen = []
    for e, rows in enumerate(epochs):
        seen += [(s, d) for s, d, _ in rows]
        snap = out.snapshot(epoch=e)
        assert dict(zip(snap["node"], snap["label"], strict=True)) == nx_labels(seen)


def _bytes_to_worker_1(spark, folder, signed):
    flow = new_flow(spark, "spark-2")
    xs = flow.input("xs", schema={"src": "int64", "dst": "int64", "ts": "int64"}, signed=signed)
    out = xs.group_by("src").agg(n=dd.count()).output()
    xs.read_parquet(folder)
    flow.advance_to(1)
    flow.run()
    assert out.snapshot_polars(0)["n"].sum() == 20_000
    sent = flow.worker.shards[1].bytes_out
    OPEN.remove(flow)
    flow.close()
    return sent


def test_on_spark_the_hosted_worker_reads_its_share_itself(spark, tmp_path):
    """With the driver reading, it sends worker 1 the updates of worker 1's keys (half of
    them); with the workers reading, worker 1 keeps what it read of its keys (a quarter) and
    the driver sends it a quarter."""
    rng = random.Random(5)
    rows = [(rng.randrange(10_000), rng.randrange(100), 0) for _ in range(20_000)]
    folder = str(tmp_path / "in")
    write_epoch_files(folder, [rows[:10_000], rows[10_000:]])
    through_driver = _bytes_to_worker_1(spark, folder, signed=False)
    by_the_workers = _bytes_to_worker_1(spark, folder, signed=True)
    assert by_the_workers < 0.7 * through_driver, (by_the_workers, through_driver)


@pytest.mark.parametrize("workers", [2, "spark-2"])
def test_dataframes_and_streams_staged_for_the_workers(spark, tmp_path, workers):
    staging = str(tmp_path / "staging")
    os.makedirs(staging)
    flow = new_flow(spark, workers)
    xs = flow.input("xs", schema={"k": "str", "v": "int64"}, signed=True)
    out = xs.group_by("k").agg(total=dd.sum("v")).output()
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k string, v long").repartition(2)
    io.insert_dataframe(xs, df, staging=staging)
    assert len(os.listdir(staging)) == 1  # (Spark wrote it there)
    flow.advance_to(1)
    changes = spark.createDataFrame([("a", 1, -1), ("b", 5, 2)], "k string, v long, d long")
    io.insert_dataframe(xs, changes, diff="d", staging=staging)
    flow.advance_to(2)
    flow.run()
    assert os.listdir(staging) == []  # (removed once run)
    assert frame_to_counter(out.snapshot(0)) == {("a", 4): 1, ("b", 2): 1}
    assert frame_to_counter(out.snapshot(1)) == {("a", 3): 1, ("b", 12): 1}
    # a stream's micro-batches likewise
    folder = str(tmp_path / "stream")
    os.makedirs(folder)
    with open(folder + "/b0.json", "w") as f:
        f.write('{"k": "a", "v": 10}\n{"k": "c", "v": 1}\n')
    ys = spark.readStream.schema("k string, v long").json(folder)
    source = io.StreamingSource(ys, xs, flow, checkpoint=str(tmp_path / "ckpt"), staging=staging)
    try:
        source.wait_for(1, timeout=120)
    finally:
        source.stop()
    assert frame_to_counter(out.snapshot(2)) == {("a", 13): 1, ("b", 12): 1, ("c", 1): 1}
    assert os.listdir(staging) == []


def test_the_spark_runtime_stages_what_the_executors_computed(spark):
    flow = new_flow(spark, "spark-2")
    staging = flow.runtime.staging
    xs = flow.input("xs", schema={"k": "int64", "v": "int64"}, signed=True)
    out = xs.group_by("k").agg(total=dd.sum("v")).output()
    computed = spark.range(1000).selectExpr("id % 7 as k", "id as v")  # (by the executors)
    xs.insert_frame(computed)
    assert len(os.listdir(staging)) == 1
    xs.insert_frame(pl.DataFrame({"k": [0], "v": [5]}))  # (at the driver: not staged)
    assert len(os.listdir(staging)) == 1
    flow.advance_to(1)
    flow.run()
    assert os.listdir(staging) == []
    want = {
        (k, sum(v for v in range(1000) if v % 7 == k) + (5 if k == 0 else 0)): 1 for k in range(7)
    }
    assert frame_to_counter(out.snapshot(0)) == want


def test_a_window_restored_from_a_checkpoint_retracts_what_expires(tmp_path):
    """An EventTimeWindow's live records and watermark go into checkpoints: restored, it
    retracts what it inserted before the checkpoint."""

    def build():
        flow = dd.Dataflow(checkpoint=tmp_path)
        xs = flow.input("xs", schema={"id": "int64", "ts": "int64"})
        return flow, io.EventTimeWindow(xs, "ts", size=10), xs.output()

    flow, window, out = build()
    window.add(pl.DataFrame({"id": [1, 2], "ts": [0, 5]}))
    flow.advance_to(1)
    flow.run()
    flow.checkpoint()
    flow, window, out = build()
    assert flow.restore() == 0
    assert window.watermark == 5 and window.live.height == 2
    window.add(pl.DataFrame({"id": [3, 4], "ts": [12, 1]}))  # ts <= 2 expires; 1 is late
    flow.advance_to(2)
    flow.run()
    assert frame_to_counter(out.snapshot(1)) == {(2, 5): 1, (3, 12): 1}
    assert window.dropped == 1


def run_stream(source, batches):
    """Wait for ``batches`` micro-batches of ``source``, then stop it; the source."""
    try:
        source.wait_for(batches, timeout=120)
    finally:
        source.stop()
    return source


def test_a_restored_stream_skips_the_micro_batches_it_had_run(spark, tmp_path):
    """A StreamingSource's last micro-batch goes into checkpoints: a source made after the
    restore skips the batches Spark sends again (here all of them: a new Spark checkpoint)."""
    folder = str(tmp_path / "stream")
    write_epoch_files(folder, [[(1, 2, 0)], [(2, 3, 1)]])

    def build(spark_checkpoint):
        flow = dd.Dataflow(checkpoint=tmp_path / "ckpt", checkpoint_every=1)
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "ts": "int64"})
        out = edges.output()
        stream = (
            spark.readStream.schema(io.spark_schema(edges))
            .option("maxFilesPerTrigger", 1)
            .parquet(folder)
        )
        return flow, edges, out, stream, str(tmp_path / spark_checkpoint)

    flow, edges, out, stream, sc = build("spark-1")
    with pytest.raises(dd.InputError, match="checkpoint_every=1"):
        io.StreamingSource(stream, edges, dd.Dataflow(checkpoint=tmp_path, checkpoint_every=2))
    run_stream(io.StreamingSource(stream, edges, flow, checkpoint=sc), 2)
    assert flow.checkpointed == 1
    flow, edges, out, stream, sc = build("spark-2")  # (Spark sends both batches again)
    assert flow.restore() == 1
    write_epoch_files(folder + "-more", [[(3, 4, 2)]])
    os.replace(f"{folder}-more/part-0000.parquet", f"{folder}/part-0002.parquet")
    source = run_stream(io.StreamingSource(stream, edges, flow, checkpoint=sc), 1)
    assert source.last_batch == 2
    assert frame_to_counter(out.snapshot()) == {(1, 2, 0): 1, (2, 3, 1): 1, (3, 4, 2): 1}
