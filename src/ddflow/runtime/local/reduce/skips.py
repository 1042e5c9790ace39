"""Skips: new input updates that cannot change a reduce's output, whose keys need no evaluation.

* :func:`minmax_unchanged`: updates of a min/max-only aggregate that leave its output as it is
  at every time after theirs (a neighbour's label moving between two values above a node's
  label, in label propagation);
* :func:`distinct_unchanged`: insertions of records that a ``distinct`` already outputs once
  (its output updates of the record all at or before the insertions' least time).

Both return the ``(KEY, keys)`` of the keys to skip: no group of theirs is rebuilt. Returning
fewer keys is always sound (those are evaluated as usual), so each test may give up where it
does not apply or would find few keys (where, the settings' ``reduce`` say). The output must
also be settled: the reduce operator keeps a key with a time still to evaluate out of the skip.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from operator import le as _le
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.differential.batch import DIFF, KEY
from ddflow.runtime.local.columnar import one_time, run_starts, shares_key
from ddflow.runtime.local.reduce.bounded_extremes import _SIGNED_SAFE
from ddflow.runtime.local.reduce.small_steps import _hold, _limit
from ddflow.runtime.local.rows import Rows, frame, iter_rows
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import TimeType

if TYPE_CHECKING:
    from ddflow.differential.kernel import ReduceSpec

__all__ = ["distinct_unchanged", "minmax_unchanged"]


def minmax_unchanged(
    spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType, settings: LocalSettings
) -> Any:
    """New updates of a min/max-only aggregate that cannot change its output.

    Let ``n`` be the least time of a key's new updates (coordinate-wise). They are harmless
    when, at every time after ``n``, the key's output is one row whose min keeps a positive
    multiplicity and gains no smaller value (its max no larger one) and whose count stays
    positive. That holds when:

    * the output accumulated at ``n`` is a single row of multiplicity 1, with no null min or
      max;
    * each later output time replaces rows (its diffs sum to zero), and the rows it adds have
      no null min or max; the min (max) at any time after ``n`` is then at most (at least)
      the bound ``b``: the largest min (smallest max) of those rows and of the row at ``n``;
    * the new diffs sum to zero or more at each time (the count stays positive);
    * each inserted value is ``>= b`` (``<=`` for a max), each retracted one ``> b``
      (``<``); nulls change no min or max and count only in the sums.

    A neighbour's label moving between two values above a node's label, in label
    propagation, is such a change. The returned ``(KEY, keys)`` are skipped: no group is
    rebuilt. (The output must also be settled: the reduce operator keeps a key with a time
    still to evaluate out of the skip, since a correction there can move its min above a
    skipped insertion.) Returning fewer keys is always sound: the columnar skip is not tried
    where it would find few (``settings.reduce.skip_try_rows`` new updates or more, over
    ``skip_try_ratio`` times their keys' output rows: each key then has many new updates,
    one of which lowers its min, or raises its max, in the common case).
    """
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    if not tt.is_product or out_history.height == 0:
        return Rows({c: new.schema[c] for c in jkeys}, [])
    if new.height + out_history.height <= _limit(settings):
        return _minmax_unchanged_rows(spec, new, out_history, tt, settings.reduce.exact_times)
    reduce = settings.reduce
    if (
        new.height >= reduce.skip_try_rows
        and new.height > reduce.skip_try_ratio * out_history.height
    ):
        return _hold(frame(new).select(jkeys).clear(), settings)
    new, out_history = frame(new), frame(out_history)
    keep = _minmax_unchanged_arrays(spec, new, out_history, tt)
    if keep is not None:
        return _hold(keep, settings)
    mins, maxs = _extremes(spec)
    ins, ret = pl.col(DIFF) > 0, pl.col(DIFF) < 0
    by, carried = _by_key(new, spec.keys)
    one = one_time(new, tcols)  # (then the diffs summed per key are those per key and time)
    g = new.group_by(by).agg(
        *carried,
        *[pl.col(t).min().alias(f"__m{i}") for i, t in enumerate(tcols)],
        *[pl.col(c).filter(ins).min().alias(f"__lo_{name}") for name, c in mins],
        *[pl.col(c).filter(ret).min().alias(f"__rlo_{name}") for name, c in mins],
        *[pl.col(c).filter(ins).max().alias(f"__hi_{name}") for name, c in maxs],
        *[pl.col(c).filter(ret).max().alias(f"__rhi_{name}") for name, c in maxs],
        *([pl.col(DIFF).sum().alias("__sum")] if one is not None else []),
    )
    if one is None:
        negative = (
            new.group_by([*by, *tcols]).agg(pl.col(DIFF).sum()).filter(pl.col(DIFF) < 0).select(by)
        )
        g = g.join(negative, on=by, how="anti", nulls_equal=True)
    else:
        g = g.filter(pl.col("__sum") >= 0).drop("__sum")
    if g.height == 0:
        return new.select(jkeys).clear()
    outs = list(spec.outputs)
    names = [name for name, _ in mins + maxs]
    marks = [f"__m{i}" for i in range(tt.width)]
    if by == [KEY] and shares_key(out_history, spec.keys):  # (the codes are the keys)
        o = out_history.join(g.select([KEY, *marks]), on=KEY)
    else:
        o = out_history.join(g.select([*jkeys, *marks]), on=jkeys, nulls_equal=True)
    by, carried = _by_key(o, spec.keys)
    before = pl.all_horizontal([pl.col(t) <= pl.col(m) for t, m in zip(tcols, marks, strict=True)])
    o = o.with_columns(before.alias("__before"))
    # the output at the least new time: a single row of multiplicity 1
    at = (
        o.filter(pl.col("__before"))
        .group_by([*by, *outs])
        .agg(*carried, pl.col(DIFF).sum())
        .filter(pl.col(DIFF) != 0)
        .group_by(by)
        .agg(
            *carried,
            pl.len().alias("__rows"),
            (pl.col(DIFF).first() == 1).alias("__one"),
            *[pl.col(name).first() for name in names],
        )
        .filter((pl.col("__rows") == 1) & pl.col("__one"))
    )
    # later output updates: at each time they replace rows (diffs summing to zero), and the
    # rows they add bound the min (max) at the times after
    later = o.filter(~pl.col("__before"))
    unsettled = (
        later.group_by([*by, *tcols]).agg(pl.col(DIFF).sum()).filter(pl.col(DIFF) != 0).select(by)
    )
    added = (
        later.filter(pl.col(DIFF) > 0)
        .group_by(by)
        .agg(
            *carried,
            *[pl.col(name).max().alias(f"__b_{name}") for name, _ in mins],
            *[pl.col(name).min().alias(f"__b_{name}") for name, _ in maxs],
            *[pl.col(name).null_count().alias(f"__n_{name}") for name in names],
        )
    )
    ok = (
        at.join(unsettled, on=by, how="anti", nulls_equal=True)
        .join(added, on=jkeys, how="left", nulls_equal=True)
        .join(g, on=jkeys, nulls_equal=True)
    )
    cond = pl.lit(True)
    for name in names:
        now, n = pl.col(name), pl.col(f"__n_{name}")
        cond = cond & now.is_not_null() & (n.is_null() | (n == 0))
    for name, _ in mins:
        bound = pl.max_horizontal(pl.col(name), pl.col(f"__b_{name}"))
        lo, rlo = pl.col(f"__lo_{name}"), pl.col(f"__rlo_{name}")
        cond = cond & (lo.is_null() | (lo >= bound)) & (rlo.is_null() | (rlo > bound))
    for name, _ in maxs:
        bound = pl.min_horizontal(pl.col(name), pl.col(f"__b_{name}"))
        hi, rhi = pl.col(f"__hi_{name}"), pl.col(f"__rhi_{name}")
        cond = cond & (hi.is_null() | (hi <= bound)) & (rhi.is_null() | (rhi < bound))
    return _hold(ok.filter(cond).select(jkeys), settings)


def distinct_unchanged(
    spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType, settings: LocalSettings
) -> Any:
    """New updates of a ``distinct`` that cannot change its output: a record's, when they
    are all insertions and its output updates are all at or before their least time (the
    meet of their times, in a product order), summing to one. The output is then the record
    once at every time after the new updates', where its count is positive, and insertions
    only raise the count. (An edge inserted between nodes already present, for the node set
    of a graph algorithm.) The returned ``(KEY, keys)`` are skipped; the reduce operator
    keeps keys with times still to evaluate out of it."""
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    if not tt.is_product or out_history.height == 0:
        return Rows({c: new.schema[c] for c in jkeys}, [])
    if new.height + out_history.height <= _limit(settings):
        nk, width = len(jkeys), tt.width
        least: dict[tuple[Any, ...], tuple[int, ...]] = {}
        removed = set()
        for row in iter_rows(new, [*jkeys, *tcols, DIFF]):
            key, t = row[:nk], row[nk : nk + width]
            if row[-1] <= 0:
                removed.add(key)
            cur = least.get(key)
            least[key] = t if cur is None else tuple(map(min, cur, t))
        for key in removed:
            del least[key]
        total: dict[tuple[Any, ...], int] = {}
        for row in iter_rows(out_history, [*jkeys, *tcols, DIFF]):
            key = row[:nk]
            n = least.get(key)
            if n is None:
                continue
            if all(map(_le, row[nk : nk + width], n)):
                total[key] = total.get(key, 0) + row[-1]
            else:  # (a later output update: the record may be absent after it)
                del least[key]
                total.pop(key, None)
        return Rows({c: new.schema[c] for c in jkeys}, [key for key, s in total.items() if s == 1])
    new, out_history = frame(new), frame(out_history)
    marks = [f"__m{i}" for i in range(tt.width)]
    g = (
        new.group_by(jkeys)
        .agg(
            *[pl.col(t).min().alias(m) for t, m in zip(tcols, marks, strict=True)],
            (pl.col(DIFF) > 0).all().alias("__ins"),
        )
        .filter(pl.col("__ins"))
        .drop("__ins")
    )
    before = pl.all_horizontal([pl.col(t) <= pl.col(m) for t, m in zip(tcols, marks, strict=True)])
    ok = (
        out_history.select([*jkeys, *tcols, DIFF])
        .join(g, on=jkeys, nulls_equal=True)
        .group_by(jkeys)
        .agg(before.all().alias("__before"), pl.col(DIFF).sum())
        .filter(pl.col("__before") & (pl.col(DIFF) == 1))
    )
    return _hold(ok.select(jkeys), settings)


def _by_key(batch: pl.DataFrame, keys: Sequence[str]) -> tuple[list[str], list[pl.Expr]]:
    """What to group ``batch`` by for one group per key, and the key columns to carry:
    the key code alone where it is a copy of the one key column (a group-by of one column
    is several times cheaper than of two), else the code and the key columns."""
    if shares_key(batch, keys):
        return [KEY], [pl.col(keys[0]).first()]
    return [KEY, *keys], []


def _signed_values(f: pl.DataFrame, column: str, sign: int) -> np.ndarray | None:
    """An integer column without nulls as int64, negated for a max (so that a max is the min
    of the negated values); None where that is not exact (nulls, other types, the least
    int64 negated)."""
    s = f.get_column(column)
    if s.dtype not in _SIGNED_SAFE or s.null_count():
        return None
    v = s.cast(pl.Int64).to_numpy()
    if sign < 0:
        if len(v) and int(v.min()) == np.iinfo(np.int64).min:
            return None
        v = -v
    return v


def _minmax_unchanged_arrays(
    spec: ReduceSpec, new: pl.DataFrame, out_history: pl.DataFrame, tt: TimeType
) -> pl.DataFrame | None:
    """:func:`minmax_unchanged` for one ``min`` (``max``) of an integer column without nulls,
    keyed by one ``Int64`` column that the key code copies: the same conditions in NumPy, each
    group a run of rows sorted by key (a Polars group-by or join costs a few hundred
    microseconds however few its rows, and the columnar path makes about twenty). A max is
    the min of the negated values. None where it does not apply."""
    if len(spec.aggs) != 1 or len(spec.outputs) != 1 or not tt.is_product:
        return None
    ((name, kind, c),) = spec.aggs
    if (
        kind not in ("min", "max")
        or c is None
        or not shares_key(new, spec.keys)
        or not shares_key(out_history, spec.keys)
    ):
        return None
    sign = 1 if kind == "min" else -1
    value, out_value = _signed_values(new, c, sign), _signed_values(out_history, name, sign)
    if value is None or out_value is None:
        return None
    if new.height == 0:
        return new.select([KEY, *spec.keys]).clear()
    tcols = tt.columns()
    big = np.iinfo(np.int64).max
    # the new updates, by key: the least time per coordinate, the least inserted and the
    # least retracted value, and whether every (key, time)'s diffs sum to zero or more
    key = new.get_column(KEY).to_numpy()
    times = [new.get_column(t).to_numpy() for t in tcols]
    diff = new.get_column(DIFF).to_numpy()
    order = np.lexsort((*times[::-1], key))
    key, value, diff = key[order], value[order], diff[order]
    times = [t[order] for t in times]
    starts = run_starts(key)
    codes = key[starts]
    least = [np.minimum.reduceat(t, starts) for t in times]
    inserted = np.minimum.reduceat(np.where(diff > 0, value, big), starts)
    any_ins = np.logical_or.reduceat(diff > 0, starts)
    retracted = np.minimum.reduceat(np.where(diff < 0, value, big), starts)
    any_ret = np.logical_or.reduceat(diff < 0, starts)
    at_time = run_starts(key, *times)
    ok = np.ones(len(codes), dtype=bool)
    ok[np.searchsorted(codes, key[at_time][np.add.reduceat(diff, at_time) < 0])] = False
    # the output updates of those keys: before (at or below the least new time) or later
    okey = out_history.get_column(KEY).to_numpy()
    at = np.minimum(np.searchsorted(codes, okey), len(codes) - 1)
    mine = codes[at] == okey
    at, out_value = at[mine], out_value[mine]
    odiff = out_history.get_column(DIFF).to_numpy()[mine]
    otimes = [out_history.get_column(t).to_numpy()[mine] for t in tcols]
    before = np.ones(len(at), dtype=bool)
    for t, lt in zip(otimes, least, strict=True):
        before &= t <= lt[at]
    # at the least new time: one output row, of multiplicity 1
    b_at, b_value, b_diff = at[before], out_value[before], odiff[before]
    order = np.lexsort((b_value, b_at))
    b_at, b_value, b_diff = b_at[order], b_value[order], b_diff[order]
    single = np.zeros(len(codes), dtype=bool)
    now = np.zeros(len(codes), dtype=np.int64)
    if len(b_at):
        groups = run_starts(b_at, b_value)
        sums = np.add.reduceat(b_diff, groups)
        live = sums != 0
        g_at, g_value, g_sum = b_at[groups][live], b_value[groups][live], sums[live]
        rows = np.bincount(g_at, minlength=len(codes))
        single[g_at] = (rows[g_at] == 1) & (g_sum == 1)
        now[g_at] = g_value
    ok &= single
    # later: every time replaces rows (its diffs sum to zero); the rows added bound the min
    later = ~before
    l_at, l_value, l_diff = at[later], out_value[later], odiff[later]
    bound = now.copy()
    if len(l_at):
        l_times = [t[later] for t in otimes]
        order = np.lexsort((*l_times[::-1], l_at))
        l_at, l_value, l_diff = l_at[order], l_value[order], l_diff[order]
        l_times = [t[order] for t in l_times]
        per_time = run_starts(l_at, *l_times)
        unsettled = l_at[per_time][np.add.reduceat(l_diff, per_time) != 0]
        ok[unsettled] = False
        added = l_diff > 0
        np.maximum.at(bound, l_at[added], l_value[added])
    ok &= (~any_ins | (inserted >= bound)) & (~any_ret | (retracted > bound))
    keys = codes[ok]
    return pl.DataFrame(
        {KEY: keys, spec.keys[0]: keys},
        schema={KEY: new.schema[KEY], spec.keys[0]: new.schema[spec.keys[0]]},
    )


def _extremes(spec: ReduceSpec) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The ``(output, column)`` pairs of a min/max aggregate's mins, and of its maxs."""
    pick = [(kind, name, c) for name, kind, c in spec.aggs if c is not None]
    return ([(n, c) for k, n, c in pick if k == "min"], [(n, c) for k, n, c in pick if k == "max"])


