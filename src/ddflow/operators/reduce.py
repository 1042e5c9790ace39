"""The reduce family over partially ordered times (naiad-tech-report §4.3, §5.2).

A reduce applies a function ``f`` to each key's group: ``output_k[t] = f(input_k[t])``, where
``input_k[t]`` is the accumulation of the key's input updates at times ``<= t``. It keeps two
arrangements, of its input and of its output, and maintains the invariant, for every key ``k``
and every complete time ``t``::

    sum of output_k updates at times <= t  ==  f(sum of input_k updates at times <= t)

When new input updates arrive for ``k`` at times ``N``, the accumulation can change only at the
least upper bounds of subsets of ``N ∪ E`` that contain an element of ``N`` (``E``: the key's
other input times). The operator adds the closure of ``N`` under lubs with ``E`` to its *pending*
``(key, time)`` set and holds a capability for each minimal pending time. A pending time is
processed once it is complete at the input (no frontier element ``<=`` it); times still in the
future of the frontier stay pending. A time may be held back only by the operator's own
capabilities at earlier pending times (in a loop, a key's times one iteration apart): once
those are evaluated and their capabilities released, it is complete unless their output comes
back to it through the loop, and it is evaluated in the same step.

Processing ``(k, t)`` emits, at ``t``::

    f(input_k[t]) - output_k[t]      (output_k[t] including what was just emitted below t)

Several ready times of one key are processed in rounds, in a linear extension of the order, so
that each round sees the output emitted by the previous ones. The group functions (``Logic``)
work on the accumulated ``(key, time, value, multiplicity)`` rows of many keys at once.

Semantics of the group, shared with the reference interpreter: ``count`` is the sum of the
multiplicities, ``sum(c)`` the sum of ``c * multiplicity``; a group yields a row only when its
count is positive; ``min``/``max`` range over the column's values whose multiplicity in the
group (summed over the records holding that value) is positive; ``distinct``
keeps the records with positive multiplicity, once; ``threshold(fn)`` gives each record the
multiplicity ``fn(m)``; ``reduce(fn)`` calls ``fn(key, [(row, m), ...])`` with the rows of positive
multiplicity, when there is at least one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ddflow.frontier import minimal_sorted
from ddflow.kernels.local_rows import members
from ddflow.lattice import Time, TimeType
from ddflow.operators.join import Arranger
from ddflow.timely import Operator
from ddflow.trace import Spine

__all__ = ["ReduceOp", "ReduceSpec"]


@dataclass(frozen=True)
class ReduceSpec:
    """What a reduce computes, for the runtime's kernels.

    ``kind`` is ``"agg"`` (``aggs``: ``(output name, count|sum|min|max|mean, column)``),
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
    ) -> ReduceSpec:
        aggs = tuple(aggs)
        weights: tuple[str, ...] = ()
        if kind == "agg":
            outputs = tuple(a[0] for a in aggs)
            if all(a[1] in ("count", "sum", "mean") for a in aggs):
                kind = "agg_weights"  # count/sum/mean keep only accumulated weights
                weights = tuple(sorted({f"__w_{c}" for _, _, c in aggs if c is not None}))
                values = ()
            else:
                values = tuple(sorted({c for _, _, c in aggs if c is not None}))
        return ReduceSpec(
            kind,
            tuple(keys),
            tuple(values),
            weights,
            tuple(outputs),
            aggs,
            fn,
            dict(out_types or {}),
        )

    @property
    def minmax_only(self) -> bool:
        """An aggregate of only ``min`` and ``max``."""
        return self.kind == "agg" and all(a[1] in ("min", "max") for a in self.aggs)


