"""Compiled kernels: a reduce's per-key work over columnar arrays, compiled with Numba.

A reduce's work in a step is per key: the key's input updates ``(time, values, diff)``, its
output updates ``(time, outputs, diff)`` and the times asked of it. In Python that work is
tuples and dicts (a few microseconds an update); in Polars, a few dozen calls of fixed cost
whatever the size. Here it is loops over int64 arrays sorted by key, compiled once (Numba,
``cache=True``: the machine code is kept beside the module and reused by later processes):

* :func:`evaluate_extremes`: for each queried ``(key, time)``, in a linear extension of the
  order within a key (lexicographic), the desired output ``f(input accumulated at time)`` minus
  the output accumulated there (with the corrections of the key's earlier queries), for an
  aggregate of ``min``, ``max`` and ``count`` over integer columns:
  ``count = sum of diffs``, the group has a row when ``count > 0``, and a min (max) is the
  least (greatest) value whose multiplicity accumulated at the time is positive;
* :func:`extremes_unchanged`: the keys whose new updates cannot change a min/max aggregate's
  output at any time (the tests of :mod:`~ddflow.runtime.local.reduce.skips`).

Both take a key as one ``int64`` (the reduce's key code where it is the one ``Int64`` key
column, so that keys never collide) and times as ``int64`` coordinates in a product order.
Integer arithmetic is exact, so results never depend on how updates are batched; floats and
nulls are not taken here (the columnar path keeps Polars' semantics for them).

Importing this module imports Numba (the runtime imports it when a reduce first needs it, not
when ddflow is imported); each kernel is compiled on its first call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["COUNT", "MAX", "MIN", "evaluate_extremes", "extremes_unchanged"]

#: the aggregates :func:`evaluate_extremes` computes, by code
MIN, MAX, COUNT = 0, 1, 2

#: compiled once, the machine code cached beside the module for later processes
_jit = njit(cache=True, nogil=True)


# ---------------------------------------------------------------------- helpers (compiled)


@_jit
def _le(a: np.ndarray, i: int, b: np.ndarray, j: int) -> bool:
    """Is time ``a[i]`` at most time ``b[j]`` in the product order?"""
    for c in range(a.shape[1]):  # noqa: SIM110  (a loop: compiled code has no generators)
        if a[i, c] > b[j, c]:
            return False
    return True


@_jit
def _lex_order(cols: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``idx`` ordered lexicographically by the rows ``cols[idx]`` (stable sorts from the
    last column to the first)."""
    order = idx.copy()
    for c in range(cols.shape[1] - 1, -1, -1):
        order = order[np.argsort(cols[order, c], kind="mergesort")]
    return order


@_jit
def _same_row(cols: np.ndarray, i: int, j: int) -> bool:
    for c in range(cols.shape[1]):  # noqa: SIM110
        if cols[i, c] != cols[j, c]:
            return False
    return True


