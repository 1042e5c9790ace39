"""Column expressions: immutable trees that are checked and compiled once, when a dataflow is built.

An :class:`Expr` is a node ``(kind, args, params)``: ``args`` are the child expressions and
``params`` the plain Python values the node needs. Every node remembers the user's line that
created it (``site``), so a mistake found at build time points at that line. The kinds are few,
so that each runtime compiles the same tree with one visitor (:class:`ExprVisitor`):

============  ===============================  ===========================================
kind          params                           args
============  ===============================  ===========================================
``col``       ``(name,)``                      ``()``
``lit``       ``(value, DType | None)``        ``()``
``binary``    ``(op,)``: ``+ - * / // % **``   ``(left, right)``
              ``== != < <= > >= & | ^``
``unary``     ``(op,)``: ``- ~ abs``           ``(operand,)``
``alias``     ``(name,)``                      ``(operand,)``
``cast``      ``(DType,)``                     ``(operand,)``
``when``      ``(has_otherwise,)``             ``(cond1, value1, ..., [otherwise])``
``function``  ``(name, *extra)``               the inputs (see :data:`FUNCTIONS`)
============  ===============================  ===========================================

Rules that callers and users can rely on:

* **Names.** ``col("x")`` is named ``x``; ``e.alias(n)`` is named ``n``; a ``when`` takes the
  name of its first value (a ``then`` or ``otherwise``) that has one; every other expression
  takes the name of its first (leftmost) input that has one, so ``1 + col("x")`` is named ``x``.
  An expression with no name (``lit(1)``, ``lit(1) + lit(2)``) must be given one with
  ``.alias`` (or a ``{name: expr}`` dict) before it can be a column: :func:`output_schema`
  raises :class:`~ddflow.errors.ExpressionError` otherwise.
* **Types.** Operand families are checked by ddflow (``+`` needs numbers, ``&`` needs bools,
  ``==`` needs comparable operands, ``.str`` needs strings); bool is not a number. The exact
  result type is the Polars result type, which must be a ddflow type. A Python ``int`` or
  ``float`` combined with an expression takes that expression's type (``col("i32") + 1`` is
  ``int32``); combined with nothing it is ``int64`` / ``float64``. ``/`` and ``**`` always give
  floats; ``.str.len()`` gives ``int64``, ``.dt.year()`` ``int32`` and ``.hash()`` ``int64``.
* **Nulls.** A result is nullable iff an input it reads is nullable, or the operation can make
  a null by itself: ``cast`` (a value that does not convert becomes null, except widening
  casts that always succeed), ``//`` and ``%`` on integers (division by zero), and ``when``
  without ``otherwise``. ``fill_null(v)`` is nullable iff ``v`` is; ``is_null`` never is;
  ``least``, ``greatest`` and ``coalesce`` skip nulls, so they are nullable iff all inputs
  are. NaN is a float value, not a null.
* **Rounding.** ``round`` rounds half away from zero (as SQL and Spark do, unlike Python's
  ``round``); ``floor`` and ``ceil`` keep the input type.

>>> from ddflow.schema import Schema
>>> s = Schema({"x": "int64", "name": "str?"})
>>> e = (col("x") * 2 + 1).alias("y")
>>> e, sorted(expr_columns(e))
((((col("x") * 2) + 1)).alias("y"), ['x'])
>>> output_schema([e, col("name").str.upper()], s)
Schema({'y': 'int64', 'name': 'str?'})
>>> pl.DataFrame({"x": [1, 2], "name": ["a", None]}).select(compile_polars(e, s))["y"].to_list()
[3, 5]
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar

import numpy as np
import polars as pl

from ddflow.errors import CallSite, ExpressionError, SchemaError, call_site
from ddflow.schema import DType, Schema, TypeSpec

__all__ = [
    "FUNCTIONS",
    "Expr",
    "ExprVisitor",
    "When",
    "coalesce",
    "col",
    "compile_polars",
    "concat_str",
    "expr_columns",
    "greatest",
    "least",
    "lit",
    "named_exprs",
    "output_dtype",
    "output_schema",
    "when",
]

_ARITHMETIC = ("+", "-", "*", "/", "//", "%", "**")
_COMPARISON = ("==", "!=", "<", "<=", ">", ">=")
_LOGICAL = ("&", "|", "^")

#: The functions of ``function`` nodes: name -> the kinds of input they take.
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
_HORIZONTAL = ("least", "greatest", "coalesce", "concat_str")
_FLOAT_RESULT = ("sqrt", "log", "log1p", "exp")

Scalar = None | bool | int | float | str | _dt.date | _dt.datetime
IntoExpr = Any  # an Expr or a Python scalar, which becomes a literal


def _fail(message: str, site: CallSite | None) -> NoReturn:
    raise ExpressionError(message, site=site)


def _python_scalar(value: Any, site: CallSite | None) -> Scalar:
    """A literal value as a plain Python scalar, or an error naming what was given."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str, _dt.date)):
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 63:
            _fail(f"integer literal {value} does not fit in int64", site)
        if isinstance(value, _dt.datetime) and value.tzinfo is not None:
            _fail(f"datetime literal {value!r} has a time zone; ddflow datetimes are naive", site)
        return value  # type: ignore[no-any-return]
    _fail(
        f"cannot use a {type(value).__name__} ({value!r}) in an expression; expected an "
        "expression (col(...)), or a None, bool, int, float, str, date or datetime",
        site,
    )


