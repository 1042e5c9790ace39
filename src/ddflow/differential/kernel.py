"""The kernel contract: what a runtime supplies to the operators.

The scheduler, progress tracking and every operator algorithm exist once; a runtime supplies
bulk operations on batches (:mod:`ddflow.differential.batch` says how a batch is laid out) and
the arrangements that hold them: :meth:`Kernels.trace` hands out a :class:`Trace`, which an
arrangement writes (:class:`TraceWriter`: insert, compact, save, load) and its readers read
(:class:`TraceReader`: a handle each that lets the trace compact, and lookups by key set), as
differential dataflow splits a trace from its readers. The operators hold batches as opaque
values and never look inside them: everything they learn of a batch (emptiness, sizes, the
distinct times it holds) comes back from a kernel as a Python value, and data stays in the
runtime's batches. A *key set* is whatever :meth:`Kernels.key_set` returns and
:meth:`Kernels.lookup` accepts.

Every operation a runtime must have is a method of :class:`Kernels`. What a runtime may do in
addition is declared in its :class:`Capabilities`, and the protocol of each optional group of
methods (:class:`SteppedMerges`, :class:`RowBatches`, :class:`DistinctSkips`) says what it
then provides; operators test the declared flag, never ``hasattr``.

A reduce's state and its whole step are the runtime's: :meth:`Kernels.reducer` hands the
operator a :class:`Reducer` for a :class:`ReduceSpec`, which owns the reduce's input and output
arrangements and does a step in a few coarse calls (``take``, ``pending``, ``evaluate``,
``set_since``), so that a native implementation crosses the boundary a few times a step, not
dozens. The Python reducer reads its two arrangements by key set many times a step; how those
reads are served (kept between reads, narrowed, added to) is the runtime's business:
:meth:`Kernels.reduce_reads` gives it a :class:`ReduceReads`, and :class:`SpineReads`, which
reads the spines afresh each time, is the plain implementation any runtime can return.

Invariants every runtime keeps (the operators rely on them; the semantics suite checks them):

* every kernel is a function of the updates' accumulations, not of how they are batched:
  ``consolidate(concat([a, b]))`` accumulates at every time to what ``a`` and ``b`` do;
* ``arrange`` keeps every update and adds the key code; ``lookup(b, keys)`` returns exactly the
  updates of ``b`` whose key code is in ``keys``;
* ``merge(bs, tt, since, ...)`` accumulates, at every time in advance of ``since``, to what
  ``bs`` do (times advanced by :meth:`~ddflow.timely.lattice.TimeType.advance_by`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ddflow.differential.batch import weight_column
from ddflow.timely.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.differential.operators.join import Arranger
    from ddflow.differential.operators.region import RegionHandle
    from ddflow.timely.progress import ProgressGraph

__all__ = [
    "Batch",
    "Capabilities",
    "ChangeLog",
    "Description",
    "DistinctSkips",
    "Kernels",
    "LoopRegions",
    "Partitions",
    "ReduceReads",
    "ReduceSpec",
    "Reducer",
    "RowBatches",
    "SpineReads",
    "SteppedMerges",
    "Trace",
    "TraceHandle",
    "TraceReader",
    "TraceWriter",
]

#: a batch of updates, in the runtime's own representation (opaque to the operators)
Batch = Any


@dataclass(frozen=True)
class Capabilities:
    """The optional capabilities a runtime declares (each ``False`` unless declared).

    * ``stepped_merges``: the kernels are :class:`SteppedMerges`: a large merge of a trace's
      batches can advance one range of keys at a time (the local runtime's
      :class:`~ddflow.runtime.local.trace.Merging`);
    * ``small_tail``: a trace may leave its few smallest batches unmerged (a lookup in a small
      batch costs less than merging it);
    * ``row_batches``: the kernels are :class:`RowBatches`: a few updates can become a batch
      without a frame;
    * ``distinct_skips``: the kernels are :class:`DistinctSkips`: a distinct can skip the keys
      whose new insertions change nothing;
    * ``partitions``: the kernels are :class:`Partitions`: a batch can be split by the
      worker that owns each update's key (a dataflow over several workers);
    * ``loop_regions``: the kernels are :class:`LoopRegions`: a loop of built-in operators can
      run whole in the runtime (:mod:`ddflow.plan.regions`).

    >>> Capabilities(small_tail=True).stepped_merges
    False
    """

    stepped_merges: bool = False
    small_tail: bool = False
    row_batches: bool = False
    distinct_skips: bool = False
    partitions: bool = False
    loop_regions: bool = False


class TraceHandle(Protocol):
    """A reader's hold on a trace: the frontier from which it will read."""

    def set_since(self, frontier: Sequence[Time]) -> None:
        """Promise to read only at times in advance of ``frontier`` from now on (the trace may
        compact up to the lower envelope of its handles' frontiers)."""
        ...

    def release(self) -> None:
        """This reader is done: it no longer holds compaction back."""
        ...


