"""Column expressions: immutable trees that are checked and compiled once, when a dataflow is built.

An :class:`Expr` is a node ``(kind, args, params)``: ``args`` are the child expressions and
``params`` the plain Python values the node needs. Every node remembers the user's line that
created it (``site``), so a mistake found at build time points at that line. The kinds are few,
so that each runtime compiles the same tree with one
:class:`~ddflow.expr.compiler.ExprVisitor`:

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
``function``  ``(name, *extra)``               the inputs (see ``FUNCTIONS``)
============  ===============================  ===========================================

Rules that callers and users can rely on (typing and nullability: :mod:`ddflow.expr.compiler`):

* **Names.** ``col("x")`` is named ``x``; ``e.alias(n)`` is named ``n``; a ``when`` takes the
  name of its first value (a ``then`` or ``otherwise``) that has one; every other expression
  takes the name of its first (leftmost) input that has one, so ``1 + col("x")`` is named ``x``.
  An expression with no name (``lit(1)``, ``lit(1) + lit(2)``) must be given one with
  ``.alias`` (or a ``{name: expr}`` dict) before it can be a column: :func:`named_exprs` and
  :func:`output_schema` raise :class:`~ddflow.errors.ExpressionError` otherwise.
* **Literals.** Python scalars combined with expressions become literals (``col("x") + 1``);
  ``col("x") == None`` is an error (it would be null, never true): use ``.is_null()``.
* **Truth.** ``bool(expr)`` is an error, so ``a < b < c``, ``and``, ``or`` and ``not`` on
  expressions fail loudly: use ``(a < b) & (b < c)``, ``&``, ``|`` and ``~``.
* **Rounding.** ``round`` rounds half away from zero (as SQL and Spark do, unlike Python's
  ``round``).

>>> import polars as pl
>>> from ddflow.schema import Schema
>>> s = Schema({"x": "int64", "name": "str?"})
>>> e = (col("x") * 2 + 1).alias("y")
>>> e, sorted(expr_columns(e))
(((col("x") * 2) + 1).alias("y"), ['x'])
>>> output_schema([e, col("name").str.upper()], s)
Schema({'y': 'int64', 'name': 'str?'})
>>> pl.DataFrame({"x": [1, 2], "name": ["a", None]}).select(compile_polars(e, s))["y"].to_list()
[3, 5]
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NoReturn

import numpy as np

from ddflow.errors import CallSite, ExpressionError, SchemaError, call_site
from ddflow.expr.compiler import FUNCTIONS, ExprVisitor, compile_polars, output_types
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

_HORIZONTAL = ("least", "greatest", "coalesce", "concat_str")
Scalar = None | bool | int | float | str | _dt.date | _dt.datetime
IntoExpr = Any  # an Expr or a Python scalar, which becomes a literal


def _fail(message: str, site: CallSite | None) -> NoReturn:
    raise ExpressionError(message, site=site)


def _python_scalar(value: Any, site: CallSite | None) -> Scalar:
    """A literal value as a plain Python scalar, or an error naming what was given."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str, _dt.date)):
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            _fail(f"integer literal {value} does not fit in int64", site)
        if isinstance(value, _dt.datetime) and value.tzinfo is not None:
            _fail(f"datetime literal {value!r} has a time zone; ddflow datetimes are naive", site)
        return value
    _fail(
        f"cannot use a {type(value).__name__} ({value!r}) in an expression; expected an "
        "expression (col(...)), or a None, bool, int, float, str, date or datetime",
        site,
    )


def _into(value: IntoExpr, site: CallSite | None) -> Expr:
    if isinstance(value, Expr):
        return value
    return Expr("lit", (), (_python_scalar(value, site), None), site)


def _operator(op: str, reflected: bool = False) -> Callable[[Expr, IntoExpr], Expr]:
    def method(self: Expr, other: IntoExpr) -> Expr:
        return self._binary(op, other, reflected)

    method.__name__ = f"operator {op}"
    return method


