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
future of the frontier stay pending. Processing ``(k, t)`` emits, at ``t``::

    f(input_k[t]) - output_k[t]      (output_k[t] including what was just emitted below t)

Several ready times of one key are processed in rounds, in a linear extension of the order, so
that each round sees the output emitted by the previous ones. The group functions (``Logic``)
work on the accumulated ``(key, time, value, multiplicity)`` rows of many keys at once.

Semantics of the group, shared with the reference interpreter: ``count`` is the sum of the
multiplicities, ``sum(c)`` the sum of ``c * multiplicity``; a group yields a row only when its
count is positive; ``min``/``max`` range over the values with positive multiplicity; ``distinct``
keeps the records with positive multiplicity, once; ``threshold(fn)`` gives each record the
multiplicity ``fn(m)``; ``reduce(fn)`` calls ``fn(key, [(row, m), ...])`` with the rows of positive
multiplicity, when there is at least one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

from ddflow.kernels.local import DIFF, KEY, QPREFIX, join_exprs, time_columns
from ddflow.lattice import TimeType
from ddflow.timely import Operator
from ddflow.trace import Spine

__all__ = ["Logic", "ReduceOp"]


class Logic:
    """A group function over accumulated rows.

    ``evaluate(acc)`` receives rows ``keys, __q*, values, __diff, weights`` (the accumulation of
    each queried key at each query time, one row per distinct value) and returns rows
    ``keys, __q*, outputs, __diff`` (the desired output, with multiplicities).
    """

    values: list[str]
    weights: list[str]
    outputs: list[str]

    def prepare(self, batch: pl.DataFrame, keys: Sequence[str], tt: TimeType) -> pl.DataFrame:
        """Shape an input batch for the input arrangement (drop what the function ignores)."""
        return batch.select([*keys, *self.values, *tt.columns(), DIFF])

    def evaluate(self, acc: pl.DataFrame, keys: Sequence[str], qcols: Sequence[str]) -> pl.DataFrame:  # pragma: no cover
        raise NotImplementedError


