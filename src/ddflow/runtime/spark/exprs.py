"""Column expressions compiled to Spark ``Column`` objects, with the local runtime's semantics.

The same :class:`~ddflow.expr.nodes.Expr` tree compiles once for each runtime; this visitor
makes the Spark one. Its invariant: for every row, the Spark column holds the value the Polars
compilation (:func:`ddflow.expr.nodes.compile_polars`) holds, with the same type. Spark and
Polars disagree in many small places, each handled here:

* **Types.** Every node is computed in the type Polars gives it (``int32 + 1`` stays ``int32``,
  ``float32 * 0.5`` is computed in ``float32``, a comparison of ``float32`` with ``int64`` in
  ``float64``); the types are read from Polars itself, once, when the expression is compiled.
* **Arithmetic.** ``/`` follows IEEE (``x / 0`` is ``±inf`` or NaN, where Spark gives null);
  ``//`` and ``%`` round toward negative infinity (Spark's ``div`` and ``%`` truncate), integer
  ``//`` and ``%`` by zero give null; float ``%`` is ``a - b * floor(a / b)``.
* **Floats.** ``floor``/``ceil``/``round`` keep the float type (Spark returns integers) and the
  sign of zero; ``round`` is Polars' ``(x * 10^d).round() / 10^d``; ``log(0)`` is ``-inf`` and
  ``log(-1)`` NaN (Spark: null); ``greatest``/``least``/``clip`` skip NaN as Polars does.
  NaN equals NaN and sorts above every number in both runtimes.
* **Nulls.** ``concat_str`` is null if any input is; ``is_in([])`` is null for a null value.
* **Casts** that convert values (numbers narrowing, floats to integers) are ``try_cast``: null
  where a value does not fit, as Polars' non-strict cast. Casts whose text format differs
  between the engines (a float or datetime to ``str``, a ``str`` to anything else, a float to
  or from ``bool``) run Polars' own cast on the executors, through an Arrow UDF, so that
  ``cast("str")`` prints ``1e-7`` exactly as the local runtime does.

Known, documented gaps (neither runtime promises otherwise): ``hash`` differs by design (see
:meth:`ddflow.expr.nodes.Expr.hash`); integer overflow wraps in Polars and raises in Spark's
ANSI mode; ``exp``, ``log``, ``log1p`` and ``**`` use Java's ``StrictMath``, which can differ
from the platform's ``libm`` in the last bit.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from ddflow.errors import ExpressionError
from ddflow.expr.compiler import _Checker, _PolarsCompiler
from ddflow.expr.nodes import ExprVisitor, output_dtype
from ddflow.schema import DType, Schema

if TYPE_CHECKING:
    from ddflow.expr.nodes import Expr

__all__ = ["SparkCompiled", "arrow_type", "compile_spark", "spark_type_name"]

_NAN = float("nan")
_INF = float("inf")
_EXACT = float(2**52)  # every double at least this large is an integer
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
_ARROW_TYPES: dict[str, pa.DataType] = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "date": pa.date32(),
    "timestamp_ntz": pa.timestamp("us"),
}


@dataclass(frozen=True)
class SparkCompiled:
    """A compiled expression: the Spark column and the output name (None for a predicate)."""

    name: str | None
    column: Column


def spark_type_name(dtype: pl.DataType) -> str:
    """The Spark SQL type name that stores a Polars dtype of a ddflow type.

    >>> spark_type_name(pl.Int32()), spark_type_name(pl.Datetime("us"))
    ('int', 'timestamp_ntz')
    """
    return DType.from_polars(dtype).spark_type_name


def arrow_type(spark_name: str) -> pa.DataType:
    """The Arrow type Spark exchanges for a Spark SQL type name.

    >>> arrow_type("bigint"), arrow_type("array<string>")
    (DataType(int64), ListType(list<item: string>))
    """
    if spark_name.startswith("array<") and spark_name.endswith(">"):
        return pa.list_(arrow_type(spark_name[6:-1]))
    return _ARROW_TYPES[spark_name]


def compile_spark(expr: Expr, schema: Schema, name: str | None = None) -> SparkCompiled:
    """Check ``expr`` against ``schema`` and compile it to a Spark column of Polars' output type.

    ``name`` names the column (a select's output name); a predicate is left unnamed. A node
    the Spark runtime cannot compile is an :class:`~ddflow.errors.ExpressionError` naming it.
    """
    compiler = _SparkCompiler(schema, expr)
    try:
        column = compiler.visit(expr)
    except NotImplementedError as e:
        raise ExpressionError(
            f"the Spark runtime cannot compile {expr!r}: {e}", site=expr.site
        ) from None
    column = column.cast(output_dtype(expr, schema).spark_type_name)
    return SparkCompiled(name, column if name is None else column.alias(name))


# ---------------------------------------------------------------------- helpers


def _lit(value: Any, dtype: DType | None = None) -> Column:
    """A Spark literal of the value, typed as the local runtime types it."""
    if isinstance(value, _dt.datetime):
        column = F.lit(value.isoformat(sep=" ")).cast("timestamp_ntz")
    elif isinstance(value, bool) or value is None:
        column = F.lit(value)
    elif isinstance(value, int):
        column = F.lit(value).cast("bigint")
    else:
        column = F.lit(value)
    return column if dtype is None else column.cast(dtype.spark_type_name)


def _wrap32(x: Column) -> Column:
    """A bigint wrapped around into int32, as int32 arithmetic overflows in Polars."""
    return (F.pmod(x + 2**31, F.lit(2**32).cast("bigint")) - 2**31).cast("int")


def _is_float(dtype: pl.DataType) -> bool:
    return dtype in (pl.Float32(), pl.Float64())


def _ieee_div(a: Column, b: Column) -> Column:
    """``a / b`` on doubles with IEEE results for a zero divisor (Spark gives null there)."""
    # Spark's comparisons and atan2 do not tell -0.0 from 0.0; its text does
    negative_zero = b.cast("string") == F.lit("-0.0")
    infinite = F.when(a > 0, F.lit(_INF)).otherwise(F.lit(-_INF))
    by_zero = (
        F.when(F.isnan(a) | (a == 0.0), F.lit(_NAN))
        .when(negative_zero, -infinite)
        .otherwise(infinite)
    )
    return (
        F.when(a.isNull() | b.isNull(), F.lit(None).cast("double"))
        .when(b == 0.0, by_zero)
        .otherwise(a / b)
    )


def _keep_zero_sign(result: Column, x: Column) -> Column:
    """A rounding result of zero takes the sign of its input (Rust's floor/ceil/round do)."""
    return F.when(result == 0.0, x * 0.0).otherwise(result)


def _float_floor(x: Column) -> Column:
    """``floor`` of a double that stays a double (Spark's ``floor`` returns a bigint)."""
    whole = F.isnan(x) | (F.abs(x) >= _EXACT)
    return _keep_zero_sign(F.when(whole, x).otherwise(F.floor(x).cast("double")), x)


def _float_ceil(x: Column) -> Column:
    whole = F.isnan(x) | (F.abs(x) >= _EXACT)
    return _keep_zero_sign(F.when(whole, x).otherwise(F.ceil(x).cast("double")), x)


def _round_half_away(y: Column) -> Column:
    """Rust's ``f64::round``: to the nearest integer, halves away from zero."""
    t = y.try_cast("bigint").cast("double")  # truncation, exact below 2**52
    rounded = F.when(F.abs(y - t) >= 0.5, t + F.signum(y)).otherwise(t)
    whole = F.isnan(y) | (F.abs(y) >= _EXACT)
    return _keep_zero_sign(F.when(whole, y).otherwise(rounded), y)


def _powi(base: float, n: int) -> float:
    """``base ** n`` as Rust's ``f64::powi`` computes it (repeated squaring)."""
    result = 1.0
    while True:
        if n & 1:
            result *= base
        n //= 2
        if n == 0:
            return result
        base *= base


def _finite(x: Column) -> Column:
    return ~F.isnan(x) & (F.abs(x) != _INF)


def _round(x: Column, dtype: pl.DataType, decimals: int) -> Column:
    """Polars' ``round(decimals, mode="half_away_from_zero")`` (see polars-ops round.rs)."""
    if not _is_float(dtype):
        return x
    f32 = dtype == pl.Float32()
    if decimals == 0:
        out = _round_half_away(x.cast("double"))
        return out.cast("float") if f32 else out
    if decimals >= 326:
        return x
    m = _powi(10.0, decimals)
    if f32:  # computed on doubles, then narrowed
        ret = (_round_half_away(x.cast("double") * m) / m).cast("float")
    else:
        ret = _round_half_away(x * m) / m
    return F.when(_finite(ret), ret).otherwise(x)


def _ieee_less(a: Column, b: Column, floats: bool) -> Column:
    """``a < b`` false whenever a NaN is involved (Spark orders NaN above every number)."""
    less = a < b
    return (less & ~F.isnan(a) & ~F.isnan(b)) if floats else less


def _nan_as_null(x: Column) -> Column:
    return F.when(F.isnan(x), F.lit(None)).otherwise(x)


def _polars_cast_udf(x: Column, source: pl.DataType, target: pl.DataType) -> Column:
    """Polars' non-strict cast, run on the executors (exact text formats and parsing)."""
    spark_name = spark_type_name(target)
    out_type = arrow_type(spark_name)

    def cast(values: pa.Array) -> pa.Array:
        series = pl.Series(values=values).cast(source).cast(target, strict=False)
        return series.to_arrow().cast(out_type)

    from pyspark.sql.functions import ArrowUDFType

    udf = F.arrow_udf(cast, spark_name, ArrowUDFType.SCALAR)
    return udf(x)


def _polars_udf(
    fn: Callable[..., pl.Series], args: Sequence[tuple[Column, pl.DataType]], target: pl.DataType
) -> Column:
    """``fn`` of the arguments as Polars Series of their Polars types, on the executors."""
    spark_name = spark_type_name(target)
    out_type = arrow_type(spark_name)
    types = [t for _, t in args]

    def apply(*arrays: pa.Array) -> pa.Array:
        series = [pl.Series(values=a).cast(t) for a, t in zip(arrays, types, strict=True)]
        return fn(*series).cast(target).to_arrow().cast(out_type)

    from pyspark.sql.functions import ArrowUDFType

    udf = F.arrow_udf(apply, spark_name, ArrowUDFType.SCALAR)
    return udf(*[c for c, _ in args])


def _exp(s: pl.Series) -> pl.Series:
    return s.exp()


def _log(s: pl.Series) -> pl.Series:
    return s.log()


def _log1p(s: pl.Series) -> pl.Series:
    return s.log1p()


def _pow(a: pl.Series, b: pl.Series) -> pl.Series:
    return a**b


def _needs_polars_cast(source: pl.DataType, target: pl.DataType) -> bool:
    s, t = DType.from_polars(source).kind, DType.from_polars(target).kind
    if s == t:
        return False
    if s == "str" or (t == "str" and s in ("float", "datetime")):
        return True
    return {s, t} == {"float", "bool"}


# ---------------------------------------------------------------------- the compiler


class _SparkCompiler(ExprVisitor[Column]):
    """Compiles one checked expression tree into one Spark column.

    Each node's column has the Polars type of the node as the Polars compilation of the whole
    tree resolves it (literals typed by their context included); ``ptype`` reads it from
    Polars, and parents cast their operands into the type Polars computes in.
    """

    def __init__(self, schema: Schema, root: Expr) -> None:
        super().__init__()
        self.schema = schema
        self.checker = _Checker(schema)
        self.checker.visit(root)
        self.polars = _PolarsCompiler(self.checker, root)
        self._frame = pl.LazyFrame(schema=schema.polars_schema())
        self._types: dict[int, pl.DataType] = {}

    # ------------------------------------------------------------------ types

    def _resolve(self, expr: pl.Expr) -> pl.DataType:
        return self._frame.select(expr.alias("v")).collect_schema()["v"]

    def ptype(self, e: Expr) -> pl.DataType:
        """The Polars type of node ``e``."""
        hit = self._types.get(id(e))
        if hit is None:
            hit = self._resolve(self.polars.visit(e))
            self._types[id(e)] = hit
        return hit

    def _cast(self, e: Expr, dtype: pl.DataType) -> Column:
        """Node ``e`` compiled and converted to ``dtype`` (a widening, or a literal's type)."""
        column = self.visit(e)
        if dtype == pl.Null() or self.ptype(e) == dtype:
            return column
        return column.cast(spark_type_name(dtype))

    def _operands(self, e: Expr, dtype: pl.DataType) -> list[Column]:
        return [self._cast(a, dtype) for a in e.args]

    def _fail(self, e: Expr, what: str) -> ExpressionError:
        return ExpressionError(f"the Spark runtime cannot compute {e!r}: {what}", site=e.site)

    # ------------------------------------------------------------------ leaves

    def visit_col(self, e: Expr) -> Column:
        return F.col(e.params[0])

    def visit_lit(self, e: Expr) -> Column:
        # untyped numbers are bigint or double here; parents cast them where Polars types
        # them by their context
        value, dtype = e.params
        return _lit(value, dtype)

    # ------------------------------------------------------------------ operators

    def visit_binary(self, e: Expr) -> Column:
        op = e.params[0]
        left, right = e.args
        if op in ("&", "|"):
            a, b = (self.visit(x) for x in e.args)
            return (a & b) if op == "&" else (a | b)
        if op == "^":
            a, b = (self.visit(x) for x in e.args)
            return a != b  # null if either is null, as Polars' xor
        if op in _COMPARISONS:
            return self._compare(e, op)
        dtype = self.ptype(e)
        if op in ("+", "-", "*"):
            a, b = self._operands(e, dtype)
            if dtype == pl.Int32():  # Polars wraps around on overflow: compute wide, wrap
                a, b = a.cast("bigint"), b.cast("bigint")
                return _wrap32({"+": a + b, "-": a - b, "*": a * b}[op])
            return {"+": a + b, "-": a - b, "*": a * b}[op]
        if op == "/":
            a, b = (c.cast("double") for c in self._operands(e, dtype))
            return _ieee_div(a, b).cast(spark_type_name(dtype))
        if op == "**":  # Java's StrictMath.pow is not the platform's pow: run Polars'
            base_type = self.ptype(left)
            if not _is_float(base_type):
                base_type = pl.Float64()
            base = self._cast(left, base_type)
            return _polars_udf(
                _pow, [(base, base_type), (self.visit(right), self.ptype(right))], dtype
            )
        a, b = self._operands(e, dtype)
        if _is_float(dtype):
            return self._float_divmod(op, a, b, dtype)
        return self._int_divmod(op, a, b, dtype)

    def _int_divmod(self, op: str, a: Column, b: Column, dtype: pl.DataType) -> Column:
        # Spark truncates; Polars rounds toward negative infinity; by zero is null in both
        # (guarded, as ANSI mode raises)
        name = spark_type_name(dtype)
        if dtype == pl.Int32():
            a, b = a.cast("bigint"), b.cast("bigint")
            return _wrap32(self._int_divmod(op, a, b, pl.Int64()))
        safe = b != 0
        rem = F.when(safe, a % b)
        adjust = (rem != 0) & ((rem < 0) != (b < 0))
        if op == "%":
            return F.when(safe, F.when(adjust, rem + b).otherwise(rem)).cast(name)
        quotient = F.call_function("div", a, b)
        return F.when(safe, F.when(adjust, quotient - 1).otherwise(quotient)).cast(name)

    def _float_divmod(self, op: str, a: Column, b: Column, dtype: pl.DataType) -> Column:
        name = spark_type_name(dtype)

        def typed(x: Column) -> Column:  # round each step to float32 when computing in it
            return x.cast(name).cast("double") if name == "float" else x

        a, b = a.cast("double"), b.cast("double")
        floor = typed(_float_floor(typed(_ieee_div(a, b))))
        if op == "//":
            return floor.cast(name)
        return typed(a - typed(b * floor)).cast(name)

    def _compare(self, e: Expr, op: str) -> Column:
        left, right = e.args
        lt, rt = self.ptype(left), self.ptype(right)
        if lt.is_numeric() and rt.is_numeric():
            common = self._resolve(self.polars.visit(left) + self.polars.visit(right))
            a, b = self._cast(left, common), self._cast(right, common)
        else:
            a, b = self.visit(left), self.visit(right)
        return {
            "==": lambda: a == b,
            "!=": lambda: a != b,
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
        }[op]()

    def visit_unary(self, e: Expr) -> Column:
        x = self.visit(e.args[0])
        op = e.params[0]
        if op == "~":
            return ~x
        if self.ptype(e.args[0]) == pl.Int32():  # -(-2**31) wraps around in Polars
            wide = x.cast("bigint")
            return _wrap32(-wide if op == "-" else F.abs(wide))
        return -x if op == "-" else F.abs(x)

    def visit_alias(self, e: Expr) -> Column:
        return self.visit(e.args[0])

    def visit_cast(self, e: Expr) -> Column:
        (inner,) = e.args
        source, target = self.ptype(inner), e.params[0].polars
        x = self.visit(inner)
        if source == target:
            return x
        if source == pl.Null():
            return x.cast(spark_type_name(target))
        if _needs_polars_cast(source, target):
            return _polars_cast_udf(x, source, target)
        return x.try_cast(spark_type_name(target))

    def visit_when(self, e: Expr) -> Column:
        dtype = self.ptype(e)
        has_otherwise = e.params[0]
        pairs = e.args[:-1] if has_otherwise else e.args
        chain: Any = None
        for condition, value in zip(pairs[0::2], pairs[1::2], strict=True):
            c, v = self.visit(condition), self._cast(value, dtype)
            chain = F.when(c, v) if chain is None else chain.when(c, v)
        if has_otherwise:
            return chain.otherwise(self._cast(e.args[-1], dtype))  # type: ignore[no-any-return]
        return chain  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ functions

    def visit_function(self, e: Expr) -> Column:
        name = e.params[0]
        method = _FUNCTIONS.get(name)
        if method is None:
            raise self._fail(e, f"the function {name!r} has no Spark compilation")
        return method(self, e)

    def _unary_float(self, e: Expr, fn: Callable[[Column], Column]) -> Column:
        dtype = self.ptype(e)
        x = self.visit(e.args[0]).cast("double")
        return (
            F.when(x.isNull(), F.lit(None).cast("double"))
            .otherwise(fn(x))
            .cast(spark_type_name(dtype))
        )

    def _f_is_null(self, e: Expr) -> Column:
        return self.visit(e.args[0]).isNull()

    def _f_is_not_null(self, e: Expr) -> Column:
        return self.visit(e.args[0]).isNotNull()

    def _f_fill_null(self, e: Expr) -> Column:
        return F.coalesce(*self._operands(e, self.ptype(e)))

    def _f_coalesce(self, e: Expr) -> Column:
        return F.coalesce(*self._operands(e, self.ptype(e)))

    def _f_round(self, e: Expr) -> Column:
        x = e.args[0]
        return _round(self.visit(x), self.ptype(x), e.params[1])

    def _f_floor(self, e: Expr) -> Column:
        return self._float_rounding(e, _float_floor)

    def _f_ceil(self, e: Expr) -> Column:
        return self._float_rounding(e, _float_ceil)

    def _float_rounding(self, e: Expr, fn: Callable[[Column], Column]) -> Column:
        dtype = self.ptype(e.args[0])
        x = self.visit(e.args[0])
        if not _is_float(dtype):
            return x
        return fn(x.cast("double")).cast(spark_type_name(dtype))

    def _f_sqrt(self, e: Expr) -> Column:
        return self._unary_float(e, F.sqrt)

    # exp and the logarithms: Spark's (Java's StrictMath) differ from the platform's libm in
    # the last bit for common inputs (exp(1), log(3)), and Spark's log is null at and below
    # zero: Polars computes them, on the executors
    def _transcendental(self, e: Expr, fn: Callable[[pl.Series], pl.Series]) -> Column:
        (x,) = e.args
        return _polars_udf(fn, [(self.visit(x), self.ptype(x))], self.ptype(e))

    def _f_exp(self, e: Expr) -> Column:
        return self._transcendental(e, _exp)

    def _f_log(self, e: Expr) -> Column:
        return self._transcendental(e, _log)

    def _f_log1p(self, e: Expr) -> Column:
        return self._transcendental(e, _log1p)

    def _f_clip(self, e: Expr) -> Column:
        # Polars: v < lo ? lo : v > hi ? hi : v, comparisons false on NaN; a null bound is none
        dtype = self.ptype(e)
        x, *bounds = self._operands(e, dtype)
        has_lower, has_upper = e.params[1], e.params[2]
        lower = bounds.pop(0) if has_lower else None
        upper = bounds.pop(0) if has_upper else None
        floats = _is_float(dtype)
        chain = F.when(x.isNull(), x)
        if lower is not None:
            chain = chain.when(lower.isNotNull() & _ieee_less(x, lower, floats), lower)
        if upper is not None:
            chain = chain.when(upper.isNotNull() & _ieee_less(upper, x, floats), upper)
        return chain.otherwise(x)

    def _f_hash(self, e: Expr) -> Column:
        # runtime-specific by design (see Expr.hash): Spark's xxhash64, seeded by the seed
        return F.xxhash64(F.lit(e.params[1]).cast("bigint"), self.visit(e.args[0]))

    def _f_is_in(self, e: Expr) -> Column:
        values: tuple[Any, ...] = e.params[1]
        x = self.visit(e.args[0])
        if not values:
            return F.when(x.isNull(), F.lit(None).cast("boolean")).otherwise(F.lit(False))
        kinds = {self._kind(self.ptype(e.args[0]))} | {_py_kind(v) for v in values}
        if kinds <= {"int"}:
            target = "bigint"
        elif kinds <= {"int", "float"}:
            target = "double"
        else:
            target = None
        if target is not None:
            return x.cast(target).isin([_lit(v).cast(target) for v in values])
        return x.isin([_lit(v) for v in values])

    @staticmethod
    def _kind(dtype: pl.DataType) -> str:
        if dtype == pl.Null():
            return "null"
        return DType.from_polars(dtype).kind

    def _f_str_lower(self, e: Expr) -> Column:
        return F.lower(self.visit(e.args[0]))

    def _f_str_upper(self, e: Expr) -> Column:
        return F.upper(self.visit(e.args[0]))

    def _f_str_len(self, e: Expr) -> Column:
        return F.char_length(self.visit(e.args[0])).cast("bigint")

    def _f_str_contains(self, e: Expr) -> Column:
        return self.visit(e.args[0]).contains(F.lit(e.params[1]))

    def _f_str_starts_with(self, e: Expr) -> Column:
        return self.visit(e.args[0]).startswith(F.lit(e.params[1]))

    def _f_str_ends_with(self, e: Expr) -> Column:
        return self.visit(e.args[0]).endswith(F.lit(e.params[1]))

    def _f_dt_year(self, e: Expr) -> Column:
        return F.year(self.visit(e.args[0]))

    def _extreme(self, e: Expr, spark_fn: Callable[..., Column]) -> Column:
        # both skip nulls; Polars also skips NaN unless every input is NaN or null
        dtype = self.ptype(e)
        args = self._operands(e, dtype)
        if len(args) == 1:
            return args[0]
        if not _is_float(dtype):
            return spark_fn(*args)
        best = spark_fn(*[_nan_as_null(a) for a in args])
        any_nan = F.lit(False)
        for a in args:
            any_nan = any_nan | F.coalesce(F.isnan(a), F.lit(False))
        return F.coalesce(best, F.when(any_nan, F.lit(_NAN).cast(spark_type_name(dtype))))

    def _f_least(self, e: Expr) -> Column:
        return self._extreme(e, F.least)

    def _f_greatest(self, e: Expr) -> Column:
        return self._extreme(e, F.greatest)

    def _f_concat_str(self, e: Expr) -> Column:
        separator = e.params[1]
        parts: list[Column] = []
        for i, a in enumerate(e.args):
            dtype = self.ptype(a)
            x = self.visit(a)
            if dtype == pl.Null():
                x = x.cast("string")
            elif dtype != pl.String():
                x = (
                    _polars_cast_udf(x, dtype, pl.String())
                    if _needs_polars_cast(dtype, pl.String())
                    else x.cast("string")
                )
            if i and separator:
                parts.append(F.lit(separator))
            parts.append(x)
        return F.concat(*parts)  # null if any part is null, as Polars' concat_str


def _py_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "datetime" if isinstance(value, _dt.datetime) else "date"


_FUNCTIONS: dict[str, Callable[[_SparkCompiler, Expr], Column]] = {
    "is_null": _SparkCompiler._f_is_null,
    "is_not_null": _SparkCompiler._f_is_not_null,
    "fill_null": _SparkCompiler._f_fill_null,
    "is_in": _SparkCompiler._f_is_in,
    "hash": _SparkCompiler._f_hash,
    "round": _SparkCompiler._f_round,
    "floor": _SparkCompiler._f_floor,
    "ceil": _SparkCompiler._f_ceil,
    "sqrt": _SparkCompiler._f_sqrt,
    "log": _SparkCompiler._f_log,
    "log1p": _SparkCompiler._f_log1p,
    "exp": _SparkCompiler._f_exp,
    "clip": _SparkCompiler._f_clip,
    "str.lower": _SparkCompiler._f_str_lower,
    "str.upper": _SparkCompiler._f_str_upper,
    "str.len": _SparkCompiler._f_str_len,
    "str.contains": _SparkCompiler._f_str_contains,
    "str.starts_with": _SparkCompiler._f_str_starts_with,
    "str.ends_with": _SparkCompiler._f_str_ends_with,
    "dt.year": _SparkCompiler._f_dt_year,
    "least": _SparkCompiler._f_least,
    "greatest": _SparkCompiler._f_greatest,
    "coalesce": _SparkCompiler._f_coalesce,
    "concat_str": _SparkCompiler._f_concat_str,
}


def columns_of(compiled: Sequence[SparkCompiled]) -> list[Column]:
    """The columns of compiled expressions, in order."""
    return [c.column for c in compiled]
