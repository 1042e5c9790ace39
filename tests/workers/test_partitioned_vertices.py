"""Vertices and ``inspect`` with several workers.

A vertex with a key runs on every worker, a copy each, and each copy receives exactly the
updates whose key its worker owns; one without a key runs on worker 0 and receives everything.
An ``inspect`` runs on worker 0, in the process that owns the dataflow, so its function sees
every update even when the workers are processes. Results are checked against a count made
here in plain Python, epoch by epoch, for 1, 2 and 3 workers in one process and 2 in
processes.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

import ddflow as dd
from ddflow.differential.operators.vertex import VertexOp

#: (workers, processes): in one process, and in worker processes
CONFIGS = [(1, False), (2, False), (3, False), (2, True)]

#: words per epoch, with repeats, and one epoch whose words are all one key
EPOCHS = [
    ["a", "b", "a", "c", "d", "e", "f", "a"],
    ["b", "b", "g"],
    ["a", "a", "a"],
    [],
    ["h", "c", "i", "j", "k", "b"],
]


class CountOnNotify(dd.Vertex):
    """Counts each word's updates at a time, and sends the counts once the time is complete."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, ...], Counter[str]] = {}
        self.seen: set[str] = set()

    def on_recv(self, edge: int, batch: Any, time: Any) -> None:
        counts = self.counts.setdefault(time, Counter())
        for word, diff in batch.select("w", "diff").iter_rows():
            counts[word] += diff
            self.seen.add(word)
        self.notify_at(time)

    def on_notify(self, time: Any) -> None:
        self.send_by(0, sorted(self.counts.pop(time).items()), time)


def run_counts(
    workers: int, processes: bool, key: str | None
) -> tuple[dd.Dataflow, CountOnNotify, list[tuple[str, int, int]]]:
    flow = dd.Dataflow(workers=workers, processes=processes)
    words = flow.input("words", schema={"w": "str"})
    v = CountOnNotify()
    (counts,) = flow.vertex(v, [words], [{"w": "str", "n": "int64"}], key=key)
    out = counts.output()
    for epoch, batch in enumerate(EPOCHS):
        words.insert([(w,) for w in batch])
        flow.advance_to(epoch + 1)
        flow.run()
    ch = out.changes()
    rows = sorted(zip(ch["w"], ch["n"], ch["time"], strict=True))
    return flow, v, rows


def expected_counts() -> list[tuple[str, int, int]]:
    return sorted(
        (w, n, epoch) for epoch, batch in enumerate(EPOCHS) for w, n in Counter(batch).items()
    )


@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
@pytest.mark.parametrize("key", ["w", None])
def test_a_vertex_counts_every_word_once_per_epoch(workers, processes, key):
    flow, _, rows = run_counts(workers, processes, key)
    flow.close()
    assert rows == expected_counts()


@pytest.mark.parametrize("workers", [2, 3])
def test_a_keyed_vertex_has_a_copy_per_worker_each_seeing_only_its_keys(workers):
    flow, v, _ = run_counts(workers, False, "w")
    copies = [
        op.vertex for shard in flow.worker.shards for op in shard.operators if type(op) is VertexOp
    ]
    assert len(copies) == workers and copies[0] is v
    assert len({id(c) for c in copies}) == workers
    seen = [c.seen for c in copies]
    everything = {w for batch in EPOCHS for w in batch}
    assert set().union(*seen) == everything
    assert sum(len(s) for s in seen) == len(everything)  # (no word on two workers)
    assert all(seen), seen  # (11 words: every worker owns some)


def test_a_vertex_without_a_key_runs_on_worker_0_alone():
    flow, v, _ = run_counts(2, False, None)
    copies = [
        op.vertex for shard in flow.worker.shards for op in shard.operators if type(op) is VertexOp
    ]
    assert copies == [v]
    assert v.seen == {w for batch in EPOCHS for w in batch}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("nope", r"no column 'nope'"),
        (["w", "x"], r"no column 'x'"),
        ([], r"a column name or a list"),
        ([1], r"a column name or a list"),
    ],
)
def test_a_vertex_key_that_is_not_an_input_column_is_refused_at_the_users_line(key, message):
    flow = dd.Dataflow(workers=2)
    words = flow.input("words", schema={"w": "str"})
    with pytest.raises(dd.GraphError, match=message) as info:
        flow.vertex(CountOnNotify(), [words], [{"w": "str", "n": "int64"}], key=key)
    assert "test_partitioned_vertices.py" in str(info.value)


@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_inspect_sees_every_update_in_the_users_process(workers, processes):
    lock = threading.Lock()  # (a closure that cannot be pickled: it stays behind)
    seen: list[tuple[str, int]] = []

    def look(frame: Any) -> None:
        with lock:
            seen.extend(zip(frame["w"], frame["diff"], strict=True))

    flow = dd.Dataflow(workers=workers, processes=processes)
    words = flow.input("words", schema={"w": "str", "n": "int64"})
    looked = words.select("w", "n").inspect(look)
    out = looked.group_by("w").agg(total=dd.sum("n")).output()
    words.insert([(w, i) for i, w in enumerate(EPOCHS[0])])
    flow.advance_to(1)
    flow.run()
    words.remove([("a", 0)])
    flow.advance_to(2)
    flow.run()
    flow.close()
    assert Counter(w for w, d in seen if d > 0) == Counter(EPOCHS[0])
    assert [(w, d) for w, d in seen if d < 0] == [("a", -1)]
    totals = dict(zip(out.snapshot()["w"], out.snapshot()["total"], strict=True))
    assert totals["a"] == 2 + 7 and totals["f"] == 6  # (("a", 0) removed)


def test_a_keyed_vertex_that_cannot_be_sent_is_reported_at_the_users_line():
    v = CountOnNotify()
    v.lock = threading.Lock()  # type: ignore[attr-defined]
    flow = dd.Dataflow(workers=2)
    words = flow.input("words", schema={"w": "str"})
    (counts,) = flow.vertex(v, [words], [{"w": "str", "n": "int64"}], key="w")
    counts.output()
    words.insert([("a",)])
    with pytest.raises(dd.GraphError, match="cannot be sent to a worker process") as info:
        flow.run()
    assert "test_partitioned_vertices.py" in str(info.value)
