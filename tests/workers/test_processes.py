"""Worker processes: their lifecycle, their failures, and what travels between them.

The results of every operator on 2 and 3 workers are checked against the reference in
tests/semantics (runtimes ``local-w2``, ``local-w3`` in one process, ``workers`` in two) and
tests/property; these tests check what only processes can get wrong: a worker that dies, a
user function that raises in a worker, a function that cannot be sent, no process left behind,
and batches that cross intact.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import polars as pl
import pytest

import ddflow as dd
from ddflow.runtime.local import rows as R
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.workers import reuse_processes
from ddflow.runtime.workers.wire import decode, encode


@pytest.fixture(autouse=True)
def _fresh_processes():
    """Processes started for each dataflow and stopped with it (not kept for the next one, as
    the rest of the suite does: see tests/conftest.py)."""
    reuse_processes(False)
    yield
    reuse_processes(True)


def test_reused_processes_serve_one_dataflow_after_another():
    reuse_processes(True)
    pids = []
    for n in range(3):
        with dd.Dataflow(workers=2) as flow:
            nums = flow.input("nums", schema={"x": "int64"})
            out = nums.group_by("x").agg(k=dd.count()).output()
            nums.insert([(i % 5,) for i in range(n + 10)])
            flow.advance_to(1)
            flow.run()
            pids += children(flow)
            assert sorted(out.snapshot()["k"]) == sorted(
                [(n + 10) // 5 + (1 if i < (n + 10) % 5 else 0) for i in range(5)]
            )
    assert len(set(pids)) == 1 and alive(pids[0])
    reuse_processes(False)
    assert not alive(pids[0])


def children(flow: dd.Dataflow) -> list[int]:
    return [p.pid for p in flow._processes.procs]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # (a zombie is not alive: it is waiting to be reaped)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def counting_flow(workers: int = 2) -> tuple[dd.Dataflow, dd.InputCollection, dd.Output]:
    flow = dd.Dataflow(workers=workers)
    words = flow.input("words", schema={"w": "str", "n": "int64"})
    out = words.group_by("w").agg(total=dd.sum("n"), k=dd.count()).output()
    return flow, words, out


def test_with_block_stops_the_workers_and_outputs_stay_readable():
    with dd.Dataflow(workers=3) as flow:
        words = flow.input("words", schema={"w": "str"})
        out = words.group_by("w").agg(k=dd.count()).output()
        words.insert([("a",), ("b",), ("a",)])
        flow.advance_to(1)
        flow.run()
        pids = children(flow)
        assert len(pids) == 2 and all(alive(p) for p in pids)
    assert not any(alive(p) for p in pids)
    snap = out.snapshot().sort_values("w")
    assert snap[["w", "k"]].values.tolist() == [["a", 2], ["b", 1]]
    with pytest.raises(dd.DataflowFailedError, match="with block"):
        flow.run()


def test_close_runs_what_is_left_then_stops_the_workers():
    flow, words, out = counting_flow()
    words.insert([("x", 2), ("y", 5), ("x", 1)])
    flow.run()  # (starts the workers; epoch 0 is still open)
    pids = children(flow)
    flow.close()
    assert not any(alive(p) for p in pids)
    assert sorted(out.snapshot()[["w", "total"]].values.tolist()) == [["x", 3], ["y", 5]]
    flow.run()  # (nothing left: no error)


def test_workers_told_to_stop_exit_cleanly():
    flow, words, _ = counting_flow()
    words.insert([("x", 2)])
    flow.advance_to(1)
    flow.run()
    procs = list(flow._processes.procs)
    flow.close()
    assert [p.returncode for p in procs] == [0]  # (not 1: a stop is no crash)


def test_a_worker_killed_mid_run_makes_run_raise_naming_it():
    flow = dd.Dataflow(workers=2)
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    dd.graph.connected_components(edges).output()
    edges.insert([(i, i + 1) for i in range(300)])
    flow.advance_to(1)
    flow.run()
    (pid,) = children(flow)
    os.kill(pid, signal.SIGKILL)
    edges.remove([(150, 151)])
    flow.advance_to(2)
    start = time.monotonic()
    with pytest.raises(dd.WorkerError, match=rf"worker 1 \(process {pid}\).*SIGKILL"):
        flow.run()
    assert time.monotonic() - start < 30
    with pytest.raises(dd.DataflowFailedError, match="SIGKILL"):
        flow.run()


def test_a_user_function_raising_in_a_worker_is_named_with_its_line():
    flow = dd.Dataflow(workers=2)
    nums = flow.input("nums", schema={"x": "int64"})

    def shaky(row):
        if row[0] == 7:
            raise ValueError("seven is not allowed")
        return (row[0] * 2,)

    nums.group_by("x").agg(k=dd.count()).map(shaky, schema={"y": "int64"}).output()
    nums.insert([(i,) for i in range(20)])
    flow.advance_to(1)
    with pytest.raises(dd.UserFunctionError, match=r"shaky.*seven is not allowed") as info:
        flow.run()
    assert info.value.site is not None and info.value.site.filename == __file__
    pids = children(flow)
    assert not any(alive(p) for p in pids)  # (a failed dataflow stops its workers)


def test_a_function_that_cannot_be_sent_is_reported_at_the_users_line():
    flow = dd.Dataflow(workers=2)
    nums = flow.input("nums", schema={"x": "int64"})
    lock = threading.Lock()

    def guarded(row):
        with lock:
            return row

    nums.map(guarded, schema={"x": "int64"}).output()  # the line named
    line = guarded.__code__.co_firstlineno + 4
    with pytest.raises(dd.GraphError, match="cannot be sent to a worker process") as info:
        flow.run()
    assert info.value.site is not None and info.value.site.lineno == line


def test_batches_cross_intact_rows_and_frames():
    frame = pl.DataFrame(
        {
            "s": ["a", None, "ü"],
            "f": [1.5, float("nan"), None],
            "l": [[1, 2], [], [3]],
            "__t0": [0, 1, 2],
            "__diff": [1, -1, 2],
        }
    )
    kind, fields, carried = decode(encode("run", 3, [(1, (0,), 2)], batches=[(4, 0, (1,), frame)]))
    assert (kind, fields) == ("run", (3, [(1, (0,), 2)]))
    ((target, port, time_, got),) = carried
    assert (target, port, time_) == (4, 0, (1,)) and got.equals(frame)
    rows = R.Rows({"k": pl.Int64, "__t0": pl.Int64, "__diff": pl.Int64}, [(1, 0, 1), (None, 0, -1)])
    ((*_, back),) = decode(encode("run", batches=[(0, 0, (0,), rows)]))[2]
    assert type(back) is R.Rows and back.rows == rows.rows and back.schema == rows.schema
    mixed = R.Rows(
        {"s": pl.String, "f": pl.Float64, "b": pl.Boolean, "__diff": pl.Int64},
        [("ü", 2, True, 1), (None, None, None, -1), ("", 0.5, False, 3)],
    )
    ((*_, back),) = decode(encode("run", batches=[(0, 0, (0,), mixed)]))[2]
    assert back.rows == [("ü", 2.0, True, 1), (None, None, None, -1), ("", 0.5, False, 3)]
    assert back.schema == mixed.schema


def test_batches_cross_without_importing_pandas():
    """(Arrow's conversion of Python values imports pandas: a second added to every worker's
    start and to the coordinator's first exchange.)"""
    code = (
        "import sys, polars as pl\n"
        "from ddflow.runtime.local.rows import Rows\n"
        "from ddflow.runtime.workers.wire import decode, encode\n"
        "rows = Rows({'k': pl.Int64, 's': pl.String}, [(1, 'a'), (None, None)])\n"
        "frame = pl.DataFrame({'k': [1, 2]})\n"
        "decode(encode('run', batches=[(0, 0, (0,), rows), (0, 0, (0,), frame)]))\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_rows_and_frames_give_a_key_the_same_worker(workers):
    k = LocalKernels()
    rng = np.random.default_rng(7)
    frame = pl.DataFrame(
        {
            "a": rng.integers(-(2**62), 2**62, 200),
            "b": [str(x) for x in rng.integers(0, 50, 200)],
            "__t0": [0] * 200,
            "__diff": [1] * 200,
        }
    )
    for keys in (["a"], ["a", "b"], ["b"]):
        by_frame = {
            w: sorted(part.select(keys).rows()) for w, part in k.partition(frame, keys, workers)
        }
        rows = R.Rows(dict(frame.schema), frame.rows())
        by_rows = {
            w: sorted(part.project(keys).rows) for w, part in k.partition(rows, keys, workers)
        }
        assert by_frame == by_rows
        assert len(by_frame) == workers  # (200 random keys reach every worker)
        assert sum(len(v) for v in by_frame.values()) == 200


def test_loop_stats_are_summed_over_workers():
    def run(workers: int):
        flow = dd.Dataflow(workers=workers)
        edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
        dd.graph.connected_components(edges).output()
        edges.insert([(i, i + 1) for i in range(40)])
        flow.advance_to(1)
        flow.run()
        flow.close()
        return flow.loop_stats()

    one, two = run(1), run(2)
    assert one.equals(two) and one["differences"].sum() > 40
