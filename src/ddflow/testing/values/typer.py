"""Types of column expressions inferred without data (:func:`output_type`), by the rules below:
the documented semantics of :mod:`ddflow.expr.nodes` and :mod:`ddflow.schema`, and the local
runtime's behaviour where those were silent (see :mod:`ddflow.testing.values`).

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
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from ddflow.expr.nodes import Expr
from ddflow.schema import DType, Schema
from ddflow.testing.values.arithmetic import _INT_RANGE
from ddflow.testing.values.errors import ValueRuleError

__all__ = ["output_type"]


_NUMERIC = ("int32", "int64", "float32", "float64")


_PASS_THROUGH = ("fill_null", "clip", "round", "floor", "ceil", "least", "greatest", "coalesce")
_ARITHMETIC = ("+", "-", "*", "/", "//", "%", "**")
_COMPARISON = ("==", "!=", "<", "<=", ">", ">=")


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
    of this module (it agrees with :func:`ddflow.expr.nodes.output_dtype`).

    >>> from ddflow.expr.nodes import col
    >>> s = Schema({"x": "int32", "f": "float32"})
    >>> output_type(col("x") + 1, s), output_type(col("f") / 2, s), output_type(col("x") // 2, s)
    (DType('int32'), DType('float64'), DType('int32?'))
    """
    t = _Typer(expr, schema).types[id(expr)]
    if t.name == "null":
        raise ValueRuleError(f"{expr!r} is always null and has no type")
    return DType(t.name, t.nullable)
