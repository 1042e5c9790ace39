"""The native :class:`~ddflow.differential.kernel.Reducer`: a reduce's state and step in the
core, for the local runtime's batches.

:class:`NativeReducer` wraps ``ddflow._native.Reducer`` (``native/core/src/reduce.rs`` states
the algorithm and its invariants): both arrangements, the pending ``(key, time)`` pairs and
the evaluation live in the core, and a step crosses into it once per input batch, once per
evaluation round and once to compact, instead of once per kernel.

:func:`native_applies` says which reduces the core covers: ``count``, ``sum``, ``min``,
``max`` and ``arg_max`` aggregates, ``distinct`` and ``threshold``, with keys and values of the
integer family (``int64``, ``int32``, ``bool``, ``date``, ``datetime``), nulls included. The
others (floats, strings, lists, ``mean``, ``top_k``, ``reduce``) run in Python; the choice is
made once, when the dataflow is built. A threshold's function is called from the core once
per evaluation, with the distinct multiplicities of the records evaluated, in increasing
order (:meth:`NativeReducer._multiplicities`).

Batches cross as columns (a frame's columns as Arrow ``int64`` arrays, through the Arrow C
data interface) or, for a few updates held as Python rows, as the rows' tuples; corrections come
back as rows for a few of them, else as columns. Checkpoints hold the two arrangements in the
frames the Python reducer writes (``input.N``, ``output.N``): either reducer restores the
other's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY
from ddflow.differential.kernel import Batch, ReduceSpec
from ddflow.runtime.local.rows import Rows
from ddflow.runtime.native.build import native
from ddflow.timely.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.differential.operators.join import Arranger
    from ddflow.runtime.local.kernels import LocalKernels

__all__ = ["NativeReducer", "arrow_int64", "native_applies"]

#: the dtypes the core holds as ``int64`` (their physical values)
_INTEGER_FAMILY = (pl.Int64, pl.Int32, pl.Boolean, pl.Date, pl.Datetime)
#: the dtypes a batch held as Python rows gives the core as they are (ints and bools)
_ROW_SAFE = (pl.Int64, pl.Int32, pl.Boolean)
_AGGREGATES = ("count", "sum", "min", "max", "arg_max")


def _integer(dtype: Any) -> bool:
    return any(dtype == d for d in _INTEGER_FAMILY) or isinstance(dtype, pl.Datetime)


def _source_columns(spec: ReduceSpec) -> list[str]:
    """The input columns the core reads besides the keys: the summed columns of an
    ``agg_weights`` (their weights), else the values."""
    if spec.kind == "agg_weights":
        return [w[len("__w_") :] for w in spec.weights]
    return list(spec.values)


def native_applies(spec: ReduceSpec, source: dict[str, Any]) -> bool:
    """Whether the core covers the reduce ``spec`` over input columns of the dtypes
    ``source`` (see the module)."""
    if spec.kind not in ("agg_weights", "agg", "distinct", "threshold"):
        return False
    if any(kind not in _AGGREGATES for _, kind, _ in spec.aggs):
        return False
    read = [*spec.keys, *_source_columns(spec)]
    if not all(c in source and _integer(source[c]) for c in read):
        return False
    for name, kind, column in spec.aggs:
        out = spec.out_types.get(name)
        if kind in ("count", "sum") and out != pl.Int64:
            return False
        if kind == "count" or column is None:
            continue
        if kind == "sum" and source[column] == pl.Boolean:
            return False
        if kind in ("min", "max", "arg_max") and out != source[column]:
            return False
    return True


def arrow_int64(series: pl.Series) -> Any:
    """A column's physical values as an Arrow ``int64`` array (the core reads it through the
    Arrow C data interface, nulls and all, without a copy here)."""
    return series.to_physical().cast(pl.Int64).to_arrow()


class NativeReducer:
    """A :class:`~ddflow.differential.kernel.Reducer` in the native core (see the module)."""

    native = True

    def __init__(
        self,
        kernels: LocalKernels,
        spec: ReduceSpec,
        tt: TimeType,
        arranger: Arranger,
        empty: Batch,
    ) -> None:
        self.kernels = kernels
        self.spec = spec
        self.tt = tt
        self.arranger = arranger
        self.tcols = tt.columns()
        self.sources = _source_columns(spec)
        source_schema = dict(kernels.to_polars(arranger.source_empty).schema)
        #: the input columns a batch held as rows can give as they are
        self.rows_ok = all(
            any(source_schema[c] == d for d in _ROW_SAFE) for c in [*spec.keys, *self.sources]
        )
        out_schema = dict(kernels.to_polars(empty).schema)
        self.out_names = [*spec.keys, *spec.outputs]
        self.out_dtypes = [out_schema[c] for c in self.out_names]
        #: the schema of a correction batch (keys dropped): data, times, diff
        self.out_schema: dict[str, Any] = {
            **{c: out_schema[c] for c in self.out_names},
            **{c: pl.Int64 for c in self.tcols},
            DIFF: pl.Int64,
        }
        #: corrections of at most this many updates at a time come back as rows
        self.small_rows = (
            max(kernels.small_rows, 0)
            if all(any(d == r for r in _ROW_SAFE) for d in self.out_dtypes)
            else 0
        )
        #: the frames a checkpoint holds, in the Python reducer's columns and dtypes
        self.input_schema = {
            c: t for c, t in kernels.to_polars(arranger.spine.empty).schema.items() if c != KEY
        }
        self.output_schema = {**self.out_schema}
        index = {c: i for i, c in enumerate(self.sources)}
        aggs = [
            (
                kind,
                None if c is None else index[c],
                index[spec.rank_of(name)[1]] if kind == "arg_max" else None,
            )
            for name, kind, c in spec.aggs
        ]
        booleans = [d == pl.Boolean for d in self.out_dtypes]
        self.core = native().Reducer(
            list(tt.coordinates), spec.kind, aggs, len(spec.keys), len(self.sources), booleans
        )
        self.skipped = 0
        self._taken = 0
        #: what the core calls for a threshold's multiplicities (None: no threshold)
        self._mapping = self._multiplicities if spec.kind == "threshold" else None

    @property
    def evaluated(self) -> int:
        return int(self.core.evaluated)

    def take(self, messages: list[list[tuple[Time, Batch]]]) -> bool:
        k = self.kernels
        added = 0
        for fn, msgs in zip(self.arranger.fns, messages, strict=True):
            for _, batch in msgs:
                if fn is not None:
                    batch = fn(batch)
                    if batch is None or k.is_empty(batch):
                        continue
                added += self._take_batch(batch)
        messages.clear()
        self._taken += added
        return added > 0

    def _take_batch(self, batch: Batch) -> int:
        spec = self.spec
        if type(batch) is Rows:
            if self.rows_ok:
                index = batch.index
                return int(
                    self.core.take_rows(
                        batch.rows,
                        [index(c) for c in spec.keys],
                        [index(c) for c in self.sources],
                        [index(c) for c in self.tcols],
                        index(DIFF),
                    )
                )
            batch = batch.to_frame()
        frame = self.kernels.to_polars(batch)
        if frame.height == 0:
            return 0
        return int(
            self.core.take_columns(
                [arrow_int64(frame.get_column(c)) for c in spec.keys],
                [arrow_int64(frame.get_column(c)) for c in self.sources],
                [arrow_int64(frame.get_column(c)) for c in self.tcols],
                arrow_int64(frame.get_column(DIFF)),
            )
        )

    def pending(self) -> list[Time]:
        return [tuple(t) for t in self.core.pending()]

    def evaluate(self, frontier: Sequence[Time]) -> list[tuple[Time, Batch]] | None:
        out = self.core.evaluate([list(f) for f in frontier], self.small_rows, self._mapping)
        if out is None:
            return None
        small, large = out
        result: list[tuple[Time, Batch]] = []
        k = self.kernels
        for t, rows in small:
            batch = k.from_rows(self.out_schema, functools.partial(list, rows))
            if batch is None:
                batch = k.from_polars(pl.DataFrame(rows, schema=self.out_schema, orient="row"))
            result.append((tuple(t), batch))
        for t, n, columns, diffs in large:
            result.append((tuple(t), k.from_polars(self._frame(t, n, columns, diffs))))
        result.sort(key=lambda tb: tb[0])
        return result

    def _multiplicities(self, counts: list[int]) -> list[int]:
        """A threshold's function at each multiplicity (an exception it raises propagates
        through the core, which leaves the times pending)."""
        fn = self.spec.fn
        assert fn is not None
        return [int(fn(m)) for m in counts]

    def _frame(self, t: Sequence[int], n: int, columns: list[Any], diffs: bytes) -> pl.DataFrame:
        data: dict[str, pl.Series] = {}
        for name, dtype, (values, mask) in zip(
            self.out_names, self.out_dtypes, columns, strict=True
        ):
            s = pl.Series(name, np.frombuffer(values, dtype=np.int64))
            if mask is not None:
                s = s.scatter(np.flatnonzero(np.frombuffer(mask, dtype=np.uint8) == 0), None)
            data[name] = s.cast(dtype)
        for c, v in zip(self.tcols, t, strict=True):
            data[c] = pl.Series(c, np.full(n, v, dtype=np.int64))
        data[DIFF] = pl.Series(DIFF, np.frombuffer(diffs, dtype=np.int64))
        return pl.DataFrame(data)

    def set_since(self, frontier: Sequence[Time]) -> None:
        # (batches no merge reaches are rewritten with fuel in proportion to the updates
        # taken: a rewrite's cost is paid by the steps' work, about twice over)
        fuel, self._taken = 64 + 2 * self._taken, 0
        self.core.set_since([list(f) for f in frontier], fuel)

    def sizes(self) -> tuple[int, int]:
        held_in, held_out = self.core.sizes()
        return int(held_in), int(held_out)

    # ------------------------------------------------------------------ checkpoints

    def save(self) -> dict[str, Any]:
        held_in, held_out = self.core.contents()
        spec = self.spec
        weights = list(spec.weights) if spec.kind == "agg_weights" else []
        values = [] if weights else list(self.sources)
        in_names = [*spec.keys, *(weights or values), *self.tcols, DIFF]
        in_frame = self._typed(held_in, in_names, self.input_schema)
        out_frame = self._typed(held_out, list(self.output_schema), self.output_schema)
        return {"input.0": in_frame, "output.0": out_frame}

    @staticmethod
    def _typed(rows: list[tuple[Any, ...]], names: list[str], schema: dict[str, Any]) -> Any:
        """Rows of physical ``int64`` values as a frame of ``schema``'s dtypes and order."""
        frame = pl.DataFrame(rows, schema={c: pl.Int64 for c in names}, orient="row")
        return frame.select([pl.col(c).cast(schema[c]) for c in schema])

    def load(self, frames: dict[str, Any]) -> None:
        spec = self.spec
        weights = list(spec.weights) if spec.kind == "agg_weights" else list(self.sources)

        def read(prefix: str, values: list[str], empty: dict[str, Any]) -> tuple[Any, ...]:
            parts = [f for n, f in frames.items() if n.startswith(f"{prefix}.") and f.height]
            frame = (
                pl.concat([p.select(list(empty)) for p in parts], how="vertical_relaxed")
                if parts
                else pl.DataFrame(schema=empty)
            )
            return (
                [arrow_int64(frame.get_column(c)) for c in spec.keys],
                [arrow_int64(frame.get_column(c)) for c in values],
                [arrow_int64(frame.get_column(c)) for c in self.tcols],
                arrow_int64(frame.get_column(DIFF)),
            )

        self.core.load(
            read("input", weights, self.input_schema),
            read("output", list(spec.outputs), self.output_schema),
        )