class Expr:
    """A column expression: an immutable tree built with :func:`col`, :func:`lit` and operators.

    ``==`` builds an expression (use :meth:`equals` to compare trees), and an expression has
    no truth value: combine conditions with ``&``, ``|``, ``~``, not ``and``, ``or``, ``not``.

    >>> e = (col("a") + 1 > col("b")) & ~col("flag")
    >>> e
    (((col("a") + 1) > col("b")) & (~col("flag")))
    >>> e.kind, e.params, e.output_name()
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

    def __reduce__(self) -> tuple[Any, ...]:  # (sent to worker processes)
        return (type(self), (self.kind, self.args, self.params, self.site))

    # Operators --------------------------------------------------------------------------------

    def _binary(self, op: str, other: IntoExpr, reflected: bool = False) -> Expr:
        site = call_site()
        right = _into(other, site)
        if op in ("==", "!=") and right.kind == "lit" and right.params[0] is None:
            method = "is_null" if op == "==" else "is_not_null"
            _fail(f"comparing with None gives null, never True: use .{method}()", site)
        args = (right, self) if reflected else (self, right)
        return Expr("binary", args, (op,), site)

    __add__, __radd__ = _operator("+"), _operator("+", reflected=True)
    __sub__, __rsub__ = _operator("-"), _operator("-", reflected=True)
    __mul__, __rmul__ = _operator("*"), _operator("*", reflected=True)
    __truediv__, __rtruediv__ = _operator("/"), _operator("/", reflected=True)
    __floordiv__, __rfloordiv__ = _operator("//"), _operator("//", reflected=True)
    __mod__, __rmod__ = _operator("%"), _operator("%", reflected=True)
    __pow__, __rpow__ = _operator("**"), _operator("**", reflected=True)
    __eq__ = _operator("==")  # type: ignore[assignment]
    __ne__ = _operator("!=")  # type: ignore[assignment]
    __lt__, __le__ = _operator("<"), _operator("<=")
    __gt__, __ge__ = _operator(">"), _operator(">=")
    __and__, __rand__ = _operator("&"), _operator("&", reflected=True)
    __or__, __ror__ = _operator("|"), _operator("|", reflected=True)
    __xor__, __rxor__ = _operator("^"), _operator("^", reflected=True)

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

    def _function(self, name: str) -> Expr:
        return Expr("function", (self,), (name,), call_site())

    def abs(self) -> Expr:
        """The absolute value.

        >>> col("x").abs()
        col("x").abs()
        """
        return Expr("unary", (self,), ("abs",), call_site())

    def alias(self, name: str) -> Expr:
        """The same values under another name.

        >>> (col("x") + 1).alias("y").output_name()
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
        site = call_site()
        return Expr("function", (self, _into(value, site)), ("fill_null",), site)

    def is_in(self, values: Iterable[Any]) -> Expr:
        """Whether the value is one of the given Python values (null where the value is null).

        >>> col("x").is_in([1, 2])
        col("x").is_in([1, 2])
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

    # Inspection -------------------------------------------------------------------------------

    def output_name(self) -> str | None:
        """The name of the column this expression makes, or None when it needs an alias.

        >>> (1 + col("x")).output_name(), lit(1).output_name()
        ('x', None)
        """
        if self.kind in ("col", "alias"):
            return str(self.params[0])
        inputs = self.args
        if self.kind == "when":
            inputs = self.args[1::2] + (self.args[-1:] if self.params[0] else ())
        return next((n for n in (a.output_name() for a in inputs) if n is not None), None)

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

    # Namespaces last: inside the class body, ``str`` names this property from here on.

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


def _key(e: Expr) -> tuple[Any, ...]:
    return (e.kind, _typed(e.params), tuple(_key(a) for a in e.args))


def _typed(value: Any) -> Any:
    # Types are part of the key because 1 == 1.0 == True in Python but not in a column.
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    return (type(value), value)


def _show_param(x: Any) -> str:
    if isinstance(x, tuple):  # the values of is_in
        return "[" + ", ".join(_show_param(v) for v in x) + "]"
    return json.dumps(x) if isinstance(x, str) else repr(x)


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
        shown += [_show_param(x) for x in p[1:]]
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
        # The conversion's message starts "column 'literal' (...) at row 0: "; keep the reason.
        _fail(f"lit({scalar!r}, dtype={dtype!r}): {e.message.split(': ', 1)[-1]}", site)
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

    >>> when(col("x") < 0).then(-col("x")).otherwise(col("x")).output_name()
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

    >>> coalesce(col("a"), col("b"), 0).output_name()
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
        name = e.output_name()
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


def output_dtype(expr: Expr, schema: Schema) -> DType:
    """The ddflow type of the values ``expr`` makes from data of ``schema``, without data.

    >>> s = Schema({"x": "int32", "f": "float64?"})
    >>> output_dtype(col("x") + 1, s), output_dtype(col("x") / 2, s), output_dtype(col("f") > 0, s)
    (DType('int32'), DType('float64'), DType('bool?'))
    >>> output_dtype(col("f").fill_null(0), s)
    DType('float64')
    """
    return output_types([expr], ["value"], schema)[0]


def output_schema(
    exprs: Iterable[Expr | str] | Mapping[str, IntoExpr] | Expr | str, schema: Schema
) -> Schema:
    """The schema of ``select(exprs)`` on data of ``schema`` (see :func:`named_exprs`).

    >>> s = Schema({"a": "int64", "b": "str?"})
    >>> output_schema({"n": col("b").str.len(), "a2": col("a") * 2}, s)
    Schema({'n': 'int64?', 'a2': 'int64'})
    """
    named = named_exprs(exprs)
    names = [e.output_name() or "" for e in named]
    return Schema(zip(names, output_types(named, names, schema), strict=True))
