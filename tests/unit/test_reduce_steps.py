"""A reduce's steps: it settles the messages it takes (after holding capabilities for the times
they bring), so that a time complete at its input is evaluated in the step its updates arrive;
and what a step reads of its arrangements for a few keys is read once."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
import pytest

import ddflow as dd
from ddflow.differential.operators.reduce import ReduceOp
from ddflow.runtime.local.reads import CachedReads
from ddflow.runtime.local.reducer import KernelReducer
from ddflow.runtime.local.settings import IndexSettings, LocalSettings
from ddflow.runtime.local.trace import TraceSettings
from ddflow.testing import frame_to_counter, reference


def python_reduces(settings: LocalSettings | None = None) -> LocalSettings:
    """``settings`` with every reduce in Python: these tests look into the Python reducer's
    paths (the native one is compared with it in tests/native)."""
    s = LocalSettings() if settings is None else settings
    return replace(s, reduce=replace(s.reduce, native=False))


def _spy_evaluations(monkeypatch) -> dict[int, Counter]:
    """Every (key code, time) each reduce evaluates, counted, by operator index."""
    seen: dict[int, Counter] = defaultdict(Counter)
    schedule = ReduceOp.schedule

    def spying(self: ReduceOp) -> None:
        real = self.kernels.time_queries

        def queries(pending: Any, tt: Any, *args: Any) -> Any:
            q = real(pending, tt, *args)
            width = tt.width
            for row in q.rows if hasattr(q, "rows") else q.rows():
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
        for name, spine in (("input", op.reducer.input), ("output", op.reducer.output)):
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
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces()))
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
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces()))
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


def _path_components(
    length: int, settings: LocalSettings | None = None
) -> tuple[dd.Dataflow, Any, Any, Counter]:
    """Connected components over a path of ``length`` edges, loaded as the first epoch (on the
    local runtime with ``settings``): the flow, its edge input, the labels' output and the
    live edges."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces(settings)))
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    result = dd.graph.connected_components(edges).output()
    path = [(i, i + 1) for i in range(length)]
    edges.insert(path)
    flow.advance_to(1)
    flow.run()
    return flow, edges, result, Counter(path)


def _change_epochs(
    flow: dd.Dataflow,
    edges: Any,
    result: Any,
    live: Counter,
    rng: random.Random,
    epochs: range,
    nodes: int,
    remove_every: int,
) -> None:
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


def test_a_key_read_before_is_not_read_again(monkeypatch):
    """In a loop a key's pending times become ready one iteration at a time (in one step when
    only the reduce's own capabilities held them back, else a step each); between those
    evaluations its arrangements change only by batches the reduce is given, so an
    evaluation of keys all read before (in this step or an earlier one) reads neither
    arrangement (what was read is kept, with the updates added since). Label propagation
    over epochs of insertions and deletions (deletions are not skipped: their times are
    evaluated), each against the reference; such evaluations must occur, and read nothing."""
    reads: Counter = Counter()
    evaluate = KernelReducer._evaluate
    cached = []
    merged_since = []
    last_read: dict[int, list] = {}  # reduce -> its output trace's descriptions when last read

    def spying(self: KernelReducer, queries: Any, keyset: Any) -> Any:
        want = set(np.asarray(keyset).tolist())
        kept = [self.reads._read.get(what) for what in ("input", "output")]
        covered = all(r is not None and want <= set(np.asarray(r[0]).tolist()) for r in kept)
        before = reads["output"]
        total = sum(reads.values())
        result = evaluate(self, queries, keyset)
        if reads["output"] != before:
            last_read[id(self)] = self.output.descriptions()
        if covered:
            cached.append(sum(reads.values()) - total)
            was = last_read.get(id(self), [])
            merged_since.append(self.output.descriptions()[: len(was)] != was)
        return result

    monkeypatch.setattr(KernelReducer, "_evaluate", spying)
    flow, edges, result, live = _path_components(15)
    reads = _count_reads(
        monkeypatch, [op for op in flow.worker.operators if isinstance(op, ReduceOp)]
    )
    _change_epochs(flow, edges, result, live, random.Random(3), range(2, 14), 16, 2)
    assert cached and not any(cached), cached
    # (some of them after their output's trace merged batches: a read is kept through merges)
    assert any(merged_since)


