"""An output's log of changes: epochs of small changes are held as the runtime gives them
(rows) and made frames when read, a run of them at a time; what ``snapshot`` (at any
complete epoch) and ``changes`` read is as if each epoch's changes were a frame."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.runtime.local.rows import Rows
from ddflow.runtime.local.settings import LocalSettings
from ddflow.testing import frame_to_counter

_epoch = st.lists(st.tuples(st.integers(0, 5), st.sampled_from([1, 1, -1])), max_size=6)


@pytest.mark.parametrize("held", [1, 3, 256])
@settings(max_examples=25, deadline=None)
@given(
    epochs=st.lists(st.tuples(_epoch, st.booleans(), st.booleans()), min_size=1, max_size=14),
    wide=st.integers(0, 13),
)
def test_snapshots_and_changes_read_every_epoch_as_given(held, epochs, wide):
    """A count per key over epochs of a few updates (one epoch of many: changes given as a
    frame), with reads (a snapshot at every complete epoch, and the changes) after random
    epochs and at the end: each snapshot is the counts accumulated through its epoch, and the
    changes sum to them. ``held``: epochs held as rows before they are made a frame."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(LocalSettings(held_epochs=held)))
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.group_by("k").agg(n=dd.count()).output()
    live: Counter = Counter()
    expected: list[Counter] = []  # the output's contents at each epoch
    kinds = set()
    for epoch, (updates, read, wide_epoch) in enumerate(epochs):
        if epoch == wide and wide_epoch:
            updates = [(k, 1) for k in range(1000, 1600)]  # (a frame, not rows)
        given = []
        for k, d in updates:
            d = d if live[k] + d >= 0 else 1  # (only records present are retracted)
            live[k] += d
            given.append((k, d))
        xs.update(given)
        flow.advance_to(epoch + 1)
        flow.run()
        expected.append(Counter({(k, n): 1 for k, n in live.items() if n}))
        kinds.update(type(c).__name__ for _, _, c in out._log.entries)
        if read:
            _check(out, expected)
    _check(out, expected)
    assert all(type(c) is not Rows for _, _, c in out._log.entries)  # (read: all frames now)
    assert kinds <= {"Rows", "DataFrame"}


def _check(out: dd.Output, expected: list[Counter]) -> None:
    for e, want in enumerate(expected):
        assert frame_to_counter(out.snapshot(epoch=e)) == want, e
    total: Counter = Counter()
    for row in out.changes().itertuples(index=False):
        total[(row.k, row.n)] += row.diff
    assert +total == expected[-1]


def test_epochs_of_small_changes_are_held_as_rows_until_read():
    """Small changes are kept as rows (no frame made per epoch); a read, or the
    ``held_epochs``-th epoch held, makes the run of them one frame."""
    flow = dd.Dataflow(runtime=dd.LocalRuntime(LocalSettings(held_epochs=4)))
    xs = flow.input("xs", schema={"k": "int64"})
    out = xs.group_by("k").agg(n=dd.count()).output()
    for epoch in range(3):
        xs.insert([(epoch,)])
        flow.advance_to(epoch + 1)
        flow.run()
    assert [type(c) for _, _, c in out._log.entries] == [Rows] * 3
    assert frame_to_counter(out.snapshot(epoch=1)) == Counter({(0, 1): 1, (1, 1): 1})
    assert [(a, b, type(c).__name__) for a, b, c in out._log.entries] == [(0, 2, "DataFrame")]
    for epoch in range(3, 7):
        xs.insert([(epoch,)])
        flow.advance_to(epoch + 1)
        flow.run()
    # (the fourth epoch held made the run of four one frame)
    assert [(a, b, type(c).__name__) for a, b, c in out._log.entries] == [
        (0, 2, "DataFrame"),
        (3, 6, "DataFrame"),
    ]
    for epoch, keys in ((7, [100]), (8, range(1000, 1600)), (9, [101]), (10, [102])):
        xs.insert([(k,) for k in keys])
        flow.advance_to(epoch + 1)
        flow.run()
    # (many changes: given as a frame, between runs of rows)
    assert [(a, b, type(c).__name__) for a, b, c in out._log.entries] == [
        (0, 2, "DataFrame"),
        (3, 6, "DataFrame"),
        (7, 7, "Rows"),
        (8, 8, "DataFrame"),
        (9, 9, "Rows"),
        (10, 10, "Rows"),
    ]
    got = frame_to_counter(out.snapshot(epoch=9))
    assert got == Counter({(k, 1): 1 for k in [*range(7), 100, *range(1000, 1600), 101]})
    assert [(a, b) for a, b, _ in out._log.entries] == [(0, 2), (3, 6), (7, 7), (8, 8), (9, 10)]
