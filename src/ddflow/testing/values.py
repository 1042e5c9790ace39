"""Column expressions evaluated, and user values converted to column types, in plain Python.

The reference interpreter (:mod:`ddflow.testing.reference`) must not lean on the engine it
judges: this module shares no code with it. It reads expression trees only through ``kind``,
``args`` and ``params`` (:class:`ddflow.expr.Expr`) and schemas only through their names and
types; it imports neither Polars nor NumPy nor :mod:`ddflow.expr_compile`. A rule below is
the documented semantics of :mod:`ddflow.expr`, :mod:`ddflow.expr_compile` and
:mod:`ddflow.schema`; where those were silent, the local runtime's behaviour was determined by
experiment and written down (here and in :mod:`ddflow.expr_compile`, "Value rules").

**Types.** Every node has a ddflow type (``int32``, ``int64``, ``float32``, ``float64``,
``bool``, ``str``, ``date``, ``datetime``) inferred without data (:func:`output_type`):

* Operands are combined in their common type: ``int32`` with ``int64`` is ``int64``; an integer
  with ``float32``, and anything numeric with ``float64``, is ``float64``; ``float32`` with
  ``float32`` stays ``float32``. Integers are converted to floats by rounding to nearest (ties to
  even), so ``int64`` compared with ``float64`` compares ``float(i)``.
* A Python ``int``/``float`` literal (or ``lit(v)`` without ``dtype``) is *contextual* when an
  operand it is combined with (in arithmetic, a comparison, the values of ``when``, or
  ``fill_null``, ``clip``, ``round``, ``floor``, ``ceil``, ``least``, ``greatest``,
  ``coalesce``) reads a column, directly or through operations that pass their operands' type
  on (``col("i32") + (lit(1) + 2)``). A contextual literal takes the type of what it is combined
  with: an int literal with ``int32`` is ``int32`` if every such literal fits in 32 bits (else
  the operation is ``int64``), with ``int64`` ``int64``, with ``float32`` it is rounded to
  ``float32`` (``col("f32") == 0.1`` compares with ``float32(0.1)``); a float literal with an
  integer makes the operation ``float64``. Operations on contextual literals alone are
  computed in that type too (``col("i32") + (lit(2**31 - 1) + 1)`` wraps to ``-2**31``). Other
  literals are ``int64``/``float64``.
* ``/`` is ``float64``, except that two ``float32`` operands (or a contextual literal and a
  ``float32``) give ``float32`` when the divisor reads a column; a divisor that reads no column
  makes the division ``float64``. ``**`` is ``float32`` when the base is ``float32`` (the
  exponent is then rounded to ``float32``) and ``float64`` otherwise (a literal base included).
* ``sqrt``, ``log``, ``log1p``, ``exp`` are ``float32`` for a ``float32`` input, else
  ``float64``; ``clip`` has the type of its input (bounds are converted to it); ``round``,
  ``floor``, ``ceil``, ``abs``, ``-`` keep the type; ``.str.len()`` is ``int64`` and
  ``.dt.year()`` ``int32``.

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

**Casts** (a value that does not convert becomes null):

* between integers: null when out of range; integer to float: rounded to nearest (ties to even)
  directly in the target type; ``float64`` to ``float32``: rounded, ``inf`` beyond its range;
  float to integer: truncated toward zero, null for NaN, ``±inf`` and out of range;
* ``bool`` to a number is 1/0; a number to ``bool`` is ``x != 0`` (NaN is True);
* to ``str``: integers in decimal; ``true``/``false``; dates ``YYYY-MM-DD``; datetimes
  ``YYYY-MM-DD HH:MM:SS.ffffff``; floats as the shortest digits that read back to the same value,
  in positional notation when the decimal exponent ``e`` (``x = d.ddd × 10^e``) is in
  ``-5 <= e < 16`` (``-6 <= e < 13`` for ``float32``), else ``d.ddde+XX``/``d.ddde-X``; an
  integral value ends in ``.0``; ``-0.0``, ``NaN``, ``inf``, ``-inf``;
* ``str`` to an integer: ``[+-]?[0-9]+`` in range, else null; ``str`` to a float: a decimal
  number (``1``, ``-1.5``, ``.5``, ``5.``, ``1e-3``) or ``inf``/``infinity``/``nan`` in any case
  with an optional sign, rounded correctly to the target type (overflow is ``inf``), else null;
  no white space. ``str`` to ``bool``, ``date`` or ``datetime`` is accepted when the dataflow is
  built but fails when the local runtime runs it: :func:`evaluate` refuses it;
* ``date`` to ``datetime`` is midnight; ``datetime`` to ``date`` drops the time of day.

**Records** (:func:`conform`): a row function's result as the record the engine stores. A
one-column schema takes a bare value or a 1-tuple; otherwise a tuple or list of one value per
column, or a dict with exactly the column names. Integer columns take ``int`` (not ``bool``,
not ``float``) within their range; float columns take ``int`` or ``float`` (not ``bool``),
converted to ``float64`` (an ``int`` beyond its range is an error) and then, for ``float32``,
rounded to ``float32`` (a finite value beyond ``float32``'s range is an error); ``bool``
columns take ``bool``; ``str`` columns ``str`` (encodable as UTF-8); ``date`` columns a date
that is not a datetime; ``datetime`` columns a naive datetime. NumPy numbers and booleans count
as the Python values they hold. ``None`` only in a nullable column; NaN is a float, not a null.

>>> from ddflow.expr import col
>>> from ddflow.schema import Schema
>>> s = Schema({"x": "int32", "f": "float32?"})
>>> row = conform(s, (2**31 - 1, 0.1))  # the record as stored: 0.1 rounded to float32
>>> evaluate(col("x") + 1, s, row), evaluate(col("f") == 0.1, s, row)
(-2147483648, True)
>>> conform(Schema({"w": "float32"}), 0.1)
(0.10000000149011612,)
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ddflow.expr import Expr
from ddflow.schema import DType, Schema

__all__ = ["ValueRuleError", "conform", "evaluate", "evaluator", "output_type"]

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_NUMERIC = ("int32", "int64", "float32", "float64")
_FLOATS = ("float32", "float64")
_F32_MAX = struct.unpack("f", struct.pack("I", 0x7F7FFFFF))[0]
_PASS_THROUGH = ("fill_null", "clip", "round", "floor", "ceil", "least", "greatest", "coalesce")
_ARITHMETIC = ("+", "-", "*", "/", "//", "%", "**")
_COMPARISON = ("==", "!=", "<", "<=", ">", ">=")
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


class ValueRuleError(ValueError):
    """A value that no rule gives: a record that does not fit its schema, or an expression
    whose value is runtime-specific (``hash``) or fails in the engine."""


# Numbers --------------------------------------------------------------------------------------


def _f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (ties to even); beyond its range, ``±inf``."""
    try:
        return float(struct.unpack("f", struct.pack("f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


#: ``ln`` of ``e`` rounded to float32, in float32: the divisor of a float32 ``log``
_LN_E32 = _f32(math.log(_f32(math.e)))


def _f32_next(x: float, up: bool) -> float:
    bits = struct.unpack("I", struct.pack("f", x))[0]
    if x == 0:
        bits = 1 if up else 0x80000001
    elif (x > 0) == up:
        bits += 1
    else:
        bits -= 1
    return float(struct.unpack("f", struct.pack("I", bits))[0])


def _f32_exact(q: Fraction | int) -> float:
    """The float32 nearest the exact number ``q`` (ties to even), rounding once."""
    d = float(q)  # correctly rounded to float64
    c = _f32(d)
    if math.isinf(d) or Fraction(d) == q:
        return c
    # Rounding to float64 first errs only when it lands exactly halfway between two float32.
    other = math.copysign(_F32_MAX, d) if math.isinf(c) else _f32_next(c, up=d > c)
    if math.isinf(c) or math.isinf(other):  # between the largest float32 and "2**128"
        halfway = math.copysign(float(2**128 - 2**103), d)
    else:
        halfway = float((Fraction(c) + Fraction(other)) / 2)
    if d != halfway:
        return c
    below, above = (c, other) if c < other else (other, c)
    return above if q > Fraction(d) else below


def _wrap(n: int, name: str) -> int:
    bits = 32 if name == "int32" else 64
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _div(a: float, b: float) -> float:
    """IEEE division."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _floor(x: float) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    return float(math.floor(x))


def _ceil(x: float) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    r = float(math.ceil(x))
    return -0.0 if r == 0 and x < 0 else r


def _round_half_away(x: float) -> float:
    if not math.isfinite(x) or abs(x) >= 2.0**52:
        return x
    t = float(math.trunc(x))
    if abs(x - t) >= 0.5:
        t += math.copysign(1.0, x)
    return math.copysign(t, x) if t == 0 else t


def _powi(x: float, n: int) -> float:
    """``x ** n`` by repeated squaring, as the C runtime's ``__powidf2``."""
    y = x if n % 2 else 1.0
    n >>= 1
    while n:
        x = x * x
        if n % 2:
            y = y * x
        n >>= 1
    return y


def _round(x: float, decimals: int, single: bool) -> float:
    if decimals == 0:
        return _round_half_away(x)
    if decimals >= 326:
        return x
    if decimals >= 300 and not single:
        mul2, mul5 = math.ldexp(1.0, decimals), _powi(5.0, decimals)
        out = _round_half_away(x * mul2 * mul5) / mul5 * (1.0 / mul2)
    else:
        m = _powi(10.0, decimals)
        out = _div(_round_half_away(x * m), m)
        out = _f32(out) if single else out
    return out if math.isfinite(out) else x


def _pow(x: float, y: float) -> float:
    """C's ``pow``."""
    try:
        return math.pow(x, y)
    except OverflowError:
        odd = y.is_integer() and y % 2 == 1
        return -math.inf if x < 0 and odd else math.inf
    except ValueError:
        if x == 0 and y < 0:
            odd = y.is_integer() and y % 2 == 1
            return math.copysign(math.inf, x) if odd else math.inf
        return math.nan


def _math(name: str, x: float) -> float:
    """The C library's sqrt, log, log1p, exp, with IEEE results where Python raises."""
    if math.isnan(x):
        return x
    if name == "sqrt":
        return math.sqrt(x) if x >= 0 or x == 0 else math.nan
    if name == "exp":
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf
    if name == "log":
        return -math.inf if x == 0 else math.nan if x < 0 else math.log(x)
    return -math.inf if x == -1 else math.nan if x < -1 else math.log1p(x)


def _feq(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _flt(a: Any, b: Any) -> bool:
    """``a < b`` in the total order of floats (NaN above every number)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a):
            return False
        if math.isnan(b):
            return True
    return bool(a < b)


# Text -----------------------------------------------------------------------------------------


def _shortest(x: float, single: bool) -> tuple[str, int]:
    """The shortest digits ``d`` that read back to ``x > 0`` and ``k``, with ``x = 0.d × 10^k``."""
    if single:
        for p in range(1, 10):
            text = f"{x:.{p - 1}e}"
            if _f32_exact(Fraction(text)) == x:
                break
    else:
        text = repr(x)
    _, digits, exponent = Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)
    d = "".join(map(str, digits))
    return d, len(d) + exponent


def _float_text(x: float, single: bool) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    d, k = _shortest(abs(x), single)
    low, high = (-6, 13) if single else (-5, 16)
    if len(d) <= k <= high:
        return f"{sign}{d}{'0' * (k - len(d))}.0"
    if 0 < k <= high:
        return f"{sign}{d[:k]}.{d[k:]}"
    if low < k <= 0:
        return f"{sign}0.{'0' * -k}{d}"
    e = k - 1
    mantissa = d[0] + ("." + d[1:] if len(d) > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _text(value: Any, name: str) -> str:
    if name in _FLOATS:
        return _float_text(value, name == "float32")
    if name == "bool":
        return "true" if value else "false"
    if name == "datetime":
        return f"{value.date().isoformat()} {value:%H:%M:%S}.{value.microsecond:06d}"
    if name == "date":
        return str(value.isoformat())
    return str(value)


def _parse_float(text: str, single: bool) -> float | None:
    if not _FLOAT_TEXT.fullmatch(text):
        return None
    word = text.lstrip("+-").lower()
    if word in ("inf", "infinity", "nan"):
        value = math.nan if word == "nan" else math.inf
        return -value if text.startswith("-") and word != "nan" else value
    d = float(text)
    if not single or d == 0 or math.isinf(d):
        return d if not single else _f32(d)
    return _f32_exact(Fraction(Decimal(text)))


# Types ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Type:
    """A node's type: a ddflow type name, ``null`` (an untyped None), or a contextual literal
    (``lit-int``: fits in int32, ``lit-int64``, ``lit-float``) waiting for its context."""

    name: str
    nullable: bool

    @property
    def weak(self) -> bool:
        return self.name.startswith("lit-")


_STRONG_OF_WEAK = {"lit-int": "int64", "lit-int64": "int64", "lit-float": "float64"}


def _family(name: str) -> str:
    if name in ("int32", "int64", "lit-int", "lit-int64"):
        return "int"
    if name in ("float32", "float64", "lit-float"):
        return "float"
    return name


def _common(names: list[str]) -> str:
    """The type operands of these types are combined in (see the module docstring)."""
    strong = [n for n in names if n != "null" and not n.startswith("lit-")]
    weak = {n for n in names if n.startswith("lit-")}
    if not strong:
        for n in ("lit-float", "lit-int64", "lit-int"):
            if n in weak:
                return n
        return "null"
    out = strong[0]
    for n in strong[1:]:
        if n == out:
            continue
        if {n, out} <= {"int32", "int64"}:
            out = "int64"
        elif {n, out} <= set(_NUMERIC):
            out = "float64"
        else:
            raise ValueRuleError(f"no common type of {out} and {n}")
    if out == "int32" and weak & {"lit-float", "lit-int64"}:
        return "float64" if "lit-float" in weak else "int64"
    if out == "int64" and "lit-float" in weak:
        return "float64"
    return out


def _reads(e: Expr) -> bool:
    return any(n.kind == "col" for n in e.walk())


def _group(e: Expr) -> tuple[tuple[Expr, ...], bool]:
    """The operands whose types combine at ``e``, and whether ``e`` takes their type."""
    if e.kind == "binary":
        op = e.params[0]
        return (e.args, op in _ARITHMETIC) if op in _ARITHMETIC + _COMPARISON else ((), False)
    if e.kind in ("unary", "alias"):
        return e.args, True
    if e.kind == "when":
        return _when_values(e), True
    if e.kind == "function" and e.params[0] in _PASS_THROUGH:
        return e.args, True
    return (), False


def _when_values(e: Expr) -> tuple[Expr, ...]:
    return e.args[1::2] + (e.args[-1:] if e.params[0] else ())


def _contextual(root: Expr) -> set[int]:
    """The ids of the untyped number literals that take their type from their context."""
    found: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, inherited = stack.pop()
        if node.kind == "lit":
            value, dtype = node.params
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if inherited and dtype is None and number:
                found.add(id(node))
            continue
        group, passes = _group(node)
        members = {id(a) for a in group}
        for a in node.args:
            if id(a) in members:
                others = any(_reads(b) for b in group if b is not a)
                stack.append((a, (passes and inherited) or others))
            else:
                stack.append((a, False))
    return found


def _literal_name(value: Any, dtype: DType | None) -> str:
    if dtype is not None:
        return dtype.name
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "str"
    return "datetime" if isinstance(value, _dt.datetime) else "date"


class _Typer:
    """Infers every node's type bottom up, then settles contextual literals top down.

    ``types`` maps a node id to its final type, ``operand`` a node id to the type its
    operands are combined in (arithmetic, comparisons, ``least`` ...).
    """

    def __init__(self, root: Expr, schema: Schema) -> None:
        self.schema = schema
        self.contextual = _contextual(root)
        self.types: dict[int, _Type] = {}
        self.operand: dict[int, str] = {}
        top = self.visit(root)
        if top.weak:
            self.settle(root, _STRONG_OF_WEAK[top.name])

    def settle(self, e: Expr, name: str) -> None:
        """Give the contextual node ``e`` (and its contextual operands) the type ``name``."""
        t = self.types[id(e)]
        if not t.weak:
            return
        self.types[id(e)] = _Type(name, t.nullable)
        if e.kind == "lit":
            return
        if id(e) in self.operand:
            self.operand[id(e)] = name
        for a in _group(e)[0]:
            self.settle(a, name)

    def combine(self, e: Expr, members: tuple[Expr, ...]) -> str:
        """The common type of ``members``; settles them if it is a ddflow type."""
        name = _common([self.types[id(m)].name for m in members])
        if not name.startswith("lit-") and name != "null":
            for m in members:
                self.settle(m, name)
        return name

    def visit(self, e: Expr) -> _Type:
        for a in e.args:
            self.visit(a)
        t: _Type = getattr(self, f"_{e.kind}")(e)
        self.types[id(e)] = t
        return t

    def _col(self, e: Expr) -> _Type:
        name = e.params[0]
        if name not in self.schema:
            raise ValueRuleError(f"unknown column {name!r} in {e!r}")
        dtype = self.schema[name]
        return _Type(dtype.name, dtype.nullable)

    def _lit(self, e: Expr) -> _Type:
        value, dtype = e.params
        if id(e) in self.contextual:
            if isinstance(value, float):
                return _Type("lit-float", False)
            fits = _INT_RANGE["int32"][0] <= value <= _INT_RANGE["int32"][1]
            return _Type("lit-int" if fits else "lit-int64", False)
        return _Type(_literal_name(value, dtype), value is None)

    def _binary(self, e: Expr) -> _Type:
        op = e.params[0]
        left, right = (self.types[id(a)] for a in e.args)
        nullable = left.nullable or right.nullable
        if op in ("&", "|", "^"):
            return _Type("bool", nullable)
        if op == "**":
            base = left.name if not left.weak else "float64"
            name = "float32" if base == "float32" else "float64"
            self.settle(e.args[0], "float64")
            self.settle(e.args[1], name)
            self.operand[id(e)] = name
            return _Type(name, nullable)
        if op == "/":
            # A divisor that reads no column is computed as a float64 column (exactness of the
            # one-row and many-row batches), which makes the division float64.
            name = self.combine(e, e.args) if _reads(e.args[1]) else "float64"
            name = "float32" if name == "float32" else "float64"
            for a in e.args:
                self.settle(a, name)
            self.operand[id(e)] = name
            return _Type(name, nullable)
        name = self.combine(e, e.args)
        if op in _COMPARISON:
            if name.startswith("lit-"):
                name = _STRONG_OF_WEAK[name]
                for a in e.args:
                    self.settle(a, name)
            self.operand[id(e)] = name
            return _Type("bool", nullable)
        self.operand[id(e)] = name
        integral = _family(name) in ("int", "null")
        return _Type(name, nullable or (op in ("//", "%") and integral))

    def _unary(self, e: Expr) -> _Type:
        return self.types[id(e.args[0])]

    def _alias(self, e: Expr) -> _Type:
        return self.types[id(e.args[0])]

    def _cast(self, e: Expr) -> _Type:
        source, target = self.types[id(e.args[0])], e.params[0]
        may_fail = (
            (source.name == "str" and target.name != "str")
            or (_family(source.name) == "float" and _family(target.name) == "int")
            or (_family(source.name) == "int" and target.name == "int32")
        )
        return _Type(target.name, target.nullable or source.nullable or may_fail)

    def _when(self, e: Expr) -> _Type:
        values = _when_values(e)
        name = self.combine(e, values)
        self.operand[id(e)] = name
        nullable = not e.params[0] or any(self.types[id(v)].nullable for v in values)
        return _Type(name, nullable)

    def _function(self, e: Expr) -> _Type:
        name = e.params[0]
        types = [self.types[id(a)] for a in e.args]
        first = types[0]
        if name in ("is_null", "is_not_null"):
            return _Type("bool", False)
        if name == "hash":
            return _Type("int64", False)
        if name in ("is_in", "str.contains", "str.starts_with", "str.ends_with"):
            return _Type("bool", first.nullable)
        if name in ("str.lower", "str.upper"):
            return _Type("str", first.nullable)
        if name in ("str.len", "dt.year"):
            return _Type("int64" if name == "str.len" else "int32", first.nullable)
        if name == "concat_str":
            return _Type("str", any(t.nullable for t in types))
        if name in ("sqrt", "log", "log1p", "exp"):
            self.settle(e.args[0], "float64")
            kind = "float32" if first.name == "float32" else "float64"
            return _Type(kind, first.nullable)
        if name == "clip" and not first.weak:
            for a in e.args[1:]:
                self.settle(a, first.name)
            self.operand[id(e)] = first.name
            return _Type(first.name, any(t.nullable for t in types))
        kind = self.combine(e, e.args)
        self.operand[id(e)] = kind
        if name == "fill_null":
            return _Type(kind, types[1].nullable)
        if name in ("least", "greatest", "coalesce"):
            return _Type(kind, all(t.nullable for t in types))
        return _Type(kind, any(t.nullable for t in types))


def output_type(expr: Expr, schema: Schema) -> DType:
    """The ddflow type of ``expr``'s values on records of ``schema``, inferred by the rules
    of this module (it agrees with :func:`ddflow.expr.output_dtype`).

    >>> from ddflow.expr import col
    >>> s = Schema({"x": "int32", "f": "float32"})
    >>> output_type(col("x") + 1, s), output_type(col("f") / 2, s), output_type(col("x") // 2, s)
    (DType('int32'), DType('float64'), DType('int32?'))
    """
    t = _Typer(expr, schema).types[id(expr)]
    if t.name == "null":
        raise ValueRuleError(f"{expr!r} is always null and has no type")
    return DType(t.name, t.nullable)


# Conversions ----------------------------------------------------------------------------------


def _convert(value: Any, source: str, target: str) -> Any:
    """A value of type ``source`` in the type ``target``: a widening, a contextual literal's
    materialization or a ``clip`` bound (an integer target that the value does not fit is an
    error: the local runtime fails at run time)."""
    if value is None or source == target:
        return value
    if target in _INT_RANGE:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueRuleError(f"{value!r} cannot be converted to {target}")
            value = math.trunc(value)
        low, high = _INT_RANGE[target]
        if not low <= value <= high:
            raise ValueRuleError(f"{value!r} does not fit in {target}")
        return value
    if target == "float32":
        return _f32_exact(value) if isinstance(value, int) else _f32(value)
    if target == "float64":
        return float(value)
    return value


def _literal(value: Any, dtype: DType | None, name: str) -> Any:
    """A literal's value in its type."""
    return _convert(value, _literal_name(value, None), name)


def _cast(value: Any, source: str, target: DType) -> Any:
    name = target.name
    if value is None or source == name or source == "null":
        return value
    if name == "str":
        return _text(value, source)
    if source == "str":
        if name in _INT_RANGE:
            if not _INT_TEXT.fullmatch(value):
                return None
            low, high = _INT_RANGE[name]
            n = int(value)
            return n if low <= n <= high else None
        if name in _FLOATS:
            return _parse_float(value, name == "float32")
        raise ValueRuleError(
            f"cast from str to {name} is accepted when a dataflow is built but fails when the "
            "local runtime runs it; it has no value rule"
        )
    if name == "bool":
        return value != 0
    if source == "bool":
        return _convert(int(value), "int64", name)
    if name == "date":
        return value.date()
    if name == "datetime":
        return _dt.datetime(value.year, value.month, value.day)
    if name in _INT_RANGE:
        if isinstance(value, float):
            if not math.isfinite(value):
                return None
            value = math.trunc(value)
        low, high = _INT_RANGE[name]
        return value if low <= value <= high else None
    return _convert(value, source, name)


# Evaluation -----------------------------------------------------------------------------------

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

    >>> from ddflow.expr import col
    >>> f = evaluator(col("x") // col("y"), Schema({"x": "int64", "y": "int64"}))
    >>> f((-7, 2)), f((7, 0))
    (-4, None)
    """
    return _Evaluator(expr, schema)


def evaluate(expr: Expr, schema: Schema, row: Row) -> Any:
    """The value of ``expr`` (a Python scalar; None for null) on the record ``row`` of
    ``schema``, by the rules of this module.

    >>> from ddflow.expr import col, lit
    >>> s = Schema({"f": "float64"})
    >>> evaluate(col("f").cast("str"), s, (1e-7,)), evaluate(col("f") == math.nan, s, (math.nan,))
    ('1e-7', True)
    >>> evaluate(col("f").round(2), s, (2.675,))
    2.68
    """
    return _Evaluator(expr, schema)(row)


# Records --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A NumPy number or boolean as the Python value it holds (NumPy is not imported)."""
    t = type(value)
    if t.__module__ != "numpy":
        return value
    names = {c.__name__ for c in t.__mro__}
    if "integer" in names:
        return int(value)
    if "floating" in names:
        return float(value)
    if names & {"bool", "bool_"}:
        return bool(value)
    if "str_" in names:
        return str(value)
    return value


def _conform_value(column: str, dtype: DType, value: Any) -> Any:
    where = f"column {column!r} ({dtype})"
    value = _plain(value)
    if value is None:
        if not dtype.nullable:
            raise ValueRuleError(f"{where}: got None, but the column is not nullable")
        return None
    kind, t = dtype.kind, type(value)
    ok = {
        "int": issubclass(t, int) and not issubclass(t, bool),
        "float": issubclass(t, (int, float)) and not issubclass(t, bool),
        "bool": issubclass(t, bool),
        "str": issubclass(t, str),
        "date": issubclass(t, _dt.date) and not issubclass(t, _dt.datetime),
        "datetime": issubclass(t, _dt.datetime),
    }[kind]
    if not ok:
        raise ValueRuleError(f"{where}: expected {dtype.name}, got {t.__name__} {value!r}")
    if kind == "int":
        low, high = _INT_RANGE[dtype.name]
        if not low <= value <= high:
            raise ValueRuleError(f"{where}: {value!r} does not fit in {dtype.name}")
        return int(value)
    if kind == "float":
        try:
            x = float(value)
        except OverflowError:
            raise ValueRuleError(f"{where}: {value!r} is out of the range of float64") from None
        if dtype.name == "float32":
            narrow = _f32(x)
            if math.isinf(narrow) and math.isfinite(x):
                raise ValueRuleError(f"{where}: {value!r} is out of the range of float32")
            return narrow
        return x
    if kind == "str":
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueRuleError(f"{where}: {value!r} is not valid text (UTF-8)") from None
        return str(value)
    if kind == "date":
        return _dt.date(value.year, value.month, value.day)
    if kind == "datetime":
        if value.tzinfo is not None:
            raise ValueRuleError(f"{where}: {value!r} has a time zone; datetimes are naive")
        return _dt.datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    return value


def conform(schema: Schema, value: Any) -> tuple[Any, ...]:
    """A row function's result as the record the engine stores for ``schema``, or a
    :class:`ValueRuleError` naming the column and the value.

    >>> s = Schema({"n": "int64", "w": "float64?"})
    >>> conform(s, (1, 2)), conform(s, {"w": None, "n": 3}), conform(Schema({"x": "int32"}), 5)
    ((1, 2.0), (3, None), (5,))
    >>> conform(s, (True, 1.0))
    Traceback (most recent call last):
    ...
    ddflow.testing.values.ValueRuleError: column 'n' (int64): expected int64, got bool True
    """
    names = schema.names
    if len(names) == 1 and not isinstance(value, tuple):
        values: tuple[Any, ...] | list[Any] = (value,)
    elif isinstance(value, (tuple, list)):
        values = value
    elif isinstance(value, Mapping):
        if set(value) != set(names) or len(value) != len(names):
            raise ValueRuleError(
                f"record {value!r} does not have exactly the columns {', '.join(names)}"
            )
        values = [value[n] for n in names]
    else:
        raise ValueRuleError(
            f"record {value!r} is a {type(value).__name__}; expected a tuple, list or dict of "
            f"the columns {', '.join(names)}"
        )
    if len(values) != len(names):
        raise ValueRuleError(
            f"record {value!r} has {len(values)} values but the schema has {len(names)} "
            f"columns ({', '.join(names)})"
        )
    return tuple(
        _conform_value(n, t, v) for n, t, v in zip(names, schema.dtypes, values, strict=True)
    )
