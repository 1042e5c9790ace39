"""Interesting times: where a reduce's output may change when new input updates arrive.

When new updates of a key arrive at times ``N``, and ``E`` are the key's other input times, the
accumulation of the key's input can change only at the least upper bounds of the subsets of
``N ∪ E`` that contain an element of ``N``. :func:`interesting_times` gives that closure for
every key at once, grouped by time: for each time, the distinct ``(KEY, keys)`` of the keys
interested in it. Its paths (row by row for small steps, NumPy where each key's closure is a
chain it can write at once, Polars otherwise; which, the settings' ``reduce`` say) give the
same ``(time, key)`` pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import polars as pl

from ddflow.differential.batch import KEY
from ddflow.runtime.local.columnar import (
    all_before,
    greatest_times,
    join_exprs,
    le_expr,
    one_time,
    run_starts,
    shares_key,
    time_bounds,
)
from ddflow.runtime.local.index import IndexedHistory, _found
from ddflow.runtime.local.reduce.small_steps import _limit
from ddflow.runtime.local.rows import Rows, frame, iter_rows
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import Time, TimeType

__all__ = ["interesting_times"]


def interesting_times(
    new: pl.DataFrame,
    history: pl.DataFrame,
    tt: TimeType,
    keys: Sequence[str],
    settings: LocalSettings,
) -> list[tuple[Time, pl.DataFrame]]:
    """Least upper bounds of subsets of each key's times that contain a new time.

    New and history updates numbering from ``settings.reduce.array_times_rows`` to
    ``array_times_max`` (together) try the NumPy path (below, the row path costs less than
    its few dozen NumPy calls; above, Polars' parallel columnar path is faster and holds
    fewer temporaries); at most ``reduce.small_rows`` take the row path."""
    jkeys = [KEY, *keys]
    tcols = tt.columns()
    cols = [*jkeys, *tcols]
    # (an indexed history's times are its summaries' and light rows, whatever its height)
    rows = new.height + (
        history.light.height if isinstance(history, IndexedHistory) else history.height
    )
    if settings.reduce.array_times_rows <= rows <= settings.reduce.array_times_max:
        found = _interesting_times_arrays(new, history, tt, keys, settings)
        if found is not None:
            return found
    if isinstance(history, IndexedHistory):
        history = history.times(cols)  # (one row per heavy key and time)
    if new.height + history.height <= _limit(settings):
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


def _interesting_times_arrays(
    new: Any, history: Any, tt: TimeType, keys: Sequence[str], settings: LocalSettings
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
    # (a history holds the new keys' updates, and may hold more)
    at, ours = _found(codes, hk, settings.index.run_search_rows)
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
    if len(out_codes) <= _limit(settings):
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


def trace_before(parts: Sequence[Any], batch: Any, tt: TimeType) -> bool:
    """Is every time of the trace ``parts`` ``<=`` every time of ``batch``? (The cheap
    sufficient test of :func:`all_before`, coordinate by coordinate in a product order,
    with each part's greatest times remembered: a part never changes.) Then no update
    of the trace lifts a time of ``batch`` to a later one, and a reduce need not read its
    history for the interesting times."""
    if not tt.is_product or batch.height == 0:
        return False
    tcols = tt.columns()
    least = time_bounds(batch, tcols, least=True)
    if least is None:
        return False
    for part in parts:
        greatest = greatest_times(part, tcols)
        if greatest is not None and any(g > q for g, q in zip(greatest, least, strict=True)):
            return False
    return True
