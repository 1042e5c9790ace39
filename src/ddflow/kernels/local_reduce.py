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

from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise, product
from operator import le as _le
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.kernels import local_rows
from ddflow.kernels.local import (
    DIFF,
    KEY,
    QPREFIX,
    accumulate,
    all_before,
    balanced_cuts,
    join_exprs,
    le_expr,
    one_time,
    run_starts,
    shares_key,
    time_columns,
)
from ddflow.kernels.local_index import IndexedHistory, _found, indexed_sums, positions
from ddflow.kernels.local_rows import Rows, as_rows, frame, iter_rows, rowable
from ddflow.lattice import Time, TimeType

if TYPE_CHECKING:
    from ddflow.operators.reduce import ReduceSpec

__all__ = ["interesting_times", "reduce_evaluate", "reduce_prepare", "time_queries"]


#: below this many rows a reduce kernel works row by row in Python: the same result as the
#: columnar path, without the fixed cost of a few dozen Polars calls (a small update typically
#: touches a handful of keys); each kernel's ``small_rows`` argument overrides it
SMALL_REDUCE_ROWS = 2_000


#: the columnar min/max skip (:func:`minmax_unchanged`) is not tried on this many new updates
#: or more when they also outnumber the output rows of their keys more than
#: :data:`SKIP_TRY_RATIO` times: each key then has many new updates, one of which lowers its min
#: (raises its max) in the common case, and the skip would group them all to find few keys (the
#: early iterations of label propagation's first epoch on 1M edges: 1,172 keys of 76k for
#: 311 ms, and 107 for 265 ms)
SKIP_TRY_ROWS = 100_000
SKIP_TRY_RATIO = 4


def _limit(small_rows: int | None) -> int:
    return SMALL_REDUCE_ROWS if small_rows is None else small_rows


def _hold(data: pl.DataFrame, small_rows: int | None) -> Any:
    """A result as rows when small, unless the row paths are off (``small_rows < 0``)."""
    return as_rows(data, None if _limit(small_rows) >= 0 else -1)


def interesting_times(
    new: pl.DataFrame,
    history: pl.DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    small_rows: int | None = None,
) -> list[tuple[Time, pl.DataFrame]]:
    """Least upper bounds of subsets of each key's times that contain a new time."""
    jkeys = [KEY, *keys]
    tcols = tt.columns()
    cols = [*jkeys, *tcols]
    # (an indexed history's times are its summaries' and light rows, whatever its height)
    rows = new.height + (
        history.light.height if isinstance(history, IndexedHistory) else history.height
    )
    if ARRAY_TIMES_ROWS <= rows <= ARRAY_TIMES_MAX:
        found = _interesting_times_arrays(new, history, tt, keys, small_rows)
        if found is not None:
            return found
    if isinstance(history, IndexedHistory):
        history = history.times(cols)  # (one row per heavy key and time)
    if new.height + history.height <= _limit(small_rows):
        return _interesting_times_rows(new, history, tt, jkeys)
    new, history = frame(new), frame(history)
    one = one_time(new, tcols)
    if one is None:
        fresh = new.select(cols).unique()
    else:  # (a step's new updates are often all at one time: the keys suffice)
        known = _distinct_keys(new, keys)
        fresh = known.with_columns(
            pl.lit(v, dtype=new.schema[c]).alias(c) for c, v in zip(tcols, one, strict=True)
        )
    ecols = [f"__e{i}" for i in range(tt.width)]
    rename = dict(zip(tcols, ecols, strict=True))
    lifted = not all_before(history, fresh, tt, tcols, tcols)  # can history lift a new time?
    head = tcols[:-1]
    # a chain per key: in a total order; or one new time per key, which the key's other
    # times lift (if at all) only in the last coordinate (all below it in the others: the
    # common case of a later epoch's loop, whose history holds earlier epochs' iterations)
    if tt.is_total or (
        fresh.get_column(KEY).n_unique() == fresh.height
        and (not lifted or (tt.width > 1 and all_before(history, fresh, tt, head, head)))
    ):
        # the closure adds the times that lift the last coordinate: lub(n, e) is n with the
        # last coordinate max(n, e)
        if one is not None and not lifted:  # one time, and no other time above it
            return [(one, known)]
        closed = fresh
        if lifted:
            last, elast = tcols[-1], ecols[-1]
            later = (
                history.select([*jkeys, last])
                .unique()
                .rename({last: elast})
                .join(fresh, on=jkeys, nulls_equal=True)
                .filter(pl.col(elast) > pl.col(last))
                .select([*jkeys, *head, pl.col(elast).alias(last)])
            )
            closed = pl.concat([fresh, later]).unique()
    else:
        # U: each new time lifted by every time of its key (the new ones included). A lub of
        # a subset holding a new time n is the lub of n lifted by each member, so the closure
        # is U closed under lubs; where a key's U is a chain, it already is
        others = pl.concat([history.select(cols), fresh]) if lifted else fresh
        others = others.unique().rename(rename)
        closed = (
            fresh.join(others, on=jkeys, how="inner", nulls_equal=True)
            .select([*jkeys, *join_exprs(tt, tcols, ecols, tcols)])
            .unique()
        )
        delta = _not_chains(closed, tt, jkeys)
        while delta.height:
            lubs = (
                delta.join(closed.rename(rename), on=jkeys, how="inner", nulls_equal=True)
                .select([*jkeys, *join_exprs(tt, tcols, ecols, tcols)])
                .unique()
            )
            delta = lubs.join(closed, on=cols, how="anti", nulls_equal=True)
            if delta.height:
                closed = pl.concat([closed, delta])
    if closed.height == 0:
        return []
    parts = closed.partition_by(tcols, as_dict=True, include_key=False)
    return [(tuple(int(x) for x in t), f) for t, f in parts.items()]  # type: ignore[union-attr]


#: new and history rows (together) from which :func:`interesting_times` tries its array path
#: (below, the row path costs less than the few dozen NumPy calls), and up to which (above,
#: a first epoch's millions of updates, Polars' parallel columnar path is faster, and its
#: shortcuts hold fewer temporaries: the array path raised the first epoch's peak memory)
ARRAY_TIMES_ROWS = 128
ARRAY_TIMES_MAX = 1 << 17