def test_times_held_back_by_own_capabilities_are_evaluated_in_one_step(monkeypatch):
    """A deletion that changes no label at any iteration (one copy of an edge present twice)
    has its keys' times at every later iteration of their histories to evaluate; each is
    held back only by the reduce's own capability at the one before (its output, empty,
    brings nothing back through the loop), so all are evaluated in the step the deletion
    arrives, not in a step each. Checked against the reference, with the times evaluated
    counted per step."""
    seen = _spy_evaluations(monkeypatch)
    per_step: list[int] = []
    schedule = ReduceOp.schedule

    def counting(self: ReduceOp) -> None:
        before = self.evaluated
        schedule(self)
        if self.spec.kind == "agg" and self.evaluated > before:
            per_step.append(self.evaluated - before)

    monkeypatch.setattr(ReduceOp, "schedule", counting)
    flow = dd.Dataflow(runtime=dd.LocalRuntime(python_reduces()))
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    result = dd.graph.connected_components(edges).output()
    # a path 0-1-...-8 with its last edge twice: node 8's label falls over eight iterations
    live = Counter([(i, i + 1) for i in range(8)] + [(7, 8)])
    edges.insert(list(live.elements()))
    flow.advance_to(1)
    flow.run()
    seen.clear()
    per_step.clear()
    edges.remove([(7, 8)])  # (the labels 7 offers 8 keep a positive multiplicity)
    live[(7, 8)] -= 1
    flow.advance_to(2)
    flow.run()
    assert frame_to_counter(result.snapshot()) == reference(flow, {"edges": +live})[result]
    times = [t for counts in seen.values() for (_, *t) in counts]
    assert len({tuple(t) for t in times}) >= 3, times  # (times one iteration apart)
    assert len(per_step) == 1, per_step
    assert all(n == 1 for counts in seen.values() for n in counts.values())


def _kept_input_read() -> tuple[ReduceOp, Any]:
    """Components of a short path after one more edge: the loop's min reduce, and what it
    keeps of its input's reads."""
    flow, edges, _, _ = _path_components(6)
    op = next(o for o in flow.worker.operators if isinstance(o, ReduceOp) and o.spec.kind == "agg")
    edges.insert([(2, 9)])
    flow.advance_to(2)
    flow.run()
    kept = op.reducer.reads._read.get("input")
    assert kept is not None
    return op, kept


def test_a_kept_read_is_dropped_when_its_trace_gets_a_batch_it_was_not_given():
    """A kept read stays valid while each batch inserted in its trace since is one the reduce
    is given (and adds to the read); a batch inserted otherwise drops it (its updates were
    not added), as does one given but not inserted."""
    op, kept = _kept_input_read()
    op.reducer.reads._refresh("input", op.reducer.input, [])
    assert op.reducer.reads._read.get("input") is kept  # (nothing inserted since: kept as it is)
    row = op.reducer.input.parts()[-1]  # (any arranged batch of the trace's schema)
    op.reducer.input.insert(row, op.kernels.height(row))
    op.reducer.reads._refresh("input", op.reducer.input, [row])
    assert op.reducer.reads._read.get("input") is not None  # (given: its updates added)
    op.reducer.input.insert(row, op.kernels.height(row))
    op.reducer.reads._refresh("input", op.reducer.input, [])
    assert op.reducer.reads._read.get("input") is None  # (not given)
    op.reducer.reads._keep("input", kept[0], kept[1])
    op.reducer.reads._refresh("input", op.reducer.input, [row])
    assert op.reducer.reads._read.get("input") is None  # (given, but not inserted)


def test_a_kept_read_is_kept_through_a_merge_when_small(monkeypatch):
    """Through a merge (here the trace compacted) a kept read of a few keys and updates is
    kept; one of more updates than ``through_rows`` is dropped."""
    op, kept = _kept_input_read()
    assert 0 < op.reducer.reads._rows(kept[1]) <= op.reducer.reads.settings.through_rows
    op.reducer.input.compact()
    op.reducer.reads._refresh("input", op.reducer.input, [])
    assert op.reducer.reads._read.get("input") is kept
    op.reducer.reads.settings = replace(
        op.reducer.reads.settings, through_rows=op.reducer.reads._rows(kept[1]) - 1
    )
    op.reducer.input.compact()
    op.reducer.reads._refresh("input", op.reducer.input, [])
    assert op.reducer.reads._read.get("input") is None