@_jit
def _grow(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` (1-d) with room for at least ``n`` rows, its first rows kept."""
    if n <= a.shape[0]:
        return a
    b = np.empty(max(n, 2 * a.shape[0]), a.dtype)
    b[: a.shape[0]] = a
    return b


@_jit
def _grow2(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` (2-d) with room for at least ``n`` rows, its first rows kept."""
    if n <= a.shape[0]:
        return a
    b = np.empty((max(n, 2 * a.shape[0]), a.shape[1]), a.dtype)
    b[: a.shape[0]] = a
    return b


@_jit
def _run_end(keys: np.ndarray, start: int, key: int) -> int:
    end = start
    while end < keys.shape[0] and keys[end] == key:
        end += 1
    return end


@_jit
def _extreme(
    hv: np.ndarray, col: int, hd: np.ndarray, order: np.ndarray, mask: np.ndarray, least: bool
) -> int:
    """The least (``least``) or greatest value of column ``col`` whose diffs, over the rows
    at or below the query (``mask``), sum to a positive multiplicity. ``order`` holds the
    key's rows sorted by that column, so the walk stops at the first such value (a min
    rarely lies deep in a key's history); the caller knows there is one (the count is
    positive)."""
    n = order.shape[0]
    k = 0
    while k < n:
        v = hv[order[k] if least else order[n - 1 - k], col]
        m = 0
        while k < n:
            r = order[k] if least else order[n - 1 - k]
            if hv[r, col] != v:
                break
            if mask[r]:
                m += hd[r]
            k += 1
        if m > 0:
            return v
    return hv[order[0], col]  # (unreachable when the count is positive)


# ---------------------------------------------------------------------- evaluation


@_jit
def _evaluate(
    qk: np.ndarray,
    qt: np.ndarray,
    hk: np.ndarray,
    ht: np.ndarray,
    hv: np.ndarray,
    hd: np.ndarray,
    ok: np.ndarray,
    ot: np.ndarray,
    ov: np.ndarray,
    od: np.ndarray,
    kinds: np.ndarray,
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    nq, width = qt.shape
    nout = kinds.shape[0]
    ek = np.empty(2 * nq + 8, np.int64)
    ev = np.empty((2 * nq + 8, nout), np.int64)
    et = np.empty((2 * nq + 8, width), np.int64)
    ed = np.empty(2 * nq + 8, np.int64)
    ne = 0
    want = np.empty(nout, np.int64)
    mask = np.zeros(hd.shape[0], np.bool_)  # (of the rows at or below a query: each key's own)
    i = h = o = 0
    while i < nq:
        key = qk[i]
        j = _run_end(qk, i, key)
        while h < hk.shape[0] and hk[h] < key:
            h += 1
        h1 = _run_end(hk, h, key)
        while o < ok.shape[0] and ok[o] < key:
            o += 1
        o1 = _run_end(ok, o, key)
        # the key's output: its history, then the corrections of its earlier queries
        nb = o1 - o
        bt = np.empty((nb + 8, width), np.int64)
        bv = np.empty((nb + 8, nout), np.int64)
        bd = np.empty(nb + 8, np.int64)
        bt[:nb] = ot[o:o1]
        bv[:nb] = ov[o:o1]
        bd[:nb] = od[o:o1]
        # the key's rows sorted by each extreme's column, once for all its queries
        orders = np.empty((nout, h1 - h), np.int64)
        for c in range(nout):
            if kinds[c] != 2:
                orders[c] = _lex_order(hv[:, cols[c] : cols[c] + 1], np.arange(h, h1))
        for qi in range(i, j):
            count = 0
            for r in range(h, h1):
                mask[r] = _le(ht, r, qt, qi)
                if mask[r]:
                    count += hd[r]
            have = count > 0
            if have:
                for c in range(nout):
                    if kinds[c] == 2:
                        want[c] = count
                    else:
                        want[c] = _extreme(hv, cols[c], hd, orders[c], mask, kinds[c] == 0)
            cur = np.empty(nb, np.int64)
            nc = 0
            for r in range(nb):
                if _le(bt, r, qt, qi):
                    cur[nc] = r
                    nc += 1
            order = _lex_order(bv, cur[:nc])
            k = 0
            start = ne
            while k < nc:
                first = order[k]
                m = 0
                while k < nc and _same_row(bv, order[k], first):
                    m += bd[order[k]]
                    k += 1
                if m == 0:
                    continue
                change = -m
                if have:
                    same = True
                    for c in range(nout):
                        if bv[first, c] != want[c]:
                            same = False
                            break
                    if same:
                        change += 1
                        have = False  # (the desired row is accounted for)
                if change != 0:
                    ek = _grow(ek, ne + 1)
                    ev = _grow2(ev, ne + 1)
                    et = _grow2(et, ne + 1)
                    ed = _grow(ed, ne + 1)
                    ek[ne] = key
                    ev[ne] = bv[first]
                    et[ne] = qt[qi]
                    ed[ne] = change
                    ne += 1
            if have:
                ek = _grow(ek, ne + 1)
                ev = _grow2(ev, ne + 1)
                et = _grow2(et, ne + 1)
                ed = _grow(ed, ne + 1)
                ek[ne] = key
                ev[ne] = want
                et[ne] = qt[qi]
                ed[ne] = 1
                ne += 1
            if ne > start:  # (the later queries of the key see these corrections)
                bt = _grow2(bt, nb + ne - start)
                bv = _grow2(bv, nb + ne - start)
                bd = _grow(bd, nb + ne - start)
                for e in range(start, ne):
                    bt[nb] = et[e]
                    bv[nb] = ev[e]
                    bd[nb] = ed[e]
                    nb += 1
        i = j
    return ek[:ne], ev[:ne], et[:ne], ed[:ne]


def evaluate_extremes(
    queries: tuple[np.ndarray, np.ndarray],
    history: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    output: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    kinds: np.ndarray,
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A reduce's output corrections at its queries, for an aggregate of ``min``, ``max`` and
    ``count`` (``kinds``, codes :data:`MIN`, :data:`MAX`, :data:`COUNT`; ``cols``: the value
    column each min or max reads).

    ``queries`` are ``(keys, times)``, distinct, sorted by key then time (lexicographically:
    a linear extension of the product order); ``history`` the input updates ``(keys, times,
    values, diffs)`` and ``output`` the output updates ``(keys, times, outputs, diffs)`` of
    the queried keys (and maybe others), each sorted by key. Times are ``(n, width)`` arrays,
    values ``(n, columns)``. Returns the corrections ``(keys, outputs, times, diffs)``: at
    each query, the desired row (once, when the count there is positive) minus the output
    accumulated there, the earlier queries' corrections included.

    >>> import numpy as np
    >>> a = lambda *rows: np.array(rows, dtype=np.int64)
    >>> # key 7: values 5 and 3 at time (0, 0), 3 retracted at (0, 1); no output yet
    >>> keys, outs, times, diffs = evaluate_extremes(
    ...     (a(7, 7), a([0, 0], [0, 1])),
    ...     (a(7, 7, 7), a([0, 0], [0, 0], [0, 1]), a([5], [3], [3]), a(1, 1, -1)),
    ...     (a(), np.empty((0, 2), np.int64), np.empty((0, 2), np.int64), a()),
    ...     a(MIN, COUNT), a(0, 0))
    >>> [(int(k), o.tolist(), t.tolist(), int(d)) for k, o, t, d in zip(keys, outs, times, diffs)]
    [(7, [3, 2], [0, 0], 1), (7, [3, 2], [0, 1], -1), (7, [5, 1], [0, 1], 1)]
    """
    qk, qt = queries
    hk, ht, hv, hd = history
    ok, ot, ov, od = output
    result: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = _evaluate(
        qk, qt, hk, ht, hv, hd, ok, ot, ov, od, kinds, cols
    )
    return result


