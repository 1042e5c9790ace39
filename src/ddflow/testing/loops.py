"""Loops of the reference interpreter, from the papers' definitions.

A loop (``iterate`` / ``prioritized_iterate``) adds a coordinate to the times of the collections
inside it. For one time ``o`` of the enclosing scope, the loop's own times are

* ``(i,)``, an iteration counter, for ``iterate`` (differential-dataflow-cidr2013 §3.3 Ex 1,
  §4.2 "Fixed-point operator"; naiad-tech-report §5.1.1), and
* ``(p, i)``, a priority and an iteration counter ordered lexicographically,
  ``(p, i) <= (q, j)  iff  p < q  or  (p == q and i <= j)``, for ``prioritized_iterate``
  (differential-dataflow-cidr2013 §3.3 Ex 2, §4.2 "Prioritized fixed-point operator";
  naiad-tech-report §5.1.2).

Both are chains, ordered here as Python orders tuples. A collection ``C`` inside the loop is a
function of the loop time, defined by its differences ``δC``: ``C(t) = Σ_{s <= t} δC(s)``
(naiad-tech-report §3.2). Let ``A`` be the collection entering the loop (at outer time ``o``),
``P(r)`` the priority of record ``r``, ``A_p`` the records of ``A`` with ``P(r) = p``, ``f`` the
body and ``L`` the loop's ``max_iterations`` (``L = ∞`` when there is none). The loop is

* ingress (the ``enter`` node ``E``): the entered records at iteration 0,
  ``δE((0,)) = A``, or ``δE((p, 0)) = A_p`` for a prioritized loop (so ``E((p, i)) = A_{<=p}``);
  ``δE`` is 0 at every other time;
* the variable ``V = E + F``, the ingress concatenated with the feedback;
* the body's result ``R(t) = f(V(t))`` at every time ``t`` (every operator of the body is its
  collection definition applied to its inputs' accumulations at ``t``; collections from outside
  the loop enter at the least time, so they are constant over the loop's times);
* feedback ``F``: the differences of ``R - E`` moved from iteration ``i`` to ``i + 1``, those
  that would reach iteration ``L`` or beyond dropped::

      δF(t + 1) = δR(t) - δE(t)   if iteration(t) + 1 < L,  else nothing
      (t + 1: the time with the iteration one more; δF(least time) = 0)

* egress (the ``leave`` node): the sum of the result's differences over all the loop's times,
  ``Σ_t δR(t)`` = ``R`` at the last time any difference arrives: the limit.

Why ``R - E``: naiad-tech-report §5.1.1 places ``+A`` at iteration 0 and ``-A`` at iteration 1
(ingress) and feeds ``R`` back; moving ``-δE`` along with ``δR`` is the same. Either way the
variable is exactly the sequence of iterates the papers and ``Collection.iterate`` describe::

    iterate:              V((0,)) = A,   V((i,)) = R((i - 1,)) = f^i(A)          (0 < i < L)
                          result  = f^L(A), or the fixed point f^n(A) = f^(n+1)(A) if n < L

    prioritized_iterate:  V((p, i)) = R((p, i - 1)) + gap(p')                     (0 < i < L)
                          V((p, 0)) = A_p + V(the last time of priority p')
                          gap(p')   = V(last of p') - R(last of p')

where ``p'`` is the greatest priority below ``p`` among 0 and the entered records' priorities
(the last time before ``(p, 0)`` at which anything changes is the last one visited at ``p'``;
before the least time ``(0, 0)`` every collection is 0, and ``V((0, 0)) = A_0``). Without a
limit every priority reaches its fixed point, ``gap = 0``, and ``V((p, 0)) = A_p + R(limit at
p')``: the records of priority ``p`` join the fixed point of the priorities before it
(differential-dataflow-cidr2013 §4.2 ``PFeedback``). With ``L``, a priority may stop short of
its fixed point; the difference ``V - R`` it leaves (the feedback dropped at ``(p', L)``) is
never fed back, so every later variable carries it (``Collection.prioritized_iterate``: what a
priority leaves undone is not resumed). These closed forms follow from the definitions by
accumulating ``δF``; the code below does not use them: it walks the loop's times in order and
accumulates differences.

Evaluation (:func:`fixed_point`): walk the loop's times in increasing order, visiting the least
time and every time at which a difference (of ``E`` or ``F``) arrives; at each, update
``V(t) = V(before t) + δE(t) + δF(t)``, evaluate ``R(t) = f(V(t))`` when ``V`` changed (or at
the least time), and send ``δR(t) - δE(t)`` to the next iteration unless the limit drops it. The
walk ends when no difference remains anywhere (every later time would repeat ``V`` and ``R``); a
time whose iteration reaches ``MAX_REFERENCE_ITERATIONS`` raises ``ReferenceError``.

Nested loops: the times of a loop inside another are the outer loop's times extended by the
inner coordinate, under the product order (a lexicographic pair is one coordinate of the
product: naiad-tech-report §5.1.2, differential-dataflow-cidr2013 §3.3 Ex 3). The inner
ingress, feedback and egress act on the inner coordinate only, so accumulating over the outer
coordinates commutes with them: the inner loop's collections at ``(o, t)`` are the inner loop
evaluated as above on the outer collections accumulated at ``o``. That is why the interpreter
evaluates an inner loop afresh for every outer time (its ``env``: each variable's value at the
time being evaluated), to any depth, prioritized loops included.

>>> from collections import Counter
>>> step = lambda x: Counter({(min(n + 1, 3),): 1 for (n,) in x})  # converges at {3}
>>> fixed_point(step, ingress(Counter({(0,): 1})), None)
Counter({(3,): 1})
>>> fixed_point(step, ingress(Counter({(0,): 1})), 2)  # f applied twice
Counter({(2,): 1})
>>> bump = lambda x: Counter({(n + 1, p): m for (n, p), m in x.items()})  # never converges
>>> xs = Counter({(0, 0): 1, (10, 1): 1})
>>> fixed_point(bump, ingress(xs, {(0, 0): 0, (10, 1): 1}), 2)
Counter({(2, 0): 1, (12, 1): 1})
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

#: the iteration at which the reference gives up on a loop that does not converge
MAX_REFERENCE_ITERATIONS = 10_000


class ReferenceError(RuntimeError):
    """The reference interpreter cannot evaluate this plan (a user vertex, a runtime-specific
    function such as ``hash``, a loop that does not converge)."""


__all__ = ["MAX_REFERENCE_ITERATIONS", "LoopTime", "ReferenceError", "fixed_point", "ingress"]

#: a loop's own time at one outer time: ``(i,)`` for ``iterate``, ``(p, i)`` for
#: ``prioritized_iterate`` (ordered as tuples: lexicographically)
LoopTime = tuple[int, ...]

Body = Callable[[Counter[Any]], Counter[Any]]


def ingress(
    source: Mapping[tuple[Any, ...], int], priorities: Mapping[tuple[Any, ...], int] | None = None
) -> dict[LoopTime, Counter[Any]]:
    """The differences ``δE`` of the entered collection: ``source`` at ``(0,)`` for ``iterate``;
    each record at ``(priority, 0)`` for ``prioritized_iterate`` (``priorities`` maps every
    record of ``source`` to its priority).

    >>> ingress(Counter({("a",): 2}))
    {(0,): Counter({('a',): 2})}
    >>> ingress(Counter({("a",): 1, ("b",): -1}), {("a",): 3, ("b",): 0})
    {(0, 0): Counter({('b',): -1}), (3, 0): Counter({('a',): 1})}
    >>> ingress(Counter({("a",): 1}), {("a",): 3})
    {(0, 0): Counter(), (3, 0): Counter({('a',): 1})}
    """
    if priorities is None:
        return {(0,): _clean(Counter(source))}
    out: dict[LoopTime, Counter[Any]] = defaultdict(Counter)
    out[(0, 0)] = Counter()  # (the least time, even with no record of priority 0)
    for r, m in source.items():
        if m != 0:
            out[(priorities[r], 0)][r] += m
    return dict(sorted(out.items()))


def fixed_point(
    body: Body, entered: Mapping[LoopTime, Counter[Any]], max_iterations: int | None
) -> Counter[Any]:
    """The loop's egress: ``Σ_t δR(t)`` for ``R(t) = body(V(t))``, ``V = E + F`` with ``δE``
    given by ``entered`` (see :func:`ingress`) and ``δF(t + 1) = δR(t) - δE(t)`` unless the
    iteration ``t + 1`` reaches ``max_iterations`` (the module's definitions).

    ``body`` maps the variable at a time to the result at that time. Raises ``ReferenceError``
    if an iteration reaches ``MAX_REFERENCE_ITERATIONS`` (the loop does not converge).

    >>> double = lambda x: Counter({r: 2 * m for r, m in x.items()})  # R = 2V: no fixed point
    >>> fixed_point(double, ingress(Counter({("a",): 1})), 3)          # 2 * 2 * 2
    Counter({('a',): 8})
    """
    width = len(next(iter(entered), (0,)))
    least: LoopTime = (0,) * width
    # the differences waiting at each time not yet visited: of the ingress, of the feedback
    delta_e: dict[LoopTime, Counter[Any]] = {t: Counter(d) for t, d in entered.items() if d}
    delta_f: dict[LoopTime, Counter[Any]] = {}
    todo: list[LoopTime] = sorted({least, *delta_e})
    heapq.heapify(todo)
    variable: Counter[Any] = Counter()
    result: Counter[Any] = Counter()  # R before the least time: 0
    first = True
    while todo:
        t = heapq.heappop(todo)
        while todo and todo[0] == t:  # (a time pushed twice)
            heapq.heappop(todo)
        if t[-1] >= MAX_REFERENCE_ITERATIONS:
            raise ReferenceError(
                f"the reference loop did not converge in "
                f"{MAX_REFERENCE_ITERATIONS} iterations (at loop time {t})"
            )
        de = delta_e.pop(t, Counter())
        dv = _sum(de, delta_f.pop(t, Counter()))
        dr: Counter[Any] = Counter()
        if dv or first:
            variable = _sum(variable, dv)
            new = _clean(body(variable))
            dr = _sum(new, _negated(result))
            result = new
            first = False
        sent = _sum(dr, _negated(de))  # δR(t) - δE(t)
        after = (*t[:-1], t[-1] + 1)
        if sent and (max_iterations is None or after[-1] < max_iterations):
            delta_f[after] = _sum(delta_f.get(after, Counter()), sent)
            heapq.heappush(todo, after)
    return result


def _clean(c: Counter[Any]) -> Counter[Any]:
    return Counter({r: m for r, m in c.items() if m != 0})


def _sum(a: Counter[Any], b: Counter[Any]) -> Counter[Any]:
    out = Counter(a)
    for r, m in b.items():
        out[r] += m
    return _clean(out)


def _negated(c: Counter[Any]) -> Counter[Any]:
    return Counter({r: -m for r, m in c.items()})
