"""Compaction: a window that slides forever keeps the arrangements bounded (DESIGN §1).

At each of 1,000 epochs the window input receives the record of that epoch and the retraction
of the record inserted ``W`` epochs earlier, so it always holds the last ``W`` records. A join
with a static dimension table and a group-by count run over it, and the flow runs after every
epoch. At every epoch the outputs equal a directly maintained Python window (and, every ``W``
epochs, the reference interpreter), and the updates held by every arrangement stay below
``c * W``: old times are advanced to the frontier and the insertion and retraction of a record
consolidate away, so the traces hold the live data, not the history.
"""

from __future__ import annotations

from collections import Counter

from harness import make_flow

import ddflow as dd
from ddflow.differential.operators.reduce import ReduceOp
from ddflow.testing import frame_to_counter, reference

W = 50
EPOCHS = 1_000
KEYS = 7
#: an arrangement may hold this many times the window (live records, the batches not yet
#: merged, and one epoch's changes in flight); without compaction it grows to ~EPOCHS
BOUND = 3 * W


def record(e: int) -> tuple[int, int]:
    return (e % KEYS, e)


def arrangement_sizes(flow) -> dict[str, int]:
    sizes = {}
    for op in flow.worker.operators:
        if hasattr(op, "spine"):
            sizes[f"{op!r}"] = len(op.spine)
        if isinstance(op, ReduceOp):
            held_in, held_out = op.reducer.sizes()
            sizes[f"{op!r} output"] = held_out
            sizes[f"{op!r} input"] = held_in
    return sizes


def live_at(e: int) -> list[tuple[int, int]]:
    """The window's records at epoch ``e``."""
    return [record(x) for x in range(max(0, e - W + 1), e + 1)]


def test_sliding_window_stays_bounded(runtime):
    flow = make_flow(runtime)
    window = flow.input("window", schema={"k": "int64", "e": "int64"})
    dim = flow.input("dim", schema={"k": "int64", "name": "str"})
    names = {k: f"key{k}" for k in range(KEYS)}
    joined = window.join(dim, on="k").output()
    counts = window.group_by("k").agg(n=dd.count()).output()
    dim.insert(list(names.items()))

    peak: dict[str, int] = {}
    for e in range(EPOCHS):
        window.insert([record(e)])
        if e >= W:
            window.remove([record(e - W)])
        flow.advance_to(e + 1)
        flow.run()
        if e >= 2 * W:  # after warm-up
            for name, size in arrangement_sizes(flow).items():
                peak[name] = max(peak.get(name, 0), size)

    assert peak, "no arrangements found"
    too_big = {name: size for name, size in peak.items() if size >= BOUND}
    assert not too_big, f"arrangements grew beyond {BOUND} updates (window {W}): {too_big}"

    # every epoch, against the window maintained directly: replay changes() in time order
    def expected(e: int) -> tuple[Counter, Counter]:
        live = live_at(e)
        per_key = Counter(k for k, _ in live)
        return (
            Counter((k, x, names[k]) for k, x in live),
            Counter({(k, n): 1 for k, n in per_key.items()}),
        )

    for i, out in enumerate([joined, counts]):
        ch = out.changes()
        cols = [c for c in ch.columns if c not in ("time", "diff")]
        rows = ch[[*cols, "time", "diff"]].itertuples(index=False)
        acc: Counter = Counter()
        pending = next(rows, None)
        for e in range(EPOCHS):
            while pending is not None and pending[-2] <= e:
                acc[tuple(pending[:-2])] += int(pending[-1])
                pending = next(rows, None)
            got = Counter({r: m for r, m in acc.items() if m != 0})
            assert got == expected(e)[i], f"output {i} at epoch {e}"

    # every W epochs, snapshots against the reference interpreter
    for e in range(W - 1, EPOCHS, W):
        want = reference(flow, {"window": Counter(live_at(e)), "dim": Counter(names.items())})
        for i, out in enumerate([joined, counts]):
            assert frame_to_counter(out.snapshot(epoch=e)) == want[out], f"output {i} at {e}"
