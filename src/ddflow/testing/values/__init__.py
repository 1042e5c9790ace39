"""Column expressions evaluated, and user values converted to column types, in plain Python.

The reference interpreter (:mod:`ddflow.testing.reference`) must not lean on the engine it
judges: this package shares no code with it. It reads expression trees only through ``kind``,
``args`` and ``params`` (:class:`ddflow.expr.nodes.Expr`) and schemas only through their names and
types; it imports neither Polars nor NumPy nor :mod:`ddflow.expr.compiler`. A rule stated in
its modules is the documented semantics of :mod:`ddflow.expr.nodes`, :mod:`ddflow.expr.compiler`
and :mod:`ddflow.schema`; where those were silent, the local runtime's behaviour was determined
by experiment and written down (here and in :mod:`ddflow.expr.compiler`, "Value rules").

The rules, one concept a module (each states its rules):

* :mod:`~ddflow.testing.values.typer`: every node's type, inferred without data
  (:func:`output_type`), and the common type operands are combined in;
* :mod:`~ddflow.testing.values.evaluation`: the values of an expression on a record
  (:func:`evaluate`, :func:`evaluator`), null propagation, wrap-around, IEEE floats and the
  functions;
* :mod:`~ddflow.testing.values.arithmetic`: the numbers of the ddflow types in plain Python
  (``float32`` rounding, integer widths, IEEE division, the C library's functions);
* :mod:`~ddflow.testing.values.casts`: conversions between types, casts to and from text;
* :mod:`~ddflow.testing.values.records`: a row function's result as the record the engine
  stores (:func:`conform`);
* :mod:`~ddflow.testing.values.errors`: :class:`ValueRuleError`, for a value no rule gives.

>>> from ddflow.expr.nodes import col
>>> from ddflow.schema import Schema
>>> s = Schema({"x": "int32", "f": "float32?"})
>>> row = conform(s, (2**31 - 1, 0.1))  # the record as stored: 0.1 rounded to float32
>>> evaluate(col("x") + 1, s, row), evaluate(col("f") == 0.1, s, row)
(-2147483648, True)
>>> conform(Schema({"w": "float32"}), 0.1)
(0.10000000149011612,)
"""

from __future__ import annotations

from ddflow.testing.values.errors import ValueRuleError
from ddflow.testing.values.evaluation import evaluate, evaluator
from ddflow.testing.values.records import conform
from ddflow.testing.values.typer import output_type

__all__ = ["ValueRuleError", "conform", "evaluate", "evaluator", "output_type"]