def _minmax_unchanged_rows(
    spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType, exact_times: int
) -> Rows:
    """:func:`minmax_unchanged` row by row (the same conditions, nulls as the columnar path
    treats them; ``exact_times``: as :func:`_unchanged_at_each_time`)."""
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    nk, width = len(jkeys), tt.width
    mins, maxs = _extremes(spec)
    cols = [c for _, c in mins + maxs]
    nmin = len(mins)

    def widen(bounds: list[Any], vals: tuple[Any, ...], outward: bool = True) -> None:
        """Each min column's least value and each max column's greatest (``outward``), or
        the reverse, of ``bounds`` and ``vals``; nulls ignored."""
        for i, v in enumerate(vals):
            if v is not None:
                cur = bounds[i]
                least = (i < nmin) == outward
                bounds[i] = v if cur is None else (min if least else max)(cur, v)

    # key -> [diff sum per time, least time per coordinate, bounds of the inserted values,
    # bounds of the retracted values]
    seen: dict[tuple[Any, ...], list[Any]] = {}
    # key -> its new updates (time, values, diff), and its output updates (time, outputs, diff)
    new_k: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    out_k: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for row in iter_rows(new, [*jkeys, *tcols, DIFF, *cols]):
        key, t, d, vals = row[:nk], row[nk : nk + width], row[nk + width], row[nk + width + 1 :]
        got = seen.get(key)
        if got is None:
            got = seen[key] = [{}, None, [None] * len(cols), [None] * len(cols)]
            new_k[key] = []
        new_k[key].append((t, vals, d))
        got[0][t] = got[0].get(t, 0) + d
        if d > 0:
            widen(got[2], vals)
        elif d < 0:
            widen(got[3], vals)
    for got in seen.values():  # (each key's least time, coordinate by coordinate)
        got[1] = tuple(map(min, *got[0])) if len(got[0]) > 1 else next(iter(got[0]))
    candidates = {k: v for k, v in seen.items() if all(s >= 0 for s in v[0].values())}
    outs = list(spec.outputs)
    no = len(outs)
    index = [outs.index(name) for name, _ in mins + maxs]
    # key -> [output at the least new time (row -> diff), later diffs per time, bounds of the
    # rows added later (as the inserted values'), a null among them]
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for row in iter_rows(out_history, [*jkeys, *outs, *tcols, DIFF]):
        key = row[:nk]
        mine = out_k.get(key)
        o, t, d = row[nk : nk + no], row[nk + no : nk + no + width], row[-1]
        if mine is None:
            if key not in new_k:
                continue
            mine = out_k[key] = []
        mine.append((t, o, d))
        cand = candidates.get(key)
        if cand is None:
            continue
        g = groups.get(key)
        if g is None:
            g = groups[key] = [{}, {}, [None] * len(cols), False]
        if all(map(_le, t, cand[1])):
            g[0][o] = g[0].get(o, 0) + d
        else:
            g[1][t] = g[1].get(t, 0) + d
            if d > 0:
                vals = tuple(o[i] for i in index)
                g[3] = g[3] or None in vals
                widen(g[2], vals, outward=False)
    keep = []
    for key, (at, later, added, null) in groups.items():
        live = [(o, d) for o, d in at.items() if d]
        if len(live) != 1 or live[0][1] != 1 or null or any(later.values()):
            continue
        now = [live[0][0][i] for i in index]
        if None in now:
            continue
        inserted, retracted = candidates[key][2], candidates[key][3]
        ok = True
        for i in range(len(cols)):
            b = now[i] if added[i] is None else (max if i < nmin else min)(now[i], added[i])
            low, gone = inserted[i], retracted[i]
            if i < nmin:
                ok = ok and (low is None or low >= b) and (gone is None or gone > b)
            else:
                ok = ok and (low is None or low <= b) and (gone is None or gone < b)
        if ok:
            keep.append(key)
    kept = set(keep)
    for key, rows in new_k.items():  # (the bounds above are one test for every later time)
        if key not in kept and _unchanged_at_each_time(
            rows, out_k.get(key, ()), index, nmin, exact_times
        ):
            keep.append(key)
    return Rows({c: new.schema[c] for c in jkeys}, keep)