# ---------------------------------------------------------------------- skips


@_jit
def _kept_at(
    nt: np.ndarray,
    nv: np.ndarray,
    nd: np.ndarray,
    n0: int,
    n1: int,
    ot: np.ndarray,
    ov: np.ndarray,
    od: np.ndarray,
    o0: int,
    o1: int,
    at: np.ndarray,
) -> bool:
    """At time ``at``: the output accumulated there is one row of multiplicity 1 (its
    values ``m``, all mins), and the new updates accumulated there sum to zero or more, add
    no value below ``m`` and take nothing from ``m`` itself."""
    a = at.reshape(1, -1)
    cur = np.empty(o1 - o0, np.int64)
    nc = 0
    for r in range(o0, o1):
        if _le(ot, r, a, 0):
            cur[nc] = r
            nc += 1
    order = _lex_order(ov, cur[:nc])
    live = -1
    k = 0
    while k < nc:
        first = order[k]
        m = 0
        while k < nc and _same_row(ov, order[k], first):
            m += od[order[k]]
            k += 1
        if m != 0:
            if live >= 0 or m != 1:
                return False
            live = first
    if live < 0:
        return False
    sel = np.empty(n1 - n0, np.int64)
    ns = 0
    total = 0
    for r in range(n0, n1):
        if _le(nt, r, a, 0):
            sel[ns] = r
            ns += 1
            total += nd[r]
    if total < 0:
        return False
    rows = sel[:ns]
    for c in range(nv.shape[1]):
        bound = ov[live, c]
        values = nv[rows, c]
        order = np.argsort(values, kind="mergesort")
        k = 0
        while k < ns:
            v = values[order[k]]
            m = 0
            while k < ns and values[order[k]] == v:
                m += nd[rows[order[k]]]
                k += 1
            if (m > 0 and v < bound) or (m < 0 and v == bound):
                return False
    return True


