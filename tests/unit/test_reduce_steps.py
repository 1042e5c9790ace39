"""A reduce's steps: it settles the messages it takes (after holding capabilities for the times
they bring), so that a time complete at its input is evaluated in the step its updates arrive;
and what a step reads of its arrangements for a few keys is read once."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import polars as pl
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


def _path_components(length: int) -> tuple[dd.Dataflow, Any, Any, Counter]:
    """Connected components over a path of ``length`` edges, loaded as the first epoch: the
    flow, its edge input, the labels' output and the live edges."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    result = dd.graph.connected_components(edges).output()
    path = [(i, i + 1) for i in range(length)]
    edges.insert(path)
    flow.advance_to(1)
    flow.run()
    return flow, edges, result, Counter(path)


def _change_epochs(flow: dd.Dataflow, edges: Any, result: Any, live: Counter,
                   rng: random.Random, epochs: range, nodes: int, remove_every: int) -> None:
    """One edge changed per epoch (a live edge removed every ``remove_every`` epochs, else a
    random edge among ``nodes`` nodes inserted), the labels checked against the reference
    after each."""
    for epoch in epochs:
        if epoch % remove_every == 1:
            gone = rng.choice([e for e in live if live[e]])
            edges.remove([gone])
            live[gone] -= 1
        else:
            e = (rng.randrange(nodes), rng.randrange(nodes))
            edges.insert([e])
            live[e] += 1
        flow.advance_to(epoch)
        flow.run()
        assert frame_to_counter(result.snapshot()) == reference(flow, {"edges": +live})[result]


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
    flow, edges, result, live = _path_components(15)
    reads = _count_reads(monkeypatch, [
        op for op in flow.worker.operators if isinstance(op, ReduceOp)])
    _change_epochs(flow, edges, result, live, random.Random(3), range(2, 14), 16, 2)
    assert cached_steps and not any(cached_steps), cached_steps


def test_a_kept_read_does_not_keep_the_batches_a_trace_let_go_of(monkeypatch):
    """A read kept across steps remembers the batches it was made of only weakly: a batch
    that a trace merges away (here in fueled steps, with small thresholds) is freed at once,
    even while a read made from it is still kept (until the reduce's next step drops it).
    Checked after every insert into a reduce's traces, with label propagation over epochs
    of insertions and deletions, each against the reference."""
    import gc
    import weakref

    from ddflow import trace
    from ddflow.kernels.local_rows import Rows

    monkeypatch.setattr(trace, "FUELED_ROWS", 8)
    monkeypatch.setattr(trace, "FUEL_CHUNK", 4)
    flow, edges, result, live = _path_components(20)
    reduces = [op for op in flow.worker.operators if isinstance(op, ReduceOp)]
    spines = {id(sp): sp for op in reduces for sp in (op.input, op.output)}
    seen: list[weakref.ref[Any]] = []  # every batch these traces held
    checks = {"stale": 0, "freed": 0}
    insert = trace.Spine.insert

    def checked(self: trace.Spine, *args: Any, **kwargs: Any) -> Any:
        out = insert(self, *args, **kwargs)
        if id(self) not in spines:
            return out
        gc.collect()
        parts = {id(p) for sp in spines.values() for p in sp.parts()}
        for op in reduces:
            for kept in op._read.values():
                parts.add(id(kept[1]))  # (a read's updates may be a batch itself)
                checks["stale"] += any(r() is None for r in kept[2])
        seen.extend(weakref.ref(p) for p in self.parts() if type(p) in (pl.DataFrame, Rows))
        # a batch still alive is in a trace, or is a kept read's updates themselves
        assert all(id(r()) in parts for r in seen if r() is not None)
        checks["freed"] += sum(r() is None for r in seen)
        return out

    monkeypatch.setattr(trace.Spine, "insert", checked)
    _change_epochs(flow, edges, result, live, random.Random(5), range(2, 9), 21, 3)
    # reads were kept while a batch they were made of was let go of, and freed
    assert checks["stale"] and checks["freed"]