def test_a_kept_read_does_not_keep_the_batches_a_trace_let_go_of(monkeypatch):
    """A read kept across steps is kept across the trace's merges too (they change how the
    updates are held, not what they accumulate to), and holds no batch of it: a batch that
    a trace merges away (here in fueled steps, with small thresholds) is freed at once, even
    while reads made from it are kept. Checked after every insert into a reduce's traces,
    with label propagation over epochs of insertions and deletions, each against the
    reference."""
    import gc
    import weakref

    from ddflow.runtime.local import trace
    from ddflow.runtime.local.rows import Rows

    fueled = LocalSettings(trace=TraceSettings(fueled_rows=8, fuel_chunk=4))
    flow, edges, result, live = _path_components(20, fueled)
    reduces = [op for op in flow.worker.operators if isinstance(op, ReduceOp)]
    spines = {id(sp): sp for op in reduces for sp in (op.reducer.input, op.reducer.output)}
    seen: list[weakref.ref[Any]] = []  # every batch these traces held
    checks = {"across": 0, "freed": 0}
    merges_at: dict[int, tuple[Any, int]] = {}  # id(kept read) -> (it, merges when first seen)
    insert = trace.Spine.insert

    def checked(self: trace.Spine, *args: Any, **kwargs: Any) -> Any:
        out = insert(self, *args, **kwargs)
        if id(self) not in spines:
            return out
        gc.collect()
        parts = {id(p) for sp in spines.values() for p in sp.parts()}
        for op in reduces:
            for what, kept in op.reducer.reads._read.items():
                parts.add(id(kept[1]))  # (a read's updates may be a batch itself)
                merged = (op.reducer.input if what == "input" else op.reducer.output).merged_records
                first = merges_at.setdefault(id(kept), (kept, merged))[1]
                checks["across"] += merged > first
        seen.extend(weakref.ref(p) for p in self.parts() if type(p) in (pl.DataFrame, Rows))
        # a batch still alive is in a trace, or is a kept read's updates themselves
        assert all(id(r()) in parts for r in seen if r() is not None)
        checks["freed"] += sum(r() is None for r in seen)
        return out

    monkeypatch.setattr(trace.Spine, "insert", checked)
    _change_epochs(flow, edges, result, live, random.Random(5), range(2, 9), 21, 3)
    # reads were kept while their trace merged batches, and merged batches were freed
    assert checks["across"] and checks["freed"]


@pytest.mark.parametrize("fueled", [False, True], ids=["merged-at-once", "merged-in-steps"])
def test_a_kept_read_through_indexes_holds_only_batches_of_its_trace(monkeypatch, fueled):
    """A read through the indexes of large batches (an indexed history: here with small
    thresholds, on a star whose centre is a heavy key) reads those batches themselves. Kept
    across steps, it is dropped once its trace merged one of them away, not to keep it alive:
    after every step of a reduce, each batch its kept reads index is one of its trace's. Label
    propagation over epochs of insertions and deletions, each against the reference; such
    reads must be kept, and dropped for that reason."""
    from ddflow.runtime.local import trace

    # indexes of batches of 200 updates and more, for keys of 4 updates and more
    indexed = IndexSettings(indexed_rows=200, heavy_rows=4)
    # (the batches indexed merged away soon; fueled: a merge's inputs are the trace's until
    # it is done, some inserts later)
    merges = TraceSettings(tail_batches=0)
    if fueled:
        merges = replace(merges, fueled_rows=64, fuel_chunk=16)
    counts = {"indexed": 0, "dropped": 0}
    schedule = ReduceOp.schedule
    refresh = CachedReads._refresh

    def stepped(self: ReduceOp) -> None:
        schedule(self)
        reducer = self.reducer
        for what, (_, data, _) in reducer.reads._read.items():
            if hasattr(data, "indexed"):
                counts["indexed"] += 1
                parts = (reducer.input if what == "input" else reducer.output).parts()
                assert all(any(b is p for p in parts) for b, _, _ in data.indexed)

    def refreshing(self: CachedReads, what: str, spine: trace.Spine, added: list[Any]) -> None:
        kept = self._read.get(what)
        refresh(self, what, spine, added)
        # (dropped though only merges changed the trace, and the read is of a few keys)
        counts["dropped"] += (
            kept is not None
            and hasattr(kept[1], "indexed")
            and len(kept[0]) <= self.settings.small_keys
            and spine.upper == kept[2][0] + len(added)
            and what not in self._read
        )

    monkeypatch.setattr(ReduceOp, "schedule", stepped)
    monkeypatch.setattr(CachedReads, "_refresh", refreshing)
    flow = dd.Dataflow(
        runtime=dd.LocalRuntime(python_reduces(LocalSettings(trace=merges, index=indexed)))
    )
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    result = dd.graph.connected_components(edges).output()
    live: Counter = Counter()
    rng = random.Random(11)
    for epoch in range(1, 13):
        if epoch % 4 == 1:  # (many edges at once: large batches, merged with the others)
            new = [(epoch, rng.randrange(1000)) for _ in range(600)]
        elif epoch % 3 == 0:
            gone = rng.choice([e for e in live if live[e]])
            edges.remove([gone])
            live[gone] -= 1
            new = []
        else:
            new = [(rng.randrange(1000), rng.randrange(1000))]
        edges.insert(new)
        live.update(new)
        flow.advance_to(epoch)
        flow.run()
        assert frame_to_counter(result.snapshot()) == reference(flow, {"edges": +live})[result]
    assert counts["indexed"] and counts["dropped"], counts
