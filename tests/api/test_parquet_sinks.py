"""The Parquet sinks written by the workers in parallel: the change log, replayed, equals the
output at every epoch, and the snapshot equals the output's last epoch, on one worker and on
several; an epoch is committed whole, and written again it is replaced."""

from __future__ import annotations

import collections
import os

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.io import spark as io
from ddflow.testing import frame_to_counter

RUNTIMES = ["embedded", (3, False), (2, True)]


def new_flow(runtime):
    if runtime == "embedded":
        return dd.Dataflow()
    workers, processes = runtime
    return dd.Dataflow(workers=workers, processes=processes)


def replay(log, upto):
    """The change log's changes at epochs <= upto, accumulated (``log`` as pandas, as
    ``read_change_log`` gives it by default)."""
    acc = collections.Counter()
    for row in log[log["time"] <= upto].itertuples():
        acc[(row.v, row.n)] += row.diff
    return {k: n for k, n in acc.items() if n}


# an epoch: (key, value) rows inserted, and some of the live ones removed
@st.composite
def streams(draw):
    live: collections.Counter = collections.Counter()
    epochs = []
    for _ in range(draw(st.integers(1, 4))):
        ins = draw(st.lists(st.tuples(st.integers(0, 20), st.sampled_from("abcde")), max_size=10))
        present = sorted(r for r, n in live.items() if n)
        rem = draw(st.lists(st.sampled_from(present), max_size=3, unique=True)) if present else []
        for r in ins:
            live[r] += 1
        for r in rem:
            live[r] -= 1
        epochs.append((ins, rem))
    return epochs


@pytest.mark.parametrize("runtime", RUNTIMES)
@settings(max_examples=10, deadline=None)
@given(stream=streams())
def test_the_change_log_replays_every_epoch_and_the_snapshot_is_the_last(
    runtime, stream, tmp_path_factory
):
    root = tmp_path_factory.mktemp("sinks")
    flow = new_flow(runtime)
    xs = flow.input("xs", schema={"k": "int64", "v": "str"})
    out = xs.group_by("v").agg(n=dd.count()).output()
    log = io.ParquetChangeLog(out, str(root / "log"))
    snap = io.ParquetSnapshot(out, str(root / "snap"))
    for e, (ins, rem) in enumerate(stream):
        xs.insert(ins)
        xs.remove(rem)
        flow.advance_to(e + 1)
        flow.run()
    changes = io.read_change_log(str(root / "log")) if log.written else None
    live: collections.Counter = collections.Counter()
    for e, (ins, rem) in enumerate(stream):
        live.update(ins)
        live.subtract(rem)
        counts = collections.Counter()  # (the group-by, recomputed from the stream)
        for (_, v), n in live.items():
            counts[v] += n
        want = {(v, n): 1 for v, n in counts.items() if n}
        assert frame_to_counter(out.snapshot(e)) == want
        assert (replay(changes, e) if changes is not None else {}) == want
    assert log.written == sorted({e for e in range(len(stream)) if out.changes().time.eq(e).any()})
    table = pl.read_parquet(str(root / "snap" / "*.parquet"))
    assert frame_to_counter(table) == frame_to_counter(out.snapshot())
    assert (root / "snap" / "_EPOCH").read_text() == str(len(stream) - 1) == str(snap.epoch)
    flow.close()


def test_each_worker_writes_its_part_and_the_driver_commits_the_epoch(tmp_path):
    flow = dd.Dataflow(workers=3, processes=False)
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.output()
    io.ParquetChangeLog(out, str(tmp_path / "log"))
    io.ParquetSnapshot(out, str(tmp_path / "snap"))
    xs.insert(range(300))
    flow.advance_to(1)
    flow.run()
    epoch = tmp_path / "log" / "epoch=000000000"
    assert sorted(os.listdir(epoch)) == [f"part-{w:05d}.parquet" for w in range(3)]
    sizes = [pl.read_parquet(epoch / f).height for f in sorted(os.listdir(epoch))]
    assert sum(sizes) == 300 and min(sizes) > 50  # (each worker wrote the records it owns)
    assert sorted(os.listdir(tmp_path / "log")) == ["epoch=000000000"]  # (nothing staged left)
    snap = sorted(f for f in os.listdir(tmp_path / "snap") if f.endswith(".parquet"))
    assert snap == [f"part-{w:05d}.parquet" for w in range(3)]
    # an epoch that changes one worker's records rewrites that part alone
    xs.remove([0])
    flow.advance_to(2)
    flow.run()
    table = pl.read_parquet(str(tmp_path / "snap" / "*.parquet"))
    assert sorted(table["k"].to_list()) == list(range(1, 300))


def test_an_epoch_written_again_replaces_the_first_attempt(tmp_path):
    path = str(tmp_path / "log")
    for attempt in range(2):  # (a job run again from the start writes the same epochs)
        flow = dd.Dataflow(workers=2, processes=False)
        xs = flow.input("xs", schema={"k": "int64"})
        out = xs.output()
        io.ParquetChangeLog(out, path)
        if attempt:  # (a crashed attempt left a staged epoch behind: readers skip it)
            os.makedirs(os.path.join(path, "_tmp-epoch=000000001-crashed"))
            pl.DataFrame({"k": [99], "time": [1], "diff": [1]}).write_parquet(
                os.path.join(path, "_tmp-epoch=000000001-crashed", "part-00000.parquet")
            )
        xs.insert([1, 2, 3])
        flow.advance_to(1)
        xs.remove([2])
        flow.advance_to(2)
        flow.run()
    log = io.read_change_log(path, polars=True)
    assert sorted(log.select("k", "time", "diff").rows()) == [
        (1, 0, 1),
        (2, 0, 1),
        (2, 1, -1),
        (3, 0, 1),
    ]


def test_sinks_made_after_the_flow_ran_are_written_by_the_driver(tmp_path):
    flow = dd.Dataflow(workers=2, processes=False)
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.output()
    xs.insert([1])
    flow.advance_to(1)
    flow.run()
    log = io.ParquetChangeLog(out, str(tmp_path / "log"))
    snap = io.ParquetSnapshot(out, str(tmp_path / "snap"), every=2)
    xs.insert([2])
    flow.advance_to(2)
    flow.run()
    xs.insert([3])
    flow.advance_to(3)
    flow.run()
    assert log.written == [1, 2]
    assert sorted(io.read_change_log(str(tmp_path / "log"))["k"].to_list()) == [2, 3]
    assert snap.epoch == 2
    assert sorted(pl.read_parquet(str(tmp_path / "snap" / "*.parquet"))["k"].to_list()) == [1, 2, 3]


def test_a_snapshot_every_two_epochs_and_an_empty_one(tmp_path):
    flow = dd.Dataflow(workers=2, processes=False)
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.output()
    snap = io.ParquetSnapshot(out, str(tmp_path / "snap"), every=2)
    flow.advance_to(1)
    flow.run()
    table = pl.read_parquet(str(tmp_path / "snap" / "*.parquet"))
    assert table.height == 0 and table.columns == ["k", "count"]
    xs.insert([5])
    flow.advance_to(2)
    flow.run()
    assert snap.epoch == 0  # (epoch 1 is not a multiple of 2)
    xs.insert([6])
    flow.advance_to(3)
    flow.run()
    assert snap.epoch == 2
    assert sorted(pl.read_parquet(str(tmp_path / "snap" / "*.parquet"))["k"].to_list()) == [5, 6]
