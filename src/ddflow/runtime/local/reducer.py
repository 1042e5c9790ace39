"""The Python :class:`~ddflow.differential.kernel.Reducer`: a reduce's step over the kernels.

It keeps the reduce's input arrangement (the :class:`~ddflow.differential.operators.join.Arranger`'s
spine) and its output arrangement as :class:`~ddflow.runtime.local.trace.Spine` s of the kernels'
batches, and the pending ``(key, time)`` pairs as batches of keys by time. A step:

* ``take``: the new input is arranged and inserted; a min/max (a distinct) first drops the keys
  whose insertions cannot change the output (the kernels' skips); the interesting times of the
  rest (the closure of the new times under lubs with the key's other times) become pending;
* ``evaluate``: the pending keys at the times complete at the frontier are evaluated at once
  (:meth:`~ddflow.differential.kernel.Kernels.reduce_evaluate`, in rounds per key), and the
  corrections are inserted in the output arrangement and returned by time.

Its reads of the two arrangements go through the runtime's
:class:`~ddflow.differential.kernel.ReduceReads` (kept between the reads of a step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ddflow.differential.kernel import Batch, Kernels, ReduceSpec
from ddflow.runtime.local.trace import Spine
from ddflow.timely.frontier import minimal_sorted
from ddflow.timely.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.differential.kernel import DistinctSkips
    from ddflow.differential.operators.join import Arranger

__all__ = ["KernelReducer"]


class KernelReducer:
    """A :class:`~ddflow.differential.kernel.Reducer` made of the kernels' bulk operations."""

    native = False

    def __init__(
        self, kernels: Kernels, spec: ReduceSpec, tt: TimeType, arranger: Arranger, empty: Batch
    ) -> None:
        self.kernels = kernels
        self.spec = spec
        self.tt = tt
        #: the input's arrangement (no other reader: a reduce's input is its own)
        self.arranger = arranger
        self.input = arranger.spine
        self.input_handle = self.input.handle()
        self.output = Spine(kernels, tt, spec.keys, kernels.arrange(empty, spec.keys))
        self.output_handle = self.output.handle()
        #: how the two arrangements are read, by key set (the runtime's: it may keep reads)
        self.reads = kernels.reduce_reads(self.input, self.output, spec, tt)
        #: keys with work pending at each time not yet complete: time -> batches of keys
        self.waiting: dict[Time, list[Batch]] = {}
        self.evaluated = 0
        self.skipped = 0
        #: a distinct skips the keys whose insertions change nothing, where the runtime can
        self.skips_distinct = spec.kind == "distinct" and kernels.capabilities.distinct_skips

    def take(self, messages: list[list[tuple[Time, Batch]]]) -> bool:
        msgs = list(self.arranger.arrange(messages))
        self.reads.inserted_input([b for _, b in msgs])
        self.reads.inserted_output([])
        return self._take_input(msgs)

    def pending(self) -> list[Time]:
        return minimal_sorted(self.tt, sorted(self.waiting))  # (lexicographic: a linear extension)

    def evaluate(self, frontier: Sequence[Time]) -> list[tuple[Time, Batch]] | None:
        le = self.tt.less_equal
        ready = [t for t in self.waiting if not any(le(f, t) for f in frontier)]
        if not ready:
            return None
        return self._evaluate_ready(ready)

    def set_since(self, frontier: Sequence[Time]) -> None:
        self.reads.end_step()
        self.input_handle.set_since(frontier)
        self.output_handle.set_since(frontier)

    def save(self) -> dict[str, Any]:
        return {**self.input.save("input"), **self.output.save("output")}

    def load(self, frames: dict[str, Any]) -> None:
        self.input.load(frames, "input")
        self.output.load(frames, "output")

    def sizes(self) -> tuple[int, int]:
        return len(self.input), len(self.output)

    def _evaluate_ready(self, ready: list[Time]) -> list[tuple[Time, Batch]]:
        """Evaluate the pending keys at the ``ready`` times; the output corrections (inserted
        in the output's trace) by time."""
        k, tt = self.kernels, self.tt
        queries = k.time_queries({t: self.waiting.pop(t) for t in ready}, tt)
        self.evaluated += k.height(queries)
        keyset = k.key_set(queries)
        slices = k.evaluation_slices(queries, keyset, self.input.parts())
        if slices is None:
            result = self._evaluate(queries, keyset)
        else:  # (ranges of keys, each read and evaluated alone)
            result = k.concat([self._evaluate(q, codes) for q, codes in slices])
        if not k.height(result):
            return []
        arranged = k.arrange(result, self.spec.keys)
        self.output.insert(arranged, k.height(result))
        self.reads.inserted_output([arranged])
        return k.split_by_time(k.drop_key(result), tt)

    def _take_input(self, msgs: list[tuple[Time, Batch]]) -> bool:
        """Add the interesting times of the new input updates ``msgs`` to the pending ones;
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
            if self.waiting and k.height(skip):
                # a key with a time still to evaluate is not settled: an output correction
                # there may change it at times after the new ones
                waiting = k.concat([b for bs in self.waiting.values() for b in bs])
                skip = k.without_keys(skip, waiting)
            self.skipped += k.height(skip)
            new = k.without_keys(new, skip)
        if k.height(new):
            history = self.reads.history_for(new)
            for t, keys in k.interesting_times(new, history, self.tt, self.spec.keys):
                self.waiting.setdefault(t, []).append(keys)
        return True

    def _evaluate(self, queries: Batch, keyset: Any) -> Batch:
        """The output corrections at the queried ``(key, time)`` pairs of the keys ``keyset``."""
        return self.kernels.reduce_evaluate(
            self.spec, queries, self.reads.history(keyset), self.reads.output(keyset), self.tt
        )
