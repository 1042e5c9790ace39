"""The local runtime's reduce kernels (see :mod:`ddflow.operators.reduce` for the algorithm).

* ``interesting_times``: the closure of the new update times of each key under least upper
  bounds with the key's other input times, grouped by time;
* ``reduce_evaluate``: for ready ``(key, time)`` queries, the desired output
  ``f(input accumulated at time)`` minus the output accumulated at that time, computed in rounds
  (a key's ready times ranked in a linear extension of the order) so that each round sees the
  corrections of the earlier ones;
* the group functions, on accumulated rows ``keys, __q*, values, __diff, weights``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.kernels.local import (
    DIFF,
    KEY,
    QPREFIX,
    accumulate,
    all_before,
    join_exprs,
    time_columns,
)
from ddflow.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.operators.reduce import ReduceSpec

__all__ = ["interesting_times", "reduce_evaluate", "reduce_prepare", "time_queries"]


def interesting_times(new: pl.DataFrame, history: pl.DataFrame, tt: TimeType,
                      keys: Sequence[str]) -> list[tuple[Time, pl.DataFrame]]:
    """Least upper bounds of subsets of each key's times that contain a new time."""
    jkeys = [KEY, *keys]
    tcols = tt.columns()
    cols = [*jkeys, *tcols]
    fresh = new.select(cols).unique()
    ecols = [f"__e{i}" for i in range(tt.width)]
    rename = dict(zip(tcols, ecols))
    closed = fresh
    delta = fresh
    if all_before(history, fresh, tt, tcols, tcols):
        closed = fresh  # no time of the key's history can lift a new time: the closure is N
    elif tt.is_total:
        # lub(n, e) = max(n, e): the closure adds exactly the key's later times
        later = history.select(cols).unique().rename(rename).join(
            fresh.group_by(jkeys).agg(pl.col(tcols[0]).min()), on=jkeys
        ).filter(pl.col(ecols[0]) > pl.col(tcols[0])).select([*jkeys, pl.col(ecols[0]).alias(tcols[0])])
        closed = pl.concat([fresh, later]).unique()
    else:
        others = pl.concat([history.select(cols), fresh]).unique().rename(rename)
        while delta.height:
            lubs = (
                delta.join(others, on=jkeys, how="inner")
                .select([*jkeys, *join_exprs(tt, tcols, ecols, tcols)])
                .unique()
            )
            delta = lubs.join(closed, on=cols, how="anti")
            if delta.height:
                closed = pl.concat([closed, delta])
                others = pl.concat([others, delta.rename(rename)])
    if closed.height == 0:
        return []
    parts = closed.partition_by(tcols, as_dict=True, include_key=False)
    return [(tuple(int(x) for x in t), f) for t, f in parts.items()]  # type: ignore[union-attr]


def minmax_unchanged(spec: ReduceSpec, new: pl.DataFrame, out_history: pl.DataFrame,
                     tt: TimeType) -> pl.DataFrame:
    """New updates of a min/max-only aggregate that cannot change its output.

    A key's new updates are harmless when all are insertions, every output update of the key
    is at a time ``<=`` each new time (so the output at every later time is the output now),
    that output is a single row, and each new value is no smaller than its min (no larger than
    its max). Then no group needs rebuilding: the returned ``(KEY, keys)`` are skipped.
    """
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    if not tt.is_product or out_history.height == 0:
        return new.select(jkeys).clear()
    mins = [(name, c) for name, kind, c in spec.aggs if kind == "min"]
    maxs = [(name, c) for name, kind, c in spec.aggs if kind == "max"]
    g = new.group_by(jkeys).agg(
        (pl.col(DIFF) > 0).all().alias("__pos"),
        *[pl.col(t).min().alias(f"__m{i}") for i, t in enumerate(tcols)],
        *[pl.col(c).min().alias(f"__lo_{name}") for name, c in mins],
        *[pl.col(c).max().alias(f"__hi_{name}") for name, c in maxs],
    ).filter(pl.col("__pos"))
    if g.height == 0:
        return new.select(jkeys).clear()
    outs = list(spec.outputs)
    o = out_history.join(g.select([*jkeys, *[f"__m{i}" for i in range(tt.width)]]), on=jkeys)
    before = pl.all_horizontal([pl.col(t) <= pl.col(f"__m{i}") for i, t in enumerate(tcols)])
    o = o.group_by([*jkeys, *outs]).agg(pl.col(DIFF).sum(), before.all().alias("__before"))
    o = o.filter((pl.col(DIFF) != 0) | ~pl.col("__before"))
    single = o.group_by(jkeys).agg(
        pl.len().alias("__rows"),
        (pl.col(DIFF).first() == 1).alias("__one"),
        pl.col("__before").all(),
        *[pl.col(name).first() for name, _ in mins + maxs],
    ).filter((pl.col("__rows") == 1) & pl.col("__one") & pl.col("__before"))
    ok = single.join(g, on=jkeys)
    cond = pl.lit(True)
    for name, _ in mins:
        cond = cond & (pl.col(f"__lo_{name}") >= pl.col(name))
    for name, _ in maxs:
        cond = cond & (pl.col(f"__hi_{name}") <= pl.col(name))
    return ok.filter(cond).select(jkeys)