def _into(value: IntoExpr, site: CallSite | None) -> Expr:
    if isinstance(value, Expr):
        return value
    return Expr("lit", (), (_python_scalar(value, site), None), site)


class Expr:
    """A column expression: an immutable tree built with :func:`col`, :func:`lit` and operators.

    ``==`` builds an expression (use :meth:`equals` to compare trees), and an expression has
    no truth value: combine conditions with ``&``, ``|``, ``~``, not ``and``, ``or``, ``not``.

    >>> e = (col("a") + 1 > col("b")) & ~col("flag")
    >>> e
    (((col("a") + 1) > col("b")) & (~col("flag")))
    >>> e.kind, e.params, e.output_name
    ('binary', ('&',), 'a')
    """

    __slots__ = ("args", "kind", "params", "site")
    kind: str
    args: tuple[Expr, ...]
    params: tuple[Any, ...]
    site: CallSite | None

    def __init__(
        self,
        kind: str,
        args: tuple[Expr, ...],
        params: tuple[Any, ...],
        site: CallSite | None,
    ) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "site", site)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("expressions are immutable")

    # Operators --------------------------------------------------------------------------------

    def _binary(self, op: str, other: IntoExpr, reflected: bool = False) -> Expr:
        site = call_site()
        right = _into(other, site)
        if op in ("==", "!=") and right.kind == "lit" and right.params[0] is None:
            method = "is_null" if op == "==" else "is_not_null"
            _fail(f"comparing with None gives null, never True: use .{method}()", site)
        args = (right, self) if reflected else (self, right)
        return Expr("binary", args, (op,), site)

    def __add__(self, other: IntoExpr) -> Expr:
        return self._binary("+", other)

    def __radd__(self, other: IntoExpr) -> Expr:
        return self._binary("+", other, reflected=True)

    def __sub__(self, other: IntoExpr) -> Expr:
        return self._binary("-", other)

    def __rsub__(self, other: IntoExpr) -> Expr:
        return self._binary("-", other, reflected=True)

    def __mul__(self, other: IntoExpr) -> Expr:
        return self._binary("*", other)

    def __rmul__(self, other: IntoExpr) -> Expr:
        return self._binary("*", other, reflected=True)

    def __truediv__(self, other: IntoExpr) -> Expr:
        return self._binary("/", other)

    def __rtruediv__(self, other: IntoExpr) -> Expr:
        return self._binary("/", other, reflected=True)

    def __floordiv__(self, other: IntoExpr) -> Expr:
        return self._binary("//", other)

    def __rfloordiv__(self, other: IntoExpr) -> Expr:
        return self._binary("//", other, reflected=True)

    def __mod__(self, other: IntoExpr) -> Expr:
        return self._binary("%", other)

    def __rmod__(self, other: IntoExpr) -> Expr:
        return self._binary("%", other, reflected=True)

    def __pow__(self, other: IntoExpr) -> Expr:
        return self._binary("**", other)

    def __rpow__(self, other: IntoExpr) -> Expr:
        return self._binary("**", other, reflected=True)

    def __eq__(self, other: IntoExpr) -> Expr:  # type: ignore[override]
        return self._binary("==", other)

    def __ne__(self, other: IntoExpr) -> Expr:  # type: ignore[override]
        return self._binary("!=", other)

    def __lt__(self, other: IntoExpr) -> Expr:
        return self._binary("<", other)

    def __le__(self, other: IntoExpr) -> Expr:
        return self._binary("<=", other)

    def __gt__(self, other: IntoExpr) -> Expr:
        return self._binary(">", other)

    def __ge__(self, other: IntoExpr) -> Expr:
        return self._binary(">=", other)

    def __and__(self, other: IntoExpr) -> Expr:
        return self._binary("&", other)

    def __rand__(self, other: IntoExpr) -> Expr:
        return self._binary("&", other, reflected=True)

    def __or__(self, other: IntoExpr) -> Expr:
        return self._binary("|", other)

    def __ror__(self, other: IntoExpr) -> Expr:
        return self._binary("|", other, reflected=True)

    def __xor__(self, other: IntoExpr) -> Expr:
        return self._binary("^", other)

    def __rxor__(self, other: IntoExpr) -> Expr:
        return self._binary("^", other, reflected=True)

    def __neg__(self) -> Expr:
        return Expr("unary", (self,), ("-",), call_site())

    def __invert__(self) -> Expr:
        return Expr("unary", (self,), ("~",), call_site())

    def __abs__(self) -> Expr:
        return Expr("unary", (self,), ("abs",), call_site())

    # Expressions are keys of plan dictionaries, so they hash by identity even though ``==``
    # builds an expression.
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        _fail(
            f"the expression {self!r} has no truth value: use & (and), | (or), ~ (not) instead "
            "of and/or/not, and write a < b < c as (a < b) & (b < c)",
            call_site(),
        )

    # Methods ----------------------------------------------------------------------------------

    def _function(self, name: str, *extra: Any, args: tuple[Expr, ...] = ()) -> Expr:
        return Expr("function", (self, *args), (name, *extra), call_site())

    def abs(self) -> Expr:
        """The absolute value.

        >>> col("x").abs()
        col("x").abs()
        """
        return Expr("unary", (self,), ("abs",), call_site())

    def alias(self, name: str) -> Expr:
        """The same values under another name.

        >>> (col("x") + 1).alias("y").output_name
        'y'
        """
        site = call_site()
        if not isinstance(name, str) or not name:
            _fail(f"alias needs a non-empty string name, got {name!r}", site)
        return Expr("alias", (self,), (name,), site)

    def cast(self, dtype: TypeSpec) -> Expr:
        """The values converted to another ddflow type; values that do not convert become null.

        >>> col("x").cast("float64")
        col("x").cast("float64")
        """
        site = call_site()
        try:
            target = DType.parse(dtype)
        except SchemaError as e:
            _fail(f"cast: {e.message}", site)
        return Expr("cast", (self,), (target,), site)

    def is_null(self) -> Expr:
        """Whether the value is null (never null itself).

        >>> col("x").is_null()
        col("x").is_null()
        """
        return self._function("is_null")

    def is_not_null(self) -> Expr:
        """Whether the value is not null (never null itself).

        >>> col("x").is_not_null()
        col("x").is_not_null()
        """
        return self._function("is_not_null")

    def fill_null(self, value: IntoExpr) -> Expr:
        """The value, or ``value`` where it is null.

        >>> col("x").fill_null(0)
        col("x").fill_null(0)
        """
        return Expr("function", (self, _into(value, call_site())), ("fill_null",), call_site())

    def is_in(self, values: Iterable[Any]) -> Expr:
        """Whether the value is one of the given Python values (null where the value is null).

        >>> col("x").is_in([1, 2])
        col("x").is_in((1, 2))
        """
        site = call_site()
        if isinstance(values, (str, bytes, Expr)) or not isinstance(values, Iterable):
            _fail(f"is_in needs a list of values, got {values!r}", site)
        items = tuple(_python_scalar(v, site) for v in values)
        if any(v is None for v in items):
            _fail("is_in cannot match None (it never equals anything): use .is_null()", site)
        return Expr("function", (self,), ("is_in", items), site)

    def round(self, decimals: int = 0) -> Expr:
        """The value rounded to ``decimals`` places, halves away from zero.

        >>> col("x").round(2)
        col("x").round(2)
        """
        site = call_site()
        if not isinstance(decimals, int) or isinstance(decimals, bool) or decimals < 0:
            _fail(f"round needs a non-negative int of decimals, got {decimals!r}", site)
        return Expr("function", (self,), ("round", decimals), site)

    def floor(self) -> Expr:
        """The largest integral value not above the value (same type as the input).

        >>> col("x").floor()
        col("x").floor()
        """
        return self._function("floor")

    def ceil(self) -> Expr:
        """The smallest integral value not below the value (same type as the input).

        >>> col("x").ceil()
        col("x").ceil()
        """
        return self._function("ceil")

    def sqrt(self) -> Expr:
        """The square root, a float (NaN for negative values).

        >>> col("x").sqrt()
        col("x").sqrt()
        """
        return self._function("sqrt")

    def log(self) -> Expr:
        """The natural logarithm, a float.

        >>> col("x").log()
        col("x").log()
        """
        return self._function("log")

    def log1p(self) -> Expr:
        """``log(1 + x)``, accurate for small ``x``.

        >>> col("x").log1p()
        col("x").log1p()
        """
        return self._function("log1p")

    def exp(self) -> Expr:
        """``e`` to the power of the value, a float.

        >>> col("x").exp()
        col("x").exp()
        """
        return self._function("exp")

    def clip(self, lower: IntoExpr = None, upper: IntoExpr = None) -> Expr:
        """The value limited to ``[lower, upper]``; a bound of None is no bound.

        >>> col("x").clip(0, 10)
        col("x").clip(0, 10)
        """
        site = call_site()
        if lower is None and upper is None:
            _fail("clip needs a lower bound, an upper bound or both", site)
        bounds = tuple(_into(b, site) for b in (lower, upper) if b is not None)
        return Expr(
            "function", (self, *bounds), ("clip", lower is not None, upper is not None), site
        )

    def hash(self, seed: int = 0) -> Expr:
        """A 64-bit hash of the value, as an int64.

        Hashes are for partitioning and sampling within one runtime and version: Polars and
        Spark hash differently, and Polars does not promise stable hashes across versions.

        >>> col("x").hash()
        col("x").hash(0)
        """
        site = call_site()
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            _fail(f"hash needs a non-negative int seed, got {seed!r}", site)
        return Expr("function", (self,), ("hash", seed), site)

    @property
    def str(self) -> _StrNamespace:
        """String functions: ``lower``, ``upper``, ``len``, ``contains``, ``starts_with``, ...

        >>> col("name").str.lower()
        col("name").str.lower()
        """
        return _StrNamespace(self)

    @property
    def dt(self) -> _DtNamespace:
        """Date and datetime functions: ``year``.

        >>> col("day").dt.year()
        col("day").dt.year()
        """
        return _DtNamespace(self)

    # Inspection -------------------------------------------------------------------------------

    @property
    def output_name(self) -> str | None:
        """The name of the column this expression makes, or None when it needs an alias.

        >>> (1 + col("x")).output_name, lit(1).output_name
        ('x', None)
        """
        if self.kind in ("col", "alias"):
            return str(self.params[0])
        inputs = self.args
        if self.kind == "when":
            inputs = self.args[1::2] + (self.args[-1:] if self.params[0] else ())
        return next((n for n in (a.output_name for a in inputs) if n is not None), None)

    def equals(self, other: Expr) -> bool:
        """Whether two expressions are the same tree (call sites are ignored).

        >>> (col("x") + 1).equals(col("x") + 1), (col("x") + 1).equals(col("x") + 1.0)
        (True, False)
        """
        return _key(self) == _key(other)

    def walk(self) -> Iterator[Expr]:
        """Every node of the tree, parents before children, leftmost first.

        >>> [e.kind for e in (col("x") + 1).walk()]
        ['binary', 'col', 'lit']
        """
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.args))

    def __repr__(self) -> str:
        return _render(self, bare_literal=False)


