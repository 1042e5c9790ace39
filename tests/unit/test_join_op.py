"""The join operator's step with new batches on both sides: ``dL x R + (L - dL) x dR``, where
``L - dL`` is the left trace without the new left batches; and what the arranger before it
holds on to."""

from __future__ import annotations

import weakref
from collections import Counter

import polars as pl

import ddflow as dd
from ddflow.differential.operators.join import Arranger, JoinOp
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.rows import frame
from ddflow.runtime.local.settings import LocalSettings
from ddflow.runtime.local.trace import Spine, TraceSettings
from ddflow.testing import frame_to_counter, reference
from ddflow.timely.lattice import TimeType


def test_both_sides_new_in_one_step_give_each_product_once(monkeypatch):
    """A first epoch brings both inputs in one step: the left trace is then exactly the new
    left batch, which the lookup leaves out (subtracted, it would give every product a second
    time and once more negated). Later epochs change both sides together again, first with
    a left batch the trace still holds as inserted, then with one merged into an older batch
    on insertion (subtracted). Each epoch against the reference, and the rows the join emits
    are exactly the products, none cancelling another."""
    sent: list[int] = []
    send = JoinOp.send

    def counting_send(self, port, t, batch):
        sent.append(self.kernels.height(batch))
        return send(self, port, t, batch)

    monkeypatch.setattr(JoinOp, "send", counting_send)
    held: list[bool] = []  # per step's last new left batch: still held apart
    held_apart = Spine.held_apart

    def noting_held_apart(self, first):
        apart = held_apart(self, first)
        held.append(self.upper - 1 in apart)
        return apart

    monkeypatch.setattr(Spine, "held_apart", noting_held_apart)
    # (every small batch merged on insertion as the spine's geometry says, none left waiting
    # at the end: the third epoch's left batch is then merged, as this test needs)
    untailed = LocalSettings(trace=TraceSettings(tail_batches=0))
    flow = dd.Dataflow(runtime=dd.LocalRuntime(untailed))
    left = flow.input("l", schema={"k": "int64", "a": "int64"})
    right = flow.input("r", schema={"k": "int64", "b": "int64"})
    out = left.join(right, on="k").output()
    live = {"l": Counter(), "r": Counter()}
    epochs = [
        # (left rows, right rows): all new, keys 0..4 on both sides
        ([(k, a) for k in range(5) for a in range(3)], [(k, 10 + k) for k in range(5)]),
        # a small left batch next to a large one: held as inserted
        ([(1, 7)], [(1, 21), (4, 24)]),
        # a left batch as large as the last: merged with it on insertion
        ([(2, 8)], [(2, 22)]),
    ]
    for epoch, (ls, rs) in enumerate(epochs):
        left.insert(ls)
        right.insert(rs)
        live["l"].update(ls)
        live["r"].update(rs)
        sent.clear()
        flow.advance_to(epoch + 1)
        flow.run()
        want = reference(flow, live)[out]
        assert frame_to_counter(out.snapshot()) == want
        new = Counter({(k, a, b): 1 for k, a in ls for k2, b in rs if k == k2})
        new += Counter(
            {(k, a, b): 1 for k, a in ls for k2, b in live["r"] if k == k2 and (k2, b) not in rs}
        )
        new += Counter(
            {(k, a, b): 1 for k, a in live["l"] if (k, a) not in ls for k2, b in rs if k == k2}
        )
        # each new product once; a subtracted left batch also gives its products with the
        # new right rows twice more, with opposite signs (cancelling downstream)
        pairs = sum(1 for k, _ in ls for k2, _ in rs if k == k2)
        assert sum(sent) == sum(new.values()) + (0 if held[-1] else 2 * pairs), epoch
        assert held[-1] == (epoch < 2)


def test_an_arranger_lets_go_of_the_batches_as_they_came():
    """The messages an arranger is given are emptied once each port's function has been
    applied: a large batch as it came (a join's output before the select taken up into the
    arrangement) is not held while what the function gave is arranged and inserted; the
    arranged batch holds exactly the selected updates, consolidated."""
    tt = TimeType(("product",))
    k = LocalKernels()
    schema = {"k": pl.Int64, "v": pl.Int64, "__t0": pl.Int64, "__diff": pl.Int64}
    arranger = Arranger(
        tt, k, ["k"], pl.DataFrame(schema=schema), fns=[lambda b: b.filter(pl.col("k") < 10), None]
    )
    came = pl.DataFrame(
        {"k": range(5000), "v": [1] * 5000, "__t0": [0] * 5000, "__diff": [1] * 5000}, schema=schema
    )
    other = pl.DataFrame(
        {"k": [3, 3], "v": [1, 1], "__t0": [0, 0], "__diff": [-1, 2]}, schema=schema
    )
    gone = weakref.ref(came)
    messages = [[((0,), came)], [((0,), other)]]
    del came
    out = arranger.arrange(messages)
    t, batch = next(out)
    assert messages == [] and gone() is None
    assert t == (0,)
    got = Counter()
    for key, v, _, d in frame(batch).select("k", "v", "__t0", "__diff").iter_rows():
        got[(key, v)] += d
    assert got == Counter({(key, 1): 1 + (key == 3) for key in range(10)})
    assert list(out) == []