class Description(NamedTuple):
    """What one of a trace's batches holds, in place of the batch's identity.

    A trace counts its insertions (its logical clock, as differential dataflow's batches are
    described by the input frontiers they span): a batch holds the accumulation of insertions
    ``lower`` up to, not including, ``upper``, with times advanced to ``since``, at every
    time in advance of ``since``. An inserted batch holds one insertion; a merge of adjacent
    batches holds the union of their ranges. ``upper == lower + 1``: the batch is one
    insertion held apart (its times maybe advanced since).

    >>> Description(3, 4, ((0, 0),)).upper
    4
    """

    lower: int
    upper: int
    since: tuple[Time, ...]


class TraceReader(Protocol):
    """What the readers of an arrangement see: accumulations at times in advance of their
    handles' frontiers, by key set, and the descriptions of the batches that hold them."""

    #: the number of batches inserted so far (the trace's logical clock)
    upper: int

    def handle(self) -> TraceHandle:
        """A new reader, holding compaction back until it advances its frontier."""
        ...

    def lookup(self, codes: Any, within: bool = False, apart_from: int | None = None) -> Batch:
        """The updates of the keys in ``codes`` (a key set); ``within``: the reader matches keys
        itself and may get other keys' updates too; ``apart_from``: leave out the batches
        that each hold one insertion at or after this position (:meth:`held_apart`)."""
        ...

    def held_apart(self, first: int) -> set[int]:
        """The insertions from position ``first`` on that the trace still holds as batches of
        their own: a lookup that leaves them out (``apart_from``) and subtracts the others
        from ``first`` on reads the trace as of its first ``first`` insertions."""
        ...

    def parts(self) -> list[Batch]:
        """The batches held (the caller does not modify the list)."""
        ...

    def descriptions(self) -> list[Description]:
        """The descriptions of :meth:`parts`, in their order (the caller does not modify the
        list): equal lists mean the trace holds its updates as it did."""
        ...

    def __len__(self) -> int:
        """The number of updates held."""
        ...


class TraceWriter(Protocol):
    """What the arrangement that owns a trace does to it."""

    def insert(self, batch: Batch, height: int) -> Description | None:
        """Add an arranged batch of ``height`` updates (an insertion, unless empty: then
        None)."""
        ...

    def compact(self) -> None:
        """Merge everything held, advancing times to the readers' frontier."""
        ...

    def save(self, name: str) -> dict[str, Any]:
        """The batches held, as Polars frames named ``name.0``, ``name.1``..."""
        ...

    def load(self, frames: dict[str, Any], name: str) -> None:
        """Hold the batches :meth:`save` gave, in a trace that holds none."""
        ...


class Trace(TraceReader, TraceWriter, Protocol):
    """An arrangement: written by its owner, read through handles (:meth:`Kernels.trace`)."""