def _key(e: Expr) -> tuple[Any, ...]:
    # Types are part of the key because 1 == 1.0 == True in Python but not in a column.
    params = tuple((type(p), p) for p in e.params)
    return (e.kind, params, tuple(_key(a) for a in e.args))


def _render(e: Expr, bare_literal: bool) -> str:
    p = e.params
    if e.kind == "col":
        return f"col({json.dumps(p[0])})"
    if e.kind == "lit":
        value = json.dumps(p[0]) if isinstance(p[0], str) else repr(p[0])
        if bare_literal and p[1] is None:
            return value
        return f"lit({value})" if p[1] is None else f'lit({value}, dtype="{p[1]}")'
    if e.kind == "binary":
        left, right = e.args
        # Two bare literals would read as plain Python arithmetic.
        show_left = _render(left, bare_literal=right.kind != "lit")
        return f"({show_left} {p[0]} {_render(right, bare_literal=True)})"
    if e.kind == "unary":
        inner = _render(e.args[0], bare_literal=False)
        return f"{inner}.abs()" if p[0] == "abs" else f"({p[0]}{inner})"
    if e.kind == "alias":
        return f"{_render(e.args[0], False)}.alias({json.dumps(p[0])})"
    if e.kind == "cast":
        return f'{_render(e.args[0], False)}.cast("{p[0]}")'
    if e.kind == "when":
        parts = [
            f"{'when' if i == 0 else '.when'}({_render(c, False)}).then({_render(v, True)})"
            for i, (c, v) in enumerate(zip(e.args[0::2], e.args[1::2], strict=False))
        ]
        if p[0]:
            parts.append(f".otherwise({_render(e.args[-1], True)})")
        return "".join(parts)
    name = p[0]
    if name in _HORIZONTAL:
        inner = ", ".join(_render(a, False) for a in e.args)
        sep = f", separator={json.dumps(p[1])}" if name == "concat_str" and p[1] else ""
        return f"{name}({inner}{sep})"
    if name == "clip":
        bounds = iter(e.args[1:])
        shown = [_render(next(bounds), True) if has else "None" for has in p[1:]]
        extra = ", ".join(shown)
    else:
        shown = [_render(a, True) for a in e.args[1:]]
        shown += [json.dumps(x) if isinstance(x, str) else repr(x) for x in p[1:]]
        extra = ", ".join(shown)
    return f"{_render(e.args[0], False)}.{name}({extra})"


