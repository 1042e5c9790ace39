"""The local runtime's settings: every tuning threshold of its kernels, in one object.

Settings change how the work is done (which path a kernel takes, how batches are held and
merged), never the results: the semantics suite runs with settings that take the large-data
paths at every size and compares with the same reference. Tests set them through
``dd.LocalRuntime(settings=...)``; the defaults are the ones documented below, and
``docs/performance.md`` says why each path exists. The kernels read them from their
``settings`` (:class:`~ddflow.runtime.local.kernels.LocalKernels`) and pass them down to the
functions that choose a path; no module holds a threshold of its own.

A :class:`LocalSettings` holds the runtime-wide fields and one group of thresholds per concern:
``trace`` (merges), ``reads`` (a reduce's kept reads), ``lookups`` (searches of arranged
batches), ``sums`` (consolidation and merges), ``index`` (a min/max reduce's indexed reads) and
``reduce`` (the reduce kernels). This module imports no other module of the runtime, so that
each of them can import it.

>>> import ddflow as dd
>>> settings = LocalSettings(small_batch_rows=0, sums=SumSettings(packed_rows=1))
>>> flow = dd.Dataflow(runtime=dd.LocalRuntime(settings=settings))
>>> flow.runtime.kernels.settings.sums.packed_rows
1
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddflow.runtime.local.trace import TraceSettings

__all__ = [
    "IndexSettings",
    "LocalSettings",
    "LookupSettings",
    "ReadSettings",
    "ReduceSettings",
    "SumSettings",
    "TraceSettings",
]


@dataclass(frozen=True)
class ReadSettings:
    """When a reduce's reads are kept (:class:`~ddflow.runtime.local.reads.CachedReads`).

    * ``keep_keys``, ``keep_rows``: reads of at most this many keys and updates are kept;
    * ``carry_keys``: ... and kept for later steps when of at most this many keys (adding the
      updates inserted since to a large read, and narrowing it, costs more than reading again);
    * ``small_keys``: key sets of at most this many codes are compared and matched as lists
      (NumPy's comparisons cost more on a few), and reads of at most this many keys ...
    * ``through_rows``: ... and this many updates are kept through their arrangement's merges.

    >>> ReadSettings().carry_keys
    1024
    """

    keep_keys: int = 1 << 15
    keep_rows: int = 1 << 18
    carry_keys: int = 1 << 10
    small_keys: int = 64
    through_rows: int = 128


@dataclass(frozen=True)
class LookupSettings:
    """How a lookup finds keys in arranged batches (:mod:`ddflow.runtime.local.rows`), and
    what it gives.

    * ``rows``: a lookup in a large columnar batch gives Python rows when at most this many
      updates match (or ``small_batch_rows``, where that is more), else a frame;
    * ``few_codes``: a trace's lookup of at most this many keys reads every batch in one pass
      of searches, key by key, into one list of rows
      (:func:`~ddflow.runtime.local.rows.lookup_few`), rather than batch by batch;
    * ``scan_rows``, ``scan_rows_per_key``: a lookup in a batch of at least ``scan_rows``
      updates, asking at least one key per ``scan_rows_per_key`` of them, filters the whole
      batch (one hashed pass; a join then reads the batch whole) instead of searching key by
      key;
    * ``fenced_rows``, ``fence_every``, ``fenced_codes``: a batch of at least ``fenced_rows``
      updates whose key codes get no direct index keeps every ``fence_every``-th code (a power
      of two) as a fence, and a search of at least ``fenced_codes`` codes places each between
      two fences first, then searches those rows
      (:func:`~ddflow.runtime.local.rows.key_ranges`); fewer codes take a plain binary search;
    * ``dense_rows``, ``dense_span``, ``dense_search``: a batch of at least ``dense_rows``
      updates whose key codes span at most ``dense_span`` times its updates gets a direct index
      of its codes (:func:`~ddflow.runtime.local.rows.dense_offsets`), built by a search of
      each code where a code has more than ``dense_search`` updates on average, else by
      counting each code's updates in one pass.

    >>> LookupSettings().fence_every
    256
    >>> LookupSettings(fence_every=100)
    Traceback (most recent call last):
        ...
    ValueError: fence_every must be a power of two, got 100
    """

    rows: int = 2048
    few_codes: int = 16
    scan_rows: int = 65_536
    scan_rows_per_key: int = 64
    fenced_rows: int = 1 << 17
    fence_every: int = 256
    fenced_codes: int = 64
    dense_rows: int = 1 << 12
    dense_span: int = 2
    dense_search: int = 16

    def __post_init__(self) -> None:
        every = self.fence_every
        if every < 1 or every & (every - 1):
            raise ValueError(f"fence_every must be a power of two, got {every}")


@dataclass(frozen=True)
class SumSettings:
    """How updates are consolidated and merged (:mod:`ddflow.runtime.local.columnar`).

    * ``packed_rows``: integer frames of at least this many rows are summed by sorting a
      packed code of their groups (:func:`~ddflow.runtime.local.columnar.grouped_sums`), not
      by Polars' hashed group-by;
    * ``array_rows``: ... and integer frames of at most this many rows in NumPy alone;
    * ``sorted_runs``: packed codes that fall at most this many times from one row to the
      next are a few sorted runs (a merge of arranged batches), merged by a stable sort; codes
      with more falls take Polars' parallel sort;
    * ``merge_array_rows``: merges of arranged batches of at most this many updates are done
      in NumPy (:func:`~ddflow.runtime.local.columnar.merge_arrays`) where their columns
      allow it, else in Polars.

    >>> SumSettings().packed_rows
    50000
    """

    packed_rows: int = 50_000
    array_rows: int = 20_000
    sorted_runs: int = 64
    merge_array_rows: int = 20_000


@dataclass(frozen=True)
class IndexSettings:
    """When a min/max reduce reads its input history through batch indexes
    (:mod:`ddflow.runtime.local.index`).

    * ``indexed_rows``: batches of at least this many updates are read through a
      :class:`~ddflow.runtime.local.index.BatchIndex` ...
    * ``heavy_rows``: ... for the keys with at least this many updates in the batch (its heavy
      keys), the others read as by a lookup;
    * ``summary_rows``: a batch's index sums its heavy keys' diffs per ``(key, time)`` about
      this many updates at a time (the rows gathered, and their sort, are a read's largest
      temporaries);
    * ``few_heavy_codes``: a read of at most this many keys first asks each large batch's
      index, key by key, whether any is heavy there;
    * ``small_times``: the inputs of interesting times read from an indexed history are
      given as rows when they are at most this many;
    * ``run_search_rows``: at least this many history updates are matched with their keys'
      queries by one search per run of equal key codes (where the runs are long), not one per
      update.

    >>> IndexSettings().heavy_rows
    64
    """

    indexed_rows: int = 100_000
    heavy_rows: int = 64
    summary_rows: int = 1 << 20
    few_heavy_codes: int = 4
    small_times: int = 2_000
    run_search_rows: int = 1024


@dataclass(frozen=True)
class ReduceSettings:
    """Which path the reduce kernels take (:mod:`ddflow.runtime.local.reduce`).

    * ``small_rows``: a reduce kernel given at most this many updates works row by row in
      Python, where ``small_batch_rows`` is not ``0``, else columnar
      (:mod:`~ddflow.runtime.local.reduce.small_steps`);
    * ``evaluate_slice_rows``: an evaluation reading more input history than this many
      updates is done in ranges of keys of about this much history each (the intermediate
      frames of one range alive at a time);
    * ``change_rows``: an evaluation's output change of at most this many desired and current
      rows is summed in Python, not by a Polars group-by;
    * ``array_times_rows``, ``array_times_max``: interesting times of at least
      ``array_times_rows`` and at most ``array_times_max`` new and history updates (together)
      try the NumPy path, where each key's closure is a chain; fewer take the row path, more
      the Polars path;
    * ``bounded_rows``, ``bounded_share``: a single min or max is evaluated from each key's
      values only up to its current output
      (:mod:`~ddflow.runtime.local.reduce.bounded_extremes`) on histories of at least
      ``bounded_rows`` updates, where at most ``bounded_share`` of them are below the bounds;
    * ``skip_try_rows``, ``skip_try_ratio``: the columnar min/max skip is not tried on
      ``skip_try_rows`` new updates or more when they also outnumber their keys' output rows
      more than ``skip_try_ratio`` times (each key then has many new updates, one of which
      moves its min or max);
    * ``exact_times``: the row path of the min/max skip tests a key time by time at most at
      this many times (beyond, the key is evaluated);
    * ``native``: a reduce the native core covers
      (:mod:`ddflow.runtime.local.native_reducer`) runs there; ``False`` (the default) runs
      every reduce in Python (the other settings above). The core's step is faster on small
      changes and slower on bulk loads and large batches (each key's history held apart:
      docs/performance.md), so it is chosen on request until it is faster on both.

    >>> ReduceSettings().evaluate_slice_rows
    2000000
    """

    small_rows: int = 2_000
    evaluate_slice_rows: int = 2_000_000
    change_rows: int = 2048
    array_times_rows: int = 128
    array_times_max: int = 1 << 17
    bounded_rows: int = 50_000
    bounded_share: float = 0.25
    skip_try_rows: int = 100_000
    skip_try_ratio: float = 4
    exact_times: int = 64
    native: bool = False


@dataclass(frozen=True)
class LocalSettings:
    """The local runtime's thresholds (sizes are in updates, that is rows).

    * ``small_batch_rows``: batches of at most this many rows are held as Python tuples and
      processed without Polars, whose fixed cost per call dominates small steps; ``0`` keeps
      every batch in Polars and every kernel on its columnar path;
    * ``held_epochs``: an output makes the epochs' changes it holds as rows one frame once it
      holds this many (:mod:`ddflow.runtime.local.changelog`);
    * ``trace``: how arrangements merge (:class:`~ddflow.runtime.local.trace.TraceSettings`);
    * ``reads``: when a reduce's reads are kept (:class:`ReadSettings`);
    * ``lookups``: how lookups search arranged batches (:class:`LookupSettings`);
    * ``sums``: how updates are consolidated and merged (:class:`SumSettings`);
    * ``index``: when a min/max reduce reads through batch indexes (:class:`IndexSettings`);
    * ``reduce``: which path the reduce kernels take (:class:`ReduceSettings`);
    * ``progress``: which progress tracker a worker runs: ``"native"``, the core's
      (:mod:`ddflow.runtime.native.progress`); ``"python"``,
      :class:`~ddflow.timely.progress.Tracker`; ``"checked"``, both, compared at every call
      (for tests: a disagreement raises);
    * ``regions``: a loop of built-in operators over integer columns runs whole in the native
      core, as one operator (:mod:`ddflow.plan.regions`; a dataflow with checkpoints or
      several workers keeps its loops as Python operators).

    >>> LocalSettings().small_batch_rows
    256
    >>> LocalSettings(reduce=ReduceSettings(small_rows=0)).reduce.evaluate_slice_rows
    2000000
    """

    small_batch_rows: int = 256
    held_epochs: int = 256
    trace: TraceSettings = field(default_factory=TraceSettings)
    reads: ReadSettings = field(default_factory=ReadSettings)
    lookups: LookupSettings = field(default_factory=LookupSettings)
    sums: SumSettings = field(default_factory=SumSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    reduce: ReduceSettings = field(default_factory=ReduceSettings)
    progress: str = "native"
    regions: bool = False

    def __post_init__(self) -> None:
        if self.small_batch_rows < 0:
            raise ValueError(f"small_batch_rows must be >= 0, got {self.small_batch_rows}")
        if self.progress not in ("native", "python", "checked"):
            raise ValueError(
                f"progress must be 'native', 'python' or 'checked', got {self.progress!r}"
            )
