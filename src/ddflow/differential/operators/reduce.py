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
that each round sees the output emitted by the previous ones.

The operator keeps only capabilities and frontiers: the arrangements, the pending
``(key, time)`` pairs and the evaluation are its :class:`~ddflow.differential.kernel.Reducer`'s,
which the runtime hands out (:meth:`~ddflow.differential.kernel.Kernels.reducer`), native or in
Python, so that a step crosses into the runtime a few times, not once per kernel.

Semantics of the group, shared with the reference interpreter: ``count`` is the sum of the
multiplicities, ``sum(c)`` the sum of ``c * multiplicity``; a group yields a row only when its
count is positive; ``min``/``max`` range over the column's values whose multiplicity in the
group (summed over the records holding that value) is positive; ``distinct``
keeps the records with positive multiplicity, once; ``threshold(fn)`` gives each record the
multiplicity ``fn(m)``; ``reduce(fn)`` calls ``fn(key, [(row, m), ...])`` with the rows of positive
multiplicity, when there is at least one.
"""

from __future__ import annotations

from ddflow.differential.kernel import Kernels, Reducer, ReduceSpec
from ddflow.differential.operators.join import Arranger
from ddflow.errors import TimelyError
from ddflow.timely.lattice import TimeType
from ddflow.timely.operator import Operator, OperatorState

__all__ = ["ReduceOp", "ReduceSpec"]


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
        output_empty: object,
    ) -> None:
        super().__init__([tt] * len(arranger.fns), [tt])
        self.tt = tt
        self.kernels = kernels
        self.spec = spec
        #: the arrangements, the pending (key, time) pairs and the evaluation
        self.reducer: Reducer = kernels.reducer(spec, tt, arranger, output_empty)

    def schedule(self) -> None:
        reducer = self.reducer
        if reducer.take([self.pull(p) for p in range(len(self.input_types))]):
            # the new times are ready at once when nothing before them can still arrive:
            # evaluated in this step (holding capabilities for them first)
            self.set_capabilities(reducer.pending())
            self.settle()
        frontier = self.input_frontier()
        while True:
            out = reducer.evaluate(frontier)
            if out is None:
                break
            for t, part in out:
                self.send(0, t, part)
            pending = reducer.pending()
            if not pending:
                break
            # a pending time held back only by the capabilities at the times just evaluated
            # is complete now, unless what they emitted comes back to it through the loop:
            # evaluated in this step, not in another one per iteration
            self.set_capabilities(pending)
            self.settle(propagate=True)
            frontier = self.input_frontier()
        self.set_capabilities(reducer.pending())
        reducer.set_since(frontier)

    @property
    def evaluated(self) -> int:
        """``(key, time)`` pairs evaluated so far."""
        return self.reducer.evaluated

    @property
    def skipped(self) -> int:
        """Keys whose new updates were seen to change nothing."""
        return self.reducer.skipped

    def save_state(self) -> OperatorState:
        if self.reducer.pending():  # (a checkpoint is taken with nothing left to do)
            raise TimelyError(f"{self.name} has work pending at {self.reducer.pending()}")
        return OperatorState(frames=self.reducer.save())

    def load_state(self, state: OperatorState) -> None:
        self.reducer.load(state.frames)