class Kernels(Protocol):
    """The bulk operations every runtime implements (see the module for their invariants)."""

    #: the runtime's name (``"local"``, ``"spark"``)
    name: str
    #: what the runtime can do beyond this protocol
    capabilities: Capabilities

    # progress
    def progress_tracker(
        self,
        graph: ProgressGraph,
        watched: set[int] | None,
        on_demand: set[int],
        merged: set[int],
    ) -> Any:
        """The progress tracker of a worker's graph: a
        :class:`~ddflow.timely.progress.Tracker` (the arguments are its constructor's), or an
        implementation of the methods a scheduler calls on it (``update_source``,
        ``update_target``, ``count_pending``, ``propagate``, ``frontier``, ``all_complete``,
        ``pending_changes``, ``uncounted_changes``) with the same answers."""
        ...

    # construction and conversion
    def empty(self, schema: Any, tt: TimeType) -> Batch: ...
    def from_polars(self, frame: Any) -> Batch: ...
    def to_polars(self, batch: Batch) -> Any: ...
    def to_log(self, batch: Batch) -> Any:
        """A batch of an epoch's changes as an output keeps it (see :meth:`change_log`)."""
        ...

    def change_log(self) -> ChangeLog:
        """A new, empty log for an output's changes."""
        ...

    # facts
    def height(self, batch: Batch) -> int: ...
    def is_empty(self, batch: Batch) -> bool: ...
    def distinct_times(self, batch: Batch, tt: TimeType) -> list[Time]: ...
    def count_by_time(self, batch: Batch, tt: TimeType) -> list[tuple[Time, int]]: ...

    # linear
    def compile(self, expr: Any, schema: Any, name: str | None) -> Any: ...
    def select(self, batch: Batch, compiled: Sequence[Any], tt: TimeType) -> Batch: ...
    def with_columns(
        self, batch: Batch, compiled: Sequence[Any], names: Sequence[str], tt: TimeType
    ) -> Batch: ...
    def filter(self, batch: Batch, predicate: Any) -> Batch: ...
    def map_rows(
        self,
        batch: Batch,
        fn: Callable[..., Any],
        schema: Any,
        src_names: Sequence[str],
        tt: TimeType,
        flat: bool,
    ) -> Batch: ...
    def inspect(
        self, batch: Batch, fn: Callable[[Any], None], names: Sequence[str], tt: TimeType
    ) -> Batch: ...
    def concat(self, batches: Sequence[Batch]) -> Batch: ...
    def negate(self, batch: Batch) -> Batch: ...
    def consolidate(self, batch: Batch, sums: Sequence[str] = ...) -> Batch: ...

    # times
    def enter(
        self, batch: Batch, outer: TimeType, inner: TimeType, priority: Any = None
    ) -> Batch: ...
    def leave(self, batch: Batch, inner: TimeType, outer: TimeType) -> Batch: ...
    def increment(self, batch: Batch, tt: TimeType, limit: int | None) -> Batch: ...
    def split_by_time(self, batch: Batch, tt: TimeType) -> list[tuple[Time, Batch]]: ...
    def split_complete(
        self, batches: Sequence[Batch], last_epoch: int
    ) -> tuple[Batch | None, list[Batch]]: ...

    # arrangements and joins
    def arrange(self, batch: Batch, keys: Sequence[str]) -> Batch: ...
    def merge(
        self,
        batches: Sequence[Batch],
        tt: TimeType,
        since: Sequence[Time],
        sums: Sequence[str],
        keys: Sequence[str],
    ) -> Batch: ...
    def key_set(self, batch: Batch) -> Any: ...
    def lookup(self, batch: Batch, keys: Any) -> Batch: ...
    def lookup_parts(self, parts: Sequence[Batch], keys: Any, within: bool = False) -> Batch:
        """The updates of the keys in every batch of ``parts``, together. ``within``: the
        reader matches keys itself (a join), so other keys' updates may come too."""
        ...

    def join_slice(
        self,
        delta: Batch,
        other: Batch,
        tt: TimeType,
        left_on: Sequence[str],
        right_on: Sequence[str],
        delta_is_left: bool,
        output: Sequence[tuple[str, str, str]],
    ) -> Batch: ...

    # the reduce family
    def reducer(
        self, spec: ReduceSpec, tt: TimeType, arranger: Arranger, output_empty: Batch
    ) -> Reducer:
        """The state and step of a reduce computing ``spec`` over the input that ``arranger``
        shapes (its port functions and ``prepare``), with output batches like
        ``output_empty``. The choice between implementations is made here, once."""
        ...

    def trace(
        self, tt: TimeType, keys: Sequence[str], empty: Batch, sums: Sequence[str] = ("__diff",)
    ) -> Trace:
        """An empty arrangement of batches like ``empty`` (arranged on ``keys``), consolidated
        by adding the ``sums`` columns."""
        ...

    def reduce_reads(
        self, input: Trace, output: Trace, spec: ReduceSpec, tt: TimeType
    ) -> ReduceReads: ...
    def interesting_times(
        self, new: Batch, history: Batch, tt: TimeType, keys: Sequence[str]
    ) -> list[tuple[Time, Batch]]: ...
    def time_queries(self, pending: dict[Time, list[Batch]], tt: TimeType) -> Batch: ...
    def reduce_prepare(self, spec: ReduceSpec, batch: Batch, tt: TimeType) -> Batch: ...
    def evaluation_slices(
        self, queries: Batch, keys: Any, parts: Sequence[Batch]
    ) -> list[tuple[Batch, Any]] | None:
        """The queries cut into ranges of keys, to be read and evaluated one range at a time;
        ``None``: evaluated at once."""
        ...

    def reduce_evaluate(
        self, spec: ReduceSpec, queries: Batch, history: Batch, out_history: Batch, tt: TimeType
    ) -> Batch: ...
    def minmax_unchanged(
        self, spec: ReduceSpec, new: Batch, out_history: Batch, tt: TimeType
    ) -> Batch: ...
    def without_keys(self, batch: Batch, keys: Batch) -> Batch: ...
    def drop_key(self, batch: Batch) -> Batch: ...