@_jit
def _unchanged(
    nk: np.ndarray,
    nt: np.ndarray,
    nv: np.ndarray,
    nd: np.ndarray,
    ok: np.ndarray,
    ot: np.ndarray,
    ov: np.ndarray,
    od: np.ndarray,
    exact_times: int,
) -> np.ndarray:
    big = np.iinfo(np.int64).max
    skipped = np.empty(nk.shape[0], np.int64)
    ns = 0
    n0 = o0 = 0
    while n0 < nk.shape[0]:
        key = nk[n0]
        n1 = _run_end(nk, n0, key)
        while o0 < ok.shape[0] and ok[o0] < key:
            o0 += 1
        o1 = _run_end(ok, o0, key)
        if o1 > o0 and _key_unchanged(nt, nv, nd, n0, n1, ot, ov, od, o0, o1, exact_times, big):
            skipped[ns] = key
            ns += 1
        n0 = n1
        o0 = o1
    return skipped[:ns]


@_jit
def _key_unchanged(
    nt: np.ndarray,
    nv: np.ndarray,
    nd: np.ndarray,
    n0: int,
    n1: int,
    ot: np.ndarray,
    ov: np.ndarray,
    od: np.ndarray,
    o0: int,
    o1: int,
    exact_times: int,
    big: int,
) -> bool:
    width = nt.shape[1]
    ncols = nv.shape[1]
    # the bound: the new updates' diffs sum to zero or more at each of their times, the output
    # at their least time is one row, each later output time replaces rows, and no inserted
    # value is below (no retracted value at or below) the largest of that row and the rows
    # added later
    least = nt[n0].copy()
    inserted = np.full(ncols, big, np.int64)
    retracted = np.full(ncols, big, np.int64)
    any_retracted = False
    for r in range(n0, n1):
        any_retracted = any_retracted or nd[r] < 0
        for c in range(width):
            least[c] = min(least[c], nt[r, c])
        for c in range(ncols):
            if nd[r] > 0:
                inserted[c] = min(inserted[c], nv[r, c])
            elif nd[r] < 0:
                retracted[c] = min(retracted[c], nv[r, c])
    order = _lex_order(nt, np.arange(n0, n1))
    summed_ok = True
    k = 0
    while k < order.shape[0]:
        first = order[k]
        m = 0
        while k < order.shape[0] and _same_row(nt, order[k], first):
            m += nd[order[k]]
            k += 1
        if m < 0:
            summed_ok = False
    if summed_ok:
        lt = least.reshape(1, -1)
        before = np.empty(o1 - o0, np.int64)
        later = np.empty(o1 - o0, np.int64)
        nb = nl = 0
        bound = np.full(ncols, -big, np.int64)
        for r in range(o0, o1):
            if _le(ot, r, lt, 0):
                before[nb] = r
                nb += 1
            else:
                later[nl] = r
                nl += 1
                if od[r] > 0:
                    for c in range(ncols):
                        bound[c] = max(bound[c], ov[r, c])
        order = _lex_order(ov, before[:nb])
        live = -1
        single = True
        k = 0
        while k < nb:
            first = order[k]
            m = 0
            while k < nb and _same_row(ov, order[k], first):
                m += od[order[k]]
                k += 1
            if m != 0:
                if live >= 0 or m != 1:
                    single = False
                live = first
        if single and live >= 0:
            order = _lex_order(ot, later[:nl])
            settled = True
            k = 0
            while k < nl:
                first = order[k]
                m = 0
                while k < nl and _same_row(ot, order[k], first):
                    m += od[order[k]]
                    k += 1
                if m != 0:
                    settled = False
            if settled:
                ok = True
                for c in range(ncols):
                    b = max(ov[live, c], bound[c])
                    if not (inserted[c] >= b and (not any_retracted or retracted[c] > b)):
                        ok = False
                if ok:
                    return True
    # the test time by time: at each time of the grid of the coordinates that the new
    # updates' times, and the output's at or above their least, take (a time after a new
    # update's sees the same updates as the greatest grid time below it)
    sizes = np.empty(width, np.int64)
    grid = np.empty((width, (n1 - n0) + (o1 - o0)), np.int64)
    points = 1
    for c in range(width):
        vals = np.empty((n1 - n0) + (o1 - o0), np.int64)
        nv_ = 0
        for r in range(n0, n1):
            vals[nv_] = nt[r, c]
            nv_ += 1
        for r in range(o0, o1):
            if ot[r, c] >= least[c]:
                vals[nv_] = ot[r, c]
                nv_ += 1
        u = np.unique(vals[:nv_])
        sizes[c] = u.shape[0]
        grid[c, : u.shape[0]] = u
        if c < width - 1:
            points *= u.shape[0]
    if points > 1 and points * sizes[width - 1] > exact_times:
        return False  # (only the last coordinate varying is tested however many its times)
    at = np.empty(width, np.int64)
    digit = np.zeros(width, np.int64)
    while True:
        for c in range(width):
            at[c] = grid[c, digit[c]]
        a = at.reshape(1, -1)
        after = False
        for r in range(n0, n1):
            if _le(nt, r, a, 0):
                after = True
                break
        if after and not _kept_at(nt, nv, nd, n0, n1, ot, ov, od, o0, o1, at):
            return False
        c = width - 1
        while c >= 0:
            digit[c] += 1
            if digit[c] < sizes[c]:
                break
            digit[c] = 0
            c -= 1
        if c < 0:
            return True


