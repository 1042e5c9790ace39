"""The local kernels of the Python reducer's step: interesting times, the skips of a min, max
or distinct whose output cannot change, reads narrowed and joined by key set, and the
evaluation (:mod:`ddflow.runtime.local.reduce` holds their code; these methods give it the
kernels' settings). :class:`~ddflow.runtime.local.kernels.LocalKernels` has them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ddflow.differential.batch import KEY
from ddflow.runtime.local import rows as R
from ddflow.runtime.local.columnar import shares_key
from ddflow.runtime.local.rows import Batch, Rows, frame
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import Time, TimeType

__all__ = ["ReduceKernels"]


class ReduceKernels:
    """The Python reducer's kernels (see the module)."""

    settings: LocalSettings

    def interesting_times(
        self, new: pl.DataFrame, history: pl.DataFrame, tt: TimeType, keys: Sequence[str]
    ) -> list[tuple[Time, Batch]]:
        from ddflow.runtime.local.reduce import interesting_times

        return interesting_times(new, history, tt, keys, self.settings)

    def indexed_history(
        self, parts: Sequence[Any], codes: Any, keys: Sequence[str], tt: TimeType
    ) -> Any:
        """The updates of the keys ``codes`` in the batches ``parts`` of a min/max reduce's
        input, read through the indexes of large batches (:mod:`local_index`); None where
        no batch is worth it (then the caller looks up as usual)."""
        from ddflow.runtime.local.index import IndexedHistory

        return IndexedHistory.read(self, parts, codes, keys, tt)

    def minmax_unchanged(
        self, spec: Any, new: pl.DataFrame, out_history: pl.DataFrame, tt: TimeType
    ) -> Batch:
        from ddflow.runtime.local.reduce import minmax_unchanged

        return minmax_unchanged(spec, new, out_history, tt, self.settings)

    def distinct_unchanged(self, spec: Any, new: Batch, out_history: Batch, tt: TimeType) -> Any:
        """The ``(KEY, keys)`` of records whose new insertions leave a distinct's output
        as it is (:func:`~ddflow.runtime.local.reduce.distinct_unchanged`)."""
        from ddflow.runtime.local.reduce import distinct_unchanged

        return distinct_unchanged(spec, new, out_history, tt, self.settings)

    def without_keys(self, batch: Batch, keys: pl.DataFrame) -> Batch:
        """The rows of ``batch`` whose ``(KEY, keys)`` are not among ``keys``' rows."""
        if keys.height == 0:
            return batch
        if type(batch) is Rows:
            if type(keys) is not Rows:  # (only the keys' rows whose code is among the batch's)
                codes = pl.Series(R.codes_of(batch), dtype=pl.Int64).implode()
                keys = Rows(dict(keys.schema), keys.filter(pl.col(KEY).is_in(codes)).rows())
            return R.without_keys(batch, keys)
        keys = frame(keys)
        rest = [c for c in keys.columns if c != KEY]
        if (
            len(rest) == 1
            and KEY in keys.columns
            and KEY in batch.columns
            and shares_key(keys, rest)
            and shares_key(batch, rest)
        ):
            # (the codes are the keys: the rows whose code is not among the keys', in NumPy)
            codes = np.unique(keys.get_column(KEY).to_numpy())
            kept = batch.filter(pl.Series(~R.members(codes, batch.get_column(KEY).to_numpy())))
        else:
            kept = batch.join(
                keys, on=keys.columns, how="anti", nulls_equal=True, maintain_order="left"
            )
        if KEY in batch.columns and batch.get_column(KEY).flags["SORTED_ASC"]:
            return kept.with_columns(kept.get_column(KEY).set_sorted())  # (still sorted)
        return kept

    def held_rows(self, batch: Any) -> int:
        """The rows a read holds of its own: an indexed history's light part (its heavy keys'
        rows stay in the trace's batches, read through their indexes)."""
        return int(batch.light.height) if hasattr(batch, "subset") else int(batch.height)

    def keys_in(self, batch: Any, codes: Any) -> Any:
        """The updates of ``batch`` (a lookup's result, in any order, or an indexed history)
        whose key code is among ``codes`` (sorted, unique)."""
        if hasattr(batch, "subset"):  # (an IndexedHistory: its keys narrowed)
            return batch.subset(np.asarray(codes, dtype=np.int64))
        if type(batch) is Rows:
            wanted = set(codes.tolist() if isinstance(codes, np.ndarray) else codes)
            k = batch.index(KEY)
            return batch.like([r for r in batch.rows if r[k] in wanted])
        if batch.height == 0:
            return batch
        codes = np.asarray(codes, dtype=np.int64)
        return batch.filter(pl.Series(R.members(codes, batch.get_column(KEY).to_numpy())))

    def time_queries(self, pending: dict[Time, list[pl.DataFrame]], tt: TimeType) -> Batch:
        from ddflow.runtime.local.reduce import time_queries

        return time_queries(pending, tt, self.settings)

    def reduce_prepare(self, spec: Any, batch: Batch, tt: TimeType) -> Batch:
        from ddflow.runtime.local.reduce import reduce_prepare

        return reduce_prepare(spec, batch, tt)

    def evaluation_slices(
        self, queries: Batch, codes: Any, parts: Sequence[Any]
    ) -> list[tuple[Batch, np.ndarray]] | None:
        """The queries cut into ranges of keys, each read and evaluated alone
        (:func:`~ddflow.runtime.local.reduce.evaluation.evaluation_slices`)."""
        from ddflow.runtime.local.reduce.evaluation import evaluation_slices

        return evaluation_slices(queries, codes, parts, self.settings)

    def reduce_evaluate(
        self,
        spec: Any,
        queries: pl.DataFrame,
        history: pl.DataFrame,
        out_history: pl.DataFrame,
        tt: TimeType,
    ) -> Batch:
        from ddflow.runtime.local.reduce import reduce_evaluate

        return reduce_evaluate(spec, queries, history, out_history, tt, self.settings)