@dataclass(frozen=True)
class ReduceSpec:
    """What a reduce computes, for the runtime's kernels.

    ``kind`` is ``"agg"`` (``aggs``: ``(output name, count|sum|min|max|mean|top_k|arg_max,
    column)``, with ``ranked`` giving each ``top_k``/``arg_max`` its ``k`` and ``by``),
    ``"distinct"``, ``"threshold"`` (``fn(m) -> m'``) or ``"reduce"`` (``fn(key, group)``).
    ``values`` are the input columns the function reads besides the keys; ``weights`` the
    pre-multiplied columns a count/sum-only aggregate keeps instead of values; ``outputs`` the
    output columns after the keys, with their types in ``out_types``.
    """

    kind: str
    keys: tuple[str, ...]
    values: tuple[str, ...] = ()
    weights: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    aggs: tuple[tuple[str, str, str | None], ...] = ()
    fn: Callable[..., Any] | None = None
    out_types: dict[str, Any] = field(default_factory=dict)
    #: ``(output name, k, by column)`` of each ``top_k`` / ``arg_max`` in ``aggs``
    ranked: tuple[tuple[str, int, str], ...] = ()

    def rank_of(self, name: str) -> tuple[int, str]:
        """``(k, by)`` of the ``top_k`` or ``arg_max`` aggregate named ``name``."""
        for n, k, by in self.ranked:
            if n == name:
                return k, by
        raise KeyError(name)

    @staticmethod
    def of(
        kind: str,
        keys: Sequence[str],
        *,
        aggs: Sequence[tuple[str, str, str | None]] = (),
        fn: Callable[..., Any] | None = None,
        values: Sequence[str] = (),
        outputs: Sequence[str] = (),
        out_types: dict[str, Any] | None = None,
        ranked: Sequence[tuple[str, int, str]] = (),
    ) -> ReduceSpec:
        aggs = tuple(aggs)
        weights: tuple[str, ...] = ()
        if kind == "agg":
            outputs = tuple(a[0] for a in aggs)
            if all(a[1] in ("count", "sum", "mean") for a in aggs):
                kind = "agg_weights"  # count/sum/mean keep only accumulated weights
                weights = tuple(sorted({weight_column(c) for _, _, c in aggs if c is not None}))
                values = ()
            else:
                read = {c for _, _, c in aggs if c is not None} | {by for _, _, by in ranked}
                values = tuple(sorted(read))
        return ReduceSpec(
            kind,
            tuple(keys),
            tuple(values),
            weights,
            tuple(outputs),
            aggs,
            fn,
            dict(out_types or {}),
            tuple(ranked),
        )

    @property
    def minmax_only(self) -> bool:
        """An aggregate of only ``min`` and ``max``."""
        return self.kind == "agg" and all(a[1] in ("min", "max") for a in self.aggs)


