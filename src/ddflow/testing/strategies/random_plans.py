"""The strategy of random dataflows, :func:`plans`: a DAG of the public operators over a few
inputs, with loops nested up to three deep and random column expressions, drawn by the plan
generator (:mod:`~ddflow.testing.strategies.generator`).

Invariants of a drawn plan:

* it builds on every runtime; its loops terminate on every stream (a loop without
  ``max_iterations`` has a body that grows its variable within a finite set of records:
  ``x.concat(g(x)).distinct()``, or a ``min``/``max`` per key of ``x.concat(g(x))``, where ``g``
  uses only operations with a finite range, or a body that is idempotent, such as a filter);
* no multiplicity overflows an int64 for inputs whose multiplicities stay below ``2 ** 10``
  (collections that joins and concats could grow beyond ``2 ** 24`` are clamped by a
  ``threshold``);
* its results do not depend on batch sizes or runtimes: floats are summed by no aggregate
  (``sum``/``mean`` only of ``int32`` or small ``int64`` columns), a float divisor is never zero
  (so the sign of a zero is never observed), and row functions are deterministic functions of
  the record (:mod:`~ddflow.testing.strategies.row_functions`).
"""

from __future__ import annotations

from hypothesis import strategies as st

from ddflow.testing.strategies.generator import _Generator, _Options
from ddflow.testing.strategies.plan import Plan
from ddflow.testing.strategies.update_streams import SIGNED_INPUTS

__all__ = ["plans"]


_NAMES = ["k", "v", "w", "u", "z"]
_TYPE_WEIGHTS = ["int64"] * 4 + [
    "int32",
    "float64",
    "float64",
    "float32",
    "bool",
    "str",
    "str",
    "date",
    "datetime",
]


@st.composite
def _schema(draw: st.DrawFn) -> dict[str, str]:
    n = draw(st.integers(1, 4))
    first = draw(st.sampled_from(["int64", "int64", "int32", "str", "float64"]))
    types = [first] + [draw(st.sampled_from(_TYPE_WEIGHTS)) for _ in range(n - 1)]
    return {
        name: t + ("?" if draw(st.integers(0, 2)) == 0 else "")
        for name, t in zip(_NAMES, types, strict=False)
    }


def plans(
    max_inputs: int = 3,
    max_ops: int = 6,
    max_depth: int = 3,
    loops: bool = True,
    extremes: bool = True,
    spark: bool = False,
    max_outputs: int = 3,
    min_loops: int = 0,
    gaps: bool = False,
) -> st.SearchStrategy[Plan]:
    """Random dataflows (:class:`Plan`) built with the public API.

    A plan has up to ``max_inputs`` inputs of random schemas (every ddflow type, nullable or
    not), up to ``max_ops`` operations at the top level (``select``, ``with_columns``,
    ``filter``, ``map``, ``flat_map``, ``concat``, ``negate``, ``consolidate``, ``join``,
    ``semijoin``, ``antijoin``, an ``arrange`` shared by two joins, ``group_by().agg`` with
    ``count``/``sum``/``min``/``max``/``mean``, ``group_by().reduce``, ``distinct``,
    ``threshold``, ``iterate`` and ``prioritized_iterate`` nested up to ``max_depth`` deep, with
    or without ``max_iterations``), each applied to any earlier collection (so that collections
    are used twice), and up to ``max_outputs`` outputs.

    A loop's body either converges by construction (it grows the variable within a finite set
    of records, ``x.concat(g(x)).distinct()`` or a ``min``/``max`` per key of ``x.concat(g(x))``
    where ``g`` has a finite range, or it is idempotent, such as a filter), with or without
    ``max_iterations``, or it is any body, with ``max_iterations`` (1 to 4) and multiplicities
    clamped. A ``prioritized_iterate``'s priority is a non-negative integer expression.

    ``loops=False`` draws no loop;
    ``min_loops`` makes the last operations at the top level loops if fewer were drawn;
    ``gaps=False`` leaves out the expressions on which the local runtime is known to depart from
    the documented semantics (the strict xfails of ``tests/testing/test_values.py``: a float
    ``//`` or ``%`` by a constant, computed with a reciprocal in many-row batches; a division of
    a constant, typed ``float64`` but computed in ``float32`` by a ``float32``; arithmetic of
    literals alone, folded in another type);
    ``extremes=False`` draws streams without integer extremes; ``spark=True`` leaves out what
    Spark SQL computes differently by design (``**``, by ``StrictMath``), for plans compared with
    a computation in Spark SQL.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None, deadline=None)
    ... @given(plans(max_ops=4))
    ... def test(plan):
    ...     assert "def build(flow):" in repr(plan)
    >>> test()
    """
    options = _Options(
        max_ops, max_depth if loops else 0, extremes, spark, min_loops if loops else 0, gaps
    )
    return _plans(max_inputs, max_outputs, options)


@st.composite
def _plans(draw: st.DrawFn, max_inputs: int, max_outputs: int, options: _Options) -> Plan:
    n = draw(st.integers(1, max_inputs))
    schemas = {name: draw(_schema()) for name in ["a", "b", "c"][:n]}
    signed = frozenset(name for name in schemas if not SIGNED_INPUTS or draw(st.booleans()))
    gen = _Generator(draw, options)
    return gen.plan(schemas, signed, max_outputs)
