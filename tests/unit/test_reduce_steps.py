"""A reduce's steps: it settles the messages it takes (after holding capabilities for the times
they bring), so that a time complete at its input is evaluated in the step its updates arrive;
and what a step reads of its arrangements for a few keys is read once."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest

import ddflow as dd
from ddflow.operators.reduce import ReduceOp
from ddflow.testing import frame_to_counter, reference


def _spy_evaluations(monkeypatch) -> dict[int, Counter]:
    """Every (key code, time) each reduce evaluates, counted, by operator index."""
    seen: dict[int, Counter] = defaultdict(Counter)
    schedule = ReduceOp.schedule

    def spying(self: ReduceOp) -> None:
        real = self.kernels.time_queries

        def queries(pending: Any, tt: Any, *args: Any) -> Any:
            q = real(pending, tt, *args)
            width = tt.width
            for row in (q.rows if hasattr(q, "rows") else q.rows()):
                # (KEY, keys..., times...): the code and the times identify the pair
                seen[self.index][(row[0], *row[-width:])] += 1
            return q

        self.kernels.time_queries = queries
        try:
            schedule(self)
        finally:
            del self.kernels.time_queries

    monkeypatch.setattr(ReduceOp, "schedule", spying)
    return seen


def _count_reads(monkeypatch, ops: list[ReduceOp]) -> Counter:
    """The lookups of the reduces' input and output traces from now on, counted by which
    (the counter returned is updated as they happen)."""
    reads: Counter = Counter()
    for op in ops:
        for name, spine in (("input", op.input), ("output", op.output)):
            real = spine.lookup

            def counting(*args: Any, _name: str = name, _real: Any = real, **kw: Any) -> Any:
                reads[_name] += 1
                return _real(*args, **kw)

            monkeypatch.setattr(spine, "lookup", counting)
    return reads


@pytest.mark.parametrize("algorithm", ["cc", "scc"])
def test_each_key_and_time_is_evaluated_once(monkeypatch, algorithm):
    """A reduce evaluates a ``(key, time)`` only once the time is complete at its input, and
    after that no update at or before it can arrive: so no pair is ever evaluated twice. A
    reduce that settled its messages without first holding capabilities for the times they
    bring would see a frontier past those times' successors in the loop, evaluate them early
    and again when the feedback arrives. Label propagation in a loop, and strongly connected
    components (loops nested two deep), over epochs of insertions and deletions with several
    epochs' updates given before a run, each against the reference."""
    seen = _spy_evaluations(monkeypatch)
    rng = random.Random(7)
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    if algorithm == "cc":
        result = dd.graph.connected_components(edges).output()
    else:
        result = dd.graph.strongly_connected_components(edges).output()
    live: Counter = Counter()
    epoch = 0
    for _ in range(5):
        for _ in range(2):  # two epochs in flight per run
            for _ in range(6):
                e = (rng.randrange(12), rng.randrange(12))
                edges.insert([e])
                live[e] += 1
            gone = [e for e in live if live[e] > 0 and rng.random() < 0.25]
            if gone:
                edges.remove(gone)
                for e in gone:
                    live[e] -= 1
            epoch += 1
            flow.advance_to(epoch)
        flow.run()
        want = reference(flow, {"edges": +live})[result]
        assert frame_to_counter(result.snapshot()) == want
    assert sum(sum(c.values()) for c in seen.values()) > 100
    twice = {i: [p for p, n in c.items() if n > 1] for i, c in seen.items()}
    assert not any(twice.values()), twice


def test_a_small_step_evaluates_at_once_and_reads_each_arrangement_once(monkeypatch):
    """A keyed min changed one key per epoch: the reduce runs one step per epoch (its new
    time is complete at once: evaluated in the step it arrives, not in a second one after
    the progress tracker has caught up), and in it reads the key's input history and output
    once each (the interesting times and the evaluation share them)."""
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "v": "int64"})
    out = xs.group_by("k").agg(lo=dd.min("v")).output()
    flow.advance_to(0)
    flow.run()
    (op,) = [o for o in flow.worker.operators if isinstance(o, ReduceOp)]
    reads = _count_reads(monkeypatch, [op])
    steps: list[int] = []
    flow.worker.on_step = lambda o: steps.append(o.index)
    live: Counter = Counter()
    for epoch in range(1, 9):
        row = (epoch % 3, 100 - epoch)  # a new least value: the min moves (not skipped)
        xs.insert([row])
        live[row] += 1
        reads.clear()
        steps.clear()
        flow.advance_to(epoch + 1)
        flow.run()
        assert frame_to_counter(out.snapshot()) == reference(flow, {"xs": live})[out]
        assert steps.count(op.index) == 1
        assert reads == {"input": 1, "output": 1}


def test_a_key_read_in_an_earlier_step_is_not_read_again(monkeypatch):
    """In a loop a key's pending times become ready one iteration at a time, a step each;
    between those steps its arrangements change only by batches the reduce is given, so a
    step that evaluates keys all read before, with no new input, reads neither arrangement
    (what was read is kept, with the updates added since). Label propagation over epochs of
    insertions and deletions (deletions are not skipped: their times are evaluated), each
    against the reference; such steps must occur, and read nothing."""
    reads: Counter = Counter()
    schedule = ReduceOp.schedule
    cached_steps = []

    def spying(self: ReduceOp) -> None:
        k = self.kernels
        kept = self._read.get("input")
        queued = self.worker.queues[self.index][0]
        pending = [b for bs in self.pending.values() for b in bs]
        covered = (not queued and pending and kept is not None
                   and set(np.asarray(k.key_set(k.concat(pending))).tolist())
                   <= set(np.asarray(kept[0]).tolist()))
        before = sum(reads.values())
        schedule(self)
        if covered:
            cached_steps.append(sum(reads.values()) - before)

    monkeypatch.setattr(ReduceOp, "schedule", spying)
    rng = random.Random(3)
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    result = dd.graph.connected_components(edges).output()
    path = [(i, i + 1) for i in range(15)]
    edges.insert(path)
    live = Counter(path)
    flow.advance_to(1)
    flow.run()
    reads = _count_reads(monkeypatch, [
        op for op in flow.worker.operators if isinstance(op, ReduceOp)])
    for epoch in range(2, 14):
        if epoch % 2:
            gone = rng.choice([e for e in live if live[e]])
            edges.remove([gone])
            live[gone] -= 1
        else:
            e = (rng.randrange(16), rng.randrange(16))
            edges.insert([e])
            live[e] += 1
        flow.advance_to(epoch)
        flow.run()
        assert frame_to_counter(result.snapshot()) == reference(flow, {"edges": +live})[result]
    assert cached_steps and not any(cached_steps), cached_steps
