"""Arrangements and joins (differential-dataflow-cidr2013 §4.3).

``ArrangeOp`` consolidates the incoming batches of each time as one, indexes it by key into
its trace (a :class:`~ddflow.differential.kernel.Trace` the kernels hand out) and forwards the
arranged batch, in the same step. So for every reader of the trace::

    trace contents = batches the reader has received + batches queued for it      (*)

which lets any number of joins share one arrangement without double counting.

``JoinOp`` takes all its queued batches at once, ``dL`` (left) and ``dR`` (right), and emits::

    dL x R_trace  +  (L_trace - dL) x dR

with ``R_trace`` and ``L_trace`` as they are now (both already include the new batches, by (*)):
``L_trace - dL`` is the trace as of before its last ``len(dL)`` insertions: the new batches the
trace still holds apart (by their descriptions) are left out of the lookup, and the others are
subtracted.
Each product of updates ``(a, s, x)`` and ``(b, t, y)`` with equal keys is ``(a ++ b, s v t, x*y)``.
A trace is read only by deltas of the other input, whose times are in advance of that input's
frontier, so each trace may be compacted to the frontier of the *other* input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.operator import Operator, OperatorState

if TYPE_CHECKING:
    from ddflow.differential.kernel import Trace, TraceReader

__all__ = ["ArrangeOp", "Arranger", "JoinOp"]


class Arranger:
    """What an arrangement does with its input, for the operator that keeps it: the messages
    of each time, from every input port (each through its function, ``fns``; None: none),
    concatenated, prepared (``prepare``), consolidated, arranged by ``keys`` and inserted
    into the :class:`Spine`. Several ports arrange the union of what their functions give,
    as of a ``concat`` of stateless nodes before the arrangement (see :mod:`ddflow.plan.build`).
    """

    def __init__(
        self,
        tt: TimeType,
        kernels: Any,
        keys: Sequence[str],
        empty: Any,
        prepare: Callable[[Any], Any] | None = None,
        sums: Sequence[str] = ("__diff",),
        fns: Sequence[Callable[[Any], Any] | None] = (None,),
    ) -> None:
        self.fns = list(fns)
        self.kernels = kernels
        self.keys = list(keys)
        self.prepare = prepare
        self.sums = tuple(sums)
        #: an empty batch of the input as it comes (before ``prepare``)
        self.source_empty = empty
        empty = empty if prepare is None else prepare(empty)
        self.spine: Trace = kernels.trace(tt, keys, kernels.arrange(empty, keys), sums=sums)

    def arrange(self, messages: list[list[tuple[Time, Any]]]) -> Iterator[tuple[Time, Any]]:
        """Arrange and insert the messages (a list per port, emptied: the batches as they
        came are let go of once their functions have been applied): each time's arranged
        batch, once inserted (none for a time whose updates cancel)."""
        k = self.kernels
        at = self._by_time(messages)  # the batches of each time, consolidated as one
        while at:  # (each time's input let go before the next: a batch can be large)
            t = next(iter(at))
            batches = at.pop(t)
            batch = k.concat(batches)
            del batches
            if self.prepare is not None:
                batch = self.prepare(batch)
            batch = k.arrange(k.consolidate(batch, self.sums), self.keys)
            n = k.height(batch)
            if n:
                self.spine.insert(batch, n)
                yield t, batch

    def _by_time(self, messages: list[list[tuple[Time, Any]]]) -> dict[Time, list[Any]]:
        """The messages' batches (through each port's function) by time; ``messages`` is
        emptied, so that a large batch as it came (a join's output before a select) is not
        held through the arrangement of what its function gave."""
        k = self.kernels
        at: dict[Time, list[Any]] = {}
        for fn, msgs in zip(self.fns, messages, strict=True):
            for t, batch in msgs:
                if fn is not None:
                    batch = fn(batch)
                    if batch is None or k.is_empty(batch):
                        continue
                at.setdefault(t, []).append(batch)
        messages.clear()
        return at


class ArrangeOp(Operator):
    """Maintains an arrangement of its input (an :class:`Arranger`, with an input port per
    function) and forwards the arranged batches, for any number of readers to share."""

    name = "arrange"
    watches_frontier = False

    def __init__(self, tt: TimeType, arranger: Arranger) -> None:
        super().__init__([tt] * len(arranger.fns), [tt])
        self.arranger = arranger
        self.spine = arranger.spine

    def schedule(self) -> None:
        ports = range(len(self.input_types))
        for t, batch in self.arranger.arrange([self.pull(p) for p in ports]):
            self.send(0, t, batch)

    def save_state(self) -> OperatorState:
        return OperatorState(frames=self.spine.save("trace"))

    def load_state(self, state: OperatorState) -> None:
        self.spine.load(state.frames, "trace")


class JoinOp(Operator):
    """Joins two arranged inputs on their keys.

    It reads its input frontiers only to let the traces compact (``set_since``), so they are
    computed when it runs for messages, and a frontier moving does not make it run: a trace
    compacts up to where the other input's frontier was at the join's last step."""

    name = "join"
    frontier_on_demand = True

    def __init__(
        self,
        tt: TimeType,
        kernels: Any,
        left: TraceReader,
        right: TraceReader,
        left_on: Sequence[str],
        right_on: Sequence[str],
        output: Sequence[tuple[str, str, str]],
    ) -> None:
        super().__init__([tt, tt], [tt])
        self.kernels = kernels
        self.tt = tt
        self.left, self.right = left, right
        self.left_handle, self.right_handle = left.handle(), right.handle()
        self.left_on, self.right_on = list(left_on), list(right_on)
        self.output = list(output)

    def schedule(self) -> None:
        k = self.kernels
        lmsgs = self.pull(0)
        rmsgs = self.pull(1)
        for t, dl in lmsgs:
            other = self.right.lookup(k.key_set(dl), within=True)  # (joined on the keys)
            out = k.join_slice(dl, other, self.tt, self.left_on, self.right_on, True, self.output)
            if not k.is_empty(out):
                self.send(0, t, out)
        if rmsgs:
            # L_trace - dL: the new left batches are the trace's last insertions (by (*));
            # those it still holds apart are left out of the lookup, the others (merged into
            # other batches) are subtracted (a first epoch's L_trace is exactly dL:
            # subtracted, it would give every product twice, with opposite signs)
            first = self.left.upper - len(lmsgs)
            apart = self.left.held_apart(first)
            merged = [dl for i, (_, dl) in enumerate(lmsgs) if first + i not in apart]
            for t, dr in rmsgs:
                codes = k.key_set(dr)
                parts = [self.left.lookup(codes, within=True, apart_from=first)]
                parts += [k.negate(k.lookup(dl, codes)) for dl in merged]
                other = k.concat(parts)
                out = k.join_slice(
                    dr, other, self.tt, self.left_on, self.right_on, False, self.output
                )
                if not k.is_empty(out):
                    self.send(0, t, out)
        self.left_handle.set_since(self.frontier(1))
        self.right_handle.set_since(self.frontier(0))
