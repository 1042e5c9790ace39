"""Arrangements: cases that mutation testing (``python tools/mutation.py trace``) found no test
pinning. Each test names the mutant of ``src/ddflow/runtime/local/trace.py`` it kills."""

from __future__ import annotations

import polars as pl
import pytest

from ddflow.differential.kernel import Description
from ddflow.runtime.local import trace
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.rows import frame as as_frame
from ddflow.runtime.local.trace import Spine, TraceSettings
from ddflow.timely.lattice import TimeType

TT = TimeType(("product", "product"))
DEFAULT = TraceSettings()
K = LocalKernels()
COLUMNS = ["k", "v", "__t0", "__t1", "__diff"]


def batch(rows):
    """rows: (key, val, t0, t1, diff)"""
    frame = pl.DataFrame(rows, schema=dict.fromkeys(COLUMNS, pl.Int64), orient="row")
    return K.arrange(K.consolidate(frame), ["k"])


def insert(s, rows):
    b = batch(rows)
    s.insert(b, b.height)


def updates(s):
    return sorted(as_frame(s.contents()).select(COLUMNS).iter_rows())


def test_compaction_advances_times_to_since_and_consolidates():
    # mutants: Spine.compact returning when there *are* batches, and merging with since None:
    # either way the four updates of one record stayed four, the trace never shrank
    s = Spine(K, TT, ["k"], batch([]))
    reader = s.handle()
    for t in range(4):
        insert(s, [(0, 1, t, 0, 1)])
    assert len(s) == 4
    reader.set_since([(3, 0)])
    s.compact()
    assert len(s) == 1
    assert updates(s) == [(0, 1, 3, 0, 4)]


def test_compaction_finishes_a_merge_in_progress_at_the_end_of_the_spine():
    # mutant: Spine.compact finishing merges in progress from ``len(batches) - 2`` down, so a
    # merge just begun by the last insert (the newest batch) was left a Merging and handed
    # to the merge kernel as if it were a batch
    n = DEFAULT.tail_rows + 1  # (smaller batches may wait at the end unmerged)
    first = [(k, 1, 0, 0, 1) for k in range(n)]
    second = [(k, 1 + k % 2, 1, 0, 1 - 2 * (k % 3 == 0)) for k in range(n)]
    s = Spine(K, TT, ["k"], batch([]), settings=TraceSettings(fueled_rows=2))
    insert(s, first)
    insert(s, second)
    assert type(s.batches[-1]) is trace.Merging
    s.compact()
    assert all(type(b) is not trace.Merging for b in s.batches)
    assert updates(s) == sorted(first + second)


def test_releasing_a_handle_lets_since_advance_and_twice_is_once():
    # mutants: TraceHandle.release leaving the handle active (a second release then removed
    # it from the spine again) or removing None from the spine's handles (never released)
    s = Spine(K, TT, ["k"], batch([]))
    ahead, behind = s.handle(), s.handle()
    ahead.set_since([(5, 5)])
    assert s.since == [(0, 0)]
    behind.release()
    assert s.since == [(5, 5)]
    assert s.handles == [ahead]
    behind.release()
    assert s.handles == [ahead]
    assert s.since == [(5, 5)]


def test_since_is_the_minimal_times_of_the_handles_frontiers():
    # mutant: Spine._recompute_since keeping the times a new one is <= instead of dropping
    # them (``since`` became [(1, 0), (2, 0)], not an antichain)
    s = Spine(K, TT, ["k"], batch([]))
    later, earlier, aside = s.handle(), s.handle(), s.handle()
    later.set_since([(2, 0)])
    earlier.set_since([(1, 0)])
    aside.set_since([(0, 3)])
    assert s.since == [(0, 3), (1, 0)]
    aside.release()
    assert s.since == [(1, 0)]


def test_held_apart_only_the_insertions_that_are_batches_of_their_own():
    # mutant: Spine.held_apart counting a merged batch as held apart (a join then left the
    # merged batch, older updates and all, out of its read of the trace before its new ones)
    s = Spine(K, TT, ["k"], batch([]), settings=TraceSettings(tail_batches=0))
    first = batch([(0, 1, 0, 0, 1)])
    s.insert(first, first.height)
    assert s.held_apart(0) == {0}
    second = batch([(1, 1, 0, 0, 1)])
    s.insert(second, second.height)  # (merged with the first: as large)
    assert s.descriptions() == [Description(0, 2, ((0, 0),))]
    assert s.held_apart(0) == s.held_apart(1) == set()