def time_queries(pending: dict[Time, list[pl.DataFrame]], tt: TimeType) -> pl.DataFrame:
    """``(KEY, keys, __t*)`` rows, one per distinct pending ``(key, time)``."""
    parts = []
    for t, frames in pending.items():
        keys = pl.concat(frames) if len(frames) > 1 else frames[0]
        parts.append(keys.with_columns(
            [pl.lit(v, dtype=pl.Int64).alias(c) for c, v in zip(tt.columns(), t)]
        ))
    return pl.concat(parts).unique()


def reduce_prepare(spec: ReduceSpec, batch: pl.DataFrame, tt: TimeType) -> pl.DataFrame:
    """Shape an input batch for the reduce's input arrangement."""
    if spec.kind == "agg_weights":
        ws = [(pl.col(w[4:]) * pl.col(DIFF)).alias(w) for w in spec.weights]
        return batch.select([*spec.keys, *tt.columns(), DIFF, *ws])
    return batch.select([*spec.keys, *spec.values, *tt.columns(), DIFF])


def reduce_evaluate(spec: ReduceSpec, queries: pl.DataFrame, history: pl.DataFrame,
                    out_history: pl.DataFrame, tt: TimeType) -> pl.DataFrame:
    """Corrections to the output at the queried ``(key, time)`` pairs:
    rows ``KEY, keys, outputs, __t*, __diff``."""
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    qcols = time_columns(tt, QPREFIX)
    outs = list(spec.outputs)
    q_all = queries.rename(dict(zip(tcols, qcols)))
    acc = accumulate(history, q_all, tt, jkeys, spec.values, spec.weights)
    desired = GROUP_FUNCTIONS[spec.kind](spec, acc, jkeys, qcols)
    out_history = out_history.select([*jkeys, *outs, *tcols, DIFF])
    ranked = q_all.sort([KEY, *qcols]).with_columns(pl.int_range(pl.len()).over(KEY).alias("__rank"))
    rounds = int(ranked.get_column("__rank").max() or 0) + 1  # type: ignore[arg-type]
    group = [*jkeys, *qcols, *outs]
    emitted: list[pl.DataFrame] = []
    for r in range(rounds):
        q = q_all if rounds == 1 else ranked.filter(pl.col("__rank") == r).drop("__rank")
        current = accumulate(out_history, q, tt, jkeys, outs)
        want = desired if rounds == 1 else desired.join(q, on=[*jkeys, *qcols], how="semi")
        change = (
            pl.concat([want, current.with_columns(-pl.col(DIFF))], how="vertical_relaxed")
            .group_by(group)
            .agg(pl.col(DIFF).sum())
            .filter(pl.col(DIFF) != 0)
            .rename(dict(zip(qcols, tcols)))
            .select([*jkeys, *outs, *tcols, DIFF])
        )
        if change.height:
            emitted.append(change)
            if r + 1 < rounds:
                out_history = pl.concat([out_history, change], how="vertical_relaxed")
    if not emitted:
        return out_history.clear()
    return pl.concat(emitted, how="vertical_relaxed")


