"""Column expressions evaluated in plain Python on one record (:func:`evaluate`,
:func:`evaluator`), in the types :mod:`~ddflow.testing.values.typer` infers, by the rules below.

**Values.** ``None`` is null. Unless said otherwise an operation with a null input is null.

* Integers wrap around at their width on overflow (``+ - *``, unary ``-``, ``abs``:
  ``abs(-2**63) == -2**63``; ``-2**63 // -1 == -2**63``, ``-2**63 % -1 == 0``). ``//`` and
  ``%`` round toward negative infinity (``-7 // 2 == -4``, ``-7 % 3 == 2``, ``7 % -3 == -2``);
  an integer ``//`` or ``%`` by zero is null.
* Floats follow IEEE 754 in their type (``float32`` results are rounded to ``float32`` after
  every operation; the sign of zero too: ``-0.0 + 0.0 == 0.0``): ``x / 0.0`` is ``±inf`` or
  NaN. Float ``a // b`` is ``floor(a / b)`` and
  ``a % b`` is ``a - b * floor(a / b)`` (so ``1.0 // 0.1 == 10.0``, ``1.0 % 0.1 == 0.0``,
  ``x % 0.0`` and ``x % inf`` are NaN). ``x ** y`` with a constant exponent (one that reads no
  column) of an integral value from 2 to 9 multiplies ``x`` by itself left to right
  (``(x * x) * x``, rounding every step), and with ``0.5`` is ``sqrt(x)``; any other ``x ** y``
  is C's ``pow`` (``pow(x, 0) == 1`` even for NaN, ``0.0 ** -1 == inf``).
* Comparisons of floats use a total order: NaN equals NaN and is greater than every number;
  ``-0.0 == 0.0``. Strings compare by code point, ``False < True``.
* ``&`` and ``|`` are Kleene logic (``null & False`` is False, ``null | True`` is True); ``^``
  and ``~`` are null for a null input. ``when`` takes the value of the first condition that is
  True (a null condition is not); with no such condition, ``otherwise`` or null.
* ``is_in`` compares in the common family of the value and the list (an int with a float list
  in ``float64``; a ``float32`` value is widened, so ``float32(0.1)`` is not in ``[0.1]``); NaN
  is in ``[nan]``; a null value gives null, also for an empty list.
* ``fill_null``, ``coalesce``: the first non-null value, in the common type. ``least`` and
  ``greatest`` skip nulls and NaN (NaN only if every non-null input is NaN); of equal values the
  last one is taken (``least(0.0, -0.0) == -0.0``).
* ``clip(lo, hi)`` is ``lo if x < lo else hi if x > hi else x`` with IEEE comparisons (a NaN
  ``x`` or bound changes nothing; ``lo`` wins when ``lo > hi``); a null bound is no bound. A
  bound is converted to ``x``'s type; a float bound of an integer is truncated, and one that
  does not fit (NaN, out of range) is an error (the local runtime fails at run time).
* ``round(d)`` of a float: for ``d == 0`` half away from zero; else ``(x * m).round() / m`` with
  ``m = 10.0 ** d`` by repeated squaring in ``float64``, computed in ``float64`` also for
  ``float32``, and ``x`` itself when that is not finite (so ``round(2.675, 2) == 2.68`` and
  ``round(1.005, 2) == 1.0``). ``floor``/``ceil`` keep the sign of zero. Of integers, all three
  return the value.
* ``sqrt``, ``log``, ``log1p``, ``exp`` are the C library's (``log(0) == -inf``, ``log(-1)`` and
  ``sqrt(-1)`` NaN, ``sqrt(-0.0) == -0.0``). A ``float32`` ``log(x)`` is
  ``float32(ln(x)) / float32(ln(float32(e)))`` in ``float32`` (a base-``e`` logarithm
  computed with ``e`` rounded to ``float32``), which can be one unit in the last place away from
  the correctly rounded ``ln(x)``.
* ``.str.len()`` counts code points; ``lower``/``upper`` are Unicode full case mappings
  (``"ß".upper() == "SS"``); ``contains`` is plain text. ``.dt.year()`` is the calendar year.
* ``concat_str`` joins the values converted to ``str`` (as ``cast("str")``); null if any input
  is null. ``hash`` is runtime-specific: :func:`evaluate` refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ddflow.expr.nodes import Expr
from ddflow.schema import Schema
from ddflow.testing.values.arithmetic import (
    _FLOATS,
    _INT_RANGE,
    _LN_E32,
    _ceil,
    _div,
    _f32,
    _feq,
    _floor,
    _flt,
    _math,
    _pow,
    _round,
    _wrap,
)
from ddflow.testing.values.casts import _cast, _convert, _literal, _text
from ddflow.testing.values.errors import ValueRuleError
from ddflow.testing.values.typer import _COMPARISON, _family, _literal_name, _reads, _Typer

__all__ = ["evaluate", "evaluator"]


Row = tuple[Any, ...]


class _Evaluator:
    def __init__(self, expr: Expr, schema: Schema) -> None:
        self.expr = expr
        self.typer = _Typer(expr, schema)
        self.index = {n: i for i, n in enumerate(schema.names)}
        for e in expr.walk():
            if e.kind == "function" and e.params[0] == "hash":
                raise ValueRuleError(
                    f"{e!r}: hash values are runtime-specific (Polars and Spark hash differently, "
                    "and Polars not stably across versions); the reference refuses such plans"
                )
            if e.kind == "cast" and self.name(e.args[0]) == "str" and e.params[0].name != "str":
                _cast("", "str", e.params[0])  # raises where there is no rule

    def name(self, e: Expr) -> str:
        return self.typer.types[id(e)].name

    def __call__(self, row: Row) -> Any:
        return self.eval(self.expr, row)

    def eval(self, e: Expr, row: Row) -> Any:
        return getattr(self, f"_{e.kind}")(e, row)

    def operands(self, e: Expr, args: tuple[Expr, ...], row: Row) -> list[Any]:
        """The values of ``args`` in the type ``e`` combines them in."""
        target = self.typer.operand[id(e)]
        return [_convert(self.eval(a, row), self.name(a), target) for a in args]

    def _col(self, e: Expr, row: Row) -> Any:
        return row[self.index[e.params[0]]]

    def _lit(self, e: Expr, row: Row) -> Any:
        value, dtype = e.params
        return _literal(value, dtype, self.name(e))

    def _alias(self, e: Expr, row: Row) -> Any:
        return self.eval(e.args[0], row)

    def _unary(self, e: Expr, row: Row) -> Any:
        x = self.eval(e.args[0], row)
        op, name = e.params[0], self.name(e)
        if x is None:
            return None
        if op == "~":
            return not x
        result = -x if op == "-" else abs(x)
        return _wrap(result, name) if name in _INT_RANGE else result

    def _binary(self, e: Expr, row: Row) -> Any:
        op = e.params[0]
        if op in ("&", "|", "^"):
            a, b = (self.eval(x, row) for x in e.args)
            if op == "&":
                return False if a is False or b is False else None if None in (a, b) else True
            if op == "|":
                return True if a is True or b is True else None if None in (a, b) else False
            return None if None in (a, b) else a != b
        a, b = self.operands(e, e.args, row)
        if a is None or b is None:
            return None
        name = self.typer.operand[id(e)]
        if op in _COMPARISON:
            return _compare(op, a, b)
        if name in _INT_RANGE:
            if op in ("//", "%"):
                if b == 0:
                    return None
                return _wrap(a // b if op == "//" else a % b, name)
            return _wrap({"+": a + b, "-": a - b, "*": a * b}[op], name)
        single = name == "float32"
        rnd: Callable[[float], float] = _f32 if single else float
        if op == "**":
            if not _reads(e.args[1]):  # a constant exponent
                if b.is_integer() and 2 <= b <= 9:
                    product = a
                    for _ in range(int(b) - 1):
                        product = rnd(product * a)
                    return product
                if b == 0.5:
                    return rnd(_math("sqrt", a))
            return rnd(_pow(a, b))
        if op in ("+", "-", "*"):
            return rnd({"+": a + b, "-": a - b, "*": a * b}[op])
        q = rnd(_div(a, b))
        if op == "/":
            return q
        if op == "//":
            return _floor(q)
        return rnd(a - rnd(b * _floor(q)))

    def _cast(self, e: Expr, row: Row) -> Any:
        return _cast(self.eval(e.args[0], row), self.name(e.args[0]), e.params[0])

    def _when(self, e: Expr, row: Row) -> Any:
        pairs = len(e.args) // 2
        for i in range(pairs):
            if self.eval(e.args[2 * i], row) is True:
                value = e.args[2 * i + 1]
                return _convert(self.eval(value, row), self.name(value), self.name(e))
        if e.params[0]:
            value = e.args[-1]
            return _convert(self.eval(value, row), self.name(value), self.name(e))
        return None

    def _function(self, e: Expr, row: Row) -> Any:
        name, extra = e.params[0], e.params[1:]
        if name in ("fill_null", "coalesce", "least", "greatest", "clip"):
            return self._combined(e, row)
        x = self.eval(e.args[0], row)
        if name == "is_null":
            return x is None
        if name == "is_not_null":
            return x is not None
        if name == "concat_str":
            parts = [(self.eval(a, row), self.name(a)) for a in e.args]
            if any(v is None for v, _ in parts):
                return None
            return str(extra[0]).join(_text(v, n) for v, n in parts)
        if x is None:
            return None
        source = self.name(e.args[0])
        if name == "is_in":
            return _is_in(x, source, extra[0])
        if name in ("round", "floor", "ceil"):
            if source not in _FLOATS:
                return x
            if name == "round":
                return _round(x, extra[0], source == "float32")
            return _floor(x) if name == "floor" else _ceil(x)
        if name in ("sqrt", "log", "log1p", "exp"):
            if source != "float32":
                return _math(name, float(x))
            if name == "log":
                return _f32(_div(_f32(_math("log", x)), _LN_E32))
            return _f32(_math(name, x))
        if name == "str.lower":
            return x.lower()
        if name == "str.upper":
            return x.upper()
        if name == "str.len":
            return len(x)
        if name == "str.contains":
            return extra[0] in x
        if name == "str.starts_with":
            return x.startswith(extra[0])
        if name == "str.ends_with":
            return x.endswith(extra[0])
        if name == "dt.year":
            return x.year
        raise ValueRuleError(f"no value rule for {e!r}")

    def _combined(self, e: Expr, row: Row) -> Any:
        name = e.params[0]
        if name == "clip":
            x, *bounds = self.operands(e, e.args, row)
            given = iter(bounds)
            lower, upper = (next(given) if has else None for has in e.params[1:])
            if x is None:
                return None
            if lower is not None and x < lower:
                return lower
            if upper is not None and x > upper:
                return upper
            return x
        values = self.operands(e, e.args, row)
        present = [v for v in values if v is not None]
        if name in ("fill_null", "coalesce"):
            return present[0] if present else None
        numbers = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
        if not numbers:
            return present[0] if present else None
        best = numbers[0]
        for v in numbers[1:]:
            if (v <= best) if name == "least" else (v >= best):
                best = v
        return best


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return _feq(a, b)
    if op == "!=":
        return not _feq(a, b)
    if op == "<":
        return _flt(a, b)
    if op == ">":
        return _flt(b, a)
    if op == "<=":
        return not _flt(b, a)
    return not _flt(a, b)


def _is_in(x: Any, source: str, values: tuple[Any, ...]) -> bool:
    families = {_family(source)} | {_family(_literal_name(v, None)) for v in values}
    if families <= {"int", "float"} and "float" in families:
        x = float(x)
        values = tuple(float(v) for v in values)
    return any(_feq(x, v) for v in values)


def evaluator(expr: Expr, schema: Schema) -> Callable[[Row], Any]:
    """A function of a record of ``schema`` (a tuple in column order) to ``expr``'s value.

    The expression is typed once; call the result for many records.

    >>> from ddflow.expr.nodes import col
    >>> f = evaluator(col("x") // col("y"), Schema({"x": "int64", "y": "int64"}))
    >>> f((-7, 2)), f((7, 0))
    (-4, None)
    """
    return _Evaluator(expr, schema)


def evaluate(expr: Expr, schema: Schema, row: Row) -> Any:
    """The value of ``expr`` (a Python scalar; None for null) on the record ``row`` of
    ``schema``, by the rules of this module.

    >>> from ddflow.expr.nodes import col, lit
    >>> s = Schema({"f": "float64"})
    >>> evaluate(col("f").cast("str"), s, (1e-7,)), evaluate(col("f") == math.nan, s, (math.nan,))
    ('1e-7', True)
    >>> evaluate(col("f").round(2), s, (2.675,))
    2.68
    """
    return _Evaluator(expr, schema)(row)
