"""Column expressions evaluated row by row, for small batches held as Python tuples.

A ``select`` or ``filter`` of a small batch (:class:`~ddflow.runtime.local.rows.Rows`) whose
expressions are not plain column references used to go through Polars, at Polars' fixed cost
per call whatever the batch's size. The expressions graph algorithms put in their loops are simple:
shortest paths' ``(distance + weight).cast("int64")``, strongly connected components'
``src_label == dst_label``. This module evaluates such expressions on Python values, with
Polars' results:

* column references and literals of ``Int64`` and ``String`` values;
* ``+`` and ``-`` of ``Int64`` values (a result beyond int64 raises :class:`Overflow`; the
  batch then goes to Polars, which defines what happens);
* the comparisons ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` of two ``Int64`` values or two
  strings (UTF-8 byte order, which is code point order, as Python's);
* a cast to the type the value already has.

A null operand makes a null result, as in Polars. Anything else (floats, whose NaN compare
differently in Python; narrower integers, whose arithmetic wraps at their own width; division,
``when``, string functions) is left to Polars: :func:`row_builder` returns None for it.

The reduce's sums of rows wrap at int64 as Polars' and the native core's do
(:func:`wrap_int64`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from ddflow.expr.nodes import Expr

__all__ = ["Overflow", "RowBuilder", "row_builder", "wrap_int64"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: the function of one row for a batch: given the position of each column by name, a function
#: from a row (a tuple) to the expression's value
RowBuilder = Callable[[Callable[[str], int]], Callable[[tuple[Any, ...]], Any]]

#: the Polars type of the values of each kind of expression this module evaluates
KIND_TYPES: dict[str, pl.DataType] = {"i64": pl.Int64(), "str": pl.String(), "bool": pl.Boolean()}

_KINDS = {pl.Int64(): "i64", pl.String(): "str"}
_ARITHMETIC = {"+": operator.add, "-": operator.sub}
_COMPARISONS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Overflow(ArithmeticError):
    """An ``Int64`` result out of range: the batch is evaluated by Polars instead."""


def row_builder(expr: Expr, schema: Any) -> tuple[str, RowBuilder] | None:
    """The kind of value (``"i64"``, ``"str"`` or ``"bool"``) and the row builder of ``expr``
    over columns of ``schema`` (name -> :class:`~ddflow.schema.DType`), or None when the
    expression is not one this module evaluates."""
    e = expr
    if e.kind == "alias":
        return row_builder(e.args[0], schema)
    if e.kind == "col":
        name = e.params[0]
        typed = _KINDS.get(schema[name].polars) if name in schema else None
        return None if typed is None else (typed, lambda index: itemgetter(index(name)))
    if e.kind == "lit":
        value, dtype = e.params
        if type(value) is int and INT64_MIN <= value <= INT64_MAX:
            kind = "i64"
        elif type(value) is str:
            kind = "str"
        else:
            return None
        if dtype is not None and _KINDS.get(dtype.polars) != kind:
            return None
        return kind, lambda index: lambda row: value
    if e.kind == "cast":
        inner = row_builder(e.args[0], schema)
        return inner if inner is not None and _KINDS.get(e.params[0].polars) == inner[0] else None
    if e.kind != "binary":
        return None
    op = e.params[0]
    left, right = row_builder(e.args[0], schema), row_builder(e.args[1], schema)
    if left is None or right is None or left[0] != right[0]:
        return None
    if op in _ARITHMETIC and left[0] == "i64":
        return "i64", _binary(_ARITHMETIC[op], left[1], right[1], checked=True)
    if op in _COMPARISONS:
        return "bool", _binary(_COMPARISONS[op], left[1], right[1], checked=False)
    return None


def _binary(
    f: Callable[[Any, Any], Any], left: RowBuilder, right: RowBuilder, checked: bool
) -> RowBuilder:
    def build(index: Callable[[str], int]) -> Callable[[tuple[Any, ...]], Any]:
        a, b = left(index), right(index)

        def value(row: tuple[Any, ...]) -> Any:
            x = a(row)
            if x is None:
                return None
            y = b(row)
            if y is None:
                return None
            v = f(x, y)
            if checked and not INT64_MIN <= v <= INT64_MAX:
                raise Overflow
            return v

        return value

    return build


def wrap_int64(value: int) -> int:
    """An integer as 64-bit two's-complement arithmetic leaves it (a sum that overflows
    ``int64`` wraps, as the columnar kernels' and the native core's sums do).

    >>> wrap_int64(2 * (2**63 - 1))
    -2
    """
    return ((value + 2**63) % 2**64) - 2**63