class _StrNamespace:
    """String functions of an expression (``expr.str``)."""

    __slots__ = ("_expr",)

    def __init__(self, expr: Expr) -> None:
        self._expr = expr

    def _call(self, name: str, *extra: Any) -> Expr:
        site = call_site()
        for value in extra:
            if not isinstance(value, str):
                _fail(f"str.{name.split('.')[1]} needs a str, got {value!r}", site)
        return Expr("function", (self._expr,), (name, *extra), site)

    def lower(self) -> Expr:
        """The string in lower case.

        >>> col("s").str.lower()
        col("s").str.lower()
        """
        return self._call("str.lower")

    def upper(self) -> Expr:
        """The string in upper case.

        >>> col("s").str.upper()
        col("s").str.upper()
        """
        return self._call("str.upper")

    def len(self) -> Expr:
        """The number of characters (not bytes), an int64.

        >>> col("s").str.len()
        col("s").str.len()
        """
        return self._call("str.len")

    def contains(self, literal: str) -> Expr:
        """Whether the string contains ``literal`` (plain text, not a regular expression).

        >>> col("s").str.contains("a.b")
        col("s").str.contains("a.b")
        """
        return self._call("str.contains", literal)

    def starts_with(self, prefix: str) -> Expr:
        """Whether the string starts with ``prefix``.

        >>> col("s").str.starts_with("ab")
        col("s").str.starts_with("ab")
        """
        return self._call("str.starts_with", prefix)

    def ends_with(self, suffix: str) -> Expr:
        """Whether the string ends with ``suffix``.

        >>> col("s").str.ends_with("yz")
        col("s").str.ends_with("yz")
        """
        return self._call("str.ends_with", suffix)