class ReduceOp(Operator):
    """Maintains ``f`` of every key's group as the input changes."""

    name = "reduce"

    def __init__(self, tt: TimeType, kernels: Any, input_spine: Spine, keys: Sequence[str],
                 logic: Logic, output_empty: pl.DataFrame) -> None:
        super().__init__([tt], [tt])
        self.tt = tt
        self.kernels = kernels
        self.keys = list(keys)
        self.jkeys = [KEY, *self.keys]
        self.logic = logic
        self.input = input_spine
        self.input_handle = input_spine.handle()
        out_empty = kernels.arrange(output_empty, self.keys)
        self.output = Spine(kernels, tt, keys, out_empty)
        self.output_handle = self.output.handle()
        self.tcols = tt.columns()
        self.qcols = time_columns(tt, QPREFIX)
        #: keys with work pending at each time not yet complete: time -> frames of (KEY, keys)
        self.pending: dict[tuple[int, ...], list[pl.DataFrame]] = {}
        #: (key, time) pairs evaluated so far: the work done, for instrumentation
        self.evaluated = 0

    # ------------------------------------------------------------------ scheduling

    def schedule(self) -> None:
        msgs = self.pull(0)
        if msgs:
            new = self.kernels.concat([b for _, b in msgs])
            self._add_interesting(new)
        frontier = self.frontier(0)
        tt = self.tt
        ready_times = [
            t for t in self.pending if not any(tt.less_equal(f, t) for f in frontier)
        ]
        if ready_times:
            parts = []
            for t in ready_times:
                keys = pl.concat(self.pending.pop(t)).unique()
                parts.append(keys.with_columns(
                    [pl.lit(v, dtype=pl.Int64).alias(c) for c, v in zip(self.tcols, t)]
                ))
            self._process(pl.concat(parts))
        self.set_capabilities(self._minimal_pending())
        self.input_handle.set_since(frontier)
        self.output_handle.set_since(frontier)

    def _minimal_pending(self) -> list[tuple[int, ...]]:
        times = sorted(self.pending)
        tt = self.tt
        minimal: list[tuple[int, ...]] = []
        for t in times:  # sorted lexicographically: a linear extension
            if not any(tt.less_equal(m, t) for m in minimal):
                minimal.append(t)
        return minimal

    # ------------------------------------------------------------------ interesting times

    def _add_interesting(self, new: pl.DataFrame) -> None:
        """Add to ``pending`` the lub-closure of the new update times with the key's times."""
        cols = [*self.jkeys, *self.tcols]
        fresh = new.select(cols).unique()
        codes = np.unique(fresh.get_column(KEY).to_numpy())
        # times already pending are lubs of input times, so the input's times suffice
        known = self.input.lookup(codes).select(cols)
        ecols = [f"__e{i}" for i in range(self.tt.width)]
        closed = fresh
        delta = fresh
        others = self.kernels.concat([known, fresh]).unique().rename(dict(zip(self.tcols, ecols)))
        while delta.height:
            lubs = (
                delta.join(others, on=self.jkeys, how="inner")
                .select([*self.jkeys, *join_exprs(self.tt, self.tcols, ecols, self.tcols)])
                .unique()
            )
            delta = lubs.join(closed, on=cols, how="anti")
            if delta.height:
                closed = pl.concat([closed, delta])
                others = pl.concat([others, delta.rename(dict(zip(self.tcols, ecols)))])
        for t, part in self.kernels.split_by_time(closed, self.tt):
            self.pending.setdefault(t, []).append(part.select(self.jkeys))

    # ------------------------------------------------------------------ evaluation

    def _process(self, ready: pl.DataFrame) -> None:
        k = self.kernels
        self.evaluated += ready.height
        codes = np.unique(ready.get_column(KEY).to_numpy())
        queries = ready.rename(dict(zip(self.tcols, self.qcols)))
        history = self.input.lookup(codes)
        acc = k.accumulate(history, queries, self.tt, self.jkeys, self.logic.values, self.logic.weights)
        desired = self.logic.evaluate(acc, self.jkeys, self.qcols)
        outs = self.logic.outputs
        out_history = self.output.lookup(codes).select([*self.jkeys, *outs, *self.tcols, DIFF])
        # rank the ready times of each key in a linear extension of the order
        ranked = queries.sort([KEY, *self.qcols]).with_columns(
            pl.int_range(pl.len()).over(KEY).alias("__rank")
        )
        rounds = int(ranked.get_column("__rank").max()) + 1  # type: ignore[arg-type]
        group = [*self.jkeys, *self.qcols, *outs]
        emitted: list[pl.DataFrame] = []
        for r in range(rounds):
            q = ranked.filter(pl.col("__rank") == r).drop("__rank") if rounds > 1 else queries
            current = k.accumulate(out_history, q, self.tt, self.jkeys, outs)
            want = desired.join(q, on=[*self.jkeys, *self.qcols], how="semi") if rounds > 1 else desired
            change = (
                pl.concat([want, current.with_columns(-pl.col(DIFF))], how="vertical_relaxed")
                .group_by(group)
                .agg(pl.col(DIFF).sum())
                .filter(pl.col(DIFF) != 0)
                .rename(dict(zip(self.qcols, self.tcols)))
                .select([*self.jkeys, *outs, *self.tcols, DIFF])
            )
            if change.height:
                emitted.append(change)
                out_history = pl.concat([out_history, change], how="vertical_relaxed")
        if not emitted:
            return
        result = pl.concat(emitted, how="vertical_relaxed")
        arranged = result.sort(KEY)
        self.output.insert(arranged, arranged.height)
        send = result.drop(KEY)
        for t, part in k.split_by_time(send, self.tt):
            self.send(0, t, part)


# ---------------------------------------------------------------------- group functions


class CountSumLogic(Logic):
    """``count``, ``sum`` and ``mean`` aggregates: only accumulated weights are kept."""

    def __init__(self, aggs: Sequence[tuple[str, str, str | None]], out_types: dict[str, pl.DataType]):
        self.aggs = list(aggs)  # (output name, kind, column)
        self.values = []
        self.weight_of = {c: f"__w_{c}" for _, kind, c in aggs if c is not None}
        self.weights = sorted(set(self.weight_of.values()))
        self.outputs = [name for name, _, _ in aggs]
        self.out_types = out_types

    def prepare(self, batch: pl.DataFrame, keys: Sequence[str], tt: TimeType) -> pl.DataFrame:
        ws = [(pl.col(c) * pl.col(DIFF)).alias(w) for c, w in sorted(self.weight_of.items())]
        return batch.select([*keys, *tt.columns(), DIFF, *ws])

    def evaluate(self, acc: pl.DataFrame, keys: Sequence[str], qcols: Sequence[str]) -> pl.DataFrame:
        acc = acc.filter(pl.col(DIFF) > 0)
        exprs = []
        for name, kind, c in self.aggs:
            if kind == "count":
                e = pl.col(DIFF)
            elif kind == "sum":
                e = pl.col(self.weight_of[c])  # type: ignore[index]
            else:  # mean
                e = pl.col(self.weight_of[c]) / pl.col(DIFF)  # type: ignore[index]
            exprs.append(e.cast(self.out_types[name]).alias(name))
        return acc.select([*keys, *qcols, *exprs, pl.lit(1, dtype=pl.Int64).alias(DIFF)])