def _interesting_times_arrays(
    new: Any, history: Any, tt: TimeType, keys: Sequence[str], small_rows: int | None = None
) -> list[tuple[Time, Any]] | None:
    """:func:`interesting_times` in NumPy where each key's closure is a chain it can write at
    once; None elsewhere (the caller takes the general paths).

    That is the case in a product order (one ``Int64`` key column without nulls, which the
    key code copies) when all the new times of a key agree in every coordinate but the last,
    and each history time of the key is at most the new ones there: every lub of a subset
    holding a new time ``n`` is then ``n`` with the last coordinate raised to the largest in
    the subset. The closure is the key's new times and, for each history time above the
    least new one in the last coordinate, the new times' other coordinates with that last
    one. (A later epoch's loop: the history holds earlier epochs and the epoch's other
    iterations.) The keys of each time come sorted by code."""
    if not tt.is_product or len(keys) != 1:
        return None
    key, tcols = keys[0], tt.columns()
    got = _key_times(new, key, tcols)
    if got is None:
        return None
    nk, nt = got
    if isinstance(history, IndexedHistory):
        known = history.time_arrays()
    else:
        known = _key_times(history, key, tcols)
    if known is None:
        return None
    hk, ht = known
    if len(nk) == 0:
        return []
    order = np.lexsort([*reversed(nt), nk])  # by key, then time
    nk, nt = nk[order], [t[order] for t in nt]
    starts = run_starts(nk)
    codes = nk[starts]  # each key once, sorted
    run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(nk))))
    head = [t[starts] for t in nt[:-1]]  # each key's new times' other coordinates
    if any(not np.array_equal(t, h[run]) for t, h in zip(nt[:-1], head, strict=True)):
        return None  # (a key's new times differ before the last coordinate)
    least = nt[-1][starts]
    at, ours = _found(codes, hk)  # (a history holds the new keys' updates, and may hold more)
    if any(np.any((t > h[at]) & ours) for t, h in zip(ht[:-1], head, strict=True)):
        return None  # (a history time not below a new one before the last coordinate)
    lifts = ours & (ht[-1] > least[at])
    which = np.concatenate((run, at[lifts]))
    last = np.concatenate((nt[-1], ht[-1][lifts]))
    order = np.lexsort([which, last, *(h[which] for h in reversed(head))])  # by time, then key
    which, last = which[order], last[order]
    columns = [*(h[which] for h in head), last]
    keep = run_starts(*columns, which)  # (a key's time reached twice: once)
    which, columns = which[keep], [c[keep] for c in columns]
    bounds = np.append(run_starts(*columns), len(which))  # (each time's keys)
    out_codes = codes[which]
    times = zip(*(c[bounds[:-1]].tolist() for c in columns), strict=True)
    schema = {KEY: pl.Int64, key: pl.Int64}
    if len(out_codes) <= _limit(small_rows):
        listed = out_codes.tolist()
        return [
            (t, Rows(schema, [(c, c) for c in listed[lo:hi]]))
            for t, lo, hi in zip(times, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
        ]
    keys_frame = pl.DataFrame({KEY: out_codes, key: out_codes}, schema=schema)
    return [
        (t, keys_frame.slice(lo, hi - lo))
        for t, lo, hi in zip(times, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    ]


def _key_times(
    batch: Any, key: str, tcols: Sequence[str]
) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """The ``Int64`` key column (without nulls) and the time columns of a batch as int64
    arrays; None when the key column is not one."""
    if type(batch) is Rows:
        if batch.schema[key] != pl.Int64:
            return None
        rows, n = batch.rows, len(batch.rows)
        try:
            cols = [
                np.fromiter((r[i] for r in rows), dtype=np.int64, count=n)
                for i in [batch.index(c) for c in (key, *tcols)]
            ]
        except TypeError:  # (a null key)
            return None
        return cols[0], cols[1:]
    if not shares_key(batch, [key]):
        return None
    return batch.get_column(key).to_numpy(), [batch.get_column(c).to_numpy() for c in tcols]


def _distinct_keys(batch: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The distinct ``(KEY, *keys)`` rows of ``batch``, sorted by ``KEY``: of the key code
    alone where it is a copy of the one key column (one column, several times cheaper to
    make unique, and at once when it comes sorted)."""
    if shares_key(batch, keys):
        codes = batch.get_column(KEY).unique().sort()
        return pl.DataFrame([codes, codes.alias(keys[0])])
    cols = [KEY, *keys]
    if keys and batch.get_column(KEY).flags["SORTED_ASC"]:
        # sorted by the code: a key's rows are one run, and the runs' heads are the keys,
        # unless codes collide (a run then holds several keys: made unique instead)
        head = pl.col(KEY).ne_missing(pl.col(KEY).shift(1))
        moved = pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys])
        probe = batch.select(head.alias("head"), (moved & ~head).alias("clash"))
        if not probe.get_column("clash").any():
            heads = batch.select(cols).filter(probe.get_column("head"))
            return heads.with_columns(heads.get_column(KEY).set_sorted())
    return batch.select(cols).unique().sort(KEY)


def _by_key(batch: pl.DataFrame, keys: Sequence[str]) -> tuple[list[str], list[pl.Expr]]:
    """What to group ``batch`` by for one group per key, and the key columns to carry:
    the key code alone where it is a copy of the one key column (a group-by of one column
    is several times cheaper than of two), else the code and the key columns."""
    if shares_key(batch, keys):
        return [KEY], [pl.col(keys[0]).first()]
    return [KEY, *keys], []


def _not_chains(times: pl.DataFrame, tt: TimeType, jkeys: list[str]) -> pl.DataFrame:
    """The rows of ``times`` (``jkeys, __t*``) of the keys whose times are not a chain (not
    totally ordered): sorted lexicographically (a linear extension of the order), a key's
    times are a chain exactly when each is ``<=`` the next."""
    tcols = tt.columns()
    prev = [f"__p{i}" for i in range(tt.width)]
    ordered = times.sort([*jkeys, *tcols])
    same = pl.all_horizontal([pl.col(k).eq_missing(pl.col(k).shift(1)) for k in jkeys])
    shifted = [pl.col(c).shift(1).alias(p) for c, p in zip(tcols, prev, strict=True)]
    broken = (
        ordered.with_columns(shifted)
        .filter(same & ~le_expr(tt, prev, tcols))
        .select(jkeys)
        .unique()
    )
    if broken.height == 0:
        return times.clear()
    return times.join(broken, on=jkeys, how="semi", nulls_equal=True)


def _interesting_times_rows(
    new: Any, history: Any, tt: TimeType, jkeys: list[str]
) -> list[tuple[Time, Any]]:
    """:func:`interesting_times` row by row, for a small step: each key's new times lifted by
    its times, then closed under lubs one lifted time at a time."""
    tcols = tt.columns()
    nk = len(jkeys)
    fresh: dict[tuple[Any, ...], set[Time]] = {}
    for row in iter_rows(new, [*jkeys, *tcols]):
        fresh.setdefault(row[:nk], set()).add(row[nk:])
    others: dict[tuple[Any, ...], set[Time]] = {}
    if history.height:
        for row in iter_rows(history, [*jkeys, *tcols]):
            if row[:nk] in fresh:
                others.setdefault(row[:nk], set()).add(row[nk:])
    lub, le = tt.join, tt.less_equal
    by_time: dict[Time, list[tuple[Any, ...]]] = {}
    for key, times in fresh.items():
        if len(times) == 1 and key not in others:  # (one new time, nothing to lift it)
            by_time.setdefault(next(iter(times)), []).append(key)
            continue
        known = others.get(key, set()) | times
        closed = {lub(n, e) for n in times for e in known}  # U, as the columnar path
        ordered = sorted(closed)
        if not all(le(a, b) for a, b in pairwise(ordered)):
            # the lubs of U's nonempty subsets, adding one member of U at a time: the member
            # and its lubs with what is closed so far (a set closed under lubs stays so), or
            # nothing where it is one of those lubs already. Each member is paired once with
            # the set, not each time found with all of it (several milliseconds for a key of
            # a nested loop, whose lifts move two coordinates)
            closed = set()
            for g in ordered:
                if g not in closed:
                    closed |= {lub(g, c) for c in closed}
                    closed.add(g)
        for t in closed:
            by_time.setdefault(t, []).append(key)
    schema = {c: new.schema[c] for c in jkeys}
    return [(t, Rows(schema, rows)) for t, rows in by_time.items()]


def minmax_unchanged(
    spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType, small_rows: int | None = None
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
    skipped insertion.) Returning fewer keys is always sound: the skip is not tried where it
    would find few (:data:`SKIP_TRY_ROWS`).
    """
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    if not tt.is_product or out_history.height == 0:
        return Rows({c: new.schema[c] for c in jkeys}, [])
    if new.height + out_history.height <= _limit(small_rows):
        return _minmax_unchanged_rows(spec, new, out_history, tt)
    if new.height >= SKIP_TRY_ROWS and new.height > SKIP_TRY_RATIO * out_history.height:
        return _hold(frame(new).select(jkeys).clear(), small_rows)
    new, out_history = frame(new), frame(out_history)
    keep = _minmax_unchanged_arrays(spec, new, out_history, tt)
    if keep is not None:
        return _hold(keep, small_rows)
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
    return _hold(ok.filter(cond).select(jkeys), small_rows)


def distinct_unchanged(
    spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType, small_rows: int | None = None
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
    if new.height + out_history.height <= _limit(small_rows):
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
    return _hold(ok.select(jkeys), small_rows)


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


def _minmax_unchanged_rows(spec: ReduceSpec, new: Any, out_history: Any, tt: TimeType) -> Rows:
    """:func:`minmax_unchanged` row by row (the same conditions, nulls as the columnar path
    treats them)."""
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
        if key not in kept and _unchanged_at_each_time(rows, out_k.get(key, ()), index, nmin):
            keep.append(key)
    return Rows({c: new.schema[c] for c in jkeys}, keep)


#: :func:`_unchanged_at_each_time` looks at most at this many times of a key
EXACT_TIMES = 64


def _unchanged_at_each_time(
    new: Sequence[tuple[Any, ...]], out: Sequence[tuple[Any, ...]], index: Sequence[int], nmin: int
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
    :data:`EXACT_TIMES` of them). There the output must be one row of multiplicity 1 without a null
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
    if size > EXACT_TIMES:
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


def time_queries(
    pending: dict[Time, list[Any]], tt: TimeType, small_rows: int | None = None
) -> Any:
    """``(KEY, keys, __t*)`` rows, one per distinct pending ``(key, time)``. (Each frame
    holds distinct keys, as :func:`interesting_times` gives them: only the keys of a time
    pending in several frames are made unique.)"""
    frames = [f for fs in pending.values() for f in fs]
    if sum(f.height for f in frames) <= _limit(small_rows):
        rows = {
            (*key, *t)
            for t, fs in pending.items()
            for f in fs
            for key in (f.rows if type(f) is Rows else f.iter_rows())
        }
        schema = {**frames[0].schema, **{c: pl.Int64 for c in tt.columns()}}
        return Rows(schema, list(rows))
    parts = []
    for t, frames in pending.items():
        frames = [frame(f) for f in frames]
        keys = pl.concat(frames) if len(frames) > 1 else frames[0]
        if len(frames) > 1:
            keys = keys.unique()
        parts.append(
            keys.with_columns(
                [pl.lit(v, dtype=pl.Int64).alias(c) for c, v in zip(tt.columns(), t, strict=True)]
            )
        )
    return pl.concat(parts) if len(parts) > 1 else parts[0]


def reduce_prepare(spec: ReduceSpec, batch: Any, tt: TimeType) -> Any:
    """Shape an input batch for the reduce's input arrangement."""
    if type(batch) is Rows:
        if spec.kind != "agg_weights":
            return batch.project([*spec.keys, *spec.values, *tt.columns(), DIFF])
        g = batch.getter([*spec.keys, *tt.columns(), DIFF])
        d = batch.index(DIFF)
        wi = [batch.index(w[4:]) for w in spec.weights]
        schema = {n: batch.schema[n] for n in [*spec.keys, *tt.columns(), DIFF]}
        schema.update({w: batch.schema[w[4:]] for w in spec.weights})
        return Rows(
            schema,
            [(*g(r), *[None if r[i] is None else r[i] * r[d] for i in wi]) for r in batch.rows],
        )
    if spec.kind == "agg_weights":
        ws = [(pl.col(w[4:]) * pl.col(DIFF)).alias(w) for w in spec.weights]
        return batch.select([*spec.keys, *tt.columns(), DIFF, *ws])
    return batch.select([*spec.keys, *spec.values, *tt.columns(), DIFF])


def reduce_evaluate(
    spec: ReduceSpec,
    queries: pl.DataFrame,
    history: pl.DataFrame,
    out_history: pl.DataFrame,
    tt: TimeType,
    small_rows: int | None = None,
) -> pl.DataFrame:
    """Corrections to the output at the queried ``(key, time)`` pairs:
    rows ``KEY, keys, outputs, __t*, __diff``. Small inputs (``small_rows``, default
    :data:`SMALL_REDUCE_ROWS`) take the row-by-row path when it applies."""
    if queries.height + history.height + out_history.height <= _limit(
        small_rows
    ) and _rows_path_applies(spec, history):
        rows = history.row_tuples() if isinstance(history, IndexedHistory) else history
        return _evaluate_rows(spec, queries, rows, out_history, tt)
    queries, history, out_history = frame(queries), frame(history), frame(out_history)
    if history.height <= EVALUATE_SLICE_ROWS or queries.height == 0:
        return _hold(_evaluate_columnar(spec, queries, history, out_history, tt), small_rows)
    parts = [
        _evaluate_columnar(spec, q, h, o, tt)
        for q, h, o in _key_slices(queries, history, out_history)
    ]
    result = pl.concat([p for p in parts if p.height] or parts[:1], how="vertical_relaxed")
    return _hold(result, small_rows)


#: an evaluation reading more input history than this many rows is done in slices of keys
#: of about this much history each: the same result (keys are independent), with the
#: intermediate frames (the history paired with the queries, then summed) of one slice alive
#: at a time, not of all keys at once (the first epoch of a large graph queries every key)
EVALUATE_SLICE_ROWS = 2_000_000


def _rows_of(history: Any) -> Any:
    """The updates themselves, of a history read through indexes or not."""
    return history.rows() if isinstance(history, IndexedHistory) else history


def _key_slices(
    queries: pl.DataFrame, history: Any, out_history: pl.DataFrame
) -> Iterator[tuple[pl.DataFrame, Any, pl.DataFrame]]:
    """The three cut into ranges of key code holding about :data:`EVALUATE_SLICE_ROWS`
    history rows each, one range at a time. A history read through indexes is cut into
    histories read through the same indexes (its heavy keys' rows are not gathered)."""
    if isinstance(history, IndexedHistory):
        codes, weights = history.key_weights()
        order = np.argsort(codes, kind="stable")
        codes, reach = codes[order], np.cumsum(weights[order])
        bounds = np.unique(codes[balanced_cuts(reach, EVALUATE_SLICE_ROWS)])
    else:
        codes = history.get_column(KEY).to_numpy()
        n = -(-len(codes) // EVALUATE_SLICE_ROWS)
        bounds = np.unique(np.quantile(codes, np.arange(1, n) / n, method="lower"))

    def slice_ids(frame: pl.DataFrame) -> np.ndarray:
        return np.searchsorted(bounds, frame.get_column(KEY).to_numpy(), side="right")

    ids = [slice_ids(queries), slice_ids(out_history)]
    hids = None if isinstance(history, IndexedHistory) else slice_ids(history)
    for i in range(len(bounds) + 1):
        q = queries.filter(pl.Series(ids[0] == i))
        if q.height:
            h = history.sliced(bounds, i) if hids is None else history.filter(pl.Series(hids == i))
            yield q, h, out_history.filter(pl.Series(ids[1] == i))


def _evaluate_columnar(
    spec: ReduceSpec,
    queries: pl.DataFrame,
    history: pl.DataFrame,
    out_history: pl.DataFrame,
    tt: TimeType,
) -> pl.DataFrame:
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    qcols = time_columns(tt, QPREFIX)
    outs = list(spec.outputs)
    q_all = queries.rename(dict(zip(tcols, qcols, strict=True)))
    out_history = out_history.select([*jkeys, *outs, *tcols, DIFF])
    current: pl.DataFrame | None = None
    if q_all.get_column(KEY).n_unique() == q_all.height:
        ranked, rounds = q_all, 1  # one query per key: a single round
        current = _accumulate_by_key(out_history, q_all, tt, jkeys, outs)
        if current is None:
            current = accumulate(out_history, q_all, tt, jkeys, outs)
        desired = _extreme_by_bound(spec, q_all, history, current, tt)
    else:
        ranked = _ranked(q_all, qcols)
        rounds = int(ranked.get_column("__rank").max() or 0) + 1  # type: ignore[arg-type]
        desired = None
    if desired is None:
        history = frame(_rows_of(history))
        acc = accumulate(history, q_all, tt, jkeys, spec.values, spec.weights)
        desired = GROUP_FUNCTIONS[spec.kind](spec, acc, jkeys, qcols)
    group = [*jkeys, *qcols, *outs]
    emitted: list[pl.DataFrame] = []
    for r in range(rounds):
        q = q_all if rounds == 1 else ranked.filter(pl.col("__rank") == r).drop("__rank")
        if current is None or r:
            current = accumulate(out_history, q, tt, jkeys, outs)
        want = (
            desired
            if rounds == 1
            else desired.join(q, on=[*jkeys, *qcols], how="semi", nulls_equal=True)
        )
        change = _change_rows(want, current, group, [*jkeys, *outs, *qcols], tcols)
        if change is None:
            if current.height:
                summed = (
                    pl.concat([want, current.with_columns(-pl.col(DIFF))], how="vertical_relaxed")
                    .group_by(group)
                    .agg(pl.col(DIFF).sum())
                )
            else:  # (no output yet, as in a first epoch: the desired rows, one per group)
                summed = want.select([*group, DIFF])
            change = (
                summed.filter(pl.col(DIFF) != 0)
                .rename(dict(zip(qcols, tcols, strict=True)))
                .select([*jkeys, *outs, *tcols, DIFF])
            )
        if change.height:
            emitted.append(change)
            if r + 1 < rounds:
                out_history = pl.concat([out_history, change], how="vertical_relaxed")
    if not emitted:
        return out_history.clear()
    return pl.concat(emitted, how="vertical_relaxed")


#: output changes of at most this many desired and current rows are summed in Python
CHANGE_ROWS = 2048


def _change_rows(
    want: pl.DataFrame, current: pl.DataFrame, group: list[str], names: list[str], tcols: list[str]
) -> pl.DataFrame | None:
    """The output change ``want - current`` (both rows ``group`` and a diff), its nonzero
    rows as ``names`` (``group`` reordered: keys, outputs, query times) and a diff, the query
    times named ``tcols``: summed in a dict when the rows are few and both have the same
    types (a small update's evaluation: a Polars concat, group-by and select cost a few
    hundred microseconds each, whatever the size). None where it does not apply: many
    rows, other types (left to Polars' casts), float columns."""
    if want.height + current.height > CHANGE_ROWS:
        return None
    types = [want.schema[c] for c in group]
    if current.height and [current.schema[c] for c in group] != types:
        return None  # (a relaxed concat would cast: left to Polars)
    if any(t.is_float() for t in types):
        return None  # (NaN is not equal to itself in a dict, but one group in Polars)
    sums: dict[tuple[Any, ...], int] = {}
    cols = [*group, DIFF]
    for r in iter_rows(want, cols):
        sums[r[:-1]] = sums.get(r[:-1], 0) + r[-1]
    for r in iter_rows(current, cols):
        sums[r[:-1]] = sums.get(r[:-1], 0) - r[-1]
    at = [group.index(n) for n in names]
    rows = [(*(k[i] for i in at), d) for k, d in sums.items() if d]
    out = [*names[: len(names) - len(tcols)], *tcols]  # (the query times renamed)
    schema: dict[str, Any] = {o: types[i] for o, i in zip(out, at, strict=True)}
    schema[DIFF] = pl.Int64
    return pl.DataFrame(rows, schema=schema, orient="row")


#: the bounded evaluation of a min or max (:func:`_extreme_by_bound`) is tried on histories
#: of at least this many rows, and taken when at most BOUNDED_SHARE of them are below the
#: bounds (else grouping every row costs about as much)
BOUNDED_ROWS = 50_000
BOUNDED_SHARE = 0.25

#: integer types whose values are exact as int64 (not UInt64)
_SIGNED_SAFE = frozenset({pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32})


def _extreme_by_bound(
    spec: ReduceSpec, q_all: pl.DataFrame, history: Any, current: pl.DataFrame, tt: TimeType
) -> pl.DataFrame | None:
    """The desired output of a single ``min`` (``max``) at one query per key, reading the
    values of each key's history only up to (down to) a bound; None where it does not apply.

    A key's min at a query time ``q`` is the least value whose multiplicity accumulated at
    ``q`` is positive, and the group has an output row when its count (every multiplicity
    summed) is positive. The bound is the key's current output at ``q`` (``current``, the
    output accumulated there, when it is one row of multiplicity 1): only the history rows at
    times ``<= q`` with values ``<=`` the bound are summed by value; the count is a sum of
    diffs per query (no grouping). If a value up to the bound has a positive multiplicity, the
    least such is the min (every smaller value's rows were summed). Otherwise the min is above
    the bound, and those queries are evaluated by the general path. In label propagation a
    node's new proposals rarely move its label, and the rows at or below it are a few of its
    history. From an :class:`~ddflow.kernels.local_index.IndexedHistory` the rows above the
    bounds are not even read (the counts come from the indexes' summaries).

    It applies to an aggregate of one ``min`` or ``max`` of an integer column without nulls,
    keyed by one ``Int64`` column without nulls (so that the key code is the key), in a
    product order."""
    if (
        spec.kind != "agg"
        or len(spec.aggs) != 1
        or len(spec.keys) != 1
        or not tt.is_product
        or q_all.height == 0
    ):
        return None
    ((name, kind, c),) = spec.aggs
    key = spec.keys[0]
    indexed = isinstance(history, IndexedHistory)
    schema = history.schema
    if (
        kind not in ("min", "max")
        or c is None
        or spec.values != (c,)
        or schema[c] not in _SIGNED_SAFE
        or schema[key] != pl.Int64
    ):
        return None
    if not indexed and history.height < BOUNDED_ROWS:
        return None
    frames = [history] if not indexed else [history.light, *(b for b, _, _ in history.indexed)]
    for f in frames:
        if f.get_column(key).null_count() or f.get_column(c).null_count():
            return None
        if kind == "max" and f.height and f.get_column(c).min() == np.iinfo(np.int64).min:
            return None  # (its negation below would overflow)
    tcols, qcols = tt.columns(), time_columns(tt, QPREFIX)
    qk = q_all.get_column(KEY).to_numpy()
    qt = [q_all.get_column(qc).to_numpy() for qc in qcols]
    if len(qk) > 1 and not bool(np.all(qk[1:] > qk[:-1])):
        order = np.argsort(qk, kind="stable")
        qk, qt = qk[order], [t[order] for t in qt]
    # the bound of each query: the current output, where it is one row of multiplicity 1
    sign = 1 if kind == "min" else -1
    bounded, bound = _single_rows(current, qk, name, sign)
    if indexed:
        count, (pos, value, diff) = indexed_sums(history, qk, qt, c, bound, bounded, sign)
    else:
        pos, value, diff = _query_rows(history, qk, qt, c, sign, tcols)
        if len(diff) and max(-int(diff.min()), int(diff.max())) * len(diff) >= 2**53:
            return None  # (float sums below would not be exact)
        count = np.bincount(pos, weights=diff, minlength=len(qk))
        below = ~bounded[pos] | (value <= bound[pos])
        if np.count_nonzero(below) > BOUNDED_SHARE * len(below):
            return None
        pos, value, diff = pos[below], value[below], diff[below]
    found, extreme = _least_positive(pos, value, diff, len(qk))
    # a bounded query without a positive value up to its bound: the min is above it, and
    # its key's rows are read again, all of them up to the query time
    again = np.flatnonzero(bounded & ~found)
    if len(again):
        ak, at = qk[again], [t[again] for t in qt]
        unbounded, zeros = np.zeros(len(again), dtype=bool), np.zeros(len(again), dtype=np.int64)
        if indexed:
            _, (pos, value, diff) = indexed_sums(
                history.subset(ak), ak, at, c, zeros, unbounded, sign
            )
        else:
            pos, value, diff = _query_rows(history, ak, at, c, sign, tcols)
        found[again], extreme[again] = _least_positive(pos, value, diff, len(again))
    present = found & (count > 0)
    codes = qk[present]
    return pl.DataFrame(
        [
            pl.Series(KEY, codes, dtype=pl.Int64),
            pl.Series(key, codes, dtype=pl.Int64),
            *(pl.Series(qc, t[present], dtype=pl.Int64) for qc, t in zip(qcols, qt, strict=True)),
            pl.Series(name, extreme[present] * sign, dtype=pl.Int64).cast(spec.out_types[name]),
            pl.Series(DIFF, np.ones(len(codes), dtype=np.int64), dtype=pl.Int64),
        ]
    )


def _query_rows(
    history: pl.DataFrame,
    qk: np.ndarray,
    qt: Sequence[np.ndarray],
    column: str,
    sign: int,
    tcols: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The history rows at or before their key's query (``qk`` sorted, at times ``qt``): the
    query's position, the value of ``column`` times ``sign``, and the diff."""
    pos, valid = positions(
        qk,
        qt,
        history.get_column(KEY).to_numpy(),
        [history.get_column(tc).to_numpy() for tc in tcols],
    )
    value = history.get_column(column).cast(pl.Int64).to_numpy()[valid] * sign
    return pos, value, history.get_column(DIFF).to_numpy()[valid]


def _single_rows(
    current: pl.DataFrame, qk: np.ndarray, name: str, sign: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each of the query codes ``qk`` (sorted, unique), whether the accumulated output
    ``current`` (one query per key) is one row of multiplicity 1 with a value, and that
    value times ``sign``."""
    bounded = np.zeros(len(qk), dtype=bool)
    bound = np.zeros(len(qk), dtype=np.int64)
    if current.height == 0:
        return bounded, bound
    ck = current.get_column(KEY).to_numpy()
    values = current.get_column(name)
    ok = current.get_column(DIFF).to_numpy() == 1
    if values.null_count():
        ok &= values.is_not_null().to_numpy()
        values = values.fill_null(0)
    v = values.cast(pl.Int64).to_numpy()
    if len(ck) > 1 and not bool(np.all(ck[1:] >= ck[:-1])):
        order = np.argsort(ck, kind="stable")
        ck, v, ok = ck[order], v[order], ok[order]
    # a key's rows are a run: a run one row long, of multiplicity 1 with a value
    starts = run_starts(ck)
    single = starts[np.diff(starts, append=len(ck)) == 1]
    single = single[ok[single]]
    at = np.searchsorted(qk, ck[single])
    bounded[at] = True
    bound[at] = v[single] * sign
    return bounded, bound


def _least_positive(
    pos: np.ndarray, value: np.ndarray, diff: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """For ``n`` queries and rows ``(query position, value, diff)``: whether some value of
    each query sums to a positive multiplicity, and the least such."""
    found = np.zeros(n, dtype=bool)
    extreme = np.zeros(n, dtype=np.int64)
    if len(pos):
        order = np.lexsort((value, pos))
        pos, value, diff = pos[order], value[order], diff[order]
        starts = run_starts(pos, value)
        positive = np.add.reduceat(diff, starts) > 0
        gpos, gval = pos[starts][positive], value[starts][positive]
        if len(gpos):
            first = run_starts(gpos)
            found[gpos[first]] = True
            extreme[gpos[first]] = gval[first]
    return found, extreme


def _accumulate_by_key(
    history: pl.DataFrame,
    queries: pl.DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    values: Sequence[str],
) -> pl.DataFrame | None:
    """:func:`accumulate` (no weights) where each key has one query, keyed by one ``Int64``
    column that the key code copies, with integer values without nulls, in a product order:
    each history row is matched to its key's query by a binary search of the sorted query
    codes, and the rows at or below their query's time are summed by ``(query, values)`` over
    runs of sorted rows (NumPy), instead of a join, a filter and a group-by in Polars. None
    where it does not apply."""
    if (
        not tt.is_product
        or len(keys) != 2
        or history.height == 0
        or queries.height == 0
        or not shares_key(history, keys[1:])
        or not shares_key(queries, keys[1:])
    ):
        return None
    columns = []
    for v in values:
        s = history.get_column(v)
        if not s.dtype.is_integer() or s.null_count():
            return None
        columns.append(s.to_numpy())
    tcols, qcols = tt.columns(), time_columns(tt, QPREFIX)
    qk = queries.get_column(KEY).to_numpy()
    order = np.argsort(qk, kind="stable")
    qk = qk[order]
    qt = [queries.get_column(c).to_numpy()[order] for c in qcols]
    pos, valid = positions(
        qk,
        qt,
        history.get_column(KEY).to_numpy(),
        [history.get_column(c).to_numpy() for c in tcols],
    )
    diff = history.get_column(DIFF).to_numpy()[valid]
    columns = [c[valid] for c in columns]
    by = np.lexsort((*columns[::-1], pos))
    pos, diff, columns = pos[by], diff[by], [c[by] for c in columns]
    if len(pos) == 0:
        return None  # (nothing at or below the queries: accumulate's typed empty frame)
    starts = run_starts(pos, *columns)
    sums = np.add.reduceat(diff, starts)
    live = sums != 0
    starts, sums = starts[live], sums[live]
    at = pos[starts]
    key = pl.Series(keys[0], qk[at], dtype=queries.schema[keys[0]])
    return pl.DataFrame(
        [
            key,
            key.alias(keys[1]).cast(queries.schema[keys[1]]),
            *[pl.Series(c, t[at], dtype=pl.Int64) for c, t in zip(qcols, qt, strict=True)],
            *[
                pl.Series(v, col[starts], dtype=history.schema[v])
                for v, col in zip(values, columns, strict=True)
            ],
            pl.Series(DIFF, sums, dtype=pl.Int64),
        ]
    )


def _ranked(queries: pl.DataFrame, qcols: list[str]) -> pl.DataFrame:
    """Queries sorted by key and time with ``__rank``, the position of each among its key's
    queries (a linear extension of the order within the key). Computed from the runs of the
    sorted keys, not with a window over every key (which costs a group per key)."""
    q = queries.sort([KEY, *qcols])
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    starts = pl.col(KEY) != pl.col(KEY).shift(1)
    first = pl.when(starts.fill_null(True)).then(row).otherwise(None).forward_fill()
    return q.with_columns((row - first).alias("__rank"))


# ---------------------------------------------------------------------- the row-by-row path


def _rows_path_applies(spec: ReduceSpec, history: pl.DataFrame) -> bool:
    """The row path adds, compares and sorts in Python. It takes no float column: a float sum
    depends on the order of its terms, and NaN (and -0.0) compare and group differently in
    Python and Polars, so that floats always take the columnar path (and results never depend
    on batch sizes)."""
    cols = [*spec.keys, *spec.values, *spec.weights]
    return not any(history.schema[c].is_float() for c in cols)


def _evaluate_rows(
    spec: ReduceSpec, queries: Any, history: Any, out_history: Any, tt: TimeType
) -> Any:
    """:func:`reduce_evaluate` row by row: for each key, its queried times in lexicographic
    order (a linear extension of the partial order), each seeing the corrections emitted at
    the earlier ones; the group functions as :data:`GROUP_FUNCTIONS` compute them."""
    jkeys = [KEY, *spec.keys]
    tcols = tt.columns()
    width = tt.width
    nk = len(jkeys)
    nv = len(spec.values)
    outs = list(spec.outputs)

    # key -> [(time, values, diff, weights)]
    inputs: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    at_t, at_v, at_d = nk, nk + width, nk + width + nv  # where each part of a row starts
    weighted = bool(spec.weights)
    for row in iter_rows(history, [*jkeys, *tcols, *spec.values, DIFF, *spec.weights]):
        # (a null weight counts as 0, as sum() takes it)
        weights = tuple(0 if w is None else w for w in row[at_d + 1 :]) if weighted else ()
        key = row[:at_t]
        rows_k = inputs.get(key)
        if rows_k is None:
            inputs[key] = rows_k = []
        rows_k.append((row[at_t:at_v], row[at_v:at_d], row[at_d], weights))
    # key -> [(time, outputs, diff)]
    outputs: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    no = len(outs)
    for row in iter_rows(out_history, [*jkeys, *tcols, *outs, DIFF]):
        outputs.setdefault(row[:nk], []).append(
            (row[nk : nk + width], row[nk + width : nk + width + no], row[-1])
        )
    asked: dict[tuple[Any, ...], set[tuple[int, ...]]] = {}
    for row in iter_rows(queries, [*jkeys, *tcols]):
        asked.setdefault(row[:nk], set()).add(row[nk:])

    group_fn = _ROW_GROUP_FUNCTIONS[spec.kind]
    upto = _rows_up_to(tt)
    emitted: list[tuple[Any, ...]] = []
    for key, times in asked.items():
        history_k = inputs.get(key, ())
        out_k = outputs.setdefault(key, [])
        for q in sorted(times):
            if weighted:
                values: dict[tuple[Any, ...], list[Any]] = {}
                for _, v, d, w in upto(history_k, q):
                    acc = values.get(v)
                    if acc is None:
                        values[v] = [d, *w]
                    else:
                        acc[0] += d
                        for i, x in enumerate(w, 1):
                            acc[i] += x
                group = [(v, acc) for v, acc in values.items() if any(acc)]
            else:  # (a count per value alone: most reduces, and every min/max)
                counts: dict[tuple[Any, ...], int] = {}
                for _, v, d, _ in upto(history_k, q):
                    counts[v] = counts.get(v, 0) + d
                group = [(v, [m]) for v, m in counts.items() if m]
            want: dict[tuple[Any, ...], int] = {}
            if group:
                for o, m in group_fn(spec, key, group):
                    want[o] = want.get(o, 0) + m
            for _, o, d in upto(out_k, q):
                want[o] = want.get(o, 0) - d
            for o, d in want.items():
                if d:
                    emitted.append((*key, *o, *q, d))
                    out_k.append((q, o, d))
    schema: dict[str, Any] = {c: queries.schema[c] for c in jkeys}
    schema.update({n: _out_dtype(spec, n, history) for n in outs})
    schema.update({c: pl.Int64 for c in tcols})
    schema[DIFF] = pl.Int64
    if len(emitted) > local_rows.SMALL_ROWS or not rowable(schema):
        return pl.DataFrame(emitted, schema=schema, orient="row")
    return Rows(schema, emitted)


def _rows_up_to(
    tt: TimeType,
) -> Callable[[Sequence[tuple[Any, ...]], tuple[int, ...]], list[tuple[Any, ...]]]:
    """``upto(rows, q)``: the rows (time first) at times ``<= q``; for a product order one
    comprehension comparing coordinates, not a call of ``less_equal`` per row (the row path
    of a small update reads a few hundred rows per key)."""
    if not tt.is_product:
        le = tt.less_equal
        return lambda rows, q: [r for r in rows if le(r[0], q)]
    if tt.width == 1:
        return lambda rows, q: [r for r in rows if r[0][0] <= q[0]]
    if tt.width == 2:

        def upto2(rows: Sequence[tuple[Any, ...]], q: tuple[int, ...]) -> list[tuple[Any, ...]]:
            q0, q1 = q
            return [r for r in rows if r[0][0] <= q0 and r[0][1] <= q1]

        return upto2
    return lambda rows, q: [r for r in rows if all(map(_le, r[0], q))]


def _out_dtype(spec: ReduceSpec, name: str, history: pl.DataFrame) -> Any:
    if name in spec.out_types:
        return spec.out_types[name]
    return history.schema[name]  # distinct's and threshold's "outputs" are its columns


def _cast(value: Any, dtype: Any) -> Any:
    """A Python value as Polars' ``cast`` to ``dtype`` gives it (ints and bools here)."""
    if value is None:
        return None
    if dtype is not None and pl.datatypes.is_polars_dtype(dtype):
        if dtype.is_float():
            return float(value)
        if dtype.is_integer() and not isinstance(value, bool):
            return int(value)
    return value


def _present(group: Sequence[tuple[tuple[Any, ...], list[Any]]], i: int) -> list[Any]:
    """The non-null values of column ``i`` whose multiplicity, over the rows holding them, is
    positive."""
    per_value: dict[Any, int] = {}
    for v, acc in group:
        x = v[i]
        if x is not None:
            per_value[x] = per_value.get(x, 0) + acc[0]
    return [x for x, m in per_value.items() if m > 0]


def _rows_agg_weights(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    ((_, acc),) = group  # no value columns: one accumulated row
    count = acc[0]
    if count <= 0:
        return []
    weights = dict(zip(spec.weights, acc[1:], strict=True))
    row = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            value: Any = count
        elif kind == "sum":
            value = weights[f"__w_{c}"]
        else:
            value = weights[f"__w_{c}"] / count
        row.append(_cast(value, spec.out_types[name]))
    return [(tuple(row), 1)]


def _rows_agg(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    count = sum(acc[0] for _, acc in group)
    if count <= 0:
        return []
    index = {c: i for i, c in enumerate(spec.values)}
    row = []
    for name, kind, c in spec.aggs:
        if kind == "count":
            value: Any = count
        elif kind in ("sum", "mean"):
            i = index[c]  # type: ignore[index]
            total = sum(v[i] * acc[0] for v, acc in group if v[i] is not None)
            value = total if kind == "sum" else total / count
        else:
            present = _present(group, index[c])  # type: ignore[index]
            value = (min if kind == "min" else max)(present) if present else None
        row.append(_cast(value, spec.out_types[name]))
    return [(tuple(row), 1)]


def _rows_distinct(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    return [(v, 1) for v, acc in group if acc[0] > 0]


def _rows_threshold(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    assert spec.fn is not None
    return [(v, int(spec.fn(acc[0]))) for v, acc in group]


def _rows_reduce(spec: ReduceSpec, key: Any, group: Any) -> list[tuple[Any, int]]:
    fn = spec.fn
    assert fn is not None
    rows = sorted(
        ((v, acc[0]) for v, acc in group if acc[0] > 0),
        key=lambda vm: tuple((x is not None, x) for x in vm[0]),
    )
    if not rows:
        return []
    user_key = key[1:]
    out = []
    for o in fn(user_key if len(user_key) != 1 else user_key[0], rows):
        o_t = tuple(o) if isinstance(o, (tuple, list)) else (o,)
        if len(o_t) != len(spec.outputs):
            raise ValueError(
                f"reduce function returned {o_t!r}: expected {len(spec.outputs)} values "
                f"({', '.join(spec.outputs)})"
            )
        out.append(
            (tuple(_cast(x, spec.out_types[n]) for x, n in zip(o_t, spec.outputs, strict=True)), 1)
        )
    return out


# ---------------------------------------------------------------------- group functions
# Each takes accumulated rows (keys, __q*, values, __diff, weights) and returns the desired
# output rows (keys, __q*, outputs, __diff).


def _one() -> pl.Expr:
    return pl.lit(1, dtype=pl.Int64).alias(DIFF)


def _agg_weights(
    spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]
) -> pl.DataFrame:
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
    if len(spec.values) == 1:
        return _agg_one_value(spec, acc, group)
    linear = [pl.col(DIFF).sum().alias("__count")]
    for name, kind, c in spec.aggs:
        if kind in ("count", "sum", "mean"):
            linear.append(_linear(kind, c).cast(spec.out_types[name]).alias(name))
    out = acc.group_by(group).agg(linear).filter(pl.col("__count") > 0)
    for name, kind, c in spec.aggs:
        if kind in ("min", "max"):
            present = acc.group_by([*group, c]).agg(pl.col(DIFF).sum()).filter(pl.col(DIFF) > 0)
            pick = pl.col(c).min() if kind == "min" else pl.col(c).max()
            ext = present.group_by(group).agg(pick.cast(spec.out_types[name]).alias(name))
            out = out.join(ext, on=group, how="left", nulls_equal=True)
    return out.select([*group, *spec.outputs, _one()])


def _linear(kind: str, c: str | None) -> pl.Expr:
    """A ``count``, ``sum`` or ``mean`` over accumulated rows (each row's value times its
    multiplicity)."""
    count = pl.col(DIFF).sum()
    if kind == "count":
        return count
    total = (pl.col(c) * pl.col(DIFF)).sum()
    return total if kind == "sum" else total / count


def _agg_one_value(spec: ReduceSpec, acc: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    """:func:`_agg` when the aggregates read one column: ``acc`` (an accumulation) holds one
    row per group and value, so a value's multiplicity is its row's and every aggregate comes
    from one group-by (``min``/``max`` over the rows of positive multiplicity)."""
    (c,) = spec.values
    positive = pl.col(c).filter(pl.col(DIFF) > 0)
    exprs = [pl.col(DIFF).sum().alias("__count")]
    for name, kind, _ in spec.aggs:
        if kind in ("min", "max"):
            e = positive.min() if kind == "min" else positive.max()
        else:
            e = _linear(kind, c)
        exprs.append(e.cast(spec.out_types[name]).alias(name))
    out = acc.group_by(group).agg(exprs).filter(pl.col("__count") > 0)
    return out.select([*group, *spec.outputs, _one()])


def _distinct(
    spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]
) -> pl.DataFrame:
    return acc.filter(pl.col(DIFF) > 0).select([*keys, *qcols, _one()])


def _threshold(
    spec: ReduceSpec, acc: pl.DataFrame, keys: list[str], qcols: list[str]
) -> pl.DataFrame:
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
        user_key = current[1 : 1 + nkey]
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
    schema = {
        **{c: acc.schema[c] for c in gcols},
        **{n: spec.out_types[n] for n in spec.outputs},
        DIFF: pl.Int64,
    }
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame.group_by([*gcols, *spec.outputs]).agg(pl.col(DIFF).sum())


GROUP_FUNCTIONS = {
    "agg_weights": _agg_weights,
    "agg": _agg,
    "distinct": _distinct,
    "threshold": _threshold,
    "reduce": _reduce,
}

_ROW_GROUP_FUNCTIONS = {
    "agg_weights": _rows_agg_weights,
    "agg": _rows_agg,
    "distinct": _rows_distinct,
    "threshold": _rows_threshold,
    "reduce": _rows_reduce,
}