class _DtNamespace:
    """Date and datetime functions of an expression (``expr.dt``)."""

    __slots__ = ("_expr",)

    def __init__(self, expr: Expr) -> None:
        self._expr = expr

    def year(self) -> Expr:
        """The calendar year, an int32.

        >>> col("day").dt.year()
        col("day").dt.year()
        """
        return Expr("function", (self._expr,), ("dt.year",), call_site())


# Constructors -----------------------------------------------------------------------------------


def col(name: str) -> Expr:
    """The column ``name`` of the input.

    >>> col("src")
    col("src")
    """
    site = call_site()
    if not isinstance(name, str) or not name:
        _fail(f"col needs a non-empty column name, got {name!r}", site)
    return Expr("col", (), (name,), site)


def lit(value: Any, dtype: TypeSpec | None = None) -> Expr:
    """A constant. Without ``dtype`` its type comes from the value and its context.

    ``lit(None)`` needs a ``dtype`` unless it is combined with a typed expression.

    >>> lit(1), lit("a"), lit(None, dtype="int64")
    (lit(1), lit("a"), lit(None, dtype="int64?"))
    """
    site = call_site()
    scalar = _python_scalar(value, site)
    if dtype is None:
        return Expr("lit", (), (scalar, None), site)
    try:
        target = DType.parse(dtype).with_nullable(scalar is None)
        Schema({"literal": target}).rows_to_frame([scalar])
    except SchemaError as e:
        _fail(f"lit({scalar!r}, dtype={dtype!r}): {e.message}", site)
    return Expr("lit", (), (scalar, target), site)