class GeneralAggLogic(Logic):
    """Aggregates that need the values themselves (``min``, ``max``), with any others."""

    def __init__(self, aggs: Sequence[tuple[str, str, str | None]], out_types: dict[str, pl.DataType]):
        self.aggs = list(aggs)
        self.values = sorted({c for _, _, c in aggs if c is not None})
        self.weights = []
        self.outputs = [name for name, _, _ in aggs]
        self.out_types = out_types

    def evaluate(self, acc: pl.DataFrame, keys: Sequence[str], qcols: Sequence[str]) -> pl.DataFrame:
        exprs = []
        positive = pl.col(DIFF) > 0
        count = pl.col(DIFF).sum()
        for name, kind, c in self.aggs:
            if kind == "count":
                e = count
            elif kind == "sum":
                e = (pl.col(c) * pl.col(DIFF)).sum()
            elif kind == "mean":
                e = (pl.col(c) * pl.col(DIFF)).sum() / count
            elif kind == "min":
                e = pl.col(c).filter(positive).min()
            else:
                e = pl.col(c).filter(positive).max()
            exprs.append(e.cast(self.out_types[name]).alias(name))
        out = acc.group_by([*keys, *qcols]).agg([*exprs, count.alias("__count")])
        return out.filter(pl.col("__count") > 0).select(
            [*keys, *qcols, *self.outputs, pl.lit(1, dtype=pl.Int64).alias(DIFF)]
        )


class ThresholdLogic(Logic):
    """``distinct`` and ``threshold``: the key is the whole record; the output multiplicity is a
    function of the accumulated one."""

    def __init__(self, fn: Callable[[int], int] | None):
        self.fn = fn
        self.values = []
        self.weights = []
        self.outputs = []

    def evaluate(self, acc: pl.DataFrame, keys: Sequence[str], qcols: Sequence[str]) -> pl.DataFrame:
        if self.fn is None:
            out = acc.filter(pl.col(DIFF) > 0).with_columns(pl.lit(1, dtype=pl.Int64).alias(DIFF))
        else:
            counts = acc.get_column(DIFF).unique().to_list()
            mapping = {c: int(self.fn(c)) for c in counts}
            out = acc.with_columns(
                pl.col(DIFF).replace_strict(mapping, return_dtype=pl.Int64)
            ).filter(pl.col(DIFF) != 0)
        return out.select([*keys, *qcols, DIFF])


class GroupFnLogic(Logic):
    """``reduce(fn)``: an arbitrary Python function of a key's whole group."""

    def __init__(self, fn: Callable[..., Any], key_names: Sequence[str], value_names: Sequence[str],
                 out_names: Sequence[str], out_schema: dict[str, pl.DataType]):
        self.fn = fn
        self.key_names = list(key_names)
        self.values = list(value_names)
        self.weights = []
        self.outputs = list(out_names)
        self.out_schema = out_schema

    def evaluate(self, acc: pl.DataFrame, keys: Sequence[str], qcols: Sequence[str]) -> pl.DataFrame:
        acc = acc.filter(pl.col(DIFF) > 0).sort([*keys, *qcols, *self.values])
        gcols = [*keys, *qcols]
        rows: list[tuple[Any, ...]] = []
        nk = len(gcols)
        nkey = len(self.key_names)
        current: tuple[Any, ...] | None = None
        group: list[tuple[tuple[Any, ...], int]] = []

        def flush() -> None:
            if current is None or not group:
                return
            user_key = current[1 : 1 + nkey]
            for out in self.fn(user_key if nkey != 1 else user_key[0], group):
                out_t = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                if len(out_t) != len(self.outputs):
                    raise ValueError(
                        f"reduce function returned {out_t!r}: expected {len(self.outputs)} "
                        f"values ({', '.join(self.outputs)})"
                    )
                rows.append((*current, *out_t, 1))

        for row in acc.select([*gcols, *self.values, DIFF]).iter_rows():
            head = row[:nk]
            if head != current:
                flush()
                current, group = head, []
            group.append((row[nk:-1], row[-1]))
        flush()
        schema = {**{c: acc.schema[c] for c in gcols}, **self.out_schema, DIFF: pl.Int64}
        frame = pl.DataFrame(rows, schema=schema, orient="row")
        return frame.group_by([*gcols, *self.outputs]).agg(pl.col(DIFF).sum())