@pytest.mark.parametrize("rows", [[], [(0, 1, 0, 0, 1), (0, 1, 0, 0, -1)]])
def test_an_empty_trace_has_no_contents(rows):
    s = Spine(K, TT, ["k"], batch([]))
    if rows:
        insert(s, rows)
    assert len(s) == 0
    assert updates(s) == []


def test_compaction_that_cancels_everything_leaves_no_batch():
    # mutant: Spine.compact keeping ``[merged]`` even when the merge left no update (an empty
    # batch kept in the spine forever)
    s = Spine(K, TT, ["k"], batch([]))
    reader = s.handle()
    insert(s, [(0, 1, 0, 0, 1)])
    insert(s, [(0, 1, 1, 0, -1)])
    reader.set_since([(2, 0)])
    s.compact()
    assert s.batches == [] and s.sizes == [] and len(s) == 0


def accumulated(rows):
    """(key, val, t0, t1) -> summed diff, without zeros."""
    acc: dict[tuple[int, ...], int] = {}
    for *record, d in rows:
        acc[tuple(record)] = acc.get(tuple(record), 0) + d
    return {r: d for r, d in acc.items() if d}


def two_large_batches():
    n = DEFAULT.tail_rows + 1  # 65 keys, each in both batches
    first = [(k, 1, 0, 0, 1) for k in range(n)]
    second = [(k, 1 + k % 2, 1, 0, 1 - 2 * (k % 3 == 0)) for k in range(n)]
    return first, second


def test_a_large_merge_advances_a_range_of_keys_per_fuel_chunk():
    # mutants of Merging.work: ``finish=True`` by default (a merge done at once), fuel set
    # to the insert's instead of added (``fuel = fuel``), a step taken only past the chunk
    # (``>``), a whole merge in one step (``rows = size``), the fuel spent not taken off
    # (``fuel = taken``, ``fuel += taken``), merged_records not counting the step
    # (``= taken``, ``-= taken``)
    first, second = two_large_batches()
    # (mutant of Spine._merge_from: a Merging only past ``fueled_rows``, not from it on)
    chunked = TraceSettings(fueled_rows=len(first) + len(second), fuel_chunk=2 * DEFAULT.fuel)
    s = Spine(K, TT, ["k"], batch([]), settings=chunked)
    insert(s, first)
    insert(s, second)
    (merging,) = s.batches
    assert type(merging) is trace.Merging and merging.pieces == [] and s.merged_records == 0
    small = [(1000, 0, 1, 0, 1)]
    insert(s, small)  # FUEL updates of fuel: less than a chunk
    assert merging.pieces == []
    insert(s, small)  # a chunk: one range of 2 * FUEL keys, from both inputs
    assert len(merging.pieces) == 1 and not merging.done
    assert s.merged_records == 2 * 2 * DEFAULT.fuel
    for _ in range(3):  # the step took twice the chunk (both inputs' updates): a debt
        insert(s, small)
        assert len(merging.pieces) == 1
    insert(s, small)
    assert len(merging.pieces) == 2
    assert s.merged_records == 2 * 2 * 2 * DEFAULT.fuel
    inserted = first + second + 6 * small
    while any(type(b) is trace.Merging for b in s.batches):
        insert(s, small)
        inserted += small
        assert len(inserted) < 200
    assert accumulated(updates(s)) == accumulated(inserted)


def test_a_merge_in_steps_advances_times_to_since():
    # mutant: Merging.work merging a range with since None (times kept as inserted: a trace
    # merged in steps never compacted)
    chunked = TraceSettings(fueled_rows=100, fuel_chunk=2 * DEFAULT.fuel)
    s = Spine(K, TT, ["k"], batch([]), settings=chunked)
    s.handle().set_since([(1, 0)])
    for rows in two_large_batches():
        insert(s, rows)
    (merging,) = s.batches
    for _ in range(2):
        insert(s, [(1000, 0, 1, 0, 1)])
    (piece,) = merging.pieces
    assert set(as_frame(piece).select(["__t0", "__t1"]).iter_rows()) == {(1, 0)}