class When:
    """A ``when(condition)`` waiting for its ``.then(value)``.

    >>> when(col("x") > 0).then(1).otherwise(-1)
    when((col("x") > 0)).then(1).otherwise(-1)
    """

    __slots__ = ("_branches", "_condition")

    def __init__(self, branches: tuple[Expr, ...], condition: Expr) -> None:
        self._branches = branches
        self._condition = condition

    def then(self, value: IntoExpr) -> _Then:
        """The value where the condition holds (and no earlier condition did).

        >>> when(col("b")).then(col("x"))
        when(col("b")).then(col("x"))
        """
        site = call_site()
        branches = (*self._branches, self._condition, _into(value, site))
        return _Then("when", branches, (False,), site)

    def __bool__(self) -> bool:
        _fail("when(...) has no truth value; finish it with .then(...)", call_site())


class _Then(Expr):
    """A ``when(...).then(...)`` chain: an expression (null where no condition holds)."""

    __slots__ = ()

    def when(self, condition: IntoExpr) -> When:
        """Another condition, tried when the earlier ones do not hold.

        >>> when(col("x") > 9).then("big").when(col("x") > 0).then("small").otherwise("none")
        when((col("x") > 9)).then("big").when((col("x") > 0)).then("small").otherwise("none")
        """
        return When(self.args, _into(condition, call_site()))

    def otherwise(self, value: IntoExpr) -> Expr:
        """The value where no condition holds.

        >>> when(col("b")).then(1).otherwise(0).kind
        'when'
        """
        site = call_site()
        return Expr("when", (*self.args, _into(value, site)), (True,), site)