def _unchanged_at_each_time(
    new: Sequence[tuple[Any, ...]],
    out: Sequence[tuple[Any, ...]],
    index: Sequence[int],
    nmin: int,
    exact_times: int,
) -> bool:
    """Whether a key's new updates ``(time, values, diff)`` leave its min/max output
    (``out``: its output updates ``(time, outputs, diff)``, in a product order) as it is at
    every time: the skip's test time by time, for a key the single bound of
    :func:`minmax_unchanged` does not clear (a neighbour's label falling over the iterations,
    in label propagation, as the key's own label does: each new value above the key's
    label at its time, below its label at a later one). ``values`` are the extremes' input
    columns, ``index`` their outputs' positions, the first ``nmin`` of them mins.

    A time ``u`` after a new update's sees the same updates as the greatest time ``g <= u``
    of the grid of the coordinates that the new updates' times, and the output's times at
    or above the new ones' least, take: the test runs at each such ``g`` (in order, where
    only the last coordinate varies: :func:`_unchanged_along_last`; else at most
    ``exact_times`` of them). There the output must be one row of multiplicity 1 without a null
    min (max) ``m`` (the group exists: its count is positive), and the new updates
    accumulated there must sum to zero or more (the count stays positive), add no value below
    ``m`` (above, for a max) and take nothing from ``m`` itself: a value below a min has no
    positive multiplicity, and retracting it changes nothing."""
    if not out:
        return False
    times = [t for t, _, _ in new]
    width = len(times[0])
    lows = [min(c) for c in zip(*times, strict=True)]
    grid = [
        sorted({t[i] for t in times} | {t[i] for t, _, _ in out if t[i] >= lows[i]})
        for i in range(width)
    ]
    if all(len(g) == 1 for g in grid[:-1]):
        return _unchanged_along_last(new, out, grid, index, nmin)
    size = 1
    for g in grid:
        size *= len(g)
    if size > exact_times:
        return False
    for at in product(*grid):
        if not any(all(map(_le, t, at)) for t in times):
            continue
        acc: dict[tuple[Any, ...], int] = {}
        for t, o, d in out:
            if all(map(_le, t, at)):
                acc[o] = acc.get(o, 0) + d
        total = 0
        per: list[dict[Any, int]] = [{} for _ in index]
        for t, vals, d in new:
            if all(map(_le, t, at)):
                total += d
                _add_values(per, vals, d)
        if not _extremes_kept(acc, per, total, index, nmin):
            return False
    return True


