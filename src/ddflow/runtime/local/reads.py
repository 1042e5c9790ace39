"""The local runtime's reads for a reduce: what a step read of an arrangement, kept and reused.

A reduce step reads the same keys twice: the new updates' keys for their interesting times
(and, for a min/max or a distinct, their output), then, as their times are ready at once, the
same keys for the evaluation, less those the skip left out, and with the keys of times pending
from earlier steps. Later steps read them again: in a loop a key's pending times become ready
one iteration at a time, a step each. Between reads the arrangements change only by the batches
the reduce is given (its input's new batches, its own output), added to what was read
(:meth:`CachedReads.inserted_input`, :meth:`CachedReads.inserted_output`), and by merges and
compaction, which change how the updates are held, not what they accumulate to at the times
read. So a read is kept and the next reads read only the keys not read yet, unless the read is
large (a first epoch's histories are most of the trace, and are read again by key ranges for
the evaluation, not held through it).

Invariant: a kept read of keys ``K`` of an arrangement accumulates, at every time in advance of
the arrangement's ``since``, to what the arrangement holds for ``K``; a read that could break it
(batches inserted that this reader was not given, a merge under a large read, an indexed read
whose batches the trace let go of) is dropped.

Key sets are sorted unique ``int64`` codes, as a NumPy array or a list (rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ddflow.runtime.local.rows import members
from ddflow.runtime.local.settings import ReadSettings

if TYPE_CHECKING:
    from ddflow.differential.kernel import Description, ReduceSpec
    from ddflow.runtime.local.kernels import LocalKernels
    from ddflow.runtime.local.trace import Spine
    from ddflow.timely.lattice import TimeType

__all__ = ["CachedReads"]


class CachedReads:
    """A reduce's reads of its input and output arrangements, kept between reads (see the
    module). ``_read``: what was read of each arrangement, ``"input"`` or ``"output"`` ->
    (key codes, updates, the arrangement's insertions and its batches' descriptions when
    read)."""

    def __init__(
        self,
        kernels: LocalKernels,
        input: Spine,
        output: Spine,
        spec: ReduceSpec,
        tt: TimeType,
        settings: ReadSettings,
    ) -> None:
        self.kernels = kernels
        self.input = input
        self.output_spine = output
        self.tt = tt
        self.settings = settings
        #: read the input through batch indexes (a single min/max in a product order: a few
        #: rows per key and time, and the values up to a bound, instead of every update of a
        #: well-connected key; elsewhere the evaluation reads every update anyway)
        self.indexed = (
            spec.minmax_only and len(spec.aggs) == 1 and len(spec.keys) == 1 and tt.is_product
        )
        self.keys = spec.keys
        self._read: dict[str, tuple[Any, Any, tuple[int, list[Description]]]] = {}

    # ------------------------------------------------------------------ ReduceReads

    def history(self, keyset: Any) -> Any:
        k = self.kernels
        known, missing = self._known("input", keyset)
        if missing is None:
            return known
        history = None
        if self.indexed:
            history = k.indexed_history(self.input.parts(), missing, self.keys, self.tt)
        if history is None:
            history = self.input.lookup(missing)
        if known is not None:
            history = k.union_reads(known, history, keyset)
        return self._keep("input", keyset, history)

    def history_for(self, new: Any) -> Any:
        k = self.kernels
        if k.trace_before(self.input.parts(), new, self.tt):
            return self.input.empty  # (no update can lift a new time: none is read)
        return self.history(k.key_set(new))

    def output(self, keyset: Any) -> Any:
        known, missing = self._known("output", keyset)
        if missing is None:
            return known
        out = self.output_spine.lookup(missing)
        if known is not None:
            out = self.kernels.union_reads(known, out, keyset)
        return self._keep("output", keyset, out)

    def inserted_input(self, batches: Sequence[Any]) -> None:
        self._refresh("input", self.input, list(batches))

    def inserted_output(self, batches: Sequence[Any]) -> None:
        self._refresh("output", self.output_spine, list(batches))

    def end_step(self) -> None:
        for what in ("input", "output"):
            kept = self._read.get(what)
            if kept is not None and len(kept[0]) > self.settings.carry_keys:
                del self._read[what]  # (a large read is not carried to later steps)

    # ------------------------------------------------------------------ keeping

    def _known(self, what: str, keyset: Any) -> tuple[Any, Any]:
        """What this step read of ``what`` for these keys, and the keys not read yet (None
        when none): ``(None, keyset)`` when nothing kept applies; a kept read narrowed to
        these keys."""
        kept = self._read.get(what)
        if kept is None:
            return None, keyset
        codes, data, _ = kept
        n = len(keyset)
        small = self.settings.small_keys
        if n <= small and len(codes) <= small:
            return self._known_few(codes, data, keyset)
        have, want = np.asarray(codes), np.asarray(keyset)
        if n == len(have) and np.array_equal(have, want):
            return data, None
        held = members(have, want)  # (a binary search: numpy.isin costs more on a few)
        found = int(np.count_nonzero(held))
        if found == 0:
            return None, keyset
        known = data if found == len(have) else self.kernels.keys_in(data, want[held])
        return known, (None if found == n else want[~held])

    def _known_few(self, codes: Any, data: Any, keyset: Any) -> tuple[Any, Any]:
        """:meth:`_known` where both key sets are small: compared as lists, matched in a
        set (NumPy's comparisons and searches cost more on a few)."""
        have = codes.tolist() if isinstance(codes, np.ndarray) else list(codes)
        want = keyset.tolist() if isinstance(keyset, np.ndarray) else list(keyset)
        if have == want:
            return data, None
        held = set(have)
        inside = [c for c in want if c in held]
        if not inside:
            return None, keyset
        known = (
            data
            if len(inside) == len(have)
            else self.kernels.keys_in(data, np.array(inside, dtype=np.int64))
        )
        if len(inside) == len(want):
            return known, None
        return known, np.array([c for c in want if c not in held], dtype=np.int64)

    def _keep(self, what: str, keyset: Any, data: Any) -> Any:
        if self._small(keyset, data):
            spine = self.input if what == "input" else self.output_spine
            self._read[what] = (keyset, data, (spine.upper, spine.descriptions()))
        return data

    def _small(self, keyset: Any, data: Any) -> bool:
        """Whether a read is small enough to keep (``keep_keys``, ``keep_rows``)."""
        s = self.settings
        return len(keyset) <= s.keep_keys and self._rows(data) <= s.keep_rows

    def _rows(self, data: Any) -> int:
        """The updates a read holds of its own (an indexed history's light part)."""
        return self.kernels.held_rows(data)

    def _refresh(self, what: str, spine: Spine, added: list[Any]) -> None:
        """Keep what was read of ``spine`` valid for the next reads: where the batches
        inserted in the trace since the read are ``added`` (the reduce is given every batch
        its input's arrangement inserts, and inserts its output's itself), their updates of
        the kept keys are added to the read. Merges and compaction since do not matter: they
        change how the trace holds its updates (consolidated, times advanced), not their
        accumulation at any time in advance of ``since``, the times read, and a read of
        batches not merged yet is read the same way. But a read of more than ``small_keys``
        keys or ``through_rows`` updates is dropped at a merge (kept longer, it would be
        narrowed and added to at every step for keys the step may not need, where a read of
        the keys a step needs reads less, and consolidated), and so is a read through the
        indexes of batches the trace let go of since, not to keep them alive, and a read
        grown too large."""
        kept = self._read.get(what)
        if kept is None:
            return
        keyset, data, (upper, described) = kept
        s = self.settings
        if spine.upper != upper + len(added) or (
            not _appended(described, spine.descriptions())
            and (
                len(keyset) > s.small_keys
                or self._rows(data) > s.through_rows
                or not self.kernels.read_holds(data, spine.parts())
            )
        ):
            del self._read[what]
            return
        if not added:
            return  # (no update since the read)
        k = self.kernels
        new = k.keys_in(k.concat(added), keyset)
        if k.height(new):
            data = k.union_reads(data, new, keyset)
            if not self._small(keyset, data):
                del self._read[what]
                return
        self._read[what] = (keyset, data, (spine.upper, spine.descriptions()))


def _appended(before: list[Description], now: list[Description]) -> bool:
    """Whether a trace's batches are as described ``before``, with batches appended."""
    return len(now) >= len(before) and now[: len(before)] == before