# ---------------------------------------------------------------------- group functions
# Each takes accumulated rows (keys, __q*, values, __diff, weights) and returns the desired
# output rows (keys, __q*, outputs, __diff).


def _one() -> pl.Expr:
    return pl.lit(1, dtype=pl.Int64).alias(DIFF)


def _agg_weights(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    acc = acc.filter(pl.col(DIFF) > 0)
    exprs = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            e = pl.col(DIFF)
        elif kind == "sum":
            e = pl.col(f"__w_{c}")
        else:  # mean
            e = pl.col(f"__w_{c}") / pl.col(DIFF)
        exprs.append(e.cast(spec.out_types[name]).alias(name))
    return acc.select([*keys, *qcols, *exprs, _one()])


def _agg(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    """Aggregates that need values. ``count``/``sum``/``mean`` are linear in the rows; ``min``
    and ``max`` of a column range over that column's values whose multiplicity in the group,
    summed over every row holding the value, is positive."""
    group = [*keys, *qcols]
    count = pl.col(DIFF).sum()
    linear = [count.alias("__count")]
    for name, kind, c in spec.aggs:
        if kind == "count":
            linear.append(count.cast(spec.out_types[name]).alias(name))
        elif kind == "sum":
            linear.append((pl.col(c) * pl.col(DIFF)).sum().cast(spec.out_types[name]).alias(name))
        elif kind == "mean":
            e = (pl.col(c) * pl.col(DIFF)).sum() / count
            linear.append(e.cast(spec.out_types[name]).alias(name))
    out = acc.group_by(group).agg(linear).filter(pl.col("__count") > 0)
    for name, kind, c in spec.aggs:
        if kind in ("min", "max"):
            present = (acc.group_by([*group, c]).agg(pl.col(DIFF).sum())
                       .filter(pl.col(DIFF) > 0))
            pick = pl.col(c).min() if kind == "min" else pl.col(c).max()
            ext = present.group_by(group).agg(pick.cast(spec.out_types[name]).alias(name))
            out = out.join(ext, on=group, how="left")
    return out.select([*group, *spec.outputs, _one()])


def _distinct(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    return acc.filter(pl.col(DIFF) > 0).select([*keys, *qcols, _one()])


def _threshold(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    assert spec.fn is not None
    counts = acc.get_column(DIFF).unique().to_list()
    mapping = {c: int(spec.fn(c)) for c in counts}
    out = acc.with_columns(pl.col(DIFF).replace_strict(mapping, return_dtype=pl.Int64))
    return out.filter(pl.col(DIFF) != 0).select([*keys, *qcols, DIFF])


def _reduce(spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]) -> pl.DataFrame:
    """``fn(key, group)`` in Python, group by group."""
    fn = spec.fn
    assert fn is not None
    values = list(spec.values)
    gcols = [*keys, *qcols]
    acc = acc.filter(pl.col(DIFF) > 0).sort([*gcols, *values])
    nk = len(gcols)
    nkey = len(spec.keys)
    rows: list[tuple[Any, ...]] = []
    current: tuple[Any, ...] | None = None
    group: list[tuple[tuple[Any, ...], int]] = []

    def flush() -> None:
        if current is None or not group:
            return
        user_key = current[1:1 + nkey]
        for out in fn(user_key if nkey != 1 else user_key[0], group):
            out_t = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out_t) != len(spec.outputs):
                raise ValueError(
                    f"reduce function returned {out_t!r}: expected {len(spec.outputs)} values "
                    f"({', '.join(spec.outputs)})"
                )
            rows.append((*current, *out_t, 1))

    for row in acc.select([*gcols, *values, DIFF]).iter_rows():
        head = row[:nk]
        if head != current:
            flush()
            current, group = head, []
        group.append((row[nk:-1], row[-1]))
    flush()
    schema = {**{c: acc.schema[c] for c in gcols},
              **{n: spec.out_types[n] for n in spec.outputs}, DIFF: pl.Int64}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame.group_by([*gcols, *spec.outputs]).agg(pl.col(DIFF).sum())


GROUP_FUNCTIONS = {
    "agg_weights": _agg_weights,
    "agg": _agg,
    "distinct": _distinct,
    "threshold": _threshold,
    "reduce": _reduce,
}
