"""Checking expression trees against a schema, and compiling them to Polars.

The trees of :mod:`ddflow.expr.nodes` are seen here only through ``kind``, ``args`` and ``params``;
each runtime compiles them with an :class:`ExprVisitor` (a later Spark compiler is one more
visitor beside :class:`_PolarsCompiler`). Checking is runtime-independent: the checker infers,
for every node, a type *family* (``int``, ``float``, ``bool``, ``str``, ``date``, ``datetime``)
and whether it can be null, and rejects operands of the wrong family at build time, pointing at
the user's line that built the node. The exact result type is then Polars' (so that the local
runtime can never disagree with it) and must be a ddflow type.

Typing rules:

* ``+ - * / // % **`` need numbers (bool is not a number); ``/`` and ``**`` give floats.
  ``== != < <= > >=`` need two numbers or two values of one family. ``& | ^ ~`` need bools.
* A Python ``int`` or ``float`` combined with an expression takes that expression's type
  (``col("i32") + 1`` is ``int32``, ``col("f32") * 2.5`` is ``float32``); a literal combined with
  nothing (``lit(1).alias("one")``, ``when(c).then(1).otherwise(2)``) is ``int64``/``float64``.
* ``.str.len()`` is ``int64``, ``.dt.year()`` ``int32``, ``.hash()`` ``int64``; ``sqrt``,
  ``log``, ``log1p`` and ``exp`` give floats; ``round``, ``floor``, ``ceil``, ``abs`` and
  ``clip`` keep the input type.

Nullability rules (a result is nullable iff it can hold a null for some valid input):

* an operation is nullable iff one of its inputs is, except: ``is_null``/``is_not_null`` and
  ``hash`` never are; ``fill_null(v)`` is iff ``v`` is; ``least``, ``greatest`` and
  ``coalesce`` skip nulls, so they are iff all inputs are;
* some operations make nulls of their own: ``//`` and ``%`` on integers (division by zero),
  ``when`` without ``otherwise``, and ``cast`` from ``str`` to anything else, from a float to an
  integer, or from an integer to ``int32`` (values that do not convert become null);
* NaN is a float value, not a null.

Width rules (the exact type within a family, as the local runtime computes it):

* ``int32`` with ``int64`` is ``int64``; an integer with ``float32``, and a number with
  ``float64``, is ``float64``; ``float32`` with ``float32`` stays ``float32``. A Python ``int``
  combined with ``int32`` makes the operation ``int64`` if it does not fit in 32 bits; a Python
  ``float`` combined with an integer makes it ``float64``; a Python number combined with
  ``float32`` is rounded to ``float32`` first (``col("f32") == 0.1`` compares with
  ``float32(0.1)``).
* ``/`` is ``float32`` only for two ``float32`` operands whose divisor reads a column: a divisor
  that reads no column is computed as a ``float64`` column (see ``visit_binary``), so
  ``col("f32") / 2`` is ``float64``. ``**`` is ``float32`` iff its base is ``float32`` (the
  exponent is then rounded to ``float32``). ``clip`` bounds are converted to the input's type.

Value rules (what the local runtime computes; :mod:`ddflow.testing.values` states every rule
in full and evaluates them in plain Python, for the reference interpreter):

* Integer ``+ - *``, unary ``-`` and ``abs`` wrap around at the type's width
  (``abs(-2**63) == -2**63``); ``//`` and ``%`` round toward negative infinity (``-7 % 3 == 2``),
  are null for a zero divisor, and ``-2**63 // -1`` wraps to ``-2**63``.
* Floats are IEEE 754 in their type, each ``float32`` result rounded to ``float32``: ``x / 0.0``
  is ``±inf`` or NaN; float ``a // b`` is ``floor(a / b)`` and ``a % b`` is
  ``a - b * floor(a / b)`` (``1.0 // 0.1 == 10.0``, ``1.0 % 0.1 == 0.0``). ``x ** y`` with an
  exponent that reads no column and is an integer from 2 to 9 is ``x * x * ...`` left to right,
  with ``0.5`` is ``sqrt(x)``; otherwise C's ``pow``. The local runtime keeps ``-0.0``.
* Comparisons of floats use a total order: NaN equals NaN and is above every number, and
  ``-0.0 == 0.0``. ``& |`` are Kleene logic (``null & False`` is False); ``^``, ``~`` are null
  for a null input.
* ``least``/``greatest`` skip nulls and NaN (NaN only if every non-null input is NaN) and take
  the last of equal values (``least(0.0, -0.0)`` is ``-0.0``); ``clip`` is
  ``lo if x < lo else hi if x > hi else x`` with IEEE comparisons (NaN changes nothing); an
  integer ``clip`` bound that does not fit the input's type fails when the dataflow runs.
* ``round(d)`` of a float is ``(x * 10^d).round() / 10^d`` half away from zero, computed in
  ``float64`` (``round(2.675, 2) == 2.68``, ``round(1.005, 2) == 1.0``), ``x`` where that is not
  finite; ``floor``/``ceil`` keep ``-0.0``. A ``float32`` ``log`` is ``ln(x) / ln(float32(e))``
  in ``float32``.
* ``is_in`` compares in the common family of the value and the list (``float32(0.1)`` is not in
  ``[0.1]``); NaN is in ``[nan]``. ``str.len`` counts code points; ``lower``/``upper`` are the
  Unicode full case mappings.
* Casts: between numbers, null when out of range; float to integer truncates (NaN and ``±inf``
  null); ``float64`` to ``float32`` rounds (``inf`` beyond range); an integer to a float rounds
  once, to nearest. ``bool`` to a number is 1/0; a number to ``bool`` is ``x != 0`` (NaN is
  True). To ``str``: ``true``/``false``, ``YYYY-MM-DD``, ``YYYY-MM-DD HH:MM:SS.ffffff``, floats as
  their shortest round-trip digits, positional for decimal exponents ``-5 <= e < 16``
  (``-6 <= e < 13`` for ``float32``), else ``1e-7``/``1.5e+20``, ``NaN``, ``inf``. From ``str``:
  integers ``[+-]?[0-9]+``; floats in decimal or scientific notation or ``inf``/``infinity``/
  ``nan`` in any case, correctly rounded; no white space; anything else null. A cast from
  ``str`` to ``bool``, ``date`` or ``datetime`` is accepted here but fails when it runs.

Known gaps of the local runtime against these rules (strict xfails in
``tests/testing/test_values.py``): float ``//`` and ``%`` by a constant use a reciprocal in
many-row batches, and so does ``/`` by a divisor that reads columns but is one value for a
batch (a ``coalesce`` whose column is all null); ``x + 0`` keeps ``-0.0`` in many-row
batches; ``x ** y`` with a column ``y`` takes the constant-exponent path in one-row batches;
arithmetic of literals alone inside a typed context (``col("i32") + (lit(2**31 - 1) + 1)``)
is folded by Polars at run time, in another type than the declared one; a float ``clip``
bound of an integer makes the checker's family float, so ``**`` then fails on a negative
exponent; the declared type of ``0.5 / col("f32")`` is ``float64`` and of
``2**40 * col("i32")`` (``//``, ``%``) ``int32``, while Polars computes them in ``float32``
and ``int64``; ``log`` of an integer (a log with the literal base ``e``) is typed by Polars
as a literal float, so ``col("f32") + col("i").log()`` is computed in ``float32`` instead of
``float64``.

>>> from ddflow.expr.nodes import col
>>> s = Schema({"x": "int64", "name": "str?"})
>>> output_types([col("x") // 2, col("name").str.len(), col("x").cast("str")], ["a", "b", "c"], s)
[DType('int64?'), DType('int64?'), DType('str')]
"""

