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
from typing import TYPE_CHECKING, Any, cast

from ddflow.differential.batch import weight_column
from ddflow.differential.kernel import Batch, Kernels
from ddflow.differential.operators.join import Arranger
from ddflow.differential.trace import Spine
from ddflow.errors import TimelyError
from ddflow.timely.frontier import minimal_sorted
from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.operator import Operator, OperatorState

if TYPE_CHECKING:
    from ddflow.differential.kernel import DistinctSkips

__all__ = ["ReduceOp", "ReduceSpec"]


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


class ReduceOp(Operator):
    """Maintains ``f`` of every key's group as the input changes."""

    name = "reduce"
    frontier_merged = True

    def __init__(
        self,
        tt: TimeType,
        kernels: Kernels,
        arranger: Arranger,
        spec: ReduceSpec,
        output_empty: Batch,
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
        #: how the two arrangements are read, by key set (the runtime's: it may keep reads)
        self.reads = kernels.reduce_reads(self.input, self.output, spec, tt)
        #: keys with work pending at each time not yet complete: time -> batches of keys
        self.pending: dict[Time, list[Batch]] = {}
        #: (key, time) pairs evaluated so far: the work done, for instrumentation
        self.evaluated = 0
        #: keys whose new updates were seen not to change a min/max (no group rebuilt)
        self.skipped = 0
        #: a distinct skips the keys whose insertions change nothing, where the runtime can
        self.skips_distinct = spec.kind == "distinct" and kernels.capabilities.distinct_skips

    def schedule(self) -> None:
        ports = range(len(self.input_types))
        msgs = list(self.arranger.arrange([self.pull(p) for p in ports]))
        self.reads.inserted_input([b for _, b in msgs])
        self.reads.inserted_output([])
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
        self.reads.end_step()
        self.set_capabilities(self._minimal_pending())
        self.input_handle.set_since(frontier)
        self.output_handle.set_since(frontier)

    def save_state(self) -> OperatorState:
        if self.pending:  # (a checkpoint is taken with nothing left to do)
            raise TimelyError(f"{self.name} has work pending at {sorted(self.pending)}")
        return OperatorState(frames={**self.input.save("input"), **self.output.save("output")})

    def load_state(self, state: OperatorState) -> None:
        self.input.load(state.frames, "input")
        self.output.load(state.frames, "output")

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
        slices = k.evaluation_slices(queries, keyset, self.input.parts())
        if slices is None:
            result = self._evaluate(queries, keyset)
        else:  # (ranges of keys, each read and evaluated alone)
            result = k.concat([self._evaluate(q, codes) for q, codes in slices])
        if k.height(result):
            arranged = k.arrange(result, self.spec.keys)
            self.output.insert(arranged, k.height(result))
            self.reads.inserted_output([arranged])
            for t, part in k.split_by_time(k.drop_key(result), tt):
                self.send(0, t, part)

    def _take_input(self, msgs: list[tuple[Time, Batch]]) -> bool:
        """Add the interesting times of the new input updates ``msgs`` to ``pending``;
        whether there were any. (A method of its own so that the new updates and their
        histories, most of the trace in a first epoch, are not held through the
        evaluation.)"""
        k = self.kernels
        if not msgs:
            return False
        new = k.concat([b for _, b in msgs])
        unchanged: Callable[[ReduceSpec, Batch, Batch, TimeType], Batch] | None = None
        if self.spec.minmax_only:
            # an insertion above the min (below the max) changes nothing: skip its group
            unchanged = k.minmax_unchanged
        elif self.skips_distinct and len(self.output):
            # an insertion of a record present at every later time changes nothing
            unchanged = cast("DistinctSkips", k).distinct_unchanged
        if unchanged is not None:
            skip = unchanged(self.spec, new, self.reads.output(k.key_set(new)), self.tt)
            if self.pending and k.height(skip):
                # a key with a time still to evaluate is not settled: an output correction
                # there may change it at times after the new ones
                waiting = k.concat([b for bs in self.pending.values() for b in bs])
                skip = k.without_keys(skip, waiting)
            self.skipped += k.height(skip)
            new = k.without_keys(new, skip)
        if k.height(new):
            history = self.reads.history_for(new)
            for t, keys in k.interesting_times(new, history, self.tt, self.spec.keys):
                self.pending.setdefault(t, []).append(keys)
        return True

    def _evaluate(self, queries: Batch, keyset: Any) -> Batch:
        """The output corrections at the queried ``(key, time)`` pairs of the keys ``keyset``."""
        return self.kernels.reduce_evaluate(
            self.spec, queries, self.reads.history(keyset), self.reads.output(keyset), self.tt
        )

    def _minimal_pending(self) -> list[Time]:
        return minimal_sorted(self.tt, sorted(self.pending))  # (lexicographic: a linear extension)