class Reducer(Protocol):
    """A reduce's two arrangements and its step (:mod:`ddflow.differential.operators.reduce`
    states the invariant it maintains).

    The operator keeps capabilities and frontiers; the reducer everything else. A step is::

        took = reducer.take(messages)           # new input: arranged, interesting times pending
        out = reducer.evaluate(frontier)        # the pending times complete at the frontier
        ... (evaluate again while the operator's own capabilities held times back)
        reducer.set_since(frontier)             # compaction of both arrangements

    Invariants: :meth:`pending` is the antichain of minimal pending times, sorted (the
    operator holds a capability for each); :meth:`evaluate` processes exactly the pending
    ``(key, time)`` pairs whose time no element of ``frontier`` is ``<=``, in a linear extension
    of the order within a key, and returns the output corrections by time.
    """

    #: whether the reduce runs in the native core (shown by ``Dataflow.explain``)
    native: bool
    #: ``(key, time)`` pairs evaluated so far (the work done, for instrumentation)
    evaluated: int
    #: keys whose new updates were seen to change nothing (no group rebuilt)
    skipped: int

    def take(self, messages: list[list[tuple[Time, Batch]]]) -> bool:
        """Arrange and insert the new input (a list of ``(time, batch)`` per input port,
        emptied) and add its interesting times to the pending ones; whether there was any."""
        ...

    def pending(self) -> list[Time]:
        """The minimal pending times, sorted."""
        ...

    def evaluate(self, frontier: Sequence[Time]) -> list[tuple[Time, Batch]] | None:
        """Evaluate the pending times complete at ``frontier``; the output corrections (keys
        dropped) by time, or ``None`` where no pending time was complete."""
        ...

    def set_since(self, frontier: Sequence[Time]) -> None:
        """The operator will read both arrangements only at times in advance of
        ``frontier`` from now on (they may compact up to it)."""
        ...

    def save(self) -> dict[str, Any]:
        """The two arrangements as Polars frames (``input.N``, ``output.N``), with nothing
        pending; any :class:`Reducer` of the same spec loads them."""
        ...

    def load(self, frames: dict[str, Any]) -> None:
        """Hold what :meth:`save` gave, in a reducer that holds nothing."""
        ...

    def sizes(self) -> tuple[int, int]:
        """The updates held by the input and output arrangements."""
        ...


class SteppedMerges(Kernels, Protocol):
    """Kernels that merge batches a range of keys at a time (``stepped_merges``)."""

    def merge_cut(
        self, batches: Sequence[Batch], start: Any, rows: int
    ) -> tuple[list[Batch], Any]: ...
    def merge_pieces(self, pieces: list[Batch], keys: Sequence[str]) -> Batch: ...