def when(condition: IntoExpr) -> When:
    """Start a conditional: ``when(c1).then(v1).when(c2).then(v2).otherwise(v)``.

    >>> when(col("x") < 0).then(-col("x")).otherwise(col("x")).output_name
    'x'
    """
    return When((), _into(condition, call_site()))


def _horizontal(name: str, exprs: tuple[IntoExpr, ...], *extra: Any) -> Expr:
    site = call_site()
    if not exprs:
        _fail(f"{name} needs at least one expression", site)
    return Expr("function", tuple(_into(e, site) for e in exprs), (name, *extra), site)


def least(*exprs: IntoExpr) -> Expr:
    """The smallest of the values in each row, skipping nulls.

    >>> least(col("a"), col("b"), 0)
    least(col("a"), col("b"), lit(0))
    """
    return _horizontal("least", exprs)


def greatest(*exprs: IntoExpr) -> Expr:
    """The largest of the values in each row, skipping nulls.

    >>> greatest(col("a"), col("b"))
    greatest(col("a"), col("b"))
    """
    return _horizontal("greatest", exprs)


def coalesce(*exprs: IntoExpr) -> Expr:
    """The first value in each row that is not null.

    >>> coalesce(col("a"), col("b"), 0).output_name
    'a'
    """
    return _horizontal("coalesce", exprs)


def concat_str(*exprs: IntoExpr, separator: str = "") -> Expr:
    """The values as strings, joined by ``separator``; null if any value is null.

    >>> concat_str(col("first"), col("last"), separator=" ")
    concat_str(col("first"), col("last"), separator=" ")
    """
    if not isinstance(separator, str):
        _fail(f"concat_str needs a str separator, got {separator!r}", call_site())
    return _horizontal("concat_str", exprs, separator)


def expr_columns(expr: Expr) -> set[str]:
    """The names of the input columns an expression reads.

    >>> sorted(expr_columns(when(col("a") > 0).then(col("b")).otherwise(lit(0))))
    ['a', 'b']
    """
    return {e.params[0] for e in expr.walk() if e.kind == "col"}


# Visitors ---------------------------------------------------------------------------------------

T = TypeVar("T")


class ExprVisitor(Generic[T]):
    """Dispatches on the node kind: ``visit(e)`` calls ``visit_<kind>(e)``, memoized per node.

    Runtimes compile expressions by subclassing it; so does the type checker.

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
        return f"{_render(e, True)} is {info.kind}"

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
        if op in _ARITHMETIC:
            if not (left.numeric and right.numeric):
                self._mismatch(e, f"'{op}' needs numbers")
            if op in ("/", "**"):
                return _Info("float", nullable)
            kind = _unify([left, right]) or "float"
            # Integer // and % by zero give null.
            return _Info(kind, nullable or (op in ("//", "%") and kind in ("int", "null")))
        if op in _COMPARISON:
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
        if (source in temporal) != (target.kind in temporal) and "str" not in (source, target.kind):
            if source != "null":
                self._mismatch(e, f"cannot cast {source} to {target.name}")
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
        return (e.args, e.params[0] in _ARITHMETIC) if e.params[0] not in _LOGICAL else ((), False)
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
        reads = {id(a): bool(expr_columns(a)) for a in group}
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

    The result is aliased to :attr:`Expr.output_name` when the expression has one.

    >>> s = Schema({"x": "int32"})
    >>> pl.DataFrame({"x": [1, 2]}, schema=s.polars_schema()).select(
    ...     compile_polars(10 - col("x"), s)
    ... ).to_dict(as_series=False)
    {'x': [9, 8]}
    """
    checker = _Checker(schema)
    checker.visit(expr)
    compiled = _PolarsCompiler(checker, expr).visit(expr)
    name = expr.output_name
    return compiled if name is None or expr.kind == "alias" else compiled.alias(name)