from __future__ import annotations

import datetime as _dt
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

import polars as pl

from ddflow.errors import CallSite, ExpressionError, SchemaError
from ddflow.schema import DType, Schema

if TYPE_CHECKING:
    from ddflow.expr.nodes import Expr

__all__ = ["FUNCTIONS", "ExprVisitor", "compile_polars", "output_types"]

ARITHMETIC = ("+", "-", "*", "/", "//", "%", "**")
COMPARISON = ("==", "!=", "<", "<=", ">", ">=")
LOGICAL = ("&", "|", "^")

#: The functions of ``function`` nodes: name -> the family of input they take.
FUNCTIONS: dict[str, str] = {
    "is_null": "any",
    "is_not_null": "any",
    "fill_null": "any",
    "is_in": "any",
    "hash": "any",
    "round": "numeric",
    "floor": "numeric",
    "ceil": "numeric",
    "sqrt": "numeric",
    "log": "numeric",
    "log1p": "numeric",
    "exp": "numeric",
    "clip": "numeric",
    "str.lower": "str",
    "str.upper": "str",
    "str.len": "str",
    "str.contains": "str",
    "str.starts_with": "str",
    "str.ends_with": "str",
    "dt.year": "temporal",
    "least": "any",
    "greatest": "any",
    "coalesce": "any",
    "concat_str": "any",
}
_FLOAT_RESULT = ("sqrt", "log", "log1p", "exp")