def extremes_unchanged(
    new: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    output: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    exact_times: int,
) -> np.ndarray:
    """The keys whose new updates cannot change a min/max aggregate's output at any time.

    ``new`` are the new input updates ``(keys, times, values, diffs)``, sorted by key, with
    one value column per extreme; ``output`` the output updates ``(keys, times, outputs,
    diffs)`` of those keys (and maybe others), sorted by key, with the extremes as columns in
    the same order. Every extreme is a min: a max's values and outputs come negated. A key is
    returned (once, in order) when its new updates leave its output as it is at every time: by
    a single bound (the output at the new updates' least time is one row, each later output
    time replaces rows, and no new value undercuts the largest of the rows there and after);
    failing that, time by time over the grid of the times involved (:func:`_kept_at` at each),
    when the grid varies only in its last coordinate or has at most ``exact_times`` times.
    Returning fewer keys is always sound.

    >>> import numpy as np
    >>> a = lambda *rows: np.array(rows, dtype=np.int64)
    >>> # key 1's min is 4; a proposal of 9 changes nothing, key 2's proposal of 1 does
    >>> extremes_unchanged(
    ...     (a(1, 2), a([1, 0], [1, 0]), a([9], [1]), a(1, 1)),
    ...     (a(1, 2), a([0, 0], [0, 0]), a([4], [4]), a(1, 1)), 64).tolist()
    [1]
    """
    nk, nt, nv, nd = new
    ok, ot, ov, od = output
    skipped: np.ndarray = _unchanged(nk, nt, nv, nd, ok, ot, ov, od, exact_times)
    return skipped