def _unchanged_along_last(
    new: Sequence[tuple[Any, ...]],
    out: Sequence[tuple[Any, ...]],
    grid: list[list[int]],
    index: Sequence[int],
    nmin: int,
) -> bool:
    """:func:`_unchanged_at_each_time` where the grid varies in its last coordinate alone (the
    new updates all in one epoch, at several iterations of a loop: the common case): the
    times in order of that coordinate, each adding its updates to the ones before."""
    # (every update's other coordinates are at most the grid's, which hold each coordinate
    # of the new updates and of the output's at or above the new ones' least; and the
    # grid's last coordinates are at or above the new ones' least: each is after one)
    k = len(grid) - 1
    out_at = sorted(((t[k], o, d) for t, o, d in out), key=lambda r: r[0])
    new_at = sorted(((t[k], vals, d) for t, vals, d in new), key=lambda r: r[0])
    acc: dict[tuple[Any, ...], int] = {}
    per: list[dict[Any, int]] = [{} for _ in index]
    total = 0
    i = j = 0
    for at in grid[-1]:
        while i < len(out_at) and out_at[i][0] <= at:
            _, o, d = out_at[i]
            acc[o] = acc.get(o, 0) + d
            i += 1
        while j < len(new_at) and new_at[j][0] <= at:
            _, vals, d = new_at[j]
            total += d
            _add_values(per, vals, d)
            j += 1
        if not _extremes_kept(acc, per, total, index, nmin):
            return False
    return True


def _add_values(per: list[dict[Any, int]], vals: Sequence[Any], d: int) -> None:
    """Add a new update's extremes' values (nulls left out) with its diff ``d``."""
    for c, v in enumerate(vals):
        if v is not None:
            per[c][v] = per[c].get(v, 0) + d


def _extremes_kept(
    acc: dict[tuple[Any, ...], int],
    per: list[dict[Any, int]],
    total: int,
    index: Sequence[int],
    nmin: int,
) -> bool:
    """The test of :func:`_unchanged_at_each_time` at one time: the output accumulated
    there (``acc``: row -> diff) is one row of multiplicity 1 without a null min (max) ``m``,
    and the new updates accumulated there (``per``: each extreme's values -> diff, the diffs
    summing to ``total``) sum to zero or more, add no value below ``m`` (above, for a max)
    and take nothing from ``m``."""
    live = [(o, d) for o, d in acc.items() if d]
    if len(live) != 1 or live[0][1] != 1 or total < 0:
        return False
    row = live[0][0]
    for c, counts in enumerate(per):
        m = row[index[c]]
        if m is None:
            return False
        for v, d in counts.items():
            if (d > 0 and (v < m if c < nmin else v > m)) or (d < 0 and v == m):
                return False
    return True
