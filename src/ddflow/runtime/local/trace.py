"""Arrangements: indexed, consolidated, compacting traces of updates.

A trace is the whole history of a collection, ``(data, time, diff)`` updates indexed by key, kept
as a *spine*: a list of arranged batches (sorted by key code), oldest and largest first. A new
batch is appended; while the older neighbour is at most twice its size the two are merged (a
cascade of such merges is done as one merge of all the batches it reaches), so a spine of ``n``
updates has ``O(log n)`` batches and each update is merged ``O(log n)`` times.

*Logical compaction.* Each reader of a trace holds a :class:`TraceHandle` and says from which
frontier on it will read (``set_since``); the trace's ``since`` is the lower envelope of its
handles' frontiers. Accumulations at times in advance of ``since`` are all any reader can ask
for, so a merge advances every time to ``since`` (:meth:`TimeType.advance_by`) and consolidates.
Invariant: for every time ``u`` in advance of ``since``, the accumulation at ``u`` of the trace
equals that of the updates inserted. The size of a trace is therefore bounded by the live data
(distinct ``(data, time)`` pairs after advancing), not by the length of its history.

*Lookups.* ``lookup(codes)`` gathers the updates of a few keys from every batch by binary search
(or, in a runtime that keeps one, through a batch's direct index of dense key codes), in time
proportional to the keys and ``log n``. (For a key per few dozen rows of a batch, a
runtime may scan the batch once instead, a cost still bounded by the keys asked; a reader that
matches keys itself, a join, then takes the batch whole: ``lookup(codes, within=True)``.)

*Merges in steps.* Merging the largest batches at once would make one update in many pay for
a merge of the whole trace. Where the runtime can cut batches by key (its kernels declare
``stepped_merges``), a merge of at least ``fueled_rows`` updates is a :class:`Merging`: it
advances one range of keys at a time, by ``fuel`` updates for every update inserted (in ranges
of at most about ``merge_range_rows``; :class:`TraceSettings`), and the batches it merges
answer lookups until it is done. A merge still in progress when a cascade reaches it is taken
up into the new merge (its inputs join it), never finished at once.

*Descriptions.* The spine counts its insertions, and describes each batch by the range of
insertions it holds and the frontier its times were advanced to
(:class:`~ddflow.differential.kernel.Description`): merges and compaction make a batch of the
union of adjacent ranges. A reader compares descriptions, never batches: a join reads the trace
as of before its new batches (those still held apart left out, the others subtracted), and a
reduce's kept read is still valid while the descriptions it saw are a prefix of the trace's.

The spine itself is runtime-agnostic: batches are opaque to it and every bulk operation goes
through the runtime's kernels (``arrange``, ``merge``, ``lookup``, ``height``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ddflow.differential.batch import DIFF
from ddflow.differential.kernel import Description
from ddflow.timely.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.differential.kernel import SteppedMerges
    from ddflow.runtime.local.kernels import LocalKernels

__all__ = ["Merging", "Spine", "TraceHandle", "TraceSettings"]


@dataclass(frozen=True)
class TraceSettings:
    """How a runtime's traces merge (each runtime's settings hold one).

    * ``merge_factor``: a batch is merged with its older neighbour while that one is at most
      this many times its size (the spine's geometric invariant);
    * ``tail_batches``, ``tail_rows``: where the kernels declare ``small_tail``, up to
      ``tail_batches`` batches of at most ``tail_rows`` updates together stay unmerged at the
      end of the spine (a small update inserts one per step; merging a few rows each time
      costs a merge's fixed cost);
    * ``fueled_rows``: merges of at least this many updates are done in steps
      (:class:`Merging`), where the kernels declare ``stepped_merges``;
    * ``fuel``: the updates a merge in progress advances by for each update inserted;
    * ``fuel_chunk``: a merge in progress works on ranges of keys of at least this many
      updates;
    * ``merge_range_rows``: ... and of at most about this many (a large insert's fuel is spent
      in several ranges, so that a merge's intermediate frames are of one range at a time).

    >>> TraceSettings(fuel=8).fuel_chunk
    50000
    """

    merge_factor: int = 2
    tail_batches: int = 6
    tail_rows: int = 64
    fueled_rows: int = 250_000
    fuel: int = 4
    fuel_chunk: int = 50_000
    merge_range_rows: int = 1_000_000


class Merging:
    """A merge of adjacent batches done one range of keys at a time (see the module)."""

    def __init__(
        self, inputs: Sequence[Any], described: Sequence[Description], size: int, since: Any
    ) -> None:
        self.inputs = list(inputs)
        #: the descriptions of the inputs
        self.described = list(described)
        #: the description of the result
        self.description = Description(described[0].lower, described[-1].upper, since)
        self.size = size
        self.start: Any = None  # the first key code not merged yet (None: from the first)
        self.pieces: list[Any] = []
        self.fuel = 0
        self.done = False

    def work(self, spine: Spine, fuel: int, finish: bool = False) -> None:
        """Spend ``fuel`` (every update with ``finish``) merging ranges of keys."""
        k = cast("SteppedMerges", spine.kernels)
        settings = spine.settings
        self.fuel += fuel
        while not self.done and (finish or self.fuel >= settings.fuel_chunk):
            rows = min(self.size if finish else self.fuel, settings.merge_range_rows)
            ranges, self.start = k.merge_cut(self.inputs, self.start, rows)
            merged = k.merge(ranges, spine.time_type, spine.since, spine.sums, spine.keys)
            taken = sum(k.height(r) for r in ranges)
            self.fuel -= taken
            spine.merged_records += taken
            if k.height(merged):
                self.pieces.append(merged)
            self.done = self.start is None

    def result(self, spine: Spine) -> Any:
        """The merged batch (of a merge done): the merge lets go of its inputs and pieces."""
        pieces, self.pieces, self.inputs, self.described = self.pieces, [], [], []
        return cast("SteppedMerges", spine.kernels).merge_pieces(pieces, spine.keys)


class Spine:
    """A trace of arranged batches with geometric merging and compaction."""

    def __init__(
        self,
        kernels: LocalKernels,
        time_type: TimeType,
        keys: Sequence[str],
        empty: Any,
        sums: Sequence[str] = (DIFF,),
        settings: TraceSettings | None = None,
    ) -> None:
        self.kernels = kernels
        self.time_type = time_type
        self.keys = list(keys)
        self.batches: list[Any] = []
        self.sizes: list[int] = []
        #: the batches' descriptions (of a merge in progress: of its result)
        self.described: list[Description] = []
        self.since: list[Time] = [time_type.minimum()]
        self.handles: list[TraceHandle] = []
        self.empty = empty
        self.sums = tuple(sums)
        #: how it merges (the runtime's, unless given)
        self.settings = kernels.trace_settings if settings is None else settings
        #: whether a few small batches at the end wait to be merged (``tail_batches``)
        self.small_tail = kernels.capabilities.small_tail
        #: whether large merges are done in steps (``fueled_rows``)
        self.stepped_merges = kernels.capabilities.stepped_merges
        #: updates merged so far (a measure of the work compaction did)
        self.merged_records = 0
        #: :meth:`parts` and :meth:`descriptions`, kept until the batches change (read
        #: several times per step)
        self._parts: tuple[list[Any], list[Description]] | None = None
        #: batches inserted so far (the position of the next insertion)
        self.upper = 0

    # ------------------------------------------------------------------ readers

    def handle(self) -> TraceHandle:
        """A new reader; it holds the trace's ``since`` back until it advances its own."""
        h = TraceHandle(self, list(self.since))
        self.handles.append(h)
        return h

    def _recompute_since(self) -> None:
        tt = self.time_type
        lower: list[Time] = []
        for h in self.handles:
            for t in h.since:
                if not any(tt.less_equal(x, t) for x in lower):
                    lower = [x for x in lower if not tt.less_equal(t, x)]
                    lower.append(t)
        self.since = sorted(lower)

    # ------------------------------------------------------------------ writing

    def insert(self, batch: Any, height: int) -> Description | None:
        """Append an arranged batch and restore the geometric invariant by merging; merges
        in progress advance by ``fuel`` updates per update inserted. The batch's
        description (None: empty, not inserted)."""
        if height == 0:
            return None
        self._parts = None
        description = Description(self.upper, self.upper + 1, tuple(self.since))
        self.upper += 1
        for i in range(len(self.batches) - 1, -1, -1):
            b = self.batches[i]
            if type(b) is Merging:
                b.work(self, self.settings.fuel * height)
                if b.done:
                    self._settle(i)
        self.batches.append(batch)
        self.sizes.append(height)
        self.described.append(description)
        settings = self.settings
        if len(self.sizes) < 2 or self.sizes[-2] > settings.merge_factor * self.sizes[-1]:
            return description
        if height <= settings.tail_rows and self.small_tail:
            # a few small batches are left unmerged at the end (a small update inserts one
            # per operator step, and merging a few rows costs its fixed cost each time)
            n, rows = 0, 0
            for size in reversed(self.sizes):
                if size > settings.tail_rows:
                    break
                n, rows = n + 1, rows + size
            if n <= settings.tail_batches and rows <= settings.tail_rows:
                return description
        # the batches a cascade of merges two at a time would reach (each merged batch at
        # least half its older neighbour), merged at once: each update is merged once per
        # cascade, not once per level, and a large merge never has to be finished at once
        # only to merge again with its older neighbour
        total, i = self.sizes[-1], len(self.sizes) - 2
        while i >= 0 and self.sizes[i] <= settings.merge_factor * total:
            total += self.sizes[i]
            i -= 1
        self._merge_from(i + 1)
        return description

    def _merge_from(self, i: int) -> None:
        """Merge the batches from position ``i`` on into one (a :class:`Merging`, done in
        steps by later inserts, when large). A merge in progress among them is taken up
        whole: its inputs join the new merge (the ranges it merged are merged again)."""
        self._parts = None
        inputs, described = self._unfold(i)
        total = sum(self.sizes[i:])
        del self.batches[i:], self.sizes[i:], self.described[i:]
        since = tuple(self.since)
        if total >= self.settings.fueled_rows and self.stepped_merges:
            merging = Merging(inputs, described, total, since)
            self.batches.append(merging)
            self.sizes.append(total)
            self.described.append(merging.description)
            return
        merged = self.kernels.merge(inputs, self.time_type, self.since, self.sums, self.keys)
        self.merged_records += total
        h = self.kernels.height(merged)
        if h:  # (a merge whose updates all cancel leaves no batch: see held_apart)
            self.batches.append(merged)
            self.sizes.append(h)
            self.described.append(Description(described[0].lower, described[-1].upper, since))

    def _finish(self, i: int) -> bool:
        """Complete the merge in progress at position ``i``, if it is one (then True)."""
        b = self.batches[i]
        if type(b) is not Merging:
            return False
        b.work(self, 0, finish=True)
        self._settle(i)
        return True

    def _settle(self, i: int) -> None:
        """Put the result of the completed merge at position ``i`` in its place."""
        self._parts = None
        merged = self.batches[i].result(self)
        h = self.kernels.height(merged)
        if h:
            self.batches[i], self.sizes[i] = merged, h
        else:
            del self.batches[i], self.sizes[i], self.described[i]

    def compact(self) -> None:
        """Merge every batch into one, advancing all times to ``since``."""
        if not self.batches:
            return
        self._parts = None
        for i in range(len(self.batches) - 1, -1, -1):
            self._finish(i)
        if not self.batches:  # (the merges finished cancelled every update)
            return
        merged = self.kernels.merge(self.batches, self.time_type, self.since, self.sums, self.keys)
        self.merged_records += sum(self.sizes)
        h = self.kernels.height(merged)
        d = self.described
        description = Description(d[0].lower, d[-1].upper, tuple(self.since))
        self.batches, self.sizes, self.described = (
            ([merged], [h], [description]) if h else ([], [], [])
        )

    # ------------------------------------------------------------------ reading

    def lookup(self, codes: Any, within: bool = False, apart_from: int | None = None) -> Any:
        """The updates of the keys with the given (sorted, unique) codes. ``within``: a
        reader that matches keys itself (a join) may get other keys' updates too, where the
        runtime saves a copy by it (``lookup_within``). ``apart_from``: leave out the
        batches that each hold one insertion at or after this position (see
        :meth:`held_apart`)."""
        parts = self.parts()
        if apart_from is not None:
            parts = [
                p
                for p, d in zip(parts, self.descriptions(), strict=True)
                if not (d.lower >= apart_from and d.upper == d.lower + 1)
            ]
        if not parts:
            return self.empty
        return self.kernels.lookup_parts(parts, codes, within)

    def held_apart(self, first: int) -> set[int]:
        """The insertions from position ``first`` on still held as batches of their own.
        The trace accumulates to the sum of its insertions, so leaving these out of a
        lookup (``apart_from=first``) and subtracting the other insertions from ``first`` on
        (merged into other batches, or cancelled by a merge that left no batch) reads the
        trace as of its first ``first`` insertions."""
        return {d.lower for d in self.descriptions() if d.lower >= first and d.upper == d.lower + 1}

    def parts(self) -> list[Any]:
        """The batches, with the inputs of each merge in progress. (One list until the
        batches change: the caller does not modify it.)"""
        return self._layout()[0]

    def descriptions(self) -> list[Description]:
        """The descriptions of :meth:`parts`, in their order (one list until the batches
        change: the caller does not modify it)."""
        return self._layout()[1]

    def _layout(self) -> tuple[list[Any], list[Description]]:
        layout = self._parts
        if layout is None:
            layout = self._parts = self._unfold(0)
        return layout

    def _unfold(self, i: int) -> tuple[list[Any], list[Description]]:
        """The batches from position ``i`` on, each merge in progress as its inputs, and
        their descriptions."""
        parts: list[Any] = []
        described: list[Description] = []
        for b, d in zip(self.batches[i:], self.described[i:], strict=True):
            if type(b) is Merging:
                parts += b.inputs
                described += b.described
            else:
                parts.append(b)
                described.append(d)
        return parts, described

    def contents(self) -> Any:
        """Every update of the trace (for tests and debugging)."""
        if not self.batches:
            return self.empty
        return self.kernels.concat(self.parts())

    def __len__(self) -> int:
        """The number of updates the trace holds."""
        return sum(self.sizes)

    def save(self, name: str) -> dict[str, Any]:
        """The trace's batches as Polars frames, named ``name.0``, ``name.1``... (for a
        checkpoint: read as they are held, not merged: each with its key codes, in key order,
        its columns in their order)."""
        k = self.kernels
        return {f"{name}.{i}": k.to_polars(b) for i, b in enumerate(self.parts())}

    def load(self, frames: dict[str, Any], name: str) -> None:
        """Hold the batches :meth:`save` gave (arranged again: found in key order), in a
        trace that holds none."""
        if self.batches:
            raise RuntimeError("a trace is loaded only while empty")
        k = self.kernels
        parts = sorted(
            (int(n.rsplit(".", 1)[1]), f) for n, f in frames.items() if n.startswith(f"{name}.")
        )
        self._parts = None
        since = tuple(self.since)
        for _, frame in parts:
            if frame.height:
                batch = k.arrange(k.from_polars(frame), self.keys)
                self.batches.append(batch)
                self.sizes.append(k.height(batch))
                self.described.append(Description(self.upper, self.upper + 1, since))
                self.upper += 1


class TraceHandle:
    """A reader's hold on a trace: the frontier from which it will read."""

    def __init__(self, spine: Spine, since: list[Time]) -> None:
        self.spine = spine
        self.since = since
        self.active = True

    def set_since(self, frontier: Sequence[Time]) -> None:
        """Promise to read only at times in advance of ``frontier`` from now on."""
        frontier = sorted(tuple(t) for t in frontier)
        if frontier != self.since:
            self.since = frontier
            self.spine._recompute_since()

    def release(self) -> None:
        """This reader is done: it no longer holds compaction back."""
        if self.active:
            self.active = False
            self.spine.handles.remove(self)
            self.spine._recompute_since()