def named_exprs(
    exprs: Iterable[Expr | str] | Mapping[str, IntoExpr] | Expr | str,
) -> tuple[Expr, ...]:
    """Expressions as a select lists them, each with its output name; a name twice is an error.

    Strings are column names (also as values of a mapping: use ``lit("text")`` for text), and
    the keys of a mapping name its values.

    >>> named_exprs({"total": col("a") + col("b"), "one": 1})
    ((col("a") + col("b")).alias("total"), lit(1).alias("one"))
    >>> named_exprs(["a", col("b") * 2])
    (col("a"), (col("b") * 2))
    """
    site = call_site()
    if isinstance(exprs, Mapping):
        items = [
            (col(v) if isinstance(v, str) else _into(v, site)).alias(k) for k, v in exprs.items()
        ]
    elif isinstance(exprs, (Expr, str)):
        items = [col(exprs) if isinstance(exprs, str) else exprs]
    else:
        items = [col(e) if isinstance(e, str) else _into(e, site) for e in exprs]
    seen: dict[str, Expr] = {}
    for e in items:
        name = e.output_name
        if name is None:
            _fail(f"{e!r} reads no column, so it has no name: give it one with .alias(...)", e.site)
        if name.startswith("__"):
            _fail(
                f"output name {name!r} is reserved: names starting with '__' are ddflow's", e.site
            )
        if name in seen:
            _fail(
                f"two expressions make the column {name!r}: {seen[name]!r} and {e!r}; use .alias",
                e.site,
            )
        seen[name] = e
    return tuple(items)


def _output_types(exprs: Sequence[Expr], names: Sequence[str], schema: Schema) -> list[DType]:
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
        message = str(error).splitlines()[0]
        culprit = next((e for e in exprs if _fails_alone(e, checker, schema)), exprs[0])
        _fail(f"cannot compute {culprit!r}: {message}", culprit.site)
    result = []
    for e, name, info in zip(exprs, names, infos, strict=True):
        dtype = polars_schema[name]
        if dtype == pl.Null():
            _fail(
                f'{e!r} is always null and has no type: give it one, e.g. lit(None, dtype="int64")',
                e.site,
            )
        try:
            result.append(DType.from_polars(dtype, info.nullable))
        except SchemaError:
            _fail(
                f"{e!r} makes Polars type {dtype}, which ddflow does not support; add .cast(...)",
                e.site,
            )
    return result


def _fails_alone(e: Expr, checker: _Checker, schema: Schema) -> bool:
    try:
        pl.LazyFrame(schema=schema.polars_schema()).select(
            _PolarsCompiler(checker, e).visit(e)
        ).collect_schema()
    except pl.exceptions.PolarsError:
        return True
    return False


def output_dtype(expr: Expr, schema: Schema) -> DType:
    """The ddflow type of the values ``expr`` makes from data of ``schema``, without data.

    >>> s = Schema({"x": "int32", "f": "float64?"})
    >>> output_dtype(col("x") + 1, s), output_dtype(col("x") / 2, s), output_dtype(col("f") > 0, s)
    (DType('int32'), DType('float64'), DType('bool?'))
    >>> output_dtype(col("f").fill_null(0), s)
    DType('float64')
    """
    return _output_types([expr], ["value"], schema)[0]


def output_schema(
    exprs: Iterable[Expr | str] | Mapping[str, IntoExpr] | Expr | str, schema: Schema
) -> Schema:
    """The schema of ``select(exprs)`` on data of ``schema`` (see :func:`named_exprs`).

    >>> s = Schema({"a": "int64", "b": "str?"})
    >>> output_schema({"n": col("b").str.len(), "a2": col("a") * 2}, s)
    Schema({'n': 'int64?', 'a2': 'int64'})
    """
    named = named_exprs(exprs)
    names = [e.output_name or "" for e in named]
    return Schema(zip(names, _output_types(named, names, schema), strict=True))