def _fail(message: str, site: CallSite | None) -> NoReturn:
    raise ExpressionError(message, site=site)


T = TypeVar("T")


class ExprVisitor(Generic[T]):
    """Dispatches on the node kind: ``visit(e)`` calls ``visit_<kind>(e)``, memoized per node.

    Runtimes compile expressions by subclassing it; so does the type checker.

    >>> from ddflow.expr.nodes import col
    >>> class Depth(ExprVisitor[int]):
    ...     def generic(self, e: Expr) -> int:
    ...         return 1 + max((self.visit(a) for a in e.args), default=0)
    ...     visit_col = visit_lit = visit_binary = visit_unary = generic
    >>> Depth().visit(-(col("x") + 1))
    3
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Expr, T]] = {}

    def visit(self, e: Expr) -> T:
        """The result for ``e``, computed once per node object."""
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        method: Callable[[Expr], T] | None = getattr(self, f"visit_{e.kind}", None)
        if method is None:
            raise NotImplementedError(f"{type(self).__name__} cannot handle {e.kind} nodes")
        result = method(e)
        self._memo[id(e)] = (e, result)
        return result


@dataclass(frozen=True)
class _Info:
    """What ddflow knows of a node without data: its type family and whether it can be null."""

    kind: str  # int, float, bool, str, date, datetime, or null (an untyped None literal)
    nullable: bool

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float", "null")


_PYTHON_KIND = {bool: "bool", int: "int", float: "float", str: "str", _dt.date: "date"}


def _literal_kind(value: Any, dtype: DType | None) -> str:
    if dtype is not None:
        return dtype.kind
    if value is None:
        return "null"
    if isinstance(value, _dt.datetime):
        return "datetime"
    return _PYTHON_KIND[type(value)]


def _unify(infos: Sequence[_Info]) -> str | None:
    """The family of values from several inputs, or None if they do not mix."""
    kinds = {i.kind for i in infos} - {"null"}
    if not kinds:
        return "null"
    if len(kinds) == 1:
        return kinds.pop()
    return "float" if kinds <= {"int", "float"} else None


class _Checker(ExprVisitor[_Info]):
    """Checks columns and operand types against a schema; infers families and nullability."""

    def __init__(self, schema: Schema) -> None:
        super().__init__()
        self.schema = schema

    def _describe(self, e: Expr) -> str:
        info = self.visit(e)
        if e.kind == "col":
            return f"{e!r} is {self.schema[e.params[0]]}"
        return f"{e!r} is {info.kind}"

    def visit_col(self, e: Expr) -> _Info:
        name = e.params[0]
        if name not in self.schema:
            close = difflib.get_close_matches(name, self.schema.names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            _fail(
                f"unknown column {name!r} in {e!r}; available columns: "
                f"{', '.join(self.schema.names)}{hint}",
                e.site,
            )
        dtype = self.schema[name]
        return _Info(dtype.kind, dtype.nullable)

    def visit_lit(self, e: Expr) -> _Info:
        value, dtype = e.params
        return _Info(_literal_kind(value, dtype), value is None)

    def visit_binary(self, e: Expr) -> _Info:
        op = e.params[0]
        left, right = (self.visit(a) for a in e.args)
        nullable = left.nullable or right.nullable
        if op in ARITHMETIC:
            if not (left.numeric and right.numeric):
                self._mismatch(e, f"'{op}' needs numbers")
            if op in ("/", "**"):
                return _Info("float", nullable)
            kind = _unify([left, right]) or "float"
            # Integer // and % by zero give null.
            return _Info(kind, nullable or (op in ("//", "%") and kind in ("int", "null")))
        if op in COMPARISON:
            if _unify([left, right]) is None:
                self._mismatch(e, f"'{op}' needs operands of comparable types")
            return _Info("bool", nullable)
        if {left.kind, right.kind} - {"bool", "null"}:
            self._mismatch(e, f"'{op}' needs bools (conditions)")
        return _Info("bool", nullable)

    def _mismatch(self, e: Expr, need: str) -> NoReturn:
        what = " and ".join(self._describe(a) for a in e.args)
        _fail(f"cannot compute {e!r}: {need}, but {what}", e.site)

    def visit_unary(self, e: Expr) -> _Info:
        info = self.visit(e.args[0])
        if e.params[0] == "~" and info.kind not in ("bool", "null"):
            self._mismatch(e, "'~' needs a bool (a condition)")
        if e.params[0] != "~" and not info.numeric:
            self._mismatch(e, f"'{e.params[0]}' needs a number")
        return info

    def visit_alias(self, e: Expr) -> _Info:
        return self.visit(e.args[0])

    def visit_cast(self, e: Expr) -> _Info:
        source, target = self.visit(e.args[0]).kind, e.params[0]
        temporal = ("date", "datetime")
        crosses = (source in temporal) != (target.kind in temporal)
        if crosses and source != "null" and "str" not in (source, target.kind):
            _fail(f"cannot compute {e!r}: a {source} cannot be cast to {target.name}", e.site)
        # A cast that can meet a value it cannot convert (a string that is not a number, NaN or
        # an overflowing number into an integer) makes a null there.
        may_fail = (
            (source == "str" and target.kind != "str")
            or (source == "float" and target.kind == "int")
            or (source == "int" and target.name == "int32")
        )
        return _Info(target.kind, target.nullable or self.visit(e.args[0]).nullable or may_fail)

    def visit_when(self, e: Expr) -> _Info:
        conditions, values = e.args[0::2], list(e.args[1::2])
        if e.params[0]:
            conditions, values = e.args[0:-1:2], [*e.args[1:-1:2], e.args[-1]]
        for c in conditions:
            if self.visit(c).kind not in ("bool", "null"):
                _fail(f"when needs a condition (a bool), but {self._describe(c)}", c.site)
        infos = [self.visit(v) for v in values]
        kind = _unify(infos)
        if kind is None:
            shown = ", ".join(self._describe(v) for v in values)
            _fail(f"the values of {e!r} do not mix: {shown}", e.site)
        return _Info(kind, not e.params[0] or any(i.nullable for i in infos))

    def visit_function(self, e: Expr) -> _Info:
        name = e.params[0]
        infos = [self.visit(a) for a in e.args]
        first = infos[0]
        needs = FUNCTIONS[name]
        if needs == "numeric" and not all(i.numeric for i in infos):
            self._mismatch(e, f"{name} needs numbers")
        if needs == "str" and first.kind not in ("str", "null"):
            self._mismatch(e, f"{name} needs a str")
        if needs == "temporal" and first.kind not in ("date", "datetime", "null"):
            self._mismatch(e, f"{name} needs a date or datetime")
        if name in ("is_null", "is_not_null"):
            return _Info("bool", False)
        if name == "is_in":
            values = [_Info(_literal_kind(v, None), False) for v in e.params[1]]
            if _unify([first, *values]) is None:
                self._mismatch(e, f"is_in needs values comparable with {first.kind}")
            return _Info("bool", first.nullable)
        if name == "hash":
            return _Info("int", False)
        if name in ("str.len", "dt.year"):
            return _Info("int", first.nullable)
        if name.startswith("str."):
            return _Info(
                "bool" if name not in ("str.lower", "str.upper") else "str", first.nullable
            )
        if name == "concat_str":
            return _Info("str", any(i.nullable for i in infos))
        kind = _unify(infos)
        if kind is None:
            self._mismatch(e, f"{name} needs inputs of one type")
        if name == "fill_null":
            return _Info(kind, infos[1].nullable)
        if name in ("least", "greatest", "coalesce"):
            return _Info(kind, all(i.nullable for i in infos))
        if name in _FLOAT_RESULT:
            return _Info("float", first.nullable)
        return _Info(kind, any(i.nullable for i in infos))


# Polars compilation -----------------------------------------------------------------------------

_POLARS_BINARY: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "**": lambda a, b: a**b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}
_POLARS_UNARY: dict[str, Callable[[pl.Expr], pl.Expr]] = {
    "is_null": lambda x: x.is_null(),
    "is_not_null": lambda x: x.is_not_null(),
    "floor": lambda x: x.floor(),
    "ceil": lambda x: x.ceil(),
    "sqrt": lambda x: x.sqrt(),
    "log": lambda x: x.log(),
    "log1p": lambda x: x.log1p(),
    "exp": lambda x: x.exp(),
    "str.lower": lambda x: x.str.to_lowercase(),
    "str.upper": lambda x: x.str.to_uppercase(),
    "str.len": lambda x: x.str.len_chars().cast(pl.Int64),
    "dt.year": lambda x: x.dt.year(),
}
_TYPED_LITERAL: dict[str, pl.DataType] = {
    "int": pl.Int64(),
    "float": pl.Float64(),
    "bool": pl.Boolean(),
    "str": pl.String(),
    "date": pl.Date(),
    "datetime": pl.Datetime("us"),
}


def _typed_groups(e: Expr) -> tuple[tuple[Expr, ...], bool]:
    """The inputs whose types combine into the node's type, and whether it is their type.

    A numeric literal in such a group takes the type of the group's other inputs (Polars'
    "dynamic" literals); it is also dynamic when the whole node is, which is how
    ``col("i32") + (lit(1) + 2)`` stays int32.
    """
    if e.kind == "binary":
        return (e.args, e.params[0] in ARITHMETIC) if e.params[0] not in LOGICAL else ((), False)
    if e.kind in ("unary", "alias"):
        return e.args, True
    if e.kind == "when":
        values = e.args[1::2] + (e.args[-1:] if e.params[0] and len(e.args) % 2 else ())
        return values, True
    if e.kind == "function":
        name = e.params[0]
        if name in ("fill_null", "clip", "round", "floor", "ceil", "least", "greatest", "coalesce"):
            return e.args, True
        if name in _FLOAT_RESULT:
            return e.args, False
    return (), False


def _dynamic_literals(root: Expr) -> set[int]:
    """The ids of the literal nodes that Polars should type from their context."""
    dynamic: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, inherited = stack.pop()
        if node.kind == "lit":
            if inherited and node.params[1] is None:
                dynamic.add(id(node))
            continue
        group, passes = _typed_groups(node)
        reads = {id(a): any(n.kind == "col" for n in a.walk()) for a in group}
        for a in node.args:
            if id(a) in reads:
                others = any(r for k, r in reads.items() if k != id(a))
                stack.append((a, (passes and inherited) or others))
            else:
                stack.append((a, False))
    return dynamic


class _PolarsCompiler(ExprVisitor[pl.Expr]):
    """Compiles a checked expression into one Polars expression."""

    def __init__(self, checker: _Checker, root: Expr) -> None:
        super().__init__()
        self.checker = checker
        self.dynamic = _dynamic_literals(root)

    def visit_col(self, e: Expr) -> pl.Expr:
        return pl.col(e.params[0])

    def visit_lit(self, e: Expr) -> pl.Expr:
        value, dtype = e.params
        if id(e) in self.dynamic or (value is None and dtype is None):
            return pl.lit(value)
        polars_dtype = dtype.polars if dtype else _TYPED_LITERAL[_literal_kind(value, None)]
        return pl.lit(value, dtype=polars_dtype)

    def visit_binary(self, e: Expr) -> pl.Expr:
        left, right = (self.visit(a) for a in e.args)
        if e.params[0] == "**" and self.checker.visit(e.args[0]).kind != "float":
            # Integer powers overflow or fail on negative exponents; Spark's pow is a double too.
            left = left.cast(pl.Float64)
        if e.params[0] == "/" and not any(a.kind == "col" for a in e.args[1].walk()):
            # Polars divides by a scalar as a multiplication by its reciprocal, which is not
            # correctly rounded and so differs between one-row and many-row batches (an
            # update and its retraction must compute the same value). Dividing by a column is
            # exact: make the divisor a column without changing its value (times one, which
            # keeps -0.0 and NaN; the division is then in float64, as a literal's).
            right = right * (left.is_null().cast(pl.Float64) * 0 + 1)
        return _POLARS_BINARY[e.params[0]](left, right)

    def visit_unary(self, e: Expr) -> pl.Expr:
        inner = self.visit(e.args[0])
        return {"-": lambda: -inner, "~": lambda: ~inner, "abs": inner.abs}[e.params[0]]()

    def visit_alias(self, e: Expr) -> pl.Expr:
        return self.visit(e.args[0]).alias(e.params[0])

    def visit_cast(self, e: Expr) -> pl.Expr:
        return self.visit(e.args[0]).cast(e.params[0].polars, strict=False)

    def visit_when(self, e: Expr) -> pl.Expr:
        args = [self.visit(a) for a in e.args]
        chain: Any = pl
        for condition, value in zip(args[0::2], args[1::2], strict=False):
            chain = chain.when(condition).then(value)
        return chain.otherwise(args[-1]) if e.params[0] else chain  # type: ignore[no-any-return]

    def visit_function(self, e: Expr) -> pl.Expr:
        name, extra = e.params[0], e.params[1:]
        args = [self.visit(a) for a in e.args]
        x = args[0]
        if name in _POLARS_UNARY:
            return _POLARS_UNARY[name](x)
        if name == "fill_null":
            return x.fill_null(args[1])
        if name == "round":
            return x.round(extra[0], mode="half_away_from_zero")
        if name == "clip":
            bounds = iter(args[1:])
            lower, upper = (next(bounds) if has else None for has in extra)
            return x.clip(lower, upper)
        if name == "hash":
            return x.hash(extra[0]).reinterpret(signed=True)
        if name == "is_in":
            return self._is_in(e, x, extra[0])
        if name == "str.contains":
            return x.str.contains(extra[0], literal=True)
        if name == "str.starts_with":
            return x.str.starts_with(extra[0])
        if name == "str.ends_with":
            return x.str.ends_with(extra[0])
        if name == "least":
            return pl.min_horizontal(*args)
        if name == "greatest":
            return pl.max_horizontal(*args)
        if name == "coalesce":
            return pl.coalesce(*args)
        if name == "concat_str":
            kinds = [self.checker.visit(a).kind for a in e.args]
            strings = [
                a if k == "str" else a.cast(pl.String) for a, k in zip(args, kinds, strict=True)
            ]
            return pl.concat_str(strings, separator=extra[0])
        raise NotImplementedError(name)

    def _is_in(self, e: Expr, x: pl.Expr, values: tuple[Any, ...]) -> pl.Expr:
        # Both sides are widened to one type, so int32 columns match Python ints and an int
        # column matches 2.0, without depending on Polars' list-type coercions.
        kinds = [self.checker.visit(e.args[0]).kind, *(_literal_kind(v, None) for v in values)]
        kind = _unify([_Info(k, False) for k in kinds]) or "null"
        dtype = _TYPED_LITERAL.get(kind, pl.Null())
        return x.cast(dtype).is_in(pl.Series(values, dtype=dtype).implode())


def compile_polars(expr: Expr, schema: Schema) -> pl.Expr:
    """Check ``expr`` against ``schema`` and compile it to a Polars expression.

    The result is aliased to :meth:`~ddflow.expr.nodes.Expr.output_name` when the expression
    has one.

    >>> from ddflow.expr.nodes import col
    >>> s = Schema({"x": "int32"})
    >>> pl.DataFrame({"x": [1, 2]}, schema=s.polars_schema()).select(
    ...     compile_polars(10 - col("x"), s)
    ... ).to_dict(as_series=False)
    {'x': [9, 8]}
    """
    checker = _Checker(schema)
    checker.visit(expr)
    compiled = _PolarsCompiler(checker, expr).visit(expr)
    name = expr.output_name()
    return compiled if name is None or expr.kind == "alias" else compiled.alias(name)


def output_types(exprs: Sequence[Expr], names: Sequence[str], schema: Schema) -> list[DType]:
    """Check expressions against ``schema`` and infer the types of the columns they make.

    ``names`` are the output names (see :func:`ddflow.expr.nodes.named_exprs`); one Polars schema
    resolution serves all the expressions.

    >>> from ddflow.expr.nodes import col
    >>> s = Schema({"x": "int32", "f": "float64?"})
    >>> output_types([col("x") * 2, col("f") > col("x")], ["a", "b"], s)
    [DType('int32'), DType('bool?')]
    """
    checker = _Checker(schema)
    infos = [checker.visit(e) for e in exprs]
    compiled = [
        _PolarsCompiler(checker, e).visit(e).alias(n) for e, n in zip(exprs, names, strict=True)
    ]
    try:
        polars_schema = (
            pl.LazyFrame(schema=schema.polars_schema()).select(compiled).collect_schema()
        )
    except pl.exceptions.PolarsError as error:
        # Blame the smallest failing node: its site is the line that went wrong.
        for node in (n for e in exprs for n in reversed(list(e.walk()))):
            message = _polars_error(node, checker, schema)
            if message is not None:
                _fail(f"cannot compute {node!r}: {message}", node.site)
        _fail(f"cannot compute {exprs[0]!r}: {str(error).splitlines()[0]}", exprs[0].site)
    result = []
    for e, name, info in zip(exprs, names, infos, strict=True):
        dtype = polars_schema[name]
        site = e.args[0].site if e.kind == "alias" else e.site  # the alias may be named_exprs' own
        if dtype == pl.Null():
            _fail(
                f'{e!r} is always null and has no type: give it one, e.g. lit(None, dtype="int64")',
                site,
            )
        try:
            result.append(DType.from_polars(dtype, info.nullable))
        except SchemaError:
            _fail(
                f"{e!r} makes Polars type {dtype}, which ddflow does not support; add .cast(...)",
                site,
            )
    return result


def _polars_error(e: Expr, checker: _Checker, schema: Schema) -> str | None:
    """The first line of the error Polars raises when resolving ``e`` alone, if it does."""
    try:
        pl.LazyFrame(schema=schema.polars_schema()).select(
            _PolarsCompiler(checker, e).visit(e)
        ).collect_schema()
    except pl.exceptions.PolarsError as error:
        return str(error).splitlines()[0]
    return None