class RowBatches(Kernels, Protocol):
    """Kernels that make a batch of a few updates given as rows (``row_batches``)."""

    #: batches of at most this many updates may be made from rows
    small_rows: int

    def from_rows(
        self, schema: dict[str, Any], rows: Callable[[], list[tuple[Any, ...]]]
    ) -> Batch | None: ...


class DistinctSkips(Kernels, Protocol):
    """Kernels that find a distinct's keys whose insertions change nothing
    (``distinct_skips``)."""

    def distinct_unchanged(
        self, spec: ReduceSpec, new: Batch, out_history: Batch, tt: TimeType
    ) -> Batch: ...


class Partitions(Kernels, Protocol):
    """Kernels that split a batch over workers (``partitions``)."""

    def partition(self, batch: Batch, keys: Sequence[str], workers: int) -> list[tuple[int, Batch]]:
        """The non-empty parts of ``batch`` by the worker (of ``workers``) that owns each
        update's key columns ``keys``: every batch representation gives one key the same
        worker, in every process."""
        ...


class ChangeLog(Protocol):
    """An output's changes, epoch by epoch, as a runtime keeps them.

    Invariant: :meth:`frames` returns, in epoch order, ``(first epoch, last epoch, changes)``
    whose changes (a Polars frame of the columns, ``__t0`` and ``__diff``) are exactly those
    appended for those epochs.
    """

    def __len__(self) -> int: ...
    def append(self, epoch: int, changes: Any) -> None:
        """Add an epoch's non-empty changes, as :meth:`Kernels.to_log` gave them."""
        ...

    def frame(self, changes: Any) -> Any:
        """One epoch's changes as a Polars frame."""
        ...

    def frames(self) -> list[tuple[int, int, Any]]: ...


class ReduceReads(Protocol):
    """How a reduce reads its input and output arrangements during its steps.

    Invariant: :meth:`history` and :meth:`output` return, for the keys asked, updates that
    accumulate at every time in advance of the arrangements' ``since`` to what the arrangements
    hold; the operator reports every batch it inserts (:meth:`inserted_input`,
    :meth:`inserted_output`) before reading again.
    """

    def history(self, keys: Any) -> Batch:
        """The input updates of the keys."""
        ...

    def history_for(self, new: Batch) -> Batch:
        """The input updates of the keys of ``new`` that may lift one of its times (the
        empty batch where no update of the trace can)."""
        ...

    def output(self, keys: Any) -> Batch:
        """The output updates of the keys."""
        ...

    def inserted_input(self, batches: Sequence[Batch]) -> None:
        """The batches just inserted in the input arrangement (maybe none)."""
        ...

    def inserted_output(self, batches: Sequence[Batch]) -> None:
        """The batches just inserted in the output arrangement (maybe none)."""
        ...

    def end_step(self) -> None:
        """The operator's step is over."""
        ...


class SpineReads:
    """:class:`ReduceReads` that look every read up in the spines, keeping nothing."""

    def __init__(self, kernels: Kernels, input: TraceReader, output: TraceReader) -> None:
        self.kernels = kernels
        self.input = input
        self.output_spine = output

    def history(self, keys: Any) -> Batch:
        return self.input.lookup(keys)

    def history_for(self, new: Batch) -> Batch:
        return self.input.lookup(self.kernels.key_set(new))

    def output(self, keys: Any) -> Batch:
        return self.output_spine.lookup(keys)

    def inserted_input(self, batches: Sequence[Batch]) -> None:
        pass

    def inserted_output(self, batches: Sequence[Batch]) -> None:
        pass

    def end_step(self) -> None:
        pass


class LoopRegions(Kernels, Protocol):
    """Kernels that run a loop whole (``loop_regions``)."""

    #: whether the runtime's settings ask for loops to run whole
    runs_regions: bool

    def loop_region(self, plan: Any) -> RegionHandle:
        """The region of ``plan`` (a :class:`~ddflow.plan.regions.RegionPlan`, a layer
        above)."""
        ...