class ReduceOp(Operator):
    """Maintains ``f`` of every key's group as the input changes."""

    name = "reduce"
    frontier_merged = True

    def __init__(
        self, tt: TimeType, kernels: Any, arranger: Arranger, spec: ReduceSpec, output_empty: Any
    ) -> None:
        super().__init__([tt] * len(arranger.fns), [tt])
        self.tt = tt
        self.kernels = kernels
        self.spec = spec
        #: the arrangement of the input, kept by this operator (no operator step of its own:
        #: a reduce's input arrangement has no other reader)
        self.arranger = arranger
        self.input = arranger.spine
        self.input_handle = self.input.handle()
        self.output = Spine(kernels, tt, spec.keys, kernels.arrange(output_empty, spec.keys))
        self.output_handle = self.output.handle()
        #: keys with work pending at each time not yet complete: time -> batches of keys
        self.pending: dict[Time, list[Any]] = {}
        #: (key, time) pairs evaluated so far: the work done, for instrumentation
        self.evaluated = 0
        #: keys whose new updates were seen not to change a min/max (no group rebuilt)
        self.skipped = 0
        #: read the input through batch indexes where the runtime has them (see _history)
        self.indexed = (
            spec.minmax_only and len(spec.aggs) == 1 and len(spec.keys) == 1 and tt.is_product
        )
        #: what was read of each arrangement, kept while the arrangement only grows by the
        #: batches this operator sees: name -> (key codes, updates, the arrangement's counts
        #: of inserted batches and of merges when read)
        self._read: dict[str, tuple[Any, Any, tuple[int, int]]] = {}

    def schedule(self) -> None:
        ports = range(len(self.input_types))
        msgs = list(self.arranger.arrange([self.pull(p) for p in ports]))
        self._refresh("input", self.input, [b for _, b in msgs])
        self._refresh("output", self.output, [])
        took = self._take_input(msgs)
        del msgs  # (a first epoch's input is most of the trace: not held through evaluation)
        if took:
            # the new times are ready at once when nothing before them can still arrive:
            # evaluated in this step (holding capabilities for them first)
            self.set_capabilities(self._minimal_pending())
            self.settle()
        frontier = self.input_frontier()
        ready = self._ready(frontier)
        while ready:
            self._evaluate_ready(ready)
            if not self.pending:
                break
            # a pending time held back only by the capabilities at the times just evaluated
            # is complete now, unless what they emitted comes back to it through the loop:
            # evaluated in this step, not in another one per iteration
            self.set_capabilities(self._minimal_pending())
            self.settle(propagate=True)
            frontier = self.input_frontier()
            ready = self._ready(frontier)
        for what in ("input", "output"):
            kept = self._read.get(what)
            if kept is not None and (_count(kept[0]) or 0) > self.CARRY_KEYS:
                del self._read[what]  # (a large read is not carried to later steps)
        self.set_capabilities(self._minimal_pending())
        self.input_handle.set_since(frontier)
        self.output_handle.set_since(frontier)

    def _ready(self, frontier: list[Time]) -> list[Time]:
        """The pending times complete at the input (no element of ``frontier`` before them)."""
        le = self.tt.less_equal
        return [t for t in self.pending if not any(le(f, t) for f in frontier)]

    def _evaluate_ready(self, ready: list[Time]) -> None:
        """Evaluate the pending keys at the ``ready`` times, and emit the output corrections
        (inserted in the output's trace and sent)."""
        k, tt = self.kernels, self.tt
        queries = k.time_queries({t: self.pending.pop(t) for t in ready}, tt)
        self.evaluated += k.height(queries)
        keyset = k.key_set(queries)
        slices = (
            k.evaluation_slices(queries, keyset, self.input.parts())
            if hasattr(k, "evaluation_slices")
            else None
        )
        if slices is None:
            result = self._evaluate(queries, keyset)
        else:  # (ranges of keys, each read and evaluated alone: see evaluation_slices)
            result = k.concat([self._evaluate(q, codes) for q, codes in slices])
        if k.height(result):
            arranged = k.arrange(result, self.spec.keys)
            self.output.insert(arranged, k.height(result))
            self._refresh("output", self.output, [arranged])
            for t, part in k.split_by_time(k.drop_key(result), tt):
                self.send(0, t, part)

    def _take_input(self, msgs: list[tuple[Time, Any]]) -> bool:
        """Add the interesting times of the new input updates ``msgs`` to ``pending``;
        whether there were any. (A method of its own so that the new updates and their
        histories, most of the trace in a first epoch, are not held through the
        evaluation.)"""
        k = self.kernels
        if not msgs:
            return False
        new = k.concat([b for _, b in msgs])
        unchanged = None
        if self.spec.minmax_only:
            # an insertion above the min (below the max) changes nothing: skip its group
            unchanged = k.minmax_unchanged
        elif self.spec.kind == "distinct" and hasattr(k, "distinct_unchanged") and len(self.output):
            # an insertion of a record present at every later time changes nothing
            unchanged = k.distinct_unchanged
        if unchanged is not None:
            keyset = k.key_set(new)
            skip = unchanged(self.spec, new, self._output_of(keyset), self.tt)
            if self.pending and k.height(skip):
                # a key with a time still to evaluate is not settled: an output correction
                # there may change it at times after the new ones
                waiting = k.concat([b for bs in self.pending.values() for b in bs])
                skip = k.without_keys(skip, waiting)
            self.skipped += k.height(skip)
            new = k.without_keys(new, skip)
        if k.height(new):
            if hasattr(k, "trace_before") and k.trace_before(self.input.parts(), new, self.tt):
                history = self.input.empty  # (no update can lift a new time: none is read)
            else:
                history = self._history(k.key_set(new))
            for t, keys in k.interesting_times(new, history, self.tt, self.spec.keys):
                self.pending.setdefault(t, []).append(keys)
        return True

    def _evaluate(self, queries: Any, keyset: Any) -> Any:
        """The output corrections at the queried ``(key, time)`` pairs of the keys ``keyset``."""
        return self.kernels.reduce_evaluate(
            self.spec, queries, self._history(keyset), self._output_of(keyset), self.tt
        )

    def _history(self, keyset: Any) -> Any:
        """The input updates of the keys: for a single min/max in a product order, through
        the indexes of large batches where the runtime keeps them (a few rows per key and
        time, and the values up to a bound, instead of every update of a well-connected
        key). (Elsewhere the evaluation would read every update anyway, and the indexes would
        only cost: a prioritized loop's lexicographic times measured twice as slow.)"""
        k = self.kernels
        known, missing = self._known("input", keyset)
        if missing is None:
            return known
        history = None
        if self.indexed and hasattr(k, "indexed_history"):
            history = k.indexed_history(self.input.parts(), missing, self.spec.keys, self.tt)
        if history is None:
            history = self.input.lookup(missing)
        if known is not None:
            history = k.union_reads(known, history, keyset)
        return self._keep("input", keyset, history)

    def _output_of(self, keyset: Any) -> Any:
        """The output updates of the keys (as :meth:`_history`, and kept as it is)."""
        known, missing = self._known("output", keyset)
        if missing is None:
            return known
        out = self.output.lookup(missing)
        if known is not None:
            out = self.kernels.union_reads(known, out, keyset)
        return self._keep("output", keyset, out)

    # A step reads the same keys twice: the new updates' keys for their interesting times
    # (and, for a min/max or a distinct, their output), then, as their times are ready at
    # once, the same keys for the evaluation, less those the skip left out, and with the
    # keys of times pending from earlier steps. Later steps read them again: in a loop a key's
    # pending times become ready one iteration at a time, a step each. Between reads the
    # arrangements change only by the batches this operator is given (its input's new
    # batches, its own output), added to what was read (:meth:`_refresh`), and by merges and
    # compaction, which change how the updates are held, not what they accumulate to at the
    # times read (a read of a few keys is kept through them, a larger one dropped). So a
    # read is kept and the next reads read only the keys not read yet, unless the read is
    # large (a first epoch's histories are most of the trace, and are read again by key
    # ranges for the evaluation, not held through it).

    #: reads of at most this many keys and updates are kept (:meth:`_known`)
    KEEP_KEYS = 1 << 15
    KEEP_ROWS = 1 << 18
    #: ... and kept for later steps when of at most this many keys (adding the updates
    #: inserted since to a large read, and narrowing it, cost more than reading again: a
    #: batch of 1,000 edge changes measured 5% slower)
    CARRY_KEYS = 1 << 10
    #: ... and kept through its arrangement's merges when of at most SMALL_KEYS keys and this
    #: many updates (single changes on 1M edges, toggled in one process: 0.96-0.97 the time
    #: of dropping every read at a merge)
    THROUGH_ROWS = 128

    def _known(self, what: str, keyset: Any) -> tuple[Any, Any]:
        """What this step read of ``what`` for these keys, and the keys not read yet (None
        when none): ``(None, keyset)`` when nothing kept applies; a kept read narrowed to
        these keys where the runtime can (``keys_in``, and ``union_reads`` to add the rest)."""
        kept = self._read.get(what)
        n = _count(keyset)
        if kept is None or n is None:
            return None, keyset
        codes, data, _ = kept
        if n <= SMALL_KEYS and len(codes) <= SMALL_KEYS:
            return self._known_few(codes, data, keyset)
        have, want = np.asarray(codes), np.asarray(keyset)
        if n == len(have) and np.array_equal(have, want):
            return data, None
        k = self.kernels
        if not (hasattr(k, "keys_in") and hasattr(k, "union_reads")):
            return None, keyset
        held = members(have, want)  # (a binary search: numpy.isin costs more on a few)
        found = int(np.count_nonzero(held))
        if found == 0:
            return None, keyset
        known = data if found == len(have) else k.keys_in(data, want[held])
        return known, (None if found == n else want[~held])

    def _known_few(self, codes: Any, data: Any, keyset: Any) -> tuple[Any, Any]:
        """:meth:`_known` where both key sets are small: compared as lists, matched in a
        set (NumPy's comparisons and searches cost more on a few)."""
        have = codes.tolist() if isinstance(codes, np.ndarray) else list(codes)
        want = keyset.tolist() if isinstance(keyset, np.ndarray) else list(keyset)
        if have == want:
            return data, None
        k = self.kernels
        if not (hasattr(k, "keys_in") and hasattr(k, "union_reads")):
            return None, keyset
        held = set(have)
        inside = [c for c in want if c in held]
        if not inside:
            return None, keyset
        known = (
            data if len(inside) == len(have) else k.keys_in(data, np.array(inside, dtype=np.int64))
        )
        if len(inside) == len(want):
            return known, None
        return known, np.array([c for c in want if c not in held], dtype=np.int64)

    def _keep(self, what: str, keyset: Any, data: Any) -> Any:
        if self._small(keyset, data):
            spine = self.input if what == "input" else self.output
            self._read[what] = (keyset, data, (spine.inserted, spine.reshaped))
        return data

    def _small(self, keyset: Any, data: Any) -> bool:
        """Whether a read is small enough to keep (:data:`KEEP_KEYS`, :data:`KEEP_ROWS`)."""
        n = _count(keyset)
        return n is not None and n <= self.KEEP_KEYS and self._rows(data) <= self.KEEP_ROWS

    def _rows(self, data: Any) -> int:
        """The updates a read holds of its own."""
        k = self.kernels
        return int(k.held_rows(data) if hasattr(k, "held_rows") else k.height(data))

    def _refresh(self, what: str, spine: Spine, added: list[Any]) -> None:
        """Keep what was read of ``spine`` valid for the next reads: where the batches
        inserted in the trace since the read are ``added`` (this operator is given every
        batch its input's arrangement inserts, and inserts its output's itself), their
        updates of the kept keys are added to the read. Merges and compaction since do not
        matter: they change how the trace holds its updates (consolidated, times advanced),
        not their accumulation at any time in advance of ``since``, the times read, and a
        read of batches not merged yet is read the same way. But a read of more than
        :data:`SMALL_KEYS` keys or :data:`THROUGH_ROWS` updates is dropped at a merge (kept
        longer, it would be narrowed and added to at every step for keys the step may not
        need, where a read of the keys a step needs reads less, and consolidated), and so
        is a read through the indexes of batches the trace let go of since, not to keep them
        alive, and a read grown too large."""
        kept = self._read.get(what)
        if kept is None:
            return
        keyset, data, (inserted, reshaped) = kept
        if spine.inserted != inserted + len(added) or (
            spine.reshaped != reshaped
            and (
                (_count(keyset) or 0) > SMALL_KEYS
                or self._rows(data) > self.THROUGH_ROWS
                or (hasattr(data, "indexed") and not _holds_all(spine, data))
            )
        ):
            del self._read[what]
            return
        if not added:
            return  # (no update since the read)
        k = self.kernels
        if not (hasattr(k, "keys_in") and hasattr(k, "union_reads")):
            del self._read[what]
            return
        new = k.keys_in(k.concat(added), keyset)
        if k.height(new):
            data = k.union_reads(data, new, keyset)
            if not self._small(keyset, data):
                del self._read[what]
                return
        self._read[what] = (keyset, data, (spine.inserted, spine.reshaped))

    def _minimal_pending(self) -> list[Time]:
        return minimal_sorted(self.tt, sorted(self.pending))  # (lexicographic: a linear extension)


#: key sets of at most this many codes are compared and matched as lists (NumPy's comparisons
#: cost more on a few), and reads of at most this many keys are kept through merges
#: (:meth:`_refresh`)
SMALL_KEYS = 64


def _holds_all(spine: Spine, history: Any) -> bool:
    """Whether the batches a history read through indexes reads are all still the trace's
    (an :class:`~ddflow.kernels.local_index.IndexedHistory` holds them)."""
    parts = spine.parts()
    return all(any(b is p for p in parts) for b, _, _ in history.indexed)


def _count(keyset: Any) -> int | None:
    """The number of key codes in a key set held in memory (a list or an array); None for
    one that is not (a distributed runtime's), which is never kept."""
    try:
        return len(keyset)
    except TypeError:
        return None
